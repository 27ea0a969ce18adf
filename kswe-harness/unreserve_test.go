package main

import (
	"context"
	"fmt"
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/kubernetes/pkg/scheduler/framework"

	"sharing-affinity/kswe-harness/dramodule"
)

// reservedFor is the UIDs in a stored claim's status.reservedFor.
func reservedFor(t *testing.T, claim map[string]any) []string {
	t.Helper()
	list, _, err := unstructured.NestedSlice(claim, "status", "reservedFor")
	if err != nil {
		t.Fatal(err)
	}
	uids := []string{}
	for _, r := range list {
		uids = append(uids, field(r.(map[string]any), "uid"))
	}
	return uids
}

func podNamed(name string) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", UID: types.UID("uid-" + name)}}
}

// Unreserve drops the pod's pending allocations and removes the pod, by UID, from
// status.reservedFor of every allocated claim that names it, keeping the allocation (§2.2); each
// such claim is MODIFIED in the next feed document, and a claim the pod does not use, or that is
// not allocated, is not.
func TestUnreserveReleasesTheAllocatedClaimsOfThePod(t *testing.T) {
	s := newStore()
	for _, name := range []string{"shared", "own", "other", "pending"} {
		s.Add(claimObject(name))
	}
	unallocated := claimObject("unallocated")
	unallocated["status"] = map[string]any{"reservedFor": []any{map[string]any{"resource": "pods", "name": "p", "uid": "uid-p"}}}
	s.Add(unallocated)
	alloc := []byte(`{"devices":{"results":[{"request":"r","driver":"d","pool":"p","device":"x"}]}}`)
	for _, w := range []struct{ claim, pod string }{{"shared", "p"}, {"shared", "q"}, {"own", "p"}, {"other", "q"}} {
		if got := s.WriteAllocation("ns/"+w.claim, podNamed(w.pod), alloc); got != dramodule.OK {
			t.Fatalf("WriteAllocation %s for %s: %d", w.claim, w.pod, got)
		}
	}
	if got := s.SetPending("ns/pending", podNamed("p"), alloc); got != dramodule.OK {
		t.Fatalf("SetPending: %d", got)
	}
	cursor := feed(t, s, "").Cursor
	s.Unreserve("uid-p")
	d := feed(t, s, cursor)
	if got := events(d); !reflect.DeepEqual(got, []string{"MODIFIED pending", "MODIFIED own", "MODIFIED shared"}) {
		t.Fatalf("feed after Unreserve: %v", got)
	}
	if dramodule.Status(d.Events[0].Object)["allocation"] != nil || s.feed.Pending("ns/pending") {
		t.Errorf("the pending allocation is kept: %v", d.Events[0].Object["status"])
	}
	for claim, want := range map[string][]string{"shared": {"uid-q"}, "own": {}, "other": {"uid-q"}, "unallocated": {"uid-p"}} {
		stored := s.stored("ResourceClaim", "ns/"+claim)
		if got := reservedFor(t, stored); !reflect.DeepEqual(got, want) {
			t.Errorf("%s: reservedFor %v, want %v", claim, got, want)
		}
		if allocated := dramodule.Status(stored)["allocation"] != nil; allocated != (claim != "unallocated") {
			t.Errorf("%s: allocated %t after Unreserve", claim, allocated)
		}
	}
	if _, found := dramodule.Status(s.stored("ResourceClaim", "ns/own"))["reservedFor"]; found {
		t.Error("own: an emptied reservedFor is kept, the API server omits it")
	}
}

// bindingConditions is a plugin whose Reserve and PreBind do what our guest does for a claim whose
// binding conditions never become True in a replay: Reserve sets a pending allocation, PreBind
// writes the allocation, waits MaxWait seconds and fails. Its Unreserve records the pod and
// whether the claim still named the pod in status.reservedFor then.
type bindingConditions struct {
	t     *testing.T
	store *store
	claim string
	// unreserved are "<pod UID> reserved=<bool>" per Unreserve.
	unreserved []string
}

const bindingAllocation = `{"devices":{"results":[{"request":"r","driver":"d","pool":"p","device":"x"}]}}`

func (*bindingConditions) Name() string { return "binding-conditions" }

func (b *bindingConditions) Reserve(ctx context.Context, _ *framework.CycleState, _ *corev1.Pod, _ string) *framework.Status {
	if got := b.store.SetPending(b.claim, dramodule.CurrentPod(ctx), []byte(bindingAllocation)); got != dramodule.OK {
		return framework.NewStatus(framework.Error, "pending_allocation failed")
	}
	return nil
}

func (b *bindingConditions) Unreserve(ctx context.Context, _ *framework.CycleState, pod *corev1.Pod, _ string) {
	if current := dramodule.CurrentPod(ctx); current == nil || current.UID != pod.UID {
		b.t.Errorf("Unreserve of %s without the pod in its context", pod.UID)
	}
	reserved := dramodule.ReservedForPod(dramodule.Status(b.store.stored("ResourceClaim", b.claim)), string(pod.UID))
	b.unreserved = append(b.unreserved, fmt.Sprintf("%s reserved=%t", pod.UID, reserved))
}

func (b *bindingConditions) PreBind(ctx context.Context, _ *framework.CycleState, _ *corev1.Pod, _ string) *framework.Status {
	if got := b.store.WriteAllocation(b.claim, dramodule.CurrentPod(ctx), []byte(bindingAllocation)); got != dramodule.OK {
		return framework.NewStatus(framework.Error, "allocation failed")
	}
	for waited := 0; waited < dramodule.MaxWait; waited += 5 {
		b.store.Wait(ctx, 5)
	}
	return framework.NewStatus(framework.Error, "device binding timeout")
}

func (*bindingConditions) Bind(context.Context, *framework.CycleState, *corev1.Pod, string) *framework.Status {
	return framework.NewStatus(framework.Skip)
}

// A PreBind that fails leads to Unreserve on that pod, as in kube-scheduler (its binding cycle's
// handleBindingCycleError), whether the binding cycle runs at once or on a goroutine of its own:
// the host's part (the pod leaves status.reservedFor, the allocation stays) comes before the
// plugin's Unreserve, the pod is not bound and its writes are not reported.
func TestFailedPreBindUnreserves(t *testing.T) {
	for _, mode := range []struct {
		name string
		run  func(bind func())
	}{
		{"sync", func(bind func()) { bind() }},
		{"async", runOnGoroutine},
	} {
		t.Run(mode.name, func(t *testing.T) {
			s := newStore()
			s.Add(claimObject("c"))
			pod := podNamed("p")
			fields, err := corev1Fields(pod, "Pod")
			if err != nil {
				t.Fatal(err)
			}
			s.Add(fields)
			node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}}
			info := framework.NewNodeInfo()
			info.SetNode(node)
			plugin := &bindingConditions{t: t, store: s, claim: "ns/c"}
			r := &replayer{root: context.Background(), plugin: plugin, store: s, nodes: []*framework.NodeInfo{info}}
			out, bind := r.schedule("ns/p")
			if bind == nil || out.Error != nil {
				t.Fatalf("scheduling cycle: %+v", out)
			}
			mode.run(bind)
			if out.Error == nil || *out.Error != "bind on node n1: Error: device binding timeout" || out.Node != nil {
				t.Fatalf("outcome: error %v, node %v", out.Error, out.Node)
			}
			if want := []string{"uid-p reserved=false"}; !reflect.DeepEqual(plugin.unreserved, want) {
				t.Errorf("Unreserve calls %q, want %q", plugin.unreserved, want)
			}
			claim := s.stored("ResourceClaim", "ns/c")
			if dramodule.Status(claim)["allocation"] == nil || len(reservedFor(t, claim)) != 0 {
				t.Errorf("claim after Unreserve: %v", claim["status"])
			}
			if w := s.TakeWrites("uid-p"); len(w) != 0 {
				t.Errorf("the failed pod's writes are kept: %v", w)
			}
			if p, err := s.Pod("ns/p"); err != nil || p.Spec.NodeName != "" {
				t.Errorf("the pod was bound: %v %v", p, err)
			}
		})
	}
}
