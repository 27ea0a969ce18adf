// Package dump writes a cluster's DRA objects as one `kubectl get -o json`-style List, the input
// of `sharing-affinity audit FILE` and `sharing-affinity replay FILE`.
package dump

import (
	"context"
	"encoding/json"
	"fmt"
	"os"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// Items lists Nodes, Pods, DeviceClasses, ResourceSlices, ResourceClaims,
// ResourceClaimTemplates (all namespaces) and DeviceTaintRules (resource.k8s.io/v1, skipped when
// not served), each with apiVersion and kind and without managedFields (as kubectl shows them).
func Items(ctx context.Context, c kubernetes.Interface) ([]map[string]any, error) {
	var items []map[string]any
	add := func(apiVersion, kind string, list any, err error) error {
		if err != nil {
			return fmt.Errorf("list %s: %w", kind, err)
		}
		raw, err := json.Marshal(list)
		if err != nil {
			return err
		}
		var l struct {
			Items []map[string]any `json:"items"`
		}
		if err := json.Unmarshal(raw, &l); err != nil {
			return err
		}
		for _, it := range l.Items {
			it["apiVersion"], it["kind"] = apiVersion, kind
			if md, ok := it["metadata"].(map[string]any); ok {
				delete(md, "managedFields")
			}
			items = append(items, it)
		}
		return nil
	}
	o := metav1.ListOptions{}
	nodes, err := c.CoreV1().Nodes().List(ctx, o)
	if err := add("v1", "Node", nodes, err); err != nil {
		return nil, err
	}
	dcs, err := c.ResourceV1().DeviceClasses().List(ctx, o)
	if err := add("resource.k8s.io/v1", "DeviceClass", dcs, err); err != nil {
		return nil, err
	}
	slices, err := c.ResourceV1().ResourceSlices().List(ctx, o)
	if err := add("resource.k8s.io/v1", "ResourceSlice", slices, err); err != nil {
		return nil, err
	}
	rcts, err := c.ResourceV1().ResourceClaimTemplates("").List(ctx, o)
	if err := add("resource.k8s.io/v1", "ResourceClaimTemplate", rcts, err); err != nil {
		return nil, err
	}
	claims, err := c.ResourceV1().ResourceClaims("").List(ctx, o)
	if err := add("resource.k8s.io/v1", "ResourceClaim", claims, err); err != nil {
		return nil, err
	}
	pods, err := c.CoreV1().Pods("").List(ctx, o)
	if err := add("v1", "Pod", pods, err); err != nil {
		return nil, err
	}
	if rules, err := c.ResourceV1().DeviceTaintRules().List(ctx, o); err == nil {
		if err := add("resource.k8s.io/v1", "DeviceTaintRule", rules, nil); err != nil {
			return nil, err
		}
	}
	return items, nil
}

// Write writes the List to path.
func Write(ctx context.Context, c kubernetes.Interface, path string) error {
	items, err := Items(ctx, c)
	if err != nil {
		return err
	}
	if items == nil {
		items = []map[string]any{}
	}
	data, err := json.MarshalIndent(map[string]any{
		"apiVersion": "v1", "kind": "List", "metadata": map[string]any{"resourceVersion": ""}, "items": items,
	}, "", "    ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(data, '\n'), 0o644)
}
