package informer

import (
	"context"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"

	"sharing-affinity/kswe-harness/dramodule"
)

// Deallocate implements dramodule.Backend (PostFilter, docs/kswe-dra-extension.md §2.3): clears
// status.allocation, status.reservedFor and status.devices by one UpdateStatus that carries the
// resourceVersion the guest saw, as upstream's PostFilter updates its copy of the claim. The API
// server's conflict (the claim changed since) is Conflict, not retried: the guest decided on the
// old claim. Conflict too when a pod other than pod is in status.reservedFor or an allocation of
// the claim is pending here.
func (b *Backend) Deallocate(claim, version string, pod *corev1.Pod) int32 {
	namespace, name, found := strings.Cut(claim, "/")
	if !found {
		return dramodule.NotFound
	}
	b.mu.Lock()
	inFlight := b.feed.Pending(claim)
	b.mu.Unlock()
	if inFlight {
		return dramodule.Conflict
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	client := b.client.Resource(Claims).Namespace(namespace)
	obj, err := client.Get(ctx, name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return dramodule.NotFound
	case err != nil:
		klog.ErrorS(err, "sharing-affinity: reading the claim to deallocate failed", "claim", claim)
		return dramodule.Conflict
	case obj.GetResourceVersion() != version:
		return dramodule.Conflict
	}
	status := dramodule.Status(obj.Object)
	if dramodule.ReservedForOthers(status, pod) {
		return dramodule.Conflict
	}
	dramodule.ClearAllocation(status)
	written, err := client.UpdateStatus(ctx, obj, metav1.UpdateOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return dramodule.NotFound
	case err != nil:
		if !apierrors.IsConflict(err) {
			klog.ErrorS(err, "sharing-affinity: deallocating the claim failed", "claim", claim, "pod", klog.KObj(pod))
		}
		return dramodule.Conflict
	}
	b.keepWritten(written)
	return dramodule.OK
}
