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
