// Command sharing-affinity-scheduler is kube-scheduler with the sharing-affinity KSWE plugin
// (scheduler/wrapper) registered as "sharing-affinity".
package main

import (
	"os"

	"k8s.io/component-base/cli"
	_ "k8s.io/component-base/logs/json/register"
	_ "k8s.io/component-base/metrics/prometheus/clientgo"
	_ "k8s.io/component-base/metrics/prometheus/version"
	"k8s.io/kubernetes/cmd/kube-scheduler/app"

	"sharing-affinity/scheduler/wrapper"
)

func main() {
	command := app.NewSchedulerCommand(app.WithPlugin(wrapper.Name, wrapper.Factory))
	os.Exit(cli.Run(command))
}
