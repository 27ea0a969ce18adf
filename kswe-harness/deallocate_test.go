package main

import (
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	"sharing-affinity/kswe-harness/dramodule"
)

// The store deallocates as ObjectStore::deallocate does: only at the version the guest saw, only
// when no other pod uses the claim, never a pending allocation.
func TestDeallocateClearsOnlyAtTheVersionSeenAndForNoOtherPod(t *testing.T) {
	s := newStore()
	s.Add(claimObject("a"))
	pod := func(name string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", UID: types.UID("uid-" + name)}}
	}
	version := func() string {
		return field(s.stored("ResourceClaim", "ns/a"), "metadata", "resourceVersion")
	}
	alloc := []byte(`{"devices":{"results":[]}}`)
	if got := s.Deallocate("ns/zz", "1", pod("p")); got != dramodule.NotFound {
		t.Fatalf("missing claim: %d", got)
	}
	if got := s.SetPending("ns/a", pod("q"), alloc); got != dramodule.OK {
		t.Fatalf("SetPending: %d", got)
	}
	if got := s.Deallocate("ns/a", version(), pod("p")); got != dramodule.Conflict {
		t.Fatalf("pending claim: %d", got)
	}
	if got := s.WriteAllocation("ns/a", pod("q"), alloc); got != dramodule.OK {
		t.Fatalf("WriteAllocation: %d", got)
	}
	if got := s.Deallocate("ns/a", version(), pod("p")); got != dramodule.Conflict {
		t.Fatalf("another pod in reservedFor: %d", got)
	}
	if got := s.Deallocate("ns/a", "1", pod("q")); got != dramodule.Conflict {
		t.Fatalf("old version: %d", got)
	}
	cursor := feed(t, s, "").Cursor
	if got := s.Deallocate("ns/a", version(), pod("q")); got != dramodule.OK {
		t.Fatalf("deallocate: %d", got)
	}
	d := feed(t, s, cursor)
	if got := events(d); !reflect.DeepEqual(got, []string{"MODIFIED a"}) {
		t.Fatalf("feed: %v", got)
	}
	if status, _, err := unstructured.NestedMap(d.Events[0].Object, "status"); err != nil || len(status) != 0 {
		t.Fatalf("status not cleared: %v", status)
	}
	if got := s.TakeDeallocated("uid-q"); got != "ns/a" {
		t.Fatalf("TakeDeallocated: %q", got)
	}
}
