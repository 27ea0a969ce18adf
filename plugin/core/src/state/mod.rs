//! The cluster as the plugin sees it: the DRA objects, the slice index derived from them, the
//! allocated state and the sharing-affinity lock holders. Updated by object events
//! ([`ClusterState::apply`], [`ClusterState::upsert`]) and by the plugin's own Reserve,
//! Unreserve, Bind and PostFilter ([`crate::reservations`]), as kube-scheduler's assume cache
//! holds in-flight allocations.
//!
//! What is derived is maintained incrementally:
//! - allocated devices, shared allocations and consumed capacity per claim event (the old
//!   contribution removed, the new one added, [`ClusterState::contribute`]);
//! - sharing-affinity locks per device from the claims holding it ([`locks`]), cached and
//!   recomputed only for devices whose holders changed;
//! - the slice index lazily, on the first PreFilter after a slice event
//!   ([`ClusterState::derived`]), reusing the converted devices of untouched pools.

use crate::hashing::{FxHashMap as HashMap, FxHashSet as HashSet};
use std::cell::RefCell;
use std::collections::BTreeMap;

use crate::affinity::{Extractors, LockState, LockTable, Values};
use crate::allocator::{AllocatedState, SelectorCache};
use crate::cel::CelCache;
use crate::config::Config;
use crate::error::Error;
use crate::index::{DeviceKey, Index, NodePool};
use crate::model::{DeviceClass, DeviceTaintRule, Pod, ResourceClaim, ResourceClaimTemplate};
use crate::object::{Kind, Object, decode_str, identify, object_key, parse_objects};
use crate::quantity::Quantity;
use crate::taints::TaintRule;

pub(crate) mod locks;
mod nodes;
pub(crate) mod rejected;
mod shared;

pub(crate) use locks::Locks;
pub(crate) use nodes::Nodes;
pub use nodes::{AsNode, NodeName, NodeRef};
use rejected::Rejected;
use shared::{Claims, Slices};

/// One (claim, request) holding a shared device, with the affinity values it locks it to when
/// known without CEL (set by Reserve from Filter's computation). The values are only a cache:
/// they are used while the extractors that apply to the device have the same content
/// ([`crate::affinity::fingerprint`]), and re-derived from the claim's config otherwise.
#[derive(Clone, Debug)]
pub(crate) struct Holder {
    pub(crate) values: Option<(u64, std::sync::Arc<Values>)>,
}

/// A lock holder: claim `namespace/name` and request name (`req` or `req/sub`). Locks are
/// derived per (claim, request), never per claim: two requests of one claim on one device are
/// two holders.
pub(crate) type HolderKey = (String, String);

/// Affinity values fixed by our own Reserve, with the fingerprint of the extractors that derived
/// them, by claim `namespace/name` and then (request, device). Kept per claim so that dropping a
/// claim's values (Unreserve, the claim's deletion) costs that claim's few entries, not a walk over
/// every claim the plugin ever reserved.
#[derive(Default)]
pub(crate) struct KnownValues(HashMap<String, Vec<KnownValue>>);

/// One entry of [`KnownValues`]: request name (`req` or `req/sub`), device, fingerprint, values.
type KnownValue = (String, DeviceKey, (u64, std::sync::Arc<Values>));

impl KnownValues {
    /// The values `claim`'s `request` was reserved with on `device`.
    pub(crate) fn get(
        &self,
        claim: &str,
        request: &str,
        device: &DeviceKey,
    ) -> Option<&(u64, std::sync::Arc<Values>)> {
        self.0
            .get(claim)?
            .iter()
            .find(|(r, d, _)| r == request && d == device)
            .map(|(_, _, v)| v)
    }

    /// Records (or replaces) the values of `claim`'s `request` on `device`.
    pub(crate) fn insert(
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
    pub(crate) fn remove_claim(&mut self, claim: &str) {
        self.0.remove(claim);
    }
}

/// A node's pools and candidate devices.
/// PreFilter's candidate extractors per (class, request selectors), kept with the slice index
/// and cleared when a DeviceClass changes.
pub(crate) type CandidateCache =
    RefCell<HashMap<(String, Vec<String>), std::rc::Rc<[crate::affinity::ExtId]>>>;

pub(crate) type NodeDevices = (Vec<NodePool>, std::sync::Arc<[crate::index::DevIdx]>);

/// Slice-derived state, rebuilt when slices or the configuration change.
pub(crate) struct Derived {
    pub(crate) index: Index,
    pub(crate) extractors: Extractors,
    /// Per node id ([`Nodes`]): its pools and its candidate devices in first-fit order
    /// ([`crate::allocator::candidates`]), computed once per node and index.
    pub(crate) node_pools: RefCell<Vec<Option<Result<NodeDevices, String>>>>,
    /// Selector results per device, kept across nodes, pods and cycles until slices change.
    pub(crate) selector_cache: SelectorCache,
    /// PreFilter's candidate extractors per (class, selectors); cleared on DeviceClass events.
    pub(crate) candidates: CandidateCache,
    /// The allocated state per device of `index` (kept in step by [`ClusterState::contribute`]).
    pub(crate) uses: Vec<crate::allocator::DeviceUse>,
}

fn bump(map: &mut crate::hashing::FxHashMap<DeviceKey, usize>, key: &DeviceKey, add: bool) {
    if add {
        *map.entry(key.clone()).or_default() += 1;
    } else if let Some(n) = map.get_mut(key) {
        *n -= 1;
        if *n == 0 {
            map.remove(key);
        }
    }
}

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

/// What events changed that the current cycle derived from ([`ClusterState::take_invalidated`]).
#[derive(Debug, Default)]
pub(crate) struct Invalidated {
    /// Ids of deleted nodes: their ids are handed out again, so their Filter results must go.
    pub(crate) nodes: Vec<u32>,
    /// A DeviceClass changed: the cycle's per-class caches are stale.
    pub(crate) classes: bool,
    /// The slice index was built: the cycle's caches hold values of the old extractors.
    pub(crate) index: bool,
    /// ... and it replaced an index the cycle's PreFilter saw: the cycle must start again.
    pub(crate) index_replaced: bool,
}

pub(crate) struct ClusterState {
    pub(crate) config: Config,
    pub(crate) cel: CelCache,
    pub(crate) nodes: Nodes,
    /// Pods not bound to a node (see [`ClusterState::upsert`]), and the pods our Bind bound.
    pub(crate) pods: BTreeMap<String, Box<Pod>>,
    pub(crate) classes: crate::hashing::FxHashMap<String, DeviceClass>,
    /// ResourceSlices by name, their devices' repeated parts stored once ([`shared`]).
    pub(crate) slices: Slices,
    /// Claims by `namespace/name`, their repeated parts stored once ([`shared`]).
    pub(crate) claims: Claims,
    pub(crate) templates: BTreeMap<String, ResourceClaimTemplate>,
    /// DeviceTaintRules by name; a change rebuilds the whole slice index.
    pub(crate) taint_rules: BTreeMap<String, DeviceTaintRule>,
    pub(crate) rules_dirty: bool,
    /// Reserved but not yet bound claims (the scheduler's in-flight allocations).
    pub(crate) inflight: BTreeMap<String, Box<ResourceClaim>>,
    pub(crate) derived: Option<Derived>,
    /// Slices changed since the index was built, and the pools they belong to.
    pub(crate) slices_dirty: bool,
    pub(crate) changed_pools: HashSet<(String, String)>,
    pub(crate) allocated: AllocatedState,
    pub(crate) holders: HashMap<DeviceKey, crate::model::Map<HolderKey, Holder>>,
    /// Affinity values fixed by our own Reserve, per (claim, request, device), with the
    /// fingerprint of the extractors that derived them: no second CEL pass while they stay.
    pub(crate) known_values: KnownValues,
    /// Lock states per device of the current index ([`crate::index::DevIdx`]), computed on
    /// first use; an entry is dropped when the device's holders change, all of them when the
    /// index is rebuilt.
    pub(crate) locks: RefCell<LockTable>,
    /// Claims our Bind allocated, with the `resourceVersion` the allocation was recorded on:
    /// events up to that version predate the Bind.
    pub(crate) bound_at: HashMap<String, u64>,
    /// The time the host last gave ([`crate::plugin::Plugin::set_time`]), in Unix seconds: binding timeouts are
    /// measured against it, and Bind stamps allocations with it.
    pub(crate) now: Option<i64>,
    /// Warnings not yet taken ([`ClusterState::take_warnings`]), and every warning given (each once).
    pub(crate) warnings: Vec<String>,
    pub(crate) warned: HashSet<String>,
    /// Objects whose last event did not decode, with the error: what Filter and PreFilter say of
    /// a node or claim they cannot find.
    pub(crate) rejected: Rejected,
    /// What events changed that the current cycle derived from, for the plugin to apply to it
    /// ([`ClusterState::take_invalidated`]).
    invalidated: Invalidated,
}

impl ClusterState {
    /// An empty state with the plugin's JSON configuration (`{"sharingAffinity": [...]}`; empty = none).
    pub(crate) fn new(config_json: &str) -> Result<ClusterState, Error> {
        Ok(ClusterState {
            config: Config::from_json(config_json)?,
            cel: CelCache::new(),
            nodes: Nodes::default(),
            pods: BTreeMap::new(),
            classes: crate::hashing::FxHashMap::default(),
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
            bound_at: HashMap::default(),
            now: None,
            warnings: Vec::new(),
            warned: HashSet::default(),
            rejected: Rejected::default(),
            invalidated: Invalidated::default(),
        })
    }

    /// Applies one object event. The object is Kubernetes JSON.
    pub(crate) fn apply(&mut self, kind: EventKind, object_json: &str) -> Result<(), Error> {
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
    pub(crate) fn load(&mut self, json: &str) -> Result<Vec<Error>, Error> {
        let parsed = parse_objects(json)?;
        for o in parsed.objects {
            self.upsert(o);
        }
        Ok(parsed.errors)
    }

    /// Inserts or replaces a decoded object.
    pub(crate) fn upsert(&mut self, object: Object) {
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
                    self.invalidated.nodes.push(id);
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
        self.invalidated.classes = true;
        self.class_changed();
    }

    /// Adds (or removes) a claim's allocation to the allocated state and the device holders.
    pub(crate) fn contribute(&mut self, key: &str, claim: &ResourceClaim, add: bool) {
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
    pub(crate) fn derived(&mut self) -> &Derived {
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
            self.invalidated.index = true;
            self.invalidated.index_replaced |= previous.is_some();
            self.changed_pools.clear();
            self.slices_dirty = false;
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
    pub(crate) fn lock_state(&mut self, device: &DeviceKey) -> LockState {
        self.derived();
        let d = self.derived.as_ref().expect("built above");
        match d.index.by_key.get(device) {
            Some(&idx) => self.lock_view(d).lock(idx),
            None => LockState::Clean,
        }
    }

    pub(crate) fn lock_view<'a>(&'a self, d: &'a Derived) -> Locks<'a> {
        Locks {
            state: self,
            derived: d,
        }
    }

    /// Names of all known nodes, sorted.
    pub(crate) fn node_names(&self) -> Vec<String> {
        let mut names: Vec<String> = self.nodes.names().map(str::to_string).collect();
        names.sort_unstable();
        names
    }

    /// A claim as currently stored (allocated claims include our bound allocations).
    pub(crate) fn claim(&self, key: &str) -> Option<&ResourceClaim> {
        self.claims.get(key).map(|c| &**c)
    }

    /// Warnings about the cluster's sharing-affinity set-up since the last call (each given once),
    /// for the plugin log: for example configuration extractors ignored for a pool whose driver
    /// publishes its own.
    pub(crate) fn take_warnings(&mut self) -> Vec<String> {
        std::mem::take(&mut self.warnings)
    }

    /// A pod as currently stored: one not bound to a node, or one our Bind bound (until its
    /// next event).
    pub(crate) fn pod(&self, key: &str) -> Option<&Pod> {
        self.pods.get(key).map(|p| &**p)
    }

    /// What changed for the current cycle since the last call.
    pub(crate) fn take_invalidated(&mut self) -> Invalidated {
        std::mem::take(&mut self.invalidated)
    }
}

#[cfg(test)]
mod tests {
    use super::{ClusterState, KnownValues};
    use crate::index::DeviceKey;
    use std::sync::Arc;

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
        let mut plugin = ClusterState::new("").unwrap();
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
