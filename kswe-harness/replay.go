package main

// The replay: the scheduling decisions kube-scheduler would take with only the KSWE plugin
// enabled, running our guest in the unmodified plugin. It mirrors `sharing-affinity replay`
// (host/src/replay.rs) and prints the same JSON report.

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	wasm "sigs.k8s.io/kube-scheduler-wasm-extension/scheduler/plugin"
	ksweTest "sigs.k8s.io/kube-scheduler-wasm-extension/scheduler/test"

	"sharing-affinity/kswe-harness/dramodule"
)

// options are the replay's settings.
type options struct {
	// guest is the KSWE guest (a core module), built by the workspace's artifact code.
	guest string
	// async starts the next pod's scheduling cycle before the previous pod's binding cycle
	// (PreBind, Bind, PostBind), which then runs on another goroutine, as kube-scheduler does.
	async bool
}

type nodeOutcome struct {
	Node   string `json:"node"`
	Code   string `json:"code"`
	Reason string `json:"reason"`
	Score  *int64 `json:"score,omitempty"`
}

type resultJSON struct {
	Request          string            `json:"request"`
	Driver           string            `json:"driver"`
	Pool             string            `json:"pool"`
	Device           string            `json:"device"`
	ShareID          *string           `json:"shareID,omitempty"`
	ConsumedCapacity map[string]string `json:"consumedCapacity,omitempty"`
}

type allocationJSON struct {
	Claim   string       `json:"claim"`
	Results []resultJSON `json:"results"`
}

type podOutcome struct {
	Pod         string           `json:"pod"`
	Node        *string          `json:"node"`
	Nodes       []nodeOutcome    `json:"nodes"`
	Allocations []allocationJSON `json:"allocations"`
	// Extended is the bound pod's status.extendedResourceClaimStatus (KEP-5004).
	Extended    *extendedStatus `json:"extendedResourceClaimStatus,omitempty"`
	Error       *string         `json:"error,omitempty"`
	Deallocated *string         `json:"deallocated,omitempty"`
}

type percentiles struct {
	P50 uint64 `json:"p50"`
	P90 uint64 `json:"p90"`
	P99 uint64 `json:"p99"`
	Max uint64 `json:"max"`
}

type summary struct {
	P50 uint64 `json:"p50"`
	Max uint64 `json:"max"`
}

type timing struct {
	FilterNsPerNode percentiles `json:"filterNsPerNode"`
	PrefilterNs     summary     `json:"prefilterNs"`
	CycleNs         summary     `json:"cycleNs"`
	Engine          string      `json:"engine"`
}

// report is `sharing-affinity replay --output json`'s document.
type report struct {
	Pods     []*podOutcome `json:"pods"`
	Rejected []string      `json:"rejected"`
	Timing   *timing       `json:"timing,omitempty"`
	// logs are the lines the guest logged (not in the document; the command prints them).
	logs []string
}

type samples struct{ filter, prefilter, cycle []uint64 }

// percentile is the nearest-rank percentile of sorted samples (0 when there are none).
func percentile(sorted []uint64, p int) uint64 {
	if len(sorted) == 0 {
		return 0
	}
	rank := (p*len(sorted) + 99) / 100
	rank = max(1, min(rank, len(sorted)))
	return sorted[rank-1]
}

func sortedCopy(v []uint64) []uint64 {
	s := append([]uint64(nil), v...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return s
}

func (s *samples) timing() *timing {
	f, p, c := sortedCopy(s.filter), sortedCopy(s.prefilter), sortedCopy(s.cycle)
	return &timing{
		FilterNsPerNode: percentiles{percentile(f, 50), percentile(f, 90), percentile(f, 99), percentile(f, 100)},
		PrefilterNs:     summary{percentile(p, 50), percentile(p, 100)},
		CycleNs:         summary{percentile(c, 50), percentile(c, 100)},
		Engine:          "kswe-wazero",
	}
}

// outcomeStatus maps a framework status to the report's code and reason, as the Rust engine's
// to_status does: Success, Error, Unschedulable and UnschedulableAndUnresolvable keep their
// meaning; any other code is an Error naming it.
func outcomeStatus(s *framework.Status) (code, reason string) {
	if s == nil {
		return "Success", ""
	}
	reason = s.Message()
	switch s.Code() {
	case framework.Success, framework.Error, framework.Unschedulable, framework.UnschedulableAndUnresolvable:
		return s.Code().String(), reason
	default:
		return "Error", fmt.Sprintf("unexpected status code %d: %s", int(s.Code()), reason)
	}
}

// display formats a status as the Rust core's Status does: `Code` or `Code: reason`.
func display(s *framework.Status) string {
	code, reason := outcomeStatus(s)
	if reason == "" {
		return code
	}
	return code + ": " + reason
}

func succeeded(s *framework.Status) bool { return s.IsSuccess() }

// guarded runs a plugin call, turning a panic (KSWE panics on an unexpected pod in the binding
// pool and on a NormalizeScore size mismatch) into an Error status.
func guarded(fn func() *framework.Status) (status *framework.Status) {
	defer func() {
		if r := recover(); r != nil {
			status = framework.NewStatus(framework.Error, fmt.Sprintf("panic: %v", r))
		}
	}()
	return fn()
}

// replayer holds one replay's plugin, store and node snapshot.
type replayer struct {
	root    context.Context
	plugin  framework.Plugin
	store   *store
	nodes   []*framework.NodeInfo
	samples samples
}

// runReplay loads the cluster into a fresh store, starts the plugin and schedules every pending pod.
func runReplay(ctx context.Context, c *cluster, opts options) (*report, error) {
	// The guest's logs, and the objects it rejects, through klog's global logger (one replay at
	// a time per process).
	log := newGuestLog()
	klog.SetLogger(logr.New(log))
	defer klog.ClearLogger()
	s := newStore()
	for _, object := range c.objects {
		s.Add(object)
	}
	s.clock = recordingTime(c.objects)
	host, err := dramodule.New(ctx, s)
	if err != nil {
		return nil, fmt.Errorf("the sharing-affinity.dra/v1 host module: %w", err)
	}
	defer host.Close(ctx)
	root := host.Resolve(ctx)

	byNode := map[string][]*corev1.Pod{}
	for _, p := range c.boundPods {
		byNode[p.Spec.NodeName] = append(byNode[p.Spec.NodeName], p)
	}
	var infos []*framework.NodeInfo
	for _, n := range c.nodes {
		info := framework.NewNodeInfo(byNode[n.Name]...)
		info.SetNode(n)
		infos = append(infos, info)
	}
	handle := &ksweTest.FakeHandle{
		Recorder:     &ksweTest.FakeRecorder{},
		SharedLister: &ksweTest.FakeSharedLister{NodeInfoLister: &ksweTest.FakeNodeInfoLister{Nodes: infos}},
	}
	guest, err := filepath.Abs(opts.guest)
	if err != nil {
		return nil, fmt.Errorf("KSWE guest: %w", err)
	}
	if _, err := os.Stat(guest); err != nil {
		return nil, fmt.Errorf("KSWE guest: %w (build it with `cargo build -p sharing-affinity-guest --target wasm32-unknown-unknown --profile wasm --features scheduler-abi --target-dir target/kswe-guest`)", err)
	}
	// LogSeverity 0 (info) lets every guest log through: KSWE's `logs` drops an entry whose
	// severity is below it, and the guest logs a rejected object at error (2), which the sink
	// above needs.
	config := wasm.PluginConfig{GuestURL: "file://" + guest, GuestConfig: c.config, LogSeverity: 0}
	plugin, err := wasm.NewFromConfig(root, "sharing-affinity", config, handle)
	if err != nil {
		return nil, fmt.Errorf("starting the KSWE plugin: %w", err)
	}
	if closer, ok := plugin.(interface{ Close() error }); ok {
		defer closer.Close()
	}
	// kube-scheduler asks every plugin for its events once, at start-up.
	if ext, ok := plugin.(framework.EnqueueExtensions); ok {
		if _, err := ext.EventsToRegister(root); err != nil {
			return nil, fmt.Errorf("EventsToRegister: %w", err)
		}
	}
	r := &replayer{root: root, plugin: plugin, store: s, nodes: infos}
	rep := &report{Rejected: append([]string{}, c.rejected...)}
	defer func() {
		rep.Rejected = append(rep.Rejected, log.rejections()...)
		rep.logs = log.take()
	}()
	// In async mode the binding cycle of pod i runs (on its own goroutine) only after pod i+1's
	// scheduling cycle: S1 S2 B1 S3 B2 ... The order is fixed so that decisions are reproducible.
	var waiting func()
	for _, key := range c.pending {
		start := time.Now()
		outcome, bind := r.schedule(key)
		rep.Pods = append(rep.Pods, outcome)
		if !opts.async {
			if bind != nil {
				bind()
			}
			r.samples.cycle = append(r.samples.cycle, uint64(time.Since(start)))
			continue
		}
		r.samples.cycle = append(r.samples.cycle, uint64(time.Since(start)))
		if waiting != nil {
			runOnGoroutine(waiting)
		}
		waiting = bind
	}
	if waiting != nil {
		runOnGoroutine(waiting)
	}
	if rep.Pods == nil {
		rep.Pods = []*podOutcome{}
	}
	rep.Timing = r.samples.timing()
	return rep, nil
}

func runOnGoroutine(fn func()) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		fn()
	}()
	<-done
}

// schedule runs one pod's scheduling cycle (PreFilter through Permit) and returns its outcome and,
// when a node was chosen, the binding cycle still to run.
func (r *replayer) schedule(key string) (*podOutcome, func()) {
	out := &podOutcome{Pod: key, Nodes: []nodeOutcome{}, Allocations: []allocationJSON{}}
	pod, err := r.store.Pod(key)
	if err != nil {
		for _, n := range r.nodes {
			out.Nodes = append(out.Nodes, nodeOutcome{Node: n.Node().Name, Code: "Error", Reason: err.Error()})
		}
		return out, nil
	}
	ctx := dramodule.WithPod(r.root, pod)
	state := framework.NewCycleState()

	nodes := r.nodes
	skipFilter := false
	if pl, ok := r.plugin.(framework.PreFilterPlugin); ok {
		var result *framework.PreFilterResult
		start := time.Now()
		status := guarded(func() *framework.Status {
			var s *framework.Status
			result, s = pl.PreFilter(ctx, state, pod)
			return s
		})
		r.samples.prefilter = append(r.samples.prefilter, uint64(time.Since(start)))
		switch {
		case status.IsSkip():
			skipFilter = true
		case !succeeded(status):
			code, reason := outcomeStatus(status)
			for _, n := range nodes {
				out.Nodes = append(out.Nodes, nodeOutcome{Node: n.Node().Name, Code: code, Reason: reason})
			}
			r.postFilter(ctx, state, pod, out)
			return out, nil
		}
		if result != nil && !result.AllNodes() {
			nodes = nil
			for _, n := range r.nodes {
				if result.NodeNames.Has(n.Node().Name) {
					nodes = append(nodes, n)
				}
			}
		}
	}
	allowed := map[string]bool{}
	for _, n := range nodes {
		allowed[n.Node().Name] = true
	}
	var feasible []*framework.NodeInfo
	for _, n := range r.nodes {
		name := n.Node().Name
		var status *framework.Status
		start := time.Now()
		switch {
		case !allowed[name]:
			status = framework.NewStatus(framework.UnschedulableAndUnresolvable,
				fmt.Sprintf("node %s is not among the node names PreFilter returned", name))
		case skipFilter:
		default:
			if pl, ok := r.plugin.(framework.FilterPlugin); ok {
				status = guarded(func() *framework.Status { return pl.Filter(ctx, state, pod, n) })
			}
		}
		r.samples.filter = append(r.samples.filter, uint64(time.Since(start)))
		code, reason := outcomeStatus(status)
		out.Nodes = append(out.Nodes, nodeOutcome{Node: name, Code: code, Reason: reason})
		if code == "Success" {
			feasible = append(feasible, n)
		}
	}
	if len(feasible) == 0 {
		r.postFilter(ctx, state, pod, out)
		return out, nil
	}
	scores, failed := r.scores(ctx, state, pod, feasible)
	if failed != "" {
		out.Error = &failed
		// Scores given before the failure stay in the report, as in the Rust replay.
	}
	best, bestScore := "", int64(-1)
	for i := range out.Nodes {
		n := &out.Nodes[i]
		score, scored := scores[n.Node]
		if !scored {
			continue
		}
		n.Score = &score
		if score > bestScore {
			best, bestScore = n.Node, score
		}
	}
	if failed != "" || best == "" {
		return out, nil
	}
	// fail records a failure after Reserve and unreserves the pod with the context of the cycle
	// that failed, as kube-scheduler does after a failed Reserve or Permit (scheduling cycle) and
	// a failed PreBind or Bind (binding cycle, handleBindingCycleError).
	fail := func(ctx context.Context, step string, status *framework.Status) {
		msg := fmt.Sprintf("%s on node %s: %s", step, best, display(status))
		out.Error = &msg
		r.unreserve(ctx, state, pod, best)
	}
	if pl, ok := r.plugin.(framework.ReservePlugin); ok {
		if status := guarded(func() *framework.Status { return pl.Reserve(ctx, state, pod, best) }); !succeeded(status) {
			fail(ctx, "reserve", status)
			return out, nil
		}
	}
	if pl, ok := r.plugin.(framework.PermitPlugin); ok {
		status := guarded(func() *framework.Status {
			s, _ := pl.Permit(ctx, state, pod, best)
			return s
		})
		if !succeeded(status) {
			fail(ctx, "bind", status)
			return out, nil
		}
	}
	node := best
	return out, func() {
		// The binding cycle: a context of its own, as kube-scheduler's binding goroutine has.
		ctx := dramodule.WithPod(r.root, pod)
		if pl, ok := r.plugin.(framework.PreBindPlugin); ok {
			if status := guarded(func() *framework.Status { return pl.PreBind(ctx, state, pod, node) }); !succeeded(status) {
				fail(ctx, "bind", status)
				return
			}
		}
		if pl, ok := r.plugin.(framework.BindPlugin); ok {
			status := guarded(func() *framework.Status { return pl.Bind(ctx, state, pod, node) })
			if !succeeded(status) && !status.IsSkip() {
				fail(ctx, "bind", status)
				return
			}
		}
		// The default binder (the guest's Bind returns Skip).
		if err := r.store.BindPod(key, node); err != nil {
			fail(ctx, "bind", framework.AsStatus(err))
			return
		}
		if pl, ok := r.plugin.(framework.PostBindPlugin); ok {
			_ = guarded(func() *framework.Status { pl.PostBind(ctx, state, pod, node); return nil })
		}
		out.Node = &node
		allocations, err := allocationsOf(r.store.TakeWrites(string(pod.UID)))
		if err != nil {
			msg := fmt.Sprintf("bind on node %s: %v", node, err)
			out.Error = &msg
			return
		}
		out.Allocations = allocations
		extended, err := r.store.ExtendedStatus(key)
		if err != nil {
			msg := fmt.Sprintf("bind on node %s: %v", node, err)
			out.Error = &msg
			return
		}
		out.Extended = extended
	}
}

// scores runs PreScore over the feasible nodes, Score on each (in name order) and NormalizeScore
// when the plugin has it. A failure is the Rust replay's `score on node N: status` text.
func (r *replayer) scores(ctx context.Context, state *framework.CycleState, pod *corev1.Pod, feasible []*framework.NodeInfo) (map[string]int64, string) {
	scores := map[string]int64{}
	pl, ok := r.plugin.(framework.ScorePlugin)
	if !ok {
		for _, n := range feasible {
			scores[n.Node().Name] = 0
		}
		return scores, ""
	}
	first := feasible[0].Node().Name
	if pre, ok := r.plugin.(framework.PreScorePlugin); ok {
		status := guarded(func() *framework.Status { return pre.PreScore(ctx, state, pod, feasible) })
		if status.IsSkip() {
			for _, n := range feasible {
				scores[n.Node().Name] = 0
			}
			return scores, ""
		}
		if !succeeded(status) {
			return scores, fmt.Sprintf("score on node %s: %s", first, display(status))
		}
	}
	list := make(framework.NodeScoreList, 0, len(feasible))
	for _, n := range feasible {
		var score int64
		status := guarded(func() *framework.Status {
			var s *framework.Status
			score, s = pl.Score(ctx, state, pod, n)
			return s
		})
		if !succeeded(status) {
			return scores, fmt.Sprintf("score on node %s: %s", n.Node().Name, display(status))
		}
		list = append(list, framework.NodeScore{Name: n.Node().Name, Score: score})
	}
	if ext := pl.ScoreExtensions(); ext != nil {
		status := guarded(func() *framework.Status { return ext.NormalizeScore(ctx, state, pod, list) })
		if !succeeded(status) {
			return map[string]int64{}, fmt.Sprintf("score on node %s: %s", first, display(status))
		}
	}
	for _, s := range list {
		if s.Score < 0 || s.Score > framework.MaxNodeScore {
			return scores, fmt.Sprintf("score on node %s: Error: score %d for node %s is outside [0, 100]", s.Name, s.Score, s.Name)
		}
		scores[s.Name] = s.Score
	}
	return scores, ""
}

// postFilter runs PostFilter as kube-scheduler does when no node fits: only after every node was
// rejected as Unschedulable or UnschedulableAndUnresolvable (an Error ends the cycle without it).
// It records the claim the guest deallocated, and an Error status as the pod's error, as the Rust
// replay does.
func (r *replayer) postFilter(ctx context.Context, state *framework.CycleState, pod *corev1.Pod, out *podOutcome) {
	pl, ok := r.plugin.(framework.PostFilterPlugin)
	if !ok || len(out.Nodes) == 0 {
		return
	}
	statuses := framework.NewDefaultNodeToStatus()
	for _, n := range out.Nodes {
		if n.Code != "Unschedulable" && n.Code != "UnschedulableAndUnresolvable" {
			return
		}
		code := framework.Unschedulable
		if n.Code == "UnschedulableAndUnresolvable" {
			code = framework.UnschedulableAndUnresolvable
		}
		statuses.Set(n.Node, framework.NewStatus(code, n.Reason))
	}
	status := guarded(func() *framework.Status {
		_, s := pl.PostFilter(ctx, state, pod, statuses)
		return s
	})
	if status.Code() == framework.Error {
		msg := "postfilter: " + display(status)
		out.Error = &msg
	}
	if claim := r.store.TakeDeallocated(string(pod.UID)); claim != "" {
		out.Deallocated = &claim
	}
}

// unreserve is the framework's Unreserve for a pod, in the wrapper's order (scheduler/wrapper):
// the host's part first (docs/kswe-dra-extension.md §2.2, §2.6: the pending allocations are
// dropped and the pod leaves status.reservedFor of its allocated claims), then the plugin's
// Unreserve. The pod's writes are not reported.
func (r *replayer) unreserve(ctx context.Context, state *framework.CycleState, pod *corev1.Pod, node string) {
	r.store.Unreserve(string(pod.UID))
	if pl, ok := r.plugin.(framework.ReservePlugin); ok {
		_ = guarded(func() *framework.Status { pl.Unreserve(ctx, state, pod, node); return nil })
	}
	r.store.TakeWrites(string(pod.UID))
}

// allocationsOf turns the guest's writes into the report's allocations.
func allocationsOf(writes []write) ([]allocationJSON, error) {
	out := []allocationJSON{}
	for _, w := range writes {
		var a struct {
			Devices struct {
				Results []resultJSON `json:"results"`
			} `json:"devices"`
		}
		if err := json.Unmarshal(w.Allocation, &a); err != nil {
			return nil, fmt.Errorf("claim %s: allocation: %w", w.Claim, err)
		}
		results := a.Devices.Results
		if results == nil {
			results = []resultJSON{}
		}
		out = append(out, allocationJSON{Claim: w.Claim, Results: results})
	}
	return out, nil
}
