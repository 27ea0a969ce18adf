package main

import (
	"math"
	"strings"
	"testing"
)

func TestPluginHistogramQuantiles(t *testing.T) {
	text := `# TYPE scheduler_plugin_execution_duration_seconds histogram
scheduler_plugin_execution_duration_seconds_bucket{extension_point="Filter",plugin="DynamicResources",status="Success",le="1e-05"} 0
scheduler_plugin_execution_duration_seconds_bucket{extension_point="Filter",plugin="DynamicResources",status="Success",le="2e-05"} 6
scheduler_plugin_execution_duration_seconds_bucket{extension_point="Filter",plugin="DynamicResources",status="Success",le="4e-05"} 8
scheduler_plugin_execution_duration_seconds_bucket{extension_point="Filter",plugin="DynamicResources",status="Success",le="+Inf"} 8
scheduler_plugin_execution_duration_seconds_bucket{extension_point="Filter",plugin="DynamicResources",status="Unschedulable",le="1e-05"} 0
scheduler_plugin_execution_duration_seconds_bucket{extension_point="Filter",plugin="DynamicResources",status="Unschedulable",le="2e-05"} 0
scheduler_plugin_execution_duration_seconds_bucket{extension_point="Filter",plugin="DynamicResources",status="Unschedulable",le="4e-05"} 0
scheduler_plugin_execution_duration_seconds_bucket{extension_point="Filter",plugin="DynamicResources",status="Unschedulable",le="+Inf"} 2
scheduler_plugin_execution_duration_seconds_bucket{extension_point="Filter",plugin="NodeName",status="Success",le="+Inf"} 99
scheduler_plugin_execution_duration_seconds_sum{extension_point="Filter",plugin="DynamicResources",status="Success"} 0.0001
`
	h, err := parsePluginHistograms(strings.NewReader(text), "DynamicResources")
	if err != nil {
		t.Fatal(err)
	}
	f := h["Filter"]
	if len(h) != 1 || f.calls() != 10 {
		t.Fatalf("histograms %v", h)
	}
	// 10 calls: the 5th is in (10 µs, 20 µs] with 6 there, the 9th and 10th beyond 40 µs.
	if got, over := f.quantile(0.5); math.Abs(got-18.333e-6) > 1e-9 || over {
		t.Errorf("median %g (over %t)", got, over)
	}
	if got, over := f.quantile(0.9); got != 40e-6 || !over {
		t.Errorf("p90 %g (over %t), want beyond the highest finite bound", got, over)
	}
	table := latencyTable("DynamicResources", map[string]Latency{"Filter": {Calls: 10, P50: 18e-6, P90: 40e-6, P90Over: true}})
	if !strings.Contains(table, "Filter") || !strings.Contains(table, "> 40 µs") {
		t.Errorf("table:\n%s", table)
	}
}
