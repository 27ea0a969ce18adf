package informer

import (
	"context"
	"errors"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	clienttesting "k8s.io/client-go/testing"

	"sharing-affinity/kswe-harness/dramodule"
)

// allocatedFor is claim a at resourceVersion "1", allocated and reserved for the pods with uids.
func allocatedFor(t *testing.T, uids ...string) *unstructured.Unstructured {
	t.Helper()
	u := claim("a", map[string]any{"devices": map[string]any{}})
	reserved := []any{}
	for _, uid := range uids {
		reserved = append(reserved, map[string]any{"resource": "pods", "name": uid, "uid": uid})
	}
	if err := unstructured.SetNestedSlice(u.Object, reserved, "status", "reservedFor"); err != nil {
		t.Fatal(err)
	}
	devices := []any{map[string]any{"driver": "d", "pool": "p", "device": "eth1"}}
	if err := unstructured.SetNestedSlice(u.Object, devices, "status", "devices"); err != nil {
		t.Fatal(err)
	}
	return u
}

func TestDeallocateClearsTheStatusAtTheVersionSeen(t *testing.T) {
	c := fakeClient(allocatedFor(t, "uid-1"))
	b := New(c)
	b.MarkSynced()
	if r := b.Deallocate("ns/a", "2", pod); r != dramodule.Conflict {
		t.Fatalf("another version: %d", r)
	}
	if r := b.Deallocate("ns/none", "1", pod); r != dramodule.NotFound {
		t.Fatalf("missing claim: %d", r)
	}
	if r := b.Deallocate("ns/a", "1", pod); r != dramodule.OK {
		t.Fatalf("Deallocate: %d", r)
	}
	got, err := c.Resource(Claims).Namespace("ns").Get(context.Background(), "a", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if status, _, err := unstructured.NestedMap(got.Object, "status"); err != nil || len(status) != 0 {
		t.Fatalf("status not cleared: %+v", status)
	}
}

func TestDeallocateLeavesAClaimAnotherPodUses(t *testing.T) {
	c := fakeClient(allocatedFor(t, "uid-1", "uid-2"))
	b := New(c)
	b.MarkSynced()
	if r := b.Deallocate("ns/a", "1", pod); r != dramodule.Conflict {
		t.Fatalf("reserved for another pod too: %d", r)
	}
}

func TestDeallocateDoesNotRetryAConflict(t *testing.T) {
	c := fakeClient(allocatedFor(t))
	calls := 0
	c.PrependReactor("update", "resourceclaims", func(a clienttesting.Action) (bool, runtime.Object, error) {
		calls++
		return true, nil, apierrors.NewConflict(schema.GroupResource{Group: "resource.k8s.io", Resource: "resourceclaims"}, "a", errors.New("stale"))
	})
	b := New(c)
	b.MarkSynced()
	if r := b.Deallocate("ns/a", "1", pod); r != dramodule.Conflict || calls != 1 {
		t.Fatalf("result %d after %d updates", r, calls)
	}
}
