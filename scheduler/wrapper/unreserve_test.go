package wrapper

import (
	"context"
	"reflect"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/kubernetes/pkg/scheduler/framework"

	"sharing-affinity/scheduler/informer"
)

// unreserves is the informer backend with a record of the Unreserve steps the wrapper asks of it.
type unreserves struct {
	*informer.Backend
	calls []string
}

func (u *unreserves) DropPending(podUID string) {
	u.calls = append(u.calls, "DropPending "+podUID)
	u.Backend.DropPending(podUID)
}

func (u *unreserves) ReleaseClaims(ctx context.Context, pod *v1.Pod) {
	u.calls = append(u.calls, "ReleaseClaims "+string(pod.UID))
	u.Backend.ReleaseClaims(ctx, pod)
}

// Unreserve drops the pod's pending allocations and removes it from status.reservedFor of its
// allocated claims (docs/kswe-dra-extension.md §2.2), whatever the KSWE plugin does.
func TestUnreserveDropsPendingAndReleasesClaims(t *testing.T) {
	b := &unreserves{Backend: informer.New(nil)}
	p := &Plugin{rejected: map[string]*v1.Pod{}, backend: b}
	pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "ns", UID: "uid-1"}}
	p.Unreserve(t.Context(), framework.NewCycleState(), pod, "node-a")
	if want := []string{"DropPending uid-1", "ReleaseClaims uid-1"}; !reflect.DeepEqual(b.calls, want) {
		t.Fatalf("Unreserve asked the backend %q, want %q", b.calls, want)
	}
}
