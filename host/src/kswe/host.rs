//! [`KsweHost`]: one KSWE wasm plugin, loaded with upstream's checks and driven hook by hook with
//! upstream's instance pool (`pool.go`) and per-method behaviour (`plugin.go`).

use std::collections::{BTreeMap, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard};

use prost::Message;
use sharing_affinity_core::model::Pod;
use sharing_affinity_kswe_proto as proto;
use wasmtime::{Config, Engine, Linker, Module};

use super::abi::{Export, KsweStatus, code, unpack};
use super::context::{
    CallStack, Cluster, ClusterEvent, DraWrite, LogRecord, RecordedEvent, Settings, Shared,
};
use super::guest::{Factory, Guest, Raw};
use super::load::{self, Mask, bits};
use super::trap::{DebugInfo, HostPanic, ProcExit, decorate};
use super::{dra, imports, table, wasi};
use crate::limits::Limits;

/// What to do with an instance whose call trapped.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum TrapPolicy {
    /// Keep using it, as upstream does (`kswe-abi.md` §2.5).
    #[default]
    Reuse,
    /// Drop it; the next call gets a fresh instance (which runs `_start` again).
    Replace,
}

/// Plugin configuration: upstream `PluginConfig` plus emulator switches.
#[derive(Clone, Debug)]
pub struct KsweConfig {
    /// `guestConfig`, returned verbatim by `get_config`.
    pub guest_config: String,
    /// `logSeverity` (0 info, 1 warning, 2 error, 3 fatal).
    pub log_severity: i32,
    /// WASI argv, without an implicit argv\[0\] (upstream `Args`).
    pub args: Vec<String>,
    /// Provide the `sharing-affinity.dra/v1` module. When false, a guest importing it fails to
    /// instantiate exactly as under the upstream host.
    pub dra_extension: bool,
    /// What happens to a trapped instance.
    pub trap_policy: TrapPolicy,
    /// Resource limits of each instance (time per call, memory, status reason; not in upstream,
    /// whose guests run without any). `max_wasm_stack` must be the one the [`KsweModule`] was
    /// compiled with.
    pub limits: Limits,
}

impl Default for KsweConfig {
    fn default() -> Self {
        KsweConfig {
            guest_config: String::new(),
            log_severity: 0,
            args: Vec::new(),
            dra_extension: true,
            trap_policy: TrapPolicy::Reuse,
            limits: Limits::default(),
        }
    }
}

/// A pod ready to hand to the guest: the model and its protobuf bytes (encoded once).
#[derive(Clone, Debug)]
pub struct PreparedPod {
    /// The pod.
    pub pod: Arc<Pod>,
    /// `k8s.io.api.core.v1.Pod` bytes.
    pub bytes: Arc<Vec<u8>>,
}

impl PreparedPod {
    /// Encodes a pod; fails on fields without a protobuf form (invalid timestamps).
    pub fn new(pod: &Pod) -> wasmtime::Result<PreparedPod> {
        let bytes = proto::pod_to_proto(pod)
            .map_err(wasmtime::Error::msg)?
            .encode_to_vec();
        Ok(PreparedPod {
            pod: Arc::new(pod.clone()),
            bytes: Arc::new(bytes),
        })
    }

    fn uid(&self) -> &str {
        &self.pod.metadata.uid
    }
}

/// Events from `EventsToRegister`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RegisteredEvents {
    /// Upstream's defaults (Pod, Node, CSINode, PersistentVolume, PersistentVolumeClaim and
    /// StorageClass, each with `framework.All`): the guest has no `enqueue` or returned no event.
    Default,
    /// The events the guest returned.
    Guest(Vec<ClusterEvent>),
}

impl std::fmt::Display for RegisteredEvents {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RegisteredEvents::Default => write!(
                f,
                "upstream's defaults (no enqueue export, or no event returned): Pod, Node, CSINode, \
                 PersistentVolume, PersistentVolumeClaim, StorageClass, each with all actions"
            ),
            RegisteredEvents::Guest(events) => {
                let list: Vec<String> = events
                    .iter()
                    .map(|e| format!("{} (actions {:#x})", e.resource, e.action_type))
                    .collect();
                write!(f, "{}", list.join(", "))
            }
        }
    }
}

/// PostFilter's result: always present when the guest was called (upstream returns non-nil).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PostFilterResult {
    /// `result.nominated_node_name`.
    pub nominated_node_name: String,
    /// High 32 bits of the export's value (0 Noop, 1 Override; passed through).
    pub nominating_mode: i32,
    /// Claims (`namespace/name`) the guest deallocated during the call
    /// (`sharing-affinity.dra/v1.deallocation`).
    pub deallocated: Vec<String>,
}

#[derive(Default)]
struct Pool {
    scheduled: Option<Guest>,
    scheduled_pod_uid: String,
    binding: BTreeMap<String, Guest>,
    free: VecDeque<Guest>,
}

enum Slot<'a> {
    /// `doWithGuest` (enqueue).
    Any,
    /// `doWithSchedulingGuest`.
    Scheduling(&'a str),
    /// `getForBinding`.
    Binding(&'a str),
}

/// The status a guest returned: its code and `result.status_reason`; `Error` when the reason lay
/// outside the guest's memory (a garbage pointer), whatever the code.
fn guest_status(code: i32, stack: &CallStack) -> KsweStatus {
    let code = if stack.result_status_reason_unreadable {
        code::ERROR
    } else {
        code
    };
    KsweStatus::new(code, stack.result_status_reason.clone())
}

fn nil_function() -> wasmtime::Error {
    wasmtime::Error::msg("runtime error: invalid memory address or nil pointer dereference")
}

/// One loaded plugin. See the module docs.
pub struct KsweHost {
    factory: Factory,
    pool: Pool,
    mask: Mask,
    policy: TrapPolicy,
    /// Upstream closes the whole runtime when creating an instance fails after start-up.
    runtime_closed: bool,
}

/// A compiled guest that passed the module-level checks (compile, `memory`, export signatures):
/// compile once, then create any number of plugins from it with [`KsweModule::host`].
#[derive(Clone)]
pub struct KsweModule {
    engine: Engine,
    module: Module,
    interfaces: u32,
    info: Arc<DebugInfo>,
    max_wasm_stack: usize,
}

impl KsweModule {
    /// Compiles a guest and checks `memory` and the export signatures, with upstream's error texts.
    /// The default wasm stack limit applies.
    pub fn new(wasm: &[u8]) -> wasmtime::Result<KsweModule> {
        Self::with_limits(wasm, &Limits::default())
    }

    /// As [`KsweModule::new`], compiled for `limits` (epoch interruption on, `max_wasm_stack`).
    pub fn with_limits(wasm: &[u8], limits: &Limits) -> wasmtime::Result<KsweModule> {
        let mut wasm_config = Config::new();
        limits.configure(&mut wasm_config);
        // wazero's default RuntimeConfig: WebAssembly Core 2.0, nothing newer.
        wasm_config
            .wasm_tail_call(false)
            .wasm_multi_memory(false)
            .wasm_memory64(false)
            .wasm_relaxed_simd(false)
            .wasm_extended_const(false)
            .wasm_component_model(false);
        let engine = Engine::new(&wasm_config)?;
        crate::limits::start_ticker(&engine);
        let module = load::compile(&engine, wasm).map_err(wasmtime::Error::msg)?;
        let interfaces = load::detect_interfaces(&module).map_err(wasmtime::Error::msg)?;
        Ok(KsweModule {
            engine,
            module,
            interfaces,
            info: Arc::new(DebugInfo::parse(wasm)),
            max_wasm_stack: limits.max_wasm_stack,
        })
    }

    /// Creates a plugin: links the host modules the guest imports, creates the first instance
    /// (import resolution, `_start`) and checks the export combination.
    pub fn host(&self, config: KsweConfig) -> wasmtime::Result<KsweHost> {
        self.host_with_cluster(config, Cluster::default())
    }

    /// As [`KsweModule::host`], with initial cluster state.
    pub fn host_with_cluster(&self, config: KsweConfig, cluster: Cluster) -> wasmtime::Result<KsweHost> {
        config.limits.check_stack(self.max_wasm_stack)?;
        let shared = Arc::new(Shared {
            settings: Settings {
                guest_config: config.guest_config,
                log_severity: config.log_severity,
                args: config.args,
                dra_extension: config.dra_extension,
                limits: config.limits,
            },
            cluster: Mutex::new(cluster),
        });
        let pool_error = |e: String| wasmtime::Error::msg(format!("failed to create a guest pool: {e}"));
        let imported = table::resolve_imports(&self.module, config.dra_extension)
            .map_err(|e| pool_error(decorate(b"", "instantiate", &e)))?;
        let mut linker = Linker::new(&self.engine);
        imports::add_api(&mut linker)?;
        imports::add_scheduler(&mut linker)?;
        imports::add_klog(&mut linker)?;
        if imported.wasi {
            wasi::add_wasi(&mut linker)?;
        }
        if imported.dra {
            dra::add_dra(&mut linker)?;
        }
        let mut factory = Factory {
            engine: self.engine.clone(),
            module: self.module.clone(),
            linker,
            info: self.info.clone(),
            shared,
            counter: 0,
            limits: config.limits,
        };
        let (first, _) = factory.new_guest(None);
        let first = first.map_err(|e| {
            // A guest that refuses its configuration logs why before it traps: the reason, not
            // only the trap, is what its operator needs.
            let cluster = factory.shared.cluster();
            let logged: Vec<String> = cluster
                .logs
                .iter()
                .filter(|r| r.severity >= 2)
                .map(ToString::to_string)
                .collect();
            if logged.is_empty() {
                pool_error(e)
            } else {
                pool_error(format!(
                    "the guest logged \"{}\" and then failed: {e}",
                    logged.join("; ")
                ))
            }
        })?;
        let mask = load::mask(self.interfaces).map_err(wasmtime::Error::msg)?;
        let pool = Pool {
            free: VecDeque::from([first]),
            ..Pool::default()
        };
        Ok(KsweHost {
            factory,
            pool,
            mask,
            policy: config.trap_policy,
            runtime_closed: false,
        })
    }
}

impl KsweHost {
    /// Loads a guest: compile, `memory`, export signatures, first instance (imports, `_start`),
    /// supported combination; each failure with upstream's error text.
    pub fn new(wasm: &[u8], config: KsweConfig) -> wasmtime::Result<KsweHost> {
        KsweModule::new(wasm)?.host(config)
    }

    /// The framework interfaces the plugin implements.
    pub fn mask(&self) -> Mask {
        self.mask
    }

    /// Locks the cluster state (objects, waiting pods, logs, events).
    pub fn cluster(&self) -> MutexGuard<'_, Cluster> {
        self.factory.shared.cluster()
    }

    /// Fault injection for tests: the next call of the `k8s.io/scheduler` getter `import`
    /// (`currentPod`, `currentNodeName`, ...) traps once, as when the Go host panics in a host
    /// function. The trap policy then decides what happens to the instance.
    pub fn inject_trap(&self, import: &str) {
        self.cluster().trap_next = Some(import.to_string());
    }

    /// The limits of the instances and calls.
    pub fn limits(&self) -> Limits {
        self.factory.limits
    }

    /// Changes the time limit of later calls, `_start` of new instances included (tests use
    /// `Duration::ZERO` to force a trap).
    pub fn set_time_per_call(&mut self, time: std::time::Duration) {
        self.factory.limits.time_per_call = time;
    }

    /// Takes the klog records collected so far; when some were dropped (more than
    /// [`super::context::MAX_PENDING_RECORDS`] waiting), a last error record says how many.
    pub fn take_logs(&self) -> Vec<LogRecord> {
        let mut cluster = self.cluster();
        let mut logs = std::mem::take(&mut cluster.logs);
        let dropped = std::mem::take(&mut cluster.logs_dropped);
        if dropped > 0 {
            logs.push(LogRecord {
                severity: 2,
                message: format!(
                    "{dropped} more log records dropped: the host keeps {} until they are taken",
                    super::context::MAX_PENDING_RECORDS
                ),
                kvs: Vec::new(),
            });
        }
        logs
    }

    /// Takes the events recorded so far (at most [`super::context::MAX_PENDING_RECORDS`]; see
    /// [`KsweHost::events_dropped`]).
    pub fn take_events(&self) -> Vec<RecordedEvent> {
        std::mem::take(&mut self.cluster().events)
    }

    /// How many recorded events were dropped since the last call (the limit was reached).
    pub fn events_dropped(&self) -> u64 {
        std::mem::take(&mut self.cluster().events_dropped)
    }

    /// Number of instances created so far (each ran `_start` once).
    pub fn instances_created(&self) -> u64 {
        self.factory.counter
    }

    /// (scheduled, binding, free) instance counts.
    pub fn pool_sizes(&self) -> (usize, usize, usize) {
        (
            usize::from(self.pool.scheduled.is_some()),
            self.pool.binding.len(),
            self.pool.free.len(),
        )
    }

    /// The UID of the pod the scheduled instance is associated with.
    pub fn scheduled_pod_uid(&self) -> &str {
        &self.pool.scheduled_pod_uid
    }

    /// Sets an exported mutable `i32` global on every live instance (upstream tests' `SetGlobals`).
    pub fn set_global(&mut self, name: &str, value: i32) -> bool {
        let pool = &mut self.pool;
        let mut found = false;
        for g in pool
            .scheduled
            .iter_mut()
            .chain(pool.binding.values_mut())
            .chain(pool.free.iter_mut())
        {
            found |= g.set_global(name, value);
        }
        found
    }

    /// Upstream `CreateGuestInBindingGuestPool`: puts a fresh instance in the binding pool for `uid`.
    pub fn create_binding_guest(&mut self, uid: &str) -> wasmtime::Result<()> {
        let (guest, _) = self.factory.new_guest(None);
        self.pool
            .binding
            .insert(uid.to_string(), guest.map_err(wasmtime::Error::msg)?);
        Ok(())
    }

    /// The largest linear memory of the live guest instances, in bytes.
    pub fn guest_memory_bytes(&mut self) -> u64 {
        let pool = &mut self.pool;
        pool.scheduled
            .iter_mut()
            .chain(pool.binding.values_mut())
            .chain(pool.free.iter_mut())
            .map(|g| g.memory_bytes() as u64)
            .max()
            .unwrap_or(0)
    }

    fn require(&self, implemented: bool, what: &str) -> wasmtime::Result<()> {
        if implemented {
            Ok(())
        } else {
            Err(wasmtime::Error::msg(format!(
                "the plugin does not implement {what}"
            )))
        }
    }

    fn new_guest(&mut self, stack: CallStack) -> Result<(Guest, CallStack), String> {
        let (guest, stack) = self.factory.new_guest(Some(stack));
        match guest {
            Ok(g) => Ok((g, stack.unwrap_or_default())),
            Err(e) => {
                self.runtime_closed = true;
                Err(e)
            }
        }
    }

    /// Acquires the instance for a slot, calls `export`, and puts the instance back (unless the
    /// trap policy drops it). `Err` is a Go host panic.
    fn run(
        &mut self,
        export: Export,
        slot: Slot<'_>,
        stack: CallStack,
    ) -> wasmtime::Result<(Raw, CallStack)> {
        if self.runtime_closed {
            return Ok((
                Raw::Failed(decorate(b"", export.name(), &ProcExit(0).to_string())),
                stack,
            ));
        }
        let (mut guest, stack) = match slot {
            Slot::Any => {
                self.pool.scheduled_pod_uid.clear();
                match self.pool.scheduled.take().or_else(|| self.pool.free.pop_front()) {
                    Some(g) => (g, stack),
                    None => self.new_guest(stack).map_err(wasmtime::Error::msg)?,
                }
            }
            Slot::Scheduling(uid) => {
                self.pool.scheduled_pod_uid = uid.to_string();
                match self.pool.scheduled.take().or_else(|| self.pool.free.pop_front()) {
                    Some(g) => (g, stack),
                    None => match self.new_guest(stack.clone()) {
                        Ok(x) => x,
                        Err(e) => return Ok((Raw::Failed(e), stack)),
                    },
                }
            }
            Slot::Binding(uid) => match self.pool.binding.remove(uid) {
                Some(g) => (g, stack),
                None => match self.pool.scheduled.take() {
                    Some(g) => {
                        self.pool.scheduled_pod_uid.clear();
                        (g, stack)
                    }
                    None => return Err(wasmtime::Error::msg("unexpected podUID")),
                },
            },
        };
        if !guest.has(export) {
            self.put_back(guest, &slot);
            return Err(nil_function());
        }
        let (raw, stack) = guest.call(export, stack, &self.factory.info, &self.factory.limits);
        if !(matches!(raw, Raw::Failed(_)) && self.policy == TrapPolicy::Replace) {
            self.put_back(guest, &slot);
        }
        Ok((raw, stack))
    }

    fn put_back(&mut self, guest: Guest, slot: &Slot<'_>) {
        match slot {
            Slot::Any => self.pool.free.push_back(guest),
            Slot::Scheduling(_) => self.pool.scheduled = Some(guest),
            Slot::Binding(uid) => {
                self.pool.binding.insert(uid.to_string(), guest);
            }
        }
    }

    /// `freeFromBinding`.
    fn free_from_binding(&mut self, uid: &str) {
        if let Some(g) = self.pool.binding.remove(uid) {
            self.pool.free.push_back(g);
        }
    }

    fn status(raw: Raw, stack: &CallStack) -> (KsweStatus, Option<i64>) {
        match raw {
            Raw::Value(v) => (guest_status(v.map_or(0, |v| v as i32), stack), v),
            Raw::Failed(message) => (KsweStatus::from_failure(message), None),
        }
    }

    fn pod_stack(pod: &PreparedPod, node: &str) -> CallStack {
        CallStack {
            current_pod: Some(pod.bytes.clone()),
            current_pod_object: Some(pod.pod.clone()),
            current_node_name: node.to_string(),
            ..CallStack::default()
        }
    }

    /// `EventsToRegister`. A trap in `enqueue` panics the Go host: `Err`.
    pub fn events_to_register(&mut self) -> wasmtime::Result<RegisteredEvents> {
        if !self.mask.has(bits::ENQUEUE) {
            return Ok(RegisteredEvents::Default);
        }
        let (raw, stack) = self.run(Export::Enqueue, Slot::Any, CallStack::default())?;
        if let Raw::Failed(message) = raw {
            return Err(wasmtime::Error::new(HostPanic {
                message,
                frame: String::new(),
            }));
        }
        Ok(if stack.result_cluster_events.is_empty() {
            RegisteredEvents::Default
        } else {
            RegisteredEvents::Guest(stack.result_cluster_events)
        })
    }

    /// PreFilter: `(node names, status)`; `None` names = all nodes. Unexported = success.
    pub fn prefilter(&mut self, pod: &PreparedPod) -> wasmtime::Result<(Option<Vec<String>>, KsweStatus)> {
        if !self.mask.has(bits::PRE_FILTER) {
            return Ok((None, KsweStatus::success()));
        }
        let (raw, stack) = self.run(
            Export::PreFilter,
            Slot::Scheduling(pod.uid()),
            Self::pod_stack(pod, ""),
        )?;
        let failed = matches!(raw, Raw::Failed(_));
        let (status, _) = Self::status(raw, &stack);
        Ok((if failed { None } else { stack.result_node_names }, status))
    }

    /// Filter for one node (by name, as upstream).
    pub fn filter(&mut self, pod: &PreparedPod, node: &str) -> wasmtime::Result<KsweStatus> {
        self.require(self.mask.filter, "Filter")?;
        let (raw, stack) = self.run(
            Export::Filter,
            Slot::Scheduling(pod.uid()),
            Self::pod_stack(pod, node),
        )?;
        Ok(Self::status(raw, &stack).0)
    }

    /// PostFilter with the node → status code map. Unexported = `(None, success)`.
    pub fn postfilter(
        &mut self,
        pod: &PreparedPod,
        node_to_status: &BTreeMap<String, i32>,
    ) -> wasmtime::Result<(Option<PostFilterResult>, KsweStatus)> {
        self.require(self.mask.filter, "PostFilter")?;
        if !self.mask.has(bits::POST_FILTER) {
            return Ok((None, KsweStatus::success()));
        }
        let mut stack = Self::pod_stack(pod, "");
        stack.node_to_status = Some(node_to_status.clone());
        let (raw, stack) = self.run(Export::PostFilter, Slot::Scheduling(pod.uid()), stack)?;
        match raw {
            Raw::Value(v) => {
                let (mode, code) = unpack(v.unwrap_or(0));
                let result = PostFilterResult {
                    nominated_node_name: stack.result_nominated_node_name.clone(),
                    nominating_mode: mode,
                    deallocated: stack.deallocations.clone(),
                };
                Ok((Some(result), guest_status(code, &stack)))
            }
            Raw::Failed(message) => Ok((None, KsweStatus::from_failure(message))),
        }
    }

    /// AddPod (`add = true`) or RemovePod. Unexported = success.
    pub fn add_or_remove_pod(
        &mut self,
        add: bool,
        pod: &PreparedPod,
        target: &PreparedPod,
        node: &str,
    ) -> wasmtime::Result<KsweStatus> {
        self.require(self.mask.filter, "PreFilterExtensions")?;
        if !self.mask.has(bits::PRE_FILTER_EXTENSIONS) {
            return Ok(KsweStatus::success());
        }
        let mut stack = Self::pod_stack(pod, node);
        stack.target_pod = Some(target.bytes.clone());
        let export = if add { Export::AddPod } else { Export::RemovePod };
        let (raw, stack) = self.run(export, Slot::Scheduling(pod.uid()), stack)?;
        Ok(Self::status(raw, &stack).0)
    }

    /// PreScore with the names of the feasible nodes. Unexported = success.
    pub fn prescore(&mut self, pod: &PreparedPod, nodes: &[String]) -> wasmtime::Result<KsweStatus> {
        self.require(self.mask.score, "PreScore")?;
        if !self.mask.has(bits::PRE_SCORE) {
            return Ok(KsweStatus::success());
        }
        let mut stack = Self::pod_stack(pod, "");
        stack.filtered_nodes = Some(nodes.to_vec());
        let (raw, stack) = self.run(Export::PreScore, Slot::Scheduling(pod.uid()), stack)?;
        Ok(Self::status(raw, &stack).0)
    }

    /// Score for one node: `(score, status)`, score 0 when the call failed.
    pub fn score(&mut self, pod: &PreparedPod, node: &str) -> wasmtime::Result<(i64, KsweStatus)> {
        self.require(self.mask.score, "Score")?;
        let (raw, stack) = self.run(
            Export::Score,
            Slot::Scheduling(pod.uid()),
            Self::pod_stack(pod, node),
        )?;
        match raw {
            Raw::Value(v) => {
                let (score, code) = unpack(v.unwrap_or(0));
                Ok((i64::from(score), guest_status(code, &stack)))
            }
            Raw::Failed(message) => Ok((0, KsweStatus::from_failure(message))),
        }
    }

    /// NormalizeScore over `(node, score)` pairs, modified in place as upstream does: the guest's
    /// map is rebuilt in name order and copied over the input **by index** (upstream bug, see
    /// `docs/kswe-dra-extension.md`). A count mismatch, including after a trap, panics the Go
    /// host: `Err`. Unexported = success, list unchanged.
    pub fn normalize_score(
        &mut self,
        pod: &PreparedPod,
        scores: &mut [(String, i64)],
    ) -> wasmtime::Result<KsweStatus> {
        self.require(self.mask.score, "ScoreExtensions")?;
        if !self.mask.has(bits::SCORE_EXTENSIONS) {
            return Ok(KsweStatus::success());
        }
        let mut stack = Self::pod_stack(pod, "");
        stack.node_scores = Some(scores.to_vec());
        let (raw, stack) = self.run(Export::NormalizeScore, Slot::Scheduling(pod.uid()), stack)?;
        let (updated, status) = match raw {
            Raw::Value(v) => {
                let updated = match stack.result_normalized_scores.clone() {
                    Some(list) if !list.is_empty() => list,
                    _ => scores.to_vec(),
                };
                (updated, guest_status(v.unwrap_or(0) as i32, &stack))
            }
            Raw::Failed(message) => (Vec::new(), KsweStatus::from_failure(message)),
        };
        if updated.len() != scores.len() {
            return Err(wasmtime::Error::msg(format!(
                "size mismatch: scores has {} elements, but updatedScores has {} elements",
                scores.len(),
                updated.len()
            )));
        }
        scores.clone_from_slice(&updated);
        Ok(status)
    }

    /// Reserve: the status and the pending allocations the guest signalled.
    pub fn reserve(
        &mut self,
        pod: &PreparedPod,
        node: &str,
    ) -> wasmtime::Result<(KsweStatus, Vec<DraWrite>)> {
        self.require(self.mask.reserve, "Reserve")?;
        let (raw, stack) = self.run(
            Export::Reserve,
            Slot::Scheduling(pod.uid()),
            Self::pod_stack(pod, node),
        )?;
        let status = Self::status(raw, &stack).0;
        Ok((status, stack.pending_allocations))
    }

    /// Unreserve: runs on the scheduling instance and frees the pod's binding instance; drops the
    /// pod's pending allocations and removes the pod from its claims' `status.reservedFor`. A
    /// trap is only logged (returned here as `Some(message)`).
    pub fn unreserve(&mut self, pod: &PreparedPod, node: &str) -> wasmtime::Result<Option<String>> {
        self.require(self.mask.reserve, "Unreserve")?;
        {
            let mut cluster = self.cluster();
            cluster.store.clear_pending_for_pod(pod.uid());
            cluster.store.unreserve_pod(pod.uid());
        }
        let result = self.run(
            Export::Unreserve,
            Slot::Scheduling(pod.uid()),
            Self::pod_stack(pod, node),
        );
        self.free_from_binding(pod.uid());
        Ok(self.logged("failed unreserve", result?.0))
    }

    fn logged(&self, what: &str, raw: Raw) -> Option<String> {
        let Raw::Failed(message) = raw else { return None };
        self.cluster().push_log(LogRecord {
            severity: 2,
            message: what.into(),
            kvs: vec!["err".into(), message.clone()],
        });
        Some(message)
    }

    /// Permit: `(status, timeout in ms)`; moves the scheduling instance to the binding pool. A
    /// `Wait` result makes the pod a waiting pod.
    pub fn permit(&mut self, pod: &PreparedPod, node: &str) -> wasmtime::Result<(KsweStatus, u32)> {
        self.require(self.mask.permit, "Permit")?;
        let (raw, stack) = self.run(
            Export::Permit,
            Slot::Scheduling(pod.uid()),
            Self::pod_stack(pod, node),
        )?;
        let (status, timeout) = match raw {
            Raw::Value(v) => {
                let (code, timeout) = unpack(v.unwrap_or(0));
                (guest_status(code, &stack), timeout as u32)
            }
            Raw::Failed(message) => (KsweStatus::from_failure(message), 0),
        };
        // `getForBinding` at the end of Permit.
        if !self.pool.binding.contains_key(pod.uid()) {
            match self.pool.scheduled.take() {
                Some(g) => {
                    self.pool.scheduled_pod_uid.clear();
                    self.pool.binding.insert(pod.uid().to_string(), g);
                }
                None if self.policy == TrapPolicy::Replace => {}
                None => return Err(wasmtime::Error::msg("unexpected podUID")),
            }
        }
        if status.code == code::WAIT {
            self.cluster()
                .waiting
                .insert(pod.uid().to_string(), (*pod.pod).clone());
        }
        Ok((status, timeout))
    }

    /// PreBind: the status and the allocations the guest wrote. Unexported = success.
    pub fn prebind(
        &mut self,
        pod: &PreparedPod,
        node: &str,
    ) -> wasmtime::Result<(KsweStatus, Vec<DraWrite>)> {
        self.require(self.mask.bind, "PreBind")?;
        if !self.mask.has(bits::PRE_BIND) {
            return Ok((KsweStatus::success(), Vec::new()));
        }
        let (raw, stack) = self.run(
            Export::PreBind,
            Slot::Binding(pod.uid()),
            Self::pod_stack(pod, node),
        )?;
        let status = Self::status(raw, &stack).0;
        Ok((status, stack.allocations))
    }

    /// Bind.
    pub fn bind(&mut self, pod: &PreparedPod, node: &str) -> wasmtime::Result<KsweStatus> {
        self.require(self.mask.bind, "Bind")?;
        let (raw, stack) = self.run(Export::Bind, Slot::Binding(pod.uid()), Self::pod_stack(pod, node))?;
        Ok(Self::status(raw, &stack).0)
    }

    /// PostBind: frees the binding instance. When the guest does not export `postbind`, upstream
    /// returns before freeing, so the binding instance leaks (kept here too). A trap is logged.
    pub fn postbind(&mut self, pod: &PreparedPod, node: &str) -> wasmtime::Result<Option<String>> {
        self.require(self.mask.bind, "PostBind")?;
        if !self.mask.has(bits::POST_BIND) {
            return Ok(None);
        }
        let result = self.run(
            Export::PostBind,
            Slot::Binding(pod.uid()),
            Self::pod_stack(pod, node),
        );
        self.free_from_binding(pod.uid());
        Ok(self.logged("failed postbind", result?.0))
    }
}
