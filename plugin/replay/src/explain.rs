//! The explainer's data ("why is my pod pending?"): for a recorded cluster, each pending pod's
//! decision with every node's Filter status and the message kube-scheduler would print; the lock
//! state of every shareable device before and after the replay; and, for one pod, a node × device
//! grid saying what each device is to the pod.
//!
//! Every fact comes from `sharing-affinity-core`: decisions and Filter reasons from the plugin
//! run by [`crate::cycle`], lock states from
//! [`Plugin::lock_state`], the grid's outcomes from the
//! core's auditor ([`audit::audit_with`]: selectors, capacity, dedicated use, counters, locks,
//! gating) and its taint rules ([`taints`]). The grid is a probe: each of the pod's pending
//! requests is given every device of the cluster at once, on a copy of the cluster as it stood
//! at the pod's cycle, and the violations this adds are read per device. The auditor checks
//! outcomes, not the allocator's search, so a cell says whether one request could hold that
//! device alone; the node's Filter status (shown with the row) is the decision.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use serde::Serialize;
use sharing_affinity_core::affinity::{self, LockState};
use sharing_affinity_core::audit::{self, Rule, Violation};
use sharing_affinity_core::capacity;
use sharing_affinity_core::cel::{CelCache, CelDevice};
use sharing_affinity_core::config::Config;
use sharing_affinity_core::index::DeviceKey;
use sharing_affinity_core::model::{
    AllocationResult, Device, DeviceAllocationResult, DeviceClass, DeviceRequestAllocationResult,
    DeviceToleration, Node, Pod, ResourceClaim, ResourceSlice,
};
use sharing_affinity_core::object::{Object, object_key};
use sharing_affinity_core::taints::{self, TaintRule};
use sharing_affinity_core::{ClaimAllocation, Code, Plugin, node_selector};

use crate::cluster::{self, Cluster};
use crate::cycle::{self, Binding, PodOutcome};

/// The explainer's document for a cluster (serialised as the page reads it).
#[derive(Clone, Debug, Serialize)]
pub struct Explanation {
    /// One entry per pending pod, in scheduling order.
    pub pods: Vec<PodView>,
    /// Node names, sorted.
    pub nodes: Vec<String>,
    /// Every device that allows multiple allocations, by `driver/pool/device`.
    pub locks: Vec<LockView>,
    /// Objects rejected while loading: those that failed to decode, then those the plugin refused.
    pub rejected: Vec<String>,
    /// The plugin's warnings about the cluster's sharing-affinity set-up.
    pub warnings: Vec<String>,
    /// Grids by pod (`namespace/name`), for the pods they were computed for ([`grid`]).
    pub grids: BTreeMap<String, Grid>,
}

/// One pod's decision.
#[derive(Clone, Debug, Serialize)]
pub struct PodView {
    /// `namespace/name`.
    pub pod: String,
    /// The node it was bound to.
    pub node: Option<String>,
    /// What kube-scheduler would say: `bound to node-a`, or its `0/N nodes are available: ...`
    /// message with the reasons counted as it counts them.
    pub message: String,
    /// Every node's status, in name order (PreFilter's when PreFilter rejected the pod).
    pub nodes: Vec<NodeView>,
    /// The devices Bind allocated: `claim: driver/pool/device[#shareID]`.
    pub allocations: Vec<String>,
    /// Why a pod with feasible nodes was not bound.
    pub error: Option<String>,
    /// The claim PostFilter deallocated.
    pub deallocated: Option<String>,
}

/// One node's Filter status for a pod.
#[derive(Clone, Debug, Serialize)]
pub struct NodeView {
    /// The node.
    pub node: String,
    /// `Success`, `Unschedulable`, `UnschedulableAndUnresolvable` or `Error`.
    pub code: &'static str,
    /// The status reason.
    pub reason: String,
    /// The score, for feasible nodes.
    pub score: Option<u32>,
}

/// The lock of one shareable device, before and after the replay.
#[derive(Clone, Debug, Serialize)]
pub struct LockView {
    /// `driver/pool/device`.
    pub device: String,
    /// The node of the device's slice (`None` for slices of several nodes).
    pub node: Option<String>,
    /// In the recorded cluster.
    pub recorded: Lock,
    /// After the replay bound its pods.
    pub replayed: Lock,
}

/// A device's lock and the claims holding the device.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Lock {
    /// `clean`, `locked` or `unreconstructable`.
    pub state: &'static str,
    /// The values it is locked to (`subnet=subnet-a`), when locked.
    pub values: String,
    /// The claims (`namespace/name`) whose allocations hold the device.
    pub holders: Vec<String>,
}

/// A node × device grid for one pod.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Grid {
    /// The pod.
    pub pod: String,
    /// The pod's pending requests probed (`claim request`).
    pub requests: Vec<String>,
    /// Column headings: device names, in order.
    pub columns: Vec<String>,
    /// One row per node, in name order.
    pub rows: Vec<GridRow>,
    /// Why the grid is empty or partial, if it is.
    pub note: Option<String>,
}

/// One node's row of a [`Grid`].
#[derive(Clone, Debug, Serialize)]
pub struct GridRow {
    /// The node.
    pub node: String,
    /// The node's Filter code for the pod.
    pub code: &'static str,
    /// One cell per column (`None` when the node has no device of that name).
    pub cells: Vec<Option<Cell>>,
}

/// What one device is to the pod.
#[derive(Clone, Debug, Serialize)]
pub struct Cell {
    /// `driver/pool/device`.
    pub device: String,
    /// The outcome ([`Outcome::as_str`]).
    pub outcome: &'static str,
    /// One line per request saying why.
    pub detail: Vec<String>,
}

/// A grid cell's outcome, from the best to the worst fit (a cell shows the best of its
/// requests').
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Outcome {
    /// Bind allocated the device to the pod.
    Chosen,
    /// A request could hold the device.
    Fits,
    /// The device is locked to values other than the request's.
    Lock,
    /// The device is held by allocations whose affinity values cannot be re-derived.
    Unreconstructable,
    /// The request's claim gives no value (or a failing one) for the device's affinity keys.
    Affinity,
    /// Not enough capacity (or counters) left, or a capacity the request policy does not allow.
    Capacity,
    /// A dedicated device another claim holds.
    InUse,
    /// A taint the request does not tolerate.
    Taint,
    /// The device does not match the class's or request's selectors.
    Selector,
    /// Something else the auditor names (an unknown class).
    Other,
}

impl Outcome {
    /// The outcome's name, as the page's colours know it.
    pub fn as_str(self) -> &'static str {
        match self {
            Outcome::Chosen => "chosen",
            Outcome::Fits => "fits",
            Outcome::Lock => "lock",
            Outcome::Unreconstructable => "unreconstructable",
            Outcome::Affinity => "affinity",
            Outcome::Capacity => "capacity",
            Outcome::InUse => "in-use",
            Outcome::Taint => "taint",
            Outcome::Selector => "selector",
            Outcome::Other => "other",
        }
    }

    /// The outcome of an auditor rule.
    fn of_rule(rule: Rule) -> Outcome {
        match rule {
            Rule::Selector => Outcome::Selector,
            Rule::Capacity | Rule::RequestPolicy | Rule::Counters => Outcome::Capacity,
            Rule::Dedicated => Outcome::InUse,
            Rule::Lock => Outcome::Lock,
            Rule::Gating => Outcome::Affinity,
            Rule::UnknownReference | Rule::Constraint => Outcome::Other,
        }
    }

    /// Which of two failures of one request a cell shows: the check the allocator makes first.
    fn precedence(self) -> u8 {
        match self {
            Outcome::Selector => 0,
            Outcome::Taint => 1,
            Outcome::InUse => 2,
            Outcome::Capacity => 3,
            Outcome::Unreconstructable => 4,
            Outcome::Lock => 5,
            Outcome::Affinity => 6,
            Outcome::Other => 7,
            Outcome::Chosen | Outcome::Fits => 8,
        }
    }
}

/// A plugin loaded with a cluster, its clock set: what [`explain`] and [`grid`] start from.
fn loaded(cluster: &Cluster, config: &str) -> Result<(Plugin, Vec<String>), String> {
    let mut plugin = Plugin::new(config).map_err(|e| format!("invalid plugin configuration: {e}"))?;
    let mut rejected = cluster.invalid.clone();
    rejected.extend(cluster::add_objects(&mut plugin, &cluster.objects));
    cluster::add_refused(&mut plugin, &cluster.refused);
    plugin.set_time(cluster.now);
    Ok((plugin, rejected))
}

/// Replays the cluster natively and explains it: decisions and locks, without grids (see
/// [`grid`]). `config` is the plugin configuration (empty = defaults).
pub fn explain(cluster: &Cluster, config: &str) -> Result<Explanation, String> {
    let (mut plugin, rejected) = loaded(cluster, config)?;
    let before = lock_states(&mut plugin, &cluster.objects);
    let schedule = cycle::schedule_all(
        &mut plugin,
        cluster,
        Binding::Sync,
        &|| 0,
        &mut || {},
        &mut |_| {},
    );
    let after_objects = state_after(cluster, &schedule.pods);
    let after = lock_states(&mut plugin, &after_objects);
    let locks = before
        .into_iter()
        .map(|(device, (node, recorded))| {
            let replayed = after
                .get(&device)
                .map(|(_, l)| l.clone())
                .unwrap_or_else(|| recorded.clone());
            LockView {
                device,
                node,
                recorded,
                replayed,
            }
        })
        .collect();
    Ok(Explanation {
        pods: schedule.pods.iter().map(pod_view).collect(),
        nodes: cluster.nodes.clone(),
        locks,
        rejected,
        warnings: plugin.take_warnings(),
        grids: BTreeMap::new(),
    })
}

/// [`explain`] with the grids of as many pods as fit in `max_cells` grid cells (nodes × device
/// names per pod): the pods left unbound first, then the bound ones, each in scheduling order.
pub fn explain_with_grids(cluster: &Cluster, config: &str, max_cells: usize) -> Result<Explanation, String> {
    let mut explanation = explain(cluster, config)?;
    let (unbound, bound): (Vec<&PodView>, Vec<&PodView>) =
        explanation.pods.iter().partition(|p| p.node.is_none());
    let mut cells = 0;
    let mut grids = BTreeMap::new();
    for p in unbound.into_iter().chain(bound) {
        let g = grid(cluster, config, &p.pod)?;
        cells += g.rows.len() * g.columns.len().max(1);
        if cells > max_cells {
            break;
        }
        grids.insert(p.pod.clone(), g);
    }
    explanation.grids = grids;
    Ok(explanation)
}

/// The view of one pod's outcome.
pub fn pod_view(p: &PodOutcome) -> PodView {
    PodView {
        pod: p.pod.clone(),
        node: p.node.clone(),
        message: scheduler_message(p),
        nodes: p
            .nodes
            .iter()
            .map(|n| NodeView {
                node: n.node.clone(),
                code: n.status.code.as_str(),
                reason: n.status.reason.clone(),
                score: n.score,
            })
            .collect(),
        allocations: p
            .allocations
            .iter()
            .flat_map(|a| {
                a.allocation.devices.results.iter().map(move |r| {
                    let share = r.share_id.as_deref().map(|s| format!("#{s}")).unwrap_or_default();
                    format!("{}: {}/{}/{}{share}", a.claim, r.driver, r.pool, r.device)
                })
            })
            .collect(),
        error: p.error.clone(),
        deallocated: p.deallocated.clone(),
    }
}

/// What kube-scheduler reports for the pod: `bound to NODE`, or its FitError text: `0/N nodes
/// are available: ` then PreFilter's message, or the distinct Filter reasons each with the
/// number of nodes giving it, sorted as text.
///
/// ```
/// use std::sync::Arc;
/// use sharing_affinity_core::Status;
/// use sharing_affinity_replay::cycle::{NodeOutcome, PodOutcome};
/// use sharing_affinity_replay::explain::scheduler_message;
/// let node = |name: &str, reason: &str| NodeOutcome {
///     node: name.into(),
///     status: Arc::new(Status::unschedulable(reason)),
///     score: None,
/// };
/// let pod = PodOutcome {
///     pod: "ns/p".into(),
///     node: None,
///     nodes: vec![node("a", "full"), node("b", "locked"), node("c", "full")],
///     allocations: vec![],
///     error: None,
///     deallocated: None,
///     extended: None,
/// };
/// assert_eq!(scheduler_message(&pod), "0/3 nodes are available: 1 locked, 2 full.");
/// ```
pub fn scheduler_message(p: &PodOutcome) -> String {
    if let Some(node) = &p.node {
        return format!("bound to {node}");
    }
    if let Some(error) = &p.error {
        return format!("error: {error}");
    }
    let mut text = format!("0/{} nodes are available:", p.nodes.len());
    let all_same = p.nodes.windows(2).all(|w| w[0].status == w[1].status);
    let prefilter =
        !p.nodes.is_empty() && all_same && p.nodes[0].status.code == Code::UnschedulableAndUnresolvable;
    let mut counts: BTreeMap<&str, usize> = BTreeMap::new();
    for n in &p.nodes {
        *counts.entry(n.status.reason.as_str()).or_default() += 1;
    }
    let reasons: BTreeSet<String> = if prefilter {
        [p.nodes[0].status.reason.clone()].into()
    } else {
        counts.iter().map(|(reason, n)| format!("{n} {reason}")).collect()
    };
    if !reasons.is_empty() {
        let reasons: Vec<String> = reasons.into_iter().collect();
        text.push_str(&format!(" {}.", reasons.join(", ")));
    }
    if let Some(claim) = &p.deallocated {
        text.push_str(&format!(" PostFilter deallocated ResourceClaim {claim}."));
    }
    text
}

/// The objects after the replay: each bound pod's allocations recorded in its claims, each claim
/// PostFilter deallocated without its allocation.
fn state_after(cluster: &Cluster, pods: &[PodOutcome]) -> Vec<Object> {
    let mut objects = cluster.objects.clone();
    advance(&mut objects, pods);
    objects
}

/// Applies the outcomes of `pods` to `objects`, in order.
fn advance(objects: &mut Vec<Object>, pods: &[PodOutcome]) {
    for p in pods {
        if let Some(claim) = &p.deallocated {
            for o in objects.iter_mut() {
                if let Object::ResourceClaim(c) = o
                    && object_key(&c.metadata.namespace, &c.metadata.name) == *claim
                {
                    c.status.allocation = None;
                    c.status.reserved_for.clear();
                }
            }
        }
        if p.node.is_some() {
            // A claim the auditor cannot place is one the grid cannot show either.
            let _unplaced = audit::record_allocations(objects, &p.pod, &p.allocations);
        }
    }
}

/// The newest generation's slices, by pool.
fn current_slices(objects: &[Object]) -> Vec<&ResourceSlice> {
    let mut newest: HashMap<(&str, &str), i64> = HashMap::new();
    for o in objects {
        if let Object::ResourceSlice(s) = o {
            let g = newest
                .entry((&s.spec.driver, &s.spec.pool.name))
                .or_insert(i64::MIN);
            *g = (*g).max(s.spec.pool.generation);
        }
    }
    objects
        .iter()
        .filter_map(|o| match o {
            Object::ResourceSlice(s)
                if newest[&(s.spec.driver.as_str(), s.spec.pool.name.as_str())] == s.spec.pool.generation =>
            {
                Some(&**s)
            }
            _ => None,
        })
        .collect()
}

/// `driver/pool/device`.
fn device_id(slice: &ResourceSlice, device: &Device) -> String {
    format!("{}/{}/{}", slice.spec.driver, slice.spec.pool.name, device.name)
}

/// The claims (`namespace/name`) whose allocations hold each device (admin access does not hold).
fn holders(objects: &[Object]) -> HashMap<String, Vec<String>> {
    let mut out: HashMap<String, Vec<String>> = HashMap::new();
    for o in objects {
        let Object::ResourceClaim(c) = o else { continue };
        let Some(allocation) = &c.status.allocation else {
            continue;
        };
        let key = object_key(&c.metadata.namespace, &c.metadata.name);
        for r in &allocation.devices.results {
            if r.admin_access == Some(true) {
                continue;
            }
            let list = out
                .entry(format!("{}/{}/{}", r.driver, r.pool, r.device))
                .or_default();
            if !list.contains(&key) {
                list.push(key.clone());
            }
        }
    }
    out
}

/// The lock of every device that allows multiple allocations, by `driver/pool/device`, with its
/// node: the plugin's lock state, the claims of `objects` holding it.
fn lock_states(plugin: &mut Plugin, objects: &[Object]) -> BTreeMap<String, (Option<String>, Lock)> {
    let holding = holders(objects);
    let mut nodes: HashMap<String, Option<String>> = HashMap::new();
    for slice in current_slices(objects) {
        for device in &slice.spec.devices {
            let node = slice.spec.node_name.as_ref().or(device.node_name.as_ref());
            nodes.insert(device_id(slice, device), node.map(|n| n.to_string()));
        }
    }
    lock_states_raw(plugin, objects)
        .into_iter()
        .map(|(id, state)| {
            let lock = lock_of(state, holding.get(&id));
            (id.clone(), (nodes.remove(&id).flatten(), lock))
        })
        .collect()
}

fn lock_of(state: LockState, holders: Option<&Vec<String>>) -> Lock {
    let (state, values) = match state {
        LockState::Clean => ("clean", String::new()),
        LockState::Locked(values) => ("locked", affinity::show(&values)),
        LockState::Unreconstructable => ("unreconstructable", String::new()),
    };
    let mut holders = holders.cloned().unwrap_or_default();
    holders.sort();
    Lock {
        state,
        values,
        holders,
    }
}

/// One pending request of the pod: its claim, its name in results (`req` or `req/sub`), and what
/// the probe needs of it.
struct Request<'a> {
    claim: String,
    name: String,
    tolerations: &'a [DeviceToleration],
    capacity: Option<&'a sharing_affinity_core::model::CapacityRequirements>,
    admin: bool,
}

/// The pod's claims (`namespace/name`) with the claim object when it exists: the named claims, and
/// the claims generated from templates as `<pod>-<entry>`.
fn claims_of(pod: &Pod, objects: &[Object]) -> Vec<(String, Option<ResourceClaim>)> {
    let ns = &pod.metadata.namespace;
    pod.spec
        .resource_claims
        .iter()
        .map(|entry| {
            let name = match &entry.resource_claim_name {
                Some(name) => name.clone(),
                None => format!("{}-{}", pod.metadata.name, entry.name),
            };
            let key = object_key(ns, &name);
            let claim = objects.iter().find_map(|o| match o {
                Object::ResourceClaim(c) if object_key(&c.metadata.namespace, &c.metadata.name) == key => {
                    Some((**c).clone())
                }
                _ => None,
            });
            let claim = claim.or_else(|| {
                let template = entry.resource_claim_template_name.as_deref()?;
                let template_key = object_key(ns, template);
                objects.iter().find_map(|o| match o {
                    Object::ResourceClaimTemplate(t) if o.key() == template_key => Some(ResourceClaim {
                        spec: t.spec.spec.clone(),
                        ..Default::default()
                    }),
                    _ => None,
                })
            });
            (key, claim)
        })
        .collect()
}

/// The pending requests of the pod's unallocated claims.
fn requests_of<'a>(claims: &'a [(String, Option<ResourceClaim>)]) -> Vec<Request<'a>> {
    let mut out = Vec::new();
    for (key, claim) in claims {
        let Some(claim) = claim else { continue };
        if claim.status.allocation.is_some() {
            continue;
        }
        for r in &claim.spec.devices.requests {
            if let Some(e) = &r.exactly {
                out.push(Request {
                    claim: key.clone(),
                    name: r.name.clone(),
                    tolerations: &e.tolerations,
                    capacity: e.capacity.as_ref(),
                    admin: e.admin_access == Some(true),
                });
            }
            for sub in &r.first_available {
                out.push(Request {
                    claim: key.clone(),
                    name: format!("{}/{}", r.name, sub.name),
                    tolerations: &sub.tolerations,
                    capacity: sub.capacity.as_ref(),
                    admin: false,
                });
            }
        }
    }
    out
}

/// One device of the grid: where it is and the probe's result for it.
struct Probed<'a> {
    slice: &'a ResourceSlice,
    device: &'a Device,
    id: String,
}

/// The devices a node can use: those of slices for the node, for all nodes, or whose node
/// selector picks it (per slice, or per device with `perDeviceNodeSelection`).
fn devices_of<'a>(node: Option<&Node>, name: &str, slices: &[&'a ResourceSlice]) -> Vec<Probed<'a>> {
    let picks = |node_name: Option<&str>,
                 all: Option<bool>,
                 selector: Option<&sharing_affinity_core::model::NodeSelector>| {
        if node_name == Some(name) || all == Some(true) {
            return true;
        }
        match (selector, node) {
            (Some(sel), Some(node)) => node_selector::matches(sel, node).unwrap_or(false),
            _ => false,
        }
    };
    let mut out = Vec::new();
    for slice in slices {
        let per_device = slice.spec.per_device_node_selection == Some(true);
        for device in &slice.spec.devices {
            let usable = if per_device {
                picks(
                    device.node_name.as_deref(),
                    device.all_nodes,
                    device.node_selector.as_ref(),
                )
            } else {
                picks(
                    slice.spec.node_name.as_deref(),
                    slice.spec.all_nodes,
                    slice.spec.node_selector.as_ref(),
                )
            };
            if usable {
                out.push(Probed {
                    slice,
                    device,
                    id: device_id(slice, device),
                });
            }
        }
    }
    out
}

/// The grid for `pod` (`namespace/name`, one of the cluster's pending pods): the cluster is
/// replayed up to the pod's cycle, then each of its pending requests is probed on every device.
pub fn grid(cluster: &Cluster, config: &str, pod: &str) -> Result<Grid, String> {
    let Some(position) = cluster.pending.iter().position(|p| p == pod) else {
        return Err(format!("{pod} is not a pending pod of the cluster"));
    };
    let audit_config = Config::from_json(config).map_err(|e| format!("invalid plugin configuration: {e}"))?;
    let (mut plugin, _) = loaded(cluster, config)?;
    // The cycles before the pod's, then the pod's own (its Filter codes and allocation).
    let mut outcomes = cycle::schedule_some(&mut plugin, cluster, &cluster.pending[..position], &|| 0);
    let mut state = cluster.objects.clone();
    advance(&mut state, &outcomes);
    let locks: BTreeMap<String, LockState> = lock_states_raw(&mut plugin, &state);
    let own = cycle::schedule(&mut plugin, pod, &cluster.nodes, &mut Default::default(), &|| 0);
    outcomes.clear();

    let pod_object = cluster.objects.iter().find_map(|o| match o {
        Object::Pod(p) if o.key() == pod => Some(&**p),
        _ => None,
    });
    let Some(pod_object) = pod_object else {
        return Err(format!("{pod}: no such Pod object"));
    };
    let claims = claims_of(pod_object, &state);
    let requests = requests_of(&claims);
    let slices = current_slices(&state);
    let nodes: HashMap<&str, &Node> = state
        .iter()
        .filter_map(|o| match o {
            Object::Node(n) => Some((n.metadata.name.as_str(), &**n)),
            _ => None,
        })
        .collect();
    let chosen: BTreeSet<String> = own
        .allocations
        .iter()
        .flat_map(|a| a.allocation.devices.results.iter())
        .map(|r| format!("{}/{}/{}", r.driver, r.pool, r.device))
        .collect();

    // Per request and device: the outcome and why.
    let cel = CelCache::new();
    let all_devices: BTreeMap<String, (&ResourceSlice, &Device)> = slices
        .iter()
        .flat_map(|s| s.spec.devices.iter().map(move |d| (device_id(s, d), (*s, &**d))))
        .collect();
    let taint_rules = taint_rules(&state);
    let base: BTreeSet<Violation> = audit::audit_with(&state, &audit_config, &cel)
        .into_iter()
        .collect();
    let mut found: BTreeMap<String, Vec<(Outcome, String)>> = BTreeMap::new();
    for request in &requests {
        let verdicts = probe(&state, &audit_config, &cel, &base, request, pod, &all_devices);
        for (id, (slice, device)) in &all_devices {
            let mut outcome = verdicts
                .get(id)
                .cloned()
                .unwrap_or_else(|| (Outcome::Fits, String::new()));
            if outcome.0 >= Outcome::Fits
                && let Some(taint) = untolerated_taint(slice, device, request, &taint_rules, &cel)
            {
                outcome = (Outcome::Taint, taint);
            }
            if matches!(outcome.0, Outcome::Fits | Outcome::Lock | Outcome::Affinity)
                && device.allow_multiple_allocations == Some(true)
                && locks.get(id) == Some(&LockState::Unreconstructable)
                && !request.admin
            {
                outcome = (
                    Outcome::Unreconstructable,
                    "shared by allocations whose affinity cannot be reconstructed".into(),
                );
            }
            if outcome.0 == Outcome::Fits
                && let Some(LockState::Locked(values)) = locks.get(id)
            {
                outcome.1 = format!("joins the lock {}", affinity::show(values));
            }
            let line = match outcome.1.is_empty() {
                true => format!("{} {}: {}", request.claim, request.name, outcome.0.as_str()),
                false => format!(
                    "{} {}: {}: {}",
                    request.claim,
                    request.name,
                    outcome.0.as_str(),
                    outcome.1
                ),
            };
            found.entry(id.clone()).or_default().push((outcome.0, line));
        }
    }

    let mut columns: BTreeSet<String> = BTreeSet::new();
    let per_node: Vec<(String, Vec<Probed<'_>>)> = cluster
        .nodes
        .iter()
        .map(|n| {
            let devices = devices_of(nodes.get(n.as_str()).copied(), n, &slices);
            columns.extend(devices.iter().map(|p| column(p)));
            (n.clone(), devices)
        })
        .collect();
    let columns: Vec<String> = columns.into_iter().collect();
    let labels: Vec<String> = columns
        .iter()
        .map(|c| {
            let name = c.split_once(' ').map_or(c.as_str(), |(_, n)| n);
            let shared = columns
                .iter()
                .filter(|o| o.ends_with(&format!(" {name}")))
                .count()
                > 1;
            if shared {
                c.replace(' ', "/")
            } else {
                name.to_string()
            }
        })
        .collect();
    let codes: HashMap<&str, &'static str> = own
        .nodes
        .iter()
        .map(|n| (n.node.as_str(), n.status.code.as_str()))
        .collect();
    let rows = per_node
        .into_iter()
        .map(|(node, devices)| {
            let cells = columns
                .iter()
                .map(|col| {
                    let p = devices.iter().find(|p| column(p) == *col)?;
                    let lines = found.get(&p.id).cloned().unwrap_or_default();
                    let best = if chosen.contains(&p.id) && own.node.as_deref() == Some(node.as_str()) {
                        Outcome::Chosen
                    } else {
                        lines.iter().map(|(o, _)| *o).min().unwrap_or(Outcome::Other)
                    };
                    Some(Cell {
                        device: p.id.clone(),
                        outcome: if requests.is_empty() {
                            "none"
                        } else {
                            best.as_str()
                        },
                        detail: lines.into_iter().map(|(_, l)| l).collect(),
                    })
                })
                .collect();
            GridRow {
                code: codes.get(node.as_str()).copied().unwrap_or("Unschedulable"),
                node,
                cells,
            }
        })
        .collect();
    let note = requests
        .is_empty()
        .then(|| "the pod has no pending claim: nothing to allocate".to_string());
    Ok(Grid {
        pod: pod.to_string(),
        requests: requests
            .iter()
            .map(|r| format!("{} {}", r.claim, r.name))
            .collect(),
        columns: labels,
        rows,
        note,
    })
}

/// A grid column: the device's name, with its driver when the pool is not the node's own.
fn column(p: &Probed<'_>) -> String {
    format!("{} {}", p.slice.spec.driver, p.device.name)
}

/// The plugin's lock state of every shareable device of `objects`.
fn lock_states_raw(plugin: &mut Plugin, objects: &[Object]) -> BTreeMap<String, LockState> {
    let mut out = BTreeMap::new();
    for slice in current_slices(objects) {
        for device in &slice.spec.devices {
            if device.allow_multiple_allocations == Some(true) {
                let key = DeviceKey::new(&slice.spec.driver, &slice.spec.pool.name, &device.name);
                out.insert(device_id(slice, device), plugin.lock_state(&key));
            }
        }
    }
    out
}

/// Gives `request` every device at once (one result each, shared devices with the capacity the
/// request consumes) and reads the violations this adds, per device: the worst by
/// [`Outcome::precedence`], with its message.
fn probe(
    state: &[Object],
    config: &Config,
    cel: &CelCache,
    base: &BTreeSet<Violation>,
    request: &Request<'_>,
    pod: &str,
    devices: &BTreeMap<String, (&ResourceSlice, &Device)>,
) -> HashMap<String, (Outcome, String)> {
    let results: Vec<DeviceRequestAllocationResult> = devices
        .values()
        .enumerate()
        .map(|(i, (slice, device))| probe_result(request, slice, device, i))
        .collect();
    let mut objects = state.to_vec();
    let allocation = ClaimAllocation {
        claim: request.claim.clone(),
        allocation: AllocationResult {
            devices: DeviceAllocationResult {
                results,
                config: Vec::new(),
            },
            ..Default::default()
        },
    };
    let _unplaced = audit::record_allocations(&mut objects, pod, &[allocation]);
    let mut out: HashMap<String, (Outcome, String)> = HashMap::new();
    for v in audit::audit_with(&objects, config, cel) {
        // Constraints compare the probe's devices with each other, which no allocation does.
        if base.contains(&v) || v.rule == Rule::Constraint || !v.claims.contains(&request.claim) {
            continue;
        }
        let outcome = Outcome::of_rule(v.rule);
        let ids: Vec<&String> = match v.rule {
            // A counter set is named by its pool: every probed device of the pool that
            // consumes from it is short of it.
            Rule::Counters => devices
                .iter()
                .filter(|(id, (_, d))| {
                    id.starts_with(&format!("{}/", v.device)) && !d.consumes_counters.is_empty()
                })
                .map(|(id, _)| id)
                .collect(),
            _ => devices.keys().filter(|id| **id == v.device).collect(),
        };
        for id in ids {
            let entry = out.entry(id.clone()).or_insert((outcome, v.message.clone()));
            if outcome.precedence() < entry.0.precedence() {
                *entry = (outcome, v.message.clone());
            }
        }
    }
    out
}

/// The probe's result for one device.
fn probe_result(
    request: &Request<'_>,
    slice: &ResourceSlice,
    device: &Device,
    i: usize,
) -> DeviceRequestAllocationResult {
    let shared = device.allow_multiple_allocations == Some(true);
    let consumed = shared.then(|| {
        device
            .capacity
            .iter()
            .map(|(name, cap)| {
                let wanted = request.capacity.and_then(|c| c.requests.get(name));
                (name.clone(), capacity::consumed_capacity(wanted, cap))
            })
            .collect()
    });
    DeviceRequestAllocationResult {
        request: request.name.as_str().into(),
        driver: slice.spec.driver.as_str().into(),
        pool: slice.spec.pool.name.as_str().into(),
        device: device.name.as_str().into(),
        admin_access: request.admin.then_some(true),
        share_id: shared.then(|| format!("00000000-0000-0000-0000-{i:012}")),
        consumed_capacity: consumed,
        ..Default::default()
    }
}

/// The cluster's DeviceTaintRules, resolved against its classes.
fn taint_rules(objects: &[Object]) -> Vec<TaintRule> {
    let classes: HashMap<String, DeviceClass> = objects
        .iter()
        .filter_map(|o| match o {
            Object::DeviceClass(c) => Some((c.metadata.name.to_string(), (**c).clone())),
            _ => None,
        })
        .collect();
    objects
        .iter()
        .filter_map(|o| match o {
            Object::DeviceTaintRule(r) => TaintRule::resolve(r, &classes),
            _ => None,
        })
        .collect()
}

/// The first taint of the device (published, or put on it by a DeviceTaintRule) that blocks
/// allocation and that the request does not tolerate.
fn untolerated_taint(
    slice: &ResourceSlice,
    device: &Device,
    request: &Request<'_>,
    rules: &[TaintRule],
    cel: &CelCache,
) -> Option<String> {
    let mut all: Vec<(String, sharing_affinity_core::model::DeviceTaint)> = device
        .taints
        .iter()
        .map(|t| ("taint".to_string(), t.clone()))
        .collect();
    let prepared: std::cell::OnceCell<Result<CelDevice, String>> = std::cell::OnceCell::new();
    let ids = (
        slice.spec.driver.as_str(),
        slice.spec.pool.name.as_str(),
        device.name.as_str(),
    );
    for rule in rules {
        let cel_device = || {
            prepared
                .get_or_init(|| {
                    let attributes: Vec<(&str, sharing_affinity_core::model::AttributeValue)> = device
                        .attributes
                        .iter()
                        .filter_map(|(n, a)| a.value().map(|v| (&**n, v)))
                        .collect();
                    Ok(CelDevice::from_entries(
                        ids.0,
                        attributes.iter().map(|(n, v)| (*n, v)),
                        device.capacity.iter().map(|(n, c)| (n.as_str(), &c.value)),
                        device.allow_multiple_allocations == Some(true),
                    ))
                })
                .as_ref()
                .map_err(Clone::clone)
        };
        if rule.matches(ids, cel, cel_device) == Ok(true) {
            all.push((rule.label.clone(), rule.taint.clone()));
        }
    }
    all.into_iter()
        .find(|(_, t)| {
            taints::effect_blocks_allocation(&t.effect)
                && !taints::all_taints_tolerated(std::slice::from_ref(t), request.tolerations)
        })
        .map(|(source, t)| format!("{source} {}={}:{} not tolerated", t.key, t.value, t.effect))
}
