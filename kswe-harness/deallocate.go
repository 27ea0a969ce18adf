package main

import (
	corev1 "k8s.io/api/core/v1"

	"sharing-affinity/kswe-harness/dramodule"
)

// Deallocate clears status.allocation, status.reservedFor and status.devices of a claim
// (PostFilter, docs/kswe-dra-extension.md §2.3): only while its resourceVersion is still version,
// no pod other than pod is in status.reservedFor and no allocation of it is pending. Mirrors
// `ObjectStore::deallocate`.
func (s *store) Deallocate(claim, version string, pod *corev1.Pod) int32 {
	s.mu.Lock()
	defer s.mu.Unlock()
	e, ok := s.entries[objectID{"ResourceClaim", claim}]
	if !ok {
		return dramodule.NotFound
	}
	status, _ := e.object["status"].(map[string]any)
	reserved, _ := status["reservedFor"].([]any)
	for _, r := range reserved {
		m, _ := r.(map[string]any)
		if pod.UID == "" || m["uid"] != string(pod.UID) {
			return dramodule.Conflict
		}
	}
	if _, inFlight := s.pending[claim]; inFlight || str(e.object, "metadata", "resourceVersion") != version {
		return dramodule.Conflict
	}
	object := make(map[string]any, len(e.object))
	for k, v := range e.object {
		object[k] = v
	}
	cleared := map[string]any{}
	for k, v := range status {
		if k != "allocation" && k != "reservedFor" && k != "devices" {
			cleared[k] = v
		}
	}
	object["status"] = cleared
	s.put(object)
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
