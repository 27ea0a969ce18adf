package dramodule

// Status edits shared by the backends' writes (§2.2, §2.3) and by Unreserve, on claims as JSON
// fields.

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// Status is an object's status as stored (nil when it has none or it is not an object).
func Status(object map[string]any) map[string]any {
	status, _, _ := unstructured.NestedFieldNoCopy(object, "status")
	m, _ := status.(map[string]any)
	return m
}

// reservedFor is a claim status's reservedFor as stored (nil when it has none or it is not a
// list): the entries are read, not copied.
func reservedFor(status map[string]any) []any {
	reserved, _, _ := unstructured.NestedFieldNoCopy(status, "reservedFor")
	list, _ := reserved.([]any)
	return list
}

// consumer is the uid and resource of a reservedFor entry; ok is false when the entry is not an
// object or has no string uid (a resource that is absent or not a string is "").
func consumer(entry any) (uid, resource string, ok bool) {
	m, isObject := entry.(map[string]any)
	if !isObject {
		return "", "", false
	}
	uid, found, err := unstructured.NestedString(m, "uid")
	resource, _, _ = unstructured.NestedString(m, "resource")
	return uid, resource, found && err == nil
}

// ReserveFor adds the pod to a claim status's reservedFor unless it is there, in a new list (the
// old one is not changed).
func ReserveFor(status map[string]any, pod *corev1.Pod) {
	reserved := reservedFor(status)
	for _, r := range reserved {
		if uid, resource, ok := consumer(r); ok && uid == string(pod.UID) && resource == "pods" {
			return
		}
	}
	status["reservedFor"] = append(append([]any(nil), reserved...),
		map[string]any{"resource": "pods", "name": pod.Name, "uid": string(pod.UID)})
}

// ReservedForPod reports whether a claim status's reservedFor names the pod with UID podUID (by UID
// alone, as upstream's resourceclaim.IsReservedForPod).
func ReservedForPod(status map[string]any, podUID string) bool {
	for _, r := range reservedFor(status) {
		if uid, _, ok := consumer(r); ok && uid == podUID {
			return true
		}
	}
	return false
}

// ReleaseFor removes every entry with UID podUID from a claim status's reservedFor, in a new list
// (the old one is not changed), as upstream's Unreserve patch `{"$patch":"delete","uid":...}` does.
// An emptied list is removed: the API server omits it.
func ReleaseFor(status map[string]any, podUID string) {
	var kept []any
	for _, r := range reservedFor(status) {
		if uid, _, ok := consumer(r); !ok || uid != podUID {
			kept = append(kept, r)
		}
	}
	if len(kept) == 0 {
		delete(status, "reservedFor")
		return
	}
	status["reservedFor"] = kept
}

// ReservedForOthers reports whether a claim status's reservedFor names a consumer other than the
// pod (a pod without a UID is never the consumer).
func ReservedForOthers(status map[string]any, pod *corev1.Pod) bool {
	for _, r := range reservedFor(status) {
		if uid, _, ok := consumer(r); !ok || pod.UID == "" || uid != string(pod.UID) {
			return true
		}
	}
	return false
}

// ClearAllocation removes status.allocation, status.reservedFor and status.devices (§2.3).
func ClearAllocation(status map[string]any) {
	delete(status, "allocation")
	delete(status, "reservedFor")
	delete(status, "devices")
}
