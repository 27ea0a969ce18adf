package main

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"sharing-affinity/kswe-harness/dramodule"
)

// Deallocate clears status.allocation, status.reservedFor and status.devices of a claim
// (PostFilter, docs/kswe-dra-extension.md §2.3): only while its resourceVersion is still seen,
// no pod other than pod is in status.reservedFor and no allocation of it is pending. Mirrors
// `ObjectStore::deallocate`.
func (s *store) Deallocate(claim, seen string, pod *corev1.Pod) int32 {
	s.mu.Lock()
	defer s.mu.Unlock()
	object := s.object("ResourceClaim", claim)
	if object == nil {
		return dramodule.NotFound
	}
	version, _, _ := unstructured.NestedString(object, "metadata", "resourceVersion")
	if dramodule.ReservedForOthers(dramodule.Status(object), pod) || s.feed.Pending(claim) || version != seen {
		return dramodule.Conflict
	}
	s.feed.Put(withStatus(object, dramodule.ClearAllocation))
	s.deallocated[string(pod.UID)] = claim
	return dramodule.OK
}

// TakeDeallocated returns and forgets the claim PostFilter deallocated for a pod ("" for none).
func (s *store) TakeDeallocated(podUID string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	claim := s.deallocated[podUID]
	delete(s.deallocated, podUID)
	return claim
}
