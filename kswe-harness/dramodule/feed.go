package dramodule

// The object feed behind `changes` (docs/kswe-dra-extension.md §2.1), shared by every backend:
// the harness's recorded store and the scheduler's informer backend keep their objects in a Feed
// and differ only in where objects come from and where writes go.

import (
	"bytes"
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// Kinds are the kinds the feed carries.
var Kinds = map[string]bool{
	"Node": true, "Pod": true, "DeviceClass": true, "ResourceSlice": true,
	"ResourceClaim": true, "ResourceClaimTemplate": true, "DeviceTaintRule": true,
}

var nextEpoch atomic.Uint64

// NextEpoch is a number no earlier call in this process returned: part of a feed's epoch, so
// that a cursor of another feed resyncs.
func NextEpoch() uint64 { return nextEpoch.Add(1) }

// ID names an object: its kind and `namespace/name` (`name` for cluster-scoped kinds).
type ID struct{ Kind, Key string }

// Key is `namespace/name`, or name when namespace is empty.
func Key(namespace, name string) string {
	if namespace == "" {
		return name
	}
	return namespace + "/" + name
}

// IDOf is the ID of an object given as JSON fields.
func IDOf(object map[string]any) ID {
	kind, _, _ := unstructured.NestedString(object, "kind")
	namespace, _, _ := unstructured.NestedString(object, "metadata", "namespace")
	name, _, _ := unstructured.NestedString(object, "metadata", "name")
	return ID{kind, Key(namespace, name)}
}

type entry struct {
	// object is the object as JSON fields.
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

// Feed is a versioned set of objects: every Put and Remove is a revision, and Changes is the
// feed document after a cursor `<epoch>.<revision>` (ADDED, MODIFIED, DELETED; a resync for a
// cursor of another feed or epoch). A pending allocation of a claim with no status.allocation
// shows as its status.allocation (§2.2). Not safe for concurrent use: its owner serialises calls.
type Feed struct {
	// PageLimit is the document size after which Changes ends the page with "more": true
	// (0: one page).
	PageLimit int
	// StampVersions makes Put set metadata.resourceVersion to the object's revision, for a
	// backend that is its own API server.
	StampVersions bool

	epoch      uint64
	revision   uint64
	entries    map[ID]*entry
	tombstones map[ID]*tombstone
	byRevision map[uint64]ID
	pending    map[string]pending
	// The last document with its cursor and revision.
	cacheCursor string
	cacheRev    uint64
	cacheDoc    []byte
}

// NewFeed is an empty feed whose cursors carry epoch.
func NewFeed(epoch uint64) *Feed {
	return &Feed{
		epoch:      epoch,
		entries:    map[ID]*entry{},
		tombstones: map[ID]*tombstone{},
		byRevision: map[uint64]ID{},
		pending:    map[string]pending{},
	}
}

// Put creates or replaces an object and returns its revision.
func (f *Feed) Put(object map[string]any) uint64 {
	id := IDOf(object)
	f.revision++
	rev := f.revision
	if f.StampVersions {
		if err := unstructured.SetNestedField(object, strconv.FormatUint(rev, 10), "metadata", "resourceVersion"); err != nil {
			panic(fmt.Sprintf("%s %s: metadata: %v", id.Kind, id.Key, err))
		}
	}
	created := rev
	if old, ok := f.entries[id]; ok {
		delete(f.byRevision, old.modified)
		created = old.created
	} else if t, ok := f.tombstones[id]; ok {
		delete(f.byRevision, t.deleted)
		delete(f.tombstones, id)
	}
	e := &entry{object: object, created: created, modified: rev}
	e.json = f.render(id, object)
	f.entries[id] = e
	f.byRevision[rev] = id
	return rev
}

// Remove deletes an object, leaving a tombstone for the feed; false when there is no such object.
func (f *Feed) Remove(id ID) bool {
	e, ok := f.entries[id]
	if !ok {
		return false
	}
	delete(f.entries, id)
	delete(f.byRevision, e.modified)
	f.revision++
	f.byRevision[f.revision] = id
	f.tombstones[id] = &tombstone{created: e.created, deleted: f.revision, json: e.json}
	return true
}

// Get is the object id as stored (not to be modified: Put a copy), or false.
func (f *Feed) Get(id ID) (map[string]any, bool) {
	e, ok := f.entries[id]
	if !ok {
		return nil, false
	}
	return e.object, true
}

// List is every object of kind, in no particular order.
func (f *Feed) List(kind string) []map[string]any {
	var out []map[string]any
	for id, e := range f.entries {
		if id.Kind == kind {
			out = append(out, e.object)
		}
	}
	return out
}

// Len is the number of objects.
func (f *Feed) Len() int { return len(f.entries) }

// render is the object as the feed shows it: a claim without status.allocation shows its pending
// allocation as status.allocation.
func (f *Feed) render(id ID, object map[string]any) []byte {
	view := object
	if p, ok := f.pending[id.Key]; ok && id.Kind == "ResourceClaim" {
		status := Status(object)
		if status["allocation"] == nil {
			view = make(map[string]any, len(object))
			for k, v := range object {
				view[k] = v
			}
			overlay := make(map[string]any, len(status)+1)
			for k, v := range status {
				overlay[k] = v
			}
			overlay["allocation"] = p.allocation
			view["status"] = overlay
		}
	}
	out, err := json.Marshal(view)
	if err != nil {
		panic(fmt.Sprintf("%s %s: does not encode: %v", id.Kind, id.Key, err))
	}
	return out
}

// Touch re-renders an object whose view changed and moves it to a new revision (MODIFIED).
func (f *Feed) Touch(id ID) {
	e, ok := f.entries[id]
	if !ok {
		return
	}
	f.revision++
	delete(f.byRevision, e.modified)
	e.modified = f.revision
	e.json = f.render(id, e.object)
	f.byRevision[f.revision] = id
}

// SetPending records an allocation in flight of claim (`namespace/name`) for a pod and shows it in
// the feed (the claim's next revision).
func (f *Feed) SetPending(claim, podUID string, allocation []byte) {
	f.pending[claim] = pending{podUID: podUID, allocation: append(json.RawMessage(nil), allocation...)}
	f.Touch(ID{"ResourceClaim", claim})
}

// Pending reports whether an allocation of claim is in flight.
func (f *Feed) Pending(claim string) bool {
	_, ok := f.pending[claim]
	return ok
}

// PendingOf are the claims with an allocation in flight for the pod, sorted.
func (f *Feed) PendingOf(podUID string) []string {
	var claims []string
	for claim, p := range f.pending {
		if p.podUID == podUID {
			claims = append(claims, claim)
		}
	}
	sort.Strings(claims)
	return claims
}

// ForgetPending drops the allocation in flight of claim without a new revision: the caller puts,
// touches or removes the claim next.
func (f *Feed) ForgetPending(claim string) { delete(f.pending, claim) }

// Changes is the feed document for a cursor; calls with the same cursor at the same revision
// return the same document.
func (f *Feed) Changes(cursor string) []byte {
	if f.cacheDoc != nil && f.cacheCursor == cursor && f.cacheRev == f.revision {
		return f.cacheDoc
	}
	doc := f.changes(cursor)
	f.cacheCursor, f.cacheRev, f.cacheDoc = cursor, f.revision, doc
	return doc
}

func (f *Feed) changes(cursor string) []byte {
	since, ok := f.parseCursor(cursor)
	revs := make([]uint64, 0, len(f.byRevision))
	for rev := range f.byRevision {
		if rev > since {
			revs = append(revs, rev)
		}
	}
	sort.Slice(revs, func(i, j int) bool { return revs[i] < revs[j] })
	var events bytes.Buffer
	last, more := f.revision, false
	for _, rev := range revs {
		if f.PageLimit > 0 && events.Len() > f.PageLimit {
			more, last = true, rev-1
			break
		}
		id := f.byRevision[rev]
		var kind string
		var object []byte
		if e, live := f.entries[id]; live && e.modified == rev {
			kind, object = "ADDED", e.json
			if ok && e.created <= since {
				kind = "MODIFIED"
			}
		} else if t, dead := f.tombstones[id]; dead && t.deleted == rev && ok && t.created <= since {
			kind, object = "DELETED", t.json
		} else {
			continue
		}
		if events.Len() > 0 {
			events.WriteByte(',')
		}
		fmt.Fprintf(&events, `{"type":"%s","object":`, kind)
		events.Write(object)
		events.WriteByte('}')
	}
	var b bytes.Buffer
	fmt.Fprintf(&b, `{"cursor":"%d.%d","resync":%t,`, f.epoch, last, !ok)
	if more {
		b.WriteString(`"more":true,`)
	}
	b.WriteString(`"events":[`)
	b.Write(events.Bytes())
	b.WriteString("]}")
	return b.Bytes()
}

// parseCursor returns the revision of a cursor of this feed; false means resync.
func (f *Feed) parseCursor(cursor string) (uint64, bool) {
	epoch, rev, found := strings.Cut(cursor, ".")
	if !found {
		return 0, false
	}
	e, err1 := strconv.ParseUint(epoch, 10, 64)
	r, err2 := strconv.ParseUint(rev, 10, 64)
	if err1 != nil || err2 != nil || e != f.epoch || r > f.revision {
		return 0, false
	}
	return r, true
}
