package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"sharing-affinity/kswe-harness/dramodule"
)

// cluster is a recorded cycle (testdata/<scenario>/cluster.json, optionally config.json).
type cluster struct {
	// objects are the objects of the feed's kinds, in input order (Pods and Nodes as corev1).
	objects []map[string]any
	// rejected are the objects that did not decode, one message each.
	rejected []string
	// nodes are the Node objects, sorted by name.
	nodes []*corev1.Node
	// boundPods are the pods with spec.nodeName set at the start.
	boundPods []*corev1.Pod
	// pending are the pending pods (`namespace/name`) in scheduling order: creationTimestamp, then key.
	pending []string
	// config is the guestConfig (config.json), or empty.
	config string
}

// loadCluster reads a scenario directory or a cluster file.
func loadCluster(path string) (*cluster, error) {
	file, config := path, ""
	if info, err := os.Stat(path); err == nil && info.IsDir() {
		file = filepath.Join(path, "cluster.json")
		if raw, err := os.ReadFile(filepath.Join(path, "config.json")); err == nil {
			config = string(raw)
		} else if !os.IsNotExist(err) {
			return nil, fmt.Errorf("reading the guest configuration: %w", err)
		}
	}
	raw, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("reading the cluster: %w", err)
	}
	var list struct {
		Items []json.RawMessage `json:"items"`
	}
	if err := json.Unmarshal(raw, &list); err != nil {
		return nil, fmt.Errorf("parsing %s: %w", file, err)
	}
	c := &cluster{config: config}
	type pendingPod struct{ created, key string }
	var pending []pendingPod
	for i, item := range list.Items {
		var object map[string]any
		if err := json.Unmarshal(item, &object); err != nil {
			c.rejected = append(c.rejected, fmt.Sprintf("items[%d]: %v", i, err))
			continue
		}
		id := dramodule.IDOf(object)
		if !dramodule.Kinds[id.Kind] {
			continue
		}
		if name, _, _ := unstructured.NestedString(object, "metadata", "name"); name == "" {
			c.rejected = append(c.rejected, fmt.Sprintf("items[%d] (%s): field metadata.name: missing", i, id.Kind))
			continue
		}
		switch id.Kind {
		case "Pod":
			var pod corev1.Pod
			if err := json.Unmarshal(item, &pod); err != nil {
				c.rejected = append(c.rejected, fmt.Sprintf("Pod %s: %v", id.Key, err))
				continue
			}
			input := object
			if object, err = corev1Fields(&pod, "Pod"); err != nil {
				return nil, fmt.Errorf("Pod %s: %w", id.Key, err)
			}
			// k8s.io/api v0.33 has no status.extendedResourceClaimStatus (KEP-5004): the
			// store keeps the input's.
			keepExtendedStatus(input, object)
			if pod.Spec.NodeName == "" {
				created, _, _ := unstructured.NestedString(input, "metadata", "creationTimestamp")
				pending = append(pending, pendingPod{created, id.Key})
			} else {
				c.boundPods = append(c.boundPods, &pod)
			}
		case "Node":
			var node corev1.Node
			if err := json.Unmarshal(item, &node); err != nil {
				c.rejected = append(c.rejected, fmt.Sprintf("Node %s: %v", id.Key, err))
				continue
			}
			if object, err = corev1Fields(&node, "Node"); err != nil {
				return nil, fmt.Errorf("Node %s: %w", id.Key, err)
			}
			c.nodes = append(c.nodes, &node)
		}
		c.objects = append(c.objects, object)
	}
	sort.Slice(c.nodes, func(i, j int) bool { return c.nodes[i].Name < c.nodes[j].Name })
	sort.Slice(pending, func(i, j int) bool {
		if pending[i].created != pending[j].created {
			return pending[i].created < pending[j].created
		}
		return pending[i].key < pending[j].key
	})
	for _, p := range pending {
		c.pending = append(c.pending, p.key)
	}
	return c, nil
}
