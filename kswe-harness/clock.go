package main

import (
	"context"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"sharing-affinity/kswe-harness/dramodule"
)

// Now implements dramodule.Backend: the replay's clock (docs/kswe-dra-extension.md §2.4), the
// recording's time, which moves only when a PreBind waits (Wait).
func (s *store) Now() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.clock
}

// Wait implements dramodule.Backend (§2.5): a replay has no driver that could set binding
// conditions, so instead of sleeping it advances the clock by seconds at once; every later Now,
// of this pod's PreBind and of later cycles, sees the advance.
func (s *store) Wait(_ context.Context, seconds uint32) int32 {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.clock += int64(seconds)
	return dramodule.OK
}

// recordingTime is the replay's clock, as the Rust replay sets it (`Cluster::now`): the newest
// metadata.creationTimestamp of an object or status.allocation.allocationTimestamp of a claim, in
// Unix seconds; 0 when there is none.
func recordingTime(objects []map[string]any) int64 {
	var newest int64
	for _, object := range objects {
		stamps := []string{}
		if created, _, _ := unstructured.NestedString(object, "metadata", "creationTimestamp"); created != "" {
			stamps = append(stamps, created)
		}
		if object["kind"] == "ResourceClaim" {
			if allocated, _, _ := unstructured.NestedString(object, "status", "allocation", "allocationTimestamp"); allocated != "" {
				stamps = append(stamps, allocated)
			}
		}
		for _, stamp := range stamps {
			if t, err := time.Parse(time.RFC3339, stamp); err == nil && t.Unix() > newest {
				newest = t.Unix()
			}
		}
	}
	return newest
}
