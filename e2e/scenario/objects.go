// Package scenario builds the objects of the sharing-affinity e2e test and benchmark (fake Nodes,
// a DeviceClass, ResourceSlices of shareable NICs with consumable "slots", ResourceClaims and
// ResourceClaimTemplates with NICConfig opaque parameters, Pods) and checks allocations read back
// from the API server.
package scenario

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
)

const (
	// Driver is the NIC driver name; the NICConfig parameters are net.example.com/v1.
	Driver = "net.example.com"
	// NICClass is the DeviceClass of the shareable NICs.
	NICClass = "nic"
	// Capacity is the consumable capacity of a NIC.
	Capacity = resourcev1.QualifiedName("slots")
	// NotReadyTaint is added to new Nodes by admission; Node() clears it.
	NotReadyTaint = "node.kubernetes.io/not-ready"
)

// NodeObject is a fake node (no kubelet) that is Ready and has room for 110 pods.
func NodeObject(name string, labels map[string]string) *corev1.Node {
	res := corev1.ResourceList{
		corev1.ResourcePods:   resource.MustParse("110"),
		corev1.ResourceCPU:    resource.MustParse("4"),
		corev1.ResourceMemory: resource.MustParse("32Gi"),
	}
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels},
		Status: corev1.NodeStatus{
			Capacity:    res,
			Allocatable: res,
			Conditions:  []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}},
			Phase:       corev1.NodeRunning,
		},
	}
}

// CreateNode creates a node and removes the not-ready taint that admission gave it (no node
// lifecycle controller runs here to remove it).
func CreateNode(ctx context.Context, c kubernetes.Interface, node *corev1.Node) error {
	n, err := c.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{})
	if err != nil {
		return fmt.Errorf("create node %s: %w", node.Name, err)
	}
	for attempt := 0; attempt < 5; attempt++ {
		var keep []corev1.Taint
		for _, t := range n.Spec.Taints {
			if t.Key != NotReadyTaint {
				keep = append(keep, t)
			}
		}
		if len(keep) == len(n.Spec.Taints) && n.Status.Allocatable != nil {
			return nil
		}
		n.Spec.Taints = keep
		n2, err := c.CoreV1().Nodes().Update(ctx, n, metav1.UpdateOptions{})
		if err == nil {
			n = n2
			if n.Status.Allocatable == nil {
				n.Status = node.Status
				if n, err = c.CoreV1().Nodes().UpdateStatus(ctx, n, metav1.UpdateOptions{}); err != nil {
					return fmt.Errorf("node %s status: %w", node.Name, err)
				}
			}
			return nil
		}
		if !apierrors.IsConflict(err) {
			return fmt.Errorf("untaint node %s: %w", node.Name, err)
		}
		if n, err = c.CoreV1().Nodes().Get(ctx, node.Name, metav1.GetOptions{}); err != nil {
			return err
		}
	}
	return fmt.Errorf("untaint node %s: too many conflicts", node.Name)
}

// NICDeviceClass selects the driver's NICs.
func NICDeviceClass() *resourcev1.DeviceClass {
	return &resourcev1.DeviceClass{
		ObjectMeta: metav1.ObjectMeta{Name: NICClass},
		Spec: resourcev1.DeviceClassSpec{Selectors: []resourcev1.DeviceSelector{{CEL: &resourcev1.CELDeviceSelector{
			Expression: fmt.Sprintf(`device.driver == %q && device.attributes[%q].type == "nic"`, Driver, Driver),
		}}}},
	}
}

// NICSlice is the ResourceSlice of node's pool (named as the node): nics NICs eth1..ethN, each
// shareable (allowMultipleAllocations) with `slots` capacity, requests of 1 slot by default
// (validRange min 1, step 1).
func NICSlice(node string, nics int, slots int64) *resourcev1.ResourceSlice {
	devs := make([]resourcev1.Device, nics)
	for i := range devs {
		devs[i] = resourcev1.Device{
			Name:                     fmt.Sprintf("eth%d", i+1),
			AllowMultipleAllocations: ptr.To(true),
			Attributes: map[resourcev1.QualifiedName]resourcev1.DeviceAttribute{
				"type":  {StringValue: ptr.To("nic")},
				"index": {IntValue: ptr.To(int64(i + 1))},
			},
			Capacity: map[resourcev1.QualifiedName]resourcev1.DeviceCapacity{
				Capacity: {
					Value: *resource.NewQuantity(slots, resource.DecimalSI),
					RequestPolicy: &resourcev1.CapacityRequestPolicy{
						Default: ptr.To(resource.MustParse("1")),
						ValidRange: &resourcev1.CapacityRequestPolicyRange{
							Min:  ptr.To(resource.MustParse("1")),
							Step: ptr.To(resource.MustParse("1")),
						},
					},
				},
			},
		}
	}
	return &resourcev1.ResourceSlice{
		ObjectMeta: metav1.ObjectMeta{Name: node + "-nics"},
		Spec: resourcev1.ResourceSliceSpec{
			Driver:   Driver,
			NodeName: ptr.To(node),
			Pool:     resourcev1.ResourcePool{Name: node, Generation: 1, ResourceSliceCount: 1},
			Devices:  devs,
		},
	}
}

// NICConfig is the opaque parameter object of a claim: {apiVersion: net.example.com/v1,
// kind: NICConfig, subnet: SUBNET}.
func NICConfig(subnet string) runtime.RawExtension {
	raw, _ := json.Marshal(map[string]string{"apiVersion": Driver + "/v1", "kind": "NICConfig", "subnet": subnet})
	return runtime.RawExtension{Raw: raw}
}

// ClaimSpec asks for one NIC with `slots` slots on subnet.
func ClaimSpec(subnet string, slots int64) resourcev1.ResourceClaimSpec {
	return resourcev1.ResourceClaimSpec{Devices: resourcev1.DeviceClaim{
		Requests: []resourcev1.DeviceRequest{{Name: "nic", Exactly: &resourcev1.ExactDeviceRequest{
			DeviceClassName: NICClass,
			AllocationMode:  resourcev1.DeviceAllocationModeExactCount,
			Count:           1,
			Capacity: &resourcev1.CapacityRequirements{Requests: map[resourcev1.QualifiedName]resource.Quantity{
				Capacity: *resource.NewQuantity(slots, resource.DecimalSI),
			}},
		}}},
		Config: []resourcev1.DeviceClaimConfiguration{{
			Requests: []string{"nic"},
			DeviceConfiguration: resourcev1.DeviceConfiguration{Opaque: &resourcev1.OpaqueDeviceConfiguration{
				Driver: Driver, Parameters: NICConfig(subnet),
			}},
		}},
	}}
}

// Claim is a ResourceClaim for one NIC on subnet.
func Claim(ns, name, subnet string, slots int64) *resourcev1.ResourceClaim {
	return &resourcev1.ResourceClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{"subnet": subnet}},
		Spec:       ClaimSpec(subnet, slots),
	}
}

// ClaimTemplate is a ResourceClaimTemplate for one NIC on subnet.
func ClaimTemplate(ns, name, subnet string, slots int64) *resourcev1.ResourceClaimTemplate {
	return &resourcev1.ResourceClaimTemplate{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: resourcev1.ResourceClaimTemplateSpec{
			ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"subnet": subnet}},
			Spec:       ClaimSpec(subnet, slots),
		},
	}
}

// Pod is a pause pod scheduled by schedulerName. Exactly one of claim and template is set: the
// pod's claim "nic" references that ResourceClaim, or that ResourceClaimTemplate.
func Pod(ns, name, schedulerName, claim, template string) *corev1.Pod {
	rc := corev1.PodResourceClaim{Name: "nic"}
	if claim != "" {
		rc.ResourceClaimName = ptr.To(claim)
	} else if template != "" {
		rc.ResourceClaimTemplateName = ptr.To(template)
	}
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: corev1.PodSpec{
			SchedulerName:                 schedulerName,
			AutomountServiceAccountToken:  ptr.To(false),
			TerminationGracePeriodSeconds: ptr.To(int64(0)),
			Containers: []corev1.Container{{
				Name: "pause", Image: "registry.k8s.io/pause:3.10.1",
			}},
		},
	}
	if claim != "" || template != "" {
		p.Spec.ResourceClaims = []corev1.PodResourceClaim{rc}
		p.Spec.Containers[0].Resources.Claims = []corev1.ResourceClaim{{Name: "nic"}}
	}
	if strings.HasSuffix(name, "-") {
		p.Name, p.GenerateName = "", name
	}
	return p
}
