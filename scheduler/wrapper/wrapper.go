// Package wrapper is the sharing-affinity plugin for kube-scheduler: the unmodified KSWE plugin
// running the guest, wrapped so that every context it gets carries the sharing-affinity.dra/v1
// import resolver and the current pod (kswe-harness/dramodule), backed by the live cluster
// (scheduler/informer).
package wrapper

import (
	"context"
	"fmt"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/dynamic"
	"k8s.io/dynamic-resource-allocation/resourceclaim"
	"k8s.io/klog/v2"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	frameworkruntime "k8s.io/kubernetes/pkg/scheduler/framework/runtime"
	wasm "sigs.k8s.io/kube-scheduler-wasm-extension/scheduler/plugin"

	"sharing-affinity/kswe-harness/dramodule"
	"sharing-affinity/scheduler/informer"
)

// Name is the plugin name in the scheduler configuration.
const Name = "sharing-affinity"

// Backend is what the wrapper needs of the module's backend beyond dramodule.Backend.
type Backend interface {
	dramodule.Backend
	// DropPending drops the pod's pending allocations (Unreserve).
	DropPending(podUID string)
	// ReleaseClaims removes the pod from status.reservedFor of every allocated claim that names
	// it (Unreserve); a failed write is logged, not returned.
	ReleaseClaims(ctx context.Context, pod *v1.Pod)
	// Claim is the ResourceClaim `namespace/name` as the backend has it (not to be modified), or
	// nil.
	Claim(key string) map[string]any
	// Synced is closed once the backend has every object of the cluster.
	Synced() <-chan struct{}
}

// Plugin wraps the KSWE plugin. It implements the interfaces our guest exports (see
// plugin/guest/src/scheduler_abi) and delegates each to the KSWE plugin by type assertion.
type Plugin struct {
	handle framework.Handle
	// rejected are the pods the plugin failed or gated since the last DRA change, to activate on
	// the next.
	mu       sync.Mutex
	rejected map[string]*v1.Pod
	inner    framework.Plugin
	host     *dramodule.Host
	backend  Backend
}

var (
	_ framework.PreEnqueuePlugin  = (*Plugin)(nil)
	_ framework.PreFilterPlugin   = (*Plugin)(nil)
	_ framework.FilterPlugin      = (*Plugin)(nil)
	_ framework.PostFilterPlugin  = (*Plugin)(nil)
	_ framework.PreScorePlugin    = (*Plugin)(nil)
	_ framework.ScorePlugin       = (*Plugin)(nil)
	_ framework.ReservePlugin     = (*Plugin)(nil)
	_ framework.PermitPlugin      = (*Plugin)(nil)
	_ framework.PreBindPlugin     = (*Plugin)(nil)
	_ framework.PostBindPlugin    = (*Plugin)(nil)
	_ framework.EnqueueExtensions = (*Plugin)(nil)
)

// Factory is the kube-scheduler plugin factory: it decodes KSWE's PluginConfig, starts the
// informer backend on the handle's kubeconfig and creates the wrapped KSWE plugin.
func Factory(ctx context.Context, configuration runtime.Object, h framework.Handle) (framework.Plugin, error) {
	config := wasm.PluginConfig{}
	if err := frameworkruntime.DecodeInto(configuration, &config); err != nil {
		return nil, fmt.Errorf("failed to decode into %s PluginConfig: %w", Name, err)
	}
	client, err := dynamic.NewForConfig(h.KubeConfig())
	if err != nil {
		return nil, fmt.Errorf("%s: dynamic client: %w", Name, err)
	}
	backend := informer.New(client)
	backend.Start(ctx)
	p, err := New(ctx, config, h, backend)
	if err != nil {
		return nil, err
	}
	backend.OnChange(func() { p.activate(klog.FromContext(ctx)) })
	return p, nil
}

// reject remembers a pod the plugin failed or gated.
func (p *Plugin) reject(pod *v1.Pod, s *framework.Status) {
	if s.IsSuccess() || s.Code() == framework.Skip {
		return
	}
	p.mu.Lock()
	p.rejected[pod.Namespace+"/"+pod.Name] = pod
	p.mu.Unlock()
}

// activate moves the pods the plugin failed or gated back to the active queue (a DRA object
// changed); the queue runs PreEnqueue again for a gated one.
func (p *Plugin) activate(logger klog.Logger) {
	p.mu.Lock()
	pods := p.rejected
	p.rejected = map[string]*v1.Pod{}
	p.mu.Unlock()
	if len(pods) > 0 && p.handle != nil {
		p.handle.Activate(logger, pods)
	}
}

// New creates the KSWE plugin with the module over backend and wraps it.
func New(ctx context.Context, config wasm.PluginConfig, h framework.Handle, backend Backend) (*Plugin, error) {
	host, err := dramodule.New(ctx, backend)
	if err != nil {
		return nil, err
	}
	inner, err := wasm.NewFromConfig(host.Resolve(ctx), Name, config, h)
	if err != nil {
		_ = host.Close(ctx)
		return nil, err
	}
	return &Plugin{handle: h, rejected: map[string]*v1.Pod{}, inner: inner, host: host, backend: backend}, nil
}

// Inner is the KSWE plugin.
func (p *Plugin) Inner() framework.Plugin { return p.inner }

func (p *Plugin) ctx(ctx context.Context, pod *v1.Pod) context.Context {
	if pod != nil {
		ctx = dramodule.WithPod(ctx, pod)
	}
	return p.host.Resolve(ctx)
}

// Name implements framework.Plugin.
func (p *Plugin) Name() string { return Name }

// Close closes the KSWE plugin and the module.
func (p *Plugin) Close() error {
	var err error
	if c, ok := p.inner.(interface{ Close() error }); ok {
		err = c.Close()
	}
	if cerr := p.host.Close(context.Background()); err == nil {
		err = cerr
	}
	return err
}

func missing(ext string) *framework.Status {
	return framework.NewStatus(framework.Skip, fmt.Sprintf("%s: the guest does not export %s", Name, ext))
}

// EventsToRegister implements framework.EnqueueExtensions: the guest's events, plus ResourceClaim
// add/update when the guest does not register them, so that a pod whose (generated) claim does not
// exist yet is retried when the resourceclaim controller creates it.
func (p *Plugin) EventsToRegister(ctx context.Context) ([]framework.ClusterEventWithHint, error) {
	var events []framework.ClusterEventWithHint
	if e, ok := p.inner.(framework.EnqueueExtensions); ok {
		var err error
		if events, err = e.EventsToRegister(p.ctx(ctx, nil)); err != nil {
			return nil, err
		}
	}
	has := false
	for _, e := range events {
		if e.Event.Resource == framework.ResourceClaim && e.Event.ActionType&framework.Add != 0 || e.Event.Resource == framework.WildCard {
			has = true
		}
	}
	if !has {
		klog.FromContext(ctx).V(2).Info("sharing-affinity: registering ResourceClaim add/update in the wrapper")
		events = append(events, framework.ClusterEventWithHint{Event: framework.ClusterEvent{Resource: framework.ResourceClaim, ActionType: framework.Add | framework.Update}})
	}
	return events, nil
}

// PreEnqueue implements framework.PreEnqueuePlugin as upstream's DynamicResources does: the pod
// stays out of the active queue while one of its claims is missing (a template entry that
// status.resourceClaimStatuses does not name yet, a claim not in the backend, a claim being
// deleted, a template's claim the pod does not control). The claim's informer event activates it
// again, and the queue requeues it on its own status update. Before the backend has synced every
// pod passes (PreFilter waits for the sync).
func (p *Plugin) PreEnqueue(ctx context.Context, pod *v1.Pod) *framework.Status {
	if len(pod.Spec.ResourceClaims) == 0 {
		return nil
	}
	select {
	case <-p.backend.Synced():
	default:
		return nil
	}
	err := missingClaim(pod, p.backend.Claim)
	if err == nil {
		return nil
	}
	s := framework.NewStatus(framework.UnschedulableAndUnresolvable, err.Error())
	p.reject(pod, s)
	// The claim's event may have come between the check and the record: look once more.
	if err = missingClaim(pod, p.backend.Claim); err == nil {
		return nil
	}
	klog.FromContext(ctx).V(5).Info("sharing-affinity: pod waits for its claims", "pod", klog.KObj(pod), "reason", err)
	return framework.NewStatus(framework.UnschedulableAndUnresolvable, err.Error())
}

// missingClaim is why the pod cannot be scheduled yet for want of a claim (upstream's
// foreachPodResourceClaim), or nil.
func missingClaim(pod *v1.Pod, claim func(key string) map[string]any) error {
	for i := range pod.Spec.ResourceClaims {
		name, mustCheckOwner, err := resourceclaim.Name(pod, &pod.Spec.ResourceClaims[i])
		switch {
		case err != nil:
			return err
		case name == nil:
			// No claim was generated for the entry, which is valid: nothing to wait for.
			continue
		}
		object := claim(dramodule.Key(pod.Namespace, *name))
		if object == nil {
			return fmt.Errorf("resourceclaim %q: not found", *name)
		}
		c := &unstructured.Unstructured{Object: object}
		if c.GetDeletionTimestamp() != nil {
			return fmt.Errorf("resourceclaim %q is being deleted", *name)
		}
		if mustCheckOwner && (c.GetNamespace() != pod.Namespace || !metav1.IsControlledBy(c, pod)) {
			return fmt.Errorf("ResourceClaim %s/%s was not created for pod %s/%s (pod is not owner)", c.GetNamespace(), c.GetName(), pod.Namespace, pod.Name)
		}
	}
	return nil
}

// PreFilter implements framework.PreFilterPlugin.
func (p *Plugin) PreFilter(ctx context.Context, state *framework.CycleState, pod *v1.Pod) (*framework.PreFilterResult, *framework.Status) {
	if pl, ok := p.inner.(framework.PreFilterPlugin); ok {
		r, s := pl.PreFilter(p.ctx(ctx, pod), state, pod)
		p.reject(pod, s)
		return r, s
	}
	return nil, missing("prefilter")
}

// PreFilterExtensions implements framework.PreFilterPlugin; the guest has none.
func (p *Plugin) PreFilterExtensions() framework.PreFilterExtensions { return nil }

// Filter implements framework.FilterPlugin.
func (p *Plugin) Filter(ctx context.Context, state *framework.CycleState, pod *v1.Pod, node *framework.NodeInfo) *framework.Status {
	if pl, ok := p.inner.(framework.FilterPlugin); ok {
		s := pl.Filter(p.ctx(ctx, pod), state, pod, node)
		p.reject(pod, s)
		return s
	}
	return nil
}

// PostFilter implements framework.PostFilterPlugin: when no node fits, the guest may deallocate
// an allocated claim of the pod that was unavailable on a node and that no other pod uses
// (docs/kswe-dra-extension.md §2.3), as upstream's DynamicResources PostFilter does. The claim's
// update then re-activates the pod.
func (p *Plugin) PostFilter(ctx context.Context, state *framework.CycleState, pod *v1.Pod, statuses framework.NodeToStatusReader) (*framework.PostFilterResult, *framework.Status) {
	if pl, ok := p.inner.(framework.PostFilterPlugin); ok {
		return pl.PostFilter(p.ctx(ctx, pod), state, pod, statuses)
	}
	return nil, framework.NewStatus(framework.Unschedulable)
}

// PreScore implements framework.PreScorePlugin.
func (p *Plugin) PreScore(ctx context.Context, state *framework.CycleState, pod *v1.Pod, nodes []*framework.NodeInfo) *framework.Status {
	if pl, ok := p.inner.(framework.PreScorePlugin); ok {
		return pl.PreScore(p.ctx(ctx, pod), state, pod, nodes)
	}
	return missing("prescore")
}

// Score implements framework.ScorePlugin.
func (p *Plugin) Score(ctx context.Context, state *framework.CycleState, pod *v1.Pod, node *framework.NodeInfo) (int64, *framework.Status) {
	if pl, ok := p.inner.(framework.ScorePlugin); ok {
		return pl.Score(p.ctx(ctx, pod), state, pod, node)
	}
	return 0, nil
}

type normalize struct {
	p   *Plugin
	ext framework.ScoreExtensions
}

func (n normalize) NormalizeScore(ctx context.Context, state *framework.CycleState, pod *v1.Pod, scores framework.NodeScoreList) *framework.Status {
	return n.ext.NormalizeScore(n.p.ctx(ctx, pod), state, pod, scores)
}

// ScoreExtensions implements framework.ScorePlugin: only when the KSWE plugin has them.
func (p *Plugin) ScoreExtensions() framework.ScoreExtensions {
	if pl, ok := p.inner.(framework.ScorePlugin); ok {
		if ext := pl.ScoreExtensions(); ext != nil {
			return normalize{p, ext}
		}
	}
	return nil
}

// Reserve implements framework.ReservePlugin.
func (p *Plugin) Reserve(ctx context.Context, state *framework.CycleState, pod *v1.Pod, node string) *framework.Status {
	if pl, ok := p.inner.(framework.ReservePlugin); ok {
		s := pl.Reserve(p.ctx(ctx, pod), state, pod, node)
		p.reject(pod, s)
		return s
	}
	return nil
}

// Unreserve implements framework.ReservePlugin: drops the pod's pending allocations and removes
// the pod from status.reservedFor of its allocated claims, as upstream's DynamicResources
// Unreserve does (docs/kswe-dra-extension.md §2.2; after a failed PreBind the claims stay
// allocated, reserved for no pod), then delegates.
func (p *Plugin) Unreserve(ctx context.Context, state *framework.CycleState, pod *v1.Pod, node string) {
	p.backend.DropPending(string(pod.UID))
	p.backend.ReleaseClaims(ctx, pod)
	if pl, ok := p.inner.(framework.ReservePlugin); ok {
		pl.Unreserve(p.ctx(ctx, pod), state, pod, node)
	}
}

// Permit implements framework.PermitPlugin.
func (p *Plugin) Permit(ctx context.Context, state *framework.CycleState, pod *v1.Pod, node string) (*framework.Status, time.Duration) {
	if pl, ok := p.inner.(framework.PermitPlugin); ok {
		return pl.Permit(p.ctx(ctx, pod), state, pod, node)
	}
	return nil, 0
}

// PreBind implements framework.PreBindPlugin.
func (p *Plugin) PreBind(ctx context.Context, state *framework.CycleState, pod *v1.Pod, node string) *framework.Status {
	if pl, ok := p.inner.(framework.PreBindPlugin); ok {
		return pl.PreBind(p.ctx(ctx, pod), state, pod, node)
	}
	return nil
}

// PostBind implements framework.PostBindPlugin.
func (p *Plugin) PostBind(ctx context.Context, state *framework.CycleState, pod *v1.Pod, node string) {
	if pl, ok := p.inner.(framework.PostBindPlugin); ok {
		pl.PostBind(p.ctx(ctx, pod), state, pod, node)
	}
}
