package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
	watchtools "k8s.io/client-go/tools/watch"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"

	"sharing-affinity/e2e/controlplane"
	"sharing-affinity/e2e/dump"
	"sharing-affinity/e2e/scenario"
)

// TestE2E runs the scenarios against each scheduler under test, each with a fresh control plane
// (etcd, kube-apiserver, kube-controller-manager with the resource-claim controller).
//
//	SA_E2E=1                       required, else the test is skipped with a SKIPPED message
//	SA_E2E_SCHEDULERS=a,b          subset of kube-scheduler,sharing-affinity-scheduler (default: all)
//	SA_E2E_OUT=DIR                 where the cluster dumps go (default e2e/.out)
//	SA_E2E_KEEP=1                  keep the control plane's temporary directory (logs, etcd data)
func TestE2E(t *testing.T) {
	if os.Getenv("SA_E2E") == "" {
		t.Skip("SKIPPED: the e2e test starts a real control plane; set SA_E2E=1 (and run e2e/build.sh first)")
	}
	bin := controlplane.DefaultBinDir()
	if m := controlplane.MissingBinaries(bin, "etcd", "kube-apiserver", "kube-controller-manager"); len(m) > 0 {
		t.Skipf("SKIPPED: control-plane binaries not built, run e2e/build.sh: missing %v", m)
	}
	want := map[string]bool{}
	for _, n := range strings.Split(os.Getenv("SA_E2E_SCHEDULERS"), ",") {
		if n != "" {
			want[n] = true
		}
	}
	for _, s := range Schedulers(bin) {
		if len(want) > 0 && !want[s.Name] {
			continue
		}
		t.Run(s.Name, func(t *testing.T) {
			if s.Missing != "" {
				t.Skipf("SKIPPED: %s", s.Missing)
			}
			runScenarios(t, s)
		})
	}
}

type env struct {
	t     *testing.T
	ctx   context.Context
	cp    *controlplane.ControlPlane
	s     SchedulerUnderTest
	sched *controlplane.Process
}

func runScenarios(t *testing.T, s SchedulerUnderTest) {
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	t.Cleanup(cancel)
	cp, err := controlplane.Start(ctx, controlplane.Options{
		Namespaces: []string{"shared", "capacity", "templates", "affinity", "taints", "restart", "gone", "binding", "bindfail"},
		Logf:       t.Logf,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cp.Stop)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("control-plane logs:\n%s", cp.Logs())
		}
	})
	t.Logf("kube-apiserver ready %s after start", cp.APIServerStartup.Round(time.Millisecond))
	if _, err := cp.StartControllerManager(); err != nil {
		t.Fatal(err)
	}
	e := &env{t: t, ctx: ctx, cp: cp, s: s}
	e.startScheduler()
	if _, err := cp.Client.ResourceV1().DeviceClasses().Create(ctx, scenario.NICDeviceClass(), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	// Scenarios are independent (own namespace and nodes): all run, whatever fails. -run may
	// leave some out: ran names those that did.
	ok := true
	ran := map[string]bool{}
	for _, sc := range []struct {
		name string
		f    func(*testing.T)
	}{
		{"shared-nic", e.sharedNIC},
		{"capacity-holds", e.capacityHolds},
		{"claim-templates", e.claimTemplates},
		{"affinity", e.affinity},
		{"device-taint-rule", e.taintRule},
		{"scheduler-restart", e.restart},
		{"node-gone", e.nodeGone},
		{"binding-conditions", e.bindingConditions},
		{"binding-failure", e.bindingFailure},
	} {
		if !t.Run(sc.name, func(t *testing.T) { ran[sc.name] = true; sc.f(t) }) {
			ok = false
		}
	}
	e.dumpAndAudit(ok, ran["affinity"] || ran["scheduler-restart"])
}

func (e *env) startScheduler() {
	p, err := e.cp.StartScheduler(e.s.Spec())
	if err != nil {
		e.t.Fatal(err)
	}
	e.sched = p
}

// nodes creates n nodes labelled scenario=name, each with a pool of nics NICs of slots slots.
func (e *env) nodes(t *testing.T, name string, n, nics int, slots int64) {
	for i := 1; i <= n; i++ {
		node := fmt.Sprintf("%s-n%d", name, i)
		if err := scenario.CreateNode(e.ctx, e.cp.Client, scenario.NodeObject(node, map[string]string{"scenario": name})); err != nil {
			t.Fatal(err)
		}
		if _, err := e.cp.Client.ResourceV1().ResourceSlices().Create(e.ctx, scenario.NICSlice(node, nics, slots), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
}

// claimPod creates claim NAME (subnet, 1 slot) and pod NAME using it, on the scenario's nodes.
func (e *env) claimPod(t *testing.T, ns, name, subnet string) {
	if _, err := e.cp.Client.ResourceV1().ResourceClaims(ns).Create(e.ctx, scenario.Claim(ns, name, subnet, 1), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	e.pod(t, ns, name, name, "")
}

func (e *env) pod(t *testing.T, ns, name, claim, template string) {
	p := scenario.Pod(ns, name, e.s.SchedulerName, claim, template)
	p.Spec.NodeSelector = map[string]string{"scenario": ns}
	if _, err := e.cp.Client.CoreV1().Pods(ns).Create(e.ctx, p, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

func (e *env) waitBound(t *testing.T, ns string, names ...string) map[string]string {
	if len(names) == 0 {
		names = nil
	}
	bound, err := scenario.WaitBound(e.ctx, e.cp.Client, ns, names, 90*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	return bound
}

// inspect reads the namespace's allocations and fails on a broken rule every scheduler keeps;
// for a sharing-affinity scheduler also on a device shared across subnets.
func (e *env) inspect(t *testing.T, ns string) *scenario.State {
	st, err := scenario.Inspect(e.ctx, e.cp.Client, ns)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range st.Problems {
		t.Errorf("%s: %s", ns, p)
	}
	if v := st.AffinityViolations(); len(v) > 0 {
		if e.s.SharingAffinity {
			t.Errorf("%s: sharing affinity broken: %v", ns, v)
		} else {
			t.Logf("%s: baseline (%s keeps no affinity): %v", ns, e.s.Name, v)
		}
	}
	t.Logf("%s: devices in use: %v", ns, st.UsedDevices())
	return st
}

func (e *env) claim(t *testing.T, ns, name string) *resourcev1.ResourceClaim {
	c, err := e.cp.Client.ResourceV1().ResourceClaims(ns).Get(e.ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// sharedNIC: three claims of one slot on one 4-slot NIC: all allocated on it, distinct
// shareIDs, consumedCapacity 1, reservedFor the pod.
func (e *env) sharedNIC(t *testing.T) {
	ns := "shared"
	e.nodes(t, ns, 1, 1, 4)
	for _, n := range []string{"p1", "p2", "p3"} {
		e.claimPod(t, ns, n, "subnet-a")
	}
	e.waitBound(t, ns)
	st := e.inspect(t, ns)
	shareIDs := map[string]bool{}
	for _, n := range []string{"p1", "p2", "p3"} {
		c := e.claim(t, ns, n)
		if c.Status.Allocation == nil {
			t.Fatalf("claim %s not allocated", n)
		}
		r := c.Status.Allocation.Devices.Results[0]
		if r.Device != "eth1" || r.ShareID == nil {
			t.Errorf("claim %s: %+v, want eth1 with a shareID", n, r)
		} else {
			shareIDs[string(*r.ShareID)] = true
		}
		if q := r.ConsumedCapacity[scenario.Capacity]; q.Value() != 1 {
			t.Errorf("claim %s consumed %s slots, want 1", n, q.String())
		}
		if len(c.Status.ReservedFor) != 1 || c.Status.ReservedFor[0].Name != n {
			t.Errorf("claim %s reservedFor %+v, want pod %s", n, c.Status.ReservedFor, n)
		}
	}
	if len(shareIDs) != 3 {
		t.Errorf("shareIDs %v, want 3 distinct", shareIDs)
	}
	if u := st.Devices[scenario.Driver+"/shared-n1/eth1"]; u == nil || u.Used != 3 {
		t.Errorf("eth1 use %+v, want 3 slots", u)
	}
}

// capacityHolds: a 2-slot NIC takes two claims; the third pod stays unschedulable.
func (e *env) capacityHolds(t *testing.T) {
	ns := "capacity"
	e.nodes(t, ns, 1, 1, 2)
	e.claimPod(t, ns, "p1", "subnet-a")
	e.claimPod(t, ns, "p2", "subnet-a")
	e.waitBound(t, ns, "p1", "p2")
	e.claimPod(t, ns, "p3", "subnet-a")
	msg, err := scenario.WaitUnschedulable(e.ctx, e.cp.Client, ns, "p3", 60*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("p3 unschedulable: %s", msg)
	st := e.inspect(t, ns)
	if len(st.Pending) != 1 || st.Pending[0] != "p3" {
		t.Errorf("pending claims %v, want [p3]", st.Pending)
	}
}

// claimTemplates: pods with ResourceClaimTemplates of subnets a and b (three each) on two 4-slot
// NICs; the resource-claim controller creates their claims, the scheduler allocates them. With
// sharing affinity each subnet gets its own NIC; the in-tree scheduler packs by capacity (logged).
// Pod late's template is created only after the pod: the controller cannot create its claim, and
// the pod waits (DynamicResources' PreEnqueue, or the wrapper's) with no scheduling attempt until
// it can. No pod of the namespace fails scheduling for want of its claim (a FailedScheduling
// event naming Reserve or a missing claim).
func (e *env) claimTemplates(t *testing.T) {
	ns := "templates"
	e.nodes(t, ns, 1, 2, 4)
	for _, sn := range []string{"a", "b"} {
		if _, err := e.cp.Client.ResourceV1().ResourceClaimTemplates(ns).Create(e.ctx, scenario.ClaimTemplate(ns, "nic-"+sn, "subnet-"+sn, 1), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	for i := 1; i <= 3; i++ {
		e.pod(t, ns, fmt.Sprintf("a%d", i), "", "nic-a")
		e.pod(t, ns, fmt.Sprintf("b%d", i), "", "nic-b")
	}
	e.pod(t, ns, "late", "", "nic-late")
	e.waitBound(t, ns, "a1", "a2", "a3", "b1", "b2", "b3")
	time.Sleep(2 * time.Second)
	if bound, _ := scenario.WaitBound(e.ctx, e.cp.Client, ns, []string{"late"}, 0); len(bound) > 0 {
		t.Fatalf("pod late bound without its claim: %v", bound)
	}
	if failed := e.failedScheduling(t, ns, "late"); len(failed) > 0 {
		t.Errorf("pod late was attempted while its claim did not exist: %v", failed)
	}
	if _, err := e.cp.Client.ResourceV1().ResourceClaimTemplates(ns).Create(e.ctx, scenario.ClaimTemplate(ns, "nic-late", "subnet-a", 1), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	e.waitBound(t, ns)
	st := e.inspect(t, ns)
	if len(st.Allocated) != 7 || len(st.Pending) != 0 {
		t.Errorf("allocated %v pending %v, want 7 generated claims allocated", st.Allocated, st.Pending)
	}
	pods, err := e.cp.Client.CoreV1().Pods(ns).List(e.ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pods.Items {
		if len(p.Status.ResourceClaimStatuses) != 1 || p.Status.ResourceClaimStatuses[0].ResourceClaimName == nil {
			t.Errorf("pod %s: resourceClaimStatuses %+v", p.Name, p.Status.ResourceClaimStatuses)
		}
	}
	for _, msg := range e.failedScheduling(t, ns, "") {
		if strings.Contains(msg, "Reserve") || strings.Contains(msg, "does not exist") || strings.Contains(msg, "not found") {
			t.Errorf("a pod failed scheduling for want of its claim instead of waiting: %s", msg)
		}
	}
}

// failedScheduling are the messages of the namespace's FailedScheduling events, of pod (when not
// "") or of every pod.
func (e *env) failedScheduling(t *testing.T, ns, pod string) []string {
	list, err := e.cp.Client.CoreV1().Events(ns).List(e.ctx, metav1.ListOptions{FieldSelector: "reason=FailedScheduling"})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, ev := range list.Items {
		if pod == "" || ev.InvolvedObject.Name == pod {
			out = append(out, ev.InvolvedObject.Name+": "+ev.Message)
		}
	}
	return out
}

// affinity: two 4-slot NICs, claims of subnets a and b, then c. A sharing-affinity scheduler puts
// a and b on different NICs and leaves c unschedulable until b's pods are deleted and their claims
// deallocated; c then takes the NIC b held. The in-tree scheduler packs by capacity only (logged
// as the baseline).
func (e *env) affinity(t *testing.T) {
	ns := "affinity"
	e.nodes(t, ns, 1, 2, 4)
	for _, n := range []string{"a1", "b1", "a2", "b2"} {
		e.claimPod(t, ns, n, "subnet-"+n[:1])
		e.waitBound(t, ns, n)
	}
	st := e.inspect(t, ns)
	if e.s.SharingAffinity && st.Allocated["a1"] == st.Allocated["b1"] {
		t.Errorf("a1 and b1 share %s", st.Allocated["a1"])
	}
	if e.s.SharingAffinity && (st.Allocated["a1"] != st.Allocated["a2"] || st.Allocated["b1"] != st.Allocated["b2"]) {
		t.Errorf("equal subnets do not share a NIC: %v", st.Allocated)
	}
	e.claimPod(t, ns, "c1", "subnet-c")
	if !e.s.SharingAffinity {
		e.waitBound(t, ns, "c1")
		e.inspect(t, ns)
		return
	}
	msg, err := scenario.WaitUnschedulable(e.ctx, e.cp.Client, ns, "c1", 60*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("c1 unschedulable while both NICs are locked: %s", msg)
	bNIC := st.Allocated["b1"]
	for _, n := range []string{"b1", "b2"} {
		e.release(t, ns, n)
	}
	e.waitBound(t, ns, "c1")
	st = e.inspect(t, ns)
	if st.Allocated["c1"] != bNIC {
		t.Errorf("c1 on %s, want %s (freed by b1, b2)", st.Allocated["c1"], bNIC)
	}
}

// taintRule: a DeviceTaintRule (resource.k8s.io/v1) taints eth1 NoSchedule; claims go to eth2.
func (e *env) taintRule(t *testing.T) {
	ns := "taints"
	e.nodes(t, ns, 1, 2, 4)
	rule := &resourcev1.DeviceTaintRule{
		ObjectMeta: metav1.ObjectMeta{Name: "taints-eth1"},
		Spec: resourcev1.DeviceTaintRuleSpec{
			DeviceSelector: &resourcev1.DeviceTaintSelector{Driver: ptr.To(scenario.Driver), Pool: ptr.To("taints-n1"), Device: ptr.To("eth1")},
			Taint:          resourcev1.DeviceTaint{Key: "example.com/maintenance", Value: "true", Effect: resourcev1.DeviceTaintEffectNoSchedule},
		},
	}
	if _, err := e.cp.Client.ResourceV1().DeviceTaintRules().Create(e.ctx, rule, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Second) // the scheduler's informer sees the rule before the pods
	e.claimPod(t, ns, "p1", "subnet-a")
	e.claimPod(t, ns, "p2", "subnet-a")
	e.waitBound(t, ns)
	st := e.inspect(t, ns)
	for _, n := range []string{"p1", "p2"} {
		if st.Allocated[n] != scenario.Driver+"/taints-n1/eth2" {
			t.Errorf("claim %s on %s, want eth2 (eth1 is tainted NoSchedule)", n, st.Allocated[n])
		}
	}
}

// nodeGone: claim c1 is allocated (status written here) to a NIC of a node that no longer
// exists, reserved for no pod. Pod p1 uses it: no node fits (the allocation's node selector
// matches none), and PostFilter deallocates the claim, as upstream's DynamicResources PostFilter
// does; the claim's update requeues the pod, which is then bound with a new allocation on the
// node that exists.
func (e *env) nodeGone(t *testing.T) {
	ns := "gone"
	e.nodes(t, ns, 1, 1, 4)
	c := e.cp.Client
	cl, err := c.ResourceV1().ResourceClaims(ns).Create(e.ctx, scenario.Claim(ns, "c1", "subnet-a", 1), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ghost := "gone-ghost"
	cl.Status.Allocation = &resourcev1.AllocationResult{
		Devices: resourcev1.DeviceAllocationResult{Results: []resourcev1.DeviceRequestAllocationResult{
			{Request: "nic", Driver: scenario.Driver, Pool: ghost, Device: "eth1"},
		}},
		NodeSelector: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
			MatchFields: []corev1.NodeSelectorRequirement{{Key: "metadata.name", Operator: corev1.NodeSelectorOpIn, Values: []string{ghost}}},
		}}},
	}
	if _, err := c.ResourceV1().ResourceClaims(ns).UpdateStatus(e.ctx, cl, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	e.pod(t, ns, "p1", "c1", "")
	bound := e.waitBound(t, ns, "p1")
	got := e.claim(t, ns, "c1").Status.Allocation
	if got == nil || len(got.Devices.Results) != 1 || got.Devices.Results[0].Pool != "gone-n1" {
		t.Fatalf("claim c1 after PostFilter and a new attempt: %+v (pod on %s)", got, bound["p1"])
	}
	e.inspect(t, ns)
}

// bindingConditions (KEP-5007): the NIC has binding conditions. The claim is allocated and
// reserved for the pod, but PreBind waits: the pod stays unbound until the test, acting as the
// driver, reports Attached True in the claim's status.devices; PreBind's next check (every 5 s)
// passes and the pod is bound on the allocated node.
func (e *env) bindingConditions(t *testing.T) {
	ns := "binding"
	e.bindingNode(t, ns)
	e.claimPod(t, ns, "p1", "subnet-a")
	cl := e.waitClaim(t, ns, "p1", "allocated and reserved for pod p1", 60*time.Second, func(c *resourcev1.ResourceClaim) bool {
		return c.Status.Allocation != nil && scenario.ReservedFor(c, "p1")
	})
	t.Logf("claim p1: %s", scenario.BindingStatus(cl))
	e.checkBindingAllocation(t, cl)
	// PreBind checks at once, then every 5 s: 6 s cover a second check without the condition.
	e.holdUnbound(t, ns, "p1", 6*time.Second)
	written := e.setDeviceCondition(t, ns, "p1", scenario.Attached, "Attached")
	bound, err := scenario.WaitBound(e.ctx, e.cp.Client, ns, []string{"p1"}, 30*time.Second)
	if err != nil {
		t.Fatalf("after %s reported True: %v (claim: %s)", scenario.Attached, err, scenario.BindingStatus(e.claim(t, ns, "p1")))
	}
	t.Logf("p1 bound to %s %s after %s was written", bound["p1"], time.Since(written).Round(100*time.Millisecond), scenario.Attached)
	if bound["p1"] != ns+"-n1" {
		t.Errorf("p1 bound to %s, want %s-n1 (the allocation's node)", bound["p1"], ns)
	}
	after := e.claim(t, ns, "p1")
	if !scenario.ReservedFor(after, "p1") || after.Status.Allocation == nil ||
		after.Status.Allocation.Devices.Results[0].Device != cl.Status.Allocation.Devices.Results[0].Device {
		t.Errorf("claim p1 after binding: %s, want the allocation it had, reserved for p1", scenario.BindingStatus(after))
	}
	e.inspect(t, ns)
}

// bindingFailure (KEP-5007): the driver reports AttachFailed True while PreBind waits. PreBind
// fails ("binding failed"), Unreserve drops the pod from the claim's reservedFor, the next
// attempt finds the claim unusable and PostFilter deallocates it (allocation, reservedFor and
// status.devices cleared), and a later attempt allocates it again: all seen on a watch of the
// claim. The pod stays unbound throughout; once the driver reports Attached True on the new
// allocation it is bound.
func (e *env) bindingFailure(t *testing.T) {
	ns := "bindfail"
	e.bindingNode(t, ns)
	e.claimPod(t, ns, "p1", "subnet-a")
	cl := e.waitClaim(t, ns, "p1", "allocated and reserved for pod p1", 60*time.Second, func(c *resourcev1.ResourceClaim) bool {
		return c.Status.Allocation != nil && scenario.ReservedFor(c, "p1")
	})
	t.Logf("claim p1: %s", scenario.BindingStatus(cl))
	e.checkBindingAllocation(t, cl)
	claims := e.cp.Client.ResourceV1().ResourceClaims(ns)
	w, err := watchtools.NewRetryWatcherWithContext(e.ctx, cl.ResourceVersion, &cache.ListWatch{
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			o.FieldSelector = fields.OneTermEqualSelector("metadata.name", "p1").String()
			return claims.Watch(ctx, o)
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	failed := e.setDeviceCondition(t, ns, "p1", scenario.AttachFailed, "AttachFailed")
	var unreserved, deallocated time.Duration
	ctx, cancel := context.WithTimeout(e.ctx, 90*time.Second)
	defer cancel()
	ev, err := watchtools.UntilWithoutRetry(ctx, w, func(ev watch.Event) (bool, error) {
		c, ok := ev.Object.(*resourcev1.ResourceClaim)
		if !ok {
			return false, nil
		}
		t.Logf("claim p1 %s +%s: %s", ev.Type, time.Since(failed).Round(100*time.Millisecond), scenario.BindingStatus(c))
		switch {
		case deallocated == 0 && c.Status.Allocation != nil && !scenario.ReservedFor(c, "p1"):
			unreserved = time.Since(failed)
		case deallocated == 0 && c.Status.Allocation == nil:
			if len(c.Status.ReservedFor) > 0 || len(c.Status.Devices) > 0 {
				return false, fmt.Errorf("claim p1 deallocated with reservedFor or status.devices left: %s", scenario.BindingStatus(c))
			}
			deallocated = time.Since(failed)
		case deallocated > 0 && c.Status.Allocation != nil && scenario.ReservedFor(c, "p1"):
			return true, nil
		}
		return false, nil
	})
	if err != nil {
		t.Fatalf("watching claim p1 after %s (unreserved after %s, deallocated after %s): %v; claim: %s",
			scenario.AttachFailed, unreserved, deallocated, err, scenario.BindingStatus(e.claim(t, ns, "p1")))
	}
	realloc := ev.Object.(*resourcev1.ResourceClaim)
	t.Logf("after %s: p1 unreserved +%s, claim deallocated +%s, allocated again +%s",
		scenario.AttachFailed, unreserved.Round(100*time.Millisecond), deallocated.Round(100*time.Millisecond), time.Since(failed).Round(100*time.Millisecond))
	if unreserved == 0 {
		t.Errorf("claim p1 was deallocated without Unreserve dropping p1 from reservedFor first")
	}
	if len(realloc.Status.Devices) > 0 {
		t.Errorf("claim p1 allocated again with the old status.devices: %s", scenario.BindingStatus(realloc))
	}
	e.holdUnbound(t, ns, "p1", 0)
	e.waitFailedScheduling(t, ns, "p1", "binding failed", 30*time.Second)
	attached := e.setDeviceCondition(t, ns, "p1", scenario.Attached, "Attached")
	bound, err := scenario.WaitBound(e.ctx, e.cp.Client, ns, []string{"p1"}, 30*time.Second)
	if err != nil {
		t.Fatalf("after %s reported True on the new allocation: %v (claim: %s)", scenario.Attached, err, scenario.BindingStatus(e.claim(t, ns, "p1")))
	}
	t.Logf("p1 bound to %s %s after %s was written", bound["p1"], time.Since(attached).Round(100*time.Millisecond), scenario.Attached)
	e.inspect(t, ns)
}

// bindingNode creates node NS-n1 (label scenario=NS) with one 4-slot NIC that has binding
// conditions (scenario.BindingSlice).
func (e *env) bindingNode(t *testing.T, ns string) {
	node := ns + "-n1"
	if err := scenario.CreateNode(e.ctx, e.cp.Client, scenario.NodeObject(node, map[string]string{"scenario": ns})); err != nil {
		t.Fatal(err)
	}
	if _, err := e.cp.Client.ResourceV1().ResourceSlices().Create(e.ctx, scenario.BindingSlice(node, 1, 4), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// checkBindingAllocation: the allocation result carries the device's binding conditions and the
// allocation its allocationTimestamp, and the driver has reported nothing yet.
func (e *env) checkBindingAllocation(t *testing.T, cl *resourcev1.ResourceClaim) {
	a := cl.Status.Allocation
	if a.AllocationTimestamp == nil {
		t.Errorf("claim %s: allocation without allocationTimestamp", cl.Name)
	}
	for _, r := range a.Devices.Results {
		if !slices.Equal(r.BindingConditions, []string{scenario.Attached}) || !slices.Equal(r.BindingFailureConditions, []string{scenario.AttachFailed}) {
			t.Errorf("claim %s: result %s/%s bindingConditions %v bindingFailureConditions %v, want [%s] [%s]",
				cl.Name, r.Pool, r.Device, r.BindingConditions, r.BindingFailureConditions, scenario.Attached, scenario.AttachFailed)
		}
	}
	if len(cl.Status.Devices) > 0 {
		t.Errorf("claim %s: status.devices %+v before the driver wrote any", cl.Name, cl.Status.Devices)
	}
}

// waitClaim polls claim NAME until cond holds and returns it.
func (e *env) waitClaim(t *testing.T, ns, name, what string, timeout time.Duration, cond func(*resourcev1.ResourceClaim) bool) *resourcev1.ResourceClaim {
	for end := time.Now().Add(timeout); ; time.Sleep(100 * time.Millisecond) {
		c := e.claim(t, ns, name)
		if cond(c) {
			return c
		}
		if time.Now().After(end) {
			t.Fatalf("claim %s not %s after %s: %s", name, what, timeout, scenario.BindingStatus(c))
		}
	}
}

// holdUnbound fails if pod NAME gets a node within d (checked every 200 ms; once when d is 0).
func (e *env) holdUnbound(t *testing.T, ns, name string, d time.Duration) {
	for end := time.Now().Add(d); ; time.Sleep(200 * time.Millisecond) {
		p, err := e.cp.Client.CoreV1().Pods(ns).Get(e.ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if p.Spec.NodeName != "" {
			t.Fatalf("pod %s bound to %s before its claim's binding conditions were met (claim: %s)",
				name, p.Spec.NodeName, scenario.BindingStatus(e.claim(t, ns, name)))
		}
		if !time.Now().Before(end) {
			return
		}
	}
}

// setDeviceCondition reports condType True for the allocated devices of claim NAME in its
// status.devices, as the driver would (retrying on conflict), and returns when it was written.
func (e *env) setDeviceCondition(t *testing.T, ns, name, condType, reason string) time.Time {
	claims := e.cp.Client.ResourceV1().ResourceClaims(ns)
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		c, err := claims.Get(e.ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if scenario.SetDeviceCondition(c, condType, reason, "reported by the e2e test") == 0 {
			return fmt.Errorf("no allocated device with binding conditions: %s", scenario.BindingStatus(c))
		}
		_, err = claims.UpdateStatus(e.ctx, c, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		t.Fatalf("claim %s: report %s: %v", name, condType, err)
	}
	return time.Now()
}

// waitFailedScheduling waits until a FailedScheduling event of pod NAME contains substr.
func (e *env) waitFailedScheduling(t *testing.T, ns, name, substr string, timeout time.Duration) {
	for end := time.Now().Add(timeout); ; time.Sleep(500 * time.Millisecond) {
		msgs := e.failedScheduling(t, ns, name)
		for _, m := range msgs {
			if strings.Contains(m, substr) {
				t.Logf("FailedScheduling event: %s", m)
				return
			}
		}
		if time.Now().After(end) {
			t.Errorf("no FailedScheduling event of pod %s containing %q after %s: %v", name, substr, timeout, msgs)
			return
		}
	}
}

// release deletes pod NAME and deallocates and deletes its claim NAME, as the kubelet and the
// resource-claim controller of a real cluster would.
func (e *env) release(t *testing.T, ns, name string) {
	c := e.cp.Client
	if err := c.CoreV1().Pods(ns).Delete(e.ctx, name, metav1.DeleteOptions{GracePeriodSeconds: new(int64)}); err != nil {
		t.Fatal(err)
	}
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cl, err := c.ResourceV1().ResourceClaims(ns).Get(e.ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if cl.Status.Allocation != nil || len(cl.Status.ReservedFor) > 0 {
			cl.Status.Allocation, cl.Status.ReservedFor = nil, nil
			if cl, err = c.ResourceV1().ResourceClaims(ns).UpdateStatus(e.ctx, cl, metav1.UpdateOptions{}); err != nil {
				return err
			}
		}
		if len(cl.Finalizers) > 0 {
			cl.Finalizers = nil
			if _, err = c.ResourceV1().ResourceClaims(ns).Update(e.ctx, cl, metav1.UpdateOptions{}); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatalf("deallocate claim %s: %v", name, err)
	}
	if err := c.ResourceV1().ResourceClaims(ns).Delete(e.ctx, name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
}

// restart: 2 nodes x 2 NICs x 4 slots. 6 pods of subnets x, y, z are bound; 3 more are
// created and the scheduler is SIGKILLed as soon as the first of them is bound (others may be in flight: claim allocated,
// pod not yet bound); 3 more are created while it is down; it restarts. It must rebuild locks
// and capacity from the allocated claims: all 12 bound, nothing over capacity, and (sharing
// affinity) no NIC holds two subnets.
func (e *env) restart(t *testing.T) {
	ns := "restart"
	e.nodes(t, ns, 2, 2, 4)
	subnets := []string{"x", "y", "z"}
	var all []string
	add := func(from, to int) {
		for i := from; i < to; i++ {
			n := fmt.Sprintf("%s%d", subnets[i%3], i/3+1)
			e.claimPod(t, ns, n, "subnet-"+n[:1])
			all = append(all, n)
		}
	}
	add(0, 6)
	e.waitBound(t, ns, all...)
	e.inspect(t, ns)
	add(6, 9)
	// Kill as soon as the first of the three is bound: the others are likely in flight.
	for end := time.Now().Add(30 * time.Second); time.Now().Before(end); time.Sleep(10 * time.Millisecond) {
		if b, _ := scenario.WaitBound(e.ctx, e.cp.Client, ns, all, 0); len(b) >= 7 {
			break
		}
	}
	e.sched.Kill()
	bound, _ := scenario.WaitBound(e.ctx, e.cp.Client, ns, all, time.Millisecond)
	t.Logf("%s killed with %d of %d pods bound", e.s.Name, len(bound), len(all))
	add(9, 12)
	e.startScheduler()
	e.waitBound(t, ns, all...)
	st := e.inspect(t, ns)
	if e.s.SharingAffinity {
		nics := map[string]map[string]bool{}
		for cl, dev := range st.Allocated {
			if nics[cl[:1]] == nil {
				nics[cl[:1]] = map[string]bool{}
			}
			nics[cl[:1]][dev] = true
		}
		t.Logf("NICs per subnet: %v", nics)
	}
}

// dumpAndAudit writes the cluster as a List (SA_E2E_OUT, default e2e/.out/SCHEDULER.json) and
// runs `sharing-affinity audit --config` on it when the CLI is built (target/release or
// SA_AUDIT_BIN): exit 3 (a rule broken) fails a sharing-affinity scheduler; the in-tree baseline
// must get exit 3 when crossSubnet (the affinity or scheduler-restart scenario ran, where it
// shares NICs across subnets), else 0.
func (e *env) dumpAndAudit(scenariosPassed, crossSubnet bool) {
	t := e.t
	out := os.Getenv("SA_E2E_OUT")
	if out == "" {
		out = filepath.Join(RepoRoot(), "e2e", ".out")
	}
	if err := os.MkdirAll(out, 0o755); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(out, e.s.Name+".json")
	if err := dump.Write(e.ctx, e.cp.Client, file); err != nil {
		t.Fatal(err)
	}
	cfg := filepath.Join(out, "audit-config.json")
	if err := os.WriteFile(cfg, []byte(AuditConfig), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("cluster dump: %s (audit: sharing-affinity audit %s --config %s)", file, file, cfg)
	cli := AuditCLI()
	if cli == "" {
		t.Logf("audit not run: the sharing-affinity CLI is not built (cargo build --release -p sharing-affinity-host, or SA_AUDIT_BIN)")
		return
	}
	audit := func(args ...string) int {
		code, out, err := Audit(cli, file, args...)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("sharing-affinity audit %s %s: exit %d\n%s", file, strings.Join(args, " "), code, strings.TrimSpace(out))
		return code
	}
	if !scenariosPassed {
		audit("--config", cfg)
		return
	}
	// Without extractors the audit checks what every scheduler keeps (capacity, request
	// policies, selectors...): it must pass for both.
	if code := audit(); code != 0 {
		t.Errorf("audit without extractors exited %d, want 0", code)
	}
	// With the subnet extractor: a sharing-affinity scheduler must pass; the in-tree baseline
	// shared NICs across subnets in the affinity and restart scenarios, which the audit must see.
	code := audit("--config", cfg)
	if e.s.SharingAffinity && code != 0 {
		t.Errorf("audit with the subnet extractor exited %d, want 0", code)
	}
	if !e.s.SharingAffinity && crossSubnet && code != 3 {
		t.Errorf("audit of the in-tree baseline with the subnet extractor exited %d, want 3 (lock violations)", code)
	}
	if !e.s.SharingAffinity && !crossSubnet && code != 0 {
		t.Errorf("audit of the in-tree baseline with the subnet extractor exited %d, want 0 (affinity and scheduler-restart did not run)", code)
	}
}
