//! Replaying a recorded cluster through an [`Engine`]: the scheduling decisions kube-scheduler would
//! take with only this plugin enabled.
//!
//! The input is what `kubectl get nodes,deviceclasses,resourceslices,resourceclaims,resourceclaimtemplates,pods,devicetaintrules -A -o json`
//! prints. Every object is loaded into the engine; then the pending pods (no `spec.nodeName`) are
//! scheduled one at a time, ordered by `metadata.creationTimestamp`, then `namespace/name`. For each
//! pod: prefilter; filter on every node in name order (each call timed); score on the feasible nodes;
//! the highest score wins (ties: the smaller node name); reserve and bind there, and unreserve when
//! bind fails. When prefilter fails, every node gets its status.
//!
//! [`Binding::Async`] runs binding cycles as kube-scheduler does: the scheduling cycle ends at
//! Permit, and pod N's binding cycle runs after pod N+1's scheduling cycle has started (right after
//! its PreFilter, the point that exposes the most shared state).

use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

use serde_json::value::RawValue;
use sharing_affinity_core::Status;
use sharing_affinity_core::model::{DeviceClass, Node, Pod, PodExtendedResourceClaimStatus};
use sharing_affinity_core::object::object_key;
use sharing_affinity_core::object::{Kind, Object, Parsed, collect, identify, offset_in, unread_fields};
use sharing_affinity_core::plugin::{ClaimAllocation, extended};
use wasmtime::error::Context;
use wasmtime::{Result, format_err};

use crate::engine::Engine;

/// A recorded cluster, parsed.
#[derive(Debug)]
pub struct Cluster {
    /// The objects of the kinds the plugin uses, in input order.
    pub objects: Vec<Object>,
    /// The replay's clock, in Unix seconds: the newest `metadata.creationTimestamp` of an object
    /// or `status.allocation.allocationTimestamp` of a claim in the input (a recording is at
    /// least that recent), and never before 0 (the Unix epoch). The clock stands still during the replay: no
    /// time passes between cycles. `replay --now` sets it.
    pub now: i64,
    /// Objects that failed to decode, one message each (they are not loaded). The messages are
    /// those the plugin gives for the object alone, so they read the same on every engine;
    /// [`Cluster::invalid_at`] says where each error is in the input.
    pub invalid: Vec<String>,
    /// Where in the input each error of [`Cluster::invalid`] is (same order): the bad value when
    /// the decoder stopped at one, else the start of the object.
    pub invalid_at: Vec<Position>,
    /// Where in the input each of [`Cluster::objects`] starts (same order).
    pub objects_at: Vec<Position>,
    /// The JSON text of each object that failed to decode but names its kind and name: the
    /// replay hands these to the engine as well, whose plugin rejects them and then names them
    /// where a decision misses them.
    pub refused: Vec<String>,
    /// Objects of kinds the plugin does not use (Namespaces, Events...), counted by kind.
    pub ignored: BTreeMap<String, usize>,
    /// Node names, sorted: those of the Nodes that decoded and of those that did not (the
    /// scheduler knows a node whatever the plugin made of it).
    pub nodes: Vec<String>,
    /// Pending pods (`namespace/name`) in scheduling order.
    pub pending: Vec<String>,
    /// Objects that share their kind and name with a later one, which replaced them (see
    /// [`Cluster::parse`]).
    pub duplicates: Vec<Duplicate>,
    /// Fields of DRA objects that the plugin does not read ([`unread_fields`]), each with its
    /// object (`Kind namespace/name`) and where the object starts.
    pub unread: Vec<Unread>,
}

/// A field of a DRA object that the plugin does not read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Unread {
    /// `Kind namespace/name`.
    pub object: String,
    /// The field's path (`spec.devices[0].newField`).
    pub field: String,
    /// Where the object starts.
    pub at: Position,
}

/// An object replaced by a later one of the same kind and name.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Duplicate {
    /// `Kind namespace/name`.
    pub object: String,
    /// Where the replaced object starts.
    pub replaced: Position,
    /// Where the object that replaced it starts.
    pub by: Position,
}

impl Cluster {
    /// Parses a JSON document (a `List`, a single object or a stream of them). Text that is not
    /// JSON, and a value at the top level that is not an object (an array, a number...), is an
    /// error; an object that does not decode is listed in [`Cluster::invalid`].
    ///
    /// Names are unique per kind in an API server, so two decoded objects of one kind and name
    /// are one object seen twice: the last one in the input is kept, as a later update replaces
    /// an object, and each replaced one is listed in [`Cluster::duplicates`].
    pub fn parse(json: &str) -> Result<Cluster> {
        let mut parsed = parse_documents(json)?;
        let duplicates = keep_the_last_of_each_name(json, &mut parsed);
        let unread = unread_in(json, &parsed);
        let mut nodes = Vec::new();
        let mut pending = Vec::new();
        for object in &parsed.objects {
            match object {
                Object::Node(node) => nodes.push(node.metadata.name.to_string()),
                Object::Pod(pod) if pod.spec.node_name.is_empty() => {
                    pending.push((pod.metadata.creation_timestamp.clone(), object.key()));
                }
                _ => {}
            }
        }
        nodes.extend(parsed.refused.iter().filter_map(|json| match identify(json) {
            Some((Kind::Node, name)) => Some(name),
            _ => None,
        }));
        nodes.sort();
        nodes.dedup();
        pending.sort();
        let errors_at: Vec<usize> = parsed.errors.iter().map(|e| e.offset().unwrap_or(0)).collect();
        Ok(Cluster {
            now: recording_time(&parsed.objects),
            invalid: parsed
                .errors
                .iter()
                .map(|e| e.without_position().to_string())
                .collect(),
            invalid_at: Position::all(json, &errors_at),
            objects_at: Position::all(json, &parsed.offsets),
            refused: parsed.refused,
            ignored: parsed.ignored,
            objects: parsed.objects,
            nodes,
            pending: pending.into_iter().map(|(_, key)| key).collect(),
            duplicates,
            unread,
        })
    }

    /// The one summary line for the objects not used, by kind (`None` when every object was used):
    /// `not used by the plugin: 3 objects (Event 2, Namespace 1)`.
    pub fn ignored_summary(&self) -> Option<String> {
        if self.ignored.is_empty() {
            return None;
        }
        let total: usize = self.ignored.values().sum();
        let kinds: Vec<String> = self.ignored.iter().map(|(k, n)| format!("{k} {n}")).collect();
        let noun = if total == 1 { "object" } else { "objects" };
        Some(format!(
            "not used by the plugin: {total} {noun} ({})",
            kinds.join(", ")
        ))
    }

    /// Where in the input the `index`th rejection of a replay of this cluster ([`Replay::rejected`]:
    /// first [`Cluster::invalid`], then what the plugin refused while loading, each named
    /// `Kind namespace/name: ...`) is.
    pub fn rejection_at(&self, index: usize, message: &str) -> Option<Position> {
        if let Some(at) = self.invalid_at.get(index) {
            return Some(*at);
        }
        let (label, _) = message.split_once(": ")?;
        let (kind, key) = label.split_once(' ')?;
        let kind = Kind::from_name(kind)?;
        self.objects
            .iter()
            .position(|o| o.kind() == kind && o.key() == key)
            .and_then(|i| self.objects_at.get(i).copied())
    }

    /// Reads and parses a cluster file.
    pub fn from_file(path: &Path) -> Result<Cluster> {
        let json = std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
        Cluster::parse(&json).with_context(|| format!("parsing {}", path.display()))
    }
}

/// The values of a document, each an object or a `List` of them. The host reads its own file, so
/// it walks the values here and decodes each object as the plugin does, whatever the document's
/// size: a generated cluster of thousands of nodes is over the plugin's per-input limit
/// ([`sharing_affinity_core::object::MAX_INPUT_BYTES`]), and its objects reach the plugin one
/// event at a time, each under it.
/// See [`Cluster::now`].
fn recording_time(objects: &[Object]) -> i64 {
    let stamps = objects.iter().flat_map(|o| {
        let created = o.metadata().creation_timestamp.as_str();
        let allocated = match o {
            Object::ResourceClaim(c) => c
                .status
                .allocation
                .as_ref()
                .and_then(|a| a.allocation_timestamp.as_deref()),
            _ => None,
        };
        [Some(created), allocated]
    });
    stamps
        .flatten()
        .filter_map(|t| sharing_affinity_core::time::parse_rfc3339(t).ok())
        .map(|(seconds, _)| seconds)
        .fold(0, i64::max)
}

fn parse_documents(json: &str) -> Result<Parsed> {
    let mut parsed = Parsed::default();
    let mut index = 0;
    for (n, document) in serde_json::Deserializer::from_str(json)
        .into_iter::<&RawValue>()
        .enumerate()
    {
        let text = document.map_err(|e| format_err!("malformed JSON: {e}"))?.get();
        let offset = offset_in(json, text);
        // An array at the top level is not a List: kubectl never prints one, and reading it as
        // one object gave a single rejection and an empty replay.
        if !text.starts_with('{') {
            return Err(format_err!(
                "value #{n}, at {}, is {}, not an object: the input must be Kubernetes objects \
                 (one object, a List such as kubectl prints, or several one after the other)",
                Position::all(json, &[offset])[0],
                json_type(text)
            ));
        }
        collect(text, offset, &mut index, &mut parsed);
    }
    Ok(parsed)
}

/// The fields the plugin does not read of every decoded DRA object (each object's text is found
/// again at its offset).
fn unread_in(json: &str, parsed: &Parsed) -> Vec<Unread> {
    let mut found: Vec<(usize, String, String)> = Vec::new();
    for (object, &offset) in parsed.objects.iter().zip(&parsed.offsets) {
        if matches!(object, Object::Node(_) | Object::Pod(_)) {
            continue;
        }
        let mut values = serde_json::Deserializer::from_str(&json[offset..]).into_iter::<&RawValue>();
        let Some(Ok(text)) = values.next() else {
            continue;
        };
        for field in unread_fields(text.get()) {
            found.push((
                offset,
                format!("{} {}", object.kind().as_str(), object.key()),
                field,
            ));
        }
    }
    let offsets: Vec<usize> = found.iter().map(|(offset, ..)| *offset).collect();
    let at = Position::all(json, &offsets);
    found
        .into_iter()
        .zip(at)
        .map(|((_, object, field), at)| Unread { object, field, at })
        .collect()
}

/// Drops every decoded object that a later one of the same kind and name follows, and says
/// which (in input order of the replaced objects).
fn keep_the_last_of_each_name(json: &str, parsed: &mut Parsed) -> Vec<Duplicate> {
    let mut last: HashMap<(Kind, String), usize> = HashMap::with_capacity(parsed.objects.len());
    for (i, object) in parsed.objects.iter().enumerate() {
        last.insert((object.kind(), object.key()), i);
    }
    if last.len() == parsed.objects.len() {
        return Vec::new();
    }
    let at = Position::all(json, &parsed.offsets);
    let mut duplicates = Vec::new();
    let mut kept = 0;
    for i in 0..parsed.objects.len() {
        let object = &parsed.objects[i];
        let winner = last[&(object.kind(), object.key())];
        if winner == i {
            parsed.objects.swap(kept, i);
            parsed.offsets.swap(kept, i);
            kept += 1;
        } else {
            duplicates.push(Duplicate {
                object: format!("{} {}", object.kind().as_str(), object.key()),
                replaced: at[i],
                by: at[winner],
            });
        }
    }
    parsed.objects.truncate(kept);
    parsed.offsets.truncate(kept);
    duplicates
}

/// A place in the input text: line and column (both from 1; the column counts characters) and
/// the byte offset (from 0).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Position {
    /// Line, from 1.
    pub line: usize,
    /// Column in characters, from 1.
    pub column: usize,
    /// Bytes before it.
    pub byte: usize,
}

impl std::fmt::Display for Position {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "line {} column {} (byte {})",
            self.line, self.column, self.byte
        )
    }
}

impl Position {
    /// The positions of the byte offsets `bytes` in `text`, in one pass over the text when they
    /// are in increasing order (as the objects and errors of a document are): counting from the
    /// start for each would be quadratic in a one-line file of thousands of objects.
    pub fn all(text: &str, bytes: &[usize]) -> Vec<Position> {
        let text = text.as_bytes();
        let mut at = Position {
            line: 1,
            column: 1,
            byte: 0,
        };
        let mut out = Vec::with_capacity(bytes.len());
        for &byte in bytes {
            let byte = byte.min(text.len());
            if byte < at.byte {
                at = Position {
                    line: 1,
                    column: 1,
                    byte: 0,
                };
            }
            for &b in &text[at.byte..byte] {
                if b == b'\n' {
                    at.line += 1;
                    at.column = 1;
                } else if b & 0xC0 != 0x80 {
                    // Not a UTF-8 continuation byte: a character starts here.
                    at.column += 1;
                }
            }
            at.byte = byte;
            out.push(at);
        }
        out
    }
}

/// What kind of JSON value `text` (valid JSON) is, for messages.
fn json_type(text: &str) -> &'static str {
    match text.as_bytes().first() {
        Some(b'[') => "an array",
        Some(b'"') => "a string",
        Some(b't' | b'f') => "a boolean",
        Some(b'n') => "null",
        Some(b'{') => "an object",
        _ => "a number",
    }
}

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
    /// the special claim's name), set by [`replay_with`] for pods bound with DRA-backed extended
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

/// When a pod's binding cycle runs.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Binding {
    /// Right after the pod's scheduling cycle, before the next pod's starts.
    #[default]
    Sync,
    /// After Permit, interleaved with the next pod's scheduling cycle: pod N's binding cycle runs
    /// right after pod N+1's PreFilter (the last pod's after its own cycle). Needs an engine with
    /// [`Engine::async_binding`].
    Async,
}

/// Loads the cluster into the engine and schedules its pending pods, binding synchronously.
/// `progress` is called after each pod. Only a failure to load (for example a trap while
/// loading) is an error.
pub fn replay(engine: &mut dyn Engine, cluster: &Cluster, progress: &mut dyn FnMut()) -> Result<Replay> {
    replay_with(engine, cluster, Binding::Sync, progress, &mut |_| {})
}

/// [`replay`], calling `after_bind` with each pod's outcome right after a successful Bind (the
/// hook `replay --audit` uses to audit the cluster state).
pub fn replay_observed(
    engine: &mut dyn Engine,
    cluster: &Cluster,
    progress: &mut dyn FnMut(),
    after_bind: &mut dyn FnMut(&PodOutcome),
) -> Result<Replay> {
    replay_with(engine, cluster, Binding::Sync, progress, after_bind)
}

/// As [`replay_observed`], with the given binding mode. `Binding::Async` with an engine that binds
/// synchronously only is an error.
pub fn replay_with(
    engine: &mut dyn Engine,
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
    engine.set_clock(cluster.now);
    let mut samples = Samples::default();
    let mut pods: Vec<PodOutcome> = Vec::with_capacity(cluster.pending.len());
    // The pod (index into `pods`) whose binding cycle waits, and its node.
    let mut deferred: Option<(usize, String)> = None;
    for pod in &cluster.pending {
        let start = Instant::now();
        let (mut outcome, reserved) = {
            let mut between =
                |e: &mut dyn Engine| run_deferred(e, &mut deferred, &mut pods, &mut *after_bind);
            scheduling_cycle(engine, pod, &cluster.nodes, &mut samples, binding, &mut between)
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
        samples.cycle.push(nanos(start));
        pods.push(outcome);
        progress();
    }
    run_deferred(engine, &mut deferred, &mut pods, after_bind);
    record_extended(cluster, &mut pods);
    Ok(Replay {
        engine: engine.name(),
        rejected,
        pods,
        samples,
        guest_memory_bytes: engine.guest_memory_bytes(),
    })
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
    engine: &mut dyn Engine,
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
fn bind_now(engine: &mut dyn Engine, outcome: &mut PodOutcome, node: String) {
    match engine.bind(&node) {
        Ok(allocations) => {
            outcome.allocations = allocations;
            outcome.node = Some(node);
        }
        Err(status) => {
            outcome.error = Some(format!("bind on node {node}: {status}"));
            engine.unreserve(&node);
        }
    }
}

/// One scheduling and binding cycle for `pod` over `nodes` (sorted by name), adding its latencies
/// to `samples`.
pub fn schedule(engine: &mut dyn Engine, pod: &str, nodes: &[String], samples: &mut Samples) -> PodOutcome {
    let (mut outcome, reserved) = scheduling_cycle(engine, pod, nodes, samples, Binding::Sync, &mut |_| {});
    if let Some(node) = reserved {
        bind_now(engine, &mut outcome, node);
    }
    outcome
}

/// The scheduling cycle: PreFilter, then `between` (a waiting binding cycle), Filter, Score,
/// Reserve, and with async binding Permit. Returns the outcome so far and the reserved node when
/// the pod is to be bound.
fn scheduling_cycle(
    engine: &mut dyn Engine,
    pod: &str,
    nodes: &[String],
    samples: &mut Samples,
    binding: Binding,
    between: &mut dyn FnMut(&mut dyn Engine),
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
    let start = Instant::now();
    let pre = engine.prefilter(pod);
    samples.prefilter.push(nanos(start));
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
        let start = Instant::now();
        let status = engine.filter(node);
        samples.filter.push(nanos(start));
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
        engine.unreserve(&node);
        return (outcome, None);
    }
    if binding == Binding::Async
        && let Err(status) = engine.permit(&node)
    {
        outcome.error = Some(format!("permit on node {node}: {status}"));
        engine.unreserve(&node);
        return (outcome, None);
    }
    (outcome, Some(node))
}

/// PostFilter when no node passed Filter, as kube-scheduler runs it: only after every node was
/// rejected (Unschedulable or UnschedulableAndUnresolvable, by PreFilter or Filter; an `Error`
/// ends the cycle without it). An error status is the pod's error, a deallocated claim is
/// recorded.
fn postfilter(engine: &mut dyn Engine, nodes: &[String], outcome: &mut PodOutcome) {
    let rejected = |c| {
        matches!(
            c,
            sharing_affinity_core::Code::Unschedulable
                | sharing_affinity_core::Code::UnschedulableAndUnresolvable
        )
    };
    if outcome.nodes.is_empty() || !outcome.nodes.iter().all(|n| rejected(n.status.code)) {
        return;
    }
    let (status, deallocated) = engine.postfilter(nodes);
    if status.code == sharing_affinity_core::Code::Error {
        outcome.error = Some(format!("postfilter: {status}"));
    }
    outcome.deallocated = deallocated;
}

fn nanos(start: Instant) -> u64 {
    u64::try_from(start.elapsed().as_nanos()).unwrap_or(u64::MAX)
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

    #[test]
    fn pending_pods_are_ordered_by_creation_then_key_and_nodes_by_name() {
        let json = r#"{"kind":"List","items":[
            {"apiVersion":"v1","kind":"Node","metadata":{"name":"node-b"}},
            {"apiVersion":"v1","kind":"Node","metadata":{"name":"node-a"}},
            {"apiVersion":"v1","kind":"Pod","metadata":{"name":"late","namespace":"a","creationTimestamp":"2025-01-02T00:00:00Z"}},
            {"apiVersion":"v1","kind":"Pod","metadata":{"name":"z","namespace":"b","creationTimestamp":"2025-01-01T00:00:00Z"}},
            {"apiVersion":"v1","kind":"Pod","metadata":{"name":"y","namespace":"b","creationTimestamp":"2025-01-01T00:00:00Z"}},
            {"apiVersion":"v1","kind":"Pod","metadata":{"name":"bound","namespace":"a"},"spec":{"nodeName":"node-a"}}
        ]}"#;
        let cluster = Cluster::parse(json).unwrap();
        assert_eq!(cluster.nodes, ["node-a", "node-b"]);
        assert_eq!(cluster.pending, ["b/y", "b/z", "a/late"]);
    }

    #[test]
    fn a_value_at_the_top_level_that_is_not_an_object_is_an_error() {
        for (json, what) in [
            ("[1, 2]", "value #0, at line 1 column 1 (byte 0), is an array"),
            (
                r#"[{"apiVersion":"v1","kind":"Node","metadata":{"name":"n"}}]"#,
                "is an array",
            ),
            (
                "{\"apiVersion\":\"v1\",\"kind\":\"Node\",\"metadata\":{\"name\":\"n\"}}\n 7",
                "value #1, at line 2 column 2 (byte 59), is a number",
            ),
            (r#""x""#, "is a string"),
            ("null", "is null"),
        ] {
            let err = Cluster::parse(json).map(|_| ()).unwrap_err().to_string();
            assert!(
                err.contains(what) && err.contains("not an object"),
                "{json}: {err}"
            );
        }
    }

    #[test]
    fn positions_count_lines_and_characters() {
        let text = "ab\n\u{e7}d\n\nx";
        let at = |line, column, byte| Position { line, column, byte };
        assert_eq!(
            Position::all(text, &[0, 1, 3, 5, 7, 8, 2, 99]),
            [
                at(1, 1, 0),
                at(1, 2, 1),
                at(2, 1, 3),
                at(2, 2, 5),
                at(3, 1, 7),
                at(4, 1, 8),
                at(1, 3, 2),
                at(4, 2, 9),
            ]
        );
    }

    /// Each rejection of a replay is located: a decoding error where it is, an object the plugin
    /// refused while loading (named `Kind namespace/name: ...`) where it starts.
    #[test]
    fn rejections_are_located_in_the_input() {
        let json = "{\"kind\":\"List\",\"items\":[\n\
            {\"apiVersion\":\"v1\",\"kind\":\"Node\",\"metadata\":{\"name\":\"n1\"}},\n\
            {\"apiVersion\":\"v1\",\"kind\":\"Node\",\"metadata\":{\"name\":\"n2\",\"labels\":{\"a\":7}}},\n\
            {\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"metadata\":{\"name\":\"p\",\"namespace\":\"ns\"}}]}";
        let cluster = Cluster::parse(json).unwrap();
        assert_eq!(cluster.invalid.len(), 1);
        let seven = json.find(":7").unwrap() + 1;
        assert_eq!(
            cluster.rejection_at(0, &cluster.invalid[0]),
            Some(Position {
                line: 3,
                column: seven
                    - json
                        .rfind("\n{\"apiVersion\":\"v1\",\"kind\":\"Node\",\"metadata\":{\"name\":\"n2")
                        .unwrap(),
                byte: seven
            })
        );
        let pod = json.find("{\"apiVersion\":\"v1\",\"kind\":\"Pod\"").unwrap();
        assert_eq!(
            cluster.rejection_at(1, "Pod ns/p: refused by the store"),
            Some(Position {
                line: 4,
                column: 1,
                byte: pod
            })
        );
        assert_eq!(cluster.rejection_at(1, "Pod ns/q: not in the input"), None);
        assert_eq!(cluster.rejection_at(1, "no label"), None);
    }

    #[test]
    fn a_document_over_the_plugin_input_limit_is_parsed_by_the_host() {
        use sharing_affinity_core::object::MAX_INPUT_BYTES;
        let padding = "x".repeat(MAX_INPUT_BYTES);
        let json = format!(
            r#"{{"kind":"List","items":[{{"apiVersion":"v1","kind":"Node","metadata":{{"name":"n"}}}},
            {{"apiVersion":"v1","kind":"ConfigMap","metadata":{{"name":"pad"}},"data":{{"p":"{padding}"}}}},
            {{"apiVersion":"v1","kind":"Pod","metadata":{{}}}}]}}"#
        );
        let cluster = Cluster::parse(&json).unwrap();
        assert_eq!(cluster.nodes, ["n"]);
        assert_eq!(cluster.invalid.len(), 1, "{:?}", cluster.invalid);
        assert!(Cluster::parse(&format!("{json} {{")).is_err(), "truncated JSON");
    }

    #[test]
    fn unused_kinds_are_counted_by_kind_in_one_line() {
        let json = r#"{"kind":"List","items":[
            {"apiVersion":"v1","kind":"Namespace","metadata":{"name":"a"}},
            {"apiVersion":"v1","kind":"Event","metadata":{"name":"e1","namespace":"a"}},
            {"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"d","namespace":"a"}},
            {"apiVersion":"v1","kind":"Event","metadata":{"name":"e2","namespace":"a"}},
            {"apiVersion":"v1","kind":"Node","metadata":{"name":"n"}}
        ]}"#;
        let cluster = Cluster::parse(json).unwrap();
        assert_eq!(
            cluster.ignored_summary().as_deref(),
            Some("not used by the plugin: 4 objects (Deployment 1, Event 2, Namespace 1)")
        );
        assert_eq!(cluster.objects.len(), 1);
        let used = Cluster::parse(r#"{"apiVersion":"v1","kind":"Node","metadata":{"name":"n"}}"#).unwrap();
        assert_eq!(used.ignored_summary(), None);
    }

    #[test]
    fn a_used_kind_in_an_unreadable_version_is_an_error_naming_it() {
        let json = r#"{"kind":"List","items":[
            {"apiVersion":"resource.k8s.io/v1beta1","kind":"ResourceSlice","metadata":{"name":"s"}},
            {"apiVersion":"resource.k8s.io/v1beta1","kind":"DeviceTaintRule","metadata":{"name":"r"}}
        ]}"#;
        let cluster = Cluster::parse(json).unwrap();
        assert_eq!(cluster.invalid.len(), 2, "{:?}", cluster.invalid);
        assert!(cluster.ignored.is_empty(), "never a skip");
        for (msg, name) in cluster
            .invalid
            .iter()
            .zip(["ResourceSlice s", "DeviceTaintRule r"])
        {
            assert!(
                msg.contains(name) && msg.contains("resource.k8s.io/v1beta1"),
                "{msg}"
            );
        }
    }

    #[test]
    fn invalid_objects_are_listed_and_not_json_is_an_error() {
        let json = r#"{"kind":"List","items":[{"apiVersion":"v1","kind":"Pod","metadata":{}}]}"#;
        let cluster = Cluster::parse(json).unwrap();
        assert_eq!(cluster.invalid.len(), 1, "{:?}", cluster.invalid);
        assert!(
            cluster.invalid[0].contains("metadata.name"),
            "{:?}",
            cluster.invalid
        );
        assert!(Cluster::parse("{not json").is_err());
    }

    /// An engine answering from fixed tables, to test the cycle logic without a plugin.
    struct Scripted {
        prefilter: Status,
        feasible: Vec<(&'static str, u32)>,
        bind_fails: bool,
        calls: Vec<String>,
    }

    impl Engine for Scripted {
        fn name(&self) -> &'static str {
            "scripted"
        }
        fn load(&mut self, _: &[Object]) -> Result<Vec<String>> {
            Ok(vec!["refused".into()])
        }
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
        fn set_clock(&mut self, _unix_seconds: i64) {}
        fn postfilter(&mut self, _nodes: &[String]) -> (Status, Option<String>) {
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
        fn unreserve(&mut self, node: &str) {
            self.calls.push(format!("unreserve {node}"));
        }
        fn bind(&mut self, node: &str) -> Result<Vec<ClaimAllocation>, Status> {
            self.calls.push(format!("bind {node}"));
            if self.bind_fails {
                Err(Status::error("api down"))
            } else {
                Ok(Vec::new())
            }
        }
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
            let r = replay(&mut engine, &cluster(&["n1", "n2", "n3"]), &mut || {}).unwrap();
            assert_eq!(r.pods[0].node.as_deref(), *expected, "{msg}");
            assert_eq!(r.samples.filter.len(), 3, "{msg}: one filter sample per node");
            assert_eq!(r.rejected, ["bad object", "refused"], "{msg}");
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
        let r = replay(&mut engine, &cluster(&["n1", "n2"]), &mut || {}).unwrap();
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
        replay(&mut engine, &cluster(&["n1", "n2"]), &mut || {}).unwrap();
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
            let r = replay(&mut engine, &cluster(&["n1", "n2", "n3", "n4"]), &mut || {}).unwrap();
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
        let r = replay(&mut engine, &cluster(&["n1"]), &mut || {}).unwrap();
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
