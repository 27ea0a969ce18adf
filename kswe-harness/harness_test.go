package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/go-logr/logr/funcr"
	"github.com/tetratelabs/wazero"
	"k8s.io/klog/v2"
)

// guestPath is the KSWE guest the workspace's artifact code built ($KSWE_GUEST; the Rust test
// host/tests/kswe_harness.rs sets it).
func guestPath(t *testing.T) string {
	t.Helper()
	guest := os.Getenv("KSWE_GUEST")
	if guest == "" {
		t.Fatal("KSWE_GUEST is not set: run `cargo test --release -p sharing-affinity-host --test kswe_harness`, " +
			"or build the guest (cargo build -p sharing-affinity-guest --target wasm32-unknown-unknown --profile wasm " +
			"--features scheduler-abi --target-dir target/kswe-guest) and set KSWE_GUEST to its .wasm")
	}
	return guest
}

func scenarios(t *testing.T) []string {
	t.Helper()
	dirs, err := filepath.Glob(filepath.Join("..", "testdata", "*", "cluster.json"))
	if err != nil || len(dirs) == 0 {
		t.Fatalf("no scenarios under ../testdata (%v)", err)
	}
	for i, d := range dirs {
		dirs[i] = filepath.Dir(d)
	}
	sort.Strings(dirs)
	return dirs
}

// guestLog records what the guest logs through KSWE's k8s.io/klog module (klog's global logger).
type guestLog struct {
	mu    sync.Mutex
	lines []string
}

func captureKlog(t *testing.T) *guestLog {
	l := &guestLog{}
	klog.SetLogger(funcr.New(func(prefix, args string) {
		l.mu.Lock()
		defer l.mu.Unlock()
		l.lines = append(l.lines, prefix+args)
	}, funcr.Options{}))
	t.Cleanup(klog.ClearLogger)
	return l
}

func (l *guestLog) take() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	lines := l.lines
	l.lines = nil
	return lines
}

// decisions is a report without timing as generic JSON, the form expected.json is compared in.
func decisions(t *testing.T, rep *report) any {
	t.Helper()
	copy := *rep
	copy.Timing = nil
	raw, err := json.Marshal(&copy)
	if err != nil {
		t.Fatal(err)
	}
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		t.Fatal(err)
	}
	return v
}

func expected(t *testing.T, dir string) any {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(dir, "expected.json"))
	if err != nil {
		t.Fatal(err)
	}
	var v map[string]any
	if err := json.Unmarshal(raw, &v); err != nil {
		t.Fatalf("%s/expected.json: %v", dir, err)
	}
	delete(v, "timing")
	return v
}

// firstDifference names the first pod whose decisions differ, with both versions.
func firstDifference(got, want any) string {
	g, _ := got.(map[string]any)
	w, _ := want.(map[string]any)
	gp, _ := g["pods"].([]any)
	wp, _ := w["pods"].([]any)
	for i := 0; i < len(gp) && i < len(wp); i++ {
		if !reflect.DeepEqual(gp[i], wp[i]) {
			a, _ := json.Marshal(gp[i])
			b, _ := json.Marshal(wp[i])
			return fmt.Sprintf("pod %d:\n got:  %s\n want: %s", i, a, b)
		}
	}
	return fmt.Sprintf("pods: got %d, want %d; rejected: got %v, want %v", len(gp), len(wp), g["rejected"], w["rejected"])
}

func replayScenario(t *testing.T, dir string, opts options) *report {
	t.Helper()
	c, err := loadCluster(dir)
	if err != nil {
		t.Fatal(err)
	}
	rep, err := runReplay(context.Background(), c, opts)
	if errors.Is(err, errNotImplemented) {
		t.Skipf("SKIPPED: %v", err)
	}
	if err != nil {
		t.Fatalf("%s: %v", dir, err)
	}
	return rep
}

// Every recorded cycle, run through the unmodified KSWE plugin on wazero, decides as expected.json
// (which the Rust replays, native and on our wasmtime KSWE host, also match), and the guest logs
// nothing (a refused object would be logged).
func TestReplayMatchesExpected(t *testing.T) {
	guest := guestPath(t)
	log := captureKlog(t)
	for _, dir := range scenarios(t) {
		t.Run(filepath.Base(dir), func(t *testing.T) {
			got := decisions(t, replayScenario(t, dir, options{guest: guest}))
			if want := expected(t, dir); !reflect.DeepEqual(got, want) {
				t.Errorf("decisions differ from expected.json: %s", firstDifference(got, want))
			}
			if lines := log.take(); len(lines) > 0 {
				t.Errorf("the guest logged:\n%s", strings.Join(lines, "\n"))
			}
		})
	}
}

// exportsPermit reports whether the guest exports `permit`.
func exportsPermit(t *testing.T, guest string) bool {
	t.Helper()
	bin, err := os.ReadFile(guest)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	r := wazero.NewRuntime(ctx)
	defer r.Close(ctx)
	m, err := r.CompileModule(ctx, bin)
	if err != nil {
		t.Fatal(err)
	}
	_, ok := m.ExportedFunctions()["permit"]
	return ok
}

// With async binding (pod i's PreBind, Bind and PostBind run on another goroutine after pod i+1's
// scheduling cycle), the decisions stay the same: the next cycle sees pod i's devices through the
// pending allocations, and PreBind runs on the instance that reserved.
func TestAsyncBindingDecidesTheSame(t *testing.T) {
	guest := guestPath(t)
	if !exportsPermit(t, guest) {
		t.Skip("SKIPPED: the guest exports no `permit`, so KSWE keeps the scheduling instance until PreBind " +
			"and a binding cycle that starts after the next pod's PreFilter runs on that pod's instance " +
			"(see docs/kswe-dra-extension.md, \"Running in a real kube-scheduler\")")
	}
	for _, dir := range scenarios(t) {
		t.Run(filepath.Base(dir), func(t *testing.T) {
			got := decisions(t, replayScenario(t, dir, options{guest: guest, async: true}))
			if want := expected(t, dir); !reflect.DeepEqual(got, want) {
				t.Errorf("async decisions differ from expected.json: %s", firstDifference(got, want))
			}
		})
	}
}
