//! The scheduling loop of a replay: the pending pods of a [`Cluster`] one at a time through a
//! [`Scheduler`] (the core's plugin contract: the core's `Plugin` natively, or a wasm guest in the
//! host), as kube-scheduler would run them with only this plugin enabled. Loading the objects and
//! setting the clock are the caller's business, before [`schedule_all`].
//!
//! For each pod: PreFilter; Filter on every node in name order (each call timed); Score on the
//! feasible nodes; the highest score wins (ties: the smaller node name); Reserve and Bind there,
//! and Unreserve when Bind fails. When PreFilter fails, every node gets its status; when no node
//! passes, PostFilter runs.
//!
//! [`Binding::Async`] runs binding cycles as kube-scheduler does: the scheduling cycle ends at
//! Permit, and pod N's binding cycle runs after pod N+1's scheduling cycle has started (right after
//! its PreFilter, the point that exposes the most shared state).
//!
//! Nothing here reads a clock of its own: the caller passes one (wasm32 in a browser has no
//! `Instant`), and the loop only subtracts its readings.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use sharing_affinity_core::contract::Scheduler;
use sharing_affinity_core::model::{DeviceClass, Node, Pod, PodExtendedResourceClaimStatus};
use sharing_affinity_core::object::{Object, object_key};
use sharing_affinity_core::{ClaimAllocation, Code, Status, extended};

use crate::cluster::Cluster;

/// What filter (and score, for feasible nodes) said about one node.
#[derive(Clone, Debug, PartialEq)]
pub struct NodeOutcome {
    /// The node name.
    pub node: String,
    /// The filter status (or the prefilter status, when prefilter failed). Equal statuses of one
    /// pod's nodes share one allocation: a failing selector gives thousands of nodes one reason,
    /// which may be kilobytes long.
    pub status: Arc<Status>,
    /// The score, for feasible nodes.
    pub score: Option<u32>,
}

/// The outcome of one pod's scheduling cycle.
#[derive(Clone, Debug, PartialEq)]
pub struct PodOutcome {
    /// `namespace/name`.
    pub pod: String,
    /// The node the pod was bound to, if any.
    pub node: Option<String>,
    /// One entry per node, in name order.
    pub nodes: Vec<NodeOutcome>,
    /// The allocations bind recorded (empty when the pod was not bound or has no claims).
    pub allocations: Vec<ClaimAllocation>,
    /// Why a pod with feasible nodes was not bound (a failed score, reserve or bind).
    pub error: Option<String>,
    /// The claim PostFilter deallocated when no node fitted (`namespace/name`).
    pub deallocated: Option<String>,
    /// KEP-5004: the bound pod's `status.extendedResourceClaimStatus` (the request mappings and
    /// the special claim's name), set by [`schedule_all`] for pods bound with DRA-backed extended
    /// resources.
    pub extended: Option<PodExtendedResourceClaimStatus>,
}

/// Raw latency samples, in nanoseconds.
#[derive(Clone, Debug, Default)]
pub struct Samples {
    /// One per filter call.
    pub filter: Vec<u64>,
    /// One per prefilter call.
    pub prefilter: Vec<u64>,
    /// One per pod: prefilter through bind (or the failing step).
    pub cycle: Vec<u64>,
}

/// When a pod's binding cycle runs.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Binding {
    /// Right after the pod's scheduling cycle, before the next pod's starts.
    #[default]
    Sync,
    /// After Permit, interleaved with the next pod's scheduling cycle: pod N's binding cycle runs
    /// right after pod N+1's PreFilter (the last pod's after its own cycle). Needs an engine with
    /// [`Scheduler::binding_cycle`].
    Async,
}

/// What [`schedule_all`] decided: one outcome per pending pod, in scheduling order, and the
/// latencies.
#[derive(Clone, Debug, Default)]
pub struct Schedule {
    /// One entry per pending pod, in scheduling order.
    pub pods: Vec<PodOutcome>,
    /// Latency samples, in the unit of the clock passed in.
    pub samples: Samples,
}

/// Schedules the cluster's pending pods through `engine`, which holds the cluster's objects
/// already (and its clock set). `clock` reads a monotonic time in nanoseconds (a constant when
/// no clock is at hand: the samples are then zeros); `progress` is called after each pod;
/// `after_bind` with each pod's outcome right after a successful Bind. `Binding::Async` needs an
/// engine that implements [`Scheduler::permit`] and [`Scheduler::binding_cycle`].
pub fn schedule_all(
    engine: &mut dyn Scheduler,
    cluster: &Cluster,
    binding: Binding,
    clock: &dyn Fn() -> u64,
    progress: &mut dyn FnMut(),
    after_bind: &mut dyn FnMut(&PodOutcome),
) -> Schedule {
    let mut samples = Samples::default();
    let mut pods: Vec<PodOutcome> = Vec::with_capacity(cluster.pending.len());
    // The pod (index into `pods`) whose binding cycle waits, and its node.
    let mut deferred: Option<(usize, String)> = None;
    for pod in &cluster.pending {
        let start = clock();
        let (mut outcome, reserved) = {
            let mut between =
                |e: &mut dyn Scheduler| run_deferred(e, &mut deferred, &mut pods, &mut *after_bind);
            scheduling_cycle(
                engine,
                pod,
                &cluster.nodes,
                (&mut samples, clock),
                binding,
                &mut between,
            )
        };
        if let Some(node) = reserved {
            match binding {
                Binding::Sync => {
                    bind_now(engine, &mut outcome, node);
                    if outcome.node.is_some() {
                        after_bind(&outcome);
                    }
                }
                Binding::Async => deferred = Some((pods.len(), node)),
            }
        }
        samples.cycle.push(clock().saturating_sub(start));
        pods.push(outcome);
        progress();
    }
    run_deferred(engine, &mut deferred, &mut pods, after_bind);
    record_extended(cluster, &mut pods);
    Schedule { pods, samples }
}

/// Schedules `pods` (some of the cluster's pending pods, in order) through `engine` with
/// synchronous binding: the cycles before a pod's, to see the cluster as that pod's cycle sees it.
pub fn schedule_some(
    engine: &mut dyn Scheduler,
    cluster: &Cluster,
    pods: &[String],
    clock: &dyn Fn() -> u64,
) -> Vec<PodOutcome> {
    let mut samples = Samples::default();
    let mut outcomes: Vec<PodOutcome> = pods
        .iter()
        .map(|pod| schedule(engine, pod, &cluster.nodes, &mut samples, clock))
        .collect();
    record_extended(cluster, &mut outcomes);
    outcomes
}

/// KEP-5004: the `status.extendedResourceClaimStatus` each bound pod gets, by the core's rules for
/// the pod, the classes and its node ([`extended::status_on_node`]). The engine must have allocated
/// the claim it names; when it did not, the outcome says so in `error` (never a silent mismatch).
fn record_extended(cluster: &Cluster, pods: &mut [PodOutcome]) {
    let mut classes: HashMap<String, DeviceClass> = HashMap::new();
    let mut nodes: HashMap<&str, &Node> = HashMap::new();
    let mut pod_objects: HashMap<String, &Pod> = HashMap::new();
    for object in &cluster.objects {
        match object {
            Object::DeviceClass(c) => {
                classes.insert(c.metadata.name.to_string(), (**c).clone());
            }
            Object::Node(n) => {
                nodes.insert(n.metadata.name.as_str(), n);
            }
            Object::Pod(p) => {
                pod_objects.insert(object.key(), p);
            }
            _ => {}
        }
    }
    for outcome in pods.iter_mut() {
        let (Some(node), Some(pod)) = (&outcome.node, pod_objects.get(&outcome.pod)) else {
            continue;
        };
        let Some(node) = nodes.get(node.as_str()) else {
            continue;
        };
        // A class conflict fails PreFilter, so a bound pod never gets here with one.
        let Ok(Some(status)) = extended::status_on_node(pod, &classes, node) else {
            continue;
        };
        let key = object_key(&pod.metadata.namespace, &status.resource_claim_name);
        if !outcome.allocations.iter().any(|a| a.claim == key) {
            outcome.error = Some(format!(
                "pod {}: the engine allocated no extended-resource claim {key} on node {}",
                outcome.pod, node.metadata.name
            ));
        }
        outcome.extended = Some(status);
    }
}

/// Runs the waiting binding cycle, if any, and records its result in its pod's outcome.
fn run_deferred(
    engine: &mut dyn Scheduler,
    deferred: &mut Option<(usize, String)>,
    pods: &mut [PodOutcome],
    after_bind: &mut dyn FnMut(&PodOutcome),
) {
    let Some((index, node)) = deferred.take() else {
        return;
    };
    let Some(outcome) = pods.get_mut(index) else {
        return;
    };
    match engine.binding_cycle(&outcome.pod, &node) {
        Ok(allocations) => {
            outcome.allocations = allocations;
            outcome.node = Some(node);
            after_bind(outcome);
        }
        Err(status) => outcome.error = Some(format!("bind on node {node}: {status}")),
    }
}

/// Binds synchronously: bind, and unreserve when it fails.
fn bind_now(engine: &mut dyn Scheduler, outcome: &mut PodOutcome, node: String) {
    match engine.bind(&outcome.pod, &node) {
        Ok(allocations) => {
            outcome.allocations = allocations;
            outcome.node = Some(node);
        }
        Err(status) => {
            outcome.error = Some(format!("bind on node {node}: {status}"));
            // An Unreserve error is only logged, as kube-scheduler does: the cycle failed already.
            let _logged = engine.unreserve(&outcome.pod, &node);
        }
    }
}

/// One scheduling and binding cycle for `pod` over `nodes` (sorted by name), adding its latencies
/// to `samples`.
pub fn schedule(
    engine: &mut dyn Scheduler,
    pod: &str,
    nodes: &[String],
    samples: &mut Samples,
    clock: &dyn Fn() -> u64,
) -> PodOutcome {
    let (mut outcome, reserved) =
        scheduling_cycle(engine, pod, nodes, (samples, clock), Binding::Sync, &mut |_| {});
    if let Some(node) = reserved {
        bind_now(engine, &mut outcome, node);
    }
    outcome
}

/// The scheduling cycle: PreFilter, then `between` (a waiting binding cycle), Filter, Score,
/// Reserve, and with async binding Permit. Returns the outcome so far and the reserved node when
/// the pod is to be bound.
fn scheduling_cycle(
    engine: &mut dyn Scheduler,
    pod: &str,
    nodes: &[String],
    (samples, clock): (&mut Samples, &dyn Fn() -> u64),
    binding: Binding,
    between: &mut dyn FnMut(&mut dyn Scheduler),
) -> (PodOutcome, Option<String>) {
    let mut outcome = PodOutcome {
        pod: pod.to_string(),
        node: None,
        nodes: Vec::new(),
        allocations: Vec::new(),
        error: None,
        deallocated: None,
        extended: None,
    };
    let start = clock();
    let pre = engine.prefilter(pod);
    samples.prefilter.push(clock().saturating_sub(start));
    between(engine);
    if !pre.is_success() {
        let pre = Arc::new(pre);
        outcome.nodes = nodes
            .iter()
            .map(|n| NodeOutcome {
                node: n.clone(),
                status: Arc::clone(&pre),
                score: None,
            })
            .collect();
        postfilter(engine, nodes, &mut outcome);
        return (outcome, None);
    }
    let mut statuses: HashSet<Arc<Status>> = HashSet::new();
    for node in nodes {
        let start = clock();
        let status = engine.filter(node);
        samples.filter.push(clock().saturating_sub(start));
        let status = match statuses.get(&status) {
            Some(shared) => Arc::clone(shared),
            None => {
                let shared = Arc::new(status);
                statuses.insert(Arc::clone(&shared));
                shared
            }
        };
        outcome.nodes.push(NodeOutcome {
            node: node.clone(),
            status,
            score: None,
        });
    }
    // Score the feasible nodes; the best is the highest score, ties going to the smaller name
    // (nodes are visited in name order, so only a strictly higher score replaces the best).
    let feasible: Vec<String> = outcome
        .nodes
        .iter()
        .filter(|n| n.status.is_success())
        .map(|n| n.node.clone())
        .collect();
    if !feasible.is_empty() {
        let status = engine.prescore(&feasible);
        if !status.is_success() {
            outcome.error = Some(format!("prescore: {status}"));
            return (outcome, None);
        }
    }
    let mut best: Option<(u32, String)> = None;
    for entry in outcome.nodes.iter_mut().filter(|n| n.status.is_success()) {
        match engine.score(&entry.node) {
            Ok(score) => {
                entry.score = Some(score);
                if best.as_ref().is_none_or(|(b, _)| score > *b) {
                    best = Some((score, entry.node.clone()));
                }
            }
            Err(status) => {
                // As in kube-scheduler, a failing score plugin fails the whole cycle.
                outcome.error = Some(format!("score on node {}: {status}", entry.node));
                return (outcome, None);
            }
        }
    }
    let Some((_, node)) = best else {
        postfilter(engine, nodes, &mut outcome);
        return (outcome, None);
    };
    if let Err(status) = engine.reserve(&node) {
        outcome.error = Some(format!("reserve on node {node}: {status}"));
        let _logged = engine.unreserve(pod, &node);
        return (outcome, None);
    }
    if binding == Binding::Async
        && let Err(status) = engine.permit(&node)
    {
        outcome.error = Some(format!("permit on node {node}: {status}"));
        let _logged = engine.unreserve(pod, &node);
        return (outcome, None);
    }
    (outcome, Some(node))
}

/// PostFilter when no node passed Filter, as kube-scheduler runs it: only after every node was
/// rejected (Unschedulable or UnschedulableAndUnresolvable, by PreFilter or Filter; an `Error`
/// ends the cycle without it). An error status is the pod's error, a deallocated claim is
/// recorded.
fn postfilter(engine: &mut dyn Scheduler, nodes: &[String], outcome: &mut PodOutcome) {
    let rejected = |c| matches!(c, Code::Unschedulable | Code::UnschedulableAndUnresolvable);
    if outcome.nodes.is_empty() || !outcome.nodes.iter().all(|n| rejected(n.status.code)) {
        return;
    }
    let (status, deallocated) = engine.postfilter(&outcome.pod, nodes);
    if status.code == Code::Error {
        outcome.error = Some(format!("postfilter: {status}"));
    }
    outcome.deallocated = deallocated;
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;
    use crate::cluster::Position;

    /// An engine answering from fixed tables, to test the cycle logic without a plugin.
    struct Scripted {
        prefilter: Status,
        feasible: Vec<(&'static str, u32)>,
        bind_fails: bool,
        calls: Vec<String>,
    }

    impl Scheduler for Scripted {
        fn prefilter(&mut self, pod: &str) -> Status {
            self.calls.push(format!("prefilter {pod}"));
            self.prefilter.clone()
        }
        fn filter(&mut self, node: &str) -> Status {
            self.calls.push(format!("filter {node}"));
            if self.feasible.iter().any(|(n, _)| *n == node) {
                Status::success()
            } else {
                Status::unschedulable("no")
            }
        }
        fn set_time(&mut self, _unix_seconds: i64) {}
        fn postfilter(&mut self, _pod: &str, _nodes: &[String]) -> (Status, Option<String>) {
            self.calls.push("postfilter".into());
            (Status::unschedulable("still not schedulable"), None)
        }
        fn score(&mut self, node: &str) -> Result<u32, Status> {
            Ok(self
                .feasible
                .iter()
                .find(|(n, _)| *n == node)
                .map(|(_, s)| *s)
                .unwrap())
        }
        fn reserve(&mut self, node: &str) -> Result<Vec<ClaimAllocation>, Status> {
            self.calls.push(format!("reserve {node}"));
            Ok(Vec::new())
        }
        fn unreserve(&mut self, _pod: &str, node: &str) -> Result<(), Status> {
            self.calls.push(format!("unreserve {node}"));
            Ok(())
        }
        fn bind(&mut self, _pod: &str, node: &str) -> Result<Vec<ClaimAllocation>, Status> {
            self.calls.push(format!("bind {node}"));
            if self.bind_fails {
                Err(Status::error("api down"))
            } else {
                Ok(Vec::new())
            }
        }
    }

    fn replay(engine: &mut Scripted, cluster: &Cluster) -> Schedule {
        schedule_all(engine, cluster, Binding::Sync, &|| 0, &mut || {}, &mut |_| {})
    }

    fn cluster(nodes: &[&str]) -> Cluster {
        Cluster {
            objects: Vec::new(),
            now: 0,
            invalid: vec!["bad object".into()],
            invalid_at: vec![Position::default()],
            objects_at: Vec::new(),
            duplicates: Vec::new(),
            unread: Vec::new(),
            refused: Vec::new(),
            ignored: BTreeMap::new(),
            nodes: nodes.iter().map(|n| n.to_string()).collect(),
            pending: vec!["ns/p".into()],
        }
    }

    #[test]
    fn highest_score_wins_and_ties_go_to_the_smaller_name() {
        type Feasible = &'static [(&'static str, u32)];
        let cases: &[(Feasible, Option<&str>, &str)] = &[
            (&[("n1", 10), ("n2", 50), ("n3", 20)], Some("n2"), "highest score"),
            (&[("n2", 50), ("n3", 50)], Some("n2"), "tie: smaller name"),
            (&[], None, "nothing feasible"),
        ];
        for (feasible, expected, msg) in cases {
            let mut engine = Scripted {
                prefilter: Status::success(),
                feasible: feasible.to_vec(),
                bind_fails: false,
                calls: vec![],
            };
            let r = replay(&mut engine, &cluster(&["n1", "n2", "n3"]));
            assert_eq!(r.pods[0].node.as_deref(), *expected, "{msg}");
            assert_eq!(r.samples.filter.len(), 3, "{msg}: one filter sample per node");
            let scored: Vec<_> = r.pods[0].nodes.iter().filter_map(|n| n.score).collect();
            assert_eq!(
                scored.len(),
                feasible.len(),
                "{msg}: scores only for feasible nodes"
            );
        }
    }

    #[test]
    fn failed_prefilter_applies_to_every_node() {
        let mut engine = Scripted {
            prefilter: Status::unresolvable("no claim"),
            feasible: vec![],
            bind_fails: false,
            calls: vec![],
        };
        let r = replay(&mut engine, &cluster(&["n1", "n2"]));
        assert_eq!(r.pods[0].nodes.len(), 2);
        assert!(
            r.pods[0]
                .nodes
                .iter()
                .all(|n| *n.status == Status::unresolvable("no claim"))
        );
        assert_eq!(
            engine.calls,
            ["prefilter ns/p", "postfilter"],
            "no filter after a failed prefilter, then PostFilter as kube-scheduler runs it"
        );
        // An Error ends the cycle without PostFilter.
        let mut engine = Scripted {
            prefilter: Status::error("broken"),
            feasible: vec![],
            bind_fails: false,
            calls: vec![],
        };
        replay(&mut engine, &cluster(&["n1", "n2"]));
        assert_eq!(engine.calls, ["prefilter ns/p"], "no PostFilter after an Error");
    }

    /// A reason repeated on every node is kept once per pod: a 10 KiB selector error on 2,000
    /// nodes for 50 pods would otherwise hold 1 GB.
    #[test]
    fn equal_statuses_of_a_pod_s_nodes_share_one_allocation() {
        for prefilter in [Status::success(), Status::unresolvable("no claim")] {
            let mut engine = Scripted {
                prefilter,
                feasible: vec![("n2", 1)],
                bind_fails: false,
                calls: vec![],
            };
            let r = replay(&mut engine, &cluster(&["n1", "n2", "n3", "n4"]));
            let nodes = &r.pods[0].nodes;
            assert!(Arc::ptr_eq(&nodes[0].status, &nodes[2].status));
            assert!(Arc::ptr_eq(&nodes[0].status, &nodes[3].status));
        }
    }

    #[test]
    fn failed_bind_unreserves() {
        let mut engine = Scripted {
            prefilter: Status::success(),
            feasible: vec![("n1", 1)],
            bind_fails: true,
            calls: vec![],
        };
        let r = replay(&mut engine, &cluster(&["n1"]));
        assert_eq!(r.pods[0].node, None);
        assert_eq!(
            r.pods[0].error.as_deref(),
            Some("bind on node n1: Error: api down")
        );
        assert_eq!(
            engine.calls,
            [
                "prefilter ns/p",
                "filter n1",
                "reserve n1",
                "bind n1",
                "unreserve n1"
            ]
        );
    }
}
