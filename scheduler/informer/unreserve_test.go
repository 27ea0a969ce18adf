package informer

import (
	"context"
	"encoding/json"
	"reflect"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clienttesting "k8s.io/client-go/testing"

	"sharing-affinity/kswe-harness/dramodule"
)

// reservedClaim is claim name with uid "uid-<name>", reserved for the pods with uids, allocated
// unless allocated is false.
func reservedClaim(t *testing.T, name string, allocated bool, uids ...string) *unstructured.Unstructured {
	t.Helper()
	var allocation map[string]any
	if allocated {
		allocation = map[string]any{"devices": map[string]any{}}
	}
	u := claim(name, allocation)
	u.SetUID(types.UID("uid-" + name))
	reserved := []any{}
	for _, uid := range uids {
		reserved = append(reserved, map[string]any{"resource": "pods", "name": uid, "uid": uid})
	}
	if err := unstructured.SetNestedSlice(u.Object, reserved, "status", "reservedFor"); err != nil {
		t.Fatal(err)
	}
	return u
}

// patches records the claim patches and answers each with the claim as the API server would
// patch it: the reservedFor entry with the patch's UID deleted. fail names claims whose patch
// fails.
type patches struct {
	t       *testing.T
	claims  map[string]*unstructured.Unstructured
	fail    map[string]bool
	actions []clienttesting.PatchAction
}

func (p *patches) react(a clienttesting.Action) (bool, runtime.Object, error) {
	patch := a.(clienttesting.PatchAction)
	p.actions = append(p.actions, patch)
	if p.fail[patch.GetName()] {
		return true, nil, apierrors.NewServiceUnavailable("down")
	}
	var body struct {
		Status struct {
			ReservedFor []struct {
				UID string `json:"uid"`
			} `json:"reservedFor"`
		} `json:"status"`
	}
	if err := json.Unmarshal(patch.GetPatch(), &body); err != nil || len(body.Status.ReservedFor) != 1 {
		p.t.Errorf("patch of %s: %s (%v)", patch.GetName(), patch.GetPatch(), err)
		return true, nil, apierrors.NewBadRequest("bad patch")
	}
	patched := p.claims[patch.GetName()].DeepCopy()
	dramodule.ReleaseFor(dramodule.Status(patched.Object), body.Status.ReservedFor[0].UID)
	patched.SetResourceVersion("2")
	return true, patched, nil
}

// Unreserve removes the pod from status.reservedFor of every allocated claim that names it, by
// upstream's strategic-merge patch of the status subresource with the claim's UID as
// precondition; the allocation stays, the patched claim is in the next feed document, and an
// unallocated claim or one reserved for other pods only is left alone.
func TestReleaseClaimsPatchesThePodOutOfReservedFor(t *testing.T) {
	claims := map[string]*unstructured.Unstructured{
		"a":           reservedClaim(t, "a", true, "uid-1", "uid-2"),
		"others":      reservedClaim(t, "others", true, "uid-2"),
		"unallocated": reservedClaim(t, "unallocated", false, "uid-1"),
	}
	c := fakeClient()
	p := &patches{t: t, claims: claims}
	c.PrependReactor("patch", "resourceclaims", p.react)
	b := New(c)
	b.MarkSynced()
	for _, name := range []string{"a", "others", "unallocated"} {
		b.Upsert(claims[name].DeepCopy())
	}
	cursor := changes(t, b, "").Cursor
	b.ReleaseClaims(context.Background(), pod)
	if len(p.actions) != 1 {
		t.Fatalf("%d patches, want 1 (claim a)", len(p.actions))
	}
	a := p.actions[0]
	if a.GetName() != "a" || a.GetNamespace() != "ns" || a.GetSubresource() != "status" || a.GetPatchType() != types.StrategicMergePatchType {
		t.Errorf("patch of %s/%s, subresource %q, type %s", a.GetNamespace(), a.GetName(), a.GetSubresource(), a.GetPatchType())
	}
	var got, want any
	if err := json.Unmarshal(a.GetPatch(), &got); err != nil {
		t.Fatal(err)
	}
	_ = json.Unmarshal([]byte(`{"metadata":{"uid":"uid-a"},"status":{"reservedFor":[{"$patch":"delete","uid":"uid-1"}]}}`), &want)
	if !reflect.DeepEqual(got, want) {
		t.Errorf("patch %s", a.GetPatch())
	}
	d := changes(t, b, cursor)
	if len(d.Events) != 1 || d.Events[0].Type != "MODIFIED" {
		t.Fatalf("feed after the patch: %+v", d)
	}
	object := d.Events[0].Object
	rf, _, _ := unstructured.NestedSlice(object, "status", "reservedFor")
	if len(rf) != 1 || field(rf[0], "uid") != "uid-2" || allocationOf(object) == nil {
		t.Errorf("claim a after Unreserve: %+v", object["status"])
	}
}

// A failed patch is logged and the other claims are still patched, as upstream's Unreserve goes on.
func TestReleaseClaimsGoesOnAfterAFailedPatch(t *testing.T) {
	claims := map[string]*unstructured.Unstructured{
		"a": reservedClaim(t, "a", true, "uid-1"),
		"b": reservedClaim(t, "b", true, "uid-1"),
	}
	c := fakeClient()
	p := &patches{t: t, claims: claims, fail: map[string]bool{"a": true}}
	c.PrependReactor("patch", "resourceclaims", p.react)
	b := New(c)
	b.MarkSynced()
	b.Upsert(claims["a"].DeepCopy())
	b.Upsert(claims["b"].DeepCopy())
	b.ReleaseClaims(context.Background(), pod)
	if len(p.actions) != 2 || p.actions[0].GetName() != "a" || p.actions[1].GetName() != "b" {
		t.Fatalf("patches: %d", len(p.actions))
	}
	if !dramodule.ReservedForPod(dramodule.Status(b.Claim("ns/a")), "uid-1") {
		t.Error("the failed patch changed the feed's claim a")
	}
	if dramodule.ReservedForPod(dramodule.Status(b.Claim("ns/b")), "uid-1") {
		t.Error("claim b still names the pod")
	}
}
