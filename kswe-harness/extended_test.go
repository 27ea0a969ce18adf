package main

import (
	"encoding/json"
	"path/filepath"
	"testing"
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
	if code := s.SetPending(claim, pod, []byte(alloc)); code != draOK {
		t.Fatalf("SetPending: %d", code)
	}
	e := s.entries[objectID{"ResourceClaim", claim}]
	if e == nil {
		t.Fatal("the claim was not created")
	}
	requests, _ := json.Marshal(e.object["spec"])
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
	if s.entries[objectID{"ResourceClaim", claim}] != nil {
		t.Error("Unreserve kept the claim")
	}
	if status, _ := s.ExtendedStatus("ml/train-1"); status != nil {
		t.Errorf("Unreserve kept the pod status: %+v", status)
	}
}
