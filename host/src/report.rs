//! Presenting a [`Replay`]: the JSON document (`--output json`, also the golden-test format) and the
//! human table (`--output table`).
//!
//! JSON shape (fields beyond these may be added; `score` only for feasible nodes, `shareID` and
//! `consumedCapacity` only when set, `error` only when a pod with feasible nodes was not bound):
//!
//! ```text
//! {"pods":[{"pod":"ns/name","node":"node-1"|null,
//!           "nodes":[{"node":"...","code":"Success|Error|Unschedulable|UnschedulableAndUnresolvable","reason":"...","score":0}],
//!           "allocations":[{"claim":"ns/name","results":[{"request":"...","driver":"...","pool":"...","device":"...",
//!                                                        "shareID":"...","consumedCapacity":{"name":"qty"}}]}],
//!           "extendedResourceClaimStatus":{"requestMappings":[{"containerName":"...","resourceName":"...",
//!                                                              "requestName":"..."}],"resourceClaimName":"..."}}],
//!  "rejected":["objects the loader or the plugin refused"],
//!  "timing":{"filterNsPerNode":{"p50":0,"p90":0,"p99":0,"max":0},"prefilterNs":{"p50":0,"max":0},
//!            "cycleNs":{"p50":0,"max":0},"engine":"component"}}
//! ```

use std::collections::BTreeMap;
use std::fmt::Write as _;

use serde::Serialize;
use serde_json::Value;
use sharing_affinity_core::ClaimAllocation;
use sharing_affinity_core::model::PodExtendedResourceClaimStatus;

use crate::replay::{PodOutcome, Replay};

/// The decisions of a replay as JSON: everything but `timing`. This is what golden tests compare.
pub fn decisions(replay: &Replay) -> Value {
    serde_json::to_value(document(replay, false)).expect("plain data serializes")
}

/// The full JSON report: the decisions plus `timing`.
pub fn to_json(replay: &Replay) -> Value {
    serde_json::to_value(document(replay, true)).expect("plain data serializes")
}

/// The report as pretty-printed JSON text with the fields in the documented order (a
/// [`serde_json::Value`] would sort them); `timing` only when `with_timing`.
pub fn to_json_text(replay: &Replay, with_timing: bool) -> String {
    serde_json::to_string_pretty(&document(replay, with_timing)).expect("plain data serializes")
}

fn document(replay: &Replay, with_timing: bool) -> Document<'_> {
    Document {
        pods: replay.pods.iter().map(pod_json).collect(),
        rejected: &replay.rejected,
        timing: with_timing.then(|| timing(replay)),
    }
}

#[derive(Serialize)]
struct Document<'a> {
    pods: Vec<PodJson<'a>>,
    rejected: &'a [String],
    #[serde(skip_serializing_if = "Option::is_none")]
    timing: Option<Timing>,
}

#[derive(Serialize)]
struct PodJson<'a> {
    pod: &'a str,
    node: Option<&'a str>,
    nodes: Vec<NodeJson<'a>>,
    allocations: Vec<AllocationJson<'a>>,
    #[serde(
        rename = "extendedResourceClaimStatus",
        skip_serializing_if = "Option::is_none"
    )]
    extended: Option<&'a PodExtendedResourceClaimStatus>,
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    deallocated: Option<&'a str>,
}

#[derive(Serialize)]
struct NodeJson<'a> {
    node: &'a str,
    code: &'static str,
    reason: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    score: Option<u32>,
}

#[derive(Serialize)]
struct AllocationJson<'a> {
    claim: &'a str,
    results: Vec<ResultJson<'a>>,
}

#[derive(Serialize)]
struct ResultJson<'a> {
    request: &'a str,
    driver: &'a str,
    pool: &'a str,
    device: &'a str,
    #[serde(rename = "shareID", skip_serializing_if = "Option::is_none")]
    share_id: Option<&'a str>,
    #[serde(rename = "consumedCapacity", skip_serializing_if = "Option::is_none")]
    consumed_capacity: Option<BTreeMap<&'a str, String>>,
}

fn pod_json(p: &PodOutcome) -> PodJson<'_> {
    PodJson {
        pod: &p.pod,
        node: p.node.as_deref(),
        nodes: p
            .nodes
            .iter()
            .map(|n| NodeJson {
                node: &n.node,
                code: n.status.code.as_str(),
                reason: &n.status.reason,
                score: n.score,
            })
            .collect(),
        allocations: p.allocations.iter().map(allocation_json).collect(),
        deallocated: p.deallocated.as_deref(),
        extended: p.extended.as_ref(),
        error: p.error.as_deref(),
    }
}

fn allocation_json(a: &ClaimAllocation) -> AllocationJson<'_> {
    AllocationJson {
        claim: &a.claim,
        results: a
            .allocation
            .devices
            .results
            .iter()
            .map(|r| ResultJson {
                request: &r.request,
                driver: &r.driver,
                pool: &r.pool,
                device: &r.device,
                share_id: r.share_id.as_deref(),
                consumed_capacity: r
                    .consumed_capacity
                    .as_ref()
                    .map(|m| m.iter().map(|(k, q)| (k.as_str(), q.to_string())).collect()),
            })
            .collect(),
    }
}

/// Latency percentiles in nanoseconds.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Timing {
    /// Per filter call (one node).
    pub filter_ns_per_node: Percentiles,
    /// Per prefilter call.
    pub prefilter_ns: Summary,
    /// Per pod, prefilter through bind.
    pub cycle_ns: Summary,
    /// The engine that ran.
    pub engine: &'static str,
    /// The guest's peak linear memory in bytes (wasm engines only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub guest_memory_bytes: Option<u64>,
}

/// p50/p90/p99/max.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Percentiles {
    /// Median.
    pub p50: u64,
    /// 90th percentile.
    pub p90: u64,
    /// 99th percentile.
    pub p99: u64,
    /// Maximum.
    pub max: u64,
}

/// p50/max.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Summary {
    /// Median.
    pub p50: u64,
    /// Maximum.
    pub max: u64,
}

/// The timing summary of a replay.
pub fn timing(replay: &Replay) -> Timing {
    let s = &replay.samples;
    let filter = sorted(&s.filter);
    let prefilter = sorted(&s.prefilter);
    let cycle = sorted(&s.cycle);
    Timing {
        filter_ns_per_node: Percentiles {
            p50: percentile(&filter, 50),
            p90: percentile(&filter, 90),
            p99: percentile(&filter, 99),
            max: percentile(&filter, 100),
        },
        prefilter_ns: Summary {
            p50: percentile(&prefilter, 50),
            max: percentile(&prefilter, 100),
        },
        cycle_ns: Summary {
            p50: percentile(&cycle, 50),
            max: percentile(&cycle, 100),
        },
        engine: replay.engine,
        guest_memory_bytes: replay.guest_memory_bytes,
    }
}

fn sorted(samples: &[u64]) -> Vec<u64> {
    let mut v = samples.to_vec();
    v.sort_unstable();
    v
}

/// Nearest-rank percentile of sorted samples (0 when there are none).
///
/// ```
/// use sharing_affinity_host::report::percentile;
/// let samples: Vec<u64> = (1..=10).collect();
/// assert_eq!(percentile(&samples, 50), 5);
/// assert_eq!(percentile(&samples, 90), 9);
/// assert_eq!(percentile(&samples, 100), 10);
/// assert_eq!(percentile(&[], 50), 0);
/// ```
pub fn percentile(sorted: &[u64], p: usize) -> u64 {
    if sorted.is_empty() {
        return 0;
    }
    let rank = (p * sorted.len()).div_ceil(100).clamp(1, sorted.len());
    sorted[rank - 1]
}

/// The human report: one line per pod with its node and devices; with `explain`, one line per node
/// with its code, reason and score; then the latency summary.
pub fn table(replay: &Replay, explain: bool) -> String {
    let mut out = String::new();
    let width = replay.pods.iter().map(|p| p.pod.len()).max().unwrap_or(3).max(3);
    let node_width = replay
        .pods
        .iter()
        .filter_map(|p| p.node.as_ref().map(String::len))
        .max()
        .unwrap_or(4)
        .max(4);
    let _ = writeln!(out, "{:width$}  {:node_width$}  DEVICES", "POD", "NODE");
    for pod in &replay.pods {
        let node = pod.node.as_deref().unwrap_or("-");
        let _ = writeln!(out, "{:width$}  {node:node_width$}  {}", pod.pod, devices(pod));
        if explain {
            for n in &pod.nodes {
                let score = n.score.map(|s| format!(" score={s}")).unwrap_or_default();
                let reason = if n.status.reason.is_empty() {
                    String::new()
                } else {
                    format!(": {}", n.status.reason)
                };
                let _ = writeln!(out, "    {}  {}{score}{reason}", n.node, n.status.code);
            }
        }
    }
    let t = timing(replay);
    let _ = writeln!(
        out,
        "\n{} pods, {} bound; engine {}\nfilter per node: p50 {} p90 {} p99 {} max {}\nprefilter: p50 {} max {}\ncycle: p50 {} max {}",
        replay.pods.len(),
        replay.pods.iter().filter(|p| p.node.is_some()).count(),
        t.engine,
        duration(t.filter_ns_per_node.p50),
        duration(t.filter_ns_per_node.p90),
        duration(t.filter_ns_per_node.p99),
        duration(t.filter_ns_per_node.max),
        duration(t.prefilter_ns.p50),
        duration(t.prefilter_ns.max),
        duration(t.cycle_ns.p50),
        duration(t.cycle_ns.max),
    );
    if let Some(bytes) = t.guest_memory_bytes {
        let _ = writeln!(
            out,
            "guest linear memory: {:.1} MiB",
            bytes as f64 / (1024.0 * 1024.0)
        );
    }
    out
}

/// The devices column: `claim: driver/pool/device[#share]{cap=qty}`; or why the pod was not bound.
fn devices(pod: &PodOutcome) -> String {
    if pod.node.is_none() {
        if let Some(error) = &pod.error {
            return format!("(not bound: {error})");
        }
        let mut counts: BTreeMap<&str, usize> = BTreeMap::new();
        for n in &pod.nodes {
            *counts.entry(n.status.code.as_str()).or_default() += 1;
        }
        if counts.is_empty() {
            return "(no node fits: the cluster has no nodes)".into();
        }
        let counts: Vec<String> = counts.iter().map(|(code, n)| format!("{n} {code}")).collect();
        return match &pod.deallocated {
            Some(claim) => format!(
                "(no node fits: {}; PostFilter deallocated {claim})",
                counts.join(", ")
            ),
            None => format!("(no node fits: {})", counts.join(", ")),
        };
    }
    let mut parts = Vec::new();
    for a in &pod.allocations {
        for r in &a.allocation.devices.results {
            let mut s = format!("{}: {}/{}/{}", a.claim, r.driver, r.pool, r.device);
            if let Some(share) = &r.share_id {
                let _ = write!(s, "#{share}");
            }
            if let Some(cap) = &r.consumed_capacity {
                let cap: Vec<String> = cap.iter().map(|(k, q)| format!("{k}={q}")).collect();
                let _ = write!(s, "{{{}}}", cap.join(","));
            }
            parts.push(s);
        }
    }
    if parts.is_empty() {
        "(no devices)".into()
    } else {
        parts.join("; ")
    }
}

/// Nanoseconds as a short human duration.
fn duration(ns: u64) -> String {
    match ns {
        0..1_000 => format!("{ns}ns"),
        1_000..1_000_000 => format!("{:.1}µs", ns as f64 / 1e3),
        1_000_000..1_000_000_000 => format!("{:.1}ms", ns as f64 / 1e6),
        _ => format!("{:.2}s", ns as f64 / 1e9),
    }
}

#[cfg(test)]
mod tests {
    use sharing_affinity_core::Status;
    use sharing_affinity_core::model::{AllocationResult, DeviceRequestAllocationResult};

    use super::*;
    use crate::replay::{NodeOutcome, Samples};

    fn sample() -> Replay {
        let result = DeviceRequestAllocationResult {
            request: "gpu".into(),
            driver: "gpu.example.com".into(),
            pool: "node-1".into(),
            device: "gpu-0".into(),
            share_id: None,
            ..Default::default()
        };
        let mut allocation = AllocationResult::default();
        allocation.devices.results.push(result);
        Replay {
            engine: "native",
            rejected: vec![],
            pods: vec![PodOutcome {
                pod: "ns/p".into(),
                node: Some("node-1".into()),
                nodes: vec![
                    NodeOutcome {
                        node: "node-1".into(),
                        status: Status::success().into(),
                        score: Some(7),
                    },
                    NodeOutcome {
                        node: "node-2".into(),
                        status: Status::unschedulable("full").into(),
                        score: None,
                    },
                ],
                allocations: vec![ClaimAllocation {
                    claim: "ns/c".into(),
                    allocation,
                }],
                error: None,
                deallocated: None,
                extended: None,
            }],
            samples: Samples {
                filter: vec![300, 100, 200],
                prefilter: vec![5],
                cycle: vec![9],
            },
            guest_memory_bytes: None,
        }
    }

    #[test]
    fn json_has_the_documented_shape() {
        let doc = to_json(&sample());
        let expected = serde_json::json!({
            "rejected": [],
            "pods": [{"pod": "ns/p", "node": "node-1",
                      "nodes": [{"node": "node-1", "code": "Success", "reason": "", "score": 7},
                                {"node": "node-2", "code": "Unschedulable", "reason": "full"}],
                      "allocations": [{"claim": "ns/c", "results": [
                          {"request": "gpu", "driver": "gpu.example.com", "pool": "node-1", "device": "gpu-0"}]}]}],
            "timing": {"filterNsPerNode": {"p50": 200, "p90": 300, "p99": 300, "max": 300},
                       "prefilterNs": {"p50": 5, "max": 5}, "cycleNs": {"p50": 9, "max": 9}, "engine": "native"}
        });
        assert_eq!(doc, expected);
        assert!(decisions(&sample()).get("timing").is_none());
        let text = to_json_text(&sample(), true);
        let keys = [
            "\"pods\"",
            "\"pod\"",
            "\"node\"",
            "\"nodes\"",
            "\"allocations\"",
            "\"rejected\"",
            "\"timing\"",
        ];
        let order: Vec<usize> = keys.iter().map(|k| text.find(k).unwrap()).collect();
        assert!(
            order.windows(2).all(|w| w[0] < w[1]),
            "fields in the documented order: {text}"
        );
        assert_eq!(serde_json::from_str::<Value>(&text).unwrap(), expected);
    }

    #[test]
    fn json_shows_the_extended_resource_claim_status() {
        use sharing_affinity_core::model::ContainerExtendedResourceRequest;
        let mut replay = sample();
        replay.pods[0].extended = Some(PodExtendedResourceClaimStatus {
            request_mappings: vec![ContainerExtendedResourceRequest {
                container_name: "main".into(),
                resource_name: "example.com/gpu".into(),
                request_name: "container-0-request-0".into(),
            }],
            resource_claim_name: "p-extended-resources-b2c4d".into(),
        });
        let doc = decisions(&replay);
        assert_eq!(
            doc["pods"][0]["extendedResourceClaimStatus"],
            serde_json::json!({"requestMappings": [{"containerName": "main", "resourceName": "example.com/gpu",
                                                    "requestName": "container-0-request-0"}],
                               "resourceClaimName": "p-extended-resources-b2c4d"})
        );
        assert!(
            decisions(&sample())["pods"][0]
                .get("extendedResourceClaimStatus")
                .is_none(),
            "absent for pods without DRA-backed extended resources"
        );
    }

    #[test]
    fn table_lists_pods_devices_and_with_explain_nodes() {
        let plain = table(&sample(), false);
        assert!(
            plain.contains("ns/p  node-1  ns/c: gpu.example.com/node-1/gpu-0"),
            "{plain}"
        );
        assert!(!plain.contains("node-2"), "{plain}");
        let explained = table(&sample(), true);
        assert!(explained.contains("node-1  Success score=7"), "{explained}");
        assert!(explained.contains("node-2  Unschedulable: full"), "{explained}");
        assert!(explained.contains("filter per node: p50 200ns"), "{explained}");
    }

    #[test]
    fn durations_pick_a_unit() {
        let cases = [
            (999, "999ns"),
            (1_500, "1.5µs"),
            (2_500_000, "2.5ms"),
            (3_000_000_000, "3.00s"),
        ];
        for (ns, text) in cases {
            assert_eq!(duration(ns), text, "{ns}");
        }
    }
}
