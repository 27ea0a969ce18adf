package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/go-logr/logr"
	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/klog/v2"

	"sharing-affinity/kswe-harness/dramodule"
)

func claimObject(name string) map[string]any {
	return map[string]any{
		"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
		"metadata": map[string]any{"name": name, "namespace": "ns"},
	}
}

type feedDoc struct {
	Cursor string `json:"cursor"`
	Resync bool   `json:"resync"`
	Events []struct {
		Type   string         `json:"type"`
		Object map[string]any `json:"object"`
	} `json:"events"`
}

func feed(t *testing.T, s *store, cursor string) feedDoc {
	t.Helper()
	var d feedDoc
	if err := json.Unmarshal(s.Changes(cursor), &d); err != nil {
		t.Fatal(err)
	}
	return d
}

func events(d feedDoc) []string {
	out := []string{}
	for _, e := range d.Events {
		out = append(out, e.Type+" "+field(e.Object, "metadata", "name"))
	}
	return out
}

func testPod() *corev1.Pod {
	template := "t"
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns", UID: "u1"},
		Spec: corev1.PodSpec{ResourceClaims: []corev1.PodResourceClaim{
			{Name: "gpu", ResourceClaimTemplateName: &template},
		}},
	}
}

func TestFeedReportsChangesSinceTheCursor(t *testing.T) {
	s := newStore()
	s.Add(claimObject("a"))
	s.Add(claimObject("b"))
	first := feed(t, s, "")
	if !first.Resync || !reflect.DeepEqual(events(first), []string{"ADDED a", "ADDED b"}) {
		t.Fatalf("empty cursor: resync with every object, got %+v", events(first))
	}
	if rv := field(first.Events[0].Object, "metadata", "resourceVersion"); rv != "1" {
		t.Errorf("resourceVersion is the revision: got %q", rv)
	}
	if got := events(feed(t, s, first.Cursor)); len(got) != 0 {
		t.Errorf("nothing changed: %v", got)
	}
	s.Add(claimObject("a"))
	s.Add(claimObject("c"))
	if err := s.Delete("ResourceClaim", "ns/b"); err != nil {
		t.Fatal(err)
	}
	second := feed(t, s, first.Cursor)
	if second.Resync || !reflect.DeepEqual(events(second), []string{"MODIFIED a", "ADDED c", "DELETED b"}) {
		t.Errorf("since the first cursor: %+v", second)
	}
	s.Add(claimObject("tmp"))
	if err := s.Delete("ResourceClaim", "ns/tmp"); err != nil {
		t.Fatal(err)
	}
	if got := events(feed(t, s, second.Cursor)); len(got) != 0 {
		t.Errorf("created and deleted between two pulls: not reported, got %v", got)
	}
	if err := s.Delete("ResourceClaim", "ns/zz"); err == nil || !strings.Contains(err.Error(), "ResourceClaim ns/zz") {
		t.Errorf("delete of a missing object: %v", err)
	}
}

func TestForeignMalformedOrFutureCursorsResync(t *testing.T) {
	s := newStore()
	s.Add(claimObject("a"))
	other := newStore()
	for _, cursor := range []string{"garbage", "1", other.changesCursor(t), strings.Split(s.changesCursor(t), ".")[0] + ".99"} {
		d := feed(t, s, cursor)
		if !d.Resync || len(d.Events) != 1 || d.Events[0].Type != "ADDED" {
			t.Errorf("cursor %q: want a resync, got %+v", cursor, d)
		}
	}
}

func (s *store) changesCursor(t *testing.T) string {
	return feed(t, s, "").Cursor
}

// stored is the stored object kind `key`, or nil.
func (s *store) stored(kind, key string) map[string]any {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.object(kind, key)
}

// field is the string at path in object, or "".
func field(object map[string]any, path ...string) string {
	v, _, _ := unstructured.NestedString(object, path...)
	return v
}

func TestPendingAllocationsOverlayTheFeedUntilUnreserve(t *testing.T) {
	s := newStore()
	s.Add(claimObject("a"))
	cursor := feed(t, s, "").Cursor
	alloc := []byte(`{"devices":{"results":[{"request":"r","driver":"d","pool":"p","device":"x"}]}}`)
	pod := testPod()
	if got := s.SetPending("ns/zz", pod, alloc); got != dramodule.NotFound {
		t.Errorf("unknown claim: %d", got)
	}
	if got := s.SetPending("ns/a", pod, []byte(`{"devices":{"results":"no"}}`)); got != dramodule.Invalid {
		t.Errorf("invalid allocation: %d", got)
	}
	if got := s.SetPending("ns/a", pod, alloc); got != dramodule.OK {
		t.Fatalf("pending: %d", got)
	}
	d := feed(t, s, cursor)
	if !reflect.DeepEqual(events(d), []string{"MODIFIED a"}) || !strings.Contains(string(s.Changes(cursor)), `"device":"x"`) {
		t.Errorf("pending allocation shown as status.allocation: %s", s.Changes(cursor))
	}
	s.ClearPending("u1")
	d2 := feed(t, s, d.Cursor)
	if !reflect.DeepEqual(events(d2), []string{"MODIFIED a"}) || strings.Contains(string(s.Changes(d.Cursor)), "allocation") {
		t.Errorf("Unreserve reverts the claim: %s", s.Changes(d.Cursor))
	}
}

func TestWriteAllocationReservesOnceAndDetectsConflicts(t *testing.T) {
	s := newStore()
	s.Add(claimObject("a"))
	pod := testPod()
	a1 := []byte(`{"devices":{"results":[{"request":"r","driver":"d","pool":"p","device":"x","consumedCapacity":{"c":"1Gi"}}]}}`)
	same := []byte(`{"devices":{"config":[],"results":[{"request":"r","driver":"d","pool":"p","device":"x","consumedCapacity":{"c":"1024Mi"}}]}}`)
	other := []byte(`{"devices":{"results":[]}}`)
	for i, alloc := range [][]byte{a1, same} {
		if got := s.WriteAllocation("ns/a", pod, alloc); got != dramodule.OK {
			t.Fatalf("write %d: %d", i, got)
		}
	}
	if got := s.WriteAllocation("ns/a", pod, other); got != dramodule.Conflict {
		t.Errorf("different allocation: %d", got)
	}
	if got := s.SetPending("ns/a", pod, other); got != dramodule.Conflict {
		t.Errorf("pending over a different allocation: %d", got)
	}
	if got := s.WriteAllocation("ns/b", pod, a1); got != dramodule.NotFound {
		t.Errorf("unknown claim: %d", got)
	}
	d := feed(t, s, "")
	if reserved, _, _ := unstructured.NestedSlice(d.Events[0].Object, "status", "reservedFor"); len(reserved) != 1 || field(reserved[0].(map[string]any), "uid") != "u1" {
		t.Errorf("the pod is added to reservedFor once: %v", reserved)
	}
	if w := s.TakeWrites("u1"); len(w) != 2 || w[0].Claim != "ns/a" {
		t.Errorf("writes recorded per pod: %v", w)
	}
}

// A claim the pod generates from a template is created at Reserve, so that the next pod's
// scheduling cycle sees its devices as taken while this pod binds (with async binding that cycle
// runs before this pod's PreBind), and it stays after Unreserve, as the resourceclaim
// controller's claim does.
func TestTemplateClaimsAreCreatedAtReserveAndNamedInThePodStatus(t *testing.T) {
	s := newStore()
	s.Add(map[string]any{
		"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
		"metadata": map[string]any{"name": "t", "namespace": "ns"},
		"spec": map[string]any{
			"metadata": map[string]any{"labels": map[string]any{"l": "v"}},
			"spec":     map[string]any{"devices": map[string]any{"requests": []any{map[string]any{"name": "r"}}}},
		},
	})
	pod := testPod()
	fields, err := corev1Fields(pod, "Pod")
	if err != nil {
		t.Fatal(err)
	}
	s.Add(fields)
	alloc := []byte(`{"devices":{"results":[]}}`)
	if got := s.SetPending("ns/other", pod, alloc); got != dramodule.NotFound {
		t.Errorf("not a claim of the pod: %d", got)
	}
	cursor := feed(t, s, "").Cursor
	pendingAlloc := []byte(`{"devices":{"results":[{"request":"r","driver":"d","pool":"p","device":"x"}]}}`)
	if got := s.SetPending("ns/p-gpu", pod, pendingAlloc); got != dramodule.OK {
		t.Fatalf("pending on a claim the pod generates: %d", got)
	}
	d := feed(t, s, cursor)
	if !reflect.DeepEqual(events(d), []string{"MODIFIED p", "ADDED p-gpu"}) {
		t.Fatalf("Reserve creates the claim and names it in the pod: %v", events(d))
	}
	if !strings.Contains(string(s.Changes(cursor)), `"device":"x"`) {
		t.Errorf("the new claim shows the pending allocation: %s", s.Changes(cursor))
	}
	s.ClearPending("u1")
	d2 := feed(t, s, d.Cursor)
	if !reflect.DeepEqual(events(d2), []string{"MODIFIED p-gpu"}) || strings.Contains(string(s.Changes(d.Cursor)), "allocation") {
		t.Errorf("Unreserve keeps the claim, unallocated: %s", s.Changes(d.Cursor))
	}
	if got := s.SetPending("ns/p-gpu", pod, alloc); got != dramodule.OK {
		t.Errorf("pending on the generated claim again: %d", got)
	}
	if got := s.WriteAllocation("ns/p-gpu", pod, alloc); got != dramodule.OK {
		t.Fatalf("write: %d", got)
	}
	claim := s.stored("ResourceClaim", "ns/p-gpu")
	if field(claim, "metadata", "labels", "l") != "v" || claim["spec"] == nil {
		t.Errorf("template metadata and spec: %v", claim)
	}
	owners := (&unstructured.Unstructured{Object: claim}).GetOwnerReferences()
	if len(owners) != 1 || owners[0].UID != "u1" || owners[0].Controller == nil || !*owners[0].Controller {
		t.Errorf("the pod owns the claim: %v", owners)
	}
	stored, err := s.Pod("ns/p")
	if err != nil {
		t.Fatal(err)
	}
	if st := stored.Status.ResourceClaimStatuses; len(st) != 1 || *st[0].ResourceClaimName != "p-gpu" {
		t.Errorf("pod status names the claim once: %v", st)
	}
	if s.feed.Pending("ns/p-gpu") {
		t.Errorf("the write replaces the pending allocation")
	}
}

func TestBindPodSetsTheNodeName(t *testing.T) {
	s := newStore()
	fields, _ := corev1Fields(testPod(), "Pod")
	s.Add(fields)
	if err := s.BindPod("ns/p", "node-a"); err != nil {
		t.Fatal(err)
	}
	if p, _ := s.Pod("ns/p"); p.Spec.NodeName != "node-a" || p.ResourceVersion != "2" {
		t.Errorf("bound pod: %q rv %q", p.Spec.NodeName, p.ResourceVersion)
	}
	if err := s.BindPod("ns/none", "node-a"); err == nil {
		t.Error("binding a missing pod is an error")
	}
}

// The host module answers 4 to a write with no framework callback in progress (no pod in the
// context), and a read outside memory panics (a trap for the guest).
func TestHostModuleNeedsAPodAndPanicsOutsideMemory(t *testing.T) {
	ctx := context.Background()
	s := newStore()
	s.Add(claimObject("a"))
	h, err := dramodule.New(ctx, s)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close(ctx)
	if h.Resolve(ctx) == ctx {
		t.Error("resolve adds the resolver to the context")
	}
	m := fakeGuest(t, ctx)
	defer m.Close(ctx)
	mem := m.Memory()
	mem.Write(0, []byte("ns/a"))
	alloc := []byte(`{"devices":{"results":[]}}`)
	mem.Write(16, alloc)
	write := func(ctx context.Context, name string, stack []uint64) (result int32, panicked any) {
		defer func() { panicked = recover() }()
		fn := h.Module().ExportedFunctionDefinitions()[name].GoFunction().(api.GoModuleFunction)
		fn.Call(ctx, m, stack)
		return api.DecodeI32(stack[0]), nil
	}
	if got, p := write(ctx, "allocation", []uint64{0, 4, 16, uint64(len(alloc))}); p != nil || got != dramodule.NoPod {
		t.Errorf("no pod: %d %v", got, p)
	}
	if got, p := write(dramodule.WithPod(ctx, testPod()), "pending_allocation", []uint64{0, 4, 16, uint64(len(alloc))}); p != nil || got != dramodule.OK {
		t.Errorf("with a pod: %d %v", got, p)
	}
	if _, p := write(ctx, "changes", []uint64{0, 1 << 30, 0, 10}); p == nil {
		t.Error("a cursor outside memory panics")
	}
	doc := s.Changes("")
	stack := []uint64{0, 0, 100, 10}
	if _, p := write(ctx, "changes", stack); p != nil || int(stack[0]) != len(doc) {
		t.Errorf("buf_limit too small: the length, nothing written: %d %v", stack[0], p)
	}
	stack = []uint64{0, 0, 100, uint64(len(doc))}
	if _, p := write(ctx, "changes", stack); p != nil || int(stack[0]) != len(doc) {
		t.Errorf("fits: %d %v", stack[0], p)
	}
	if got, _ := mem.Read(100, uint32(len(doc))); string(got) != string(doc) {
		t.Errorf("written document: %s", got)
	}
}

// The guest's klog calls reach the replay's sink: every line is kept, and each rejected object is
// listed once, with its first error (every instance logs it again when its feed carries it).
func TestGuestLogKeepsLinesAndRejectedObjects(t *testing.T) {
	log := newGuestLog()
	klog.SetLogger(logr.New(log))
	t.Cleanup(klog.ClearLogger)
	for range 2 {
		klog.ErrorS(nil, rejectedMessage, "object", "ResourceSlice s", "error", "ResourceSlice s: field spec.x: bad")
	}
	klog.ErrorS(nil, rejectedMessage, "object", "ResourceSlice s", "error", "ResourceSlice s: field spec.y: bad")
	klog.ErrorS(nil, rejectedMessage, "object", "Node n", "error", "Node n: field metadata.name: bad")
	klog.InfoS("something else", "k", "v")
	if lines := log.take(); len(lines) != 5 || !strings.Contains(lines[0], "object rejected") {
		t.Errorf("captured: %v", lines)
	}
	want := []string{"ResourceSlice s: field spec.x: bad", "Node n: field metadata.name: bad"}
	if got := log.rejections(); !reflect.DeepEqual(got, want) {
		t.Errorf("rejected: %q, want %q", got, want)
	}
}

// fakeGuest is `(module (memory (export "memory") 1))`, a guest memory for the host functions.
func fakeGuest(t *testing.T, ctx context.Context) api.Module {
	t.Helper()
	bin := []byte{0, 'a', 's', 'm', 1, 0, 0, 0, 5, 3, 1, 0, 1, 7, 10, 1, 6, 'm', 'e', 'm', 'o', 'r', 'y', 2, 0}
	r := wazero.NewRuntime(ctx)
	t.Cleanup(func() { r.Close(ctx) })
	m, err := r.Instantiate(ctx, bin)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// DeviceTaintRules are part of the feed, as the Rust host's store feeds them.
func TestDeviceTaintRulesAreFed(t *testing.T) {
	if !dramodule.Kinds["DeviceTaintRule"] {
		t.Fatal("DeviceTaintRule is not a fed kind")
	}
	dir := t.TempDir()
	list := `{"kind":"List","items":[{"apiVersion":"resource.k8s.io/v1alpha3","kind":"DeviceTaintRule",` +
		`"metadata":{"name":"r"},"spec":{"taint":{"key":"k","effect":"NoSchedule"}}}]}`
	if err := os.WriteFile(filepath.Join(dir, "cluster.json"), []byte(list), 0o644); err != nil {
		t.Fatal(err)
	}
	c, err := loadCluster(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(c.objects) != 1 || dramodule.IDOf(c.objects[0]).Kind != "DeviceTaintRule" {
		t.Errorf("the rule is loaded: %v", c.objects)
	}
}
