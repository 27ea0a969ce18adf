package e2e

import (
	"strings"
	"testing"
)

func TestAdaptSchedulerConfig(t *testing.T) {
	in := `apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
clientConnection:
  kubeconfig: /etc/kubernetes/scheduler.conf
leaderElection:
  leaderElect: true
profiles:
- schedulerName: sharing-affinity-scheduler
  plugins:
    multiPoint:
      enabled:
      - name: wasm
`
	out, name, err := AdaptSchedulerConfig([]byte(in))
	if err != nil {
		t.Fatal(err)
	}
	if name != "sharing-affinity-scheduler" {
		t.Errorf("schedulerName %q", name)
	}
	for _, want := range []string{"kubeconfig: '{{KUBECONFIG}}'", "leaderElect: false", "name: wasm"} {
		if !strings.Contains(out, want) {
			t.Errorf("adapted config lacks %q:\n%s", want, out)
		}
	}
}

func TestAdaptSchedulerConfigFromConfigMap(t *testing.T) {
	in := `apiVersion: v1
kind: Namespace
metadata:
  name: x
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: cfg
data:
  config.yaml: |
    apiVersion: kubescheduler.config.k8s.io/v1
    kind: KubeSchedulerConfiguration
    profiles:
    - schedulerName: sa
`
	out, name, err := AdaptSchedulerConfig([]byte(in))
	if err != nil || name != "sa" || !strings.Contains(out, "leaderElect: false") {
		t.Fatalf("%q %q %v", out, name, err)
	}
}
