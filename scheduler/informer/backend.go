// Package informer is a sharing-affinity.dra/v1 Backend (kswe-harness/dramodule) backed by a live
// cluster: dynamic informers (unstructured JSON, so resource.k8s.io/v1 works with client-go v0.33)
// feed a dramodule.Feed, the feed the harness's recorded store also keeps, where every
// add/update/delete is a revision (docs/kswe-dra-extension.md §2.1); WriteAllocation and
// Deallocate update the claim's status through the API server with optimistic concurrency (§2.2,
// §2.3), ReleaseClaims patches the pod out of status.reservedFor at Unreserve (§2.2), and Wait
// sleeps while PreBind waits for binding conditions (§2.5).
package informer

import (
	"context"
	"encoding/json"
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

// Backend is the live-cluster backend. See the package comment.
type Backend struct {
	client dynamic.Interface
	synced chan struct{}
	// SyncTimeout bounds how long Changes waits for the informers' first sync.
	SyncTimeout time.Duration

	// mu serialises the feed's calls.
	mu   sync.Mutex
	feed *dramodule.Feed

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
	feed := dramodule.NewFeed(uint64(time.Now().UnixNano()) + dramodule.NextEpoch())
	feed.PageLimit = PageLimit
	return &Backend{client: client, synced: make(chan struct{}), SyncTimeout: time.Minute, feed: feed}
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

// Claim is the stored ResourceClaim `namespace/name` (not to be modified), or nil.
func (b *Backend) Claim(key string) map[string]any {
	b.mu.Lock()
	defer b.mu.Unlock()
	object, _ := b.feed.Get(dramodule.ID{Kind: "ResourceClaim", Key: key})
	return object
}

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

// Upsert records an added or updated object (an informer event) as a new revision.
func (b *Backend) Upsert(obj any) {
	o, ok := unstructuredOf(obj)
	if !ok {
		return
	}
	b.mu.Lock()
	b.put(o)
	b.mu.Unlock()
	b.changed(dramodule.IDOf(o).Kind)
}

// put stores an object as the API server has it: a claim's own allocation replaces a pending
// one. The caller holds the lock.
func (b *Backend) put(o map[string]any) {
	if id := dramodule.IDOf(o); id.Kind == "ResourceClaim" && dramodule.Status(o)["allocation"] != nil {
		b.feed.ForgetPending(id.Key)
	}
	b.feed.Put(o)
}

// Remove records a deleted object as a tombstone revision.
func (b *Backend) Remove(obj any) {
	o, ok := unstructuredOf(obj)
	if !ok {
		return
	}
	id := dramodule.IDOf(o)
	defer b.changed(id.Kind)
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.feed.Remove(id) && id.Kind == "ResourceClaim" {
		b.feed.ForgetPending(id.Key)
	}
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
	return b.feed.Changes(cursor)
}

// holdsOther reports whether a claim's status.allocation (as the API server has it) is an
// allocation other than the guest's, compared by meaning (dramodule.SameAllocation).
func holdsOther(current any, allocation []byte) bool {
	if current == nil {
		return false
	}
	raw, err := json.Marshal(current)
	return err != nil || !dramodule.SameAllocation(raw, allocation)
}

// SetPending implements dramodule.Backend: the allocation shows as the claim's status.allocation
// until it is written or dropped. The scheduler never creates claims: a claim not (yet) in the
// informer cache is NotFound.
func (b *Backend) SetPending(claim string, pod *corev1.Pod, allocation []byte) int32 {
	if _, ok := dramodule.DecodeAllocation(allocation); !ok {
		return dramodule.Invalid
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	object, ok := b.feed.Get(dramodule.ID{Kind: "ResourceClaim", Key: claim})
	if !ok {
		return dramodule.NotFound
	}
	if holdsOther(dramodule.Status(object)["allocation"], allocation) {
		return dramodule.Conflict
	}
	b.feed.SetPending(claim, string(pod.UID), allocation)
	return dramodule.OK
}

// DropPending drops the pending allocations of a pod (Unreserve, §2.2; ReleaseClaims does the
// rest).
func (b *Backend) DropPending(podUID string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, claim := range b.feed.PendingOf(podUID) {
		b.feed.ForgetPending(claim)
		b.feed.Touch(dramodule.ID{Kind: "ResourceClaim", Key: claim})
	}
}

// WriteAllocation implements dramodule.Backend: status.allocation and the pod in
// status.reservedFor, by UpdateStatus with the claim's resourceVersion, retried on a conflict
// after re-reading the claim. Conflict (3) when the claim holds another allocation; NotFound when
// it does not exist; Invalid for bad JSON or any other failed write (PreBind then fails).
func (b *Backend) WriteAllocation(claim string, pod *corev1.Pod, allocation []byte) int32 {
	if _, ok := dramodule.DecodeAllocation(allocation); !ok {
		return dramodule.Invalid
	}
	// The allocation as JSON fields, written as the guest wrote it: re-encoding the decoded form
	// would drop fields the Go type does not know and add ones the guest left out.
	var alloc map[string]any
	if err := json.Unmarshal(allocation, &alloc); err != nil {
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
		status := dramodule.Status(obj.Object)
		if status == nil {
			status = map[string]any{}
		}
		if holdsOther(status["allocation"], allocation) {
			result = dramodule.Conflict
			return nil
		}
		// A claim allocated before keeps its allocation as stored (the API server refuses a
		// changed status.allocation): the write only adds the pod to status.reservedFor.
		if status["allocation"] == nil {
			status["allocation"] = alloc
		}
		dramodule.ReserveFor(status, pod)
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
		b.feed.ForgetPending(claim)
		b.put(written.UnstructuredContent())
		b.mu.Unlock()
	}
	return dramodule.OK
}
