//! The adapter between the KSWE exports and the core plugin: decode what the host offers, call the
//! core, encode the answer. No domain logic lives here.
//!
//! The state is [`GuestState`], generic over a [`Backend`] so that its protocol handling (change
//! feed, resync, pod decoding, write-backs, error texts) is tested natively against a fake; the
//! exports use the core's [`Plugin`].
//!
//! Per cycle: `prefilter` pulls the change feed since the last cursor and applies every change,
//! decodes `currentPod` and applies it as an update, then calls the core's PreFilter. A resync (a
//! new host, or a write the host refused) rebuilds the core plugin from the snapshot.
//!
//! Concurrency (`docs/kswe-dra-extension.md` §4.1): kube-scheduler runs pod N's binding cycle
//! while pod N+1's scheduling cycle runs, and upstream's instance pool may hand either to any
//! instance. So an instance keeps one scheduling cycle (the pod of its last PreFilter) and any
//! number of in-flight reservations, by pod UID. Every hook reads `currentPod` and acts only on
//! that pod's cycle or reservation; a hook for a pod the instance has no cycle or reservation for
//! answers `Error` naming the pod.

use prost::Message;
use sharing_affinity_core::contract::Scheduler;
use sharing_affinity_core::json;
use sharing_affinity_core::model::AllocationResult;
use sharing_affinity_core::object::{Kind, json_string, object_key};
use sharing_affinity_core::{BindingPoll, ClaimAllocation, EventKind, Plugin, PostFilter};
use sharing_affinity_core::{Code, FxHashMap, Status};
use sharing_affinity_kswe_proto as proto;

use super::feed;
use super::imports;
use super::mem::ReadBuf;

/// The core as the adapter uses it (implemented by [`Plugin`]): the plugin contract's
/// scheduling-cycle calls ([`Scheduler`]), plus what the KSWE protocol needs around them.
pub trait Backend: Scheduler + Sized {
    /// A fresh plugin with the given configuration.
    fn create(config: &str) -> Result<Self, String>;
    /// Applies one object change (Kubernetes JSON).
    fn apply(&mut self, kind: EventKind, object_json: &str) -> Result<(), String>;
    /// PostFilter for `namespace/name` after no node fitted, with the claim to deallocate and the
    /// `metadata.resourceVersion` the host checks before it does ([`Scheduler::postfilter`] names
    /// the claim only).
    fn postfilter_answer(&mut self, pod: &str) -> PostFilter;
    /// Whether the informer state has `claim` with another `status.allocation` than `allocation`
    /// (or none); false when the claim is unknown.
    fn stored_differs(&self, claim: &str, allocation: &AllocationResult) -> bool;
    /// Warnings for the plugin log since the last call.
    fn take_warnings(&mut self) -> Vec<String> {
        Vec::new()
    }
    /// PreBind's write without the wait: records the reserved allocations of `pod` on `node`
    /// ([`Plugin::bind`]); the adapter then waits for the binding conditions itself, with the
    /// host's `wait` and change feed.
    fn record_binding(&mut self, pod: &str, node: &str) -> Result<Vec<ClaimAllocation>, Status>;
    /// One check of `pod`'s binding conditions ([`Plugin::binding_poll`]).
    fn binding_poll(&self, pod: &str, polls: u32) -> BindingPoll;
    /// Takes back the binding of `pod` after its PreBind failed ([`Plugin::unbind`]).
    fn unbind(&mut self, pod: &str);
}

impl Backend for Plugin {
    fn create(config: &str) -> Result<Self, String> {
        Plugin::new(config).map_err(|e| e.to_string())
    }
    fn apply(&mut self, kind: EventKind, object_json: &str) -> Result<(), String> {
        Plugin::apply(self, kind, object_json).map_err(|e| e.to_string())
    }
    fn postfilter_answer(&mut self, pod: &str) -> PostFilter {
        Plugin::postfilter(self, pod)
    }
    fn stored_differs(&self, claim: &str, allocation: &AllocationResult) -> bool {
        Plugin::claim(self, claim).is_some_and(|c| c.status.allocation.as_ref() != Some(allocation))
    }
    fn record_binding(&mut self, pod: &str, node: &str) -> Result<Vec<ClaimAllocation>, Status> {
        Plugin::bind(self, pod, node)
    }
    fn binding_poll(&self, pod: &str, polls: u32) -> BindingPoll {
        Plugin::binding_poll(self, pod, polls)
    }
    fn unbind(&mut self, pod: &str) {
        Plugin::unbind(self, pod);
    }
    fn take_warnings(&mut self) -> Vec<String> {
        Plugin::take_warnings(self)
    }
}

/// What an export answers: the status code and the reason to send with `result.status_reason`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Reply {
    /// The framework status code.
    pub code: i32,
    /// The reason (sent only when non-empty).
    pub reason: String,
}

impl Reply {
    /// Success without a reason.
    pub fn ok() -> Reply {
        Reply {
            code: Code::Success as i32,
            reason: String::new(),
        }
    }
    fn error(reason: impl Into<String>) -> Reply {
        Reply {
            code: Code::Error as i32,
            reason: reason.into(),
        }
    }
}

impl From<Status> for Reply {
    fn from(s: Status) -> Reply {
        Reply {
            code: s.code as i32,
            reason: s.reason,
        }
    }
}

/// A JSON array of strings (`filteredNodeList`), read through the core's `json` functions (this
/// crate compiles no serde_json reader of its own).
fn node_names(bytes: &[u8]) -> Result<Vec<String>, String> {
    let text = std::str::from_utf8(bytes).map_err(|e| e.to_string())?;
    let names = json::elements(text).map_err(|e| e.to_string())?;
    names
        .into_iter()
        .map(|n| json::string(n).map_err(|e| e.to_string()))
        .collect()
}

/// The meaning of a `sharing-affinity.dra/v1` write result.
pub fn write_error(code: i32) -> &'static str {
    match code {
        1 => "the claim does not exist",
        2 => "the host rejected the allocation JSON",
        3 => "the claim is already allocated differently",
        4 => "no pod is being scheduled",
        _ => "unknown error",
    }
}

/// The meaning of a non-zero result of `deallocation` (`docs/kswe-dra-extension.md` §2.3).
pub fn deallocation_error(code: i32) -> &'static str {
    match code {
        1 => "the claim does not exist",
        3 => "the claim changed since the plugin saw it, or another pod uses it",
        4 => "no pod is being scheduled",
        _ => "unknown error",
    }
}

/// The meaning of a non-zero result of `wait` (`docs/kswe-dra-extension.md` §2.5).
pub fn wait_error(code: i32) -> &'static str {
    match code {
        2 => "the host refused the number of seconds",
        4 => "no pod is being scheduled",
        5 => "the wait ended early: the call's context is done",
        _ => "unknown error",
    }
}

/// Logs an error through `k8s.io/klog` `logs` (with key/value pairs, so upstream's inverted
/// `log` check does not drop it).
pub fn log_error(message: &str, kvs: &[(&str, &str)]) {
    log_at(2, message, kvs);
}

/// Logs at klog severity `severity` (1 = warning, 2 = error), as [`log_error`] does.
fn log_at(severity: i32, message: &str, kvs: &[(&str, &str)]) {
    if imports::klog_severity() > severity {
        return;
    }
    let mut packed = Vec::new();
    for (k, v) in kvs {
        for s in [k, v] {
            packed.extend_from_slice(s.as_bytes());
            packed.push(0);
        }
    }
    imports::klog_logs(severity, message, &packed);
}

/// The pod a hook is called for: its UID, `namespace/name` and `currentPod` bytes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PodId {
    /// `metadata.uid`.
    pub uid: String,
    /// `namespace/name`.
    pub key: String,
    /// The protobuf bytes `currentPod` returned (compared first, so a hook of the same cycle
    /// decodes nothing).
    bytes: Vec<u8>,
}

impl PodId {
    fn label(&self) -> String {
        format!("pod {} (uid {:?})", self.key, self.uid)
    }
}

/// A reservation this instance made at Reserve and has not bound or unreserved yet.
#[derive(Clone, Debug, PartialEq)]
pub struct Reservation {
    /// `namespace/name` of the pod.
    pub pod: String,
    /// The node.
    pub node: String,
    /// The allocations signalled as pending.
    pub allocations: Vec<ClaimAllocation>,
}

/// The guest's state: the core plugin, the feed cursor, the read buffer, the scheduling cycle
/// and the in-flight reservations.
pub struct GuestState<B: Backend> {
    config: String,
    backend: B,
    cursor: String,
    buf: ReadBuf,
    /// The pod of the last successful PreFilter on this instance.
    cycle: Option<PodId>,
    /// In-flight reservations by pod UID.
    reservations: FxHashMap<String, Reservation>,
}

impl<B: Backend> GuestState<B> {
    /// Reads `get_config` and creates the core plugin.
    pub fn start() -> Result<Self, String> {
        let mut buf = ReadBuf::new();
        let config = buf
            .read("get_config", imports::get_config)
            .map_err(|e| e.to_string())?;
        let config = std::str::from_utf8(config)
            .map_err(|e| format!("guestConfig: not UTF-8: {e}"))?
            .to_string();
        let backend = B::create(&config).map_err(|e| format!("guestConfig: {e}"))?;
        Ok(GuestState {
            config,
            backend,
            cursor: String::new(),
            buf,
            cycle: None,
            reservations: FxHashMap::default(),
        })
    }

    /// The cursor of the last applied feed (empty before the first pull or after a refused write).
    pub fn cursor(&self) -> &str {
        &self.cursor
    }

    /// The core plugin.
    pub fn backend(&self) -> &B {
        &self.backend
    }

    /// The in-flight reservations, by pod UID.
    pub fn reservations(&self) -> &FxHashMap<String, Reservation> {
        &self.reservations
    }

    /// Pulls and applies the change feed, page after page until a page has no `more`. A refused
    /// object is logged and skipped, as a Kubernetes informer's handler would; a broken document,
    /// or a page asking for more without moving its cursor, is an error.
    fn sync(&mut self) -> Result<(), String> {
        loop {
            let sent = self.cursor.clone();
            let more = self.sync_page()?;
            if !more {
                return Ok(());
            }
            if self.cursor == sent {
                return Err(format!(
                    "change feed: field more: true, but the cursor {sent:?} did not move"
                ));
            }
        }
    }

    /// Pulls and applies one page of the change feed; returns its `more`.
    fn sync_page(&mut self) -> Result<bool, String> {
        let cursor = self.cursor.clone();
        let bytes = self
            .buf
            .read("changes", |b| imports::dra_changes(&cursor, b))
            .map_err(|e| e.to_string())?;
        let feed = feed::parse(bytes)?;
        if feed.resync {
            self.backend = B::create(&self.config).map_err(|e| format!("guestConfig: {e}"))?;
            // The fresh plugin holds no reservation: forget ours too.
            self.reservations.clear();
            self.cycle = None;
        }
        for event in &feed.events {
            if let Err(e) = self.backend.apply(event.kind, event.object) {
                log_error(
                    "sharing-affinity: object rejected",
                    &[("object", &event.label()), ("error", &e)],
                );
            }
        }
        self.cursor = feed.cursor;
        Ok(feed.more)
    }

    /// Drops reservations the host no longer backs: a claim of the reservation is stored with
    /// another allocation, or none. This happens when the pod's binding cycle failed and
    /// upstream ran Unreserve on another instance (the scheduling one) before returning this one
    /// to the pool; the host dropped the pending allocations then.
    fn drop_stale_reservations(&mut self) {
        let stale: Vec<String> = self
            .reservations
            .iter()
            .filter(|(_, r)| {
                r.allocations
                    .iter()
                    .any(|a| self.backend.stored_differs(&a.claim, &a.allocation))
            })
            .map(|(uid, _)| uid.clone())
            .collect();
        for uid in stale {
            if let Some(r) = self.reservations.remove(&uid)
                && let Err(status) = self.backend.unreserve(&r.pod, &r.node)
            {
                log_error(
                    "sharing-affinity: dropping a stale reservation",
                    &[("pod", &r.pod), ("error", &status.reason)],
                );
            }
        }
    }

    /// The pod of the current call, from `currentPod`.
    fn current_pod(&mut self) -> Result<PodId, String> {
        let bytes = self
            .buf
            .read("currentPod", imports::current_pod)
            .map_err(|e| e.to_string())?;
        if let Some(cycle) = &self.cycle
            && cycle.bytes == bytes
        {
            return Ok(cycle.clone());
        }
        let bytes = bytes.to_vec();
        let pod =
            proto::Pod::decode(bytes.as_slice()).map_err(|e| format!("currentPod: invalid protobuf: {e}"))?;
        let meta = pod.metadata.unwrap_or_default();
        let name = meta.name.unwrap_or_default();
        if name.is_empty() {
            return Err("currentPod: no pod (metadata.name is empty)".into());
        }
        let namespace = meta.namespace.unwrap_or_default();
        Ok(PodId {
            uid: meta.uid.unwrap_or_default(),
            key: format!("{namespace}/{name}"),
            bytes,
        })
    }

    /// The current pod, which must be the pod of this instance's scheduling cycle.
    fn cycle_pod(&mut self, hook: &str) -> Result<(), Reply> {
        // Every hook of one cycle sees the same pod bytes: compared in place, a word at a time,
        // nothing decoded or copied.
        let bytes = self
            .buf
            .read("currentPod", imports::current_pod)
            .map_err(|e| Reply::error(e.to_string()))?;
        if self
            .cycle
            .as_ref()
            .is_some_and(|c| sharing_affinity_core::bytes_eq(&c.bytes, bytes))
        {
            return Ok(());
        }
        let pod = self.current_pod().map_err(Reply::error)?;
        match &self.cycle {
            Some(c) if c.uid == pod.uid && c.key == pod.key => Ok(()),
            Some(c) => Err(Reply::error(format!(
                "{}: {hook} called, but this instance's scheduling cycle is for {}",
                pod.label(),
                c.label()
            ))),
            None => Err(Reply::error(format!(
                "{}: {hook} called, but this instance has no scheduling cycle (PreFilter did not run \
                 here, or the instance's state was rebuilt after a trap)",
                pod.label()
            ))),
        }
    }

    /// `currentNodeName`, borrowed from the read buffer (Filter and Score, once per node, copy
    /// nothing; a function of the buffer alone, so the backend can be called while it is
    /// borrowed).
    fn node_name(buf: &mut ReadBuf) -> Result<&str, String> {
        let bytes = buf
            .read("currentNodeName", imports::current_node_name)
            .map_err(|e| e.to_string())?;
        std::str::from_utf8(bytes).map_err(|e| format!("currentNodeName: not UTF-8: {e}"))
    }

    /// PreFilter: sync, apply the pod, start the cycle. Other pods' reservations are kept.
    pub fn prefilter(&mut self) -> Reply {
        self.cycle = None;
        if let Err(e) = self.sync() {
            return Reply::error(e);
        }
        self.drop_stale_reservations();
        let bytes = match self.buf.read("currentPod", imports::current_pod) {
            Ok(b) => b.to_vec(),
            Err(e) => return Reply::error(e.to_string()),
        };
        let pod = match proto::Pod::decode(bytes.as_slice()) {
            Ok(p) => proto::pod_from_proto(p),
            Err(e) => return Reply::error(format!("currentPod: invalid protobuf: {e}")),
        };
        let uid = pod.metadata.uid.clone();
        let key = object_key(&pod.metadata.namespace, &pod.metadata.name);
        // The pod is scheduled again only after its previous attempt ended: the core drops a
        // reservation it still holds for it, and so do we.
        self.reservations.remove(&uid);
        if let Err(e) = self
            .backend
            .apply(EventKind::Update, &json_string(Kind::Pod, &pod))
        {
            return Reply::error(format!("currentPod {key}: {e}"));
        }
        self.backend.set_time(imports::dra_now());
        let status = self.backend.prefilter(&key);
        for w in self.backend.take_warnings() {
            log_at(1, "sharing-affinity: warning", &[("warning", &w)]);
        }
        if status.code == Code::Success {
            self.cycle = Some(PodId { uid, key, bytes });
        }
        status.into()
    }

    /// Filter for `currentNodeName`.
    pub fn filter(&mut self) -> Reply {
        if let Err(reply) = self.cycle_pod("Filter") {
            return reply;
        }
        match Self::node_name(&mut self.buf) {
            Ok(node) => self.backend.filter(node).into(),
            Err(e) => Reply::error(e),
        }
    }

    /// PreScore with `filteredNodeList` (a JSON array of node names): the nodes Score normalises
    /// over. The plugin normalises inside Score instead of exporting `normalizescore`, whose
    /// upstream host reassigns the list by index from a Go map (random order).
    pub fn prescore(&mut self) -> Reply {
        if let Err(reply) = self.cycle_pod("PreScore") {
            return reply;
        }
        let nodes = match self.buf.read("filteredNodeList", imports::filtered_node_list) {
            Ok(bytes) => node_names(bytes)
                .map_err(|e| format!("filteredNodeList: not a JSON array of node names: {e}")),
            Err(e) => Err(e.to_string()),
        };
        match nodes {
            Ok(nodes) => self.backend.prescore(&nodes).into(),
            Err(e) => Reply::error(e),
        }
    }

    /// Score for `currentNodeName`: `(score, reply)`.
    pub fn score(&mut self) -> (u32, Reply) {
        if let Err(reply) = self.cycle_pod("Score") {
            return (0, reply);
        }
        match Self::node_name(&mut self.buf) {
            Ok(node) => match self.backend.score(node) {
                Ok(score) => (score, Reply::ok()),
                Err(status) => (0, status.into()),
            },
            Err(e) => (0, Reply::error(e)),
        }
    }

    /// PostFilter for `currentPod` (no node fitted): the core names an allocated claim of the pod
    /// to deallocate, and the host clears it with `deallocation`. Runs also after a PreFilter
    /// that failed, as kube-scheduler calls PostFilter then too; the core's cycle for the pod
    /// then holds no claims.
    pub fn postfilter(&mut self) -> Reply {
        let pod = match self.current_pod() {
            Ok(p) => p,
            Err(e) => return Reply::error(e),
        };
        let answer = self.backend.postfilter_answer(&pod.key);
        if let Some((claim, resource_version)) = &answer.deallocate {
            let code = imports::dra_deallocation(claim, resource_version);
            if code != 0 {
                // The core cleared the claim in its state: the next PreFilter resyncs.
                self.cursor.clear();
            }
            if code == 3 {
                // The claim changed since this instance saw it (another pod's binding cycle
                // wrote it, for example): the change event requeues the pod, as upstream's
                // conflict would after a backoff.
                return Reply {
                    code: Code::Unschedulable as i32,
                    reason: format!(
                        "still not schedulable: claim {claim} changed since PreFilter and was not deallocated"
                    ),
                };
            }
            if code != 0 {
                return Reply::error(format!(
                    "sharing-affinity.dra/v1.deallocation for claim {claim}: {} (code {code})",
                    deallocation_error(code)
                ));
            }
        }
        answer.status.into()
    }

    /// Reserve: records the pod's reservation and signals each claim's allocation as pending.
    pub fn reserve(&mut self) -> Reply {
        if let Err(reply) = self.cycle_pod("Reserve") {
            return reply;
        }
        let Some(pod) = self.cycle.clone() else {
            return Reply::error("Reserve: internal: the scheduling cycle is gone");
        };
        let node = match Self::node_name(&mut self.buf) {
            Ok(n) => n.to_string(),
            Err(e) => return Reply::error(e),
        };
        match self.backend.reserve(&node) {
            Ok(allocations) => {
                let reply = self.write_back(&allocations, true);
                self.reservations.insert(
                    pod.uid,
                    Reservation {
                        pod: pod.key,
                        node,
                        allocations,
                    },
                );
                reply
            }
            Err(status) => status.into(),
        }
    }

    /// Permit: Success when this instance holds the pod's reservation (upstream hands the
    /// instance to the pod's binding cycle right after); `Error` naming the pod otherwise.
    pub fn permit(&mut self) -> Reply {
        let pod = match self.current_pod() {
            Ok(p) => p,
            Err(e) => return Reply::error(e),
        };
        if self.reservations.contains_key(&pod.uid) {
            Reply::ok()
        } else {
            Reply::error(format!(
                "{}: Permit called, but this instance holds no reservation for it",
                pod.label()
            ))
        }
    }

    /// Unreserve: drops the pod's reservation, if this instance holds it. Other pods'
    /// reservations and this instance's cycle for another pod are untouched. Upstream runs
    /// Unreserve on the scheduling instance, which may not be the one holding the reservation:
    /// that case is logged, and the holder drops it at its next PreFilter (stale reservations).
    pub fn unreserve(&mut self) {
        let pod = match self.current_pod() {
            Ok(p) => p,
            Err(e) => {
                log_error("sharing-affinity: unreserve", &[("error", &e)]);
                return;
            }
        };
        if self.cycle.as_ref().is_some_and(|c| c.uid == pod.uid) {
            self.cycle = None;
        }
        let Some(r) = self.reservations.remove(&pod.uid) else {
            return;
        };
        if let Err(status) = self.backend.unreserve(&r.pod, &r.node) {
            log_error(
                "sharing-affinity: unreserve",
                &[("pod", &r.pod), ("error", &status.reason)],
            );
        }
    }

    /// PreBind: commits the pod's reservation and writes each claim's allocation to the host.
    pub fn prebind(&mut self) -> Reply {
        let pod = match self.current_pod() {
            Ok(p) => p,
            Err(e) => return Reply::error(e),
        };
        let node = match Self::node_name(&mut self.buf) {
            Ok(n) => n.to_string(),
            Err(e) => return Reply::error(e),
        };
        let Some(r) = self.reservations.remove(&pod.uid) else {
            return Reply::error(format!(
                "{}: PreBind called, but this instance holds no reservation for it",
                pod.label()
            ));
        };
        if self.cycle.as_ref().is_some_and(|c| c.uid == pod.uid) {
            self.cycle = None;
        }
        self.backend.set_time(imports::dra_now());
        match self.backend.record_binding(&r.pod, &node) {
            Ok(allocations) => {
                let written = self.write_back(&allocations, false);
                if written.code != Code::Success as i32 {
                    return written;
                }
                self.wait_for_binding(&r.pod)
            }
            Err(status) => {
                // The binding cycle fails; the framework's Unreserve may run on another
                // instance, so the reservation is released here.
                let _ = self.backend.unreserve(&r.pod, &r.node);
                status.into()
            }
        }
    }

    /// PreBind's wait for the binding conditions of `pod`'s claims (`sharing-affinity.dra/v1`
    /// §2.5): checks at once, then after each `wait` with the changes and the time since. When
    /// the wait fails, the plugin's state takes the binding back; the framework's Unreserve then
    /// has the host drop the pod from the claims' `status.reservedFor`.
    fn wait_for_binding(&mut self, pod: &str) -> Reply {
        let mut polls = 0;
        loop {
            let failed = match self.backend.binding_poll(pod, polls) {
                BindingPoll::Ready => return Reply::ok(),
                BindingPoll::Failed(status) => status,
                BindingPoll::Wait(seconds) => {
                    let code = imports::dra_wait(seconds);
                    let synced = if code == 0 { self.sync() } else { Ok(()) };
                    match (code, synced) {
                        (0, Ok(())) => {
                            self.backend.set_time(imports::dra_now());
                            polls += 1;
                            continue;
                        }
                        (0, Err(e)) => Status::error(format!("waiting for binding conditions: {e}")),
                        (code, _) => Status::error(format!(
                            "sharing-affinity.dra/v1.wait: {} (code {code})",
                            wait_error(code)
                        )),
                    }
                }
            };
            self.backend.unbind(pod);
            return failed.into();
        }
    }

    /// Hands allocations to the host. When the host refuses one, the plugin's view and the
    /// host's differ: the next PreFilter resyncs from a full snapshot.
    fn write_back(&mut self, allocations: &[ClaimAllocation], pending: bool) -> Reply {
        let what = if pending {
            "pending_allocation"
        } else {
            "allocation"
        };
        for a in allocations {
            let json = match a.allocation.to_json_text() {
                Ok(j) => j,
                Err(e) => {
                    return Reply::error(format!("claim {}: allocation does not serialize: {e}", a.claim));
                }
            };
            let code = if pending {
                imports::dra_pending_allocation(&a.claim, &json)
            } else {
                imports::dra_allocation(&a.claim, &json)
            };
            if code != 0 {
                self.cursor.clear();
                return Reply::error(format!(
                    "sharing-affinity.dra/v1.{what} for claim {}: {} (code {code})",
                    a.claim,
                    write_error(code)
                ));
            }
        }
        Reply::ok()
    }
}
