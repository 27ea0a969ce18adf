package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"

	"github.com/tetratelabs/wazero"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
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
	gp, _, _ := unstructured.NestedSlice(g, "pods")
	wp, _, _ := unstructured.NestedSlice(w, "pods")
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
	for _, dir := range scenarios(t) {
		t.Run(filepath.Base(dir), func(t *testing.T) {
			rep := replayScenario(t, dir, options{guest: guest})
			got := decisions(t, rep)
			if want := expected(t, dir); !reflect.DeepEqual(got, want) {
				t.Errorf("decisions differ from expected.json: %s", firstDifference(got, want))
			}
			if len(rep.logs) > 0 {
				t.Errorf("the guest logged:\n%s", strings.Join(rep.logs, "\n"))
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

// Objects as Go writes them (a Node without a creation time is re-encoded here with
// `"creationTimestamp": null`) are read; an object the guest rejects is listed in the report's
// `rejected` with the guest's error, and a pod that needs it says so.
func TestGuestRejectionsAreReported(t *testing.T) {
	guest := guestPath(t)
	dir := t.TempDir()
	list := `{"apiVersion":"v1","kind":"List","items":[
	 {"apiVersion":"v1","kind":"Node","metadata":{"name":"n1"}},
	 {"apiVersion":"resource.k8s.io/v1","kind":"DeviceClass","metadata":{"name":"gpu"},"spec":{}},
	 {"apiVersion":"resource.k8s.io/v1","kind":"ResourceSlice","metadata":{"name":"s1"},
	  "spec":{"driver":"d","nodeName":"n1","pool":{"name":"n1","generation":1,"resourceSliceCount":1},
	          "devices":[{"name":"g0","capacity":{"mem":{"value":"12xyz"}}}]}},
	 {"apiVersion":"resource.k8s.io/v1","kind":"ResourceClaim","metadata":{"name":"c","namespace":"ns","uid":"u-c"},
	  "spec":{"devices":{"requests":[{"name":"r","exactly":{"deviceClassName":"gpu"}}]}}},
	 {"apiVersion":"v1","kind":"Pod","metadata":{"name":"p","namespace":"ns","uid":"u-p"},
	  "spec":{"containers":[{"name":"c","image":"x"}],"resourceClaims":[{"name":"r","resourceClaimName":"c"}]}}]}`
	if err := os.WriteFile(filepath.Join(dir, "cluster.json"), []byte(list), 0o644); err != nil {
		t.Fatal(err)
	}
	c, err := loadCluster(dir)
	if err != nil {
		t.Fatal(err)
	}
	if node, _ := json.Marshal(c.objects[0]); !strings.Contains(string(node), `"creationTimestamp":null`) {
		t.Fatalf("the Node is not written as Go writes it: %s", node)
	}
	rep, err := runReplay(context.Background(), c, options{guest: guest})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Rejected) != 1 || !strings.HasPrefix(rep.Rejected[0], "ResourceSlice s1: field spec.devices[0].capacity.mem.value") {
		t.Fatalf("rejected: %q", rep.Rejected)
	}
	if len(rep.Pods) != 1 || rep.Pods[0].Node != nil || len(rep.Pods[0].Nodes) != 1 ||
		rep.Pods[0].Nodes[0].Code != "Unschedulable" {
		t.Fatalf("pod: %+v", rep.Pods)
	}
}
