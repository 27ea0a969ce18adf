//! Replaying a recorded cluster through a [`PluginRuntime`]: the scheduling decisions kube-scheduler would
//! take with only this plugin enabled.
//!
//! The input is what `kubectl get nodes,deviceclasses,resourceslices,resourceclaims,resourceclaimtemplates,pods,devicetaintrules -A -o json`
//! prints ([`Cluster`]). Every object is loaded into the engine; then the pending pods are scheduled
//! one at a time by the engine-independent loop of [`sharing_affinity_replay::cycle`], which the
//! browser's explainer runs too: pods by `metadata.creationTimestamp`, then `namespace/name`;
//! nodes in name order; the highest score wins (ties: the smaller node name).

use std::time::Instant;

pub use sharing_affinity_replay::cluster::{Cluster, Duplicate, Position, Unread};
use sharing_affinity_replay::cycle;
pub use sharing_affinity_replay::cycle::{Binding, NodeOutcome, PodOutcome, Samples};
use wasmtime::error::Context;
use wasmtime::{Result, format_err};

use crate::engine::PluginRuntime;

/// The result of a replay.
#[derive(Clone, Debug)]
pub struct Replay {
    /// The engine's name.
    pub engine: &'static str,
    /// Objects rejected while loading: those that failed to decode, then those the plugin refused.
    pub rejected: Vec<String>,
    /// One entry per pending pod, in scheduling order.
    pub pods: Vec<PodOutcome>,
    /// Latency samples.
    pub samples: Samples,
    /// The guest's linear memory after the replay (its peak), for wasm engines.
    pub guest_memory_bytes: Option<u64>,
}

impl Replay {
    /// The first sign that the replay did not decide every pending pod, in this order: an object
    /// rejected while loading; a pod whose cycle ended in an error; a pod left unbound although a
    /// node passed its Filter. `None` when every pod was bound or failed Filter on every node it
    /// was tried on (or failed PreFilter).
    pub fn undecided(&self) -> Option<String> {
        if !self.rejected.is_empty() {
            return Some(format!("rejected objects: {:?}", self.rejected));
        }
        for p in &self.pods {
            if let Some(e) = &p.error {
                return Some(format!("{}: {e}", p.pod));
            }
            if p.node.is_none() && p.nodes.iter().any(|n| n.status.is_success()) {
                return Some(format!("{} unbound although a node passed Filter", p.pod));
            }
        }
        None
    }
}

/// Loads the cluster into the engine and schedules its pending pods, binding synchronously.
/// `progress` is called after each pod. Only a failure to load (for example a trap while
/// loading) is an error.
pub fn replay(
    engine: &mut dyn PluginRuntime,
    cluster: &Cluster,
    progress: &mut dyn FnMut(),
) -> Result<Replay> {
    replay_with(engine, cluster, Binding::Sync, progress, &mut |_| {})
}

/// [`replay`], calling `after_bind` with each pod's outcome right after a successful Bind (the
/// hook `replay --audit` uses to audit the cluster state).
pub fn replay_observed(
    engine: &mut dyn PluginRuntime,
    cluster: &Cluster,
    progress: &mut dyn FnMut(),
    after_bind: &mut dyn FnMut(&PodOutcome),
) -> Result<Replay> {
    replay_with(engine, cluster, Binding::Sync, progress, after_bind)
}

/// As [`replay_observed`], with the given binding mode. `Binding::Async` with an engine that binds
/// synchronously only is an error.
pub fn replay_with(
    engine: &mut dyn PluginRuntime,
    cluster: &Cluster,
    binding: Binding,
    progress: &mut dyn FnMut(),
    after_bind: &mut dyn FnMut(&PodOutcome),
) -> Result<Replay> {
    if binding == Binding::Async && !engine.async_binding() {
        return Err(format_err!(
            "asynchronous binding: the {} engine binds synchronously only (use --binding sync)",
            engine.name()
        ));
    }
    let mut rejected = cluster.invalid.clone();
    rejected.extend(
        engine
            .load(&cluster.objects)
            .context("loading the cluster into the plugin")?,
    );
    // Listed above already, from the decoding that found them.
    engine
        .load_refused(&cluster.refused)
        .context("handing the plugin the objects it rejects")?;
    engine.set_time(cluster.now);
    let origin = Instant::now();
    let clock = || nanos(origin);
    let schedule = cycle::schedule_all(&mut *engine, cluster, binding, &clock, progress, after_bind);
    Ok(Replay {
        engine: engine.name(),
        rejected,
        pods: schedule.pods,
        samples: schedule.samples,
        guest_memory_bytes: engine.guest_memory_bytes(),
    })
}

/// One scheduling and binding cycle for `pod` over `nodes` (sorted by name), adding its latencies
/// to `samples`.
pub fn schedule(
    engine: &mut dyn PluginRuntime,
    pod: &str,
    nodes: &[String],
    samples: &mut Samples,
) -> PodOutcome {
    let origin = Instant::now();
    cycle::schedule(engine, pod, nodes, samples, &|| nanos(origin))
}

fn nanos(origin: Instant) -> u64 {
    u64::try_from(origin.elapsed().as_nanos()).unwrap_or(u64::MAX)
}

/// The recorded cycles bundled with the workspace: every directory under `testdata/`, sorted by
/// name (used by the golden tests and the benches).
pub fn scenario_dirs() -> Vec<std::path::PathBuf> {
    let root = crate::artifact::workspace_root().join("testdata");
    let Ok(entries) = std::fs::read_dir(&root) else {
        return Vec::new();
    };
    let mut dirs: Vec<std::path::PathBuf> = entries
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.is_dir())
        .collect();
    dirs.sort();
    dirs
}

#[cfg(test)]
mod tests {
    use sharing_affinity_core::Status;

    use super::*;

    #[test]
    fn undecided_names_a_rejection_an_error_or_an_unbound_pod_that_passed_filter() {
        let node = |name: &str, status: Status| NodeOutcome {
            node: name.into(),
            status: status.into(),
            score: None,
        };
        let pod = |name: &str, bound: Option<&str>, nodes: Vec<NodeOutcome>| PodOutcome {
            pod: name.into(),
            node: bound.map(String::from),
            nodes,
            allocations: Vec::new(),
            error: None,
            deallocated: None,
            extended: None,
        };
        let decided = Replay {
            engine: "native",
            rejected: Vec::new(),
            pods: vec![
                pod("a/bound", Some("n1"), vec![node("n1", Status::success())]),
                pod("a/full", None, vec![node("n1", Status::unschedulable("full"))]),
                pod("a/no-prefilter", None, Vec::new()),
            ],
            samples: Samples::default(),
            guest_memory_bytes: None,
        };
        assert_eq!(decided.undecided(), None);

        let mut r = decided.clone();
        r.rejected.push("ResourceSlice s: bad".into());
        assert_eq!(
            r.undecided().as_deref(),
            Some(r#"rejected objects: ["ResourceSlice s: bad"]"#)
        );

        let mut r = decided.clone();
        r.pods[1].error = Some("trapped".into());
        assert_eq!(r.undecided().as_deref(), Some("a/full: trapped"));

        let mut r = decided.clone();
        r.pods[1].nodes.push(node("n2", Status::success()));
        assert_eq!(
            r.undecided().as_deref(),
            Some("a/full unbound although a node passed Filter")
        );
    }
}
