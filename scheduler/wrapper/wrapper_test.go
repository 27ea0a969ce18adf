package wrapper

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	wasm "sigs.k8s.io/kube-scheduler-wasm-extension/scheduler/plugin"
	ksweTest "sigs.k8s.io/kube-scheduler-wasm-extension/scheduler/test"

	"sharing-affinity/scheduler/informer"
)

// recorder is the informer backend with a record of what the module passed it.
type recorder struct {
	*informer.Backend
	mu      sync.Mutex
	changes int
	pods    []string
}

func (r *recorder) Changes(cursor string) []byte {
	r.mu.Lock()
	r.changes++
	r.mu.Unlock()
	return r.Backend.Changes(cursor)
}

func (r *recorder) SetPending(claim string, pod *corev1.Pod, allocation []byte) int32 {
	r.mu.Lock()
	r.pods = append(r.pods, pod.Namespace+"/"+pod.Name)
	r.mu.Unlock()
	return r.Backend.SetPending(claim, pod, allocation)
}

func guest(t *testing.T) string {
	g := os.Getenv("KSWE_GUEST")
	if g == "" {
		t.Skip("KSWE_GUEST is not set")
	}
	g, err := filepath.Abs(g)
	if err != nil {
		t.Fatal(err)
	}
	return g
}

func decode(t *testing.T, o map[string]any, into any) {
	t.Helper()
	b, err := json.Marshal(o)
	if err == nil {
		err = json.Unmarshal(b, into)
	}
	if err != nil {
		t.Fatal(err)
	}
}

// TestPodAndResolverReachTheKSWEPlugin runs the NIC scenario's first pod through the wrapper: the
// guest links against the module (the resolver reached the factory's context), PreEnqueue keeps
// the pod waiting while the template's claim does not exist (the scheduler does not create it),
// a cycle run anyway fails, and once the claim exists PreEnqueue lets the pod in and Reserve's
// pending allocation names the pod (WithPod reached Reserve).
func TestPodAndResolverReachTheKSWEPlugin(t *testing.T) {
	g := guest(t)
	raw, err := os.ReadFile("../../testdata/nic-subnet-16-slots-17th-opens-eth2/cluster.json")
	if err != nil {
		t.Fatal(err)
	}
	var list struct{ Items []map[string]any }
	if err := json.Unmarshal(raw, &list); err != nil {
		t.Fatal(err)
	}
	b := &recorder{Backend: informer.New(nil)}
	b.MarkSynced()
	var pod corev1.Pod
	var node corev1.Node
	var template map[string]any
	for _, o := range list.Items {
		u := &unstructured.Unstructured{Object: o}
		b.Upsert(u)
		switch {
		case u.GetKind() == "Pod" && u.GetName() == "web-00":
			decode(t, o, &pod)
		case u.GetKind() == "Node":
			decode(t, o, &node)
		case u.GetKind() == "ResourceClaimTemplate":
			template = o
		}
	}
	info := framework.NewNodeInfo()
	info.SetNode(&node)
	handle := &ksweTest.FakeHandle{
		Recorder:     &ksweTest.FakeRecorder{},
		SharedLister: &ksweTest.FakeSharedLister{NodeInfoLister: &ksweTest.FakeNodeInfoLister{Nodes: []*framework.NodeInfo{info}}},
	}
	ctx := context.Background()
	pl, err := New(ctx, wasm.PluginConfig{GuestURL: "file://" + g}, handle, b)
	if err != nil {
		t.Fatal(err)
	}
	defer pl.Close()
	events, err := pl.EventsToRegister(ctx)
	if err != nil {
		t.Fatal(err)
	}
	claimAdd := false
	for _, e := range events {
		if e.Event.Resource == framework.ResourceClaim && e.Event.ActionType&framework.Add != 0 || e.Event.Resource == framework.WildCard {
			claimAdd = true
		}
	}
	if !claimAdd {
		t.Errorf("no ResourceClaim add in %v", events)
	}
	// Without the claim the guest allocates for the template (it does not tell a claim not yet
	// created from one the host creates), but the backend does not create claims: Reserve's
	// pending allocation answers "the claim does not exist" and the cycle fails.
	if s := pl.PreEnqueue(ctx, &pod); s.Code() != framework.UnschedulableAndUnresolvable {
		t.Fatalf("PreEnqueue without the claim: %v", s)
	}
	state := framework.NewCycleState()
	if _, s := pl.PreFilter(ctx, state, &pod); !s.IsSuccess() {
		t.Logf("PreFilter without the claim: %v", s)
	} else if s := pl.Filter(ctx, state, &pod, info); !s.IsSuccess() {
		t.Logf("Filter without the claim: %v", s)
	} else if s := pl.Reserve(ctx, state, &pod, node.Name); !s.IsSuccess() {
		t.Logf("Reserve without the claim: %v", s)
		pl.Unreserve(ctx, state, &pod, node.Name)
	} else {
		t.Fatal("the cycle reserved a claim that does not exist")
	}
	b.pods = nil
	if b.changes == 0 {
		t.Fatal("the guest never read the change feed")
	}
	// The resourceclaim controller creates the claim and records it in the pod's status.
	claimName := "web-00-nic"
	spec, _, _ := unstructured.NestedFieldNoCopy(template, "spec", "spec")
	b.Upsert(&unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
		"metadata": map[string]any{"name": claimName, "namespace": "tenant-x", "uid": "claim-uid",
			"annotations":     map[string]any{"resource.kubernetes.io/pod-claim-name": "nic"},
			"ownerReferences": []any{map[string]any{"apiVersion": "v1", "kind": "Pod", "name": "web-00", "uid": string(pod.UID), "controller": true, "blockOwnerDeletion": true}}},
		"spec": spec,
	}})
	pod.Status.ResourceClaimStatuses = []corev1.PodResourceClaimStatus{{Name: "nic", ResourceClaimName: &claimName}}
	podObj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&pod)
	if err != nil {
		t.Fatal(err)
	}
	podObj["apiVersion"], podObj["kind"] = "v1", "Pod"
	b.Upsert(&unstructured.Unstructured{Object: podObj})
	if s := pl.PreEnqueue(ctx, &pod); !s.IsSuccess() {
		t.Fatalf("PreEnqueue with the claim: %v", s)
	}
	state = framework.NewCycleState()
	if _, s := pl.PreFilter(ctx, state, &pod); !s.IsSuccess() {
		t.Fatalf("PreFilter with the claim: %v", s)
	}
	if s := pl.Filter(ctx, state, &pod, info); !s.IsSuccess() {
		t.Fatalf("Filter: %v", s)
	}
	if s := pl.Reserve(ctx, state, &pod, node.Name); !s.IsSuccess() {
		t.Fatalf("Reserve: %v", s)
	}
	if len(b.pods) == 0 || b.pods[0] != "tenant-x/web-00" {
		t.Fatalf("pending allocations named %v", b.pods)
	}
	pl.Unreserve(ctx, state, &pod, node.Name)
}
