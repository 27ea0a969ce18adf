package main

// KEP-5004 in the Go module: the special claim the host creates for a pod's extended resources
// backed by DRA, when the guest writes an allocation for it (docs/kswe-dra-extension.md §2.2).
// The guest decides and allocates; the host only creates the claim object and records the pod's
// `status.extendedResourceClaimStatus`.
//
// This file is a port of rules the Rust core owns, in plugin/core/src/plugin/extended.rs; each
// function names the Rust function it mirrors. Keep it a port: change the Rust rule first, then
// this copy. `cargo test --release -p sharing-affinity-host --test kswe_harness` compares the two
// on every recorded scenario (this harness against the Rust KSWE host), and extended_test.go holds
// values the Rust functions give.

import (
	"fmt"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"sharing-affinity/kswe-harness/dramodule"
)

const (
	// extendedClaimAnnotation marks the special claim.
	extendedClaimAnnotation = "resource.kubernetes.io/extended-resource-claim"
	// implicitPrefix names every class's implicit extended resource.
	implicitPrefix = "deviceclass.resource.kubernetes.io/"
	// maxGenerateBase is the longest generateName base the API server keeps (63 minus 5).
	maxGenerateBase = 58
	// suffixAlphabet is the alphabet of the API server's random name suffixes.
	suffixAlphabet = "bcdfghjklmnpqrstvwxz2456789"
)

// extendedClaimName is `<pod>-extended-resources-` (truncated as the server does) and five
// characters derived from the pod's UID (FNV-1a; the name when there is no UID), so that a replay
// is repeatable. Mirrors `extended::claim_name`.
func extendedClaimName(pod *corev1.Pod) string {
	base := pod.Name + "-extended-resources-"
	if len(base) > maxGenerateBase {
		base = base[:maxGenerateBase]
	}
	seed := string(pod.UID)
	if seed == "" {
		seed = pod.Name
	}
	h := uint64(0xcbf29ce484222325)
	for i := 0; i < len(seed); i++ {
		h = (h ^ uint64(seed[i])) * 0x100000001b3
	}
	n := uint64(len(suffixAlphabet))
	for range 5 {
		base += string(suffixAlphabet[h%n])
		h /= n
	}
	return base
}

// classMapping maps extended resource names to DeviceClass names: each class's implicit name,
// and its spec.extendedResourceName (two classes with one name is an error). Mirrors
// `extended::class_mapping`.
func classMapping(classes []map[string]any) (map[string]string, error) {
	out := map[string]string{}
	explicit := map[string]string{}
	for _, c := range classes {
		name, _, _ := unstructured.NestedString(c, "metadata", "name")
		out[implicitPrefix+name] = name
	}
	for _, c := range classes {
		name, _, _ := unstructured.NestedString(c, "metadata", "name")
		r, _, _ := unstructured.NestedString(c, "spec", "extendedResourceName")
		if r == "" {
			continue
		}
		if other, ok := explicit[r]; ok && other != name {
			a, b := min(other, name), max(other, name)
			return nil, fmt.Errorf("device classes %s and %s both set spec.extendedResourceName %s: which one backs it is not defined", a, b, r)
		}
		explicit[r] = name
		out[r] = name
	}
	return out, nil
}

// containerRequests are a container's requests as the API server stores them: a limit without a
// request is the request. Mirrors `extended::requests`.
func containerRequests(c *corev1.Container) map[string]resource.Quantity {
	r := map[string]resource.Quantity{}
	for k, v := range c.Resources.Requests {
		r[string(k)] = v
	}
	for k, v := range c.Resources.Limits {
		if _, ok := r[string(k)]; !ok {
			r[string(k)] = v
		}
	}
	return r
}

// podResources are the DRA-backed resources the pod asks for (nonzero somewhere), with their class.
// Mirrors `extended::pod_resources`.
func podResources(pod *corev1.Pod, mapping map[string]string) map[string]string {
	out := map[string]string{}
	for _, c := range allContainers(pod) {
		for name, q := range containerRequests(c) {
			if class, ok := mapping[name]; ok && !q.IsZero() {
				out[name] = class
			}
		}
	}
	return out
}

func allContainers(pod *corev1.Pod) []*corev1.Container {
	var out []*corev1.Container
	for i := range pod.Spec.InitContainers {
		out = append(out, &pod.Spec.InitContainers[i])
	}
	for i := range pod.Spec.Containers {
		out = append(out, &pod.Spec.Containers[i])
	}
	return out
}

// extRequest is one ExactCount request of the special claim.
type extRequest struct {
	name, class string
	count       int64
}

// requestMapping is one entry of status.extendedResourceClaimStatus.requestMappings.
type requestMapping struct {
	ContainerName string `json:"containerName"`
	ResourceName  string `json:"resourceName"`
	RequestName   string `json:"requestName"`
}

// extendedStatus is a pod's status.extendedResourceClaimStatus.
type extendedStatus struct {
	RequestMappings   []requestMapping `json:"requestMappings"`
	ResourceClaimName string           `json:"resourceClaimName"`
}

// containerRequest is container i's request for a resource after reusing `reusable` requests.
// Mirrors `extended::container_request`.
func containerRequest(i int, c *corev1.Container, res, class string, reusable []*extRequest) (*extRequest, []requestMapping, error) {
	reqs := containerRequests(c)
	q, ok := reqs[res]
	if !ok {
		return nil, nil, nil
	}
	want, exact := q.AsInt64()
	if !exact {
		return nil, nil, fmt.Errorf("container %s: %s request %s is not a whole number", c.Name, res, q.String())
	}
	if want == 0 {
		return nil, nil, nil
	}
	mapping := func(request string) requestMapping {
		return requestMapping{ContainerName: c.Name, ResourceName: res, RequestName: request}
	}
	var mappings []requestMapping
	var have int64
	for _, r := range reusable {
		if r == nil {
			continue
		}
		have += r.count
		mappings = append(mappings, mapping(r.name))
		if have >= want {
			return nil, mappings, nil
		}
	}
	names := make([]string, 0, len(reqs))
	for k := range reqs {
		names = append(names, k)
	}
	sort.Strings(names)
	position := sort.SearchStrings(names, res)
	name := fmt.Sprintf("container-%d-request-%d", i, position)
	mappings = append(mappings, mapping(name))
	return &extRequest{name: name, class: class, count: want - have}, mappings, nil
}

// requestsAndMappings are the special claim's requests (sorted by name) and the container mappings.
// Mirrors `extended::requests_and_mappings`.
func requestsAndMappings(pod *corev1.Pod, resources map[string]string) ([]extRequest, []requestMapping, error) {
	containers := allContainers(pod)
	inits := len(pod.Spec.InitContainers)
	shortLived := func(i int) bool {
		p := containers[i].RestartPolicy
		return i < inits && (p == nil || *p != corev1.ContainerRestartPolicyAlways)
	}
	names := make([]string, 0, len(resources))
	for r := range resources {
		names = append(names, r)
	}
	sort.Strings(names)
	var requests []extRequest
	var mappings []requestMapping
	for _, res := range names {
		class := resources[res]
		long := make([]*extRequest, len(containers))
		var longMappings []requestMapping
		for i, c := range containers {
			if shortLived(i) {
				continue
			}
			r, m, err := containerRequest(i, c, res, class, nil)
			if err != nil {
				return nil, nil, err
			}
			long[i] = r
			longMappings = append(longMappings, m...)
		}
		var largest *extRequest
		initNames := map[string]bool{}
		var initMappings []requestMapping
		for i, c := range containers {
			if !shortLived(i) {
				continue
			}
			r, m, err := containerRequest(i, c, res, class, long[i:])
			if err != nil {
				return nil, nil, err
			}
			if r != nil {
				initNames[r.name] = true
				if largest == nil || largest.count < r.count {
					largest = r
				}
			}
			initMappings = append(initMappings, m...)
		}
		if largest != nil && len(initNames) > 1 {
			for k := range initMappings {
				if initNames[initMappings[k].RequestName] {
					initMappings[k].RequestName = largest.name
				}
			}
		}
		if largest != nil {
			requests = append(requests, *largest)
		}
		for _, r := range long {
			if r != nil {
				requests = append(requests, *r)
			}
		}
		mappings = append(mappings, longMappings...)
		mappings = append(mappings, initMappings...)
	}
	sort.SliceStable(requests, func(i, j int) bool { return requests[i].name < requests[j].name })
	return requests, mappings, nil
}

// newExtendedClaim is the pod's special claim with `requests`: annotated, the pod its controlling
// owner, no status. Mirrors `extended::new_claim` (an empty request list is left out, as Rust and
// the API server write it).
func newExtendedClaim(pod *corev1.Pod, requests []extRequest) map[string]any {
	devices := map[string]any{}
	if len(requests) > 0 {
		list := make([]any, 0, len(requests))
		for _, r := range requests {
			list = append(list, map[string]any{
				"name": r.name,
				"exactly": map[string]any{
					"deviceClassName": r.class, "allocationMode": "ExactCount", "count": r.count,
				},
			})
		}
		devices["requests"] = list
	}
	return map[string]any{
		"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
		"metadata": map[string]any{
			"name": extendedClaimName(pod), "namespace": pod.Namespace,
			"annotations": map[string]any{extendedClaimAnnotation: "true"},
			"ownerReferences": []any{map[string]any{
				"apiVersion": "v1", "kind": "Pod", "name": pod.Name, "uid": string(pod.UID), "controller": true,
			}},
		},
		"spec": map[string]any{"devices": devices},
	}
}

// claimForAllocation is the special claim as created for the pod with `allocation`, and the pod's
// status.extendedResourceClaimStatus: the requests and mappings by the rules above for the pod and
// `classes`, keeping those the allocation has results for (on a node that serves a resource
// through a device plugin the guest allocates none for it). ok is false when the pod asks for no
// DRA-backed resource; an error when a result names a request the pod does not make. Mirrors
// `extended::claim_for_allocation`.
func claimForAllocation(pod *corev1.Pod, classes []map[string]any, allocation *dramodule.AllocationResult) (map[string]any, *extendedStatus, bool, error) {
	mapping, err := classMapping(classes)
	if err != nil {
		return nil, nil, false, err
	}
	resources := podResources(pod, mapping)
	if len(resources) == 0 {
		return nil, nil, false, nil
	}
	requests, mappings, err := requestsAndMappings(pod, resources)
	if err != nil {
		return nil, nil, false, err
	}
	allocated := map[string]bool{}
	var names []string
	for _, r := range allocation.Devices.Results {
		name := strings.SplitN(r.Request, "/", 2)[0]
		if !allocated[name] {
			allocated[name] = true
			names = append(names, name)
		}
	}
	sort.Strings(names)
	known := map[string]bool{}
	for _, r := range requests {
		known[r.name] = true
	}
	for _, name := range names {
		if !known[name] {
			return nil, nil, false, fmt.Errorf("the allocation has a result for request %s, which the pod does not make", name)
		}
	}
	var kept []extRequest
	for _, r := range requests {
		if allocated[r.name] {
			kept = append(kept, r)
		}
	}
	status := &extendedStatus{RequestMappings: []requestMapping{}, ResourceClaimName: extendedClaimName(pod)}
	for _, m := range mappings {
		if allocated[m.RequestName] {
			status.RequestMappings = append(status.RequestMappings, m)
		}
	}
	return newExtendedClaim(pod, kept), status, true, nil
}

// isExtendedClaimOf reports whether a claim is a special claim that the pod with UID `podUID`
// controls (annotation "true", a controlling owner reference with that UID): the test of the Rust
// store's `clear_pending_for_pod` (`extended::is_claim_of` by UID).
func isExtendedClaimOf(claim map[string]any, podUID string) bool {
	c := &unstructured.Unstructured{Object: claim}
	if c.GetAnnotations()[extendedClaimAnnotation] != "true" {
		return false
	}
	owner := metav1.GetControllerOfNoCopy(c)
	return owner != nil && string(owner.UID) == podUID
}
