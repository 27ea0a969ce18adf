package informer

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"

	"sharing-affinity/kswe-harness/dramodule"
)

// reservation is an allocated claim whose status.reservedFor names a pod.
type reservation struct {
	namespace, name string
	uid             types.UID
}

// ReleaseClaims is the rest of Unreserve after DropPending (docs/kswe-dra-extension.md §2.2): the
// pod, by UID, leaves status.reservedFor of every allocated claim in the feed that names it, by
// upstream's strategic-merge patch of the status subresource, which deletes the entry with that
// UID without needing the latest list and fails if the claim was replaced (its metadata.uid
// differs). The allocation stays. A failed patch is logged and the other claims are still
// patched, as upstream does: Unreserve runs again when the pod's scheduling is retried. The
// patched claim replaces the feed's copy at once, so the next pull sees it before the informer's
// event.
func (b *Backend) ReleaseClaims(ctx context.Context, pod *corev1.Pod) {
	podUID := string(pod.UID)
	var reserved []reservation
	b.mu.Lock()
	for _, object := range b.feed.List("ResourceClaim") {
		status := dramodule.Status(object)
		if status["allocation"] == nil || !dramodule.ReservedForPod(status, podUID) {
			continue
		}
		c := &unstructured.Unstructured{Object: object}
		reserved = append(reserved, reservation{c.GetNamespace(), c.GetName(), c.GetUID()})
	}
	b.mu.Unlock()
	sort.Slice(reserved, func(i, j int) bool {
		return dramodule.Key(reserved[i].namespace, reserved[i].name) < dramodule.Key(reserved[j].namespace, reserved[j].name)
	})
	logger := klog.FromContext(ctx)
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	for _, r := range reserved {
		claim := klog.KRef(r.namespace, r.name)
		logger.V(5).Info("sharing-affinity: unreserve", "resourceclaim", claim, "pod", klog.KObj(pod))
		written, err := b.release(ctx, r, podUID)
		if err != nil {
			logger.Error(err, "sharing-affinity: unreserve", "resourceclaim", claim, "pod", klog.KObj(pod))
			continue
		}
		b.keepWritten(written)
	}
}

// release sends upstream's Unreserve patch for one claim, `{"metadata":{"uid":<claim>},
// "status":{"reservedFor":[{"$patch":"delete","uid":<pod>}]}}`, and returns the patched claim.
func (b *Backend) release(ctx context.Context, r reservation, podUID string) (*unstructured.Unstructured, error) {
	patch, err := json.Marshal(map[string]any{
		"metadata": map[string]any{"uid": r.uid},
		"status":   map[string]any{"reservedFor": []any{map[string]any{"$patch": "delete", "uid": podUID}}},
	})
	if err != nil {
		return nil, fmt.Errorf("encoding the patch: %w", err)
	}
	written, err := b.client.Resource(Claims).Namespace(r.namespace).
		Patch(ctx, r.name, types.StrategicMergePatchType, patch, metav1.PatchOptions{}, "status")
	if err != nil {
		return nil, fmt.Errorf("patching status.reservedFor: %w", err)
	}
	return written, nil
}

// keepWritten stores a claim as the API server answered a write of it, ahead of the informer's
// event.
func (b *Backend) keepWritten(written *unstructured.Unstructured) {
	if written.GetKind() == "" {
		written.SetAPIVersion("resource.k8s.io/v1")
		written.SetKind("ResourceClaim")
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.put(written.UnstructuredContent())
}
