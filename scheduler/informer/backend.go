// Package informer is a sharing-affinity.dra/v1 Backend (kswe-harness/dramodule) backed by a live
// cluster: dynamic informers (unstructured JSON, so resource.k8s.io/v1 works with client-go v0.33)
// feed a versioned store whose every add/update/delete is a feed revision
// (docs/kswe-dra-extension.md §2.1), and WriteAllocation updates the claim's status through the
// API server with optimistic concurrency (§2.2).
package informer

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/retry"
	"k8s.io/klog/v2"

	"sharing-affinity/kswe-harness/dramodule"
)

// PageLimit is the size after which a feed document ends with "more": true.
const PageLimit = 1 << 20

// Resources are the kinds the feed carries. DeviceTaintRule is v1alpha3 on v1.37 and optional.
var (
	Claims          = schema.GroupVersionResource{Group: "resource.k8s.io", Version: "v1", Resource: "resourceclaims"}
	DeviceTaintRule = schema.GroupVersionResource{Group: "resource.k8s.io", Version: "v1alpha3", Resource: "devicetaintrules"}
	Resources       = []schema.GroupVersionResource{
		{Version: "v1", Resource: "nodes"},
		{Version: "v1", Resource: "pods"},
		{Group: "resource.k8s.io", Version: "v1", Resource: "deviceclasses"},
		{Group: "resource.k8s.io", Version: "v1", Resource: "resourceslices"},
		Claims,
		{Group: "resource.k8s.io", Version: "v1", Resource: "resourceclaimtemplates"},
	}
)

var nextEpoch atomic.Uint64

type objectID struct{ kind, key string }

type entry struct {
	object            map[string]any
	created, modified uint64
	json              []byte
}

type tombstone struct {
	created, deleted uint64
	json             []byte
}

type pending struct {
	podUID     string
	allocation json.RawMessage
}

// Backend is the live-cluster backend. See the package comment.
type Backend struct {
	client dynamic.Interface
	synced chan struct{}
	// SyncTimeout bounds how long Changes waits for the informers' first sync.
	SyncTimeout time.Duration

	mu         sync.Mutex
	epoch      uint64
	revision   uint64
	entries    map[objectID]*entry
	tombstones map[objectID]*tombstone
	byRevision map[uint64]objectID
	pending    map[string]pending

	onChange atomic.Pointer[func()]
}

// OnChange sets a function called after every informer event of a DRA kind (not Pods or Nodes,
// whose events reach kube-scheduler's queue itself): kube-scheduler v1.33 does not watch
// resource.k8s.io/v1, so nothing else requeues a pod that only a claim, slice, class or taint
// rule change makes schedulable.
func (b *Backend) OnChange(f func()) { b.onChange.Store(&f) }

func (b *Backend) changed(kind string) {
	if kind == "Pod" || kind == "Node" {
		return
	}
	if f := b.onChange.Load(); f != nil {
		(*f)()
	}
}

// New returns a backend over client; Start runs its informers.
func New(client dynamic.Interface) *Backend {
	return &Backend{
		client:      client,
		synced:      make(chan struct{}),
		SyncTimeout: time.Minute,
		epoch:       uint64(time.Now().UnixNano()) + nextEpoch.Add(1),
		entries:     map[objectID]*entry{},
		tombstones:  map[objectID]*tombstone{},
		byRevision:  map[uint64]objectID{},
		pending:     map[string]pending{},
	}
}

// Start creates the informers, starts them and closes the sync gate once every informer has
// synced (in a goroutine: the scheduler calls plugin factories before it starts informers).
// DeviceTaintRule is skipped with a log line when the API server does not serve it.
func (b *Backend) Start(ctx context.Context) {
	factory := dynamicinformer.NewDynamicSharedInformerFactory(b.client, 0)
	resources := append([]schema.GroupVersionResource(nil), Resources...)
	if _, err := b.client.Resource(DeviceTaintRule).List(ctx, metav1.ListOptions{Limit: 1}); err != nil {
		klog.FromContext(ctx).Info("sharing-affinity: not watching DeviceTaintRules", "resource", DeviceTaintRule.String(), "err", err)
	} else {
		resources = append(resources, DeviceTaintRule)
	}
	var syncs []cache.InformerSynced
	for _, gvr := range resources {
		inf := factory.ForResource(gvr).Informer()
		_, _ = inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
			AddFunc:    func(obj any) { b.Upsert(obj) },
			UpdateFunc: func(_, obj any) { b.Upsert(obj) },
			DeleteFunc: func(obj any) { b.Remove(obj) },
		})
		syncs = append(syncs, inf.HasSynced)
	}
	factory.Start(ctx.Done())
	go func() {
		if cache.WaitForCacheSync(ctx.Done(), syncs...) {
			klog.FromContext(ctx).Info("sharing-affinity: informers synced")
			close(b.synced)
		}
	}()
}

// Synced is closed once the informers have synced.
func (b *Backend) Synced() <-chan struct{} { return b.synced }

// MarkSynced opens the sync gate without informers (tests).
func (b *Backend) MarkSynced() { close(b.synced) }

func unstructuredOf(obj any) (map[string]any, bool) {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return nil, false
	}
	return u.UnstructuredContent(), true
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

func key(namespace, name string) string {
	if namespace == "" {
		return name
	}
	return namespace + "/" + name
}

func idOf(o map[string]any) objectID {
	return objectID{str(o, "kind"), key(str(o, "metadata", "namespace"), str(o, "metadata", "name"))}
}

// render is the object as the feed shows it: a claim with a pending allocation and none of its
// own shows the pending one as status.allocation. The caller holds the lock.
func (b *Backend) render(id objectID, object map[string]any) []byte {
	view := object
	if p, ok := b.pending[id.key]; ok && id.kind == "ResourceClaim" {
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

// Upsert records an added or updated object (an informer event) as a new revision.
func (b *Backend) Upsert(obj any) {
	o, ok := unstructuredOf(obj)
	if !ok {
		return
	}
	b.mu.Lock()
	b.put(o)
	b.mu.Unlock()
	b.changed(str(o, "kind"))
}

func (b *Backend) put(o map[string]any) {
	id := idOf(o)
	b.revision++
	e, ok := b.entries[id]
	if !ok {
		e = &entry{created: b.revision}
		b.entries[id] = e
		delete(b.tombstones, id)
	} else {
		delete(b.byRevision, e.modified)
	}
	if id.kind == "ResourceClaim" {
		if status, _ := o["status"].(map[string]any); status["allocation"] != nil {
			delete(b.pending, id.key)
		}
	}
	e.object, e.modified = o, b.revision
	e.json = b.render(id, o)
	b.byRevision[b.revision] = id
}

// Remove records a deleted object as a tombstone revision.
func (b *Backend) Remove(obj any) {
	o, ok := unstructuredOf(obj)
	if !ok {
		return
	}
	id := idOf(o)
	defer b.changed(id.kind)
	b.mu.Lock()
	defer b.mu.Unlock()
	e, ok := b.entries[id]
	if !ok {
		return
	}
	b.revision++
	delete(b.byRevision, e.modified)
	delete(b.entries, id)
	if id.kind == "ResourceClaim" {
		delete(b.pending, id.key)
	}
	b.tombstones[id] = &tombstone{created: e.created, deleted: b.revision, json: e.json}
	b.byRevision[b.revision] = id
}

func (b *Backend) touch(id objectID) {
	e, ok := b.entries[id]
	if !ok {
		return
	}
	b.revision++
	delete(b.byRevision, e.modified)
	e.modified = b.revision
	e.json = b.render(id, e.object)
	b.byRevision[b.revision] = id
}

// Changes implements dramodule.Backend. Before the informers' first sync it waits for it (at most
// SyncTimeout), so the first scheduling cycle sees the whole cluster; after the timeout it answers
// with what it has, and the next call resyncs nothing but sees the later events.
func (b *Backend) Changes(cursor string) []byte {
	select {
	case <-b.synced:
	case <-time.After(b.SyncTimeout):
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	since, ok := b.parseCursor(cursor)
	var buf bytes.Buffer
	revs := make([]uint64, 0, len(b.byRevision))
	for rev := range b.byRevision {
		if rev > since {
			revs = append(revs, rev)
		}
	}
	sort.Slice(revs, func(i, j int) bool { return revs[i] < revs[j] })
	first := true
	last := b.revision
	more := false
	for _, rev := range revs {
		if buf.Len() > PageLimit {
			more, last = true, rev-1
			break
		}
		id := b.byRevision[rev]
		var kind string
		var object []byte
		if e, live := b.entries[id]; live && e.modified == rev {
			kind, object = "ADDED", e.json
			if ok && e.created <= since {
				kind = "MODIFIED"
			}
		} else if t, dead := b.tombstones[id]; dead && t.deleted == rev && ok && t.created <= since {
			kind, object = "DELETED", t.json
		} else {
			continue
		}
		if !first {
			buf.WriteByte(',')
		}
		first = false
		fmt.Fprintf(&buf, `{"type":"%s","object":`, kind)
		buf.Write(object)
		buf.WriteByte('}')
	}
	head := fmt.Sprintf(`{"cursor":"%d.%d","resync":%t,`, b.epoch, last, !ok)
	if more {
		head += `"more":true,`
	}
	return append(append([]byte(head+`"events":[`), buf.Bytes()...), "]}"...)
}

func (b *Backend) parseCursor(cursor string) (uint64, bool) {
	epoch, rev, found := strings.Cut(cursor, ".")
	if !found {
		return 0, false
	}
	e, err1 := strconv.ParseUint(epoch, 10, 64)
	r, err2 := strconv.ParseUint(rev, 10, 64)
	if err1 != nil || err2 != nil || e != b.epoch || r > b.revision {
		return 0, false
	}
	return r, true
}

func sameJSON(a any, raw []byte) bool {
	var x, y any
	ja, err := json.Marshal(a)
	if err != nil || json.Unmarshal(ja, &x) != nil || json.Unmarshal(raw, &y) != nil {
		return false
	}
	return reflect.DeepEqual(x, y)
}

// SetPending implements dramodule.Backend: the allocation shows as the claim's status.allocation
// until it is written or dropped. The scheduler never creates claims: a claim not (yet) in the
// informer cache is NotFound.
func (b *Backend) SetPending(claim string, pod *corev1.Pod, allocation []byte) int32 {
	var a map[string]any
	if json.Unmarshal(allocation, &a) != nil {
		return dramodule.Invalid
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	id := objectID{"ResourceClaim", claim}
	e, ok := b.entries[id]
	if !ok {
		return dramodule.NotFound
	}
	status, _ := e.object["status"].(map[string]any)
	if cur := status["allocation"]; cur != nil && !sameJSON(cur, allocation) {
		return dramodule.Conflict
	}
	b.pending[claim] = pending{podUID: string(pod.UID), allocation: append(json.RawMessage(nil), allocation...)}
	b.touch(id)
	return dramodule.OK
}

// DropPending drops the pending allocations of a pod (Unreserve, §2.2).
func (b *Backend) DropPending(podUID string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for claim, p := range b.pending {
		if p.podUID == podUID {
			delete(b.pending, claim)
			b.touch(objectID{"ResourceClaim", claim})
		}
	}
}

// WriteAllocation implements dramodule.Backend: status.allocation and the pod in
// status.reservedFor, by UpdateStatus with the claim's resourceVersion, retried on a conflict
// after re-reading the claim. Conflict (3) when the claim holds another allocation; NotFound when
// it does not exist; Invalid for bad JSON or any other failed write (PreBind then fails).
func (b *Backend) WriteAllocation(claim string, pod *corev1.Pod, allocation []byte) int32 {
	var alloc map[string]any
	if json.Unmarshal(allocation, &alloc) != nil {
		return dramodule.Invalid
	}
	namespace, name, found := strings.Cut(claim, "/")
	if !found {
		return dramodule.Invalid
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	client := b.client.Resource(Claims).Namespace(namespace)
	result := dramodule.OK
	var written *unstructured.Unstructured
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		result = dramodule.OK
		obj, err := client.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		status, _ := obj.Object["status"].(map[string]any)
		if status == nil {
			status = map[string]any{}
		}
		if cur := status["allocation"]; cur != nil && !sameJSON(cur, allocation) {
			result = dramodule.Conflict
			return nil
		}
		status["allocation"] = alloc
		reserved, _ := status["reservedFor"].([]any)
		has := false
		for _, r := range reserved {
			if m, ok := r.(map[string]any); ok && str(m, "uid") == string(pod.UID) {
				has = true
			}
		}
		if !has {
			reserved = append(reserved, map[string]any{"resource": "pods", "name": pod.Name, "uid": string(pod.UID)})
		}
		status["reservedFor"] = reserved
		obj.Object["status"] = status
		written, err = client.UpdateStatus(ctx, obj, metav1.UpdateOptions{})
		return err
	})
	switch {
	case apierrors.IsNotFound(err):
		return dramodule.NotFound
	case err != nil:
		klog.ErrorS(err, "sharing-affinity: writing the allocation failed", "claim", claim, "pod", klog.KObj(pod))
		return dramodule.Invalid
	case result != dramodule.OK:
		return result
	}
	if written != nil {
		if written.GetKind() == "" {
			written.SetAPIVersion("resource.k8s.io/v1")
			written.SetKind("ResourceClaim")
		}
		b.mu.Lock()
		delete(b.pending, claim)
		b.put(written.UnstructuredContent())
		b.mu.Unlock()
	}
	return dramodule.OK
}
