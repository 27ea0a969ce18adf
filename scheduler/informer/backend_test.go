package informer

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	clienttesting "k8s.io/client-go/testing"

	"sharing-affinity/kswe-harness/dramodule"
)

func claim(name string, allocation map[string]any) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
		"metadata": map[string]any{"name": name, "namespace": "ns", "resourceVersion": "1"},
		"spec":     map[string]any{},
	}}
	if allocation != nil {
		u.Object["status"] = map[string]any{"allocation": allocation}
	}
	return u
}

// allocationOf is an object's status.allocation, or nil.
func allocationOf(object map[string]any) any {
	allocation, _, _ := unstructured.NestedFieldNoCopy(object, "status", "allocation")
	return allocation
}

// field is the string field of a list entry, or "" when the entry is not an object or the field
// is not a string.
func field(entry any, name string) string {
	m, _ := entry.(map[string]any)
	v, _, _ := unstructured.NestedString(m, name)
	return v
}

func fakeClient(objects ...runtime.Object) *dynamicfake.FakeDynamicClient {
	s := runtime.NewScheme()
	return dynamicfake.NewSimpleDynamicClientWithCustomListKinds(s, map[schema.GroupVersionResource]string{
		Claims: "ResourceClaimList",
	}, objects...)
}

var pod = &corev1.Pod{}

func init() {
	pod.Name, pod.Namespace, pod.UID = "web", "ns", types.UID("uid-1")
}

const alloc = `{"devices":{"results":[{"request":"nic","driver":"d","pool":"p","device":"eth1"}]}}`

type doc struct {
	Cursor string `json:"cursor"`
	Resync bool   `json:"resync"`
	More   bool   `json:"more"`
	Events []struct {
		Type   string         `json:"type"`
		Object map[string]any `json:"object"`
	} `json:"events"`
}

func changes(t *testing.T, b *Backend, cursor string) doc {
	t.Helper()
	var d doc
	if err := json.Unmarshal(b.Changes(cursor), &d); err != nil {
		t.Fatal(err)
	}
	return d
}

func TestInformerEventsAreFeedRevisions(t *testing.T) {
	b := New(fakeClient())
	b.MarkSynced()
	b.Upsert(claim("a", nil))
	d := changes(t, b, "")
	if !d.Resync || len(d.Events) != 1 || d.Events[0].Type != "ADDED" {
		t.Fatalf("first document: %+v", d)
	}
	b.Upsert(claim("a", map[string]any{"devices": map[string]any{}}))
	b.Upsert(claim("b", nil))
	b.Remove(cacheTombstone(claim("a", nil)))
	d2 := changes(t, b, d.Cursor)
	var kinds []string
	for _, e := range d2.Events {
		kinds = append(kinds, e.Type)
	}
	if d2.Resync || strings.Join(kinds, ",") != "ADDED,DELETED" {
		t.Fatalf("after %s: %v %+v", d.Cursor, kinds, d2)
	}
	if d3 := changes(t, b, "999.1"); !d3.Resync || len(d3.Events) != 1 {
		t.Fatalf("foreign cursor: %+v", d3)
	}
	// A pending allocation shows as status.allocation until dropped.
	if r := b.SetPending("ns/b", pod, []byte(alloc)); r != dramodule.OK {
		t.Fatalf("SetPending: %d", r)
	}
	d4 := changes(t, b, d2.Cursor)
	if len(d4.Events) != 1 || allocationOf(d4.Events[0].Object) == nil {
		t.Fatalf("pending not shown: %+v", d4)
	}
	b.DropPending("uid-1")
	d5 := changes(t, b, d4.Cursor)
	if len(d5.Events) != 1 || d5.Events[0].Object["status"] != nil {
		t.Fatalf("pending not dropped: %+v", d5)
	}
	if r := b.SetPending("ns/missing", pod, []byte(alloc)); r != dramodule.NotFound {
		t.Fatalf("SetPending of a claim not created yet: %d", r)
	}
}

func cacheTombstone(u *unstructured.Unstructured) any { return u }

func TestWriteAllocation(t *testing.T) {
	c := fakeClient(claim("a", nil))
	b := New(c)
	b.MarkSynced()
	if r := b.WriteAllocation("ns/a", pod, []byte(alloc)); r != dramodule.OK {
		t.Fatalf("WriteAllocation: %d", r)
	}
	got, err := c.Resource(Claims).Namespace("ns").Get(context.Background(), "a", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if allocationOf(got.Object) == nil {
		t.Fatalf("no allocation: %+v", got.Object["status"])
	}
	rf, _, _ := unstructured.NestedSlice(got.Object, "status", "reservedFor")
	if len(rf) != 1 || field(rf[0], "uid") != "uid-1" || field(rf[0], "resource") != "pods" {
		t.Fatalf("reservedFor: %+v", rf)
	}
	// The same allocation again is fine and keeps the stored one as it is (the API server
	// refuses a changed status.allocation; the guest's JSON may spell it otherwise); another
	// one is a conflict.
	stored, _, _ := unstructured.NestedMap(got.Object, "status", "allocation")
	stored["marker"] = "as stored"
	if err := unstructured.SetNestedMap(got.Object, stored, "status", "allocation"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Resource(Claims).Namespace("ns").UpdateStatus(context.Background(), got, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if r := b.WriteAllocation("ns/a", pod, []byte(alloc)); r != dramodule.OK {
		t.Fatalf("same allocation again: %d", r)
	}
	again, err := c.Resource(Claims).Namespace("ns").Get(context.Background(), "a", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if m, _, _ := unstructured.NestedString(again.Object, "status", "allocation", "marker"); m != "as stored" {
		t.Fatalf("the stored allocation was replaced: %+v", again.Object["status"])
	}
	other := strings.Replace(alloc, "eth1", "eth2", 1)
	if r := b.WriteAllocation("ns/a", pod, []byte(other)); r != dramodule.Conflict {
		t.Fatalf("other allocation: %d", r)
	}
	if r := b.WriteAllocation("ns/none", pod, []byte(alloc)); r != dramodule.NotFound {
		t.Fatalf("missing claim: %d", r)
	}
}

func TestWriteAllocationRetriesOnConflict(t *testing.T) {
	c := fakeClient(claim("a", nil))
	calls := 0
	c.PrependReactor("update", "resourceclaims", func(a clienttesting.Action) (bool, runtime.Object, error) {
		if a.GetSubresource() != "status" {
			return false, nil, nil
		}
		calls++
		if calls == 1 {
			return true, nil, apierrors.NewConflict(schema.GroupResource{Group: "resource.k8s.io", Resource: "resourceclaims"}, "a", errors.New("stale"))
		}
		return false, nil, nil
	})
	b := New(c)
	b.MarkSynced()
	if r := b.WriteAllocation("ns/a", pod, []byte(alloc)); r != dramodule.OK || calls != 2 {
		t.Fatalf("result %d after %d updates", r, calls)
	}
}

func TestWriteAllocationFailsCleanly(t *testing.T) {
	c := fakeClient(claim("a", nil))
	c.PrependReactor("update", "resourceclaims", func(a clienttesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewForbidden(schema.GroupResource{Resource: "resourceclaims"}, "a", errors.New("no"))
	})
	b := New(c)
	b.MarkSynced()
	if r := b.WriteAllocation("ns/a", pod, []byte(alloc)); r == dramodule.OK {
		t.Fatal("a failed write answered OK")
	}
	if r := b.WriteAllocation("ns/a", pod, []byte("{")); r != dramodule.Invalid {
		t.Fatalf("bad JSON: %d", r)
	}
}

// "The same allocation" is by meaning, as the recorded store compares it: the API server may
// write a quantity or an empty list differently from the guest.
func TestTheSameAllocationIsComparedByMeaning(t *testing.T) {
	written := `{"devices":{"results":[{"request":"nic","driver":"d","pool":"p","device":"eth1","consumedCapacity":{"slots":"1Gi"}}]}}`
	again := `{"devices":{"config":[],"results":[{"request":"nic","driver":"d","pool":"p","device":"eth1","consumedCapacity":{"slots":"1024Mi"}}]}}`
	c := fakeClient(claim("a", nil))
	b := New(c)
	b.MarkSynced()
	if r := b.WriteAllocation("ns/a", pod, []byte(written)); r != dramodule.OK {
		t.Fatalf("WriteAllocation: %d", r)
	}
	if r := b.WriteAllocation("ns/a", pod, []byte(again)); r != dramodule.OK {
		t.Fatalf("the same allocation written differently: %d", r)
	}
	if r := b.SetPending("ns/a", pod, []byte(again)); r != dramodule.OK {
		t.Fatalf("pending, the same allocation written differently: %d", r)
	}
	if r := b.SetPending("ns/a", pod, []byte(`{"devices":{"results":"no"}}`)); r != dramodule.Invalid {
		t.Fatalf("not an AllocationResult: %d", r)
	}
}
