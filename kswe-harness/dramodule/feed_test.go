package dramodule

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

type document struct {
	Cursor string `json:"cursor"`
	Resync bool   `json:"resync"`
	More   bool   `json:"more"`
	Events []struct {
		Type   string         `json:"type"`
		Object map[string]any `json:"object"`
	} `json:"events"`
}

func pull(t *testing.T, f *Feed, cursor string) (document, []string) {
	t.Helper()
	var d document
	if err := json.Unmarshal(f.Changes(cursor), &d); err != nil {
		t.Fatal(err)
	}
	var events []string
	for _, e := range d.Events {
		name, _, _ := unstructured.NestedString(e.Object, "metadata", "name")
		events = append(events, e.Type+" "+name)
	}
	return d, events
}

func claim(name string) map[string]any {
	return map[string]any{
		"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
		"metadata": map[string]any{"name": name, "namespace": "ns"},
	}
}

func TestFeedRevisionsTombstonesAndResync(t *testing.T) {
	f := NewFeed(NextEpoch())
	f.Put(claim("a"))
	first, events := pull(t, f, "")
	if !first.Resync || !reflect.DeepEqual(events, []string{"ADDED a"}) {
		t.Fatalf("first pull: %+v", first)
	}
	f.Remove(ID{"ResourceClaim", "ns/a"})
	f.Put(claim("a"))
	f.Put(claim("b"))
	f.Put(claim("tmp"))
	if !f.Remove(ID{"ResourceClaim", "ns/tmp"}) || f.Remove(ID{"ResourceClaim", "ns/tmp"}) {
		t.Fatal("Remove reports whether the object was there")
	}
	// a was deleted and created again: ADDED (its old revision is gone); tmp lived between pulls.
	d, events := pull(t, f, first.Cursor)
	if d.Resync || !reflect.DeepEqual(events, []string{"ADDED a", "ADDED b"}) {
		t.Fatalf("since %s: %v %+v", first.Cursor, events, d)
	}
	if f.Len() != 2 || len(f.List("ResourceClaim")) != 2 || len(f.List("Pod")) != 0 {
		t.Fatalf("Len %d, List %d", f.Len(), len(f.List("ResourceClaim")))
	}
	if _, events := pull(t, f, "99."+strings.Split(d.Cursor, ".")[1]); len(events) != 2 {
		t.Fatalf("a foreign cursor resyncs: %v", events)
	}
}

func TestFeedStampsVersionsAndCachesDocuments(t *testing.T) {
	f := NewFeed(NextEpoch())
	f.StampVersions = true
	rev := f.Put(claim("a"))
	object, _ := f.Get(ID{"ResourceClaim", "ns/a"})
	if version, _, _ := unstructured.NestedString(object, "metadata", "resourceVersion"); version != fmt.Sprint(rev) {
		t.Fatalf("resourceVersion: %v", object["metadata"])
	}
	one, two := f.Changes(""), f.Changes("")
	if &one[0] != &two[0] {
		t.Error("the same cursor at the same revision gives a new document")
	}
}

func TestFeedPagesAfterTheLimit(t *testing.T) {
	f := NewFeed(NextEpoch())
	f.PageLimit = 300
	for i := range 10 {
		f.Put(claim(fmt.Sprintf("c%d", i)))
	}
	var all []string
	cursor := ""
	for pages := 1; ; pages++ {
		d, events := pull(t, f, cursor)
		all = append(all, events...)
		cursor = d.Cursor
		if !d.More {
			if pages < 2 {
				t.Fatalf("one page for %d events", len(all))
			}
			break
		}
		if pages > 10 {
			t.Fatal("no progress")
		}
	}
	if len(all) != 10 || all[9] != "ADDED c9" {
		t.Fatalf("events over the pages: %v", all)
	}
}

func TestPendingAllocationsShowUntilForgotten(t *testing.T) {
	f := NewFeed(NextEpoch())
	f.Put(claim("a"))
	d, _ := pull(t, f, "")
	f.SetPending("ns/a", "uid-1", []byte(`{"devices":{"results":[]}}`))
	if !f.Pending("ns/a") || !reflect.DeepEqual(f.PendingOf("uid-1"), []string{"ns/a"}) {
		t.Fatalf("pending: %v", f.PendingOf("uid-1"))
	}
	d2, events := pull(t, f, d.Cursor)
	allocation, _, _ := unstructured.NestedFieldNoCopy(d2.Events[0].Object, "status", "allocation")
	if !reflect.DeepEqual(events, []string{"MODIFIED a"}) || allocation == nil {
		t.Fatalf("pending not shown: %+v", d2)
	}
	if object, _ := f.Get(ID{"ResourceClaim", "ns/a"}); object["status"] != nil {
		t.Fatalf("the stored claim changed: %v", object)
	}
	f.ForgetPending("ns/a")
	f.Touch(ID{"ResourceClaim", "ns/a"})
	d3, _ := pull(t, f, d2.Cursor)
	if len(d3.Events) != 1 || d3.Events[0].Object["status"] != nil {
		t.Fatalf("pending still shown: %+v", d3)
	}
}

func TestReservedFor(t *testing.T) {
	pod := &corev1.Pod{}
	pod.Name, pod.UID = "p", "u1"
	old := []any{map[string]any{"resource": "pods", "name": "q", "uid": "u2"}}
	status := map[string]any{"reservedFor": old}
	if !ReservedForOthers(status, pod) {
		t.Error("u2 is another consumer")
	}
	ReserveFor(status, pod)
	ReserveFor(status, pod)
	if reserved, _, _ := unstructured.NestedSlice(status, "reservedFor"); len(reserved) != 2 || len(old) != 1 {
		t.Fatalf("reservedFor %v (old list %v)", status["reservedFor"], old)
	}
	mine := map[string]any{}
	ReserveFor(mine, pod)
	if ReservedForOthers(mine, pod) || ReservedForOthers(map[string]any{}, pod) {
		t.Error("only the pod")
	}
	mine["allocation"], mine["devices"] = map[string]any{}, []any{}
	ClearAllocation(mine)
	if len(mine) != 0 {
		t.Errorf("cleared: %v", mine)
	}
}

// ReleaseFor deletes by UID alone, as upstream's `$patch: delete` with merge key uid does, into a
// new list; an emptied list goes.
func TestReleaseForDeletesByUID(t *testing.T) {
	old := []any{
		map[string]any{"resource": "pods", "name": "p", "uid": "u1"},
		map[string]any{"resource": "pods", "name": "q", "uid": "u2"},
		map[string]any{"resource": "other", "name": "p", "uid": "u1"},
	}
	before := fmt.Sprint(old)
	status := map[string]any{"reservedFor": old}
	if !ReservedForPod(status, "u1") || ReservedForPod(status, "u3") {
		t.Fatal("ReservedForPod answers by UID")
	}
	ReleaseFor(status, "u1")
	if reserved, _, _ := unstructured.NestedSlice(status, "reservedFor"); len(reserved) != 1 || fmt.Sprint(old) != before {
		t.Fatalf("reservedFor %v (old list %v)", status["reservedFor"], old)
	}
	if ReservedForPod(status, "u1") || !ReservedForPod(status, "u2") {
		t.Errorf("after releasing u1: %v", status["reservedFor"])
	}
	ReleaseFor(status, "u2")
	if _, found := status["reservedFor"]; found {
		t.Errorf("an emptied reservedFor is kept: %v", status["reservedFor"])
	}
}
