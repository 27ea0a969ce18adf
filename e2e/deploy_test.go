package e2e

import (
	"os"
	"path"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"
)

// No container engine runs where this test runs, so deploy/Dockerfile is checked by reading it:
// every stage builds with the commands the README's "Deploy to a cluster" gives, every COPY
// source is in the build context or an output of those commands, and the Deployment and the
// scheduler configuration name the paths, user and image the Dockerfile makes.

// instruction is one Dockerfile instruction, continuation lines joined.
type instruction struct {
	op   string
	args string
}

// stage is one FROM ... AS name and what follows it.
type stage struct {
	name, image string
	ops         []instruction
}

func readDockerfile(t *testing.T, file string) []stage {
	t.Helper()
	raw, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var stages []stage
	for _, line := range joinContinuations(string(raw), "#") {
		op, args, _ := strings.Cut(line, " ")
		op = strings.ToUpper(op)
		if op == "FROM" {
			image, name, _ := strings.Cut(args, " AS ")
			stages = append(stages, stage{name: strings.TrimSpace(name), image: strings.TrimSpace(image)})
			continue
		}
		if len(stages) == 0 {
			t.Fatalf("%s before FROM", op)
		}
		stages[len(stages)-1].ops = append(stages[len(stages)-1].ops, instruction{op, strings.TrimSpace(args)})
	}
	return stages
}

// joinContinuations splits text into logical lines: comments (lines starting with comment) and
// blank lines dropped, lines ending in a backslash joined with the next, runs of spaces made one.
func joinContinuations(text, comment string) []string {
	var out []string
	cur := ""
	for _, line := range strings.Split(text, "\n") {
		trimmed := strings.TrimSpace(line)
		if cur == "" && (trimmed == "" || strings.HasPrefix(trimmed, comment)) {
			continue
		}
		if strings.HasSuffix(trimmed, "\\") {
			cur += strings.TrimSuffix(trimmed, "\\") + " "
			continue
		}
		out = append(out, strings.Join(strings.Fields(cur+trimmed), " "))
		cur = ""
	}
	return out
}

// command is one build command of the README: run in dir (relative to the checkout).
type command struct {
	dir, line string
}

// readmeDeployCommands are the commands of the first sh block of the README's "Deploy to a
// cluster", with `(cd DIR && CMD)` split.
func readmeDeployCommands(t *testing.T) []command {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(RepoRoot(), "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, section, found := strings.Cut(string(raw), "\n## Deploy to a cluster\n")
	_, block, found2 := strings.Cut(section, "```sh\n")
	block, _, found3 := strings.Cut(block, "```")
	if !found || !found2 || !found3 {
		t.Fatal("README.md: no sh block under ## Deploy to a cluster")
	}
	var out []command
	sub := regexp.MustCompile(`^\(cd (\S+) && (.*)\)$`)
	for _, line := range joinContinuations(block, "#") {
		line, _, _ = strings.Cut(line, " # ")
		line = strings.TrimSpace(line)
		if m := sub.FindStringSubmatch(line); m != nil {
			out = append(out, command{m[1], m[2]})
		} else {
			out = append(out, command{"", line})
		}
	}
	return out
}

// output is the file a command writes with -o, or "".
func output(line string) string {
	f := strings.Fields(line)
	for i := 0; i+1 < len(f); i++ {
		if f[i] == "-o" {
			return f[i+1]
		}
	}
	return ""
}

func TestDockerfileBuildsWithTheREADMECommandsAndMatchesTheDeployment(t *testing.T) {
	root := RepoRoot()
	stages := readDockerfile(t, filepath.Join(root, "deploy", "Dockerfile"))
	commands := readmeDeployCommands(t)
	byName := map[string]*stage{}
	for i := range stages {
		byName[stages[i].name] = &stages[i]
	}
	pinned := regexp.MustCompile(`@sha256:[0-9a-f]{64}$|:\d+\.\d+\.\d+(-[a-z]+)?$|^gcr\.io/distroless/[a-z]+-debian\d+:nonroot$`)
	for _, s := range stages {
		if !pinned.MatchString(s.image) {
			t.Errorf("FROM %s: not pinned (a digest, a full version tag, or distroless's Debian release)", s.image)
		}
	}

	// Where main/ (the checkout) lands in each stage, and the outputs of its README commands.
	locals := goModLocalReplaces(t, filepath.Join(root, "scheduler", "go.mod"), "main/scheduler")
	outputs := map[string]map[string]bool{}
	ran := map[string]bool{}
	for _, s := range stages {
		workdir, checkout := "/", ""
		outputs[s.name] = map[string]bool{}
		for _, in := range s.ops {
			switch in.op {
			case "WORKDIR":
				workdir = resolve(workdir, in.args)
			case "COPY":
				f := strings.Fields(in.args)
				if strings.HasPrefix(f[0], "--from=") {
					from := byName[strings.TrimPrefix(f[0], "--from=")]
					if from == nil || !outputs[from.name][f[1]] {
						t.Errorf("COPY %s: not an output of the README's commands in stage %s (%v)", in.args, strings.TrimPrefix(f[0], "--from="), outputs[strings.TrimPrefix(f[0], "--from=")])
					}
					continue
				}
				src, dst := path.Clean(f[0]), resolve(workdir, f[1])
				switch {
				case src == "main" || strings.HasPrefix(src, "main/"):
					if _, err := os.Stat(filepath.Join(root, strings.TrimPrefix(src, "main"))); err != nil {
						t.Errorf("COPY %s: %v", in.args, err)
					}
					// The checkout keeps its layout (go.mod's replace paths are relative).
					sub := strings.TrimPrefix(src, "main")
					if at := strings.TrimSuffix(dst, sub); !strings.HasSuffix(dst, sub) || checkout != "" && at != checkout {
						t.Errorf("COPY %s: to %s, out of the checkout's layout (at %s)", in.args, dst, checkout)
					} else {
						checkout = at
					}
				case !locals[src]:
					t.Errorf("COPY %s: outside the checkout and not a replace target of scheduler/go.mod (%v)", in.args, locals)
				}
				delete(locals, src)
			case "RUN":
				for _, part := range strings.Split(in.args, " && ") {
					part = strings.TrimSpace(part)
					for _, c := range commands {
						if part != c.line {
							continue
						}
						if want := path.Join(checkout, c.dir); workdir != want {
							t.Errorf("RUN %s: in %s, the README runs it in %s", part, workdir, want)
						}
						ran[c.line] = true
						if o := output(c.line); o != "" {
							outputs[s.name][path.Join(workdir, o)] = true
						}
					}
				}
			}
		}
	}
	for src := range locals {
		t.Errorf("the Dockerfile does not copy %s, which scheduler/go.mod's replace needs", src)
	}
	for _, c := range commands {
		if strings.HasPrefix(c.line, "cargo build") || strings.HasPrefix(c.line, "wasm-opt") || strings.HasPrefix(c.line, "go build") {
			if !ran[c.line] {
				t.Errorf("the Dockerfile does not run the README's %q", c.line)
			}
		}
		if strings.HasPrefix(c.line, "wasm-opt") {
			for _, flag := range hostWasmOptArgs(t) {
				if !strings.Contains(c.line, " "+flag+" ") {
					t.Errorf("README's wasm-opt lacks the host's %s (host/src/artifact.rs WASM_OPT_ARGS)", flag)
				}
			}
		}
	}

	// The final stage: binary, guest, user, working directory.
	final := stages[len(stages)-1]
	var entrypoint, user, workdir string
	copied := map[string]string{}
	for _, in := range final.ops {
		switch in.op {
		case "ENTRYPOINT":
			entrypoint = strings.Trim(strings.Split(strings.Trim(in.args, "[]"), ",")[0], `" `)
		case "USER":
			user, _, _ = strings.Cut(in.args, ":")
		case "WORKDIR":
			workdir = resolve(path.Join("/", workdir), in.args)
		case "COPY":
			f := strings.Fields(in.args)
			copied[path.Base(f[len(f)-1])] = f[len(f)-1]
		}
	}
	if uid, err := strconv.Atoi(user); err != nil || uid == 0 {
		t.Errorf("final stage USER %q: want a numeric non-root uid", user)
	}
	if entrypoint != copied["sharing-affinity-scheduler"] {
		t.Errorf("ENTRYPOINT %s, but the binary is copied to %s", entrypoint, copied["sharing-affinity-scheduler"])
	}

	var cm corev1.ConfigMap
	readYAML(t, filepath.Join(root, "deploy", "20-config.yaml"), &cm)
	var d appsv1.Deployment
	readYAML(t, filepath.Join(root, "deploy", "30-deployment.yaml"), &d)
	if len(d.Spec.Template.Spec.Containers) != 1 {
		t.Fatalf("%d containers", len(d.Spec.Template.Spec.Containers))
	}
	c := d.Spec.Template.Spec.Containers[0]
	tag := ""
	for _, cmd := range commands {
		if strings.HasPrefix(cmd.line, "docker build") {
			f := strings.Fields(cmd.line)
			for i := range f[:len(f)-1] {
				if f[i] == "-t" {
					tag = f[i+1]
				}
			}
		}
	}
	if c.Image != tag {
		t.Errorf("Deployment image %s, README builds %s", c.Image, tag)
	}
	if len(c.Command) == 0 || c.Command[0] != entrypoint {
		t.Errorf("Deployment command %v, image entrypoint %s", c.Command, entrypoint)
	}
	if c.WorkingDir != workdir {
		t.Errorf("Deployment workingDir %s, image WORKDIR %s", c.WorkingDir, workdir)
	}
	if sc := d.Spec.Template.Spec.SecurityContext; sc == nil || sc.RunAsUser == nil || strconv.FormatInt(*sc.RunAsUser, 10) != user ||
		sc.RunAsNonRoot == nil || !*sc.RunAsNonRoot {
		t.Errorf("Deployment pod securityContext %+v, want runAsNonRoot and runAsUser %s (the image's USER)", sc, user)
	}
	// --config names a key of the ConfigMap where the Deployment mounts it.
	config := ""
	for _, a := range c.Command {
		if v, ok := strings.CutPrefix(a, "--config="); ok {
			config = v
		}
	}
	mounted := ""
	for _, v := range d.Spec.Template.Spec.Volumes {
		if v.ConfigMap != nil && v.ConfigMap.Name == cm.Name {
			for _, m := range c.VolumeMounts {
				if m.Name == v.Name {
					mounted = m.MountPath
				}
			}
		}
	}
	text, ok := cm.Data[path.Base(config)]
	if !ok || path.Dir(config) != mounted {
		t.Fatalf("--config=%s, but ConfigMap %s (keys %v) is mounted at %q", config, cm.Name, keys(cm.Data), mounted)
	}
	// The configuration's guest, resolved from the working directory, is the image's guest.
	guestURL := regexp.MustCompile(`guestURL: file://(\S+)`).FindStringSubmatch(text)
	if guestURL == nil {
		t.Fatal("no guestURL: file://... in the ConfigMap's configuration")
	}
	if guest := path.Join(workdir, guestURL[1]); guest != copied["sharing_affinity_guest.opt.wasm"] {
		t.Errorf("guestURL resolves to %s from %s, the image has the guest at %s", guest, workdir, copied["sharing_affinity_guest.opt.wasm"])
	}
}

// resolve is p from directory dir, as WORKDIR and COPY read it.
func resolve(dir, p string) string {
	if path.IsAbs(p) {
		return path.Clean(p)
	}
	return path.Join(dir, p)
}

// goModLocalReplaces are the directories a go.mod replaces modules with, relative to the build
// context (the checkout's parent), for a go.mod at dir (context-relative).
func goModLocalReplaces(t *testing.T, file, dir string) map[string]bool {
	t.Helper()
	raw, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]bool{}
	for _, m := range regexp.MustCompile(`(?m)=>\s*(\.\.?/\S*)\s*$`).FindAllStringSubmatch(string(raw), -1) {
		out[path.Join(dir, m[1])] = true
	}
	return out
}

// hostWasmOptArgs are the --enable flags of WASM_OPT_ARGS in host/src/artifact.rs.
func hostWasmOptArgs(t *testing.T) []string {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(RepoRoot(), "host", "src", "artifact.rs"))
	if err != nil {
		t.Fatal(err)
	}
	_, rest, _ := strings.Cut(string(raw), "WASM_OPT_ARGS")
	array, _, _ := strings.Cut(rest, "];")
	var out []string
	for _, m := range regexp.MustCompile(`"(--enable-[a-z-]+)"`).FindAllStringSubmatch(array, -1) {
		out = append(out, m[1])
	}
	if len(out) == 0 {
		t.Fatal("host/src/artifact.rs: no --enable flags in WASM_OPT_ARGS")
	}
	return out
}

func readYAML(t *testing.T, file string, into any) {
	t.Helper()
	raw, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.UnmarshalStrict(raw, into); err != nil {
		t.Fatalf("%s: %v", file, err)
	}
}

func keys[V any](m map[string]V) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}
