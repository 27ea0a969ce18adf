// Command schedbench measures scheduling throughput on a real control plane (etcd,
// kube-apiserver, kube-controller-manager's resource-claim controller, the scheduler under test),
// shaped like upstream scheduler_perf's SchedulingWithResourceClaimTemplate
// (test/integration/scheduler_perf/dra/performance-config.yaml, workload 5000pods_500nodes) and
// its ConsumableCapacity variant:
//
//  1. N fake nodes (no kubelet; Ready, not-ready taint cleared), one ResourceSlice per node, one
//     DeviceClass, a ResourceClaimTemplate per namespace;
//  2. init pods (namespace init) with a claim from the template, scheduled by the scheduler
//     under test and not measured;
//  3. measured pods (namespace test), created at once while a collector counts pods that get a
//     node, sampling every second as scheduler_perf's throughputCollector does (the first sample
//     is skipped, intervals without progress are merged into the next), giving pods/s
//     Average/Perc50/Perc90/Perc95/Perc99.
//
// Device kinds (--devices):
//
//	plain     10 dedicated devices per node (as resourceslice-basic-devices.yaml), one per claim
//	capacity  NICs with allowMultipleAllocations and consumable "slots"; claims take one slot,
//	          without affinity parameters
//	affinity  the same NICs; each claim carries NICConfig{subnet: subnet-(i mod --subnets)}
//
// Modes: --mode quick (10 nodes, 50 init + 50 measured pods), --mode full (500 nodes, 2500 +
// 2500, as 5000pods_500nodes). --nodes/--init/--measure override.
//
// At the end it reads the scheduler's /metrics and reports the DRA plugin's per-call latency
// (DynamicResources in-tree, sharing-affinity in sharing-affinity-scheduler) by extension point;
// --audit dumps the cluster and fails when `sharing-affinity audit` finds a broken rule.
//
//	go run ./cmd/schedbench --scheduler kube-scheduler --devices plain --mode quick
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"math"
	"os"
	"os/signal"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"

	"sharing-affinity/e2e"
	"sharing-affinity/e2e/controlplane"
	"sharing-affinity/e2e/dump"
	"sharing-affinity/e2e/scenario"
)

type options struct {
	scheduler, devices, mode, out, dumpFile string
	audit, batching                         bool
	nodes, init, measure                    int
	nics, slots, subnets, workers           int
	timeout, stall                          time.Duration
}

// Result is one run, printed as JSON and appended to --out.
type Result struct {
	Scheduler       string             `json:"scheduler"`
	Devices         string             `json:"devices"`
	Nodes           int                `json:"nodes"`
	InitPods        int                `json:"initPods"`
	MeasurePods     int                `json:"measurePods"`
	Bound           int                `json:"bound"`
	InitSeconds     float64            `json:"initSeconds"`
	MeasureSeconds  float64            `json:"measureSeconds"`
	OverallPodsPerS float64            `json:"overallPodsPerSecond"`
	Throughput      map[string]float64 `json:"schedulingThroughput"`
	Samples         int                `json:"samples"`
	APIServerStart  float64            `json:"apiserverStartSeconds"`
	// MeasureCPU is the CPU seconds each process used during the measured phase.
	MeasureCPU map[string]float64 `json:"measureCPUSeconds"`
	// Plugin is the DRA plugin of the scheduler under test; PluginLatency its per-call latency by
	// extension point over the whole run (init and measured pods), from the scheduler's /metrics.
	Plugin        string             `json:"plugin"`
	PluginLatency map[string]Latency `json:"pluginLatency,omitempty"`
	// Audit is the exit code of `sharing-affinity audit` on the dump (--audit), per audit.
	Audit   map[string]int `json:"audit,omitempty"`
	Started string         `json:"started"`
	Note    string         `json:"note,omitempty"`
}

func main() {
	var o options
	flag.StringVar(&o.scheduler, "scheduler", "kube-scheduler", "kube-scheduler (in-tree v1.37.2 from e2e/.bin) or sharing-affinity-scheduler (SA_SCHEDULER_BIN, SA_SCHEDULER_CONFIG)")
	flag.StringVar(&o.devices, "devices", "plain", "plain | capacity | affinity")
	flag.StringVar(&o.mode, "mode", "quick", "quick (10 nodes, 50+50 pods) | full (500 nodes, 2500+2500 pods)")
	flag.IntVar(&o.nodes, "nodes", 0, "nodes (overrides --mode)")
	flag.IntVar(&o.init, "init", -1, "init pods (overrides --mode)")
	flag.IntVar(&o.measure, "measure", 0, "measured pods (overrides --mode)")
	flag.IntVar(&o.nics, "nics", 2, "NICs per node (capacity, affinity)")
	flag.IntVar(&o.slots, "slots", 5, "slots per NIC (capacity, affinity)")
	flag.IntVar(&o.subnets, "subnets", 10, "distinct subnets (affinity)")
	flag.IntVar(&o.workers, "workers", 16, "concurrent object creations")
	flag.DurationVar(&o.timeout, "timeout", 10*time.Minute, "how long each phase (init, measured) may take")
	flag.DurationVar(&o.stall, "stall", 60*time.Second, "give up on a phase when no pod was bound for this long")
	flag.StringVar(&o.out, "out", "", "append the result as a JSON line to this file")
	flag.StringVar(&o.dumpFile, "dump", "", "write the cluster as a List (for sharing-affinity audit) to this file at the end")
	flag.BoolVar(&o.batching, "batching", true, "kube-scheduler: keep v1.37's OpportunisticBatching (on by default; off makes every pod run Filter, for the plugin latency)")
	flag.BoolVar(&o.audit, "audit", false, "dump the cluster (--dump, default .out/schedbench-SCHEDULER.json) and fail when `sharing-affinity audit` finds a broken rule (with the subnet extractor too for sharing-affinity-scheduler and --devices affinity)")
	flag.Parse()
	switch o.mode {
	case "quick":
		o.nodes, o.init, o.measure = or(o.nodes, 10), orNeg(o.init, 50), or(o.measure, 50)
	case "full":
		o.nodes, o.init, o.measure = or(o.nodes, 500), orNeg(o.init, 2500), or(o.measure, 2500)
	default:
		fail("unknown --mode %q", o.mode)
	}
	if err := run(o); err != nil {
		fail("%v", err)
	}
}

func or(v, d int) int {
	if v > 0 {
		return v
	}
	return d
}

func orNeg(v, d int) int {
	if v >= 0 {
		return v
	}
	return d
}

func fail(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "schedbench: "+format+"\n", args...)
	os.Exit(1)
}

func logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "%s "+format+"\n", append([]any{time.Now().Format("15:04:05.000")}, args...)...)
}

func run(o options) (err error) {
	bin := controlplane.DefaultBinDir()
	var s e2e.SchedulerUnderTest
	var plugin string
	switch o.scheduler {
	case "kube-scheduler":
		s = e2e.InTreeScheduler(bin)
		gates := controlplane.FeatureGates
		if !o.batching {
			gates += ",OpportunisticBatching=false"
		}
		s.Args = []string{"--feature-gates=" + gates} // -v=0: logging costs throughput
		plugin = "DynamicResources"
	case "sharing-affinity-scheduler":
		s = e2e.SharingAffinityScheduler()
		plugin = "sharing-affinity" // scheduler/wrapper.Name
	default:
		return fmt.Errorf("unknown --scheduler %q", o.scheduler)
	}
	if s.Missing != "" {
		return fmt.Errorf("%s", s.Missing)
	}
	cli := ""
	if o.audit {
		if cli = e2e.AuditCLI(); cli == "" {
			return fmt.Errorf("--audit: the sharing-affinity CLI is not built (cargo build --release -p sharing-affinity-host, or SA_AUDIT_BIN)")
		}
		if o.dumpFile == "" {
			o.dumpFile = filepath.Join(e2e.RepoRoot(), "e2e", ".out", "schedbench-"+s.Name+".json")
		}
	}
	port, err := controlplane.FreePort()
	if err != nil {
		return err
	}
	s.Args = append(s.Args, fmt.Sprintf("--secure-port=%d", port), MetricsAllowArg)
	ctx := context.Background()
	cp, err := controlplane.Start(ctx, controlplane.Options{Namespaces: []string{"init", "test"}, Logf: logf})
	if err != nil {
		return err
	}
	defer cp.Stop()
	// Ctrl-C or SIGTERM: stop the control plane and remove its directory (children also die
	// with this process through Pdeathsig).
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
	go func() {
		<-sig
		cp.Stop()
		os.Exit(130)
	}()
	defer func() {
		if err != nil {
			fmt.Fprintln(os.Stderr, cp.Logs())
		}
	}()
	if _, err = cp.StartControllerManager(); err != nil {
		return err
	}
	if _, err = cp.StartScheduler(s.Spec()); err != nil {
		return err
	}
	c := cp.Client
	res := Result{Scheduler: s.Name, Devices: o.devices, Nodes: o.nodes, InitPods: o.init, MeasurePods: o.measure,
		APIServerStart: cp.APIServerStartup.Seconds(), Started: time.Now().UTC().Format(time.RFC3339), Plugin: plugin}

	// Cluster: nodes, slices, class, templates.
	t0 := time.Now()
	if err = parallel(o.nodes, o.workers, func(i int) error {
		name := fmt.Sprintf("scheduler-perf-dra-%d", i)
		if err := scenario.CreateNode(ctx, c, scenario.NodeObject(name, map[string]string{"node-with-dra": "true"})); err != nil {
			return err
		}
		_, err := c.ResourceV1().ResourceSlices().Create(ctx, slice(o, name), metav1.CreateOptions{})
		return err
	}); err != nil {
		return err
	}
	if _, err = c.ResourceV1().DeviceClasses().Create(ctx, class(o), metav1.CreateOptions{}); err != nil {
		return err
	}
	for _, ns := range []string{"init", "test"} {
		if o.devices == "affinity" {
			for k := 0; k < o.subnets; k++ {
				if _, err = c.ResourceV1().ResourceClaimTemplates(ns).Create(ctx, template(o, ns, fmt.Sprintf("test-claim-template-%d", k), k), metav1.CreateOptions{}); err != nil {
					return err
				}
			}
		} else if _, err = c.ResourceV1().ResourceClaimTemplates(ns).Create(ctx, template(o, ns, "test-claim-template", 0), metav1.CreateOptions{}); err != nil {
			return err
		}
	}
	logf("created %d nodes with slices in %s", o.nodes, time.Since(t0).Round(time.Millisecond))

	// Init pods: scheduled, not measured.
	t1 := time.Now()
	if err = createPods(ctx, o, cp, s, "init", o.init); err != nil {
		return err
	}
	itc := newCollector(c, "init")
	istop := make(chan struct{})
	itc.start(istop)
	if n := itc.wait(o.init, o.timeout, o.stall); n < o.init {
		close(istop)
		_, werr := scenario.WaitBound(ctx, c, "init", nil, 0)
		return fmt.Errorf("init pods: %d of %d bound: %v", n, o.init, werr)
	}
	close(istop)
	res.InitSeconds = time.Since(t1).Seconds()
	logf("%d init pods bound in %s", o.init, time.Since(t1).Round(time.Millisecond))

	// Measured pods.
	tc := newCollector(c, "test")
	stop := make(chan struct{})
	tc.start(stop)
	cpu0 := cp.CPUSeconds()
	t2 := time.Now()
	if err = createPods(ctx, o, cp, s, "test", o.measure); err != nil {
		return err
	}
	logf("%d measured pods created in %s", o.measure, time.Since(t2).Round(time.Millisecond))
	tc.wait(o.measure, o.timeout, o.stall)
	end := tc.lastBind()
	close(stop)
	res.MeasureCPU = map[string]float64{}
	for name, v := range cp.CPUSeconds() {
		res.MeasureCPU[name] = round(v - cpu0[name])
	}
	res.Bound = int(tc.scheduled.Load())
	res.MeasureSeconds = end.Sub(t2).Seconds()
	if res.MeasureSeconds > 0 {
		res.OverallPodsPerS = float64(res.Bound) / res.MeasureSeconds
	}
	res.Throughput, res.Samples = tc.summary()
	if res.Bound < o.measure {
		res.Note = fmt.Sprintf("%d of %d measured pods not bound (timeout %s, stall %s)", o.measure-res.Bound, o.measure, o.timeout, o.stall)
	}
	if res.PluginLatency, err = scrapePluginLatency(ctx, port, plugin); err != nil {
		logf("plugin latency: %v", err)
	} else {
		logf("%s", latencyTable(plugin, res.PluginLatency))
	}
	if o.dumpFile != "" {
		if err := os.MkdirAll(filepath.Dir(o.dumpFile), 0o755); err != nil {
			return err
		}
		if err := dump.Write(ctx, c, o.dumpFile); err != nil {
			if o.audit {
				return fmt.Errorf("dump: %w", err)
			}
			logf("dump: %v", err)
		} else {
			logf("cluster written to %s", o.dumpFile)
		}
	}
	var audited error
	if o.audit {
		res.Audit, audited = audit(cli, o.dumpFile, s, o.devices)
	}
	line, _ := json.Marshal(res)
	fmt.Println(string(line))
	if o.out != "" {
		f, err := os.OpenFile(o.out, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
		if err != nil {
			return err
		}
		defer f.Close()
		fmt.Fprintln(f, string(line))
	}
	if res.Bound < o.measure {
		_, werr := scenario.WaitBound(ctx, c, "test", nil, time.Second)
		return fmt.Errorf("%s: %w", res.Note, werr)
	}
	return audited
}

// audit runs `sharing-affinity audit` on the dump as the e2e test does: without extractors
// (capacity, double booking: every scheduler must pass) and, for a sharing-affinity scheduler
// with the affinity devices, with the subnet extractor (no NIC shared across subnets). The first
// failed audit is the error.
func audit(cli, file string, s e2e.SchedulerUnderTest, devices string) (map[string]int, error) {
	runs := map[string][]string{"plain": nil}
	if s.SharingAffinity && devices == "affinity" {
		cfg := filepath.Join(filepath.Dir(file), "audit-config.json")
		if err := os.WriteFile(cfg, []byte(e2e.AuditConfig), 0o644); err != nil {
			return nil, err
		}
		runs["subnet"] = []string{"--config", cfg}
	}
	codes := map[string]int{}
	var failed error
	for _, name := range []string{"plain", "subnet"} {
		args, ok := runs[name]
		if !ok {
			continue
		}
		code, out, err := e2e.Audit(cli, file, args...)
		if err != nil {
			return codes, err
		}
		codes[name] = code
		logf("sharing-affinity audit %s %s: exit %d\n%s", file, strings.Join(args, " "), code, strings.TrimSpace(out))
		if code != 0 && failed == nil {
			failed = fmt.Errorf("sharing-affinity audit %s %s: exit %d", file, strings.Join(args, " "), code)
		}
	}
	return codes, failed
}

// parallel runs f(0..n-1) on workers goroutines; the first error wins.
func parallel(n, workers int, f func(int) error) error {
	var next atomic.Int64
	var wg sync.WaitGroup
	var mu sync.Mutex
	var first error
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1) - 1)
				if i >= n {
					return
				}
				if err := f(i); err != nil {
					mu.Lock()
					if first == nil {
						first = err
					}
					mu.Unlock()
					return
				}
			}
		}()
	}
	wg.Wait()
	return first
}

const driver = "test-driver.cdi.k8s.io"

func slice(o options, node string) *resourcev1.ResourceSlice {
	if o.devices == "plain" {
		// As resourceslice-basic-devices.yaml: 10 devices, 2 PCI roots.
		devs := make([]resourcev1.Device, 10)
		for i := range devs {
			devs[i] = resourcev1.Device{
				Name: fmt.Sprintf("basic-device-%d", i),
				Attributes: map[resourcev1.QualifiedName]resourcev1.DeviceAttribute{
					"driver":                          {StringValue: ptr.To("xe")},
					"driverVersion":                   {VersionValue: ptr.To("1.2.3")},
					"resource.k8s.io/pciRoot":         {StringValue: ptr.To(fmt.Sprint(i % 2))},
					"family":                          {StringValue: ptr.To("Arc Pro B-Series")},
					"health":                          {StringValue: ptr.To("Healthy")},
					"model":                           {StringValue: ptr.To("B60")},
					"pciAddress":                      {StringValue: ptr.To(fmt.Sprintf("0000:0%d:00.0", i))},
					"pciId":                           {StringValue: ptr.To("0xe211")},
					"pciRoot":                         {StringValue: ptr.To(fmt.Sprintf("0%d", i%2))},
					"resource.kubernetes.io/pciBusID": {StringValue: ptr.To(fmt.Sprintf("0000:0%d:00.0", i))},
					"resource.kubernetes.io/pciRoot":  {StringValue: ptr.To(fmt.Sprintf("pci0000:0%d", i%2))},
					"sriov":                           {BoolValue: ptr.To(true)},
					"type":                            {StringValue: ptr.To("gpu")},
				},
				Capacity: map[resourcev1.QualifiedName]resourcev1.DeviceCapacity{
					"memory":     {Value: resource.MustParse("24480Mi")},
					"millicores": {Value: resource.MustParse("1k")},
				},
			}
		}
		return &resourcev1.ResourceSlice{
			ObjectMeta: metav1.ObjectMeta{Name: "resourceslice-" + strings.TrimPrefix(node, "scheduler-perf-dra-")},
			Spec: resourcev1.ResourceSliceSpec{Driver: driver, NodeName: ptr.To(node),
				Pool: resourcev1.ResourcePool{Name: node, Generation: 1, ResourceSliceCount: 1}, Devices: devs},
		}
	}
	s := scenario.NICSlice(node, o.nics, int64(o.slots))
	s.Spec.Driver = scenario.Driver
	return s
}

func class(o options) *resourcev1.DeviceClass {
	if o.devices == "plain" {
		return &resourcev1.DeviceClass{
			ObjectMeta: metav1.ObjectMeta{Name: "test-class"},
			Spec: resourcev1.DeviceClassSpec{Selectors: []resourcev1.DeviceSelector{{CEL: &resourcev1.CELDeviceSelector{
				Expression: fmt.Sprintf("device.driver == %q", driver)}}}},
		}
	}
	return scenario.NICDeviceClass()
}

func template(o options, ns, name string, subnet int) *resourcev1.ResourceClaimTemplate {
	switch o.devices {
	case "plain":
		return &resourcev1.ResourceClaimTemplate{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			Spec: resourcev1.ResourceClaimTemplateSpec{Spec: resourcev1.ResourceClaimSpec{Devices: resourcev1.DeviceClaim{
				Requests: []resourcev1.DeviceRequest{{Name: "req-0", Exactly: &resourcev1.ExactDeviceRequest{DeviceClassName: "test-class"}}},
			}}},
		}
	case "capacity":
		t := scenario.ClaimTemplate(ns, name, "", 1)
		t.Spec.Spec.Devices.Config = nil
		return t
	default:
		return scenario.ClaimTemplate(ns, name, fmt.Sprintf("subnet-%d", subnet), 1)
	}
}

func createPods(ctx context.Context, o options, cp *controlplane.ControlPlane, s e2e.SchedulerUnderTest, ns string, n int) error {
	return parallel(n, o.workers, func(i int) error {
		tmpl := "test-claim-template"
		if o.devices == "affinity" {
			tmpl = fmt.Sprintf("test-claim-template-%d", i%o.subnets)
		}
		p := scenario.Pod(ns, fmt.Sprintf("test-dra-%05d", i), s.SchedulerName, "", tmpl)
		p.Spec.ResourceClaims[0].Name = "resource"
		p.Spec.Containers[0].Resources.Claims[0].Name = "resource"
		_, err := cp.Client.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{})
		return err
	})
}

// collector is scheduler_perf's throughputCollector over an informer of the namespace's pods.
type collector struct {
	factory   informers.SharedInformerFactory
	scheduled atomic.Int64
	mu        sync.Mutex
	last      time.Time
	samples   []float64
}

func newCollector(c kubernetes.Interface, ns string) *collector {
	tc := &collector{factory: informers.NewSharedInformerFactoryWithOptions(c, 0, informers.WithNamespace(ns))}
	onChange := func(oldObj, newObj any) {
		newPod, ok := newObj.(*corev1.Pod)
		if !ok {
			return
		}
		oldPod, _ := oldObj.(*corev1.Pod)
		if (oldPod == nil || oldPod.Spec.NodeName == "") && newPod.Spec.NodeName != "" {
			tc.scheduled.Add(1)
			tc.mu.Lock()
			tc.last = time.Now()
			tc.mu.Unlock()
		}
	}
	_, _ = tc.factory.Core().V1().Pods().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { onChange(nil, obj) },
		UpdateFunc: onChange,
	})
	return tc
}

func (tc *collector) start(stop chan struct{}) {
	tc.factory.Start(stop)
	tc.factory.WaitForCacheSync(stop)
	go func() {
		ticker := time.NewTicker(time.Second)
		defer ticker.Stop()
		started := false
		skipped := 0
		var lastCount int64
		var lastTime time.Time
		for {
			select {
			case <-stop:
				return
			case now := <-ticker.C:
				n := tc.scheduled.Load()
				if n == 0 {
					continue
				}
				if !started {
					started, lastCount, lastTime = true, n, now
					continue
				}
				if n == lastCount {
					skipped++
					continue
				}
				rate := float64(n-lastCount) / now.Sub(lastTime).Seconds()
				tc.mu.Lock()
				for i := 0; i <= skipped; i++ {
					tc.samples = append(tc.samples, rate)
				}
				tc.mu.Unlock()
				logf("%d pods have been scheduled successfully (%.1f pods/s)", n, rate)
				lastCount, lastTime, skipped = n, now, 0
			}
		}
	}()
}

// wait waits until n pods are bound, timeout has passed, or no pod was bound for stall; it
// returns the pods bound.
func (tc *collector) wait(n int, timeout, stall time.Duration) int {
	start := time.Now()
	for {
		got := int(tc.scheduled.Load())
		if got >= n {
			return got
		}
		last := tc.lastBind()
		if got == 0 {
			last = start
		}
		if time.Since(start) > timeout || time.Since(last) > stall {
			return got
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func (tc *collector) lastBind() time.Time {
	tc.mu.Lock()
	defer tc.mu.Unlock()
	if tc.last.IsZero() {
		return time.Now()
	}
	return tc.last
}

// summary is scheduler_perf's SchedulingThroughput: Average and percentiles of the samples.
func (tc *collector) summary() (map[string]float64, int) {
	tc.mu.Lock()
	s := append([]float64(nil), tc.samples...)
	tc.mu.Unlock()
	if len(s) == 0 {
		return nil, 0
	}
	sort.Float64s(s)
	sum := 0.0
	for _, v := range s {
		sum += v
	}
	perc := func(p int) float64 { return round(s[int(math.Ceil(float64(len(s)*p)/100))-1]) }
	return map[string]float64{"Average": round(sum / float64(len(s))), "Perc50": perc(50), "Perc90": perc(90), "Perc95": perc(95), "Perc99": perc(99)}, len(s)
}

func round(v float64) float64 { return math.Round(v*100) / 100 }
