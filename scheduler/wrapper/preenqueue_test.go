package wrapper

import (
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	"k8s.io/kubernetes/pkg/scheduler/framework"

	"sharing-affinity/scheduler/informer"
)

// activations is a framework.Handle that records Activate.
type activations struct {
	framework.Handle
	pods []string
}

func (a *activations) Activate(_ klog.Logger, pods map[string]*v1.Pod) {
	for key := range pods {
		a.pods = append(a.pods, key)
	}
}

func podClaim(name, owner string, deleting bool) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
		"metadata": map[string]any{"name": name, "namespace": "ns"},
		"spec":     map[string]any{},
	}}
	if owner != "" {
		u.SetOwnerReferences([]metav1.OwnerReference{{APIVersion: "v1", Kind: "Pod", Name: "web", UID: types.UID(owner), Controller: ptr(true)}})
	}
	if deleting {
		now := metav1.Now()
		u.SetDeletionTimestamp(&now)
	}
	return u
}

func ptr[T any](v T) *T { return &v }

// Pods wait for their claims as upstream's DynamicResources PreEnqueue makes them: a template
// entry without a claim named in the pod's status, a claim the backend does not have, a claim
// being deleted, a template's claim the pod does not control; the claim's informer event
// activates the waiting pod.
func TestPodsWaitForTheirClaims(t *testing.T) {
	b := informer.New(nil)
	h := &activations{}
	p := &Plugin{handle: h, rejected: map[string]*v1.Pod{}, backend: b}
	b.OnChange(func() { p.activate(klog.Background()) })
	pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "ns", UID: "uid-1"}}
	pod.Spec.ResourceClaims = []v1.PodResourceClaim{
		{Name: "nic", ResourceClaimTemplateName: ptr("nic-template")},
		{Name: "shared", ResourceClaimName: ptr("shared")},
	}
	waits := func(want string) {
		t.Helper()
		s := p.PreEnqueue(t.Context(), pod)
		switch {
		case want == "" && !s.IsSuccess():
			t.Fatalf("PreEnqueue: %v", s)
		case want != "" && (s.Code() != framework.UnschedulableAndUnresolvable || !strings.Contains(s.Message(), want)):
			t.Fatalf("PreEnqueue: %v, want UnschedulableAndUnresolvable with %q", s, want)
		}
	}
	// Before the backend has synced, every pod passes: PreFilter waits for the sync.
	waits("")
	b.MarkSynced()
	waits("ResourceClaim not created yet")
	pod.Status.ResourceClaimStatuses = []v1.PodResourceClaimStatus{{Name: "nic", ResourceClaimName: ptr("web-nic")}}
	waits(`"web-nic": not found`)
	b.Upsert(podClaim("web-nic", "uid-2", false))
	if len(h.pods) != 1 || h.pods[0] != "ns/web" {
		t.Fatalf("the claim's event activated %v, want the waiting pod", h.pods)
	}
	waits("not owner")
	b.Upsert(podClaim("web-nic", "uid-1", false))
	waits(`"shared": not found`)
	b.Upsert(podClaim("shared", "", true))
	waits("being deleted")
	b.Upsert(podClaim("shared", "", false))
	waits("")
	// A template entry whose status names no claim needs none.
	pod.Status.ResourceClaimStatuses[0].ResourceClaimName = nil
	b.Remove(podClaim("web-nic", "uid-1", false))
	waits("")
	// A pod without claims is never looked at.
	if s := p.PreEnqueue(t.Context(), &v1.Pod{}); !s.IsSuccess() {
		t.Fatalf("no claims: %v", s)
	}
}
