//! The scheduling-cycle API: the contract the component, the KSWE module and the native host call.
//!
//! [`Plugin`] holds the cluster's DRA objects, updated incrementally by object events
//! ([`Plugin::apply`]), and the current scheduling cycle. Per pod the scheduler calls
//! [`Plugin::prefilter`] once, then [`Plugin::filter`] per node, [`Plugin::score`] per feasible
//! node, [`Plugin::reserve`] on the chosen node, and [`Plugin::bind`] (what PreBind writing
//! `status.allocation` does) or [`Plugin::unreserve`].
//!
//! State derived from objects is maintained as follows:
//! - allocated devices, shared allocations and consumed capacity are updated per claim event
//!   (the old contribution is removed, the new one added);
//! - sharing-affinity locks are derived per device from the claims holding it, cached, and
//!   recomputed only for devices whose holders changed;
//! - the slice index is rebuilt lazily, on the first cycle after a slice event.

use std::cell::RefCell;
use std::collections::{BTreeMap, BTreeSet, HashMap};

use crate::affinity::{self, Config, ExtId, Extractors, LockState, Outcome, Values};
use crate::allocator::{
    self, AllocOutcome, AllocatedState, ClaimAffinity, ClaimInput, ClaimResult, LockSource,
};
use crate::cel::CelCache;
use crate::error::Error;
use crate::index::{DevIdx, DeviceKey, Index, NodePool};
use crate::model::{
    AllocationResult, DeviceClass, Node, OwnerReference, Pod, PodResourceClaimStatus, ResourceClaim,
    ResourceClaimConsumerReference, ResourceClaimTemplate, ResourceSlice,
};
use crate::node_selector;
use crate::object::{Object, decode_object, object_key, parse_objects};
use crate::quantity::Quantity;
use crate::status::{Code, Status};

/// Kind of an object event.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EventKind {
    /// Object created (an existing object is replaced).
    Add,
    /// Object updated (a missing object is created).
    Update,
    /// Object deleted (only kind, namespace and name are read).
    Delete,
}

/// The allocation chosen for one claim of the pod.
#[derive(Clone, Debug, PartialEq)]
pub struct ClaimAllocation {
    /// `namespace/name` of the claim.
    pub claim: String,
    /// What PreBind writes to `status.allocation`.
    pub allocation: AllocationResult,
}

/// A claim that holds a shared device, with the affinity values it locks it to when known
/// without CEL (set by Reserve from Filter's computation).
#[derive(Clone, Debug)]
struct Holder {
    request: String,
    values: Option<Values>,
}

/// Slice-derived state, rebuilt when slices or the configuration change.
struct Derived {
    index: Index,
    extractors: Extractors,
    node_pools: RefCell<HashMap<String, Result<Vec<NodePool>, String>>>,
}

/// One claim of the pod in the current cycle.
#[derive(Clone, Debug)]
struct CycleClaim {
    key: String,
    claim: ResourceClaim,
    /// Generated from a template in this cycle (created on bind).
    generated_for: Option<String>,
}

/// Filter's result for one node.
#[derive(Clone, Debug)]
struct NodeResult {
    status: Status,
    allocation: Vec<ClaimResult>,
}

struct Cycle {
    pod: String,
    status: Status,
    claims: Vec<CycleClaim>,
    /// Indexes into `claims` of the claims that need allocation.
    pending: Vec<usize>,
    affinity: Vec<ClaimAffinity>,
    nodes: HashMap<String, NodeResult>,
    reserved: Option<(String, Vec<ClaimAllocation>)>,
}

/// Plugin state: the cluster's DRA objects, indexed, plus the current scheduling cycle.
pub struct Plugin {
    config: Config,
    cel: CelCache,
    nodes: BTreeMap<String, Node>,
    pods: BTreeMap<String, Pod>,
    classes: HashMap<String, DeviceClass>,
    slices: BTreeMap<String, ResourceSlice>,
    claims: BTreeMap<String, ResourceClaim>,
    templates: BTreeMap<String, ResourceClaimTemplate>,
    /// Reserved but not yet bound claims (the scheduler's in-flight allocations).
    inflight: BTreeMap<String, ResourceClaim>,
    derived: Option<Derived>,
    allocated: AllocatedState,
    holders: HashMap<DeviceKey, BTreeMap<String, Holder>>,
    /// Affinity values fixed by our own Reserve, per (claim, device): no second CEL pass.
    known_values: HashMap<(String, DeviceKey), Values>,
    locks: RefCell<HashMap<DeviceKey, LockState>>,
    cycle: Option<Cycle>,
}

impl Plugin {
    /// A plugin with the given JSON configuration (`{"sharingAffinity": [...]}`; empty = none).
    pub fn new(config_json: &str) -> Result<Plugin, Error> {
        Ok(Plugin {
            config: Config::from_json(config_json)?,
            cel: CelCache::new(),
            nodes: BTreeMap::new(),
            pods: BTreeMap::new(),
            classes: HashMap::new(),
            slices: BTreeMap::new(),
            claims: BTreeMap::new(),
            templates: BTreeMap::new(),
            inflight: BTreeMap::new(),
            derived: None,
            allocated: AllocatedState::default(),
            holders: HashMap::new(),
            known_values: HashMap::new(),
            locks: RefCell::new(HashMap::new()),
            cycle: None,
        })
    }

    /// Applies one object event. The object is Kubernetes JSON.
    pub fn apply(&mut self, kind: EventKind, object_json: &str) -> Result<(), Error> {
        if object_json.len() > crate::object::MAX_INPUT_BYTES {
            return Err(Error::Json(format!(
                "object is {} bytes, more than the limit of {}",
                object_json.len(),
                crate::object::MAX_INPUT_BYTES
            )));
        }
        let value: serde_json::Value =
            serde_json::from_str(object_json).map_err(|e| Error::Json(e.to_string()))?;
        if kind == EventKind::Delete {
            return self.delete(&value);
        }
        match decode_object(value, 0)? {
            Some(o) => {
                self.upsert(o);
                Ok(())
            }
            None => Ok(()),
        }
    }

    /// Loads a document (single object, `List`, or stream) as `Add` events; returns one error per
    /// object that failed (the others load).
    pub fn load(&mut self, json: &str) -> Result<Vec<Error>, Error> {
        let parsed = parse_objects(json)?;
        for o in parsed.objects {
            self.upsert(o);
        }
        Ok(parsed.errors)
    }

    /// Inserts or replaces a decoded object.
    pub fn upsert(&mut self, object: Object) {
        let key = object.key();
        match object {
            Object::Node(n) => {
                self.nodes.insert(key.clone(), *n);
                if let Some(d) = &self.derived {
                    d.node_pools.borrow_mut().remove(&key);
                }
            }
            Object::Pod(p) => {
                self.pods.insert(key, *p);
            }
            Object::DeviceClass(c) => {
                self.classes.insert(key, *c);
            }
            Object::ResourceSlice(s) => {
                self.slices.insert(key, *s);
                self.derived = None;
            }
            Object::ResourceClaimTemplate(t) => {
                self.templates.insert(key, *t);
            }
            Object::ResourceClaim(c) => {
                if let Some(old) = self.inflight.remove(&key) {
                    self.contribute(&key, &old, false);
                }
                if let Some(old) = self.claims.remove(&key) {
                    self.contribute(&key, &old, false);
                }
                self.contribute(&key, &c, true);
                self.claims.insert(key, *c);
            }
        }
    }

    fn delete(&mut self, value: &serde_json::Value) -> Result<(), Error> {
        let kind_name = value.get("kind").and_then(|k| k.as_str()).unwrap_or("");
        let meta = value.get("metadata");
        let name = meta
            .and_then(|m| m.get("name"))
            .and_then(|n| n.as_str())
            .unwrap_or("");
        let ns = meta
            .and_then(|m| m.get("namespace"))
            .and_then(|n| n.as_str())
            .unwrap_or("");
        if name.is_empty() {
            return Err(Error::Field {
                object: format!("{kind_name} (delete)"),
                path: "metadata.name".into(),
                reason: "missing or empty".into(),
            });
        }
        let key = object_key(ns, name);
        match kind_name {
            "Node" => {
                self.nodes.remove(&key);
                if let Some(d) = &self.derived {
                    d.node_pools.borrow_mut().remove(&key);
                }
            }
            "Pod" => {
                self.pods.remove(&key);
            }
            "DeviceClass" => {
                self.classes.remove(&key);
            }
            "ResourceSlice" if self.slices.remove(&key).is_some() => {
                self.derived = None;
            }
            "ResourceClaimTemplate" => {
                self.templates.remove(&key);
            }
            "ResourceClaim" => {
                if let Some(old) = self.claims.remove(&key) {
                    self.contribute(&key, &old, false);
                }
                if let Some(old) = self.inflight.remove(&key) {
                    self.contribute(&key, &old, false);
                }
                self.known_values.retain(|(c, _), _| *c != key);
            }
            _ => {}
        }
        Ok(())
    }

    /// Adds (or removes) a claim's allocation to the allocated state and the device holders.
    fn contribute(&mut self, key: &str, claim: &ResourceClaim, add: bool) {
        let Some(alloc) = &claim.status.allocation else {
            return;
        };
        for r in &alloc.devices.results {
            if r.admin_access == Some(true) {
                continue;
            }
            let dk = DeviceKey::new(&r.driver, &r.pool, &r.device);
            if r.share_id.is_some() {
                bump(&mut self.allocated.shared, &dk, add);
                if let Some(c) = &r.consumed_capacity {
                    let slot = self.allocated.capacity.entry(dk.clone()).or_default();
                    for (n, q) in c {
                        let cur = slot.entry(n.clone()).or_insert_with(|| Quantity::from_i64(0));
                        let next = if add {
                            cur.checked_add(q)
                        } else {
                            cur.checked_sub(q)
                        };
                        if let Some(v) = next {
                            *cur = v;
                        }
                    }
                    slot.retain(|_, v| !v.is_zero());
                    if slot.is_empty() {
                        self.allocated.capacity.remove(&dk);
                    }
                }
                let holders = self.holders.entry(dk.clone()).or_default();
                if add {
                    let values = self.known_values.get(&(key.to_string(), dk.clone())).cloned();
                    holders.insert(
                        key.to_string(),
                        Holder {
                            request: r.request.clone(),
                            values,
                        },
                    );
                } else {
                    holders.remove(key);
                }
                if holders.is_empty() {
                    self.holders.remove(&dk);
                }
                self.locks.borrow_mut().remove(&dk);
            } else {
                bump(&mut self.allocated.dedicated, &dk, add);
            }
        }
    }

    fn derived(&mut self) -> &Derived {
        if self.derived.is_none() {
            let index = Index::build(self.slices.values());
            let extractors = Extractors::build(&index, &self.config, &self.cel);
            self.locks.borrow_mut().clear();
            self.derived = Some(Derived {
                index,
                extractors,
                node_pools: RefCell::new(HashMap::new()),
            });
        }
        self.derived.as_ref().expect("derived state was just built")
    }

    /// The lock state of a device, from the claims holding it.
    pub fn lock_state(&mut self, device: &DeviceKey) -> LockState {
        self.derived();
        let d = self.derived.as_ref().expect("built above");
        match d.index.by_key.get(device) {
            Some(&idx) => self.lock_view(d).lock(idx),
            None => LockState::Clean,
        }
    }

    fn lock_view<'a>(&'a self, d: &'a Derived) -> Locks<'a> {
        Locks {
            plugin: self,
            derived: d,
        }
    }

    /// Names of all known nodes, sorted.
    pub fn node_names(&self) -> Vec<String> {
        self.nodes.keys().cloned().collect()
    }

    /// A claim as currently stored (allocated claims include our bound allocations).
    pub fn claim(&self, key: &str) -> Option<&ResourceClaim> {
        self.claims.get(key)
    }

    /// A pod as currently stored.
    pub fn pod(&self, key: &str) -> Option<&Pod> {
        self.pods.get(key)
    }

    /// PreFilter for the pod `namespace/name`: resolves its claims and starts a cycle.
    pub fn prefilter(&mut self, pod: &str) -> Status {
        if let Some(c) = &self.cycle
            && c.reserved.is_some()
        {
            // A new cycle drops an unfinished reservation, as the scheduler's Unreserve would.
            let node = c.reserved.as_ref().map(|r| r.0.clone()).unwrap_or_default();
            self.unreserve(&node);
        }
        self.cycle = None;
        let (status, cycle) = match self.prepare(pod) {
            Ok(c) => (Status::success(), c),
            Err(s) => {
                let c = Cycle {
                    pod: pod.to_string(),
                    status: s.clone(),
                    claims: Vec::new(),
                    pending: Vec::new(),
                    affinity: Vec::new(),
                    nodes: HashMap::new(),
                    reserved: None,
                };
                (s, c)
            }
        };
        self.cycle = Some(cycle);
        status
    }

    fn prepare(&mut self, pod_key: &str) -> Result<Cycle, Status> {
        let pod = self
            .pods
            .get(pod_key)
            .ok_or_else(|| Status::error(format!("pod {pod_key} not found")))?
            .clone();
        let ns = pod.metadata.namespace.clone();
        let mut claims = Vec::new();
        for entry in &pod.spec.resource_claims {
            let (name, generated) = match (&entry.resource_claim_name, &entry.resource_claim_template_name) {
                (Some(n), None) => (n.clone(), None),
                (None, Some(t)) => {
                    match pod
                        .status
                        .resource_claim_statuses
                        .iter()
                        .find(|s| s.name == entry.name)
                    {
                        Some(st) => match &st.resource_claim_name {
                            Some(n) => (n.clone(), None),
                            None => continue,
                        },
                        None => (format!("{}-{}", pod.metadata.name, entry.name), Some(t.clone())),
                    }
                }
                _ => {
                    return Err(Status::unresolvable(format!(
                        "pod {pod_key}: spec.resourceClaims[{}]: exactly one of resourceClaimName and resourceClaimTemplateName must be set",
                        entry.name
                    )));
                }
            };
            let key = object_key(&ns, &name);
            let claim = match (self.claims.get(&key), &generated) {
                (Some(c), _) => c.clone(),
                (None, Some(template)) => {
                    let tkey = object_key(&ns, template);
                    let t = self.templates.get(&tkey).ok_or_else(|| {
                        Status::unresolvable(format!("resource claim template {tkey} not found"))
                    })?;
                    let mut metadata = t.spec.metadata.clone();
                    metadata.name = name.clone();
                    metadata.namespace = ns.clone();
                    metadata.owner_references = vec![OwnerReference {
                        api_version: "v1".into(),
                        kind: "Pod".into(),
                        name: pod.metadata.name.clone(),
                        uid: pod.metadata.uid.clone(),
                        controller: Some(true),
                    }];
                    ResourceClaim {
                        metadata,
                        spec: t.spec.spec.clone(),
                        ..Default::default()
                    }
                }
                (None, None) => {
                    return Err(Status::unresolvable(format!(
                        "waiting for resource claim {key} to be created"
                    )));
                }
            };
            if claim.metadata.deletion_timestamp.is_some() {
                return Err(Status::unresolvable(format!(
                    "resource claim {key} is being deleted"
                )));
            }
            claims.push(CycleClaim {
                key,
                claim,
                generated_for: generated.map(|_| pod_key.to_string()),
            });
        }
        let pending: Vec<usize> = (0..claims.len())
            .filter(|&i| claims[i].claim.status.allocation.is_none())
            .collect();
        for &i in &pending {
            let c = &claims[i];
            for r in &c.claim.spec.devices.requests {
                let classes = r
                    .exactly
                    .iter()
                    .map(|e| e.device_class_name.as_str())
                    .chain(r.first_available.iter().map(|s| s.device_class_name.as_str()));
                for class in classes {
                    if !self.classes.contains_key(class) {
                        return Err(Status::unresolvable(format!(
                            "claim {}, request {}: device class {class} not found",
                            c.key, r.name
                        )));
                    }
                }
            }
        }
        self.derived();
        let d = self.derived.as_ref().expect("built above");
        let mut affinity = Vec::with_capacity(pending.len());
        for &i in &pending {
            affinity
                .push(claim_affinity(&self.cel, &d.extractors, &claims[i]).map_err(Status::unresolvable)?);
        }
        Ok(Cycle {
            pod: pod_key.to_string(),
            status: Status::success(),
            claims,
            pending,
            affinity,
            nodes: HashMap::new(),
            reserved: None,
        })
    }

    fn cycle(&self, what: &str) -> Result<&Cycle, Status> {
        self.cycle
            .as_ref()
            .ok_or_else(|| Status::error(format!("{what} called before prefilter")))
    }

    /// Filter for one node of the current cycle.
    pub fn filter(&mut self, node: &str) -> Status {
        let result = self.compute(node);
        let status = result.status.clone();
        if let Some(c) = &mut self.cycle {
            c.nodes.insert(node.to_string(), result);
        }
        status
    }

    fn compute(&mut self, node_name: &str) -> NodeResult {
        let fail = |status: Status| NodeResult {
            status,
            allocation: Vec::new(),
        };
        let cycle = match self.cycle("filter") {
            Ok(c) => c,
            Err(s) => return fail(s),
        };
        if !cycle.status.is_success() {
            return fail(cycle.status.clone());
        }
        let Some(node) = self.nodes.get(node_name) else {
            return fail(Status::unresolvable(format!("node {node_name} not found")));
        };
        for c in &cycle.claims {
            if let Some(a) = &c.claim.status.allocation
                && let Some(sel) = &a.node_selector
            {
                match node_selector::matches(sel, node) {
                    Ok(true) => {}
                    Ok(false) => {
                        return fail(Status::unresolvable(format!(
                            "resource claim {} is allocated and not available on node {node_name}",
                            c.key
                        )));
                    }
                    Err(e) => {
                        return fail(Status::error(format!(
                            "claim {}: status.allocation.nodeSelector: {e}",
                            c.key
                        )));
                    }
                }
            }
        }
        if cycle.pending.is_empty() {
            return NodeResult {
                status: Status::success(),
                allocation: Vec::new(),
            };
        }
        let Some(d) = self.derived.as_ref() else {
            return fail(Status::error("internal: slice index missing"));
        };
        let pools = {
            let mut cache = d.node_pools.borrow_mut();
            cache
                .entry(node_name.to_string())
                .or_insert_with(|| d.index.pools_for_node(node))
                .clone()
        };
        let pools = match pools {
            Ok(p) => p,
            Err(e) => return fail(Status::error(e)),
        };
        let inputs: Vec<ClaimInput<'_>> = cycle
            .pending
            .iter()
            .zip(&cycle.affinity)
            .map(|(&i, aff)| ClaimInput {
                key: &cycle.claims[i].key,
                claim: &cycle.claims[i].claim,
                affinity: aff,
            })
            .collect();
        let locks = self.lock_view(d);
        let input = allocator::Input {
            index: &d.index,
            extractors: &d.extractors,
            cel: &self.cel,
            classes: &self.classes,
            allocated: &self.allocated,
            locks: &locks,
            node,
            pools: &pools,
            claims: &inputs,
            consolidate: self.config.consolidate,
        };
        match allocator::allocate(&input) {
            Ok(AllocOutcome::Allocated(a)) => NodeResult {
                status: Status::success(),
                allocation: a,
            },
            Ok(AllocOutcome::Unfit(notes)) => {
                let mut reason = "cannot allocate all claims".to_string();
                if !notes.is_empty() {
                    reason.push_str(": ");
                    reason.push_str(&notes.join("; "));
                }
                fail(Status::unschedulable(reason))
            }
            Err(e) if e.starts_with("invalid resource pool") => fail(Status::unschedulable(e)),
            Err(e) => fail(Status::error(e)),
        }
    }

    /// Score (0..=100) for a node that passed Filter in the current cycle.
    ///
    /// Per allocated device: 2 when it joins a device already locked to compatible affinity
    /// values, 1 when it takes a clean device in an affinity pool, 0 otherwise; the node's score is
    /// `sum * 100 / (2 * devices)`. Without sharing affinity every node scores 0, which leaves the
    /// choice to other plugins (and the replay's node-name tie-break).
    pub fn score(&mut self, node: &str) -> Result<u32, Status> {
        let cycle = self.cycle("score")?;
        let r = cycle
            .nodes
            .get(node)
            .ok_or_else(|| Status::error(format!("score for node {node} called before filter")))?;
        if !r.status.is_success() {
            return Err(Status::error(format!(
                "score for node {node} which did not pass filter"
            )));
        }
        Ok(if self.config.consolidate {
            score_of(&r.allocation)
        } else {
            0
        })
    }

    /// Reserve: commits the allocation Filter computed for `node` as in-flight.
    pub fn reserve(&mut self, node: &str) -> Result<Vec<ClaimAllocation>, Status> {
        let cycle = self.cycle("reserve")?;
        if cycle.reserved.is_some() {
            return Err(Status::error("reserve called twice in one cycle"));
        }
        let r = cycle
            .nodes
            .get(node)
            .ok_or_else(|| Status::error(format!("reserve on node {node} called before filter")))?;
        if !r.status.is_success() {
            return Err(Status::error(format!(
                "reserve on node {node} which did not pass filter"
            )));
        }
        let result = r.allocation.clone();
        let pod_key = cycle.pod.clone();
        // Re-check against state that may have changed since Filter (no second CEL pass).
        let d = self
            .derived
            .as_ref()
            .ok_or_else(|| Status::error("internal: slice index missing"))?;
        let locks = self.lock_view(d);
        for cr in &result {
            for (ch, res) in cr.choices.iter().zip(&cr.allocation.devices.results) {
                let entry = d.index.device(ch.dev);
                let admin = res.admin_access == Some(true);
                if !entry.allow_multiple && !admin && self.allocated.dedicated.contains_key(&entry.key) {
                    return Err(Status::unschedulable(format!(
                        "{}: allocated to another claim since filter",
                        entry.device.name
                    )));
                }
                if let Some(w) = &ch.affinity
                    && let Err(why) = locks.lock(ch.dev).admits(w)
                {
                    return Err(Status::unschedulable(format!(
                        "{}: {why} (changed since filter)",
                        entry.device.name
                    )));
                }
            }
        }
        let pod = self.pods.get(&pod_key).cloned().unwrap_or_default();
        let consumer = ResourceClaimConsumerReference {
            api_group: String::new(),
            resource: "pods".into(),
            name: pod.metadata.name.clone(),
            uid: pod.metadata.uid.clone(),
        };
        let cycle = self.cycle.as_ref().expect("checked above");
        let mut out = Vec::new();
        let mut staged = Vec::new();
        for (n, &i) in cycle.pending.iter().enumerate() {
            let cc = &cycle.claims[i];
            let cr = &result[n];
            let mut claim = cc.claim.clone();
            claim.status.allocation = Some(cr.allocation.clone());
            if !claim
                .status
                .reserved_for
                .iter()
                .any(|c| c.uid == consumer.uid && c.name == consumer.name)
            {
                claim.status.reserved_for.push(consumer.clone());
            }
            for ch in &cr.choices {
                if let Some(v) = &ch.affinity {
                    let key = d.index.device(ch.dev).key.clone();
                    staged.push(((cc.key.clone(), key), v.clone()));
                }
            }
            out.push(ClaimAllocation {
                claim: cc.key.clone(),
                allocation: cr.allocation.clone(),
            });
            self.inflight.insert(cc.key.clone(), claim);
        }
        for (k, v) in staged {
            self.known_values.insert(k, v);
        }
        let keys: Vec<String> = out.iter().map(|c| c.claim.clone()).collect();
        for k in &keys {
            let claim = self.inflight.get(k).cloned().expect("just inserted");
            self.contribute(k, &claim, true);
        }
        if let Some(c) = &mut self.cycle {
            c.reserved = Some((node.to_string(), out.clone()));
        }
        Ok(out)
    }

    /// Unreserve: drops the in-flight allocation of the current cycle.
    pub fn unreserve(&mut self, node: &str) {
        let Some(cycle) = &mut self.cycle else { return };
        let Some((reserved_node, allocs)) = cycle.reserved.take() else {
            return;
        };
        debug_assert!(node.is_empty() || node == reserved_node);
        for a in allocs {
            if let Some(claim) = self.inflight.remove(&a.claim) {
                self.contribute(&a.claim, &claim, false);
            }
            self.known_values.retain(|(c, _), _| *c != a.claim);
        }
    }

    /// Bind (PreBind): records the reserved allocation in the claims' status and the pod's node.
    pub fn bind(&mut self, node: &str) -> Result<Vec<ClaimAllocation>, Status> {
        let cycle = self.cycle("bind")?;
        let Some((reserved_node, allocs)) = &cycle.reserved else {
            return Err(Status::error("bind called without a successful reserve"));
        };
        if reserved_node != node {
            return Err(Status::error(format!(
                "bind on node {node}, but the pod was reserved on {reserved_node}"
            )));
        }
        let allocs = allocs.clone();
        let pod_key = cycle.pod.clone();
        let generated: Vec<(String, String)> = cycle
            .claims
            .iter()
            .filter(|c| c.generated_for.is_some())
            .map(|c| (c.key.clone(), c.claim.metadata.name.clone()))
            .collect();
        let entries: Vec<String> = self
            .pods
            .get(&pod_key)
            .map(|p| p.spec.resource_claims.iter().map(|e| e.name.clone()).collect())
            .unwrap_or_default();
        for a in &allocs {
            if let Some(claim) = self.inflight.remove(&a.claim) {
                // Moves from in-flight to stored: contributions stay the same.
                self.claims.insert(a.claim.clone(), claim);
            }
        }
        if let Some(pod) = self.pods.get_mut(&pod_key) {
            pod.spec.node_name = node.to_string();
            for (_, name) in &generated {
                if let Some(entry) = entries
                    .iter()
                    .find(|e| format!("{}-{e}", pod.metadata.name) == *name)
                    && !pod
                        .status
                        .resource_claim_statuses
                        .iter()
                        .any(|s| s.name == *entry)
                {
                    pod.status.resource_claim_statuses.push(PodResourceClaimStatus {
                        name: entry.clone(),
                        resource_claim_name: Some(name.clone()),
                    });
                }
            }
        }
        self.cycle = None;
        Ok(allocs)
    }
}

fn bump(map: &mut HashMap<DeviceKey, usize>, key: &DeviceKey, add: bool) {
    if add {
        *map.entry(key.clone()).or_default() += 1;
    } else if let Some(n) = map.get_mut(key) {
        *n -= 1;
        if *n == 0 {
            map.remove(key);
        }
    }
}

/// See [`Plugin::score`].
fn score_of(allocation: &[ClaimResult]) -> u32 {
    let mut sum = 0u32;
    let mut n = 0u32;
    for c in allocation {
        for ch in &c.choices {
            n += 1;
            sum += match (&ch.affinity, ch.joined_lock) {
                (Some(_), true) => 2,
                (Some(_), false) => 1,
                (None, _) => 0,
            };
        }
    }
    if n == 0 { 0 } else { sum * 100 / (2 * n) }
}

/// Evaluates every extractor against the claim's config objects, per request and subrequest.
fn claim_affinity(cel: &CelCache, extractors: &Extractors, cc: &CycleClaim) -> Result<ClaimAffinity, String> {
    if extractors.is_empty() {
        return Ok(Vec::new());
    }
    let objects = affinity::claim_objects(&cc.claim);
    let mut out = Vec::new();
    for r in &cc.claim.spec.devices.requests {
        let subs: Vec<Option<&str>> = if r.exactly.is_some() {
            vec![None]
        } else {
            r.first_available.iter().map(|s| Some(s.name.as_str())).collect()
        };
        let mut per_req = Vec::with_capacity(subs.len());
        for sub in subs {
            let mut m: HashMap<ExtId, Outcome> = HashMap::new();
            // Pools of one driver usually publish the same extractor: evaluate each distinct key
            // set once per request.
            let mut seen: HashMap<&BTreeMap<String, String>, Outcome> = HashMap::new();
            for (id, ex) in extractors.list.iter().enumerate() {
                let outcome = match seen.get(&ex.keys) {
                    Some(o) => o.clone(),
                    None => {
                        let o = affinity::extract(cel, ex, &objects, &r.name, sub, &cc.key)?;
                        seen.insert(&ex.keys, o.clone());
                        o
                    }
                };
                m.insert(id, outcome);
            }
            per_req.push(m);
        }
        out.push(per_req);
    }
    Ok(out)
}

/// Lock states derived from holders, cached in the plugin.
struct Locks<'a> {
    plugin: &'a Plugin,
    derived: &'a Derived,
}

impl LockSource for Locks<'_> {
    fn lock(&self, dev: DevIdx) -> LockState {
        let key = &self.derived.index.device(dev).key;
        if let Some(l) = self.plugin.locks.borrow().get(key) {
            return l.clone();
        }
        let state = self.compute(dev);
        self.plugin.locks.borrow_mut().insert(key.clone(), state.clone());
        state
    }
}

impl Locks<'_> {
    fn compute(&self, dev: DevIdx) -> LockState {
        let d = self.derived;
        let p = self.plugin;
        let entry = d.index.device(dev);
        let Some(holders) = p.holders.get(&entry.key) else {
            return LockState::Clean;
        };
        let ids = match d.extractors.applicable(&d.index, &p.cel, dev) {
            Ok(ids) if !ids.is_empty() => ids,
            Ok(_) => return LockState::Clean,
            Err(_) => return LockState::Unreconstructable,
        };
        let keys: BTreeSet<&String> = ids
            .iter()
            .flat_map(|&id| d.extractors.list[id].keys.keys())
            .collect();
        let mut derived: Vec<Option<Values>> = Vec::with_capacity(holders.len());
        for (claim_key, h) in holders {
            let v = match &h.values {
                Some(v) => Some(v.clone()),
                None => p
                    .claims
                    .get(claim_key)
                    .or_else(|| p.inflight.get(claim_key))
                    .and_then(|c| derive_values(&p.cel, &d.extractors, ids, c, claim_key, &h.request)),
            };
            // Values that do not cover exactly the current keys come from changed extractors.
            let v = v.filter(|v| v.keys().collect::<BTreeSet<_>>() == keys);
            derived.push(v);
        }
        affinity::lock_from(derived.iter().map(Option::as_ref))
    }
}

/// Re-derives the values an allocated claim locks a device to; `None` when it cannot.
fn derive_values(
    cel: &CelCache,
    extractors: &Extractors,
    ids: &[ExtId],
    claim: &ResourceClaim,
    claim_key: &str,
    request: &str,
) -> Option<Values> {
    let (req, sub) = match request.split_once('/') {
        Some((r, s)) => (r, Some(s)),
        None => (request, None),
    };
    let objects = affinity::claim_objects(claim);
    let mut outcomes = Vec::new();
    for &id in ids {
        outcomes.push(affinity::extract(cel, &extractors.list[id], &objects, req, sub, claim_key).ok()?);
    }
    let refs: Vec<&Outcome> = outcomes.iter().collect();
    affinity::wanted(&refs).ok().filter(|v| !v.is_empty())
}

impl Code {
    /// Whether the code means the pod does not fit (as opposed to success or an error).
    pub fn is_unschedulable(self) -> bool {
        matches!(self, Code::Unschedulable | Code::UnschedulableAndUnresolvable)
    }
}
