//! The scheduling-cycle API: the contract the component, the KSWE module and the native host call.
//!
//! [`Plugin`] holds the cluster's DRA objects, updated incrementally by object events
//! ([`Plugin::apply`]), and the current scheduling cycle. Per pod the scheduler calls
//! [`Plugin::prefilter`] once, then [`Plugin::filter`] per node, [`Plugin::score`] per feasible
//! node, [`Plugin::reserve`] on the chosen node, and [`Plugin::bind`] (what PreBind writing
//! `status.allocation` does) or [`Plugin::unreserve`].
//!
//! As in kube-scheduler, pod A's binding cycle (Bind or Unreserve) may run while pod B's
//! scheduling cycle (PreFilter..Reserve) is in progress: reservations are kept per pod, apart from
//! the current cycle, and Bind and Unreserve name the pod they are for.
//!
//! State derived from objects is maintained as follows:
//! - allocated devices, shared allocations and consumed capacity are updated per claim event
//!   (the old contribution is removed, the new one added);
//! - sharing-affinity locks are derived per device from the claims holding it, cached, and
//!   recomputed only for devices whose holders changed;
//! - the slice index is rebuilt lazily, on the first PreFilter after a slice event, reusing the
//!   converted devices of the pools the events did not touch.

use crate::{FxHashMap as HashMap, FxHashSet as HashSet};
use std::cell::RefCell;
use std::collections::BTreeMap;

use crate::affinity::{Extractors, LockState, LockTable, Values};
use crate::allocator::{AllocatedState, ClaimAffinity, SelectorCache};
use crate::cel::CelCache;
use crate::config::Config;
use crate::error::Error;
use crate::index::{DeviceKey, Index, NodePool};
use crate::model::{
    AllocationResult, DeviceClass, DeviceTaintRule, Node, Pod, ResourceClaim, ResourceClaimTemplate,
};
use crate::object::{Kind, Object, decode_str, identify, object_key, parse_objects};
use crate::quantity::Quantity;
use crate::status::Status;
use crate::taints::TaintRule;

mod cycle;
pub mod extended;
mod locks;
mod rejected;
mod shared;

use locks::Locks;
use rejected::Rejected;
use shared::{Claims, NodeStatuses, Slices};

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

/// PostFilter's answer when no node fits the cycle's pod: the status to return, and the claim
/// whose allocation the host must clear (`status.allocation`, `status.reservedFor` and
/// `status.devices`) so that the next attempt can allocate it again, as upstream's
/// DynamicResources PostFilter does.
#[derive(Clone, Debug, PartialEq)]
pub struct PostFilter {
    /// Always `Unschedulable`: PostFilter never makes the pod fit in this cycle.
    pub status: Status,
    /// The claim to deallocate (`namespace/name`), with the `metadata.resourceVersion` the plugin
    /// saw, so that the host can refuse a claim that changed since.
    pub deallocate: Option<(String, String)>,
}

/// The allocation chosen for one claim of the pod.
#[derive(Clone, Debug, PartialEq)]
pub struct ClaimAllocation {
    /// `namespace/name` of the claim.
    pub claim: String,
    /// What PreBind writes to `status.allocation`.
    pub allocation: AllocationResult,
}

/// One (claim, request) holding a shared device, with the affinity values it locks it to when
/// known without CEL (set by Reserve from Filter's computation). The values are only a cache:
/// they are used while the extractors that apply to the device have the same content
/// ([`crate::affinity::fingerprint`]), and re-derived from the claim's config otherwise.
#[derive(Clone, Debug)]
struct Holder {
    values: Option<(u64, std::sync::Arc<Values>)>,
}

/// A lock holder: claim `namespace/name` and request name (`req` or `req/sub`). Locks are
/// derived per (claim, request), never per claim: two requests of one claim on one device are
/// two holders.
type HolderKey = (String, String);

/// Affinity values fixed by our own Reserve, with the fingerprint of the extractors that derived
/// them, by claim `namespace/name` and then (request, device). Kept per claim so that dropping a
/// claim's values (Unreserve, the claim's deletion) costs that claim's few entries, not a walk over
/// every claim the plugin ever reserved.
#[derive(Default)]
struct KnownValues(HashMap<String, Vec<KnownValue>>);

/// One entry of [`KnownValues`]: request name (`req` or `req/sub`), device, fingerprint, values.
type KnownValue = (String, DeviceKey, (u64, std::sync::Arc<Values>));

impl KnownValues {
    /// The values `claim`'s `request` was reserved with on `device`.
    fn get(&self, claim: &str, request: &str, device: &DeviceKey) -> Option<&(u64, std::sync::Arc<Values>)> {
        self.0
            .get(claim)?
            .iter()
            .find(|(r, d, _)| r == request && d == device)
            .map(|(_, _, v)| v)
    }

    /// Records (or replaces) the values of `claim`'s `request` on `device`.
    fn insert(
        &mut self,
        claim: &str,
        request: String,
        device: DeviceKey,
        value: (u64, std::sync::Arc<Values>),
    ) {
        let entries = self.0.entry(claim.to_string()).or_default();
        match entries.iter_mut().find(|(r, d, _)| *r == request && *d == device) {
            Some(e) => e.2 = value,
            None => entries.push((request, device, value)),
        }
    }

    /// Drops every value of `claim`.
    fn remove_claim(&mut self, claim: &str) {
        self.0.remove(claim);
    }
}

/// The stored Nodes by name, each with a dense id that the per-node state indexes by
/// ([`Derived::node_pools`], a cycle's results): a Filter call looks its node's name up once,
/// or not at all when its caller remembers the id ([`NodeMemo`]). A node keeps its id while it
/// exists; a deleted node's id is handed out again. Names are compared with [`crate::bytes_eq`]
/// (a `HashTable` lets the lookup choose its comparison; a `HashMap<String, _>` compares with
/// `memcmp`, one byte per iteration in the wasm guests).
#[derive(Default)]
struct Nodes {
    /// The ids, found by the name of the node in `slots`.
    by_name: hashbrown::HashTable<u32>,
    /// By id: the node, or `None` for a free id.
    slots: Vec<Option<StoredNode>>,
    /// Ids of deleted nodes, to hand out again.
    free: Vec<u32>,
    /// Changes when a node is added (a replaced node keeps its id; a deleted node's id is free
    /// until an added node takes it): a [`NodeMemo`] of another generation is looked up again
    /// ([`Nodes::changed`]).
    generation: u64,
    /// The nodes' statuses, one copy of each ([`shared`]).
    statuses: NodeStatuses,
}

struct StoredNode {
    name: Box<str>,
    node: Box<Node>,
}

/// Where [`Plugin::filter_remembered`] found a node name in the plugin's table of nodes, kept by
/// a caller that filters the same names in cycle after cycle (the component guest keeps one per
/// entry of its table of node indexes): while no node is added, the next call skips the name's
/// lookup (a deleted node's id is free, which the memo reads as "not found"). A memo is only
/// valid for the name it was used with; a new memo ([`NodeMemo::default`]) knows nothing.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct NodeMemo(Option<(u64, Option<u32>)>);

impl Nodes {
    fn hash(name: &str) -> u64 {
        use std::hash::BuildHasher;
        rustc_hash::FxBuildHasher.hash_one(name)
    }

    /// The id of the node named `name`.
    fn id(&self, name: &str) -> Option<u32> {
        let slots = &self.slots;
        self.by_name
            .find(Self::hash(name), |&id| slot_named(slots, id, name))
            .copied()
    }

    /// The node stored under `id`, with its id.
    fn by_id(&self, id: u32) -> Option<(u32, &Node)> {
        slot(&self.slots, id).map(|n| (id, &*n.node))
    }

    /// The node's id and object.
    fn get(&self, name: &str) -> Option<(u32, &Node)> {
        self.id(name).and_then(|id| self.by_id(id))
    }

    /// [`Nodes::id`] through a memo of an earlier lookup of the same name, which is refreshed
    /// when a node was added since.
    fn id_remembered(&self, name: &str, memo: &std::cell::Cell<NodeMemo>) -> Option<u32> {
        match memo.get().0 {
            Some((generation, id)) if generation == self.generation => id,
            _ => {
                let id = self.id(name);
                memo.set(NodeMemo(Some((self.generation, id))));
                id
            }
        }
    }

    /// Stores a node (replacing one of the same name, whose id it keeps) and returns its id.
    fn insert(&mut self, name: String, mut node: Box<Node>) -> u32 {
        self.statuses.share(&mut node.status);
        if let Some(id) = self.id(&name)
            && let Some(Some(slot)) = self.slots.get_mut(id as usize)
        {
            slot.node = node;
            return id;
        }
        // Without a free id, every id below the number of nodes is taken.
        let id = self
            .free
            .pop()
            .unwrap_or_else(|| u32::try_from(self.slots.len()).unwrap_or(u32::MAX));
        let stored = StoredNode {
            name: name.into_boxed_str(),
            node,
        };
        let hash = Self::hash(&stored.name);
        if self.slots.len() <= id as usize {
            self.slots.resize_with(id as usize + 1, || None);
        }
        self.slots[id as usize] = Some(stored);
        let slots = &self.slots;
        self.by_name
            .insert_unique(hash, id, |&i| Self::hash(slot(slots, i).map_or("", |n| &*n.name)));
        self.changed();
        id
    }

    /// Deletes a node; its id, if it existed.
    fn remove(&mut self, name: &str) -> Option<u32> {
        let slots = &self.slots;
        let entry = self
            .by_name
            .find_entry(Self::hash(name), |&id| slot_named(slots, id, name))
            .ok()?;
        let (id, _) = entry.remove();
        self.slots[id as usize] = None;
        // No new generation: a memo of this name finds the id free, which is "not found"; the
        // id's next node is an insert, which starts one.
        self.free.push(id);
        Some(id)
    }

    /// Records a change of the name-to-id mapping. Generations are unique in the process, so a
    /// memo made by another plugin (a guest configured again keeps its table of node indexes)
    /// never matches; 0 is the generation of a table that never changed, which holds no node.
    fn changed(&mut self) {
        static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);
        self.generation = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    }

    /// The names of the stored nodes (in no order).
    fn names(&self) -> impl Iterator<Item = &str> {
        self.slots.iter().flatten().map(|n| &*n.name)
    }

    /// One more than the highest id in use (ids are dense: deleted nodes' ids are reused).
    fn id_bound(&self) -> usize {
        self.slots.len()
    }
}

/// The node stored under `id` in [`Nodes::slots`] (free functions over the slots, so that the
/// name table's closures can borrow the slots while the table itself is borrowed mutably).
fn slot(slots: &[Option<StoredNode>], id: u32) -> Option<&StoredNode> {
    slots.get(id as usize).and_then(Option::as_ref)
}

/// Whether the node stored under `id` is named `name`.
fn slot_named(slots: &[Option<StoredNode>], id: u32, name: &str) -> bool {
    slot(slots, id).is_some_and(|n| crate::bytes_eq(n.name.as_bytes(), name.as_bytes()))
}

/// A node's pools and candidate devices.
type NodeDevices = (Vec<NodePool>, std::sync::Arc<[crate::index::DevIdx]>);

/// Slice-derived state, rebuilt when slices or the configuration change.
struct Derived {
    index: Index,
    extractors: Extractors,
    /// Per node id ([`Nodes`]): its pools and its candidate devices in first-fit order
    /// ([`crate::allocator::candidates`]), computed once per node and index.
    node_pools: RefCell<Vec<Option<Result<NodeDevices, String>>>>,
    /// Selector results per device, kept across nodes, pods and cycles until slices change.
    selector_cache: SelectorCache,
    /// PreFilter's candidate extractors per (class, selectors); cleared on DeviceClass events.
    candidates: cycle::CandidateCache,
    /// The allocated state per device of `index` (kept in step by [`Plugin::contribute`]).
    uses: Vec<crate::allocator::DeviceUse>,
}

/// One claim of the pod in the current cycle.
#[derive(Clone, Debug)]
struct CycleClaim {
    key: String,
    claim: ResourceClaim,
    /// Generated from a template in this cycle (created on bind).
    generated_for: Option<String>,
    /// For the KEP-5004 extended-resource claim: which request serves which container resource.
    extended: Vec<crate::model::ContainerExtendedResourceRequest>,
}

/// Filter's result for one node.
#[derive(Clone, Debug)]
struct NodeResult {
    status: Status,
    /// The allocation found (compact; `None` when nothing was allocated on the node).
    allocation: Option<crate::allocator::Allocation>,
    /// Per pending claim (same order; empty when there is none): the node's variant of the
    /// KEP-5004 special claim when the node serves some of its resources through a device plugin.
    variants: Vec<Option<extended::NodeVariant>>,
    /// The node's raw affinity rank ([`Plugin::affinity_rank`]), computed at Filter.
    rank: u32,
    /// Named by this cycle's PreScore (see [`Scoring::named`]).
    named: bool,
}

/// Filter's results of a cycle, by node id ([`Nodes`]): a slot per id, so that a Filter on every
/// node writes its results one after another (ids follow the order the nodes were added in),
/// not at a hash position each: at 5,000 nodes every scattered write is a likely cache miss.
///
/// The slots outlive the cycle: a new cycle ([`NodeResults::next_cycle`]) only counts up, and a
/// slot holding an earlier cycle's result reads as empty. That result is dropped when the node's
/// next Filter overwrites it, on the line the write fetches anyway, instead of in a pass over
/// every node's result when the next PreFilter starts (at 5,000 nodes, thousands of lines long out
/// of the cache).
#[derive(Default)]
struct NodeResults {
    /// Per node id: the cycle of the result, and the result.
    slots: Vec<Option<(u32, NodeResult)>>,
    /// The current cycle's number.
    current: u32,
}

impl NodeResults {
    /// Starts a new cycle: every result so far reads as empty. Room for the ids below `ids`, so
    /// that a Filter on every node does not move the results.
    fn next_cycle(&mut self, ids: usize) {
        match self.current.checked_add(1) {
            Some(c) => self.current = c,
            // After 2³² cycles the numbers start again: no slot may keep an old one.
            None => {
                self.slots.clear();
                self.current = 0;
            }
        }
        self.slots.reserve(ids.saturating_sub(self.slots.len()));
    }

    fn get(&self, id: u32) -> Option<&NodeResult> {
        match self.slots.get(id as usize)? {
            Some((c, r)) if *c == self.current => Some(r),
            _ => None,
        }
    }

    fn get_mut(&mut self, id: u32) -> Option<&mut NodeResult> {
        match self.slots.get_mut(id as usize)? {
            Some((c, r)) if *c == self.current => Some(r),
            _ => None,
        }
    }

    /// Stores the result for node `id`, in place of the slot's earlier one. A node Filtered again
    /// in the same cycle keeps its place among the nodes PreScore named.
    fn insert(&mut self, id: u32, mut result: NodeResult) {
        let i = id as usize;
        if self.slots.len() <= i {
            self.slots.resize_with(i + 1, || None);
        }
        let current = self.current;
        let slot = &mut self.slots[i];
        if let Some((c, old)) = slot
            && *c == current
        {
            result.named |= old.named;
        }
        *slot = Some((current, result));
    }

    fn remove(&mut self, id: u32) {
        if let Some(slot) = self.slots.get_mut(id as usize) {
            *slot = None;
        }
    }

    /// Drops every result.
    fn clear(&mut self) {
        self.slots.clear();
    }

    /// The ids of the nodes with a result in this cycle.
    fn ids(&self) -> impl Iterator<Item = u32> {
        let current = self.current;
        self.slots
            .iter()
            .enumerate()
            .filter(move |(_, s)| s.as_ref().is_some_and(|(c, _)| *c == current))
            .map(|(i, _)| i as u32)
    }

    fn values(&self) -> impl Iterator<Item = &NodeResult> + Clone {
        let current = self.current;
        self.slots
            .iter()
            .filter_map(move |s| s.as_ref().filter(|(c, _)| *c == current).map(|(_, r)| r))
    }

    fn values_mut(&mut self) -> impl Iterator<Item = &mut NodeResult> {
        let current = self.current;
        self.slots
            .iter_mut()
            .filter_map(move |s| s.as_mut().filter(|(c, _)| *c == current).map(|(_, r)| r))
    }
}

struct Cycle {
    pod: String,
    status: Status,
    /// Why an allocated claim of the pod cannot be used on any node (a binding failure
    /// condition of one of its devices holds): Filter's reason on every node.
    unusable: Option<String>,
    claims: Vec<CycleClaim>,
    /// Indexes into `claims` of the claims that need allocation.
    pending: Vec<usize>,
    affinity: Vec<ClaimAffinity>,
    /// Whether a pending claim is the KEP-5004 special claim (whose requests vary per node).
    extended: bool,
    /// Filter's results by node id ([`Nodes`]).
    nodes: NodeResults,
    /// The nodes Score normalises over and their rank range: set by PreScore, or at the first
    /// Score without PreScore (every node that passed Filter; cleared by a later Filter).
    scoring: Option<Scoring>,
    /// Some result of `nodes` is marked as named by PreScore ([`NodeResult::named`]).
    any_named: bool,
    /// The allocator's per-cycle caches (what each pending request wants per applicable
    /// extractor set, compiled selectors). The claims' outcomes and the extractors are fixed for
    /// the cycle (a slice change ends it); a DeviceClass change drops the cache.
    cache: crate::allocator::CycleCache,
}

/// See [`Cycle::scoring`].
struct Scoring {
    /// PreScore named the nodes to normalise over (each marked [`NodeResult::named`]); false:
    /// every node that passed Filter.
    named: bool,
    /// Lowest and highest rank among them.
    min: u32,
    max: u32,
}

/// A pod's in-flight reservation: made by Reserve, ended by Bind or Unreserve. Kept per pod,
/// apart from the current cycle, so that the next pod's cycle never disturbs it.
#[derive(Clone, Debug)]
struct Reservation {
    /// The pod's UID at Reserve (empty when the pod has none): a recreated pod with the same
    /// name is not the reserved one.
    uid: String,
    node: String,
    allocations: Vec<ClaimAllocation>,
    /// Names of the claims generated from templates for this pod (created on bind).
    generated: Vec<String>,
    /// The pod's `status.extendedResourceClaimStatus` for its special extended-resource claim
    /// (KEP-5004), written on bind.
    extended: Option<crate::model::PodExtendedResourceClaimStatus>,
}

/// Plugin state: the cluster's DRA objects, indexed, plus the current scheduling cycle.
pub struct Plugin {
    config: Config,
    cel: CelCache,
    nodes: Nodes,
    /// Pods not bound to a node (see [`Plugin::upsert`]), and the pods our Bind bound.
    pods: BTreeMap<String, Box<Pod>>,
    classes: crate::FxHashMap<String, DeviceClass>,
    /// ResourceSlices by name, their devices' repeated parts stored once ([`shared`]).
    slices: Slices,
    /// Claims by `namespace/name`, their repeated parts stored once ([`shared`]).
    claims: Claims,
    templates: BTreeMap<String, ResourceClaimTemplate>,
    /// DeviceTaintRules by name; a change rebuilds the whole slice index.
    taint_rules: BTreeMap<String, DeviceTaintRule>,
    rules_dirty: bool,
    /// Reserved but not yet bound claims (the scheduler's in-flight allocations).
    inflight: BTreeMap<String, Box<ResourceClaim>>,
    derived: Option<Derived>,
    /// Slices changed since the index was built, and the pools they belong to.
    slices_dirty: bool,
    changed_pools: HashSet<(String, String)>,
    allocated: AllocatedState,
    holders: HashMap<DeviceKey, crate::model::Map<HolderKey, Holder>>,
    /// Affinity values fixed by our own Reserve, per (claim, request, device), with the
    /// fingerprint of the extractors that derived them: no second CEL pass while they stay.
    known_values: KnownValues,
    /// Lock states per device of the current index ([`crate::index::DevIdx`]), computed on
    /// first use; an entry is dropped when the device's holders change, all of them when the
    /// index is rebuilt.
    locks: RefCell<LockTable>,
    cycle: Option<Cycle>,
    /// The results of the last cycle after Bind ended it, for the next cycle to write over
    /// ([`NodeResults`]).
    spare_results: NodeResults,
    /// In-flight reservations by pod key (`namespace/name`).
    reservations: BTreeMap<String, Reservation>,
    /// Claims our Bind allocated, with the `resourceVersion` the allocation was recorded on:
    /// events up to that version predate the Bind.
    bound_at: HashMap<String, u64>,
    /// The time the host last gave ([`Plugin::set_time`]), in Unix seconds: binding timeouts are
    /// measured against it, and Bind stamps allocations with it.
    now: Option<i64>,
    /// Warnings not yet taken ([`Plugin::take_warnings`]), and every warning given (each once).
    warnings: Vec<String>,
    warned: HashSet<String>,
    /// Objects whose last event did not decode, with the error: what Filter and PreFilter say of
    /// a node or claim they cannot find.
    rejected: Rejected,
}

impl Plugin {
    /// A plugin with the given JSON configuration (`{"sharingAffinity": [...]}`; empty = none).
    pub fn new(config_json: &str) -> Result<Plugin, Error> {
        Ok(Plugin {
            config: Config::from_json(config_json)?,
            cel: CelCache::new(),
            nodes: Nodes::default(),
            pods: BTreeMap::new(),
            classes: crate::FxHashMap::default(),
            slices: Slices::default(),
            claims: Claims::default(),
            templates: BTreeMap::new(),
            taint_rules: BTreeMap::new(),
            rules_dirty: false,
            inflight: BTreeMap::new(),
            derived: None,
            slices_dirty: false,
            changed_pools: HashSet::default(),
            allocated: AllocatedState::default(),
            holders: HashMap::default(),
            known_values: KnownValues::default(),
            locks: RefCell::default(),
            cycle: None,
            spare_results: NodeResults::default(),
            reservations: BTreeMap::new(),
            bound_at: HashMap::default(),
            now: None,
            warnings: Vec::new(),
            warned: HashSet::default(),
            rejected: Rejected::default(),
        })
    }

    /// Sets the current time (Unix seconds), as the host's clock reads it. Hosts set it before
    /// each PreFilter and Bind. Until it is set no binding times out and Bind stamps no
    /// `allocationTimestamp`.
    pub fn set_time(&mut self, unix_seconds: i64) {
        self.now = Some(unix_seconds);
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
        if kind == EventKind::Delete {
            let value: serde_json::Value =
                serde_json::from_str(object_json).map_err(|e| Error::Json(e.to_string()))?;
            return self.delete(&value);
        }
        match decode_str(object_json, 0) {
            Ok(Some(o)) => {
                self.upsert(o);
                Ok(())
            }
            Ok(None) => Ok(()),
            Err(e) => {
                if let Some(id) = identify(object_json) {
                    if id.0 == Kind::ResourceClaim {
                        self.hold_rejected_claim(&id.1, object_json);
                    }
                    self.rejected.record(id, e.to_string());
                }
                Err(e)
            }
        }
    }

    /// A claim event that did not decode: the devices its allocation names stay held, as far as
    /// it can be read ([`rejected::salvage_claim`]), in place of the claim's last readable
    /// version. When no allocation can be read, the last readable version keeps holding what it
    /// held: a device is never freed because its holder became unreadable.
    fn hold_rejected_claim(&mut self, key: &str, json: &str) {
        if self.inflight.contains_key(key) {
            // Reserved by us: the in-flight copy holds its devices until Bind or Unreserve.
            return;
        }
        let Some(held) = rejected::salvage_claim(json) else {
            return;
        };
        if let Some(old) = self.claims.remove(key) {
            self.contribute(key, &old, false);
        }
        if let Some(old) = self.rejected.release(key) {
            self.contribute(key, &old, false);
        }
        self.bound_at.remove(key);
        self.contribute(key, &held, true);
        self.rejected.hold(key, held);
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
        self.rejected.forget(object.kind(), &key);
        match object {
            Object::Node(n) => {
                let id = self.nodes.insert(key, n);
                if let Some(d) = &self.derived
                    && let Some(slot) = d.node_pools.borrow_mut().get_mut(id as usize)
                {
                    *slot = None;
                }
            }
            Object::Pod(p) => {
                // Only pods that can still be scheduled are kept: the plugin reads a pod at its
                // PreFilter, Reserve and Bind, never a pod bound to a node (kube-scheduler does
                // not schedule those), and at 20,000 running pods keeping them all cost about
                // 20 MiB of guest memory. A pod our Bind bound stays until its next event.
                if p.spec.node_name.is_empty() {
                    self.pods.insert(key, p);
                } else {
                    self.pods.remove(&key);
                }
            }
            Object::DeviceClass(c) => {
                self.classes.insert(key, *c);
                self.classes_changed();
            }
            Object::DeviceTaintRule(r) => {
                self.taint_rules.insert(key, *r);
                self.rules_dirty = true;
            }
            Object::ResourceSlice(s) => {
                let new = (s.spec.driver.clone(), s.spec.pool.name.to_string());
                let old = self.slices.insert(key, s);
                self.pool_changed(new);
                if let Some(old) = old {
                    self.pool_changed((old.spec.driver, old.spec.pool.name.to_string()));
                }
                self.slices_dirty = true;
            }
            Object::ResourceClaimTemplate(mut t) => {
                self.claims.share_spec(&mut t.spec.spec);
                self.templates.insert(key, *t);
            }
            Object::ResourceClaim(c) => {
                if self.inflight.contains_key(&key) {
                    // In flight (reserved, not yet bound): the event updates the stored object
                    // only. The in-flight copy alone contributes until Bind or Unreserve.
                    self.claims.insert(key, c);
                    return;
                }
                if self.is_stale(&key, &c) {
                    return;
                }
                self.bound_at.remove(&key);
                if let Some(old) = self.claims.remove(&key) {
                    self.contribute(&key, &old, false);
                }
                if let Some(old) = self.rejected.release(&key) {
                    self.contribute(&key, &old, false);
                }
                self.contribute(&key, &c, true);
                self.claims.insert(key, c);
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
        if let Some(kind) = Kind::from_name(kind_name) {
            self.rejected.forget(kind, &key);
        }
        match kind_name {
            "Node" => {
                if let Some(id) = self.nodes.remove(&key) {
                    if let Some(d) = &self.derived
                        && let Some(slot) = d.node_pools.borrow_mut().get_mut(id as usize)
                    {
                        *slot = None;
                    }
                    // The id is handed out again: a result Filter found for the deleted node
                    // must not become another node's.
                    if let Some(c) = &mut self.cycle {
                        c.nodes.remove(id);
                    }
                }
            }
            "Pod" => {
                self.pods.remove(&key);
            }
            "DeviceClass" => {
                self.classes.remove(&key);
                self.classes_changed();
            }
            "DeviceTaintRule" if self.taint_rules.remove(&key).is_some() => {
                self.rules_dirty = true;
            }
            "ResourceSlice" => {
                if let Some(old) = self.slices.remove(&key) {
                    self.pool_changed((old.spec.driver, old.spec.pool.name.to_string()));
                    self.slices_dirty = true;
                }
            }
            "ResourceClaimTemplate" => {
                self.templates.remove(&key);
            }
            "ResourceClaim" => {
                // An in-flight claim keeps its in-flight allocation until Bind (which then fails:
                // the claim is gone) or Unreserve; only the stored object goes.
                let inflight = self.inflight.contains_key(&key);
                if let Some(old) = self.claims.remove(&key)
                    && !inflight
                {
                    self.contribute(&key, &old, false);
                }
                if let Some(old) = self.rejected.release(&key) {
                    self.contribute(&key, &old, false);
                }
                self.bound_at.remove(&key);
                if !inflight {
                    self.known_values.remove_claim(&key);
                }
            }
            _ => {}
        }
        Ok(())
    }

    /// Whether a claim event is older than what is stored: its `resourceVersion` is lower than the
    /// stored one's, or not higher than the version our Bind recorded the allocation on (an event
    /// emitted before the Bind must not clear its lock). Versions that are not integers (as
    /// Kubernetes allows) are not compared.
    fn is_stale(&self, key: &str, event: &ResourceClaim) -> bool {
        let Ok(new) = event.metadata.resource_version.parse::<u64>() else {
            return false;
        };
        let stored = self
            .claims
            .get(key)
            .and_then(|c| c.metadata.resource_version.parse::<u64>().ok());
        let bound = self.bound_at.get(key).copied();
        stored.is_some_and(|s| new < s) || bound.is_some_and(|b| new <= b)
    }

    /// Records that a pool's slices changed, for the next index build to convert it again. Only
    /// when there is an index: the first build converts every pool anyway, and recording the
    /// 10,000 pools of a cluster's first load cost about 1 MiB of guest memory until then.
    fn pool_changed(&mut self, pool: (String, String)) {
        if self.derived.is_some() {
            self.changed_pools.insert(pool);
        }
    }

    /// Drops what PreFilter derived from DeviceClasses.
    fn classes_changed(&mut self) {
        if let Some(d) = &self.derived {
            d.candidates.borrow_mut().clear();
        }
        if let Some(c) = &mut self.cycle {
            c.cache = Default::default();
        }
        self.class_changed();
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
                        let cur = slot.get_or_insert_with(n.clone(), || Quantity::from_i64(0));
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
                let hk = (key.to_string(), r.request.to_string());
                if add {
                    let values = self.known_values.get(&hk.0, &hk.1, &dk).cloned();
                    holders.insert(hk, Holder { values });
                } else {
                    holders.remove(&hk);
                }
                if holders.is_empty() {
                    self.holders.remove(&dk);
                }
                if let Some(d) = &self.derived
                    && let Some(&i) = d.index.by_key.get(&dk)
                {
                    self.locks.borrow_mut().forget(i);
                }
            } else {
                bump(&mut self.allocated.dedicated, &dk, add);
            }
            if let Some(d) = &mut self.derived
                && let Some(&i) = d.index.by_key.get(&dk)
                && let Some(slot) = d.uses.get_mut(i as usize)
            {
                *slot = self.allocated.device_use(&d.index, i);
            }
        }
    }

    /// The slice-derived state, rebuilt after slice events. Pools whose slices did not change keep
    /// their converted devices (and prepared CEL input). A rebuild during a cycle ends that cycle:
    /// the extractor outcomes PreFilter computed refer to the old index.
    fn derived(&mut self) -> &Derived {
        if self.derived.is_none() || self.slices_dirty || self.rules_dirty {
            let previous = self.derived.take();
            let rules: Vec<TaintRule> = self
                .taint_rules
                .values()
                .filter_map(|r| TaintRule::resolve(r, &self.classes))
                .collect();
            // Changed rules can change the taints of any device: nothing is reused.
            let reuse = previous.as_ref().filter(|_| !self.rules_dirty).map(|d| &d.index);
            let index = Index::rebuild_with_rules(
                self.slices.values().map(|s| &**s),
                reuse,
                &self.changed_pools,
                Some((&rules, &self.cel)),
            );
            self.rules_dirty = false;
            let extractors = Extractors::build(&index, &self.config, &self.cel);
            for w in &extractors.warnings {
                if self.warned.insert(w.clone()) {
                    self.warnings.push(w.clone());
                }
            }
            self.locks.borrow_mut().clear();
            // The cycle's caches hold values interned by the old extractors
            // ([`Extractors::same`] compares them by pointer).
            if let Some(c) = &mut self.cycle {
                c.cache = Default::default();
            }
            self.changed_pools.clear();
            self.slices_dirty = false;
            if previous.is_some()
                && let Some(c) = &mut self.cycle
                && !self.reservations.contains_key(&c.pod)
            {
                c.status =
                    Status::error("ResourceSlices changed during the scheduling cycle; run PreFilter again");
                c.nodes.clear();
            }
            let uses = self.allocated.uses(&index);
            self.derived = Some(Derived {
                selector_cache: SelectorCache::new(index.devices.len()),
                index,
                extractors,
                node_pools: RefCell::new(Vec::new()),
                candidates: Default::default(),
                uses,
            });
        }
        self.derived.as_ref().expect("derived state was just built")
    }

    /// A class changed: rules that name a class (`v1alpha3` `deviceClassName`) must be evaluated
    /// again.
    fn class_changed(&mut self) {
        if self.taint_rules.values().any(|r| {
            r.spec
                .device_selector
                .as_ref()
                .is_some_and(|s| s.device_class_name.is_some())
        }) {
            self.rules_dirty = true;
        }
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
        let mut names: Vec<String> = self.nodes.names().map(str::to_string).collect();
        names.sort_unstable();
        names
    }

    /// A claim as currently stored (allocated claims include our bound allocations).
    pub fn claim(&self, key: &str) -> Option<&ResourceClaim> {
        self.claims.get(key).map(|c| &**c)
    }

    /// Warnings about the cluster's sharing-affinity set-up since the last call (each given once),
    /// for the plugin log: for example configuration extractors ignored for a pool whose driver
    /// publishes its own.
    pub fn take_warnings(&mut self) -> Vec<String> {
        std::mem::take(&mut self.warnings)
    }

    /// The node a pod is reserved on (Reserve done, Bind or Unreserve not yet).
    pub fn reserved_node(&self, pod: &str) -> Option<&str> {
        self.reservations.get(pod).map(|r| r.node.as_str())
    }

    /// A pod as currently stored: one not bound to a node, or one our Bind bound (until its
    /// next event).
    pub fn pod(&self, key: &str) -> Option<&Pod> {
        self.pods.get(key).map(|p| &**p)
    }
}

fn bump(map: &mut crate::FxHashMap<DeviceKey, usize>, key: &DeviceKey, add: bool) {
    if add {
        *map.entry(key.clone()).or_default() += 1;
    } else if let Some(n) = map.get_mut(key) {
        *n -= 1;
        if *n == 0 {
            map.remove(key);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{KnownValues, NodeResult, NodeResults, Plugin};
    use crate::Status;
    use crate::index::DeviceKey;
    use crate::plugin::EventKind;
    use std::sync::Arc;

    /// Objects as Go writes them (`"creationTimestamp": null`, `null` lists) load; an object the
    /// plugin rejects is named, with its error, by the Filter of its node and the PreFilter of a
    /// pod that needs it, until an event for it decodes.
    #[test]
    fn rejected_objects_are_named_where_a_decision_misses_them() {
        let mut p = Plugin::new("").unwrap();
        let go_node = r#"{"apiVersion":"v1","kind":"Node","metadata":{"name":"ok","creationTimestamp":null,"labels":null},"spec":{},"status":{"images":null}}"#;
        p.apply(EventKind::Add, go_node).unwrap();
        let bad_node = r#"{"apiVersion":"v1","kind":"Node","metadata":{"name":"worker-1","labels":{"a":7}}}"#;
        let err = p.apply(EventKind::Add, bad_node).unwrap_err().to_string();
        assert!(
            err.contains("worker-1") && err.contains("metadata.labels.a"),
            "{err}"
        );
        let bad_claim = r#"{"apiVersion":"resource.k8s.io/v1","kind":"ResourceClaim","metadata":{"name":"c","namespace":"ns"},"spec":{"devices":{"requests":[{"name":null}]}}}"#;
        assert!(p.apply(EventKind::Add, bad_claim).is_err());
        let pod = r#"{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p","namespace":"ns","uid":"u","creationTimestamp":null},
            "spec":{"containers":null,"resourceClaims":[{"name":"r","resourceClaimName":"c"}]},"status":{}}"#;
        p.apply(EventKind::Add, pod).unwrap();
        let pre = p.prefilter("ns/p");
        assert_eq!(
            pre.reason,
            "resource claim ns/c was rejected: ResourceClaim ns/c: field spec.devices.requests[0].name: invalid type: null, expected a string"
        );
        let plain = r#"{"apiVersion":"v1","kind":"Pod","metadata":{"name":"q","namespace":"ns","uid":"v"},"spec":{}}"#;
        p.apply(EventKind::Add, plain).unwrap();
        assert!(p.prefilter("ns/q").is_success());
        let filtered = p.filter("worker-1");
        assert!(
            filtered
                .reason
                .starts_with("node worker-1 was rejected: Node worker-1: field metadata.labels.a"),
            "{}",
            filtered.reason
        );
        assert!(p.filter("ok").is_success());
        assert_eq!(p.filter("gone").reason, "node gone not found");
        // The node's next event decodes: it is a node like any other.
        p.apply(
            EventKind::Add,
            r#"{"apiVersion":"v1","kind":"Node","metadata":{"name":"worker-1"}}"#,
        )
        .unwrap();
        assert!(p.prefilter("ns/q").is_success());
        assert!(p.filter("worker-1").is_success());
    }

    fn result(rank: u32) -> NodeResult {
        NodeResult {
            status: Status::success(),
            allocation: None,
            variants: Vec::new(),
            rank,
            named: false,
        }
    }

    /// A new cycle's results start empty although the slots keep the earlier cycle's: an
    /// earlier result is never read or listed, its named mark does not pass to the new result,
    /// and the cycle numbers wrapping around empties the slots.
    #[test]
    fn node_results_of_an_earlier_cycle_read_as_empty() {
        let ranks = |r: &NodeResults| r.values().map(|x| x.rank).collect::<Vec<_>>();
        let mut r = NodeResults::default();
        r.next_cycle(4);
        r.insert(0, result(10));
        r.insert(2, result(12));
        r.get_mut(2).expect("stored").named = true;
        r.insert(2, result(22));
        assert!(
            r.get(2).is_some_and(|x| x.named),
            "same cycle: the named mark is kept"
        );
        let rank = |r: &NodeResults, id: u32| r.get(id).map(|x| x.rank);
        assert_eq!((rank(&r, 2), rank(&r, 1), rank(&r, 9)), (Some(22), None, None));
        assert_eq!(ranks(&r), [10, 22]);
        r.next_cycle(4);
        assert_eq!(
            (rank(&r, 0), rank(&r, 2)),
            (None, None),
            "the last cycle's results"
        );
        assert!(r.get_mut(0).is_none());
        assert_eq!(ranks(&r), Vec::<u32>::new());
        // Slot 2 still holds the last cycle's result, marked named.
        r.insert(2, result(32));
        assert!(
            r.get(2).is_some_and(|x| !x.named),
            "an earlier cycle's named mark is not kept"
        );
        r.values_mut().for_each(|x| x.rank += 1);
        assert_eq!(ranks(&r), [33]);
        r.remove(2);
        assert_eq!((rank(&r, 2), ranks(&r).len()), (None, 0));
        r.insert(1, result(41));
        r.clear();
        assert_eq!(ranks(&r).len(), 0);
        // The numbers wrap around: the slots written under the last number must not be read
        // as the first number's.
        r.insert(3, result(50));
        r.current = u32::MAX;
        r.insert(1, result(51));
        r.next_cycle(4);
        assert_eq!(r.current, 0);
        for id in 0..4 {
            assert!(r.get(id).is_none(), "node {id} after the wrap");
        }
        assert_eq!(ranks(&r).len(), 0);
    }

    /// Values are found by claim, request and device; a second Reserve of the same (request,
    /// device) replaces the entry; dropping a claim leaves every other claim's values.
    #[test]
    fn known_values_are_kept_and_dropped_per_claim() {
        let values = |v: &str| Arc::new([("subnet".to_string(), v.to_string())].into_iter().collect());
        let (nic0, nic1) = (DeviceKey::new("d", "p", "nic0"), DeviceKey::new("d", "p", "nic1"));
        let mut known = KnownValues::default();
        known.insert("ns/a", "req".into(), nic0.clone(), (1, values("x")));
        known.insert("ns/a", "req".into(), nic1.clone(), (1, values("y")));
        known.insert("ns/b", "req".into(), nic0.clone(), (2, values("x")));
        known.insert("ns/a", "req".into(), nic0.clone(), (3, values("z")));
        let got = |k: &KnownValues, claim: &str, req: &str, dev: &DeviceKey| {
            k.get(claim, req, dev).map(|(f, v)| (*f, v["subnet"].clone()))
        };
        assert_eq!(
            got(&known, "ns/a", "req", &nic0),
            Some((3, "z".into())),
            "replaced"
        );
        assert_eq!(got(&known, "ns/a", "req", &nic1), Some((1, "y".into())));
        assert_eq!(got(&known, "ns/a", "other", &nic0), None, "another request");
        assert_eq!(got(&known, "ns/b", "req", &nic1), None, "another device");
        known.remove_claim("ns/a");
        assert_eq!(got(&known, "ns/a", "req", &nic0), None);
        assert_eq!(got(&known, "ns/a", "req", &nic1), None);
        assert_eq!(
            got(&known, "ns/b", "req", &nic0),
            Some((2, "x".into())),
            "other claims stay"
        );
        assert_eq!(known.0.len(), 1, "the dropped claim leaves no entry");
    }

    fn slice(pool: &str, device: &str) -> String {
        format!(
            r#"{{"apiVersion":"resource.k8s.io/v1","kind":"ResourceSlice","metadata":{{"name":"{pool}"}},
            "spec":{{"driver":"d.example.com","nodeName":"{pool}",
            "pool":{{"name":"{pool}","generation":1,"resourceSliceCount":1}},
            "devices":[{{"name":"{device}"}}]}}}}"#
        )
    }

    /// Changed pools are recorded for an index to reuse the others, not before the first index
    /// (which converts every pool).
    #[test]
    fn changed_pools_are_recorded_only_when_there_is_an_index() {
        let mut plugin = Plugin::new("").unwrap();
        for pool in ["a", "b"] {
            assert!(plugin.load(&slice(pool, "eth0")).unwrap().is_empty());
        }
        assert!(plugin.changed_pools.is_empty(), "no index yet");
        assert_eq!(plugin.derived().index.devices.len(), 2);
        assert!(plugin.load(&slice("b", "eth1")).unwrap().is_empty());
        let b = ("d.example.com".to_string(), "b".to_string());
        assert_eq!(plugin.changed_pools.iter().collect::<Vec<_>>(), [&b]);
        assert_eq!(plugin.derived().index.devices.len(), 2);
        assert!(plugin.changed_pools.is_empty(), "taken by the rebuild");
    }
}
