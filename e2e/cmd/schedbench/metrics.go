package main

// Per-call latency of the DRA plugin inside the scheduler, from kube-scheduler's own histogram
// scheduler_plugin_execution_duration_seconds{plugin, extension_point, status} on /metrics.
// kube-scheduler samples plugin metrics (pluginMetricsSamplePercent, 10% of scheduling cycles),
// and Filter is observed once per node in a sampled cycle.

import (
	"bufio"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"math"
	"net/http"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"
)

// pluginMetric is the histogram's name.
const pluginMetric = "scheduler_plugin_execution_duration_seconds"

// MetricsAllowArg lets /metrics through without a token: the control plane's scheduler delegates
// no authorization.
const MetricsAllowArg = "--authorization-always-allow-paths=/healthz,/readyz,/livez,/metrics"

// Latency is one extension point's calls and their median and 90th percentile, in seconds
// (interpolated within the histogram's buckets, as PromQL's histogram_quantile). A quantile beyond
// the highest bucket (about 22 ms) is that bucket's bound, with Over set.
type Latency struct {
	Calls   int     `json:"calls"`
	P50     float64 `json:"p50Seconds"`
	P90     float64 `json:"p90Seconds"`
	P50Over bool    `json:"p50AboveTopBucket,omitempty"`
	P90Over bool    `json:"p90AboveTopBucket,omitempty"`
}

// histogram is cumulative bucket counts by upper bound.
type histogram map[float64]float64

var sampleLine = regexp.MustCompile(`^` + pluginMetric + `_bucket\{(.*)\} (\S+)$`)
var labelPair = regexp.MustCompile(`(\w+)="([^"]*)"`)

// parsePluginHistograms reads the Prometheus text exposition and returns the plugin's buckets per
// extension point, summed over status.
func parsePluginHistograms(r io.Reader, plugin string) (map[string]histogram, error) {
	out := map[string]histogram{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		m := sampleLine.FindStringSubmatch(sc.Text())
		if m == nil {
			continue
		}
		labels := map[string]string{}
		for _, kv := range labelPair.FindAllStringSubmatch(m[1], -1) {
			labels[kv[1]] = kv[2]
		}
		if labels["plugin"] != plugin {
			continue
		}
		le, err := strconv.ParseFloat(labels["le"], 64)
		if labels["le"] == "+Inf" {
			le, err = math.Inf(1), nil
		}
		if err != nil {
			return nil, fmt.Errorf("%s: le %q: %w", pluginMetric, labels["le"], err)
		}
		v, err := strconv.ParseFloat(m[2], 64)
		if err != nil {
			return nil, fmt.Errorf("%s: value %q: %w", pluginMetric, m[2], err)
		}
		point := labels["extension_point"]
		if out[point] == nil {
			out[point] = histogram{}
		}
		out[point][le] += v
	}
	return out, sc.Err()
}

// quantile is histogram_quantile(q): linear within the bucket that holds the q-th call; the
// lowest bucket starts at 0, and a quantile in the +Inf bucket is the highest finite bound, with
// over true.
func (h histogram) quantile(q float64) (value float64, over bool) {
	bounds := make([]float64, 0, len(h))
	for le := range h {
		bounds = append(bounds, le)
	}
	sort.Float64s(bounds)
	if len(bounds) == 0 || h[bounds[len(bounds)-1]] == 0 {
		return math.NaN(), false
	}
	rank := q * h[bounds[len(bounds)-1]]
	lower, below := 0.0, 0.0
	for _, le := range bounds {
		count := h[le]
		if count >= rank {
			switch {
			case math.IsInf(le, 1):
				return lower, true
			case count == below:
				return le, false
			}
			return lower + (le-lower)*(rank-below)/(count-below), false
		}
		lower, below = le, count
	}
	return lower, true
}

func (h histogram) calls() int {
	return int(h[math.Inf(1)])
}

// flushWait outlasts the interval at which kube-scheduler's async metrics recorder flushes plugin
// durations (a second).
const flushWait = 2 * time.Second

// scrapePluginLatency reads the scheduler's /metrics on 127.0.0.1:port, after flushWait, and
// summarises the plugin's extension points.
func scrapePluginLatency(ctx context.Context, port int, plugin string) (map[string]Latency, error) {
	time.Sleep(flushWait)
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		// The scheduler's serving certificate is self-signed; this is loopback only.
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, //nolint:gosec
	}}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, fmt.Sprintf("https://127.0.0.1:%d/metrics", port), nil)
	if err != nil {
		return nil, fmt.Errorf("scheduler metrics: %w", err)
	}
	resp, err := client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("scheduler metrics: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return nil, fmt.Errorf("scheduler metrics: %s: %s", resp.Status, strings.TrimSpace(string(body)))
	}
	hists, err := parsePluginHistograms(resp.Body, plugin)
	if err != nil {
		return nil, err
	}
	out := map[string]Latency{}
	for point, h := range hists {
		if n := h.calls(); n > 0 {
			l := Latency{Calls: n}
			l.P50, l.P50Over = h.quantile(0.5)
			l.P90, l.P90Over = h.quantile(0.9)
			out[point] = l
		}
	}
	return out, nil
}

// latencyTable is the summary as text, one extension point a line, in framework order.
func latencyTable(plugin string, l map[string]Latency) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s per call (sampled cycles): extension point, calls, median, p90\n", plugin)
	order := []string{"PreEnqueue", "PreFilter", "Filter", "PostFilter", "PreScore", "Score", "NormalizeScore", "Reserve", "Permit", "PreBind", "Bind", "PostBind"}
	seen := map[string]bool{}
	for _, p := range append(order, sortedPoints(l)...) {
		if v, ok := l[p]; ok && !seen[p] {
			seen[p] = true
			fmt.Fprintf(&b, "  %-10s %6d  %10s  %10s\n", p, v.Calls, micro(v.P50, v.P50Over), micro(v.P90, v.P90Over))
		}
	}
	return b.String()
}

func sortedPoints(l map[string]Latency) []string {
	var out []string
	for p := range l {
		out = append(out, p)
	}
	sort.Strings(out)
	return out
}

// lowestBucket is the histogram's lowest bound: a quantile below it is not resolved.
const lowestBucket = 1e-5

func micro(s float64, over bool) string {
	if s <= lowestBucket && !over {
		return "≤ 10 µs"
	}
	if over {
		return fmt.Sprintf("> %.0f µs", s*1e6)
	}
	return fmt.Sprintf("%.0f µs", s*1e6)
}
