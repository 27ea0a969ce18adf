package main

import (
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// Now implements dramodule.Backend: the replay's clock, which stands still (docs/kswe-dra-extension.md
// §2.4).
func (s *store) Now() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.clock
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
