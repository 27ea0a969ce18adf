package scenario

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// DeviceUse is what the allocated claims hold of one device.
type DeviceUse struct {
	Device   string // driver/pool/device
	Capacity int64  // slots the device has (0 if its slice was not found)
	Used     int64  // slots consumed by the claims allocated on it
	Claims   []string
	Subnets  map[string]int // subnet -> claims
}

// State is the allocation state of a namespace read from the API server.
type State struct {
	Devices   map[string]*DeviceUse
	Allocated map[string]string // claim -> device
	Pending   []string          // claims without allocation
	// Problems break rules every scheduler must keep: a shared device's result without
	// shareID or consumedCapacity, capacity exceeded, a device name not in any slice.
	Problems []string
}

// SubnetOf reads the subnet of the claim's NICConfig parameters ("" if none).
func SubnetOf(c *resourcev1.ResourceClaim) string {
	for _, cfg := range c.Spec.Devices.Config {
		if cfg.Opaque == nil || cfg.Opaque.Driver != Driver {
			continue
		}
		var p struct {
			Kind   string `json:"kind"`
			Subnet string `json:"subnet"`
		}
		if json.Unmarshal(cfg.Opaque.Parameters.Raw, &p) == nil && p.Kind == "NICConfig" {
			return p.Subnet
		}
	}
	return ""
}

// Inspect lists the slices and the claims of ns and builds the State.
func Inspect(ctx context.Context, c kubernetes.Interface, ns string) (*State, error) {
	slices, err := c.ResourceV1().ResourceSlices().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	claims, err := c.ResourceV1().ResourceClaims(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	st := &State{Devices: map[string]*DeviceUse{}, Allocated: map[string]string{}}
	for _, s := range slices.Items {
		for _, d := range s.Spec.Devices {
			key := s.Spec.Driver + "/" + s.Spec.Pool.Name + "/" + d.Name
			u := &DeviceUse{Device: key, Subnets: map[string]int{}}
			if cp, ok := d.Capacity[Capacity]; ok {
				u.Capacity = cp.Value.Value()
			}
			st.Devices[key] = u
		}
	}
	for i := range claims.Items {
		cl := &claims.Items[i]
		if cl.Status.Allocation == nil {
			st.Pending = append(st.Pending, cl.Name)
			continue
		}
		for _, r := range cl.Status.Allocation.Devices.Results {
			key := r.Driver + "/" + r.Pool + "/" + r.Device
			u := st.Devices[key]
			if u == nil {
				st.Problems = append(st.Problems, fmt.Sprintf("claim %s: allocated device %s is in no slice", cl.Name, key))
				continue
			}
			st.Allocated[cl.Name] = key
			if r.ShareID == nil {
				st.Problems = append(st.Problems, fmt.Sprintf("claim %s: result on shared device %s has no shareID", cl.Name, key))
			}
			q, ok := r.ConsumedCapacity[Capacity]
			if !ok {
				st.Problems = append(st.Problems, fmt.Sprintf("claim %s: result on %s has no consumedCapacity[%s]", cl.Name, key, Capacity))
			}
			u.Used += q.Value()
			u.Claims = append(u.Claims, cl.Name)
			u.Subnets[SubnetOf(cl)]++
		}
	}
	for _, k := range sortedKeys(st.Devices) {
		u := st.Devices[k]
		if u.Used > u.Capacity {
			st.Problems = append(st.Problems, fmt.Sprintf("device %s: %d slots consumed of %d (%s)", k, u.Used, u.Capacity, strings.Join(u.Claims, ",")))
		}
	}
	sort.Strings(st.Pending)
	return st, nil
}

// AffinityViolations lists the devices shared by claims of different subnets (the rule a
// sharing-affinity scheduler keeps and the in-tree one does not know).
func (st *State) AffinityViolations() []string {
	var out []string
	for _, k := range sortedKeys(st.Devices) {
		u := st.Devices[k]
		if len(u.Subnets) > 1 {
			out = append(out, fmt.Sprintf("device %s holds subnets %v", k, u.Subnets))
		}
	}
	return out
}

// UsedDevices lists the devices that hold at least one claim, with their subnets.
func (st *State) UsedDevices() []string {
	var out []string
	for _, k := range sortedKeys(st.Devices) {
		u := st.Devices[k]
		if len(u.Claims) > 0 {
			out = append(out, fmt.Sprintf("%s %d/%d %v", k, u.Used, u.Capacity, u.Subnets))
		}
	}
	return out
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// WaitBound waits until every pod of ns named in names (all pods when names is nil) has a
// node, and returns pod -> node. On timeout the error names the pods still pending and their
// PodScheduled condition.
func WaitBound(ctx context.Context, c kubernetes.Interface, ns string, names []string, timeout time.Duration) (map[string]string, error) {
	want := map[string]bool{}
	for _, n := range names {
		want[n] = true
	}
	deadline := time.Now().Add(timeout)
	for {
		pods, err := c.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return nil, err
		}
		bound := map[string]string{}
		var pending []string
		for i := range pods.Items {
			p := &pods.Items[i]
			if names != nil && !want[p.Name] {
				continue
			}
			if p.Spec.NodeName != "" {
				bound[p.Name] = p.Spec.NodeName
			} else {
				pending = append(pending, p.Name+": "+scheduledCondition(p))
			}
		}
		if len(pending) == 0 && (names == nil || len(bound) == len(names)) {
			return bound, nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			sort.Strings(pending)
			return bound, fmt.Errorf("pods not bound after %s (%d bound, %d pending): %s", timeout, len(bound), len(pending), strings.Join(pending, "; "))
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// WaitUnschedulable waits until the pod has PodScheduled=False (reason Unschedulable) and
// still no node.
func WaitUnschedulable(ctx context.Context, c kubernetes.Interface, ns, name string, timeout time.Duration) (string, error) {
	deadline := time.Now().Add(timeout)
	for {
		p, err := c.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return "", err
		}
		if p.Spec.NodeName != "" {
			return "", fmt.Errorf("pod %s was bound to %s", name, p.Spec.NodeName)
		}
		for _, cond := range p.Status.Conditions {
			if cond.Type == corev1.PodScheduled && cond.Status == corev1.ConditionFalse && cond.Reason == corev1.PodReasonUnschedulable {
				return cond.Message, nil
			}
		}
		if time.Now().After(deadline) {
			return "", fmt.Errorf("pod %s not marked unschedulable after %s", name, timeout)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func scheduledCondition(p *corev1.Pod) string {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodScheduled {
			return fmt.Sprintf("%s %s %s", c.Status, c.Reason, c.Message)
		}
	}
	return "no PodScheduled condition"
}
