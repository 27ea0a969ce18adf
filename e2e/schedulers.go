// Package e2e runs the sharing-affinity end-to-end test and benchmark against a real control
// plane (package controlplane). See README.md.
package e2e

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"

	"sigs.k8s.io/yaml"

	"sharing-affinity/e2e/controlplane"
)

// SchedulerUnderTest is a scheduler binary and how to run it.
type SchedulerUnderTest struct {
	// Name names the subtest and the log file.
	Name string
	// Binary, Config (KubeSchedulerConfiguration, {{KUBECONFIG}} replaced) and Args.
	Binary string
	Config string
	Args   []string
	// Dir is the working directory ("" is the control plane's temporary directory).
	Dir string
	// SchedulerName is the profile's schedulerName, which the test pods ask for.
	SchedulerName string
	// SharingAffinity: the scheduler keeps the sharing-affinity rule (equal subnets share a
	// NIC, unequal never do); the in-tree scheduler does not know it.
	SharingAffinity bool
	// Missing explains why the scheduler cannot run (binary or configuration not found).
	Missing string
}

// Spec is the controlplane form.
func (s SchedulerUnderTest) Spec() controlplane.Scheduler {
	return controlplane.Scheduler{Name: s.Name, Binary: s.Binary, Config: s.Config, Args: s.Args, Dir: s.Dir}
}

// RepoRoot is the repository's root (the parent of e2e/).
func RepoRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Dir(filepath.Dir(file))
}

// InTreeScheduler is kube-scheduler v1.37.2 from e2e/.bin.
func InTreeScheduler(binDir string) SchedulerUnderTest {
	s := SchedulerUnderTest{
		Name:          "kube-scheduler",
		Binary:        filepath.Join(binDir, "kube-scheduler"),
		Config:        controlplane.DefaultSchedulerConfig,
		Args:          []string{"--feature-gates=" + controlplane.FeatureGates, "-v=2"},
		SchedulerName: "default-scheduler",
	}
	if _, err := os.Stat(s.Binary); err != nil {
		s.Missing = s.Binary + " not built (run e2e/build.sh)"
	}
	return s
}

// AuditConfig is the sharing-affinity plugin configuration with the subnet extractor of the
// test's NICs, for `sharing-affinity audit --config` (the API server drops
// ResourceSlice.spec.sharingAffinity, so extractors come from configuration).
const AuditConfig = `{"sharingAffinity": [{"driver": "net.example.com",
  "selector": {"cel": {"expression": "device.attributes[\"net.example.com\"].type == \"nic\""}},
  "cel": {"subnet": "object.apiVersion == \"net.example.com/v1\" && object.kind == \"NICConfig\" ? object.subnet : \"\""}}]}
`

// AuditCLI is the sharing-affinity CLI that audits dumps: SA_AUDIT_BIN, else
// target/release/sharing-affinity; "" when it is not built.
func AuditCLI() string {
	cli := os.Getenv("SA_AUDIT_BIN")
	if cli == "" {
		cli = filepath.Join(RepoRoot(), "target", "release", "sharing-affinity")
	}
	if _, err := os.Stat(cli); err != nil {
		return ""
	}
	return cli
}

// Audit runs `CLI audit FILE ARGS...` and returns its exit code and output (3: a rule broken,
// such as a device booked beyond its capacity or a lock shared across affinity values).
func Audit(cli, file string, args ...string) (int, string, error) {
	out, err := exec.Command(cli, append([]string{"audit", file}, args...)...).CombinedOutput()
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		return ee.ExitCode(), string(out), nil
	case err != nil:
		return 0, "", fmt.Errorf("%s audit %s: %w", cli, file, err)
	}
	return 0, string(out), nil
}

// Schedulers are the schedulers under test: the in-tree baseline and sharing-affinity-scheduler.
func Schedulers(binDir string) []SchedulerUnderTest {
	return []SchedulerUnderTest{InTreeScheduler(binDir), SharingAffinityScheduler()}
}

// SharingAffinityScheduler is sharing-affinity-scheduler (scheduler/, kube-scheduler v1.33.4 with
// the KSWE plugin running our guest) with its configuration from deploy/.
//
//	SA_SCHEDULER_BIN      the binary (default: the first of scheduler/sharing-affinity-scheduler,
//	                      scheduler/bin/sharing-affinity-scheduler that exists)
//	SA_SCHEDULER_CONFIG   its KubeSchedulerConfiguration (default: deploy/config.yaml, else the first YAML
//	                      file under deploy/ that holds one), adapted by AdaptSchedulerConfig
//	SA_SCHEDULER_ARGS     extra arguments, space-separated (e.g. -v=2)
//	SA_SCHEDULER_NAME     the schedulerName of the test pods (default: the first profile's)
func SharingAffinityScheduler() SchedulerUnderTest {
	root := RepoRoot()
	s := SchedulerUnderTest{Name: "sharing-affinity-scheduler", SharingAffinity: true, SchedulerName: "sharing-affinity-scheduler"}
	if n := os.Getenv("SA_SCHEDULER_NAME"); n != "" {
		s.SchedulerName = n
	}
	s.Binary = os.Getenv("SA_SCHEDULER_BIN")
	if s.Binary == "" {
		for _, c := range []string{"scheduler/sharing-affinity-scheduler", "scheduler/bin/sharing-affinity-scheduler"} {
			if _, err := os.Stat(filepath.Join(root, c)); err == nil {
				s.Binary = filepath.Join(root, c)
				break
			}
		}
	}
	if s.Binary == "" {
		s.Missing = "sharing-affinity-scheduler not built (set SA_SCHEDULER_BIN)"
		return s
	}
	cfgPath := os.Getenv("SA_SCHEDULER_CONFIG")
	if cfgPath == "" {
		if _, err := os.Stat(filepath.Join(root, "deploy", "config.yaml")); err == nil {
			cfgPath = filepath.Join(root, "deploy", "config.yaml") // for a checkout: relative guest path
		} else {
			cfgPath = findSchedulerConfig(filepath.Join(root, "deploy"))
		}
	}
	if cfgPath == "" {
		s.Missing = "no KubeSchedulerConfiguration for sharing-affinity-scheduler under deploy/ (set SA_SCHEDULER_CONFIG)"
		return s
	}
	data, err := os.ReadFile(cfgPath)
	if err != nil {
		s.Missing = err.Error()
		return s
	}
	cfg, name, err := AdaptSchedulerConfig(data)
	if err != nil {
		s.Missing = fmt.Sprintf("%s: %v", cfgPath, err)
		return s
	}
	s.Config = cfg
	s.Dir = filepath.Dir(cfgPath) // relative paths in the configuration resolve from there
	if a := os.Getenv("SA_SCHEDULER_ARGS"); a != "" {
		s.Args = strings.Fields(a)
	}
	if os.Getenv("SA_SCHEDULER_NAME") == "" {
		if name == "" {
			name = "default-scheduler"
		}
		s.SchedulerName = name
	}
	return s
}

func findKSC(text string) map[string]any {
	for _, doc := range strings.Split("\n"+text, "\n---") {
		var m map[string]any
		if yaml.Unmarshal([]byte(doc), &m) != nil || m == nil {
			continue
		}
		switch m["kind"] {
		case "KubeSchedulerConfiguration":
			return m
		case "ConfigMap":
			if d, ok := m["data"].(map[string]any); ok {
				for _, v := range d {
					if str, ok := v.(string); ok && strings.Contains(str, "KubeSchedulerConfiguration") {
						if c := findKSC(str); c != nil {
							return c
						}
					}
				}
			}
		}
	}
	return nil
}

// findSchedulerConfig is the first YAML file under dir (in lexical order) holding a
// KubeSchedulerConfiguration, or "".
func findSchedulerConfig(dir string) string {
	found := ""
	_ = filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err != nil || found != "" || d.IsDir() || !(strings.HasSuffix(path, ".yaml") || strings.HasSuffix(path, ".yml")) {
			return nil
		}
		if data, err := os.ReadFile(path); err == nil && strings.Contains(string(data), "kind: KubeSchedulerConfiguration") {
			found = path
		}
		return nil
	})
	return found
}

// AdaptSchedulerConfig makes a deployment's KubeSchedulerConfiguration run against the test's
// control plane: clientConnection.kubeconfig becomes {{KUBECONFIG}}, leader election is off, the
// client is not throttled. It returns the first profile's schedulerName.
//
// data may also be a multi-document YAML file, or a ConfigMap whose data holds the
// configuration (a deployment manifest): the first KubeSchedulerConfiguration found is used.
func AdaptSchedulerConfig(data []byte) (string, string, error) {
	cfg := findKSC(string(data))
	if cfg == nil {
		return "", "", fmt.Errorf("no KubeSchedulerConfiguration in it")
	}
	cc, _ := cfg["clientConnection"].(map[string]any)
	if cc == nil {
		cc = map[string]any{}
	}
	cc["kubeconfig"], cc["qps"], cc["burst"] = "{{KUBECONFIG}}", 5000, 5000
	cfg["clientConnection"] = cc
	le, _ := cfg["leaderElection"].(map[string]any)
	if le == nil {
		le = map[string]any{}
	}
	le["leaderElect"] = false
	cfg["leaderElection"] = le
	name := ""
	if profiles, ok := cfg["profiles"].([]any); ok && len(profiles) > 0 {
		if p, ok := profiles[0].(map[string]any); ok {
			name, _ = p["schedulerName"].(string)
		}
	}
	out, err := yaml.Marshal(cfg)
	return string(out), name, err
}
