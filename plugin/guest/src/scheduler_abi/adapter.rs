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

use prost::Message;
use sharing_affinity_core::object::Object;
use sharing_affinity_core::plugin::{ClaimAllocation, EventKind, Plugin};
use sharing_affinity_core::{Code, Status};

use super::imports;
use super::mem::ReadBuf;
use super::{feed, proto};

/// The core calls the adapter makes (implemented by [`Plugin`]).
pub trait Backend: Sized {
    /// A fresh plugin with the given configuration.
    fn create(config: &str) -> Result<Self, String>;
    /// Applies one object change (Kubernetes JSON).
    fn apply(&mut self, kind: EventKind, object_json: &str) -> Result<(), String>;
    /// PreFilter for `namespace/name`.
    fn prefilter(&mut self, pod: &str) -> Status;
    /// Filter for one node.
    fn filter(&mut self, node: &str) -> Status;
    /// Score for one node.
    fn score(&mut self, node: &str) -> Result<u32, Status>;
    /// Reserve on the chosen node.
    fn reserve(&mut self, node: &str) -> Result<Vec<ClaimAllocation>, Status>;
    /// Whether the pod `namespace/name` holds a reservation.
    fn is_reserved(&self, pod: &str) -> bool;
    /// Unreserve for the pod `namespace/name`.
    fn unreserve(&mut self, pod: &str, node: &str) -> Result<(), Status>;
    /// Bind (PreBind) for the pod `namespace/name`.
    fn bind(&mut self, pod: &str, node: &str) -> Result<Vec<ClaimAllocation>, Status>;
    /// Warnings for the plugin log since the last call.
    fn take_warnings(&mut self) -> Vec<String> {
        Vec::new()
    }
}

impl Backend for Plugin {
    fn create(config: &str) -> Result<Self, String> {
        Plugin::new(config).map_err(|e| e.to_string())
    }
    fn apply(&mut self, kind: EventKind, object_json: &str) -> Result<(), String> {
        Plugin::apply(self, kind, object_json).map_err(|e| e.to_string())
    }
    fn prefilter(&mut self, pod: &str) -> Status {
        Plugin::prefilter(self, pod)
    }
    fn filter(&mut self, node: &str) -> Status {
        Plugin::filter(self, node)
    }
    fn score(&mut self, node: &str) -> Result<u32, Status> {
        Plugin::score(self, node)
    }
    fn reserve(&mut self, node: &str) -> Result<Vec<ClaimAllocation>, Status> {
        Plugin::reserve(self, node)
    }
    fn is_reserved(&self, pod: &str) -> bool {
        Plugin::reserved_node(self, pod).is_some()
    }
    fn unreserve(&mut self, pod: &str, node: &str) -> Result<(), Status> {
        Plugin::unreserve(self, pod, node)
    }
    fn bind(&mut self, pod: &str, node: &str) -> Result<Vec<ClaimAllocation>, Status> {
        Plugin::bind(self, pod, node)
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
    fn ok() -> Reply {
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

/// The guest's state: the core plugin, the feed cursor and the read buffer.
pub struct GuestState<B: Backend> {
    config: String,
    backend: B,
    cursor: String,
    buf: ReadBuf,
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

    /// Pulls and applies the change feed. A refused object is logged and skipped, as a
    /// Kubernetes informer's handler would; a broken document is an error.
    fn sync(&mut self) -> Result<(), String> {
        let cursor = self.cursor.clone();
        let bytes = self
            .buf
            .read("changes", |b| imports::dra_changes(&cursor, b))
            .map_err(|e| e.to_string())?;
        let feed = feed::parse(bytes)?;
        if feed.resync {
            self.backend = B::create(&self.config).map_err(|e| format!("guestConfig: {e}"))?;
        }
        for event in &feed.events {
            if let Err(e) = self.backend.apply(event.kind, &event.object) {
                log_error(
                    "sharing-affinity: object rejected",
                    &[("object", &event.label), ("error", &e)],
                );
            }
        }
        self.cursor = feed.cursor;
        Ok(())
    }

    fn node_name(&mut self) -> Result<String, String> {
        let bytes = self
            .buf
            .read("currentNodeName", imports::current_node_name)
            .map_err(|e| e.to_string())?;
        String::from_utf8(bytes.to_vec()).map_err(|e| format!("currentNodeName: not UTF-8: {e}"))
    }

    /// The pod of the current call (`currentPod`) as an object.
    fn current_pod(&mut self) -> Result<Object, String> {
        let bytes = self
            .buf
            .read("currentPod", imports::current_pod)
            .map_err(|e| e.to_string())?;
        let pod = proto::Pod::decode(bytes).map_err(|e| format!("currentPod: invalid protobuf: {e}"))?;
        Ok(Object::Pod(Box::new(proto::pod_from_proto(pod))))
    }

    /// PreFilter: sync, apply the pod, start the cycle.
    pub fn prefilter(&mut self) -> Reply {
        if let Err(e) = self.sync() {
            return Reply::error(e);
        }
        let object = match self.current_pod() {
            Ok(o) => o,
            Err(e) => return Reply::error(e),
        };
        let key = object.key();
        if let Err(e) = self
            .backend
            .apply(EventKind::Update, &object.to_json().to_string())
        {
            return Reply::error(format!("currentPod {key}: {e}"));
        }
        let status = self.backend.prefilter(&key);
        for w in self.backend.take_warnings() {
            log_at(1, "sharing-affinity: warning", &[("warning", &w)]);
        }
        status.into()
    }

    /// Filter for `currentNodeName`.
    pub fn filter(&mut self) -> Reply {
        match self.node_name() {
            Ok(node) => self.backend.filter(&node).into(),
            Err(e) => Reply::error(e),
        }
    }

    /// Score for `currentNodeName`: `(score, reply)`.
    pub fn score(&mut self) -> (u32, Reply) {
        match self.node_name() {
            Ok(node) => match self.backend.score(&node) {
                Ok(score) => (score, Reply::ok()),
                Err(status) => (0, status.into()),
            },
            Err(e) => (0, Reply::error(e)),
        }
    }

    /// Reserve: signals each claim's allocation as pending.
    pub fn reserve(&mut self) -> Reply {
        let node = match self.node_name() {
            Ok(n) => n,
            Err(e) => return Reply::error(e),
        };
        match self.backend.reserve(&node) {
            Ok(allocations) => self.write_back(&allocations, true),
            Err(status) => status.into(),
        }
    }

    /// Unreserve for `currentPod` (its binding cycle may overlap the next pod's scheduling
    /// cycle). The ABI's unreserve returns nothing, so a failure is logged. The scheduler also
    /// calls it after a failed Reserve, when the pod holds no reservation: nothing to do then.
    pub fn unreserve(&mut self) {
        let target = self
            .current_pod()
            .and_then(|pod| Ok((pod.key(), self.node_name()?)));
        match target {
            Ok((pod, _)) if !self.backend.is_reserved(&pod) => {}
            Ok((pod, node)) => {
                if let Err(status) = self.backend.unreserve(&pod, &node) {
                    log_error(
                        "sharing-affinity: unreserve",
                        &[("pod", &pod), ("error", &status.reason)],
                    );
                }
            }
            Err(e) => log_error("sharing-affinity: unreserve", &[("error", &e)]),
        }
    }

    /// PreBind: commits the reservation and writes each claim's allocation to the host.
    pub fn prebind(&mut self) -> Reply {
        let target = self
            .current_pod()
            .and_then(|pod| Ok((pod.key(), self.node_name()?)));
        let (pod, node) = match target {
            Ok(t) => t,
            Err(e) => return Reply::error(e),
        };
        match self.backend.bind(&pod, &node) {
            Ok(allocations) => self.write_back(&allocations, false),
            Err(status) => status.into(),
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
            let json = match serde_json::to_string(&a.allocation) {
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
