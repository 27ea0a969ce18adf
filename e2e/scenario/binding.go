package scenario

import (
	"fmt"
	"strings"

	resourcev1 "k8s.io/api/resource/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// The binding condition and binding failure condition (KEP-5007) of BindingSlice's NICs, which
// the test reports in the claim's status.devices as their driver would.
const (
	Attached     = Driver + "/Attached"
	AttachFailed = Driver + "/AttachFailed"
)

// BindingSlice is NICSlice whose NICs bind to the node (bindsToNode) and may be used only once
// the driver reports Attached True (bindingConditions); AttachFailed True fails the binding
// (bindingFailureConditions).
func BindingSlice(node string, nics int, slots int64) *resourcev1.ResourceSlice {
	s := NICSlice(node, nics, slots)
	for i := range s.Spec.Devices {
		d := &s.Spec.Devices[i]
		d.BindsToNode = ptr.To(true)
		d.BindingConditions = []string{Attached}
		d.BindingFailureConditions = []string{AttachFailed}
	}
	return s
}

// SetDeviceCondition reports condition condType True in claim's status.devices for every
// allocated device that has binding conditions, as the driver does once it has attached the
// device (Attached) or failed to (AttachFailed). The entry of a device is matched by driver, pool,
// device and shareID, and created if missing. It returns the number of devices set.
func SetDeviceCondition(claim *resourcev1.ResourceClaim, condType, reason, message string) int {
	if claim.Status.Allocation == nil {
		return 0
	}
	set := 0
	for _, r := range claim.Status.Allocation.Devices.Results {
		if len(r.BindingConditions) == 0 {
			continue
		}
		shareID := (*string)(nil)
		if r.ShareID != nil {
			shareID = ptr.To(string(*r.ShareID))
		}
		i := deviceStatusIndex(claim, r.Driver, r.Pool, r.Device, shareID)
		if i < 0 {
			claim.Status.Devices = append(claim.Status.Devices, resourcev1.AllocatedDeviceStatus{
				Driver: r.Driver, Pool: r.Pool, Device: r.Device, ShareID: shareID,
			})
			i = len(claim.Status.Devices) - 1
		}
		apimeta.SetStatusCondition(&claim.Status.Devices[i].Conditions, metav1.Condition{
			Type: condType, Status: metav1.ConditionTrue, Reason: reason, Message: message,
			ObservedGeneration: claim.Generation,
		})
		set++
	}
	return set
}

func deviceStatusIndex(claim *resourcev1.ResourceClaim, driver, pool, device string, shareID *string) int {
	for i, d := range claim.Status.Devices {
		if d.Driver == driver && d.Pool == pool && d.Device == device && ptr.Deref(d.ShareID, "") == ptr.Deref(shareID, "") {
			return i
		}
	}
	return -1
}

// ReservedFor reports whether claim's status.reservedFor names pod.
func ReservedFor(claim *resourcev1.ResourceClaim, pod string) bool {
	for _, r := range claim.Status.ReservedFor {
		if r.Resource == "pods" && r.Name == pod {
			return true
		}
	}
	return false
}

// BindingStatus describes claim's allocation, reservations and device conditions on one line,
// for logs.
func BindingStatus(claim *resourcev1.ResourceClaim) string {
	var b strings.Builder
	if a := claim.Status.Allocation; a == nil {
		b.WriteString("unallocated")
	} else {
		for _, r := range a.Devices.Results {
			fmt.Fprintf(&b, "%s/%s/%s bindingConditions=%v bindingFailureConditions=%v; ", r.Driver, r.Pool, r.Device, r.BindingConditions, r.BindingFailureConditions)
		}
		if a.AllocationTimestamp != nil {
			fmt.Fprintf(&b, "allocated at %s", a.AllocationTimestamp.UTC().Format("15:04:05"))
		} else {
			b.WriteString("no allocationTimestamp")
		}
	}
	var pods []string
	for _, r := range claim.Status.ReservedFor {
		pods = append(pods, r.Name)
	}
	fmt.Fprintf(&b, "; reservedFor %v", pods)
	for _, d := range claim.Status.Devices {
		var conds []string
		for _, c := range d.Conditions {
			conds = append(conds, c.Type+"="+string(c.Status))
		}
		fmt.Fprintf(&b, "; status %s/%s/%s %v", d.Driver, d.Pool, d.Device, conds)
	}
	return b.String()
}
