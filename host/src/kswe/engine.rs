//! [`KsweEngine`]: the replay's [`PluginRuntime`] (and the core's [`Scheduler`]) over a KSWE guest that imports `sharing-affinity.dra/v1`
//! (our plugin built with `--features scheduler-abi`).
//!
//! Objects go into the host's store; the guest pulls them through the change feed at PreFilter.
//! Reserve returns the pending allocations the guest signalled, Bind runs Permit (if exported),
//! PreBind, Bind, the default binder and PostBind and returns the allocations written at PreBind.
//!
//! Any other KSWE guest runs too, with kube-scheduler's treatment of a plugin's extension points:
//! a hook the guest does not export is not called (Filter passes every node, Score gives 0, Reserve
//! reserves nothing); a PreFilter `Skip` skips Filter for the cycle; node names returned at
//! PreFilter restrict the nodes (the others get `UnschedulableAndUnresolvable`). A guest that
//! exports PreScore or NormalizeScore is scored as a batch at the replay's first Score call of the
//! cycle: PreScore over the nodes that passed Filter (`Skip`: every score 0), Score on each, then
//! NormalizeScore; the later Score calls read the batch. A Permit `Wait` is an `Error` (the replay
//! has no waiting pods).
//!
//! Binding: with [`Scheduler::bind`] (`--binding sync`) Permit, PreBind, Bind and PostBind run
//! right after Reserve. The engine also implements asynchronous binding (`--binding async`, the
//! CLI's default for this engine): [`Scheduler::permit`] ends the scheduling cycle (upstream hands
//! the scheduling instance to the pod's binding cycle there) and [`Scheduler::binding_cycle`] runs
//! PreBind, Bind, the default binder and PostBind later, while the next pod's scheduling cycle is
//! in progress, with Unreserve (on the scheduling instance, as upstream) when it fails.
//!
//! At start the engine calls `EventsToRegister` (the guest's `enqueue`), as kube-scheduler does
//! when it builds the framework; [`KsweEngine::registered_events`] tells what the guest registered.
//!
//! Traps: by default the engine uses [`TrapPolicy::Replace`], so a trapped instance is dropped and
//! the next call gets a fresh one, whose state comes back from the feed (a full resync on its first
//! pull); when that happens mid-cycle, the engine re-runs PreFilter for the current pod, and Filter
//! on every node that passed it, before the next hook, so the cycle state is restored too. Calls
//! run under [`crate::limits::Limits`] (time per call, memory, stack, status reason): a limit hit
//! is a trap like any other. With [`TrapPolicy::Reuse`]
//! ([`KsweEngine::with_config`]) the engine behaves exactly as upstream: the trapped instance stays
//! in the pool and nothing is re-run, so the guest itself must recover.

use std::collections::BTreeMap;

use sharing_affinity_core::contract::Scheduler;
use sharing_affinity_core::object::Object;
use sharing_affinity_core::{ClaimAllocation, Code, Status};

use super::abi::{KsweStatus, code};
use super::context::DraWrite;
use super::host::{KsweConfig, KsweHost, KsweModule, PreparedPod, RegisteredEvents, TrapPolicy};
use super::load::bits;
use super::store::Change;
use crate::engine::PluginRuntime;

/// The KSWE engine. See the module docs.
pub struct KsweEngine {
    host: KsweHost,
    pod: Option<PreparedPod>,
    restore: bool,
    traps: u64,
    cycle: CycleState,
    policy: TrapPolicy,
    events: RegisteredEvents,
    /// Pods past Permit whose binding cycle has not run yet, by `namespace/name`.
    permitted: BTreeMap<String, PreparedPod>,
}

/// A set of node names, hashed with Fx: looked up in every Filter call (SipHash cost about 1,000
/// instructions per call); the names are the scheduler's own, not input an attacker chooses.
type NameSet = std::collections::HashSet<String, rustc_hash::FxBuildHasher>;

/// What the engine remembers between the hooks of one scheduling cycle.
#[derive(Default)]
struct CycleState {
    /// PreFilter returned `Skip`: Filter is not called.
    skip_filter: bool,
    /// The node names PreFilter returned (`None`: every node), as a set: Filter looks up each node.
    node_names: Option<NameSet>,
    /// Nodes that passed Filter, in call order, each once: PreScore's input for batch guests, and
    /// the Filter calls a replacement instance gets again when the cycle is restored.
    feasible: Vec<String>,
    /// The same nodes as a set: a Filter call looks its node up in constant time (a scan of
    /// `feasible` made a 5,000-node cycle quadratic, 70 % of the KSWE engine's Filter time).
    feasible_set: NameSet,
    /// Batch scores (PreScore/NormalizeScore guests) by node name, once computed: each later
    /// Score looks its node up in constant time (a scan of the list made a 5,000-node cycle's
    /// Score quadratic, 29 ms of it). A name NormalizeScore returned twice keeps its first score.
    scores: Option<std::collections::HashMap<String, i64, rustc_hash::FxBuildHasher>>,
}

/// Maps a raw KSWE status to the core's: 0, 2 and 3 keep their meaning; every other code
/// (1, Wait, Skip, Pending, out-of-range values) becomes `Error` naming the code.
pub fn to_status(status: &KsweStatus) -> Status {
    match status.code {
        code::SUCCESS => Status::new(Code::Success, status.reason.clone()),
        code::UNSCHEDULABLE => Status::unschedulable(status.reason.clone()),
        code::UNSCHEDULABLE_AND_UNRESOLVABLE => Status::unresolvable(status.reason.clone()),
        code::ERROR => Status::error(status.reason.clone()),
        other => Status::error(format!("unexpected status code {other}: {}", status.reason)),
    }
}

fn allocations(writes: Vec<DraWrite>) -> Vec<ClaimAllocation> {
    writes
        .into_iter()
        .map(|w| ClaimAllocation {
            claim: w.claim,
            allocation: w.allocation,
        })
        .collect()
}

fn host_error(err: wasmtime::Error) -> Status {
    Status::error(format!("kswe host: {err:#}"))
}

impl KsweEngine {
    /// Loads the guest with its `guestConfig` (the plugin's JSON configuration).
    pub fn new(wasm: &[u8], guest_config: &str) -> wasmtime::Result<KsweEngine> {
        KsweEngine::from_module(&KsweModule::new(wasm)?, guest_config)
    }

    /// As [`KsweEngine::new`], from an already compiled guest (compile once, start many).
    pub fn from_module(module: &KsweModule, guest_config: &str) -> wasmtime::Result<KsweEngine> {
        let config = KsweConfig {
            guest_config: guest_config.to_string(),
            trap_policy: TrapPolicy::Replace,
            ..KsweConfig::default()
        };
        KsweEngine::with_config(module, config)
    }

    /// An engine with a full plugin configuration (guest argv, log severity, trap policy). The
    /// DRA extension is always provided. Calls `EventsToRegister`; a trap there is the Go host's
    /// panic at start-up, an error here.
    pub fn with_config(module: &KsweModule, config: KsweConfig) -> wasmtime::Result<KsweEngine> {
        let policy = config.trap_policy;
        let config = KsweConfig {
            dra_extension: true,
            ..config
        };
        let mut host = module.host(config)?;
        let events = host.events_to_register()?;
        Ok(KsweEngine {
            host,
            pod: None,
            restore: false,
            traps: 0,
            cycle: CycleState::default(),
            policy,
            events,
            permitted: BTreeMap::new(),
        })
    }

    /// What `EventsToRegister` returned at start.
    pub fn registered_events(&self) -> &RegisteredEvents {
        &self.events
    }

    /// How many guest calls failed (a trap or an exit); each failed instance was replaced.
    pub fn traps(&self) -> u64 {
        self.traps
    }

    /// Whether the next `score` call enters the guest: with batch scoring only the cycle's
    /// first Score does (the others are answered from its batch).
    pub fn score_enters_guest(&mut self) -> bool {
        self.host.mask().score && (!self.batch_scoring() || self.cycle.scores.is_none())
    }

    /// Changes the time limit of later guest calls (tests use `Duration::ZERO` to force a trap).
    pub fn set_time_per_call(&mut self, time: std::time::Duration) {
        self.host.set_time_per_call(time);
    }

    /// The underlying host (store, logs, pool).
    pub fn host(&mut self) -> &mut KsweHost {
        &mut self.host
    }

    fn current(&self, hook: &str) -> Result<PreparedPod, Status> {
        self.pod
            .clone()
            .ok_or_else(|| Status::error(format!("{hook} called before prefilter")))
    }

    /// Restores the cycle if an earlier call trapped: the replacement instance gets PreFilter
    /// again, then Filter on every node that passed it in this cycle, so the cycle state the guest
    /// keeps (for example what Filter computed for Score and Reserve) is back.
    fn before(&mut self, hook: &str) -> Result<PreparedPod, Status> {
        let pod = self.current(hook)?;
        if self.restore {
            self.restore = false;
            let (_, status) = self.host.prefilter(&pod).map_err(host_error)?;
            self.after(&status);
            if !status.is_success() && status.code != code::SKIP {
                return Err(to_status(&status));
            }
            if status.code == code::SKIP || self.cycle.skip_filter || !self.host.mask().filter {
                return Ok(pod);
            }
            for node in self.cycle.feasible.clone() {
                let status = self.host.filter(&pod, &node).map_err(host_error)?;
                self.after(&status);
                if !status.is_success() {
                    return Err(Status::error(format!(
                        "restoring the cycle of pod {} after a failed call: Filter on node {node},                          which passed before, now gives {}",
                        super::store::pod_key(&pod.pod),
                        to_status(&status)
                    )));
                }
            }
        }
        Ok(pod)
    }

    /// Whether Score runs as a batch: the guest exports PreScore or NormalizeScore.
    fn batch_scoring(&self) -> bool {
        let mask = self.host.mask();
        mask.score && (mask.has(bits::PRE_SCORE) || mask.has(bits::SCORE_EXTENSIONS))
    }

    /// Records a node that passed Filter (once).
    fn passed_filter(&mut self, node: &str) {
        if !self.cycle.feasible_set.contains(node) {
            self.cycle.feasible_set.insert(node.to_string());
            self.cycle.feasible.push(node.to_string());
        }
    }

    /// PreScore, Score on every feasible node and NormalizeScore, as kube-scheduler runs them.
    fn batch_scores(&mut self, pod: &PreparedPod) -> Result<Vec<(String, i64)>, Status> {
        let feasible = self.cycle.feasible.clone();
        let status = self.host.prescore(pod, &feasible).map_err(host_error)?;
        self.after(&status);
        if status.code == code::SKIP {
            return Ok(feasible.into_iter().map(|n| (n, 0)).collect());
        }
        if !status.is_success() {
            return Err(to_status(&status));
        }
        let mut scores = Vec::with_capacity(feasible.len());
        for node in feasible {
            let (score, status) = self.host.score(pod, &node).map_err(host_error)?;
            self.after(&status);
            if !status.is_success() {
                return Err(to_status(&status));
            }
            scores.push((node, score));
        }
        let status = self.host.normalize_score(pod, &mut scores).map_err(host_error)?;
        self.after(&status);
        if !status.is_success() {
            return Err(to_status(&status));
        }
        Ok(scores)
    }

    fn after(&mut self, status: &KsweStatus) {
        self.restore |= status.trapped && self.policy == TrapPolicy::Replace;
        self.traps += u64::from(status.trapped);
    }

    /// Permit (when exported): the end of the scheduling cycle; upstream moves the scheduling
    /// instance to the pod's binding cycle.
    fn permit_pod(&mut self, pod: &PreparedPod, node: &str) -> Result<(), Status> {
        if !self.host.mask().permit {
            return Ok(());
        }
        let (status, _) = self.host.permit(pod, node).map_err(host_error)?;
        self.after(&status);
        if status.is_success() {
            Ok(())
        } else {
            Err(to_status(&status))
        }
    }

    /// The binding cycle: PreBind, Bind, the default binder (when Bind skips), PostBind.
    fn bind_pod(&mut self, pod: &PreparedPod, node: &str) -> Result<Vec<ClaimAllocation>, Status> {
        let mask = self.host.mask();
        let mut written = Vec::new();
        if mask.bind {
            let (status, allocations) = self.host.prebind(pod, node).map_err(host_error)?;
            self.traps += u64::from(status.trapped);
            if !status.is_success() {
                return Err(to_status(&status));
            }
            written = allocations;
            let status = self.host.bind(pod, node).map_err(host_error)?;
            self.traps += u64::from(status.trapped);
            if status.code != code::SUCCESS && status.code != code::SKIP {
                return Err(to_status(&status));
            }
        }
        let key = super::store::pod_key(&pod.pod);
        self.host
            .cluster()
            .store
            .bind_pod(&key, node)
            .map_err(Status::error)?;
        if mask.bind {
            // A failed PostBind is only logged, as upstream; it still counts as a trap.
            if self.host.postbind(pod, node).map_err(host_error)?.is_some() {
                self.traps += 1;
            }
        }
        Ok(allocations(written))
    }
}

impl PluginRuntime for KsweEngine {
    fn name(&self) -> &'static str {
        "kswe"
    }

    fn guest_memory_bytes(&mut self) -> Option<u64> {
        Some(self.host.guest_memory_bytes())
    }

    fn take_logs(&mut self) -> Vec<String> {
        self.host.take_logs().iter().map(ToString::to_string).collect()
    }

    fn load_refused(&mut self, objects: &[String]) -> wasmtime::Result<()> {
        let mut cluster = self.host.cluster();
        for object in objects {
            cluster.store.add_refused(object);
        }
        Ok(())
    }

    fn load(&mut self, objects: &[Object]) -> wasmtime::Result<Vec<String>> {
        let mut cluster = self.host.cluster();
        Ok(objects
            .iter()
            .filter_map(|o| cluster.store.apply(Change::Add, o.clone()).err())
            .collect())
    }

    fn async_binding(&self) -> bool {
        true
    }
}

/// The hooks act on the cycle's pod as the host prepared it at PreFilter (the guest reads it
/// through `currentPod`): the `pod` that Unreserve, PostFilter and Bind name is that pod.
impl Scheduler for KsweEngine {
    fn set_time(&mut self, unix_seconds: i64) {
        self.host.cluster().now = unix_seconds;
    }

    fn prefilter(&mut self, pod: &str) -> Status {
        self.restore = false;
        let found = self.host.cluster().store.pod(pod).cloned();
        let Some(found) = found else {
            return Status::error(format!("Pod {pod}: not found"));
        };
        let prepared = match PreparedPod::new(&found) {
            Ok(p) => p,
            Err(e) => return Status::error(e.to_string()),
        };
        self.pod = Some(prepared.clone());
        self.cycle = CycleState::default();
        match self.host.prefilter(&prepared) {
            Ok((node_names, status)) => {
                self.traps += u64::from(status.trapped);
                if status.code == code::SKIP {
                    self.cycle.skip_filter = true;
                    return Status::new(Code::Success, status.reason);
                }
                self.cycle.node_names = node_names.map(|names| names.into_iter().collect());
                to_status(&status)
            }
            Err(e) => host_error(e),
        }
    }

    fn filter(&mut self, node: &str) -> Status {
        let pod = match self.before("filter") {
            Ok(p) => p,
            Err(s) => return s,
        };
        if let Some(names) = &self.cycle.node_names
            && !names.contains(node)
        {
            return Status::unresolvable(format!(
                "node {node} is not among the node names PreFilter returned"
            ));
        }
        if self.cycle.skip_filter || !self.host.mask().filter {
            self.passed_filter(node);
            return Status::success();
        }
        match self.host.filter(&pod, node) {
            Ok(status) => {
                self.after(&status);
                if status.is_success() {
                    self.passed_filter(node);
                }
                to_status(&status)
            }
            Err(e) => host_error(e),
        }
    }

    fn postfilter(&mut self, _pod: &str, nodes: &[String]) -> (Status, Option<String>) {
        let pod = match self.current("postfilter") {
            Ok(p) => p,
            Err(s) => return (s, None),
        };
        if !self.host.mask().filter {
            return (Status::unschedulable("the plugin has no PostFilter"), None);
        }
        // kube-scheduler hands PostFilter the nodes' Filter codes; the guest reads its own cycle.
        let statuses = nodes.iter().map(|n| (n.clone(), code::UNSCHEDULABLE)).collect();
        match self.host.postfilter(&pod, &statuses) {
            Ok((result, status)) => {
                self.after(&status);
                let deallocated = result.and_then(|r| r.deallocated.into_iter().next());
                (to_status(&status), deallocated)
            }
            Err(e) => (host_error(e), None),
        }
    }

    fn score(&mut self, node: &str) -> Result<u32, Status> {
        let pod = self.before("score")?;
        let mask = self.host.mask();
        let score = if !mask.score {
            0
        } else if self.batch_scoring() {
            if self.cycle.scores.is_none() {
                let mut by_node = std::collections::HashMap::default();
                for (n, score) in self.batch_scores(&pod)? {
                    by_node.entry(n).or_insert(score);
                }
                self.cycle.scores = Some(by_node);
            }
            match self.cycle.scores.as_ref().and_then(|s| s.get(node)) {
                Some(score) => *score,
                None => {
                    return Err(Status::error(format!(
                        "score for node {node}, which did not pass Filter in this cycle"
                    )));
                }
            }
        } else {
            let (score, status) = self.host.score(&pod, node).map_err(host_error)?;
            self.after(&status);
            if !status.is_success() {
                return Err(to_status(&status));
            }
            score
        };
        u32::try_from(score)
            .ok()
            .filter(|s| *s <= 100)
            .ok_or_else(|| Status::error(format!("score {score} for node {node} is outside [0, 100]")))
    }

    fn reserve(&mut self, node: &str) -> Result<Vec<ClaimAllocation>, Status> {
        let pod = self.before("reserve")?;
        if !self.host.mask().reserve {
            return Ok(Vec::new());
        }
        let (status, pending) = self.host.reserve(&pod, node).map_err(host_error)?;
        self.after(&status);
        if !status.is_success() {
            return Err(to_status(&status));
        }
        Ok(allocations(pending))
    }

    fn unreserve(&mut self, _pod: &str, node: &str) -> Result<(), Status> {
        let pod = self.before("unreserve")?;
        if !self.host.mask().reserve {
            return Ok(());
        }
        // A failed Unreserve is only logged upstream; the host keeps the log record.
        match self.host.unreserve(&pod, node) {
            Ok(None) => Ok(()),
            Ok(Some(logged)) => {
                self.restore = self.policy == TrapPolicy::Replace;
                self.traps += 1;
                Err(Status::error(logged.to_string()))
            }
            Err(e) => Err(host_error(e)),
        }
    }

    fn bind(&mut self, _pod: &str, node: &str) -> Result<Vec<ClaimAllocation>, Status> {
        let pod = self.before("bind")?;
        self.permit_pod(&pod, node)?;
        self.bind_pod(&pod, node)
    }

    fn permit(&mut self, node: &str) -> Result<(), Status> {
        let pod = self.before("permit")?;
        self.permit_pod(&pod, node)?;
        self.permitted.insert(super::store::pod_key(&pod.pod), pod);
        Ok(())
    }

    fn binding_cycle(&mut self, pod: &str, node: &str) -> Result<Vec<ClaimAllocation>, Status> {
        let Some(prepared) = self.permitted.remove(pod) else {
            return Err(Status::error(format!(
                "pod {pod}: binding cycle without a successful permit"
            )));
        };
        let result = self.bind_pod(&prepared, node);
        if result.is_err() && self.host.mask().reserve {
            // The framework's Unreserve, on the scheduling instance as upstream.
            if let Ok(Some(_)) = self.host.unreserve(&prepared, node) {
                self.traps += 1;
            }
        }
        result
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kswe::context::LogRecord;

    fn assert_send<T: Send>() {}

    #[test]
    fn engine_is_send_and_codes_map_as_documented() {
        assert_send::<KsweEngine>();
        for (code, expected, msg) in [
            (0, Code::Success, "success"),
            (1, Code::Error, "error"),
            (2, Code::Unschedulable, "unschedulable"),
            (3, Code::UnschedulableAndUnresolvable, "unresolvable"),
            (5, Code::Error, "skip has no core meaning"),
            (i32::MIN, Code::Error, "garbage"),
        ] {
            assert_eq!(to_status(&KsweStatus::new(code, "r")).code, expected, "{msg}");
        }
        assert_eq!(
            to_status(&KsweStatus::new(5, "r")).reason,
            "unexpected status code 5: r"
        );
    }

    #[test]
    fn log_records_print_as_one_line() {
        let record = |severity, kvs: &[&str]| LogRecord {
            severity,
            message: "object rejected".into(),
            kvs: kvs.iter().map(|s| s.to_string()).collect(),
        };
        for (record, expected) in [
            (
                record(2, &["object", "ns/c", "error", "bad"]),
                "error: object rejected object=ns/c error=bad",
            ),
            (record(0, &[]), "info: object rejected"),
            (record(1, &["dangling"]), "warning: object rejected dangling"),
        ] {
            assert_eq!(record.to_string(), expected);
        }
    }
}
