//! The structured allocator: for one node, all pending claims of one pod.
//!
//! A backtracking search over claims → requests → (subrequests) → devices in upstream's
//! deterministic order (pools by driver/pool name, slices by name, devices in slice order), with
//! the checks of the incubating allocator in the same order: in use, selectors, capacity,
//! counters, taints, constraints. Sharing affinity ([`crate::affinity`]) is checked next to
//! capacity. Every tentative change (dedicated devices, consumed capacity, counters, constraint
//! values, affinity locks) is one tentative state (`tentative.rs`), undone when a branch fails.
//!
//! As upstream's `NewAllocator(...)` then `Allocate(ctx, node)`: an [`Allocator`] holds what
//! the calls of one cycle share (the claims, classes, index, extractors and caches), and
//! [`Allocator::allocate`] allocates on one node ([`NodeInput`]). It answers
//! [`AllocOutcome::Allocated`] (compact: [`Allocator::materialize`] builds the API results of the
//! node Reserve picks) or [`AllocOutcome::Unfit`] with the reasons the claims do not fit, and
//! `Err` ([`AllocError`]) for bad input that aborts the attempt (a CEL error, a missing class, a
//! constraint that `All` mode cannot satisfy...) or a search that ran out of steps.
//!
//! Files: `setup.rs` (preparing the requests and constraints), `search.rs` (the backtracking
//! and the checks of one device), `bounds.rs` (counting bounds), `order.rs` (consolidation
//! order), `result.rs` (the API results), `need.rs` (what a request needs of a device's
//! capacities), `tentative.rs` (the call's tentative state, with take and undo), `devmap.rs`,
//! `error.rs`. They share the types declared here; imports between them go one way only
//! (`search` → `need`, `tentative`; `bounds`, `result` → `need`; `tentative` → `devmap`).

mod bounds;
mod devmap;
mod error;
mod need;
mod order;
mod result;
mod search;
mod setup;
mod tentative;

pub use error::{AllocError, RequestName, SelectorOwner};
pub use result::share_id_for;
pub use tentative::init_pool_counters;

use crate::hashing::FxHashMap;
use smallvec::SmallVec;

use crate::affinity::{
    self, ClaimOutcomes, Extractors, Gate, LockTable, Outcome, RequestAffinity, Values, WantedCache,
};
use crate::cel::CelCache;
use crate::index::{DevIdx, DeviceKey, Index, NodePool};
use crate::model::{AllocationResult, DeviceClass, Node, ResourceClaim};
use crate::quantity::Quantity;
use tentative::Tentative;

/// Upstream `AllocationResultsMaxSize`: at most 32 devices per claim.
pub const MAX_RESULTS_PER_CLAIM: usize = 32;

/// The devices one allocation call may try (each candidate that passes the selectors is a
/// step). Upstream bounds the same exponential search with the Filter timeout
/// (`DRASchedulerFilterTimeout`, 10 s); a count of steps gives every engine the same decision
/// whatever its speed. A search that runs out fails with [`AllocError::TimedOut`]. The figure
/// keeps the slowest engine well under 100 ms per node (docs/RELIABILITY.md); real searches take
/// a few dozen steps.
pub const MAX_STEPS: u32 = 50_000;

/// Steps after which the counting bounds ([`bounds`]) are checked once: a search that ends
/// sooner needs none, so the common Filter call never counts.
const BOUNDS_AFTER: u32 = 64;

/// State of devices already allocated (or in flight) outside this call.
#[derive(Clone, Debug, Default)]
pub struct AllocatedState {
    /// Devices allocated without a share ID, with the number of claims holding them.
    pub dedicated: FxHashMap<DeviceKey, usize>,
    /// Number of shared allocations per device.
    pub shared: FxHashMap<DeviceKey, usize>,
    /// Capacity consumed per device by shared allocations.
    pub capacity: FxHashMap<DeviceKey, crate::model::Map<String, Quantity>>,
}

impl AllocatedState {
    /// Upstream `IsDeviceAllocated`: dedicated, shared, or with consumed capacity.
    pub fn is_allocated(&self, key: &DeviceKey) -> bool {
        self.dedicated.contains_key(key) || self.shared.contains_key(key) || self.capacity.contains_key(key)
    }

    /// What this state says of device `d` of `index`.
    pub fn device_use(&self, index: &Index, d: DevIdx) -> DeviceUse {
        let entry = index.device(d);
        let key = &entry.key;
        let consumed = match self.capacity.get(key) {
            Some(used) if !entry.capacity.is_empty() => {
                let zero = Quantity::from_i64(0);
                entry
                    .capacity
                    .keys()
                    .map(|name| used.get(name).unwrap_or(&zero).clone())
                    .collect()
            }
            _ => Vec::new(),
        };
        DeviceUse {
            dedicated: self.dedicated.contains_key(key),
            shared: self.shared.contains_key(key) || self.capacity.contains_key(key),
            consumed,
        }
    }

    /// [`AllocatedState::device_use`] of every device of `index`, by dense index.
    pub fn uses(&self, index: &Index) -> Vec<DeviceUse> {
        let mut out = vec![DeviceUse::default(); index.devices.len()];
        let keys = self
            .dedicated
            .keys()
            .chain(self.shared.keys())
            .chain(self.capacity.keys());
        for key in keys {
            if let Some(&d) = index.by_key.get(key) {
                out[d as usize] = self.device_use(index, d);
            }
        }
        out
    }
}

/// What [`AllocatedState`] says of one device, laid out by the index's dense device index for
/// the search: no key hashing and no capacity-name lookups on the Filter path. Kept in step with
/// the allocated state by its owner (the plugin), and rebuilt with the index.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct DeviceUse {
    /// Allocated without a share ID.
    pub dedicated: bool,
    /// Allocated with a share ID, or with consumed capacity.
    pub shared: bool,
    /// Capacity consumed by shared allocations, aligned with the device's `capacity` map (its
    /// key order); empty when nothing is consumed.
    pub consumed: Vec<Quantity>,
}

impl DeviceUse {
    /// Upstream `IsDeviceAllocated`.
    pub fn is_allocated(&self) -> bool {
        self.dedicated || self.shared
    }
}

/// Sharing-affinity outcomes of one claim: per request, per subrequest (or one entry when the
/// request has none), per extractor key-set group ([`Extractors::group`]); `None` for a group
/// no candidate device of the request has.
pub type ClaimAffinity = Vec<Vec<Vec<Option<Outcome>>>>;

/// One claim to allocate.
pub struct ClaimInput<'a> {
    /// `namespace/name`.
    pub key: &'a str,
    /// The claim.
    pub claim: &'a ResourceClaim,
    /// Affinity outcomes computed at PreFilter.
    pub affinity: &'a ClaimAffinity,
    /// The claim's position for the per-cycle caches ([`Allocator::cycle_cache`]): the same slot
    /// must mean the same claim with the same `affinity` in every call sharing the cache. `None`
    /// for a per-node variant of a claim (not cached).
    pub slot: Option<usize>,
}

/// The allocator of one cycle: what the allocation calls for the pod's claims share, whatever
/// the node. Cheap to build (references only); [`Allocator::allocate`] then allocates on a node.
pub struct Allocator<'a> {
    /// Slices, indexed.
    pub index: &'a Index,
    /// Extractors.
    pub extractors: &'a Extractors,
    /// CEL cache.
    pub cel: &'a CelCache,
    /// DeviceClasses by name.
    pub classes: &'a FxHashMap<String, DeviceClass>,
    /// The claims, in order.
    pub claims: &'a [ClaimInput<'a>],
    /// Try devices already locked to the wanted values first (consolidation).
    pub consolidate: bool,
    /// Selector results per (device, selector id), shared by calls until slices change.
    pub selector_cache: &'a SelectorCache,
    /// Caches shared by the calls of one cycle.
    pub cycle_cache: &'a CycleCache,
}

/// What an allocation call reads of its node.
pub struct NodeInput<'a> {
    /// The node.
    pub node: &'a Node,
    /// The node's pools.
    pub pools: &'a [NodePool],
    /// The node's candidate devices ([`candidates`] of `pools`).
    pub candidates: &'a std::sync::Arc<[DevIdx]>,
    /// Allocated state per device, by dense index ([`AllocatedState::uses`]; one entry per
    /// device of the index).
    pub uses: &'a [DeviceUse],
    /// Persistent lock states by dense device index (derived from the devices' holders): an
    /// entry for every candidate device.
    pub locks: &'a LockTable,
}

/// Selector results per (device, [`crate::cel::Selector::id`]), shared by calls until slices
/// change.
///
/// The first [`SelectorCache::SLOTS`] results of a device sit in a table indexed by the device
/// (a node's devices are adjacent in the index, so a Filter call reads one or two cache lines
/// instead of probing a map once per device and selector); further results go to a map.
#[derive(Default)]
pub struct SelectorCache {
    /// Per device: up to `SLOTS` results as `(id + 1) << 1 | result`, 0 for a free slot.
    slots: std::cell::RefCell<Vec<[u32; SelectorCache::SLOTS]>>,
    overflow: std::cell::RefCell<crate::hashing::FxHashMap<(DevIdx, u32), bool>>,
}

impl SelectorCache {
    /// Results kept inline per device.
    pub const SLOTS: usize = 4;

    /// An empty cache for the `devices` devices of an index.
    pub fn new(devices: usize) -> Self {
        SelectorCache {
            slots: std::cell::RefCell::new(vec![[0; Self::SLOTS]; devices]),
            overflow: Default::default(),
        }
    }

    /// The slot encoding of a selector id (`None` for the last 2³¹ ids: they use the map).
    fn tag(selector: u32) -> Option<u32> {
        selector.checked_add(1).filter(|t| *t < 1 << 31).map(|t| t << 1)
    }

    /// The cached result of selector `selector` on device `d`.
    pub fn get(&self, d: DevIdx, selector: u32) -> Option<bool> {
        if let Some(tag) = Self::tag(selector)
            && let Some(row) = self.slots.borrow().get(d as usize)
        {
            for &s in row {
                if s == 0 {
                    return None;
                }
                if s & !1 == tag {
                    return Some(s & 1 == 1);
                }
            }
        }
        self.overflow.borrow().get(&(d, selector)).copied()
    }

    /// Records the result of selector `selector` on device `d`.
    pub fn insert(&self, d: DevIdx, selector: u32, matches: bool) {
        if let Some(tag) = Self::tag(selector)
            && let Some(row) = self.slots.borrow_mut().get_mut(d as usize)
            && let Some(free) = row.iter_mut().find(|s| **s == 0 || **s & !1 == tag)
        {
            *free = tag | u32::from(matches);
            return;
        }
        self.overflow.borrow_mut().insert((d, selector), matches);
    }
}

/// Caches shared by the allocation calls of one cycle (one pod's Filter over the nodes, and
/// Reserve), keyed by [`ClaimInput::slot`]. Valid while the claims, their affinity outcomes, the
/// DeviceClasses and the extractors stay the same: drop it when any of them changes.
#[derive(Default)]
pub struct CycleCache {
    /// What a request wants ([`Gate::wanted`]) per (claim slot, request, subrequest, applicable
    /// extractor set).
    wanted: WantedCache,
    /// A request's compiled class and request selectors per (claim slot, request, subrequest).
    selectors: std::cell::RefCell<FxHashMap<CacheKey, std::sync::Arc<[ReqSelector]>>>,
    /// The per-call buffers, borrowed by one allocation call at a time and left empty.
    scratch: std::cell::RefCell<Scratch>,
    /// The prepared requests of the cycle's claims (see [`Search::prepare`]).
    reqs: std::cell::RefCell<Option<std::sync::Arc<Reqs>>>,
}

/// The state of an allocation call that lives in buffers, handed from one call to the next
/// (empty, capacity kept): a Filter call does not allocate them again.
#[derive(Default)]
struct Scratch {
    /// What the call has taken so far.
    tentative: Tentative,
    /// Persistent candidate order per (claim, request, subrequest), computed on first use (a
    /// call has a few requests: searched linearly).
    order: Vec<(ReqPos, order::Order)>,
    /// The devices of the orders that are not the first-fit order itself; grows during the
    /// call, emptied when it ends.
    order_buf: Vec<DevIdx>,
    /// Rejected devices and why, formatted only when the call fails.
    notes: Vec<(DevIdx, affinity::Rejection)>,
}

impl Scratch {
    /// Empties every buffer, keeping its capacity (and the maps' values as spares).
    fn clear(&mut self) {
        self.tentative.clear();
        self.order.clear();
        self.order_buf.clear();
        self.notes.clear();
    }
}

/// A request's key in the [`CycleCache`]: (claim slot, request, subrequest).
type CacheKey = (u32, u32, u32);

/// One allocated device with what Reserve and Score need beyond the API result.
#[derive(Clone, Debug, PartialEq)]
pub struct DeviceChoice {
    /// Device index.
    pub dev: DevIdx,
    /// Affinity values the request locks the device to (shared devices in affinity pools).
    pub affinity: Option<std::sync::Arc<Values>>,
    /// The device was already locked to compatible values before this call.
    pub joined_lock: bool,
    /// A shared allocation of a multi-allocatable device: it gets a share ID at Reserve.
    pub shared: bool,
}

/// The allocation of one claim.
#[derive(Clone, Debug, PartialEq)]
pub struct ClaimResult {
    /// What PreBind writes to `status.allocation`.
    pub allocation: AllocationResult,
    /// Per result (same order): the device and its affinity.
    pub choices: Vec<DeviceChoice>,
}

/// The outcome of an allocation call that did not fail.
#[derive(Clone, Debug)]
pub enum AllocOutcome {
    /// All claims allocated (compact: [`Allocator::materialize`] builds the API results).
    Allocated(Allocation),
    /// Does not fit; the notes say why (affinity rejections first).
    Unfit(Vec<String>),
}

/// The most subrequests a `firstAvailable` list may have (`FirstAvailableDeviceRequestMaxSize`).
const FIRST_AVAILABLE_MAX: u32 = 8;

/// A successful allocation call in compact form: the devices chosen per claim and the
/// subrequests selected. Filter keeps this for every feasible node; only the node Reserve picks
/// gets its API results built ([`Allocator::materialize`]), so Filter neither builds nor drops
/// them.
#[derive(Clone, Debug)]
pub struct Allocation {
    results: Results,
    selected_sub: FxHashMap<(usize, usize), usize>,
}

impl Allocation {
    /// The node's sharing-affinity rank ([`affinity::rank`]).
    pub fn rank(&self, index: &Index, extractors: &Extractors) -> u32 {
        affinity::rank(
            index,
            extractors,
            self.results.iter().map(|c| c.as_slice()),
            |ch| affinity::Pick {
                request: ch.req.0,
                dev: ch.dev,
                admin: ch.admin,
                affinity: ch.affinity.as_ref().map(|_| ch.joined_lock),
            },
        )
    }

    /// The prioritized-list rank of upstream's DynamicResources Score (KEP-4816): per
    /// `firstAvailable` request of the claims allocated here, `8 - i` for the `i`th subrequest
    /// chosen (8 is the longest list the API allows), so a node that gives a request its first
    /// choice ranks above one that gives a later one.
    pub fn prioritized_rank(&self) -> u32 {
        self.selected_sub
            .values()
            .map(|&i| FIRST_AVAILABLE_MAX.saturating_sub(u32::try_from(i).unwrap_or(u32::MAX)))
            .sum()
    }
}

/// A node's candidate devices in first-fit order: the devices of its pools' slices, valid and
/// complete pools only (what [`NodeInput::candidates`] must be).
pub fn candidates(index: &Index, pools: &[NodePool]) -> std::sync::Arc<[DevIdx]> {
    let mut cands = Vec::new();
    for np in pools {
        let pool = &index.pools[np.pool];
        if !pool.complete || pool.invalid.is_some() {
            continue;
        }
        for &si in &np.slices {
            cands.extend_from_slice(&pool.slices[si].devices);
        }
    }
    cands.into()
}

impl<'a> Allocator<'a> {
    /// Allocates all claims on the node. See the module docs.
    pub fn allocate(&self, node: &NodeInput<'_>) -> Result<AllocOutcome, AllocError> {
        let mut a = Search::new(self, node, self.cached_reqs(), self.scratch()?);
        a.prepare()?;
        let done = match a.allocate_one(Pos::default(), false, 0) {
            Ok(done) => done,
            Err(Stop::MaxSize) => false,
            Err(Stop::Short(why)) => return Ok(AllocOutcome::Unfit(vec![why])),
            Err(Stop::Budget) => return Err(AllocError::TimedOut),
            Err(Stop::Fatal(e)) => return Err(*e),
        };
        if !done {
            for np in node.pools {
                let pool = &self.index.pools[np.pool];
                if let Some(reason) = &pool.invalid {
                    return Err(AllocError::InvalidPool {
                        pool: pool.id(),
                        reason: reason.clone(),
                    });
                }
            }
            // Sorted and without repeats (as a set), the first eight.
            let mut notes: Vec<String> = a
                .scratch
                .notes
                .iter()
                .map(|(d, why)| format!("{}: {why}", self.index.device(*d).device.name))
                .collect();
            crate::map::sort_by_str(&mut notes, String::as_str);
            notes.dedup();
            notes.truncate(8);
            return Ok(AllocOutcome::Unfit(notes));
        }
        // What building the results would reject must fail Filter too (without building them).
        for chosen in &a.results {
            a.check_node_selector(chosen)?;
        }
        Ok(AllocOutcome::Allocated(Allocation {
            results: std::mem::take(&mut a.results),
            selected_sub: std::mem::take(&mut a.selected_sub),
        }))
    }

    /// Builds the API results of an [`Allocation`] that [`Allocator::allocate`] returned for the
    /// same claims and node: device results, configs, node selector.
    pub fn materialize(
        &self,
        node: &NodeInput<'_>,
        allocation: &Allocation,
    ) -> Result<Vec<ClaimResult>, AllocError> {
        let mut a = Search::new(self, node, self.cached_reqs(), self.scratch()?);
        a.prepare()?;
        if a.reqs.len() != allocation.results.len() {
            return Err(AllocError::Mismatch {
                allocated: allocation.results.len(),
                prepared: a.reqs.len(),
            });
        }
        a.results = allocation.results.clone();
        a.selected_sub = allocation.selected_sub.clone();
        a.build_results()
    }

    /// The cycle's buffers for one allocation call. Calls do not nest: buffers already
    /// borrowed are an internal error.
    fn scratch(&self) -> Result<std::cell::RefMut<'a, Scratch>, AllocError> {
        self.cycle_cache
            .scratch
            .try_borrow_mut()
            .map_err(|_| AllocError::Nested)
    }

    /// The requests an earlier call of the cycle prepared for the same claims, if any.
    fn cached_reqs(&self) -> Option<std::sync::Arc<Reqs>> {
        if !self.cacheable() {
            return None;
        }
        self.cycle_cache.reqs.borrow().clone()
    }

    /// Whether the claims are the cycle's own, in order (no per-node variant): then their
    /// prepared requests are the same in every call of the cycle.
    fn cacheable(&self) -> bool {
        self.claims.iter().enumerate().all(|(i, c)| c.slot == Some(i))
    }
}

/// The devices chosen per claim. Inline up to the common size (a pod with one claim of one or
/// two devices): a Filter call allocates nothing for them.
type Results = SmallVec<[SmallVec<[Chosen; 2]>; 1]>;

/// The request data per claim, per request, per subrequest (or one entry when the request has
/// none). Inline up to the common size (one claim, two requests, no subrequests): a Filter call
/// allocates nothing for them.
type Reqs = SmallVec<[SmallVec<[SmallVec<[ReqData; 1]>; 2]>; 1]>;

/// (claim, request, subrequest) positions in [`Search::reqs`].
type ReqPos = (usize, usize, usize);

#[derive(Clone, Copy, Debug, Default)]
struct Pos {
    claim: usize,
    request: usize,
    sub: usize,
    device: usize,
}

/// Why a search stops before it has tried everything.
enum Stop {
    /// A claim would get more than [`MAX_RESULTS_PER_CLAIM`] devices.
    MaxSize,
    /// Counting proves the claims cannot fit ([`Search::shortfall`]), for this reason.
    Short(String),
    /// [`MAX_STEPS`] devices tried.
    Budget,
    /// Bad input (boxed: the search's results stay as small as they were with a text).
    Fatal(Box<AllocError>),
}

impl From<AllocError> for Stop {
    fn from(e: AllocError) -> Self {
        Stop::Fatal(Box::new(e))
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Mode {
    Exact(usize),
    All,
}

/// One selector of a request: (from the class, compiled).
type ReqSelector = (
    bool,
    Result<std::sync::Arc<crate::cel::Selector>, crate::cel::CelError>,
);

/// One request (or subrequest) of a claim, prepared for the search. Owned, so that the calls
/// of a cycle share one preparation ([`CycleCache`]); what it reads of the claim (names,
/// tolerations, capacity, affinity outcomes) is looked up by position in the call's input
/// ([`Search::fields`]).
struct ReqData {
    /// Position of the claim in [`Allocator::claims`].
    claim: usize,
    /// Position of the request in the claim.
    request: usize,
    /// Position of the subrequest in the request; `None` for an `exactly` request.
    sub: Option<usize>,
    /// Class selectors then request selectors, compiled (shared by the calls of a cycle).
    selectors: std::sync::Arc<[ReqSelector]>,
    mode: Mode,
    admin: bool,
    all_devices: Vec<DevIdx>,
    num_devices: usize,
    /// The count asked for (`Exact` mode; 0 for `All`), in u64 whatever the target's usize.
    requested: u64,
    /// What the affinity constraint reads of the request, with what it wants on the first
    /// applicable extractor set it meets (for every call sharing this preparation).
    affinity: RequestAffinity,
    /// What the request needs of the first capacity shape it meets ([`need::Need`]), keyed by
    /// the index's shared capacity map (`DeviceEntry::capacity`): capacity names
    /// are matched and request policies applied once, not per device (other shapes compute it).
    need_first: std::sync::OnceLock<(
        std::sync::Arc<crate::model::Map<String, crate::model::DeviceCapacity>>,
        need::Need,
    )>,
}

impl<'a> Search<'a> {
    /// What a prepared request reads of its claim in this call's claims.
    fn fields(&self, rd: &ReqData) -> setup::RequestFields<'a> {
        request_fields(self.alloc, rd)
    }

    /// What the request wants on the device ([`Gate::wanted`]).
    fn wanted(&self, rd: &ReqData, d: DevIdx) -> affinity::Wanted {
        self.gate.wanted(&rd.affinity, d)
    }
}

impl ClaimOutcomes for Allocator<'_> {
    fn outcomes(&self, claim: usize, request: usize, sub: usize) -> &[Option<Outcome>] {
        self.claims[claim]
            .affinity
            .get(request)
            .and_then(|v| v.get(sub))
            .map_or(&[], Vec::as_slice)
    }
}

/// [`Search::fields`].
fn request_fields<'a>(alloc: &Allocator<'a>, rd: &ReqData) -> setup::RequestFields<'a> {
    let claim: &'a ResourceClaim = alloc.claims[rd.claim].claim;
    let r = &claim.spec.devices.requests[rd.request];
    match (rd.sub, &r.exactly) {
        (Some(si), _) => setup::RequestFields::sub(r, &r.first_available[si]),
        (None, Some(ex)) => setup::RequestFields::exact(r, ex),
        // Preparation rejects a request with neither.
        (None, None) => setup::RequestFields::exact(r, &NO_EXACT_REQUEST),
    }
}

/// The `exactly` request of a request that has none (never prepared).
static NO_EXACT_REQUEST: crate::model::ExactDeviceRequest = crate::model::ExactDeviceRequest {
    device_class_name: String::new(),
    selectors: Vec::new(),
    allocation_mode: None,
    count: None,
    admin_access: None,
    tolerations: Vec::new(),
    capacity: None,
};

/// The class of a prepared request, and the expression of its selector `i` (class selectors,
/// then the request's own), for error messages.
fn selector_source<'a>(alloc: &Allocator<'a>, rd: &ReqData, i: usize) -> (Option<&'a DeviceClass>, &'a str) {
    let fields = request_fields(alloc, rd);
    let class = alloc.classes.get(fields.class_name);
    let class_selectors = class.map_or(&[][..], |c| c.spec.selectors.as_slice());
    let expr = match class_selectors.get(i) {
        Some(s) => &s.cel.expression,
        None => fields
            .selectors
            .get(i - class_selectors.len())
            .map_or("", |s| s.cel.expression.as_str()),
    };
    (class, expr)
}

#[derive(Clone, Debug)]
struct Chosen {
    /// (request, subrequest) position of the request that chose the device.
    req: (usize, usize),
    dev: DevIdx,
    admin: bool,
    /// A shared allocation (it consumes capacity: [`need::consumption`]).
    shared: bool,
    affinity: Option<std::sync::Arc<Values>>,
    joined_lock: bool,
}

/// One allocation call on one node: the search's own state over the cycle's [`Allocator`].
struct Search<'a> {
    /// What the calls of the cycle share.
    alloc: &'a Allocator<'a>,
    /// The node.
    node: &'a NodeInput<'a>,
    /// The affinity constraint's view of the cycle and the node.
    gate: Gate<'a>,
    /// Candidate devices of the node in first-fit order (valid, complete pools only).
    cands: std::sync::Arc<[DevIdx]>,
    /// Per claim, per request, per subrequest (or one); shared with the cycle cache. Empty until
    /// [`Search::prepare`] when the cycle cache had none.
    reqs: std::sync::Arc<Reqs>,
    selected_sub: FxHashMap<(usize, usize), usize>,
    results: Results,
    /// The call's own state, in the cycle's buffers (borrowed for the call, emptied when it
    /// ends: the next call of the cycle finds them empty, with their capacity).
    scratch: std::cell::RefMut<'a, Scratch>,
    /// Devices tried so far ([`MAX_STEPS`]).
    steps: u32,
}

impl Search<'_> {
    /// Counts one device tried: checks the counting bounds once at [`BOUNDS_AFTER`] steps, and
    /// stops the search at [`MAX_STEPS`].
    fn step(&mut self) -> Result<(), Stop> {
        self.steps += 1;
        if self.steps == BOUNDS_AFTER
            && let Some(why) = self.shortfall()?
        {
            return Err(Stop::Short(why));
        }
        if self.steps > MAX_STEPS {
            return Err(Stop::Budget);
        }
        Ok(())
    }
}

impl Drop for Search<'_> {
    /// Empties the call's buffers for the next call of the cycle.
    fn drop(&mut self) {
        self.scratch.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::SelectorCache;

    #[test]
    fn selector_cache_keeps_every_result_inline_and_beyond() {
        let cache = SelectorCache::new(3);
        // More selectors than inline slots, on two devices, interleaved.
        for id in 0..(SelectorCache::SLOTS as u32 + 3) {
            cache.insert(1, id, id % 2 == 0);
            cache.insert(2, id, id % 3 == 0);
        }
        for id in 0..(SelectorCache::SLOTS as u32 + 3) {
            assert_eq!(cache.get(1, id), Some(id % 2 == 0), "device 1, selector {id}");
            assert_eq!(cache.get(2, id), Some(id % 3 == 0), "device 2, selector {id}");
            assert_eq!(cache.get(0, id), None, "device 0 has no results");
        }
        assert_eq!(cache.get(1, 1000), None);
        // A result written again replaces the first (no second slot for the same selector).
        cache.insert(0, 7, true);
        cache.insert(0, 7, false);
        assert_eq!(cache.get(0, 7), Some(false));
        cache.insert(0, 8, true);
        assert_eq!((cache.get(0, 7), cache.get(0, 8)), (Some(false), Some(true)));
        // Ids the slot encoding cannot hold, and devices past the table, use the map.
        for id in [u32::MAX, u32::MAX - 1, 1 << 31, (1 << 31) - 2] {
            cache.insert(0, id, true);
            assert_eq!(cache.get(0, id), Some(true), "selector {id}");
        }
        cache.insert(10, 3, true);
        assert_eq!((cache.get(10, 3), cache.get(10, 4)), (Some(true), None));
    }
}
