package main

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	"sharing-affinity/kswe-harness/dramodule"
)

// The special claim's name and content follow the Rust core's rules: the names in expected.json
// were derived there from the same pods' UIDs; a Reserve creates the claim with the pod's status,
// an Unreserve deletes both again.
func TestExtendedClaimIsCreatedAtReserveAndDeletedOnUnreserve(t *testing.T) {
	c, err := loadCluster(filepath.Join("..", "testdata", "extended-resources-dra-class-device-plugin-node"))
	if err != nil {
		t.Fatal(err)
	}
	s := newStore()
	for _, o := range c.objects {
		s.Add(o)
	}
	pod, err := s.Pod("ml/train-1")
	if err != nil {
		t.Fatal(err)
	}
	claim := "ml/" + extendedClaimName(pod)
	if claim != "ml/train-1-extended-resources-ptnk8" {
		t.Fatalf("claim name %s", claim)
	}
	alloc := `{"devices":{"results":[` +
		`{"request":"container-0-request-1","driver":"gpu.example.com","pool":"gpu-node-1","device":"gpu-0"},` +
		`{"request":"container-1-request-0","driver":"gpu.example.com","pool":"gpu-node-1","device":"gpu-1"}]}}`
	if code := s.SetPending(claim, pod, []byte(alloc)); code != dramodule.OK {
		t.Fatalf("SetPending: %d", code)
	}
	e := s.stored("ResourceClaim", claim)
	if e == nil {
		t.Fatal("the claim was not created")
	}
	requests, _ := json.Marshal(e["spec"])
	want := `{"devices":{"requests":[` +
		`{"exactly":{"allocationMode":"ExactCount","count":2,"deviceClassName":"gpu.example.com"},"name":"container-0-request-1"},` +
		`{"exactly":{"allocationMode":"ExactCount","count":1,"deviceClassName":"gpu.example.com"},"name":"container-1-request-0"}]}}`
	if string(requests) != want {
		t.Errorf("spec:\n%s\nwant\n%s", requests, want)
	}
	if status, err := s.ExtendedStatus("ml/train-1"); err != nil || status == nil || len(status.RequestMappings) != 2 {
		t.Fatalf("pod status: %+v %v", status, err)
	}
	s.ClearPending(string(pod.UID))
	if s.stored("ResourceClaim", claim) != nil {
		t.Error("Unreserve kept the claim")
	}
	if status, _ := s.ExtendedStatus("ml/train-1"); status != nil {
		t.Errorf("Unreserve kept the pod status: %+v", status)
	}
}

func podFromJSON(t *testing.T, raw string) *corev1.Pod {
	t.Helper()
	var pod corev1.Pod
	if err := json.Unmarshal([]byte(raw), &pod); err != nil {
		t.Fatal(err)
	}
	return &pod
}

// sameJSON checks that a value encodes to the JSON `want` (as values: key order aside).
func sameJSON(t *testing.T, what string, got any, want string) {
	t.Helper()
	raw, err := json.Marshal(got)
	if err != nil {
		t.Fatal(err)
	}
	var g, w any
	if err := json.Unmarshal(raw, &g); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal([]byte(want), &w); err != nil {
		t.Fatalf("%s: the wanted JSON: %v", what, err)
	}
	if !reflect.DeepEqual(g, w) {
		t.Errorf("%s:\n%s\nwant\n%s", what, raw, want)
	}
}

func testClass(name, extendedResourceName string) map[string]any {
	spec := map[string]any{}
	if extendedResourceName != "" {
		spec["extendedResourceName"] = extendedResourceName
	}
	return map[string]any{
		"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass",
		"metadata": map[string]any{"name": name}, "spec": spec,
	}
}

func testAllocation(t *testing.T, requests ...string) *dramodule.AllocationResult {
	t.Helper()
	results := make([]string, len(requests))
	for i, r := range requests {
		results[i] = `{"request":"` + r + `","driver":"d","pool":"p","device":"x"}`
	}
	a, ok := dramodule.DecodeAllocation([]byte(`{"devices":{"results":[` + strings.Join(results, ",") + `]}}`))
	if !ok {
		t.Fatal("the test allocation does not decode")
	}
	return a
}

// The claim's name is the Rust core's `extended::claim_name`: the expected names are what that
// function returns for the same pods (the pod names and UIDs of host/src/kswe/store.rs's
// extended_tests, plugin/core/tests/extended_resources.rs and the recorded scenario).
func TestExtendedClaimNameIsTheCoresName(t *testing.T) {
	long := "a-very-long-pod-name-that-fills-the-generate-name-base-0123456789"
	for _, tc := range []struct{ name, uid, want string }{
		{"p", "u1", "p-extended-resources-w5rr7"},
		{"p", "uid-p", "p-extended-resources-dngzs"},
		// No UID: the suffix comes from the name.
		{"p", "", "p-extended-resources-tjfjk"},
		{"train-1", "0c762329-05a9-55ed-8a6d-ebb9d8712583", "train-1-extended-resources-ptnk8"},
		// The base is cut at 58 bytes, as the API server cuts generateName.
		{long, "u1", long[:58] + "w5rr7"},
		// The UID's bytes, not its characters.
		{"x", "ü-Ω", "x-extended-resources-j7ftr"},
	} {
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: tc.name, Namespace: "ns", UID: types.UID(tc.uid)}}
		if got := extendedClaimName(pod); got != tc.want {
			t.Errorf("%s (uid %q): %s, want %s", tc.name, tc.uid, got, tc.want)
		}
	}
}

// The claim and status built for an allocation are the Rust core's
// `extended::claim_for_allocation`: the wanted JSON is what that function's result serialises to
// for the same pods, classes and allocations (the requests of the pods of
// plugin/core/tests/extended_resources.rs and host/src/kswe/store.rs's extended_tests).
func TestClaimForAllocationIsTheCoresClaim(t *testing.T) {
	gpuAndFPGA := []map[string]any{testClass("gpu", "example.com/gpu"), testClass("fpga", "example.com/fpga")}
	gpu := []map[string]any{testClass("gpu-class", "example.com/gpu")}
	twoResources := `{"metadata":{"name":"p","namespace":"ns","uid":"u1"},"spec":{"containers":[{"name":"main","image":"i",
		"resources":{"requests":{"example.com/fpga":"1","example.com/gpu":"2"}}}]}}`
	// A regular init container reusing a sidecar's and the container's requests (the container's
	// by a limit only), and two regular init containers of which only the largest request stays.
	initReuse := `{"metadata":{"name":"p","namespace":"ns","uid":"uid-p"},"spec":{
		"initContainers":[{"name":"init","image":"x","resources":{"requests":{"example.com/gpu":"2"}}},
		  {"name":"side","image":"x","restartPolicy":"Always","resources":{"requests":{"example.com/gpu":"1"}}}],
		"containers":[{"name":"main","image":"x","resources":{"limits":{"example.com/gpu":"1"}}}]}}`
	largestInit := `{"metadata":{"name":"p","namespace":"ns","uid":"uid-p"},"spec":{
		"initContainers":[{"name":"i0","image":"x","resources":{"requests":{"example.com/gpu":"1"}}},
		  {"name":"i1","image":"x","resources":{"requests":{"example.com/gpu":"3"}}}],
		"containers":[{"name":"main","image":"x","resources":{"requests":{"cpu":"1"}}}]}}`
	fpga := func(n int) string {
		return fmt.Sprintf(`{"name":"container-0-request-0","exactly":{"deviceClassName":"fpga","allocationMode":"ExactCount","count":%d}}`, n)
	}
	gpuReq := func(name, class string, n int) string {
		return fmt.Sprintf(`{"name":"%s","exactly":{"deviceClassName":"%s","allocationMode":"ExactCount","count":%d}}`, name, class, n)
	}
	mapping := func(container, resource, request string) string {
		return fmt.Sprintf(`{"containerName":"%s","resourceName":"%s","requestName":"%s"}`, container, resource, request)
	}
	for _, tc := range []struct {
		what       string
		pod        string
		classes    []map[string]any
		requests   []string
		spec, stat string
	}{
		{
			"the GPUs by device plugin: only the FPGA request", twoResources, gpuAndFPGA, []string{"container-0-request-0"},
			`{"devices":{"requests":[` + fpga(1) + `]}}`,
			`{"requestMappings":[` + mapping("main", "example.com/fpga", "container-0-request-0") +
				`],"resourceClaimName":"p-extended-resources-w5rr7"}`,
		},
		{
			"both by DRA", twoResources, gpuAndFPGA, []string{"container-0-request-0", "container-0-request-1"},
			`{"devices":{"requests":[` + fpga(1) + `,` + gpuReq("container-0-request-1", "gpu", 2) + `]}}`,
			`{"requestMappings":[` + mapping("main", "example.com/fpga", "container-0-request-0") + `,` +
				mapping("main", "example.com/gpu", "container-0-request-1") + `],"resourceClaimName":"p-extended-resources-w5rr7"}`,
		},
		{
			"no result: no request", twoResources, gpuAndFPGA, nil,
			`{"devices":{}}`, `{"requestMappings":[],"resourceClaimName":"p-extended-resources-w5rr7"}`,
		},
		{
			"init containers reuse long-lived requests", initReuse, gpu, []string{"container-1-request-0", "container-2-request-0"},
			`{"devices":{"requests":[` + gpuReq("container-1-request-0", "gpu-class", 1) + `,` +
				gpuReq("container-2-request-0", "gpu-class", 1) + `]}}`,
			`{"requestMappings":[` + mapping("side", "example.com/gpu", "container-1-request-0") + `,` +
				mapping("main", "example.com/gpu", "container-2-request-0") + `,` +
				mapping("init", "example.com/gpu", "container-1-request-0") + `,` +
				mapping("init", "example.com/gpu", "container-2-request-0") + `],"resourceClaimName":"p-extended-resources-dngzs"}`,
		},
		{
			"the largest init request", largestInit, gpu, []string{"container-1-request-0"},
			`{"devices":{"requests":[` + gpuReq("container-1-request-0", "gpu-class", 3) + `]}}`,
			`{"requestMappings":[` + mapping("i0", "example.com/gpu", "container-1-request-0") + `,` +
				mapping("i1", "example.com/gpu", "container-1-request-0") + `],"resourceClaimName":"p-extended-resources-dngzs"}`,
		},
	} {
		t.Run(tc.what, func(t *testing.T) {
			pod := podFromJSON(t, tc.pod)
			claim, status, ok, err := claimForAllocation(pod, tc.classes, testAllocation(t, tc.requests...))
			if err != nil || !ok {
				t.Fatalf("%v %v", ok, err)
			}
			sameJSON(t, "spec", claim["spec"], tc.spec)
			sameJSON(t, "status", status, tc.stat)
			meta, _ := json.Marshal(claim["metadata"])
			want := `{"annotations":{"resource.kubernetes.io/extended-resource-claim":"true"},"name":"` + extendedClaimName(pod) +
				`","namespace":"ns","ownerReferences":[{"apiVersion":"v1","controller":true,"kind":"Pod","name":"p","uid":"` +
				string(pod.UID) + `"}]}`
			if string(meta) != want {
				t.Errorf("metadata:\n%s\nwant\n%s", meta, want)
			}
		})
	}
	// What the core refuses, with its words.
	for _, tc := range []struct {
		pod     string
		classes []map[string]any
		request string
		want    string
	}{
		{twoResources, gpuAndFPGA, "container-0-request-7",
			"the allocation has a result for request container-0-request-7, which the pod does not make"},
		{`{"metadata":{"name":"p","uid":"uid-p"},"spec":{"containers":[{"name":"a","resources":{"requests":{"example.com/gpu":"500m"}}}]}}`,
			gpu, "container-0-request-0", "container a: example.com/gpu request 500m is not a whole number"},
		{`{"metadata":{"name":"p","uid":"uid-p"},"spec":{"containers":[{"name":"a","resources":{"requests":{"example.com/gpu":"1"}}}]}}`,
			append([]map[string]any{testClass("gpu-class-2", "example.com/gpu")}, gpu...), "container-0-request-0",
			"device classes gpu-class and gpu-class-2 both set spec.extendedResourceName example.com/gpu: which one backs it is not defined"},
	} {
		_, _, _, err := claimForAllocation(podFromJSON(t, tc.pod), tc.classes, testAllocation(t, tc.request))
		if err == nil || err.Error() != tc.want {
			t.Errorf("error %v, want %s", err, tc.want)
		}
	}
	// A resource no class backs: no special claim.
	notDRA := podFromJSON(t, `{"metadata":{"name":"p","uid":"uid-p"},"spec":{"containers":[{"name":"a","resources":{"requests":{"example.com/fpga":"1"}}}]}}`)
	if _, _, ok, err := claimForAllocation(notDRA, gpu, testAllocation(t)); ok || err != nil {
		t.Errorf("a resource no class backs: %v %v", ok, err)
	}
}

// The store's side, as host/src/kswe/store.rs's extended_tests
// (`special_claim_is_created_with_the_allocated_requests_and_deleted_on_unreserve`): another name
// is not the pod's claim; a result for a request the pod does not make is invalid; Reserve
// creates the claim with the allocated requests and the pod's status, Unreserve deletes both, and
// PreBind creates it with the allocation and the pod as consumer.
func TestSpecialClaimIsCreatedWithTheAllocatedRequestsAndDeletedOnUnreserve(t *testing.T) {
	s := newStore()
	for _, class := range []string{"gpu", "fpga"} {
		s.Add(testClass(class, "example.com/"+class))
	}
	pod := podFromJSON(t, `{"metadata":{"name":"p","namespace":"ns","uid":"u1"},"spec":{"containers":[{"name":"main","image":"i",
		"resources":{"requests":{"example.com/fpga":"1","example.com/gpu":"2"}}}]}}`)
	fields, err := corev1Fields(pod, "Pod")
	if err != nil {
		t.Fatal(err)
	}
	s.Add(fields)
	key := "ns/" + extendedClaimName(pod)
	alloc := func(requests ...string) []byte {
		raw, err := json.Marshal(testAllocation(t, requests...))
		if err != nil {
			t.Fatal(err)
		}
		return raw
	}
	if code := s.SetPending("ns/p-extended-resources-zzzzz", pod, alloc("container-0-request-0")); code != dramodule.NotFound {
		t.Errorf("another name: %d", code)
	}
	if code := s.SetPending(key, pod, alloc("container-0-request-7")); code != dramodule.Invalid {
		t.Errorf("a result for a request the pod does not make: %d", code)
	}
	if n := s.feed.Len(); n != 3 {
		t.Fatalf("a refused write created objects: %d", n)
	}
	// Only the FPGA request (index 0 of the sorted names) is allocated: GPUs by device plugin.
	if code := s.SetPending(key, pod, alloc("container-0-request-0")); code != dramodule.OK {
		t.Fatalf("SetPending: %d", code)
	}
	e := s.stored("ResourceClaim", key)
	if e == nil {
		t.Fatal("the special claim was not created")
	}
	requests, _, _ := unstructured.NestedSlice(e, "spec", "devices", "requests")
	if len(requests) != 1 || field(requests[0].(map[string]any), "name") != "container-0-request-0" {
		t.Errorf("requests: %v", requests)
	}
	if !isExtendedClaimOf(e, "u1") {
		t.Errorf("not annotated and controlled by the pod: %v", e["metadata"])
	}
	status, err := s.ExtendedStatus("ns/p")
	if err != nil || status == nil || len(status.RequestMappings) != 1 ||
		status.RequestMappings[0].ResourceName != "example.com/fpga" || "ns/"+status.ResourceClaimName != key {
		t.Fatalf("pod status: %+v %v", status, err)
	}
	s.ClearPending("u1")
	if s.stored("ResourceClaim", key) != nil {
		t.Error("Unreserve kept the claim")
	}
	if status, _ := s.ExtendedStatus("ns/p"); status != nil {
		t.Errorf("Unreserve kept the pod status: %+v", status)
	}

	// PreBind: written with the allocation; Unreserve then keeps the allocated claim.
	if code := s.WriteAllocation(key, pod, alloc("container-0-request-0", "container-0-request-1")); code != dramodule.OK {
		t.Fatalf("WriteAllocation: %d", code)
	}
	e = s.stored("ResourceClaim", key)
	if e == nil {
		t.Fatal("the special claim was not created")
	}
	allocation, _, _ := unstructured.NestedFieldNoCopy(e, "status", "allocation")
	requests, _, _ = unstructured.NestedSlice(e, "spec", "devices", "requests")
	reserved, _, _ := unstructured.NestedSlice(e, "status", "reservedFor")
	if allocation == nil || len(requests) != 2 || len(reserved) != 1 || field(reserved[0].(map[string]any), "uid") != "u1" {
		t.Errorf("claim: %v", e)
	}
	// A pending write of the same allocation for the allocated claim.
	if code := s.SetPending(key, pod, alloc("container-0-request-0", "container-0-request-1")); code != dramodule.OK {
		t.Fatalf("SetPending of the same allocation: %d", code)
	}
	s.ClearPending("u1")
	if s.stored("ResourceClaim", key) == nil {
		t.Error("Unreserve deleted an allocated claim")
	}
	if status, _ := s.ExtendedStatus("ns/p"); status == nil {
		t.Error("Unreserve cleared the status of an allocated claim")
	}
}

// A pod's status.extendedResourceClaimStatus in the input (k8s.io/api v0.33 does not know the
// field) stays in the store and is reported.
func TestLoadedPodsKeepTheirExtendedStatus(t *testing.T) {
	c, err := loadCluster(filepath.Join("..", "testdata", "extended-resources-dra-class-device-plugin-node"))
	if err != nil {
		t.Fatal(err)
	}
	s := newStore()
	for _, o := range c.objects {
		s.Add(o)
	}
	status, err := s.ExtendedStatus("ml/serve-0")
	if err != nil || status == nil || status.ResourceClaimName != "serve-0-extended-resources-x4k9p" {
		t.Fatalf("serve-0: %+v %v", status, err)
	}
	if err := s.BindPod("ml/serve-0", "gpu-node-1"); err != nil {
		t.Fatal(err)
	}
	if status, _ := s.ExtendedStatus("ml/serve-0"); status == nil {
		t.Error("binding dropped the status")
	}
}
