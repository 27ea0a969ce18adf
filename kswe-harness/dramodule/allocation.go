package dramodule

// The AllocationResult a guest writes (§2.2), checked and compared the same way by every backend.

import (
	"encoding/json"

	corev1 "k8s.io/api/core/v1"
	resourcev1beta2 "k8s.io/api/resource/v1beta2"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// AllocationResult is a resource.k8s.io/v1 AllocationResult: k8s.io/api v0.33 has no v1 group, so
// it is the v1beta2 type (the same shape) plus the KEP-5075 fields of v1.
type AllocationResult struct {
	Devices struct {
		Results []DeviceResult                                  `json:"results,omitempty"`
		Config  []resourcev1beta2.DeviceAllocationConfiguration `json:"config,omitempty"`
	} `json:"devices"`
	NodeSelector        *corev1.NodeSelector `json:"nodeSelector,omitempty"`
	AllocationTimestamp *metav1.Time         `json:"allocationTimestamp,omitempty"`
}

// DeviceResult is one result of an AllocationResult.
type DeviceResult struct {
	resourcev1beta2.DeviceRequestAllocationResult `json:",inline"`
	ShareID                                       *string                      `json:"shareID,omitempty"`
	ConsumedCapacity                              map[string]resource.Quantity `json:"consumedCapacity,omitempty"`
}

// DecodeAllocation decodes an AllocationResult; false when it does not decode as one (result 2).
func DecodeAllocation(raw []byte) (*AllocationResult, bool) {
	var a AllocationResult
	if err := json.Unmarshal(raw, &a); err != nil {
		return nil, false
	}
	return &a, true
}

// SameAllocation compares two AllocationResults by meaning (absent and empty lists are equal,
// quantities compare by value): a claim that holds the same allocation is no conflict (result 3).
func SameAllocation(a, b []byte) bool {
	x, ok1 := DecodeAllocation(a)
	y, ok2 := DecodeAllocation(b)
	return ok1 && ok2 && apiequality.Semantic.DeepEqual(x, y)
}
