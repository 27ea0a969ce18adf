package main

// The versioned object store behind the sharing-affinity.dra/v1 host module, implementing the
// change feed and the write-backs of docs/kswe-dra-extension.md §2. Safe for concurrent use: the
// binding cycle of one pod may run while the next pod's scheduling cycle pulls the feed.

import (
	"bytes"
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	corev1 "k8s.io/api/core/v1"
	resourcev1beta2 "k8s.io/api/resource/v1beta2"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"sharing-affinity/kswe-harness/dramodule"
)

// The kinds the feed carries.
var feedKinds = map[string]bool{
	"Node": true, "Pod": true, "DeviceClass": true, "ResourceSlice": true,
	"ResourceClaim": true, "ResourceClaimTemplate": true, "DeviceTaintRule": true,
}

// nextEpoch distinguishes stores within one process, so a cursor from another store resyncs.
var nextEpoch atomic.Uint64

type objectID struct{ kind, key string }

type entry struct {
	// object is the object as JSON fields (Pods and Nodes as their corev1 encoding).
	object            map[string]any
	created, modified uint64
	// json is the object as the feed shows it (pending allocation overlaid), rendered once.
	json []byte
}

type tombstone struct {
	created, deleted uint64
	json             []byte
}

type pending struct {
	podUID     string
	allocation json.RawMessage
}

// allocationResult is a resource.k8s.io/v1 AllocationResult: k8s.io/api v0.33 has no v1 group, so
// it is the v1beta2 type (the same shape) plus the KEP-5075 fields of v1.
type allocationResult struct {
	Devices struct {
		Results []deviceResult                                  `json:"results,omitempty"`
		Config  []resourcev1beta2.DeviceAllocationConfiguration `json:"config,omitempty"`
	} `json:"devices"`
	NodeSelector        *corev1.NodeSelector `json:"nodeSelector,omitempty"`
	AllocationTimestamp *metav1.Time         `json:"allocationTimestamp,omitempty"`
}

type deviceResult struct {
	resourcev1beta2.DeviceRequestAllocationResult `json:",inline"`
	ShareID                                       *string                      `json:"shareID,omitempty"`
	ConsumedCapacity                              map[string]resource.Quantity `json:"consumedCapacity,omitempty"`
}

// write is one allocation the guest wrote at PreBind.
type write struct {
	Claim      string
	Allocation json.RawMessage
}

// store is the versioned store. See the file comment.
type store struct {
	mu         sync.Mutex
	epoch      uint64
	revision   uint64
	entries    map[objectID]*entry
	tombstones map[objectID]*tombstone
	byRevision map[uint64]objectID
	pending    map[string]pending
	// writes are the allocations written per pod UID, in call order.
	writes map[string][]write
	// deallocated is the claim PostFilter deallocated, per pod UID.
	deallocated map[string]string
	// clock is what Now answers (Unix seconds): the recording's time.
	clock int64
	// feedCache is the last feed document with its cursor and revision.
	feedCursor string
	feedRev    uint64
	feedDoc    []byte
}

func newStore() *store {
	return &store{
		epoch:       nextEpoch.Add(1),
		entries:     map[objectID]*entry{},
		tombstones:  map[objectID]*tombstone{},
		byRevision:  map[uint64]objectID{},
		pending:     map[string]pending{},
		writes:      map[string][]write{},
		deallocated: map[string]string{},
	}
}

func str(m map[string]any, path ...string) string {
	var cur any = m
	for _, p := range path {
		mm, ok := cur.(map[string]any)
		if !ok {
			return ""
		}
		cur = mm[p]
	}
	s, _ := cur.(string)
	return s
}

func objectKey(namespace, name string) string {
	if namespace == "" {
		return name
	}
	return namespace + "/" + name
}

func idOf(object map[string]any) objectID {
	return objectID{str(object, "kind"), objectKey(str(object, "metadata", "namespace"), str(object, "metadata", "name"))}
}

func metadata(object map[string]any) map[string]any {
	meta, ok := object["metadata"].(map[string]any)
	if !ok {
		meta = map[string]any{}
		object["metadata"] = meta
	}
	return meta
}

// put creates or replaces an object (the store sets metadata.resourceVersion) and returns its
// revision. The caller holds the lock.
func (s *store) put(object map[string]any) uint64 {
	id := idOf(object)
	s.revision++
	rev := s.revision
	metadata(object)["resourceVersion"] = strconv.FormatUint(rev, 10)
	created := rev
	if old, ok := s.entries[id]; ok {
		delete(s.byRevision, old.modified)
		created = old.created
	} else if t, ok := s.tombstones[id]; ok {
		delete(s.byRevision, t.deleted)
		delete(s.tombstones, id)
	}
	e := &entry{object: object, created: created, modified: rev}
	e.json = s.render(id, object)
	s.entries[id] = e
	s.byRevision[rev] = id
	return rev
}

// remove deletes an object, leaving a tombstone for the feed.
func (s *store) remove(id objectID) error {
	e, ok := s.entries[id]
	if !ok {
		return fmt.Errorf("%s %s: delete of an object that does not exist", id.kind, id.key)
	}
	delete(s.entries, id)
	delete(s.byRevision, e.modified)
	s.revision++
	s.byRevision[s.revision] = id
	s.tombstones[id] = &tombstone{created: e.created, deleted: s.revision, json: e.json}
	return nil
}

// render is the object as the feed shows it: a claim without status.allocation shows its pending
// allocation as status.allocation.
func (s *store) render(id objectID, object map[string]any) []byte {
	view := object
	if p, ok := s.pending[id.key]; ok && id.kind == "ResourceClaim" {
		status, _ := object["status"].(map[string]any)
		if status["allocation"] == nil {
			view = make(map[string]any, len(object))
			for k, v := range object {
				view[k] = v
			}
			overlay := map[string]any{}
			for k, v := range status {
				overlay[k] = v
			}
			overlay["allocation"] = p.allocation
			view["status"] = overlay
		}
	}
	out, err := json.Marshal(view)
	if err != nil {
		panic(fmt.Sprintf("%s %s: does not encode: %v", id.kind, id.key, err))
	}
	return out
}

// touch re-renders an object whose view changed and moves it to a new revision (MODIFIED).
func (s *store) touch(id objectID) {
	e, ok := s.entries[id]
	if !ok {
		return
	}
	s.revision++
	delete(s.byRevision, e.modified)
	e.modified = s.revision
	e.json = s.render(id, e.object)
	s.byRevision[s.revision] = id
}

// Add loads one object.
func (s *store) Add(object map[string]any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.put(object)
}

// Delete removes one object.
func (s *store) Delete(kind, key string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.remove(objectID{kind, key})
}

// Pod returns the stored pod `namespace/name` as a corev1 object.
func (s *store) Pod(key string) (*corev1.Pod, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	e, ok := s.entries[objectID{"Pod", key}]
	if !ok {
		return nil, fmt.Errorf("Pod %s: not found", key)
	}
	return toPod(e.object)
}

func toPod(object map[string]any) (*corev1.Pod, error) {
	raw, err := json.Marshal(object)
	if err != nil {
		return nil, fmt.Errorf("Pod %s: %w", idOf(object).key, err)
	}
	var pod corev1.Pod
	if err := json.Unmarshal(raw, &pod); err != nil {
		return nil, fmt.Errorf("Pod %s: %w", idOf(object).key, err)
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
	e, ok := s.entries[objectID{"Pod", key}]
	if !ok {
		return fmt.Errorf("Pod %s: not found", key)
	}
	pod, err := toPod(e.object)
	if err != nil {
		return err
	}
	pod.Spec.NodeName = node
	fields, err := corev1Fields(pod, "Pod")
	if err != nil {
		return fmt.Errorf("Pod %s: %w", key, err)
	}
	keepExtendedStatus(e.object, fields)
	s.put(fields)
	return nil
}

// keepExtendedStatus copies status.extendedResourceClaimStatus (KEP-5004, Kubernetes 1.34) from
// a stored pod to its re-encoding: k8s.io/api v0.33's Pod type, which the encoding goes through,
// does not have the field.
func keepExtendedStatus(from, to map[string]any) {
	old, _ := from["status"].(map[string]any)
	if old["extendedResourceClaimStatus"] == nil {
		return
	}
	status, _ := to["status"].(map[string]any)
	if status == nil {
		status = map[string]any{}
		to["status"] = status
	}
	status["extendedResourceClaimStatus"] = old["extendedResourceClaimStatus"]
}

// Changes is the feed document for a cursor; calls with the same cursor and store revision return
// the same document.
func (s *store) Changes(cursor string) []byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.feedDoc != nil && s.feedCursor == cursor && s.feedRev == s.revision {
		return s.feedDoc
	}
	doc := s.changes(cursor)
	s.feedCursor, s.feedRev, s.feedDoc = cursor, s.revision, doc
	return doc
}

func (s *store) changes(cursor string) []byte {
	since, ok := s.parseCursor(cursor)
	var b bytes.Buffer
	fmt.Fprintf(&b, `{"cursor":"%d.%d","resync":%t,"events":[`, s.epoch, s.revision, !ok)
	revs := make([]uint64, 0, len(s.byRevision))
	for rev := range s.byRevision {
		if rev > since {
			revs = append(revs, rev)
		}
	}
	sort.Slice(revs, func(i, j int) bool { return revs[i] < revs[j] })
	first := true
	event := func(kind string, object []byte) {
		if !first {
			b.WriteByte(',')
		}
		first = false
		fmt.Fprintf(&b, `{"type":"%s","object":`, kind)
		b.Write(object)
		b.WriteByte('}')
	}
	for _, rev := range revs {
		id := s.byRevision[rev]
		if e, live := s.entries[id]; live && e.modified == rev {
			if ok && e.created <= since {
				event("MODIFIED", e.json)
			} else {
				event("ADDED", e.json)
			}
		} else if t, dead := s.tombstones[id]; dead && t.deleted == rev && ok && t.created <= since {
			event("DELETED", t.json)
		}
	}
	b.WriteString("]}")
	return b.Bytes()
}

// parseCursor returns the revision of a cursor of this store; false means resync.
func (s *store) parseCursor(cursor string) (uint64, bool) {
	epoch, rev, found := strings.Cut(cursor, ".")
	if !found {
		return 0, false
	}
	e, err1 := strconv.ParseUint(epoch, 10, 64)
	r, err2 := strconv.ParseUint(rev, 10, 64)
	if err1 != nil || err2 != nil || e != s.epoch || r > s.revision {
		return 0, false
	}
	return r, true
}

func decodeAllocation(raw []byte) (*allocationResult, bool) {
	var a allocationResult
	if err := json.Unmarshal(raw, &a); err != nil {
		return nil, false
	}
	return &a, true
}

// sameAllocation compares two AllocationResults by meaning (absent and empty lists are equal,
// quantities compare by value).
func sameAllocation(a, b []byte) bool {
	x, ok1 := decodeAllocation(a)
	y, ok2 := decodeAllocation(b)
	return ok1 && ok2 && apiequality.Semantic.DeepEqual(x, y)
}

// claimAllocation is a stored claim's status.allocation as JSON (nil when it has none); false
// when there is no such claim. An allocation that does not encode is an error.
func (s *store) claimAllocation(id objectID) ([]byte, bool, error) {
	e, ok := s.entries[id]
	if !ok {
		return nil, false, nil
	}
	status, _ := e.object["status"].(map[string]any)
	if status["allocation"] == nil {
		return nil, true, nil
	}
	raw, err := json.Marshal(status["allocation"])
	if err != nil {
		return nil, true, fmt.Errorf("%s %s: status.allocation: %w", id.kind, id.key, err)
	}
	return raw, true, nil
}

// generatedClaim is the claim a pod's spec.resourceClaims entry generates from its template when
// that claim does not exist yet: `<pod>-<entry>`, the template's metadata and spec, the pod as
// controlling owner. Returns the entry name and the claim, or false.
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
		if objectKey(pod.Namespace, name) != claim || done {
			continue
		}
		t, ok := s.entries[objectID{"ResourceClaimTemplate", objectKey(pod.Namespace, *rc.ResourceClaimTemplateName)}]
		if !ok {
			return "", nil, false
		}
		spec, _ := t.object["spec"].(map[string]any)
		meta := map[string]any{}
		if m, ok := spec["metadata"].(map[string]any); ok {
			for k, v := range m {
				meta[k] = v
			}
		}
		meta["name"], meta["namespace"] = name, pod.Namespace
		meta["ownerReferences"] = []any{map[string]any{
			"apiVersion": "v1", "kind": "Pod", "name": pod.Name, "uid": string(pod.UID), "controller": true,
		}}
		object := map[string]any{
			"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim", "metadata": meta,
			"spec": spec["spec"],
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
	if _, ok := decodeAllocation(allocation); !ok {
		return dramodule.Invalid
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	id := objectID{"ResourceClaim", claim}
	if _, exists := s.entries[id]; !exists {
		if code := s.createGenerated(claim, pod, allocation); code != dramodule.OK {
			return code
		}
	}
	current, _, err := s.claimAllocation(id)
	if err != nil {
		return dramodule.Invalid
	}
	if current != nil && !sameAllocation(current, allocation) {
		return dramodule.Conflict
	}
	s.pending[claim] = pending{podUID: string(pod.UID), allocation: append(json.RawMessage(nil), allocation...)}
	s.touch(id)
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
	source, stored := pod, false
	podID := objectID{"Pod", objectKey(pod.Namespace, pod.Name)}
	if e, ok := s.entries[podID]; ok {
		if p, err := toPod(e.object); err == nil {
			source, stored = p, true
		}
	}
	if entryName, generated, ok := s.generatedClaim(claim, source); ok {
		s.put(generated)
		if stored {
			name := str(generated, "metadata", "name")
			source.Status.ResourceClaimStatuses = append(source.Status.ResourceClaimStatuses,
				corev1.PodResourceClaimStatus{Name: entryName, ResourceClaimName: &name})
			fields, err := corev1Fields(source, "Pod")
			if err != nil {
				return dramodule.Invalid
			}
			keepExtendedStatus(s.entries[podID].object, fields)
			s.put(fields)
		}
		return dramodule.OK
	}
	hasStatus := false
	if stored {
		status, _ := s.entries[podID].object["status"].(map[string]any)
		hasStatus = status["extendedResourceClaimStatus"] != nil
	}
	object, status, code := s.extendedClaim(claim, source, hasStatus, allocation)
	if code != dramodule.OK {
		return code
	}
	var updated map[string]any
	if stored {
		// The stored pod with status.extendedResourceClaimStatus, as JSON fields (k8s.io/api
		// v0.33's Pod has no such field).
		raw, err := json.Marshal(status)
		if err != nil {
			return dramodule.Invalid
		}
		var statusFields map[string]any
		if err := json.Unmarshal(raw, &statusFields); err != nil {
			return dramodule.Invalid
		}
		fields := s.entries[podID].object
		updated = make(map[string]any, len(fields))
		for k, v := range fields {
			updated[k] = v
		}
		podStatus := map[string]any{}
		if old, ok := fields["status"].(map[string]any); ok {
			for k, v := range old {
				podStatus[k] = v
			}
		}
		podStatus["extendedResourceClaimStatus"] = statusFields
		updated["status"] = podStatus
	}
	s.put(object)
	if updated != nil {
		s.put(updated)
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
	if hasStatus || objectKey(pod.Namespace, extendedClaimName(pod)) != claim {
		return nil, nil, dramodule.NotFound
	}
	alloc, ok := decodeAllocation(allocation)
	if !ok {
		return nil, nil, dramodule.Invalid
	}
	var classes []map[string]any
	for id, e := range s.entries {
		if id.kind == "DeviceClass" {
			classes = append(classes, e.object)
		}
	}
	object, status, ok, err := claimForAllocation(pod, classes, alloc)
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

// ClearPending drops a pod's pending allocations (Unreserve). A KEP-5004 special claim of the pod
// that is still unallocated is deleted and the pod's status.extendedResourceClaimStatus cleared
// when it names that claim, as upstream's Unreserve deletes the claim it created (a claim
// generated from a template stays: the resourceclaim controller keeps it). Mirrors
// `ObjectStore::clear_pending_for_pod`.
func (s *store) ClearPending(podUID string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var claims []string
	for claim, p := range s.pending {
		if p.podUID == podUID {
			claims = append(claims, claim)
		}
	}
	sort.Strings(claims)
	for _, claim := range claims {
		delete(s.pending, claim)
		id := objectID{"ResourceClaim", claim}
		e, ok := s.entries[id]
		if !ok {
			continue
		}
		status, _ := e.object["status"].(map[string]any)
		if status["allocation"] != nil || !isExtendedClaimOf(e.object, podUID) {
			s.touch(id)
			continue
		}
		if err := s.remove(id); err != nil {
			panic(fmt.Sprintf("deleting a claim that was just found: %v", err))
		}
		s.forgetExtendedClaim(podUID, claim)
	}
}

// forgetExtendedClaim clears status.extendedResourceClaimStatus of the pod with UID `podUID` when
// it names `claim`. The caller holds the lock.
func (s *store) forgetExtendedClaim(podUID, claim string) {
	for id, e := range s.entries {
		if id.kind != "Pod" || str(e.object, "metadata", "uid") != podUID {
			continue
		}
		status, _ := e.object["status"].(map[string]any)
		named := str(status, "extendedResourceClaimStatus", "resourceClaimName")
		if status["extendedResourceClaimStatus"] == nil || objectKey(str(e.object, "metadata", "namespace"), named) != claim {
			return
		}
		updated := make(map[string]any, len(e.object))
		for k, v := range e.object {
			updated[k] = v
		}
		kept := map[string]any{}
		for k, v := range status {
			if k != "extendedResourceClaimStatus" {
				kept[k] = v
			}
		}
		updated["status"] = kept
		s.put(updated)
		return
	}
}

// WriteAllocation sets status.allocation of a claim and adds the pod to status.reservedFor
// (PreBind), creating a claim the pod generates (from a template, or its KEP-5004 special claim)
// first. Mirrors `ObjectStore::write_allocation`.
func (s *store) WriteAllocation(claim string, pod *corev1.Pod, allocation []byte) int32 {
	if _, ok := decodeAllocation(allocation); !ok {
		return dramodule.Invalid
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	id := objectID{"ResourceClaim", claim}
	if _, exists := s.entries[id]; !exists {
		if code := s.createGenerated(claim, pod, allocation); code != dramodule.OK {
			return code
		}
	}
	current, _, err := s.claimAllocation(id)
	if err != nil {
		return dramodule.Invalid
	}
	if current != nil && !sameAllocation(current, allocation) {
		return dramodule.Conflict
	}
	e := s.entries[id]
	object := make(map[string]any, len(e.object))
	for k, v := range e.object {
		object[k] = v
	}
	status := map[string]any{}
	if old, ok := e.object["status"].(map[string]any); ok {
		for k, v := range old {
			status[k] = v
		}
	}
	var alloc any
	if err := json.Unmarshal(allocation, &alloc); err != nil {
		return dramodule.Invalid
	}
	status["allocation"] = alloc
	reserved, _ := status["reservedFor"].([]any)
	found := false
	for _, r := range reserved {
		m, _ := r.(map[string]any)
		found = found || (m["uid"] == string(pod.UID) && m["resource"] == "pods")
	}
	if !found {
		reserved = append(append([]any(nil), reserved...),
			map[string]any{"resource": "pods", "name": pod.Name, "uid": string(pod.UID)})
	}
	status["reservedFor"] = reserved
	object["status"] = status
	delete(s.pending, claim)
	s.put(object)
	s.writes[string(pod.UID)] = append(s.writes[string(pod.UID)], write{claim, append(json.RawMessage(nil), allocation...)})
	return dramodule.OK
}

// ExtendedStatus is the stored pod's status.extendedResourceClaimStatus, or nil.
func (s *store) ExtendedStatus(key string) (*extendedStatus, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	e, ok := s.entries[objectID{"Pod", key}]
	if !ok {
		return nil, fmt.Errorf("Pod %s: not found", key)
	}
	status, _ := e.object["status"].(map[string]any)
	if status["extendedResourceClaimStatus"] == nil {
		return nil, nil
	}
	raw, err := json.Marshal(status["extendedResourceClaimStatus"])
	if err != nil {
		return nil, fmt.Errorf("Pod %s: status.extendedResourceClaimStatus: %w", key, err)
	}
	var out extendedStatus
	if err := json.Unmarshal(raw, &out); err != nil {
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
