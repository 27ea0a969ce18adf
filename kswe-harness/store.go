package main

// The recorded store behind the sharing-affinity.dra/v1 host module: a dramodule.Feed of the
// recorded objects (the change feed of docs/kswe-dra-extension.md §2.1) and the write-backs of
// §2.2 and §2.3 applied to it, as an API server and the resourceclaim controller would. Safe for
// concurrent use: the binding cycle of one pod may run while the next pod's scheduling cycle pulls
// the feed.

import (
	"encoding/json"
	"fmt"
	"sort"
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	"sharing-affinity/kswe-harness/dramodule"
)

// write is one allocation the guest wrote at PreBind.
type write struct {
	Claim      string
	Allocation json.RawMessage
}

// store is the versioned store. See the file comment.
type store struct {
	mu sync.Mutex
	// feed holds the objects; the store stamps metadata.resourceVersion with the revision.
	feed *dramodule.Feed
	// writes are the allocations written per pod UID, in call order.
	writes map[string][]write
	// deallocated is the claim PostFilter deallocated, per pod UID.
	deallocated map[string]string
	// clock is what Now answers (Unix seconds): the recording's time, advanced by Wait.
	clock int64
}

func newStore() *store {
	feed := dramodule.NewFeed(dramodule.NextEpoch())
	feed.StampVersions = true
	return &store{feed: feed, writes: map[string][]write{}, deallocated: map[string]string{}}
}

// object is the stored object kind `key` (not to be modified), or nil. The caller holds the lock.
func (s *store) object(kind, key string) map[string]any {
	object, _ := s.feed.Get(dramodule.ID{Kind: kind, Key: key})
	return object
}

// remove deletes an object, leaving a tombstone for the feed. The caller holds the lock.
func (s *store) remove(id dramodule.ID) error {
	if !s.feed.Remove(id) {
		return fmt.Errorf("%s %s: delete of an object that does not exist", id.Kind, id.Key)
	}
	return nil
}

// Add loads one object.
func (s *store) Add(object map[string]any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.feed.Put(object)
}

// Delete removes one object.
func (s *store) Delete(kind, key string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.remove(dramodule.ID{Kind: kind, Key: key})
}

// Pod returns the stored pod `namespace/name` as a corev1 object.
func (s *store) Pod(key string) (*corev1.Pod, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	object := s.object("Pod", key)
	if object == nil {
		return nil, fmt.Errorf("Pod %s: not found", key)
	}
	return toPod(object)
}

func toPod(object map[string]any) (*corev1.Pod, error) {
	raw, err := json.Marshal(object)
	if err != nil {
		return nil, fmt.Errorf("Pod %s: %w", dramodule.IDOf(object).Key, err)
	}
	var pod corev1.Pod
	if err := json.Unmarshal(raw, &pod); err != nil {
		return nil, fmt.Errorf("Pod %s: %w", dramodule.IDOf(object).Key, err)
	}
	return &pod, nil
}

// corev1Fields is a corev1 object as JSON fields, with apiVersion and kind.
func corev1Fields(object any, kind string) (map[string]any, error) {
	raw, err := json.Marshal(object)
	if err != nil {
		return nil, fmt.Errorf("encoding as %s: %w", kind, err)
	}
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		return nil, fmt.Errorf("decoding the %s encoding: %w", kind, err)
	}
	m["apiVersion"], m["kind"] = "v1", kind
	return m, nil
}

// BindPod sets spec.nodeName of a pod (what the default binder's API call does).
func (s *store) BindPod(key, node string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	object := s.object("Pod", key)
	if object == nil {
		return fmt.Errorf("Pod %s: not found", key)
	}
	pod, err := toPod(object)
	if err != nil {
		return err
	}
	pod.Spec.NodeName = node
	fields, err := corev1Fields(pod, "Pod")
	if err != nil {
		return fmt.Errorf("Pod %s: %w", key, err)
	}
	keepExtendedStatus(object, fields)
	s.feed.Put(fields)
	return nil
}

// keepExtendedStatus copies status.extendedResourceClaimStatus (KEP-5004, Kubernetes 1.34) from
// a stored pod to its re-encoding: k8s.io/api v0.33's Pod type, which the encoding goes through,
// does not have the field.
func keepExtendedStatus(from, to map[string]any) {
	kept := dramodule.Status(from)["extendedResourceClaimStatus"]
	if kept == nil {
		return
	}
	status := dramodule.Status(to)
	if status == nil {
		status = map[string]any{}
		to["status"] = status
	}
	status["extendedResourceClaimStatus"] = kept
}

// Changes implements dramodule.Backend: the feed document for a cursor.
func (s *store) Changes(cursor string) []byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.feed.Changes(cursor)
}

// claimAllocation is a stored claim's status.allocation as JSON (nil when it has none). An
// allocation that does not encode is an error. The caller holds the lock.
func (s *store) claimAllocation(key string) ([]byte, error) {
	allocation := dramodule.Status(s.object("ResourceClaim", key))["allocation"]
	if allocation == nil {
		return nil, nil
	}
	raw, err := json.Marshal(allocation)
	if err != nil {
		return nil, fmt.Errorf("ResourceClaim %s: status.allocation: %w", key, err)
	}
	return raw, nil
}

// withStatus is a copy of object whose status is a copy of its status changed by edit (the stored
// object stays as it is).
func withStatus(object map[string]any, edit func(status map[string]any)) map[string]any {
	updated := make(map[string]any, len(object))
	for k, v := range object {
		updated[k] = v
	}
	old := dramodule.Status(object)
	status := make(map[string]any, len(old)+1)
	for k, v := range old {
		status[k] = v
	}
	edit(status)
	updated["status"] = status
	return updated
}

// generatedClaim is the claim a pod's spec.resourceClaims entry generates from its template when
// that claim does not exist yet: `<pod>-<entry>`, the template's metadata and spec, the pod as
// controlling owner. Returns the entry name and the claim, or false. The caller holds the lock.
func (s *store) generatedClaim(claim string, pod *corev1.Pod) (string, map[string]any, bool) {
	for _, rc := range pod.Spec.ResourceClaims {
		if rc.ResourceClaimTemplateName == nil {
			continue
		}
		name := pod.Name + "-" + rc.Name
		done := false
		for _, st := range pod.Status.ResourceClaimStatuses {
			done = done || st.Name == rc.Name
		}
		if dramodule.Key(pod.Namespace, name) != claim || done {
			continue
		}
		template := s.object("ResourceClaimTemplate", dramodule.Key(pod.Namespace, *rc.ResourceClaimTemplateName))
		if template == nil {
			return "", nil, false
		}
		// A copy of the template's spec.metadata; none, or one that is not an object, gives the
		// claim no other metadata (the template is not checked here).
		meta, _, _ := unstructured.NestedMap(template, "spec", "metadata")
		if meta == nil {
			meta = map[string]any{}
		}
		meta["name"], meta["namespace"] = name, pod.Namespace
		meta["ownerReferences"] = []any{map[string]any{
			"apiVersion": "v1", "kind": "Pod", "name": pod.Name, "uid": string(pod.UID), "controller": true,
		}}
		spec, _, _ := unstructured.NestedFieldNoCopy(template, "spec", "spec")
		object := map[string]any{
			"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim", "metadata": meta, "spec": spec,
		}
		return rc.Name, object, true
	}
	return "", nil, false
}

// SetPending records an in-flight allocation of a claim for a pod (Reserve). A claim the pod
// generates (from a template, or its KEP-5004 special claim) is created now, so that other
// scheduling cycles see its devices as taken while the pod binds (the resourceclaim controller
// creates a template's claim before the pod is scheduled). Mirrors `ObjectStore::set_pending`.
func (s *store) SetPending(claim string, pod *corev1.Pod, allocation []byte) int32 {
	if _, ok := dramodule.DecodeAllocation(allocation); !ok {
		return dramodule.Invalid
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if code := s.checkWrite(claim, pod, allocation); code != dramodule.OK {
		return code
	}
	s.feed.SetPending(claim, string(pod.UID), allocation)
	return dramodule.OK
}

// checkWrite creates claim if the pod generates it and it does not exist yet, and checks that the
// claim holds no other allocation. The caller holds the lock.
func (s *store) checkWrite(claim string, pod *corev1.Pod, allocation []byte) int32 {
	if s.object("ResourceClaim", claim) == nil {
		if code := s.createGenerated(claim, pod, allocation); code != dramodule.OK {
			return code
		}
	}
	current, err := s.claimAllocation(claim)
	switch {
	case err != nil:
		return dramodule.Invalid
	case current != nil && !dramodule.SameAllocation(current, allocation):
		return dramodule.Conflict
	}
	return dramodule.OK
}

// createGenerated creates the claim `claim` when it does not exist yet and the pod generates it:
// from a template (named in the stored pod's status.resourceClaimStatuses, what the resourceclaim
// controller does), or as its KEP-5004 special claim for `allocation` (with the pod's
// status.extendedResourceClaimStatus, what upstream's DRA plugin does). dramodule.NotFound when the pod
// generates no such claim; dramodule.Invalid when the allocation does not fit the pod's special claim.
// Mirrors `ObjectStore::create_generated` of host/src/kswe/store.rs. The caller holds the lock.
func (s *store) createGenerated(claim string, pod *corev1.Pod, allocation []byte) int32 {
	// The stored pod (its status may already name generated claims), else the callback's.
	source := pod
	stored := s.object("Pod", dramodule.Key(pod.Namespace, pod.Name))
	if stored != nil {
		p, err := toPod(stored)
		if err != nil {
			stored = nil
		} else {
			source = p
		}
	}
	if entryName, generated, ok := s.generatedClaim(claim, source); ok {
		s.feed.Put(generated)
		if stored != nil {
			name, _, _ := unstructured.NestedString(generated, "metadata", "name")
			source.Status.ResourceClaimStatuses = append(source.Status.ResourceClaimStatuses,
				corev1.PodResourceClaimStatus{Name: entryName, ResourceClaimName: &name})
			fields, err := corev1Fields(source, "Pod")
			if err != nil {
				return dramodule.Invalid
			}
			keepExtendedStatus(stored, fields)
			s.feed.Put(fields)
		}
		return dramodule.OK
	}
	hasStatus := stored != nil && dramodule.Status(stored)["extendedResourceClaimStatus"] != nil
	object, status, code := s.extendedClaim(claim, source, hasStatus, allocation)
	if code != dramodule.OK {
		return code
	}
	var updated map[string]any
	if stored != nil {
		// The stored pod with status.extendedResourceClaimStatus, as JSON fields (k8s.io/api
		// v0.33's Pod has no such field).
		statusFields, err := runtime.DefaultUnstructuredConverter.ToUnstructured(status)
		if err != nil {
			return dramodule.Invalid
		}
		updated = withStatus(stored, func(podStatus map[string]any) {
			podStatus["extendedResourceClaimStatus"] = statusFields
		})
	}
	s.feed.Put(object)
	if updated != nil {
		s.feed.Put(updated)
	}
	return dramodule.OK
}

// extendedClaim is the KEP-5004 claim the scheduler creates for the pod's extended resources
// backed by DRA when `claim` is its name (`<pod>-extended-resources-<5 chars>`, extendedClaimName)
// and the pod has none yet (hasStatus false), with the pod's status.extendedResourceClaimStatus
// (claimForAllocation, for the pod and the stored DeviceClasses). dramodule.NotFound when `claim` is not
// the pod's special claim or the pod asks for no DRA-backed resource, dramodule.Invalid when the
// allocation does not decode or a result names a request the pod does not make. Mirrors
// `ObjectStore::extended_claim`. The caller holds the lock.
func (s *store) extendedClaim(claim string, pod *corev1.Pod, hasStatus bool, allocation []byte) (map[string]any, *extendedStatus, int32) {
	if hasStatus || dramodule.Key(pod.Namespace, extendedClaimName(pod)) != claim {
		return nil, nil, dramodule.NotFound
	}
	alloc, ok := dramodule.DecodeAllocation(allocation)
	if !ok {
		return nil, nil, dramodule.Invalid
	}
	object, status, ok, err := claimForAllocation(pod, s.feed.List("DeviceClass"), alloc)
	switch {
	case err != nil:
		// A class conflict would have failed the guest's PreFilter; what is left is a result
		// for a request the pod does not make.
		return nil, nil, dramodule.Invalid
	case !ok:
		return nil, nil, dramodule.NotFound
	}
	return object, status, dramodule.OK
}

// ClearPending drops a pod's pending allocations (the first step of Unreserve). A KEP-5004
// special claim of the pod that is still unallocated is deleted and the pod's
// status.extendedResourceClaimStatus cleared when it names that claim, as upstream's Unreserve
// deletes the claim it created (a claim generated from a template stays: the resourceclaim
// controller keeps it). Mirrors `ObjectStore::clear_pending_for_pod`.
func (s *store) ClearPending(podUID string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.clearPending(podUID)
}

// Unreserve is the host's part of the framework's Unreserve for a pod (docs/kswe-dra-extension.md
// §2.2), in one step under the lock: ClearPending, then the pod, by UID, leaves status.reservedFor
// of every allocated claim that names it (a new revision of each, in key order), as upstream's
// Unreserve patches it out. The allocation stays: after a failed PreBind the claim is allocated
// and reserved for no pod until a PostFilter deallocates it.
func (s *store) Unreserve(podUID string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.clearPending(podUID)
	var reserved []map[string]any
	for _, claim := range s.feed.List("ResourceClaim") {
		if status := dramodule.Status(claim); status["allocation"] != nil && dramodule.ReservedForPod(status, podUID) {
			reserved = append(reserved, claim)
		}
	}
	sort.Slice(reserved, func(i, j int) bool {
		return dramodule.IDOf(reserved[i]).Key < dramodule.IDOf(reserved[j]).Key
	})
	for _, claim := range reserved {
		s.feed.Put(withStatus(claim, func(status map[string]any) { dramodule.ReleaseFor(status, podUID) }))
	}
}

// clearPending is ClearPending with the lock held.
func (s *store) clearPending(podUID string) {
	for _, claim := range s.feed.PendingOf(podUID) {
		s.feed.ForgetPending(claim)
		id := dramodule.ID{Kind: "ResourceClaim", Key: claim}
		object := s.object(id.Kind, id.Key)
		if object == nil {
			continue
		}
		if dramodule.Status(object)["allocation"] != nil || !isExtendedClaimOf(object, podUID) {
			s.feed.Touch(id)
			continue
		}
		s.feed.Remove(id)
		s.forgetExtendedClaim(podUID, claim)
	}
}

// forgetExtendedClaim clears status.extendedResourceClaimStatus of the pod with UID `podUID` when
// it names `claim`. The caller holds the lock.
func (s *store) forgetExtendedClaim(podUID, claim string) {
	for _, pod := range s.feed.List("Pod") {
		if uid, _, _ := unstructured.NestedString(pod, "metadata", "uid"); uid != podUID {
			continue
		}
		named, found, _ := unstructured.NestedString(pod, "status", "extendedResourceClaimStatus", "resourceClaimName")
		namespace, _, _ := unstructured.NestedString(pod, "metadata", "namespace")
		if !found || dramodule.Key(namespace, named) != claim {
			return
		}
		s.feed.Put(withStatus(pod, func(status map[string]any) { delete(status, "extendedResourceClaimStatus") }))
		return
	}
}

// WriteAllocation sets status.allocation of a claim and adds the pod to status.reservedFor
// (PreBind), creating a claim the pod generates (from a template, or its KEP-5004 special claim)
// first. Mirrors `ObjectStore::write_allocation`.
func (s *store) WriteAllocation(claim string, pod *corev1.Pod, allocation []byte) int32 {
	if _, ok := dramodule.DecodeAllocation(allocation); !ok {
		return dramodule.Invalid
	}
	// The allocation as JSON fields, stored as the guest wrote it: re-encoding the decoded form
	// would drop fields the Go type does not know and add ones the guest left out.
	var alloc any
	if err := json.Unmarshal(allocation, &alloc); err != nil {
		return dramodule.Invalid
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if code := s.checkWrite(claim, pod, allocation); code != dramodule.OK {
		return code
	}
	s.feed.ForgetPending(claim)
	s.feed.Put(withStatus(s.object("ResourceClaim", claim), func(status map[string]any) {
		// A claim that holds the same allocation keeps it as stored: the write only adds the pod
		// (the API server refuses a changed status.allocation).
		if status["allocation"] == nil {
			status["allocation"] = alloc
		}
		dramodule.ReserveFor(status, pod)
	}))
	s.writes[string(pod.UID)] = append(s.writes[string(pod.UID)], write{claim, append(json.RawMessage(nil), allocation...)})
	return dramodule.OK
}

// ExtendedStatus is the stored pod's status.extendedResourceClaimStatus, or nil.
func (s *store) ExtendedStatus(key string) (*extendedStatus, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	pod := s.object("Pod", key)
	if pod == nil {
		return nil, fmt.Errorf("Pod %s: not found", key)
	}
	field := dramodule.Status(pod)["extendedResourceClaimStatus"]
	if field == nil {
		return nil, nil
	}
	fields, ok := field.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("Pod %s: status.extendedResourceClaimStatus: not an object", key)
	}
	var out extendedStatus
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(fields, &out); err != nil {
		return nil, fmt.Errorf("Pod %s: status.extendedResourceClaimStatus: %w", key, err)
	}
	return &out, nil
}

// TakeWrites returns and forgets the allocations written for a pod.
func (s *store) TakeWrites(podUID string) []write {
	s.mu.Lock()
	defer s.mu.Unlock()
	w := s.writes[podUID]
	delete(s.writes, podUID)
	return w
}
