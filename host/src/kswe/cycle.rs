//! A scheduling-cycle driver: runs one pod through the framework's extension points the way
//! kube-scheduler does with this plugin as the only plugin, calling each hook only when the masked
//! plugin implements it, and binding with the default binder when no plugin binds.
//!
//! Simplifications (no other plugins, no preemption, no clock): nodes are visited in name order;
//! the highest score wins and ties go to the first node in name order (kube-scheduler picks among
//! ties at random); a `Wait` from Permit ends the cycle as [`Outcome::Waiting`] with the pod left
//! in the waiting map.

use std::collections::BTreeMap;

use sharing_affinity_core::object::Kind;

use super::abi::{KsweStatus, code};
use super::context::DraWrite;
use super::host::{KsweHost, PostFilterResult, PreparedPod};

/// How the cycle ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// The pod was bound to `node` (by the guest's `bind`, or by the default binder).
    Bound {
        /// The node.
        node: String,
        /// True when the guest's `bind` returned Success; false for the default binder.
        by_plugin: bool,
    },
    /// No node fits, or a hook rejected the pod.
    Unschedulable {
        /// Why.
        reason: String,
    },
    /// A hook failed (Error or an unexpected code); the scheduler would retry later.
    Error {
        /// Why.
        reason: String,
    },
    /// Permit returned Wait.
    Waiting {
        /// The node the pod was reserved on.
        node: String,
        /// Permit's timeout in milliseconds.
        timeout_ms: u32,
    },
}

/// Everything the cycle called and got back.
#[derive(Clone, Debug)]
pub struct CycleReport {
    /// PreFilter's status.
    pub prefilter: KsweStatus,
    /// PreFilter's node names (`None` = all nodes).
    pub node_names: Option<Vec<String>>,
    /// Filter status per evaluated node, in name order.
    pub filter: Vec<(String, KsweStatus)>,
    /// PostFilter, when no node was feasible.
    pub postfilter: Option<(Option<PostFilterResult>, KsweStatus)>,
    /// Final (normalized) scores of the feasible nodes.
    pub scores: Vec<(String, i64)>,
    /// Pending allocations signalled at Reserve.
    pub pending: Vec<DraWrite>,
    /// Allocations written at PreBind.
    pub allocations: Vec<DraWrite>,
    /// Logged Unreserve/PostBind failures.
    pub logged: Vec<String>,
    /// How it ended.
    pub outcome: Outcome,
}

fn rejected(code: i32) -> bool {
    matches!(
        code,
        code::UNSCHEDULABLE | code::UNSCHEDULABLE_AND_UNRESOLVABLE | code::PENDING
    )
}

fn fail(status: &KsweStatus, hook: &str) -> Outcome {
    if rejected(status.code) {
        Outcome::Unschedulable {
            reason: status.reason.clone(),
        }
    } else {
        Outcome::Error {
            reason: format!("{hook}: {status}"),
        }
    }
}

/// Runs one scheduling (and binding) cycle for the pod `namespace/name` from the host's store.
/// `Err` means the Go host would have panicked, or the pod is unknown.
pub fn run_cycle(host: &mut KsweHost, pod_key: &str) -> wasmtime::Result<CycleReport> {
    let (pod, nodes) = {
        let cluster = host.cluster();
        let pod = cluster
            .store
            .pod(pod_key)
            .cloned()
            .ok_or_else(|| wasmtime::format_err!("Pod {pod_key}: not found"))?;
        let nodes: Vec<String> = cluster.store.objects(Kind::Node).map(|o| o.key()).collect();
        (pod, nodes)
    };
    let pod = PreparedPod::new(&pod)?;
    let mask = host.mask();
    let (node_names, prefilter) = host.prefilter(&pod)?;
    let mut report = CycleReport {
        prefilter: prefilter.clone(),
        node_names: node_names.clone(),
        filter: Vec::new(),
        postfilter: None,
        scores: Vec::new(),
        pending: Vec::new(),
        allocations: Vec::new(),
        logged: Vec::new(),
        outcome: Outcome::Error {
            reason: String::new(),
        },
    };
    let skip_filter = prefilter.code == code::SKIP;
    if !prefilter.is_success() && !skip_filter {
        report.outcome = fail(&prefilter, "prefilter");
        return Ok(report);
    }
    let candidates: Vec<String> = match &node_names {
        Some(names) => nodes.into_iter().filter(|n| names.contains(n)).collect(),
        None => nodes,
    };
    let mut feasible = Vec::new();
    let mut statuses = BTreeMap::new();
    for node in &candidates {
        if !mask.filter || skip_filter {
            feasible.push(node.clone());
            continue;
        }
        let status = host.filter(&pod, node)?;
        report.filter.push((node.clone(), status.clone()));
        if status.is_success() {
            feasible.push(node.clone());
        } else if rejected(status.code) {
            statuses.insert(node.clone(), status.code);
        } else {
            report.outcome = fail(&status, "filter");
            return Ok(report);
        }
    }
    if feasible.is_empty() {
        if mask.filter {
            report.postfilter = Some(host.postfilter(&pod, &statuses)?);
        }
        let reasons: Vec<String> = report
            .filter
            .iter()
            .filter(|(_, s)| !s.is_success())
            .map(|(n, s)| format!("{n}: {}", s.reason))
            .collect();
        report.outcome = Outcome::Unschedulable {
            reason: format!(
                "0/{} nodes are available: {}",
                candidates.len(),
                reasons.join("; ")
            ),
        };
        return Ok(report);
    }
    let mut scores: Vec<(String, i64)> = feasible.iter().map(|n| (n.clone(), 0)).collect();
    if mask.score {
        let prescore = host.prescore(&pod, &feasible)?;
        if prescore.code != code::SKIP {
            if !prescore.is_success() {
                report.outcome = fail(&prescore, "prescore");
                return Ok(report);
            }
            for (node, score) in scores.iter_mut() {
                let (value, status) = host.score(&pod, node)?;
                if !status.is_success() {
                    report.outcome = fail(&status, "score");
                    return Ok(report);
                }
                *score = value;
            }
            let status = host.normalize_score(&pod, &mut scores)?;
            if !status.is_success() {
                report.outcome = fail(&status, "normalizescore");
                return Ok(report);
            }
            if let Some((node, s)) = scores.iter().find(|(_, s)| !(0..=100).contains(s)) {
                report.outcome = Outcome::Error {
                    reason: format!(
                        "plugin \"wasm\" returns an invalid score {s} for node {node}, it should in the range of [0, 100] after normalizing"
                    ),
                };
                return Ok(report);
            }
        }
    }
    report.scores = scores.clone();
    let best = scores.iter().map(|(_, s)| *s).max().unwrap_or(0);
    let node = scores
        .iter()
        .find(|(_, s)| *s == best)
        .map(|(n, _)| n.clone())
        .unwrap_or_default();

    let unreserve = |host: &mut KsweHost, report: &mut CycleReport| -> wasmtime::Result<()> {
        if mask.reserve
            && let Some(logged) = host.unreserve(&pod, &node)?
        {
            report.logged.push(logged);
        }
        Ok(())
    };
    if mask.reserve {
        let (status, pending) = host.reserve(&pod, &node)?;
        report.pending = pending;
        if !status.is_success() {
            unreserve(host, &mut report)?;
            report.outcome = fail(&status, "reserve");
            return Ok(report);
        }
    }
    if mask.permit {
        let (status, timeout_ms) = host.permit(&pod, &node)?;
        if status.code == code::WAIT {
            report.outcome = Outcome::Waiting { node, timeout_ms };
            return Ok(report);
        }
        if !status.is_success() {
            unreserve(host, &mut report)?;
            report.outcome = fail(&status, "permit");
            return Ok(report);
        }
    }
    let mut by_plugin = false;
    if mask.bind {
        let (status, allocations) = host.prebind(&pod, &node)?;
        report.allocations = allocations;
        if !status.is_success() {
            unreserve(host, &mut report)?;
            report.outcome = Outcome::Error {
                reason: format!("prebind: {status}"),
            };
            return Ok(report);
        }
        let status = host.bind(&pod, &node)?;
        match status.code {
            code::SUCCESS => by_plugin = true,
            code::SKIP => {}
            _ => {
                unreserve(host, &mut report)?;
                report.outcome = Outcome::Error {
                    reason: format!("bind: {status}"),
                };
                return Ok(report);
            }
        }
    }
    host.cluster()
        .store
        .bind_pod(pod_key, &node)
        .map_err(wasmtime::Error::msg)?;
    if mask.bind
        && let Some(logged) = host.postbind(&pod, &node)?
    {
        report.logged.push(logged);
    }
    report.outcome = Outcome::Bound { node, by_plugin };
    Ok(report)
}
