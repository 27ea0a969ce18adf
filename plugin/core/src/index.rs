//! The compact internal representation of ResourceSlices the allocator works on.
//!
//! Built from the API objects whenever slices change (as upstream converts API types to its
//! internal `draapi` types): pools keyed by `(driver, pool)` at their highest generation, slices
//! sorted by name, devices with their attributes resolved to typed values and their CEL input
//! prepared lazily, once. Each device has a dense index ([`DevIdx`]) so that per-call state is a
//! vector or a small map, and a [`DeviceKey`] (`driver/pool/device`) that allocated state is
//! keyed by.

use crate::hashing::FxHashSet as HashSet;
use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;

use crate::cel::{CelCache, CelDevice};
use crate::model::{
    self, AttributeValue, CapacityRequestPolicy, Device, DeviceCapacity, Map, Node, NodeSelector,
    ResourceSlice, SharingAffinityExtractor,
};
use crate::node_selector;
use crate::quantity::Quantity;
use crate::taints::TaintRule;

/// Identifies a device across the cluster: `driver/pool/device`, as upstream's `DeviceID`.
///
/// A thin pointer (`Arc<String>`, not `Arc<str>`): the key sits in every [`DeviceEntry`], which
/// Filter reads for each candidate device, while the text itself is read only to look a device
/// up or to name it.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct DeviceKey(Arc<String>);

impl DeviceKey {
    /// Builds the key from its parts.
    pub fn new(driver: &str, pool: &str, device: &str) -> Self {
        DeviceKey(Arc::new(format!("{driver}/{pool}/{device}")))
    }
    /// The key as `driver/pool/device`.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for DeviceKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// Dense index of a device in [`Index::devices`].
pub type DevIdx = u32;

/// What the Filter path reads of every candidate of a node before it tries one, 8 bytes per
/// device in a table of its own ([`Index::flags`]): the devices of a node, consecutive in the
/// index, share one or two cache lines, where their [`DeviceEntry`]s (and the device objects
/// behind them) take one line each. At 5,000 nodes each line a Filter call touches is a likely
/// cache miss.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct DeviceFlags {
    /// [`DeviceEntry::pool`].
    pub pool: u32,
    bits: u8,
}

impl DeviceFlags {
    const ALLOW_MULTIPLE: u8 = 1;
    const PER_DEVICE: u8 = 1 << 1;
    const TAINTED: u8 = 1 << 2;
    const COUNTERS: u8 = 1 << 3;
    const NODE_LOCAL: u8 = 1 << 4;
    const MULTI_TERM_SELECTOR: u8 = 1 << 5;

    /// The flags of a device of pool `pool`; see the accessors for each flag.
    pub fn new(
        pool: u32,
        allow_multiple: bool,
        per_device: bool,
        tainted: bool,
        counters: bool,
        node_local: bool,
        multi_term_selector: bool,
    ) -> Self {
        let bit = |set: bool, b: u8| if set { b } else { 0 };
        DeviceFlags {
            pool,
            bits: bit(allow_multiple, Self::ALLOW_MULTIPLE)
                | bit(per_device, Self::PER_DEVICE)
                | bit(tainted, Self::TAINTED)
                | bit(counters, Self::COUNTERS)
                | bit(node_local, Self::NODE_LOCAL)
                | bit(multi_term_selector, Self::MULTI_TERM_SELECTOR),
        }
    }

    /// [`DeviceData::allow_multiple`].
    pub fn allow_multiple(self) -> bool {
        self.bits & Self::ALLOW_MULTIPLE != 0
    }

    /// The device's slice uses `perDeviceNodeSelection`.
    pub fn per_device(self) -> bool {
        self.bits & Self::PER_DEVICE != 0
    }

    /// The device has taints (its own or from DeviceTaintRules).
    pub fn tainted(self) -> bool {
        self.bits & Self::TAINTED != 0
    }

    /// The device consumes counters.
    pub fn counters(self) -> bool {
        self.bits & Self::COUNTERS != 0
    }

    /// An allocation with the device is pinned to the node it is made for: the device is local
    /// to one node (its slice's `nodeName`, or with `perDeviceNodeSelection` its own non-empty
    /// `nodeName`), or it binds to the node (`bindsToNode`).
    pub fn node_local(self) -> bool {
        self.bits & Self::NODE_LOCAL != 0
    }

    /// Where the device is available is a node selector (the slice's, or the device's own with
    /// `perDeviceNodeSelection`) of more than one term, which an allocation's node selector
    /// cannot be built from (upstream `createNodeSelector`).
    pub fn multi_term_selector(self) -> bool {
        self.bits & Self::MULTI_TERM_SELECTOR != 0
    }
}

impl std::fmt::Debug for DeviceFlags {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DeviceFlags")
            .field("pool", &self.pool)
            .field("allow_multiple", &self.allow_multiple())
            .field("per_device", &self.per_device())
            .field("tainted", &self.tainted())
            .field("counters", &self.counters())
            .field("node_local", &self.node_local())
            .field("multi_term_selector", &self.multi_term_selector())
            .finish()
    }
}

/// One device of a pool's current generation: its position and its data, inline (the Filter path
/// reads a node's devices one after another: one contiguous run of entries, no pointer to chase
/// per device). The data is taken over from the index built before when the device's pool did
/// not change (DeviceTaintRules are not evaluated again).
pub struct DeviceEntry {
    /// Index of the pool in [`Index::pools`].
    pub pool: usize,
    /// Index of the slice in the pool's `slices`.
    pub slice: usize,
    data: DeviceData,
}

impl std::ops::Deref for DeviceEntry {
    type Target = DeviceData;
    fn deref(&self) -> &DeviceData {
        &self.data
    }
}

/// What the allocator reads of a device, converted once.
#[derive(Clone)]
pub struct DeviceData {
    /// `driver/pool/device`.
    pub key: DeviceKey,
    /// The API object, shared with the stored ResourceSlice (or, for a device DeviceTaintRules
    /// taint, a copy with those taints).
    pub device: Arc<model::Device>,
    /// The device's `capacity`, one shared copy for all devices of the index whose capacities
    /// are written the same (names, values and formats): the capacity check on every Filter call reads
    /// names, values and policies that stay in the CPU cache from node to node, instead of each
    /// device's own.
    pub capacity: Arc<Map<String, DeviceCapacity>>,
    /// `allowMultipleAllocations`.
    pub allow_multiple: bool,
}

impl DeviceData {
    fn new(key: DeviceKey, d: &Arc<model::Device>, shapes: &mut CapacityShapes) -> Self {
        DeviceData {
            key,
            allow_multiple: d.allow_multiple_allocations.unwrap_or(false),
            capacity: shapes.intern(&d.capacity),
            device: Arc::clone(d),
        }
    }
}

/// The distinct device capacities of an index build, each kept once.
///
/// Two capacities are the same when they are written the same: names, and every quantity with
/// its value and its format (the format decides how a consumed amount taken from a policy
/// prints in an allocation result).
#[derive(Default)]
struct CapacityShapes {
    by_hash: crate::hashing::FxHashMap<u64, Vec<Arc<Map<String, DeviceCapacity>>>>,
}

impl CapacityShapes {
    fn intern(&mut self, capacity: &Map<String, DeviceCapacity>) -> Arc<Map<String, DeviceCapacity>> {
        use std::hash::{Hash, Hasher};
        let mut h = rustc_hash::FxHasher::default();
        for (name, cap) in capacity.iter() {
            name.hash(&mut h);
            cap.value.nanos().hash(&mut h);
        }
        let same = self.by_hash.entry(h.finish()).or_default();
        if let Some(shared) = same.iter().find(|c| same_capacities(c, capacity)) {
            return Arc::clone(shared);
        }
        let shared = Arc::new(capacity.clone());
        same.push(Arc::clone(&shared));
        shared
    }
}

/// Whether two capacity maps are written the same (see [`CapacityShapes`]).
fn same_capacities(a: &Map<String, DeviceCapacity>, b: &Map<String, DeviceCapacity>) -> bool {
    let policy = |a: Option<&CapacityRequestPolicy>, b: Option<&CapacityRequestPolicy>| match (a, b) {
        (None, None) => true,
        (Some(a), Some(b)) => std::ptr::eq(a, b) || a.identical(b),
        _ => false,
    };
    a.len() == b.len()
        && a.iter().zip(b.iter()).all(|((an, ac), (bn, bc))| {
            an == bn
                && ac.value.identical(&bc.value)
                && policy(ac.request_policy.as_deref(), bc.request_policy.as_deref())
        })
}

impl DeviceData {
    /// The device prepared for CEL. An attribute with no or several values is an error, as
    /// upstream's "unsupported attribute value".
    ///
    /// Built on each call, never kept: selector results are cached per (device, selector) across
    /// nodes, pods and cycles ([`crate::allocator::SelectorCache`]), so the value is needed only
    /// when a selector meets a device for the first time, and keeping it cost about 1.6 KB per
    /// device (most of the index's memory at 40,000 devices). Callers that evaluate several
    /// expressions on one device build it once for all of them.
    pub fn cel(&self, driver: &str) -> Result<CelDevice, String> {
        let attributes = &self.device.attributes;
        if let Some((name, _)) = attributes.iter().find(|(_, v)| v.as_value().is_none()) {
            return Err(format!("attribute {name}: unsupported attribute value"));
        }
        Ok(CelDevice::from_entries(
            driver,
            attributes
                .iter()
                .filter_map(|(name, v)| Some((&**name, v.as_value()?))),
            self.device.capacity.iter().map(|(k, c)| (k.as_str(), &c.value)),
            self.allow_multiple,
        ))
    }

    /// Looks up an attribute by fully qualified name, also accepting the short form when the
    /// domain is the driver's (upstream `lookupAttribute`). `Err` for an invalid attribute value.
    pub fn lookup_attribute(&self, driver: &str, name: &str) -> Option<Result<&AttributeValue, ()>> {
        let attributes = &self.device.attributes;
        if let Some(v) = attributes.get(name) {
            return Some(v.as_value().ok_or(()));
        }
        let (domain, id) = name.split_once('/')?;
        if domain != driver {
            return None;
        }
        attributes.get(id).map(|v| v.as_value().ok_or(()))
    }
}

/// One slice of a pool's current generation (device slices and counter slices).
pub struct SliceEntry {
    /// Slice name.
    pub name: String,
    /// `spec.nodeName`.
    pub node_name: Option<String>,
    /// `spec.nodeSelector`.
    pub node_selector: Option<NodeSelector>,
    /// `spec.allNodes`.
    pub all_nodes: bool,
    /// `spec.perDeviceNodeSelection`.
    pub per_device: bool,
    /// Devices, in slice order (global indexes).
    pub devices: Vec<DevIdx>,
}

impl SliceEntry {
    /// Where `device`, one of this slice's, is available: see [`placement`].
    pub fn placement<'a>(&'a self, device: &'a Device) -> (bool, Option<&'a NodeSelector>) {
        placement(
            self.per_device,
            device,
            self.node_name.as_deref(),
            self.node_selector.as_ref(),
        )
    }
}

/// Where a device is available, as upstream's allocator builds a claim's node selector from it:
/// whether an allocation with it is pinned to the node it is made for, and the node selector that
/// limits it, if any. A non-empty `nodeName` pins it (under `perDeviceNodeSelection` the device's,
/// otherwise its slice's), and so does the device's `bindsToNode` (KEP-5007), wherever the device
/// is reachable from. The selector is the device's under `perDeviceNodeSelection`, otherwise its
/// slice's. The device flags ([`DeviceFlags::node_local`], [`DeviceFlags::multi_term_selector`])
/// and the allocator's node selector both read it here.
pub fn placement<'a>(
    per_device: bool,
    device: &'a Device,
    slice_node_name: Option<&str>,
    slice_selector: Option<&'a NodeSelector>,
) -> (bool, Option<&'a NodeSelector>) {
    let binds = device.binds_to_node == Some(true);
    if per_device {
        (
            binds || device.node_name.as_deref().is_some_and(|n| !n.is_empty()),
            device.node_selector.as_ref(),
        )
    } else {
        (
            binds || slice_node_name.is_some_and(|n| !n.is_empty()),
            slice_selector,
        )
    }
}

/// A sharing-affinity extractor in effect for a pool.
#[derive(Clone, Debug, PartialEq)]
pub struct PoolExtractor {
    /// The metadata slice that publishes it, by position in [`Pool::slices`] (the 8-extractor
    /// limit is per slice).
    pub slice: usize,
    /// Its position in the slice's `spec.sharingAffinity`.
    pub position: usize,
    /// The extractor, shared with the stored slice.
    pub spec: Arc<SharingAffinityExtractor>,
}

/// A resource pool at its highest generation.
pub struct Pool {
    /// Driver.
    pub driver: String,
    /// Pool name.
    pub name: String,
    /// Generation in use.
    pub generation: i64,
    /// All slices of this generation are present.
    pub complete: bool,
    /// Why the pool is invalid (duplicate device names, bad counter references...).
    pub invalid: Option<String>,
    /// Slices of the generation, sorted by name.
    pub slices: Vec<SliceEntry>,
    /// Counter sets by name.
    pub counter_sets: BTreeMap<String, BTreeMap<String, Quantity>>,
    /// Some device has binding conditions (such pools are tried last).
    pub has_binding_conditions: bool,
    /// Sharing-affinity extractors from the pool's metadata slices (KEP-5981), union.
    pub slice_extractors: Vec<PoolExtractor>,
}

impl Pool {
    /// Where `ex`, one of this pool's [`Pool::slice_extractors`], comes from, for messages
    /// (`ResourceSlice meta-0 spec.sharingAffinity[0]`).
    pub fn extractor_source(&self, ex: &PoolExtractor) -> String {
        let slice = self.slices.get(ex.slice).map_or("?", |s| s.name.as_str());
        format!("ResourceSlice {slice} spec.sharingAffinity[{}]", ex.position)
    }

    /// `driver/pool`.
    pub fn id(&self) -> String {
        format!("{}/{}", self.driver, self.name)
    }
}

/// The taints of the rules that pick a device (see [`TaintRule::matches`]).
fn rule_taints(
    rules: Option<(&[TaintRule], &CelCache)>,
    (driver, pool): (&str, &str),
    data: &DeviceData,
) -> Result<Vec<model::DeviceTaint>, String> {
    let mut out = Vec::new();
    let Some((rules, cel)) = rules else {
        return Ok(out);
    };
    let device = std::cell::OnceCell::new();
    for rule in rules {
        let cel_device = || {
            device
                .get_or_init(|| data.cel(driver))
                .as_ref()
                .map_err(Clone::clone)
        };
        if rule.matches((driver, pool, &data.device.name), cel, cel_device)? {
            out.push(rule.taint.clone());
        }
    }
    Ok(out)
}

/// The slices of one pool that are relevant for one node.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NodePool {
    /// Index in [`Index::pools`].
    pub pool: usize,
    /// Indexes into the pool's `slices` of device slices targeting the node, sorted by name.
    pub slices: Vec<usize>,
}

/// All pools of the cluster, with node-relevance lookups.
#[derive(Default)]
pub struct Index {
    /// Pools sorted by (driver, pool name).
    pub pools: Vec<Pool>,
    /// Devices, by dense index.
    pub devices: Vec<DeviceEntry>,
    /// [`DeviceFlags`] of each device, aligned with `devices`.
    flags: Vec<DeviceFlags>,
    /// Device index by key.
    pub by_key: crate::hashing::FxHashMap<DeviceKey, DevIdx>,
    /// Device slices with a `nodeName`, by that name: (pool, slice) in index order.
    by_node_name: crate::hashing::FxHashMap<String, Vec<(usize, usize)>>,
    /// Device slices that a node selector, `allNodes` or per-device node selection place:
    /// (pool, slice) in index order. Each node checks these; named slices it finds by name.
    placed: Vec<(usize, usize)>,
}

impl Index {
    /// Builds the index from all slices. Slices of older generations are ignored.
    pub fn build<'a>(slices: impl IntoIterator<Item = &'a ResourceSlice>) -> Index {
        Self::rebuild(slices, None, &HashSet::default())
    }

    /// Builds the index again after slice events, sharing the converted devices (and their
    /// prepared CEL input) of every pool not in `changed` with `previous`.
    pub fn rebuild<'a>(
        slices: impl IntoIterator<Item = &'a ResourceSlice>,
        previous: Option<&Index>,
        changed: &HashSet<(String, String)>,
    ) -> Index {
        Self::rebuild_with_rules(slices, previous, changed, None)
    }

    /// [`Index::rebuild`] with `DeviceTaintRule`s: each device carries, after its own taints, the
    /// taint of every rule that picks it, in `rules` order. `previous` must have been built with
    /// the same rules (its unchanged pools are reused as they are). A rule that cannot be
    /// evaluated on a device makes that device's pool invalid, with the rule's error.
    pub fn rebuild_with_rules<'a>(
        slices: impl IntoIterator<Item = &'a ResourceSlice>,
        previous: Option<&Index>,
        changed: &HashSet<(String, String)>,
        rules: Option<(&[TaintRule], &CelCache)>,
    ) -> Index {
        let mut grouped: BTreeMap<(String, String), Vec<&ResourceSlice>> = BTreeMap::new();
        for s in slices {
            grouped
                .entry((s.spec.driver.clone(), s.spec.pool.name.to_string()))
                .or_default()
                .push(s);
        }
        let mut index = Index::default();
        let mut shapes = CapacityShapes::default();
        for ((driver, pool_name), all) in grouped {
            let generation = all.iter().map(|s| s.spec.pool.generation).max().unwrap_or(0);
            let mut current: Vec<&ResourceSlice> = all
                .into_iter()
                .filter(|s| s.spec.pool.generation == generation)
                .collect();
            crate::map::sort_by_str(&mut current, |s| s.metadata.name.as_str());
            let expected = current
                .iter()
                .map(|s| s.spec.pool.resource_slice_count)
                .max()
                .unwrap_or(0);
            let pool_idx = index.pools.len();
            let mut pool = Pool {
                driver: driver.clone(),
                name: pool_name.clone(),
                generation,
                complete: current.len() as i64 == expected,
                invalid: None,
                slices: Vec::with_capacity(current.len()),
                counter_sets: BTreeMap::new(),
                has_binding_conditions: false,
                slice_extractors: Vec::new(),
            };
            let mut names = HashSet::default();
            for (slice_idx, s) in current.iter().enumerate() {
                for cs in &s.spec.shared_counters {
                    if pool.counter_sets.contains_key(&cs.name) && pool.invalid.is_none() {
                        pool.invalid = Some(format!("duplicate counter set name {}", cs.name));
                    }
                    let mut counters = BTreeMap::new();
                    for (k, v) in cs.counters.iter() {
                        counters.insert(k.clone(), v.value.clone());
                    }
                    pool.counter_sets.insert(cs.name.clone(), counters);
                }
                for (i, ex) in s.spec.sharing_affinity.iter().enumerate() {
                    pool.slice_extractors.push(PoolExtractor {
                        slice: slice_idx,
                        position: i,
                        spec: Arc::clone(ex),
                    });
                }
                let mut devs = Vec::with_capacity(s.spec.devices.len());
                for d in &s.spec.devices {
                    if !names.insert(d.name.clone()) && pool.invalid.is_none() {
                        pool.invalid = Some(format!("duplicate device name {}", d.name));
                    }
                    if !d.binding_conditions.is_empty() {
                        pool.has_binding_conditions = true;
                    }
                    let key = DeviceKey::new(&driver, &pool_name, &d.name);
                    let idx = index.devices.len() as DevIdx;
                    let reused = previous
                        .filter(|_| !changed.contains(&(driver.clone(), pool_name.clone())))
                        .and_then(|prev| {
                            prev.by_key
                                .get(&key)
                                .map(|&i| prev.devices[i as usize].data.clone())
                        });
                    let data = match reused {
                        Some(data) => data,
                        None => {
                            let data = DeviceData::new(key.clone(), d, &mut shapes);
                            match rule_taints(rules, (&driver, &pool_name), &data) {
                                Ok(extra) if extra.is_empty() => data,
                                Ok(extra) => {
                                    let mut tainted = (**d).clone();
                                    tainted.taints.extend(extra);
                                    DeviceData::new(key.clone(), &Arc::new(tainted), &mut shapes)
                                }
                                Err(e) => {
                                    if pool.invalid.is_none() {
                                        pool.invalid = Some(e);
                                    }
                                    data
                                }
                            }
                        }
                    };
                    index.by_key.entry(key).or_insert(idx);
                    let per_device = s.spec.per_device_node_selection.unwrap_or(false);
                    let (node_local, selector) = placement(
                        per_device,
                        &data.device,
                        s.spec.node_name.as_deref(),
                        s.spec.node_selector.as_ref(),
                    );
                    index.flags.push(DeviceFlags::new(
                        pool_idx as u32,
                        data.allow_multiple,
                        per_device,
                        !data.device.taints.is_empty(),
                        !data.device.consumes_counters.is_empty(),
                        node_local,
                        selector.is_some_and(|s| s.node_selector_terms.len() > 1),
                    ));
                    index.devices.push(DeviceEntry {
                        pool: pool_idx,
                        slice: slice_idx,
                        data,
                    });
                    devs.push(idx);
                }
                pool.slices.push(SliceEntry {
                    name: s.metadata.name.to_string(),
                    node_name: s
                        .spec
                        .node_name
                        .as_deref()
                        .filter(|n| !n.is_empty())
                        .map(String::from),
                    node_selector: s.spec.node_selector.clone(),
                    all_nodes: s.spec.all_nodes.unwrap_or(false),
                    per_device: s.spec.per_device_node_selection.unwrap_or(false),
                    devices: devs,
                });
            }
            // Counter references must resolve.
            if pool.invalid.is_none() {
                'outer: for slice in &pool.slices {
                    for &d in &slice.devices {
                        let device = &index.devices[d as usize].device;
                        for c in &device.consumes_counters {
                            if !c.compatibility_groups.is_empty() {
                                pool.invalid = Some(format!(
                                    "device {} declares compatibilityGroups (KEP-5963), which the \
                                     scheduler does not implement (alpha in Kubernetes v1.37, gate \
                                     DRADeviceCompatibilityGroups off by default): the pool is not used",
                                    device.name
                                ));
                                break 'outer;
                            }
                            let Some(set) = pool.counter_sets.get(&c.counter_set) else {
                                pool.invalid = Some(format!("counter set {} not found", c.counter_set));
                                break 'outer;
                            };
                            for name in c.counters.keys() {
                                if !set.contains_key(name) {
                                    pool.invalid = Some(format!(
                                        "counter {name} not found in counter set {}",
                                        c.counter_set
                                    ));
                                    break 'outer;
                                }
                            }
                        }
                    }
                }
            }
            for (si, s) in pool.slices.iter().enumerate() {
                if s.devices.is_empty() {
                    continue;
                }
                if let Some(name) = &s.node_name {
                    index
                        .by_node_name
                        .entry(name.clone())
                        .or_default()
                        .push((pool_idx, si));
                } else if s.all_nodes || s.node_selector.is_some() || s.per_device {
                    index.placed.push((pool_idx, si));
                }
            }
            index.pools.push(pool);
        }
        index
    }

    /// The device entry for an index.
    pub fn device(&self, idx: DevIdx) -> &DeviceEntry {
        &self.devices[idx as usize]
    }

    /// The device's [`DeviceFlags`] (what the Filter path reads of every candidate).
    #[inline]
    pub fn flags(&self, idx: DevIdx) -> DeviceFlags {
        self.flags[idx as usize]
    }

    /// The pool a device belongs to.
    pub fn pool_of(&self, idx: DevIdx) -> &Pool {
        &self.pools[self.devices[idx as usize].pool]
    }

    /// The pools relevant for `node`, in allocation order: by (driver, pool), pools with binding
    /// conditions last. Each lists the device slices that target the node (for per-device node
    /// selection the slice is listed when any device targets the node; devices are checked again
    /// one by one). An invalid node selector in a slice is an error naming the slice.
    pub fn pools_for_node(&self, node: &Node) -> Result<Vec<NodePool>, String> {
        // Only the slices named for this node and the placed ones can be relevant: the cost
        // does not grow with the number of nodes. Merged in index order, so pools and their
        // slices keep the order of a walk over all pools.
        let named = self
            .by_node_name
            .get(node.metadata.name.as_str())
            .map_or(&[][..], Vec::as_slice);
        let mut relevant = Vec::with_capacity(named.len());
        relevant.extend_from_slice(named);
        for &(pi, si) in &self.placed {
            let s = &self.pools[pi].slices[si];
            let matches = if s.all_nodes || s.node_selector.is_some() {
                node_matches(node, None, s.all_nodes, s.node_selector.as_ref())
                    .map_err(|e| format!("ResourceSlice {}: spec.nodeSelector: {e}", s.name))?
            } else {
                let mut any = false;
                for &d in &s.devices {
                    let dev = &self.devices[d as usize].device;
                    if device_node_matches(node, dev)
                        .map_err(|e| format!("ResourceSlice {} device {}: {e}", s.name, dev.name))?
                    {
                        any = true;
                        break;
                    }
                }
                any
            };
            if matches {
                relevant.push((pi, si));
            }
        }
        // The core's one shared sort: `sort_unstable` here cost each guest 8 KB of code.
        crate::map::sort_stable_by(&mut relevant, Ord::cmp);
        let mut out: Vec<NodePool> = Vec::new();
        let mut late: Vec<NodePool> = Vec::new();
        let mut i = 0;
        while i < relevant.len() {
            let pi = relevant[i].0;
            let mut slices = Vec::new();
            while i < relevant.len() && relevant[i].0 == pi {
                slices.push(relevant[i].1);
                i += 1;
            }
            let np = NodePool { pool: pi, slices };
            if self.pools[pi].has_binding_conditions {
                late.push(np)
            } else {
                out.push(np)
            }
        }
        out.extend(late);
        Ok(out)
    }
}

/// Per-device node selection of a device in a `perDeviceNodeSelection` slice.
pub fn device_node_matches(node: &Node, dev: &model::Device) -> Result<bool, String> {
    node_matches(
        node,
        dev.node_name.as_deref(),
        dev.all_nodes.unwrap_or(false),
        dev.node_selector.as_ref(),
    )
}

/// Upstream `NodeMatches`: node name, then all-nodes, then selector; nothing set matches nothing.
pub fn node_matches(
    node: &Node,
    node_name: Option<&str>,
    all_nodes: bool,
    selector: Option<&NodeSelector>,
) -> Result<bool, String> {
    match (node_name.filter(|n| !n.is_empty()), all_nodes, selector) {
        (Some(name), _, _) => Ok(node.metadata.name == name),
        (None, true, _) => Ok(true),
        (None, false, Some(sel)) => node_selector::matches(sel, node).map_err(|e| e.to_string()),
        _ => Ok(false),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::object::{Object, parse_objects};

    fn slices(json: &str) -> Vec<ResourceSlice> {
        parse_objects(json)
            .unwrap()
            .objects
            .into_iter()
            .filter_map(|o| match o {
                Object::ResourceSlice(s) => Some(*s),
                _ => None,
            })
            .collect()
    }

    fn slice(name: &str, node: &str, pool: &str, generation: i64, count: i64, devices: &[&str]) -> String {
        let devs: Vec<String> = devices.iter().map(|d| format!(r#"{{"name":"{d}"}}"#)).collect();
        format!(
            r#"{{"apiVersion":"resource.k8s.io/v1","kind":"ResourceSlice","metadata":{{"name":"{name}"}},
            "spec":{{"driver":"d","nodeName":"{node}","pool":{{"name":"{pool}","generation":{generation},"resourceSliceCount":{count}}},
            "devices":[{}]}}}}"#,
            devs.join(",")
        )
    }

    /// The flags table says what the entries and slices say, device by device: a wrong flag
    /// would skip a taint or a counter, or take a dedicated device for a shared one.
    #[test]
    fn flags_agree_with_entries_and_slices() {
        let json = r#"{"apiVersion":"v1","kind":"List","items":[
            {"apiVersion":"resource.k8s.io/v1","kind":"ResourceSlice","metadata":{"name":"a"},
             "spec":{"driver":"d","perDeviceNodeSelection":true,"pool":{"name":"pa","generation":1,"resourceSliceCount":1},
              "sharedCounters":[{"name":"cs","counters":{"mem":{"value":"8Gi"}}}],
              "devices":[
                {"name":"shared-tainted","nodeName":"n1","allowMultipleAllocations":true,
                 "taints":[{"key":"k","value":"v","effect":"NoSchedule"}]},
                {"name":"counting","nodeName":"n1",
                 "consumesCounters":[{"counterSet":"cs","counters":{"mem":{"value":"1Gi"}}}]}]}},
            {"apiVersion":"resource.k8s.io/v1","kind":"ResourceSlice","metadata":{"name":"b"},
             "spec":{"driver":"d","nodeName":"n2","pool":{"name":"pb","generation":1,"resourceSliceCount":1},
              "devices":[{"name":"plain"},{"name":"shared","allowMultipleAllocations":false}]}},
            {"apiVersion":"resource.k8s.io/v1","kind":"ResourceSlice","metadata":{"name":"c"},
             "spec":{"driver":"d","pool":{"name":"pc","generation":1,"resourceSliceCount":1},
              "nodeSelector":{"nodeSelectorTerms":[
                {"matchExpressions":[{"key":"r","operator":"In","values":["1"]}]},
                {"matchExpressions":[{"key":"r","operator":"In","values":["2"]}]}]},
              "devices":[{"name":"two-terms"}]}},
            {"apiVersion":"resource.k8s.io/v1","kind":"ResourceSlice","metadata":{"name":"e"},
             "spec":{"driver":"d","pool":{"name":"pe","generation":1,"resourceSliceCount":1},
              "nodeSelector":{"nodeSelectorTerms":[
                {"matchExpressions":[{"key":"r","operator":"In","values":["1"]}]}]},
              "devices":[{"name":"one-term"}]}},
            {"apiVersion":"resource.k8s.io/v1","kind":"ResourceSlice","metadata":{"name":"f"},
             "spec":{"driver":"d","perDeviceNodeSelection":true,"pool":{"name":"pf","generation":1,"resourceSliceCount":1},
              "devices":[
                {"name":"own-two-terms","nodeSelector":{"nodeSelectorTerms":[
                  {"matchExpressions":[{"key":"r","operator":"In","values":["1"]}]},
                  {"matchExpressions":[{"key":"r","operator":"In","values":["2"]}]}]}},
                {"name":"everywhere","allNodes":true},
                {"name":"empty-name","nodeName":""}]}}]}"#;
        let slices = slices(json);
        let index = Index::build(&slices);
        assert_eq!(index.devices.len(), 9);
        let mut seen = [false; 6];
        for d in 0..index.devices.len() as DevIdx {
            let e = index.device(d);
            let slice = &index.pools[e.pool].slices[e.slice];
            // Where the device is available, as the allocator builds a node selector from it.
            let (node_local, selector) = slice.placement(&e.device);
            let f = index.flags(d);
            let got = [
                f.allow_multiple(),
                f.per_device(),
                f.tainted(),
                f.counters(),
                f.node_local(),
                f.multi_term_selector(),
            ];
            let expected = [
                e.allow_multiple,
                slice.per_device,
                !e.device.taints.is_empty(),
                !e.device.consumes_counters.is_empty(),
                node_local,
                selector.is_some_and(|s| s.node_selector_terms.len() > 1),
            ];
            assert_eq!((f.pool, got), (e.pool as u32, expected), "device {}", e.key);
            for (seen, flag) in seen.iter_mut().zip(got) {
                *seen |= flag;
            }
        }
        // Every flag is set on some device and clear on another.
        assert_eq!(seen, [true; 6]);
        // What the docs promise: a node's eight devices in one or two cache lines.
        assert_eq!(std::mem::size_of::<DeviceFlags>(), 8);
        let flags = |pool: &str, name: &str| index.flags(index.by_key[&DeviceKey::new("d", pool, name)]);
        assert!(flags("pa", "counting").node_local() && flags("pb", "plain").node_local());
        assert!(
            flags("pc", "two-terms").multi_term_selector()
                && flags("pf", "own-two-terms").multi_term_selector()
        );
        for (pool, name) in [("pe", "one-term"), ("pf", "everywhere"), ("pf", "empty-name")] {
            let f = flags(pool, name);
            assert!(
                !f.node_local() && !f.multi_term_selector(),
                "{pool}/{name}: {f:?}"
            );
        }
        assert!(
            !index
                .flags(index.by_key[&DeviceKey::new("d", "pb", "plain")])
                .per_device()
        );
    }

    /// Devices whose capacities are written the same share one copy across slices and pools; a
    /// difference in a name, a value, a quantity's format or a policy keeps them apart.
    #[test]
    fn equal_capacities_are_shared_across_the_index() {
        let dev = |name: &str, cap: &str| format!(r#"{{"name":"{name}","capacity":{cap}}}"#);
        let slice = |pool: &str, devices: &[String]| {
            format!(
                r#"{{"apiVersion":"resource.k8s.io/v1","kind":"ResourceSlice","metadata":{{"name":"{pool}"}},
                "spec":{{"driver":"d","nodeName":"n-{pool}","pool":{{"name":"{pool}","generation":1,"resourceSliceCount":1}},
                "devices":[{}]}}}}"#,
                devices.join(",")
            )
        };
        let base = r#"{"slots":{"value":"16","requestPolicy":{"default":"1","validValues":["1","2"]}}}"#;
        let json = [
            slice("p", &[dev("a", base), dev("b", base)]),
            slice(
                "q",
                &[
                    dev("c", base),
                    dev("milli", r#"{"slots":{"value":"16","requestPolicy":{"default":"1000m","validValues":["1","2"]}}}"#),
                    dev("value", r#"{"slots":{"value":"17","requestPolicy":{"default":"1","validValues":["1","2"]}}}"#),
                    dev("binary", r#"{"slots":{"value":"16","requestPolicy":{"default":"1","validValues":["1","2Ki"]}}}"#),
                    dev("decimal", r#"{"slots":{"value":"16","requestPolicy":{"default":"1","validValues":["1","2048"]}}}"#),
                    dev("name", r#"{"lanes":{"value":"16","requestPolicy":{"default":"1","validValues":["1","2"]}}}"#),
                    dev("values", r#"{"slots":{"value":"16","requestPolicy":{"default":"1","validValues":["1"]}}}"#),
                    dev("none", r#"{"slots":{"value":"16"}}"#),
                    dev("none2", r#"{"slots":{"value":"16"}}"#),
                ],
            ),
        ]
        .join("\n");
        let idx = Index::build(&slices(&json));
        let cap = |pool: &str, name: &str| {
            idx.devices[idx.by_key[&DeviceKey::new("d", pool, name)] as usize]
                .capacity
                .clone()
        };
        assert!(Arc::ptr_eq(&cap("p", "a"), &cap("p", "b")));
        assert!(Arc::ptr_eq(&cap("p", "a"), &cap("q", "c")), "shared across pools");
        assert!(Arc::ptr_eq(&cap("q", "none"), &cap("q", "none2")));
        // "1000m" prints as "1" (a quantity's text follows from its value and format).
        assert!(Arc::ptr_eq(&cap("p", "a"), &cap("q", "milli")));
        // Equal values in different formats print differently.
        assert!(!Arc::ptr_eq(&cap("q", "binary"), &cap("q", "decimal")));
        for other in ["value", "name", "values", "none", "binary"] {
            assert!(!Arc::ptr_eq(&cap("p", "a"), &cap("q", other)), "{other} differs");
        }
        // The shared copy is the device's capacity as written.
        let device = &idx.devices[idx.by_key[&DeviceKey::new("d", "q", "milli")] as usize];
        assert_eq!(*device.capacity, *device.device.capacity);
        assert_eq!(
            device
                .capacity
                .get("slots")
                .unwrap()
                .request_policy
                .as_ref()
                .unwrap()
                .default
                .as_ref()
                .unwrap()
                .to_string(),
            "1"
        );
    }

    #[test]
    fn highest_generation_wins_and_completeness() {
        let json = [
            slice("s-old", "n1", "p", 1, 1, &["a"]),
            slice("s-b", "n1", "p", 2, 2, &["b"]),
            slice("s-a", "n1", "p", 2, 2, &["c"]),
            slice("q-0", "n1", "q", 1, 2, &["x"]),
        ]
        .join("\n");
        let idx = Index::build(&slices(&json));
        assert_eq!(idx.pools.len(), 2);
        let p = &idx.pools[0];
        assert_eq!((p.name.as_str(), p.generation, p.complete), ("p", 2, true));
        let names: Vec<&str> = p.slices.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(names, ["s-a", "s-b"], "slices sorted by name");
        assert!(!idx.pools[1].complete, "pool q has 1 of 2 slices");
    }

    /// Attributes are found by full or short name (any position in the sorted slice), invalid
    /// ones are `Err`; the index reads the stored slice's device, not a copy.
    #[test]
    fn attribute_lookup_and_the_shared_device() {
        let json = r#"{"apiVersion":"resource.k8s.io/v1","kind":"ResourceSlice","metadata":{"name":"s"},
            "spec":{"driver":"d.example.com","nodeName":"n1","pool":{"name":"p","generation":1,"resourceSliceCount":1},
            "devices":[{"name":"a","attributes":{
                "zz":{"int":3},"d.example.com/b":{"string":"x"},"m":{},"other.example.com/c":{"bool":true}},
                "capacity":{"mem":{"value":"2Gi"}}}]}}"#;
        let stored = slices(json);
        let idx = Index::build(&stored);
        let dev = &idx.devices[0];
        let get = |name: &str| dev.lookup_attribute("d.example.com", name);
        assert_eq!(get("zz"), Some(Ok(&AttributeValue::Int(3))));
        assert_eq!(get("d.example.com/zz"), Some(Ok(&AttributeValue::Int(3))));
        assert_eq!(
            get("d.example.com/b"),
            Some(Ok(&AttributeValue::String("x".into())))
        );
        assert_eq!(get("other.example.com/c"), Some(Ok(&AttributeValue::Bool(true))));
        assert_eq!(get("m"), Some(Err(())), "no value: invalid");
        assert_eq!(get("b"), None, "stored under its full name only");
        assert_eq!(get("other.example.com/zz"), None, "another domain");
        assert_eq!(get("aa"), None);
        assert!(Arc::ptr_eq(&dev.device, &stored[0].spec.devices[0]));
        let mem = dev.device.capacity.get("mem").map(|c| &c.value);
        assert_eq!(mem, Some(&"2Gi".parse::<Quantity>().unwrap()));
    }

    #[test]
    fn duplicate_device_names_make_pool_invalid() {
        let json = [
            slice("s1", "n1", "p", 1, 2, &["a"]),
            slice("s2", "n1", "p", 1, 2, &["a"]),
        ]
        .join("\n");
        let idx = Index::build(&slices(&json));
        assert_eq!(idx.pools[0].invalid.as_deref(), Some("duplicate device name a"));
    }

    /// KEP-5963 compatibility groups are not implemented: a pool that declares them is not used
    /// (as v1.37's scheduler skips it with its gate off), never co-allocated blindly.
    #[test]
    fn compatibility_groups_make_the_pool_invalid() {
        let json = r#"{"apiVersion":"resource.k8s.io/v1","kind":"ResourceSlice","metadata":{"name":"s1"},
            "spec":{"driver":"gpu.example.com","nodeName":"n1","pool":{"name":"p","generation":1,"resourceSliceCount":1},
            "sharedCounters":[{"name":"gpu-0","counters":{"memory":{"value":"40Gi"}}}],
            "devices":[
              {"name":"mig-1g","consumesCounters":[{"counterSet":"gpu-0","counters":{"memory":{"value":"5Gi"}},"compatibilityGroups":["mig"]}]},
              {"name":"vgpu-4q","consumesCounters":[{"counterSet":"gpu-0","counters":{"memory":{"value":"4Gi"}},"compatibilityGroups":["vgpu"]}]}]}}"#;
        let idx = Index::build(&slices(json));
        let reason = idx.pools[0].invalid.as_deref().unwrap_or_default();
        assert!(
            reason.starts_with("device mig-1g declares compatibilityGroups (KEP-5963)"),
            "{reason}"
        );
        let without = json
            .replace(r#","compatibilityGroups":["mig"]"#, "")
            .replace(r#","compatibilityGroups":["vgpu"]"#, "");
        assert_eq!(Index::build(&slices(&without)).pools[0].invalid, None);
    }

    #[test]
    fn rebuild_shares_devices_of_unchanged_pools() {
        let v1 = [
            slice("s1", "n1", "p", 1, 1, &["a"]),
            slice("s2", "n1", "q", 1, 1, &["b"]),
        ]
        .join("\n");
        let first = Index::build(&slices(&v1));
        let v2 = [
            slice("s1", "n1", "p", 2, 1, &["a2"]),
            slice("s2", "n1", "q", 1, 1, &["b"]),
        ]
        .join("\n");
        let changed: HashSet<(String, String)> = [("d".to_string(), "p".to_string())].into_iter().collect();
        let second = Index::rebuild(&slices(&v2), Some(&first), &changed);
        let b = |i: &Index| {
            i.devices[i.by_key[&DeviceKey::new("d", "q", "b")] as usize]
                .device
                .clone()
        };
        assert!(
            Arc::ptr_eq(&b(&first), &b(&second)),
            "pool q did not change: device data taken over"
        );
        assert!(
            second.by_key.contains_key(&DeviceKey::new("d", "p", "a2")),
            "pool p rebuilt"
        );
        assert!(!second.by_key.contains_key(&DeviceKey::new("d", "p", "a")));
        let all: HashSet<(String, String)> = [("d".to_string(), "q".to_string())].into_iter().collect();
        let third = Index::rebuild(&slices(&v2), Some(&second), &all);
        assert!(
            !Arc::ptr_eq(&b(&second), &b(&third)),
            "a changed pool is converted again"
        );
    }

    #[test]
    fn node_relevance() {
        let json = [
            slice("s1", "n1", "p", 1, 1, &["a"]),
            slice("s2", "n2", "q", 1, 1, &["b"]),
        ]
        .join("\n");
        let idx = Index::build(&slices(&json));
        let mut node = Node::default();
        node.metadata.name = "n2".into();
        let pools = idx.pools_for_node(&node).unwrap();
        assert_eq!(pools.len(), 1);
        assert_eq!(idx.pools[pools[0].pool].name, "q");
    }

    fn placed_slice(name: &str, pool: &str, placement: &str, device: &str) -> String {
        format!(
            r#"{{"apiVersion":"resource.k8s.io/v1","kind":"ResourceSlice","metadata":{{"name":"{name}"}},
            "spec":{{"driver":"d","pool":{{"name":"{pool}","generation":1,"resourceSliceCount":2}},{placement},
            "devices":[{device}]}}}}"#
        )
    }

    fn node(name: &str, zone: &str) -> Node {
        let mut n = Node::default();
        n.metadata.name = name.into();
        n.metadata.labels.insert("zone".into(), zone.into());
        n
    }

    /// Named slices are found by the node's name, placed ones (selector, all nodes, per device)
    /// are checked for every node, and the result keeps index order: pools by (driver, name),
    /// slices by name, pools with binding conditions last.
    #[test]
    fn named_and_placed_slices_merge_in_index_order() {
        let zone_a = r#""nodeSelector":{"nodeSelectorTerms":[{"matchExpressions":[{"key":"zone","operator":"In","values":["a"]}]}]}"#;
        let per_device = r#""perDeviceNodeSelection":true"#;
        let json = [
            placed_slice("a-1", "a", r#""nodeName":"n1""#, r#"{"name":"x"}"#),
            placed_slice("a-0", "a", zone_a, r#"{"name":"y"}"#),
            placed_slice("b-0", "b", r#""allNodes":true"#, r#"{"name":"x"}"#),
            placed_slice("b-1", "b", r#""nodeName":"n2""#, r#"{"name":"y"}"#),
            placed_slice(
                "c-0",
                "c",
                r#""nodeName":"n1""#,
                r#"{"name":"x","bindingConditions":["ready"],"bindingFailureConditions":["failed"]}"#,
            ),
            placed_slice("c-1", "c", r#""nodeName":"n1""#, r#"{"name":"y"}"#),
            placed_slice("d-0", "d", per_device, r#"{"name":"x","nodeName":"n2"}"#),
            placed_slice("d-1", "d", per_device, r#"{"name":"y","allNodes":true}"#),
            placed_slice("e-0", "e", r#""nodeName":"n1""#, ""),
        ]
        .join("\n");
        let idx = Index::build(&slices(&json));
        let listed = |n: &Node| -> Vec<(String, Vec<String>)> {
            idx.pools_for_node(n)
                .unwrap()
                .into_iter()
                .map(|np| {
                    let p = &idx.pools[np.pool];
                    (
                        p.name.clone(),
                        np.slices.iter().map(|&s| p.slices[s].name.clone()).collect(),
                    )
                })
                .collect()
        };
        let owned = |v: &[(&str, &[&str])]| -> Vec<(String, Vec<String>)> {
            v.iter()
                .map(|(p, s)| (p.to_string(), s.iter().map(|x| x.to_string()).collect()))
                .collect()
        };
        assert_eq!(
            listed(&node("n1", "a")),
            owned(&[
                ("a", &["a-0", "a-1"]),
                ("b", &["b-0"]),
                ("d", &["d-1"]),
                ("c", &["c-0", "c-1"])
            ])
        );
        assert_eq!(
            listed(&node("n2", "b")),
            owned(&[("b", &["b-0", "b-1"]), ("d", &["d-0", "d-1"])])
        );
        assert_eq!(
            listed(&node("n3", "b")),
            owned(&[("b", &["b-0"]), ("d", &["d-1"])])
        );
    }
}
