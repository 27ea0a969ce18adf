//! What host functions see: the per-call "stack" of inputs and results (upstream `host.go`
//! `stack`), the per-instance store data, and the state shared by all instances of one plugin.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use sharing_affinity_core::model::Pod;

use super::store::ObjectStore;
use crate::limits::{Limits, MemoryLimiter};

/// One framework cluster event returned by `enqueue` through `result.cluster_events`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClusterEvent {
    /// The resource, mapped from the GVK index as upstream does (`Pod`, `Node`, ..., `*`,
    /// `EventResource(N)` for unknown indexes).
    pub resource: String,
    /// The raw ActionType bits.
    pub action_type: u32,
}

/// A `k8s.io/klog` record that passed the severity filter.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LogRecord {
    /// 0 info (`klog.Info`/`InfoS`) or 2 error (`klog.Error`/`ErrorS`).
    pub severity: i32,
    /// The message.
    pub message: String,
    /// Key/value strings from `logs` (NUL-separated on the wire, empty entries skipped); empty for `log`.
    pub kvs: Vec<String>,
}

/// The record as a line: `error: message key=value ...` (`info` for severity 0).
impl std::fmt::Display for LogRecord {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let severity = match self.severity {
            0 => "info",
            1 => "warning",
            2 => "error",
            _ => "fatal",
        };
        write!(f, "{severity}: {}", self.message)?;
        for pair in self.kvs.chunks(2) {
            match pair {
                [key, value] => write!(f, " {key}={value}")?,
                [key] => write!(f, " {key}")?,
                _ => {}
            }
        }
        Ok(())
    }
}

/// An `ObjectReference` of an `eventf` call.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct EventReference {
    /// Kind.
    pub kind: String,
    /// API version.
    pub api_version: String,
    /// Name.
    pub name: String,
    /// Namespace.
    pub namespace: String,
    /// UID.
    pub uid: String,
    /// Resource version.
    pub resource_version: String,
}

/// A `handle.eventrecorder.eventf` call.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RecordedEvent {
    /// The regarding object.
    pub regarding: EventReference,
    /// The related object.
    pub related: EventReference,
    /// `Normal` or `Warning`.
    pub event_type: String,
    /// Reason.
    pub reason: String,
    /// Action.
    pub action: String,
    /// Note.
    pub note: String,
}

/// Allocation records the DRA extension accepted during one call.
#[derive(Clone, Debug, PartialEq)]
pub struct DraWrite {
    /// `namespace/name` of the claim.
    pub claim: String,
    /// The allocation.
    pub allocation: sharing_affinity_core::model::AllocationResult,
}

/// Per-call inputs and results (§1.6). A fresh one is built for every framework callback.
#[derive(Clone, Debug, Default)]
pub struct CallStack {
    /// The pod being scheduled, as protobuf bytes (cached by the host per pod revision).
    pub current_pod: Option<Arc<Vec<u8>>>,
    /// The decoded pod, for the DRA extension's `reservedFor` and pending bookkeeping.
    pub current_pod_object: Option<Arc<Pod>>,
    /// `addpod`/`removepod` target, as protobuf bytes.
    pub target_pod: Option<Arc<Vec<u8>>>,
    /// The node being evaluated; empty when unset.
    pub current_node_name: String,
    /// `prescore` input; `None` encodes as `[]`.
    pub filtered_nodes: Option<Vec<String>>,
    /// `postfilter` input: node → status code; `None` encodes as `{}`.
    pub node_to_status: Option<BTreeMap<String, i32>>,
    /// `normalizescore` input: node → score; `None` encodes as `{}`.
    pub node_scores: Option<Vec<(String, i64)>>,
    /// `result.status_reason` (last call wins).
    pub result_status_reason: String,
    /// The last `result.status_reason` lay outside the guest's memory: the call's status is an
    /// `Error` whatever code the guest returns (upstream keeps the code; see docs/RELIABILITY.md).
    pub result_status_reason_unreadable: bool,
    /// `result.node_names`; `None` = all nodes.
    pub result_node_names: Option<Vec<String>>,
    /// `result.nominated_node_name`.
    pub result_nominated_node_name: String,
    /// `result.normalized_score_list`, in the host's rebuild order.
    pub result_normalized_scores: Option<Vec<(String, i64)>>,
    /// `result.cluster_events`.
    pub result_cluster_events: Vec<ClusterEvent>,
    /// `sharing-affinity.dra/v1.pending_allocation` calls accepted during this call.
    pub pending_allocations: Vec<DraWrite>,
    /// `sharing-affinity.dra/v1.allocation` calls accepted during this call.
    pub allocations: Vec<DraWrite>,
    /// Claims `sharing-affinity.dra/v1.deallocation` cleared during this call.
    pub deallocations: Vec<String>,
}

/// Settings fixed at plugin creation (upstream `PluginConfig` plus emulator switches).
#[derive(Clone, Debug, Default)]
pub struct Settings {
    /// `guestConfig`, returned verbatim by `get_config`.
    pub guest_config: String,
    /// `logSeverity`, returned by `klog.severity`.
    pub log_severity: i32,
    /// WASI argv (no implicit argv\[0\]).
    pub args: Vec<String>,
    /// Whether `sharing-affinity.dra/v1` is provided.
    pub dra_extension: bool,
    /// The guests' resource limits.
    pub limits: Limits,
}

/// Encoded bytes tagged with the store revision of the object they encode.
pub type RevisionBytes = (u64, Arc<Vec<u8>>);

/// Cluster-side state shared by every instance of one plugin.
#[derive(Debug, Default)]
pub struct Cluster {
    /// The objects.
    pub store: ObjectStore,
    /// Pods waiting at Permit, by UID.
    pub waiting: BTreeMap<String, Pod>,
    /// klog records that passed the filter, in order.
    pub logs: Vec<LogRecord>,
    /// Recorded events, in order.
    pub events: Vec<RecordedEvent>,
    /// Protobuf bytes of nodes by name: the revision they were encoded at, and the bytes.
    pub node_bytes: HashMap<String, RevisionBytes>,
    /// The last change feed built, by (cursor, store revision).
    pub feed_cache: Option<(String, u64, Arc<String>)>,
    /// klog records dropped since the last `take_logs` because [`MAX_PENDING_RECORDS`] were
    /// waiting.
    pub logs_dropped: u64,
    /// Recorded events dropped since the last `take_events`, likewise.
    pub events_dropped: u64,
    /// Fault injection for tests: the next call of this `k8s.io/scheduler` getter traps (once),
    /// as a Go host panic would. Set with `KsweHost::inject_trap`.
    pub trap_next: Option<String>,
    /// What `sharing-affinity.dra/v1.now` answers, in Unix seconds (the replay's clock).
    pub now: i64,
}

/// The most klog records (and, apart, recorded events) the host keeps until they are taken; a
/// guest logging in a loop cannot grow the host's memory past it.
pub const MAX_PENDING_RECORDS: usize = 10_000;

impl Cluster {
    /// Keeps a klog record, or counts it as dropped when [`MAX_PENDING_RECORDS`] are waiting.
    pub fn push_log(&mut self, record: LogRecord) {
        if self.logs.len() < MAX_PENDING_RECORDS {
            self.logs.push(record);
        } else {
            self.logs_dropped += 1;
        }
    }

    /// Keeps a recorded event, or counts it as dropped.
    pub fn push_event(&mut self, event: RecordedEvent) {
        if self.events.len() < MAX_PENDING_RECORDS {
            self.events.push(event);
        } else {
            self.events_dropped += 1;
        }
    }
}

/// State shared by all instances: settings and the cluster.
#[derive(Debug)]
pub struct Shared {
    /// Settings.
    pub settings: Settings,
    /// The cluster.
    pub cluster: Mutex<Cluster>,
}

impl Shared {
    /// Locks the cluster. Host functions never panic while holding the lock, so a poisoned lock
    /// can only come from a panic elsewhere in the embedding program; its data is still consistent
    /// (every mutation is a single assignment), so it is used as is.
    pub fn cluster(&self) -> MutexGuard<'_, Cluster> {
        self.cluster.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// WASI preview 1 state of one instance: wazero's deterministic defaults.
#[derive(Debug)]
pub struct WasiState {
    /// Next fake wall-clock reading in nanoseconds (starts at 2022-01-01T00:00:00Z, +1 ms per reading).
    pub walltime_ns: i64,
    /// Next fake monotonic reading in nanoseconds (starts at 0, +1 ms per reading).
    pub nanotime_ns: i64,
    /// Deterministic random state (SplitMix64 seeded with 42).
    pub random_state: u64,
}

impl Default for WasiState {
    fn default() -> Self {
        WasiState {
            walltime_ns: 1_640_995_200_000_000_000,
            nanotime_ns: 0,
            random_state: 42,
        }
    }
}

/// The most output (stdout and stderr) kept from one call, for its error message.
pub const MAX_CAPTURED_OUTPUT: usize = 64 << 10;

/// Store data of one guest instance.
#[derive(Debug)]
pub struct GuestData {
    /// Shared settings and cluster.
    pub shared: Arc<Shared>,
    /// The current call's stack; `None` outside a framework callback (e.g. in the first `_start`).
    pub stack: Option<CallStack>,
    /// Captured stdout and stderr, reset after every call; at most [`MAX_CAPTURED_OUTPUT`] bytes.
    pub out: Vec<u8>,
    /// Bytes written to stdout and stderr in this call beyond [`MAX_CAPTURED_OUTPUT`] (dropped).
    pub out_dropped: u64,
    /// The instance's memory limiter.
    pub limiter: MemoryLimiter,
    /// WASI clocks and random.
    pub wasi: WasiState,
    /// The instance name (`1`, `2`, ...), as wazero's module name.
    pub name: String,
    /// The instance's exported `memory`, kept once instantiated: host functions read and write
    /// it on every call (looking it up by name cost about 600 instructions per hook). Host
    /// functions called before then (a start section) look it up by name.
    pub memory: Option<wasmtime::Memory>,
}
