//! The structured allocator: for one node, all pending claims of one pod.
//!
//! A backtracking search over claims → requests → (subrequests) → devices in upstream's
//! deterministic order (pools by driver/pool name, slices by name, devices in slice order), with
//! the checks of the incubating allocator in the same order: in use, selectors, capacity,
//! counters, taints, constraints. Sharing affinity is checked next to capacity. Every tentative
//! change (dedicated devices, consumed capacity, counters, constraint values, affinity locks) is
//! undone when a branch fails.
//!
//! `Ok(None)` means "does not fit on this node"; `Err` is bad input that aborts the attempt (a
//! CEL error, a missing class, a constraint that `All` mode cannot satisfy...).

use std::collections::{BTreeMap, HashMap};

use crate::affinity::{self, ExtId, Extractors, LockState, Outcome, Rejection, Values};
use crate::capacity;
use crate::cel::CelCache;
use crate::constraints::{Constraint, Lookup, RequestScope};
use crate::counters::CounterState;
use crate::index::{DevIdx, DeviceKey, Index, NodePool, device_node_matches};
use crate::model::{
    AllocationResult, DeviceAllocationConfiguration, DeviceAllocationResult, DeviceClass,
    DeviceRequestAllocationResult, DeviceToleration, Node, NodeSelector, NodeSelectorRequirement,
    NodeSelectorTerm, ResourceClaim,
};
use crate::node_selector;
use crate::quantity::Quantity;
use crate::taints;

/// Upstream `AllocationResultsMaxSize`: at most 32 devices per claim.
pub const MAX_RESULTS_PER_CLAIM: usize = 32;

/// State of devices already allocated (or in flight) outside this call.
#[derive(Clone, Debug, Default)]
pub struct AllocatedState {
    /// Devices allocated without a share ID, with the number of claims holding them.
    pub dedicated: HashMap<DeviceKey, usize>,
    /// Number of shared allocations per device.
    pub shared: HashMap<DeviceKey, usize>,
    /// Capacity consumed per device by shared allocations.
    pub capacity: HashMap<DeviceKey, BTreeMap<String, Quantity>>,
}

impl AllocatedState {
    /// Upstream `IsDeviceAllocated`: dedicated, shared, or with consumed capacity.
    pub fn is_allocated(&self, key: &DeviceKey) -> bool {
        self.dedicated.contains_key(key) || self.shared.contains_key(key) || self.capacity.contains_key(key)
    }
}

/// Where the allocator gets persistent lock states from.
pub trait LockSource {
    /// The lock state of a device (affinity pools only).
    fn lock(&self, dev: DevIdx) -> LockState;
}

/// Sharing-affinity outcomes of one claim: per request, per subrequest (or one entry when the
/// request has none), per extractor.
pub type ClaimAffinity = Vec<Vec<HashMap<ExtId, Outcome>>>;

/// One claim to allocate.
pub struct ClaimInput<'a> {
    /// `namespace/name`.
    pub key: &'a str,
    /// The claim.
    pub claim: &'a ResourceClaim,
    /// Affinity outcomes computed at PreFilter.
    pub affinity: &'a ClaimAffinity,
}

/// Everything an allocation call reads.
pub struct Input<'a> {
    /// Slices, indexed.
    pub index: &'a Index,
    /// Extractors.
    pub extractors: &'a Extractors,
    /// CEL cache.
    pub cel: &'a CelCache,
    /// DeviceClasses by name.
    pub classes: &'a HashMap<String, DeviceClass>,
    /// Allocated state.
    pub allocated: &'a AllocatedState,
    /// Persistent locks.
    pub locks: &'a dyn LockSource,
    /// The node.
    pub node: &'a Node,
    /// The node's pools.
    pub pools: &'a [NodePool],
    /// The claims, in order.
    pub claims: &'a [ClaimInput<'a>],
    /// Try devices already locked to the wanted values first (consolidation).
    pub consolidate: bool,
}

/// One allocated device with what Reserve and Score need beyond the API result.
#[derive(Clone, Debug, PartialEq)]
pub struct DeviceChoice {
    /// Device index.
    pub dev: DevIdx,
    /// Affinity values the request locks the device to (shared devices in affinity pools).
    pub affinity: Option<Values>,
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

/// The outcome of an allocation call.
#[derive(Clone, Debug, PartialEq)]
pub enum AllocOutcome {
    /// All claims allocated.
    Allocated(Vec<ClaimResult>),
    /// Does not fit; the notes say why (affinity rejections first).
    Unfit(Vec<String>),
}

/// Allocates all claims on the node. See the module docs.
pub fn allocate(input: &Input<'_>) -> Result<AllocOutcome, String> {
    let mut a = Allocator::new(input)?;
    let done = match a.allocate_one(Pos::default(), false, 0) {
        Ok(done) => done,
        Err(Stop::MaxSize) => false,
        Err(Stop::Fatal(e)) => return Err(e),
    };
    if !done {
        for np in input.pools {
            if let Some(reason) = &input.index.pools[np.pool].invalid {
                return Err(format!(
                    "invalid resource pool {}: {reason}",
                    input.index.pools[np.pool].id()
                ));
            }
        }
        let mut notes: Vec<String> = a.notes.into_iter().collect();
        notes.truncate(8);
        return Ok(AllocOutcome::Unfit(notes));
    }
    Ok(AllocOutcome::Allocated(a.build_results()?))
}

#[derive(Clone, Copy, Debug, Default)]
struct Pos {
    claim: usize,
    request: usize,
    sub: usize,
    device: usize,
}

enum Stop {
    MaxSize,
    Fatal(String),
}

impl From<String> for Stop {
    fn from(e: String) -> Self {
        Stop::Fatal(e)
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Mode {
    Exact(usize),
    All,
}

struct ReqData<'a> {
    request: &'a str,
    sub: Option<&'a str>,
    class: &'a DeviceClass,
    selectors: Vec<&'a str>,
    mode: Mode,
    admin: bool,
    tolerations: &'a [DeviceToleration],
    capacity: Option<&'a BTreeMap<String, Quantity>>,
    all_devices: Vec<DevIdx>,
    num_devices: usize,
    affinity: &'a HashMap<ExtId, Outcome>,
}

impl ReqData<'_> {
    fn full_name(&self) -> String {
        affinity::full_name(self.request, self.sub)
    }
}

struct Chosen {
    request: String,
    dev: DevIdx,
    admin: bool,
    shared: bool,
    consumed: Option<BTreeMap<String, Quantity>>,
    affinity: Option<Values>,
    joined_lock: bool,
    tolerations: Vec<DeviceToleration>,
}

struct Undo {
    claim: usize,
    dev: DevIdx,
    dedicated: bool,
    capacity: Option<BTreeMap<String, Quantity>>,
    counters: Option<usize>,
    affinity: bool,
    request: String,
    sub: Option<String>,
}

struct Allocator<'a> {
    input: &'a Input<'a>,
    /// Candidate devices of the node in first-fit order (valid, complete pools only).
    cands: Vec<DevIdx>,
    /// Per claim, per request, per subrequest (or one).
    reqs: Vec<Vec<Vec<ReqData<'a>>>>,
    selected_sub: HashMap<(usize, usize), usize>,
    constraints: Vec<Vec<Constraint>>,
    results: Vec<Vec<Chosen>>,
    allocating_devices: HashMap<DevIdx, Vec<usize>>,
    allocating_capacity: HashMap<DevIdx, BTreeMap<String, Quantity>>,
    allocating_affinity: HashMap<DevIdx, (Values, usize)>,
    counters: CounterState,
    matches: HashMap<(DevIdx, usize, usize, usize), bool>,
    order: HashMap<(usize, usize, usize), std::rc::Rc<[DevIdx]>>,
    notes: std::collections::BTreeSet<String>,
}

impl<'a> Allocator<'a> {
    fn new(input: &'a Input<'a>) -> Result<Self, String> {
        let mut cands = Vec::new();
        for np in input.pools {
            let pool = &input.index.pools[np.pool];
            if !pool.complete || pool.invalid.is_some() {
                continue;
            }
            for &si in &np.slices {
                cands.extend_from_slice(&pool.slices[si].devices);
            }
        }
        let mut a = Allocator {
            input,
            cands,
            reqs: Vec::new(),
            selected_sub: HashMap::new(),
            constraints: Vec::new(),
            results: Vec::new(),
            allocating_devices: HashMap::new(),
            allocating_capacity: HashMap::new(),
            allocating_affinity: HashMap::new(),
            counters: CounterState::default(),
            matches: HashMap::new(),
            order: HashMap::new(),
            notes: Default::default(),
        };
        for (ci, c) in input.claims.iter().enumerate() {
            let mut per_claim = Vec::new();
            let mut min_devices = 0usize;
            for (ri, r) in c.claim.spec.devices.requests.iter().enumerate() {
                let aff = |si: usize| c.affinity.get(ri).and_then(|v| v.get(si));
                let mut per_req = Vec::new();
                if let Some(ex) = &r.exactly {
                    if !r.first_available.is_empty() {
                        return Err(format!(
                            "claim {}, request {}: exactly one of exactly and firstAvailable must be set",
                            c.key, r.name
                        ));
                    }
                    per_req.push(a.request_data(
                        ci,
                        (ri, 0),
                        &r.name,
                        None,
                        &ex.device_class_name,
                        &ex.selectors,
                        ex.allocation_mode.as_deref(),
                        ex.count,
                        ex.admin_access.unwrap_or(false),
                        &ex.tolerations,
                        ex.capacity.as_ref().map(|c| &c.requests),
                        aff(0),
                    )?);
                } else if !r.first_available.is_empty() {
                    for (si, s) in r.first_available.iter().enumerate() {
                        per_req.push(a.request_data(
                            ci,
                            (ri, si),
                            &r.name,
                            Some(&s.name),
                            &s.device_class_name,
                            &s.selectors,
                            s.allocation_mode.as_deref(),
                            s.count,
                            false,
                            &s.tolerations,
                            s.capacity.as_ref().map(|c| &c.requests),
                            aff(si),
                        )?);
                    }
                } else {
                    return Err(format!(
                        "claim {}, request {}: neither exactly nor firstAvailable is set (unsupported request type?)",
                        c.key, r.name
                    ));
                }
                min_devices += per_req.iter().map(|d| d.num_devices).min().unwrap_or(0);
                per_claim.push(per_req);
            }
            if min_devices > MAX_RESULTS_PER_CLAIM {
                return Err(format!(
                    "claim {}: number of requested devices {min_devices} exceeds the claim limit of {MAX_RESULTS_PER_CLAIM}",
                    c.key
                ));
            }
            a.reqs.push(per_claim);
            let mut cons = Vec::new();
            for (i, k) in c.claim.spec.devices.constraints.iter().enumerate() {
                let scope = RequestScope::new(&k.requests);
                cons.push(match (&k.match_attribute, &k.distinct_attribute) {
                    (Some(attr), None) => {
                        Constraint::Match { scope, attribute: attr.clone(), value: None, count: 0 }
                    }
                    (None, Some(attr)) => {
                        Constraint::Distinct { scope, attribute: attr.clone(), values: Default::default() }
                    }
                    _ => {
                        return Err(format!(
                            "claim {}, constraint #{i}: exactly one of matchAttribute and distinctAttribute must be set",
                            c.key
                        ));
                    }
                });
            }
            a.constraints.push(cons);
            a.results.push(Vec::new());
        }
        Ok(a)
    }

    #[allow(
        clippy::too_many_arguments,
        reason = "mirrors the fields of a request or subrequest"
    )]
    fn request_data(
        &mut self,
        ci: usize,
        (ri, si): (usize, usize),
        request: &'a str,
        sub: Option<&'a str>,
        class_name: &'a str,
        selectors: &'a [crate::model::DeviceSelector],
        mode: Option<&'a str>,
        count: Option<i64>,
        admin: bool,
        tolerations: &'a [DeviceToleration],
        capacity: Option<&'a BTreeMap<String, Quantity>>,
        affinity: Option<&'a HashMap<ExtId, Outcome>>,
    ) -> Result<ReqData<'a>, String> {
        static EMPTY: std::sync::OnceLock<HashMap<ExtId, Outcome>> = std::sync::OnceLock::new();
        let claim = self.input.claims[ci].key;
        let name = affinity::full_name(request, sub);
        if class_name.is_empty() {
            return Err(format!(
                "claim {claim}, request {name}: missing device class name"
            ));
        }
        let class =
            self.input.classes.get(class_name).ok_or_else(|| {
                format!("claim {claim}, request {name}: device class {class_name} not found")
            })?;
        let mode = match mode.unwrap_or("ExactCount") {
            "ExactCount" | "" => {
                let n = count.unwrap_or(1);
                if n < 1 {
                    return Err(format!(
                        "claim {claim}, request {name}: count {n} must be at least 1"
                    ));
                }
                Mode::Exact(usize::try_from(n).unwrap_or(usize::MAX))
            }
            "All" => Mode::All,
            other => {
                return Err(format!(
                    "claim {claim}, request {name}: unsupported allocation mode {other}"
                ));
            }
        };
        let mut rd = ReqData {
            request,
            sub,
            class,
            selectors: selectors.iter().map(|s| s.cel.expression.as_str()).collect(),
            mode,
            admin,
            tolerations,
            capacity,
            all_devices: Vec::new(),
            num_devices: match mode {
                Mode::Exact(n) => n,
                Mode::All => 0,
            },
            affinity: affinity.unwrap_or_else(|| EMPTY.get_or_init(HashMap::new)),
        };
        if mode == Mode::All {
            for np in self.input.pools {
                let pool = &self.input.index.pools[np.pool];
                if !pool.complete {
                    return Err(format!(
                        "claim {claim}, request {name}: asks for all devices, but resource pool {} is currently being updated",
                        pool.id()
                    ));
                }
                if pool.invalid.is_some() {
                    return Err(format!(
                        "claim {claim}, request {name}: asks for all devices, but resource pool {} is currently invalid",
                        pool.id()
                    ));
                }
                for &s in &np.slices {
                    for &d in &pool.slices[s].devices {
                        if selectable(self.input, &mut self.matches, ci, (ri, si), &rd, d)?
                            && self.capacity_fits(&rd, d) == Some(true)
                        {
                            rd.all_devices.push(d);
                        }
                    }
                }
            }
            rd.num_devices = rd.all_devices.len();
        }
        Ok(rd)
    }

    /// Upstream `CmpRequestOverCapacity`: `None` when the request names a capacity the device
    /// lacks (the device is skipped), else whether every capacity stays within its value.
    fn capacity_fits(&self, rd: &ReqData<'_>, d: DevIdx) -> Option<bool> {
        let entry = self.input.index.device(d);
        let caps = &entry.device.capacity;
        if let Some(req) = rd.capacity
            && req.keys().any(|k| !caps.contains_key(k))
        {
            return None;
        }
        let allocated = self.input.allocated.capacity.get(&entry.key);
        let allocating = self.allocating_capacity.get(&d);
        for (name, cap) in caps {
            let consumed = capacity::consumed_capacity(rd.capacity.and_then(|r| r.get(name)), cap);
            if capacity::violates_policy(&consumed, cap.request_policy.as_ref()) {
                return Some(false);
            }
            let mut total = consumed;
            for extra in [
                allocated.and_then(|m| m.get(name)),
                allocating.and_then(|m| m.get(name)),
            ]
            .into_iter()
            .flatten()
            {
                match total.checked_add(extra) {
                    Some(t) => total = t,
                    None => return Some(false),
                }
            }
            if total > cap.value {
                return Some(false);
            }
        }
        Some(true)
    }

    fn device_in_use(&self, d: DevIdx) -> bool {
        self.input
            .allocated
            .dedicated
            .contains_key(&self.input.index.device(d).key)
            || self.allocating_devices.get(&d).is_some_and(|v| !v.is_empty())
    }

    fn capacity_in_use(&self, d: DevIdx) -> bool {
        let key = &self.input.index.device(d).key;
        self.input.allocated.capacity.contains_key(key)
            || self.input.allocated.shared.contains_key(key)
            || self.allocating_capacity.contains_key(&d)
    }

    /// The affinity values the request wants on the device: `Ok(None)` when no extractor applies
    /// (or the device is not shared), `Err` when the device is not viable.
    fn wanted(&self, rd: &ReqData<'_>, d: DevIdx) -> Result<Option<Values>, Rejection> {
        let index = self.input.index;
        let entry = index.device(d);
        if !entry.allow_multiple || !self.input.extractors.pool_has_affinity(index, d) {
            return Ok(None);
        }
        let ids = self
            .input
            .extractors
            .applicable(index, self.input.cel, d)
            .map_err(Rejection::Device)?;
        if ids.is_empty() {
            return Ok(None);
        }
        let missing = Outcome::Missing(String::new());
        let outcomes: Vec<&Outcome> = ids
            .iter()
            .map(|id| rd.affinity.get(id).unwrap_or(&missing))
            .collect();
        if outcomes
            .iter()
            .any(|o| matches!(o, Outcome::Missing(k) if k.is_empty()))
        {
            // The extractor was not evaluated for this claim at PreFilter: an internal error.
            return Err(Rejection::Extraction(
                "extractor outcome missing for request".into(),
            ));
        }
        affinity::wanted(&outcomes).map(Some)
    }

    /// The device's lock as this call sees it: tentative in-call lock first, then persistent.
    fn current_lock(&self, d: DevIdx) -> LockState {
        match self.allocating_affinity.get(&d) {
            Some((v, _)) => LockState::Locked(v.clone()),
            None => self.input.locks.lock(d),
        }
    }

    fn note(&mut self, d: DevIdx, why: &Rejection) {
        let name = &self.input.index.device(d).device.name;
        self.notes.insert(format!("{name}: {why}"));
    }

    /// Candidate order for a request: devices already locked to the values the request wants come
    /// first (consolidation); otherwise first-fit order.
    fn order_for(&mut self, ci: usize, ri: usize, si: usize) -> std::rc::Rc<[DevIdx]> {
        if let Some(o) = self.order.get(&(ci, ri, si)) {
            return o.clone();
        }
        let rd = &self.reqs[ci][ri][si];
        let mut first = Vec::new();
        let mut rest = Vec::new();
        if self.input.extractors.is_empty() || !self.input.consolidate {
            rest = self.cands.clone();
        } else {
            let index = self.input.index;
            for &d in &self.cands {
                // Only a shared device of an affinity pool that is locked can be joined; check the
                // cheap conditions before computing the values the request wants.
                let entry = index.device(d);
                let joined = entry.allow_multiple
                    && self.input.extractors.pool_has_affinity(index, d)
                    && match self.input.locks.lock(d) {
                        LockState::Locked(l) => matches!(self.wanted(rd, d), Ok(Some(w)) if w == l),
                        _ => false,
                    };
                if joined { first.push(d) } else { rest.push(d) }
            }
        }
        first.extend(rest);
        let order: std::rc::Rc<[DevIdx]> = first.into();
        self.order.insert((ci, ri, si), order.clone());
        order
    }

    fn allocate_one(&mut self, r: Pos, in_sub: bool, start: usize) -> Result<bool, Stop> {
        if r.claim >= self.reqs.len() {
            return Ok(true);
        }
        if r.request >= self.reqs[r.claim].len() {
            return match self.allocate_one(
                Pos {
                    claim: r.claim + 1,
                    ..Pos::default()
                },
                false,
                0,
            ) {
                Err(Stop::MaxSize) => Ok(false),
                other => other,
            };
        }
        let has_subs = self.input.claims[r.claim].claim.spec.devices.requests[r.request]
            .exactly
            .is_none();
        if !in_sub && has_subs {
            let mut all_exceeded = true;
            for si in 0..self.reqs[r.claim][r.request].len() {
                match self.allocate_one(Pos { sub: si, ..r }, true, 0) {
                    Err(Stop::MaxSize) => continue,
                    Err(e) => return Err(e),
                    Ok(true) => {
                        self.selected_sub.insert((r.claim, r.request), si);
                        return Ok(true);
                    }
                    Ok(false) => all_exceeded = false,
                }
            }
            return if all_exceeded {
                Err(Stop::MaxSize)
            } else {
                Ok(false)
            };
        }
        let rd = &self.reqs[r.claim][r.request][r.sub];
        let all = rd.mode == Mode::All;
        if all && rd.all_devices.is_empty() {
            return Ok(false);
        }
        if r.device >= rd.num_devices {
            return self.allocate_one(
                Pos {
                    claim: r.claim,
                    request: r.request + 1,
                    ..Pos::default()
                },
                false,
                0,
            );
        }
        if self.results[r.claim].len() + rd.num_devices - r.device > MAX_RESULTS_PER_CLAIM {
            return Err(Stop::MaxSize);
        }
        if all {
            let d = rd.all_devices[r.device];
            let Some(undo) = self.allocate_device(r, d, true)? else {
                return Ok(false);
            };
            let done = self.allocate_one(
                Pos {
                    device: r.device + 1,
                    ..r
                },
                in_sub,
                0,
            );
            if !matches!(done, Ok(true)) {
                self.deallocate(undo);
            }
            return done;
        }
        let order = self.order_for(r.claim, r.request, r.sub);
        for (pos, &d) in order.iter().enumerate().skip(start) {
            let admin = self.reqs[r.claim][r.request][r.sub].admin;
            if admin
                && self
                    .allocating_devices
                    .get(&d)
                    .is_some_and(|v| v.contains(&r.claim))
            {
                continue;
            }
            if !admin && self.device_in_use(d) {
                continue;
            }
            let rd = &self.reqs[r.claim][r.request][r.sub];
            if !selectable(self.input, &mut self.matches, r.claim, (r.request, r.sub), rd, d)? {
                continue;
            }
            let Some(undo) = self.allocate_device(r, d, false)? else {
                continue;
            };
            match self.allocate_one(
                Pos {
                    device: r.device + 1,
                    ..r
                },
                in_sub,
                pos + 1,
            ) {
                Ok(true) => return Ok(true),
                Ok(false) => self.deallocate(undo),
                Err(e) => {
                    self.deallocate(undo);
                    return Err(e);
                }
            }
        }
        Ok(false)
    }

    /// Availability and constraint checks for one candidate; on success the call's state is
    /// updated as if the device were allocated and the undo record is returned.
    fn allocate_device(&mut self, r: Pos, d: DevIdx, must: bool) -> Result<Option<Undo>, Stop> {
        let index = self.input.index;
        let entry = index.device(d);
        let rd = &self.reqs[r.claim][r.request][r.sub];
        let ama = entry.allow_multiple;
        if !ama
            && rd.admin
            && self
                .allocating_devices
                .get(&d)
                .is_some_and(|v| v.contains(&r.claim))
        {
            return Ok(None);
        }
        if !rd.admin && self.device_in_use(d) {
            return Ok(None);
        }
        if !all_taints_ok(entry, rd.tolerations) {
            return Ok(None);
        }
        if self.capacity_fits(rd, d) != Some(true) {
            return Ok(None);
        }
        // Sharing affinity, next to the capacity check.
        let wanted = match self.wanted(rd, d) {
            Ok(w) => w,
            Err(why) => {
                self.note(d, &why);
                return Ok(None);
            }
        };
        let mut joined_lock = false;
        if let Some(w) = &wanted {
            let lock = self.current_lock(d);
            if let Err(why) = lock.admits(w) {
                self.note(d, &why);
                return Ok(None);
            }
            joined_lock = matches!(self.input.locks.lock(d), LockState::Locked(_));
        }
        // Counters: consumed once per multi-allocatable device.
        let skip_counters = ama && self.capacity_in_use(d);
        let mut counters_pool = None;
        if !skip_counters && !entry.device.consumes_counters.is_empty() {
            self.init_counters(entry.pool);
            if !self
                .counters
                .try_consume(entry.pool, &entry.device.consumes_counters)
            {
                return Ok(None);
            }
            counters_pool = Some(entry.pool);
        }
        let rd = &self.reqs[r.claim][r.request][r.sub];
        let driver = &index.pools[entry.pool].driver;
        for i in 0..self.constraints[r.claim].len() {
            let attr = self.constraints[r.claim][i].attribute().to_string();
            let added = self.constraints[r.claim][i].add(rd.request, rd.sub, lookup(entry, driver, &attr));
            if !added {
                for j in 0..i {
                    let attr = self.constraints[r.claim][j].attribute().to_string();
                    self.constraints[r.claim][j].remove(rd.request, rd.sub, lookup(entry, driver, &attr));
                }
                if let Some(p) = counters_pool {
                    self.counters.release(p, &entry.device.consumes_counters);
                }
                if must {
                    return Err(Stop::Fatal(format!(
                        "claim {}, request {}: cannot add device {} because a claim constraint would not be satisfied",
                        self.input.claims[r.claim].key,
                        rd.full_name(),
                        entry.key
                    )));
                }
                return Ok(None);
            }
        }
        let request = rd.full_name();
        let (request_name, sub_name, admin, tolerations) = (
            rd.request.to_string(),
            rd.sub.map(str::to_string),
            rd.admin,
            rd.tolerations.to_vec(),
        );
        let mut undo = Undo {
            claim: r.claim,
            dev: d,
            dedicated: !ama,
            capacity: None,
            counters: counters_pool,
            affinity: false,
            request: request_name,
            sub: sub_name,
        };
        let mut shared = false;
        let mut consumed = None;
        if ama {
            let caps = &entry.device.capacity;
            let c: BTreeMap<String, Quantity> = caps
                .iter()
                .map(|(n, cap)| {
                    (
                        n.clone(),
                        capacity::consumed_capacity(rd.capacity.and_then(|q| q.get(n)), cap),
                    )
                })
                .collect();
            let slot = self.allocating_capacity.entry(d).or_default();
            for (n, q) in &c {
                let cur = slot.entry(n.clone()).or_insert_with(|| Quantity::from_i64(0));
                if let Some(v) = cur.checked_add(q) {
                    *cur = v;
                }
            }
            undo.capacity = Some(c.clone());
            shared = true;
            if !c.is_empty() {
                consumed = Some(c);
            }
        } else {
            self.allocating_devices.entry(d).or_default().push(r.claim);
        }
        if let Some(w) = &wanted {
            let slot = self
                .allocating_affinity
                .entry(d)
                .or_insert_with(|| (w.clone(), 0));
            slot.1 += 1;
            undo.affinity = true;
        }
        self.results[r.claim].push(Chosen {
            request,
            dev: d,
            admin,
            shared,
            consumed,
            affinity: wanted,
            joined_lock,
            tolerations,
        });
        Ok(Some(undo))
    }

    fn deallocate(&mut self, undo: Undo) {
        let index = self.input.index;
        let entry = index.device(undo.dev);
        let driver = &index.pools[entry.pool].driver;
        for c in self.constraints[undo.claim].iter_mut() {
            let attr = c.attribute().to_string();
            c.remove(&undo.request, undo.sub.as_deref(), lookup(entry, driver, &attr));
        }
        if undo.dedicated
            && let Some(v) = self.allocating_devices.get_mut(&undo.dev)
            && let Some(p) = v.iter().rposition(|c| *c == undo.claim)
        {
            v.remove(p);
            if v.is_empty() {
                self.allocating_devices.remove(&undo.dev);
            }
        }
        if let Some(c) = &undo.capacity {
            if let Some(slot) = self.allocating_capacity.get_mut(&undo.dev) {
                for (n, q) in c {
                    if let Some(cur) = slot.get_mut(n)
                        && let Some(v) = cur.checked_sub(q)
                    {
                        *cur = v;
                    }
                }
            }
            // The device had no in-call share before this one iff no other result uses it.
            let others = self
                .results
                .iter()
                .flatten()
                .filter(|ch| ch.dev == undo.dev)
                .count();
            if others <= 1 {
                self.allocating_capacity.remove(&undo.dev);
            }
        }
        if let Some(p) = undo.counters {
            self.counters.release(p, &entry.device.consumes_counters);
        }
        if undo.affinity
            && let Some(slot) = self.allocating_affinity.get_mut(&undo.dev)
        {
            slot.1 -= 1;
            if slot.1 == 0 {
                self.allocating_affinity.remove(&undo.dev);
            }
        }
        self.results[undo.claim].pop();
    }

    fn init_counters(&mut self, pool: usize) {
        if self.counters.has_pool(pool) {
            return;
        }
        let index = self.input.index;
        let p = &index.pools[pool];
        let allocated = p
            .slices
            .iter()
            .flat_map(|s| s.devices.iter())
            .map(|&d| index.device(d))
            .filter(|e| self.input.allocated.is_allocated(&e.key))
            .map(|e| e.device.consumes_counters.as_slice());
        self.counters.init_pool(pool, &p.counter_sets, allocated);
    }

    fn build_results(&self) -> Result<Vec<ClaimResult>, String> {
        let index = self.input.index;
        let mut out = Vec::with_capacity(self.results.len());
        for (ci, chosen) in self.results.iter().enumerate() {
            let claim = self.input.claims[ci].claim;
            let mut results = Vec::with_capacity(chosen.len());
            let mut choices = Vec::with_capacity(chosen.len());
            for ch in chosen {
                let entry = index.device(ch.dev);
                let pool = &index.pools[entry.pool];
                results.push(DeviceRequestAllocationResult {
                    request: ch.request.clone(),
                    driver: pool.driver.clone(),
                    pool: pool.name.clone(),
                    device: entry.device.name.clone(),
                    admin_access: ch.admin.then_some(true),
                    tolerations: ch.tolerations.clone(),
                    binding_conditions: entry.device.binding_conditions.clone(),
                    binding_failure_conditions: entry.device.binding_failure_conditions.clone(),
                    share_id: None,
                    consumed_capacity: ch.consumed.clone(),
                });
                choices.push(DeviceChoice {
                    dev: ch.dev,
                    affinity: ch.affinity.clone(),
                    joined_lock: ch.joined_lock,
                    shared: ch.shared,
                });
            }
            let config = self.configs(ci, claim);
            let node_selector = self.node_selector(chosen)?;
            out.push(ClaimResult {
                allocation: AllocationResult {
                    devices: DeviceAllocationResult { results, config },
                    node_selector,
                    allocation_timestamp: None,
                },
                choices,
            });
        }
        Ok(out)
    }

    /// Class configs (each class once, with the requests using it), then claim configs for the
    /// allocated requests; a config covering every request gets an empty `requests` list.
    fn configs(&self, ci: usize, claim: &ResourceClaim) -> Vec<DeviceAllocationConfiguration> {
        let mut out: Vec<DeviceAllocationConfiguration> = Vec::new();
        let mut class_ranges: HashMap<&str, (usize, usize)> = HashMap::new();
        let mut names = Vec::new();
        for (ri, per_req) in self.reqs[ci].iter().enumerate() {
            let si = if per_req.len() > 1 || claim.spec.devices.requests[ri].exactly.is_none() {
                self.selected_sub.get(&(ci, ri)).copied().unwrap_or(0)
            } else {
                0
            };
            let rd = &per_req[si];
            let name = rd.full_name();
            names.push((rd.request.to_string(), name.clone()));
            let class = &rd.class;
            if let Some(&(start, end)) = class_ranges.get(class.metadata.name.as_str()) {
                for c in &mut out[start..end] {
                    c.requests.push(name.clone());
                }
                continue;
            }
            let start = out.len();
            for c in &class.spec.config {
                out.push(DeviceAllocationConfiguration {
                    source: "FromClass".into(),
                    requests: vec![name.clone()],
                    opaque: c.opaque.clone(),
                });
            }
            class_ranges.insert(&class.metadata.name, (start, out.len()));
        }
        for c in &claim.spec.devices.config {
            let applies = c.requests.is_empty()
                || names
                    .iter()
                    .any(|(req, full)| c.requests.contains(req) || c.requests.contains(full));
            if applies {
                out.push(DeviceAllocationConfiguration {
                    source: "FromClaim".into(),
                    requests: c.requests.clone(),
                    opaque: c.opaque.clone(),
                });
            }
        }
        for c in &mut out {
            if !c.requests.is_empty()
                && names
                    .iter()
                    .all(|(req, full)| c.requests.contains(req) || c.requests.contains(full))
            {
                c.requests.clear();
            }
        }
        out
    }

    /// Upstream `createNodeSelector`: node-local devices pin the claim to the node; otherwise the
    /// single-term selectors of the slices are merged; none means available everywhere.
    fn node_selector(&self, chosen: &[Chosen]) -> Result<Option<NodeSelector>, String> {
        let index = self.input.index;
        let mut term = NodeSelectorTerm::default();
        for ch in chosen {
            let entry = index.device(ch.dev);
            let slice = &index.pools[entry.pool].slices[entry.slice];
            let (name, sel) = if slice.per_device {
                (
                    entry.device.node_name.clone().filter(|n| !n.is_empty()),
                    entry.device.node_selector.as_ref(),
                )
            } else {
                (slice.node_name.clone(), slice.node_selector.as_ref())
            };
            if name.is_some() {
                return Ok(Some(node_selector::node_name_selector(
                    &self.input.node.metadata.name,
                )));
            }
            if let Some(sel) = sel {
                match sel.node_selector_terms.len() {
                    0 => {}
                    1 => {
                        add_new(&sel.node_selector_terms[0].match_fields, &mut term.match_fields);
                        add_new(
                            &sel.node_selector_terms[0].match_expressions,
                            &mut term.match_expressions,
                        );
                    }
                    n => return Err(format!("unsupported ResourceSlice.NodeSelector with {n} terms")),
                }
            }
        }
        if term.match_fields.is_empty() && term.match_expressions.is_empty() {
            return Ok(None);
        }
        Ok(Some(NodeSelector {
            node_selector_terms: vec![term],
        }))
    }
}

/// Class selectors, request selectors, per-device node selection; cached per (device, request).
fn selectable(
    input: &Input<'_>,
    matches: &mut HashMap<(DevIdx, usize, usize, usize), bool>,
    ci: usize,
    (ri, si): (usize, usize),
    rd: &ReqData<'_>,
    d: DevIdx,
) -> Result<bool, String> {
    if let Some(&m) = matches.get(&(d, ci, ri, si)) {
        return Ok(m);
    }
    let index = input.index;
    let entry = index.device(d);
    let pool = &index.pools[entry.pool];
    let claim = input.claims[ci].key;
    let mut ok = true;
    let class_sel = rd
        .class
        .spec
        .selectors
        .iter()
        .map(|s| (true, s.cel.expression.as_str()));
    let req_sel = rd.selectors.iter().map(|s| (false, *s));
    for (i, (from_class, expr)) in class_sel.chain(req_sel).enumerate() {
        let owner = if from_class {
            format!("class {}", rd.class.metadata.name)
        } else {
            format!("claim {claim}")
        };
        let sel = input
            .cel
            .selector(expr)
            .map_err(|e| format!("{owner}: selector {expr:?}: CEL compile error: {e}"))?;
        let dev = entry
            .cel(&pool.driver)
            .map_err(|e| format!("{owner}: device {}: {e}", entry.key))?;
        let m = sel.matches(dev).map_err(|e| {
            format!(
                "{owner}: selector #{i} {expr:?} on device {}: CEL runtime error: {e}",
                entry.key
            )
        })?;
        if !m {
            ok = false;
            break;
        }
    }
    if ok && pool.slices[entry.slice].per_device {
        ok = device_node_matches(input.node, &entry.device)
            .map_err(|e| format!("device {}: {e}", entry.key))?;
    }
    matches.insert((d, ci, ri, si), ok);
    Ok(ok)
}

fn add_new(from: &[NodeSelectorRequirement], to: &mut Vec<NodeSelectorRequirement>) {
    for r in from {
        if !to.contains(r) {
            to.push(r.clone());
        }
    }
}

fn all_taints_ok(entry: &crate::index::DeviceEntry, tolerations: &[DeviceToleration]) -> bool {
    taints::all_taints_tolerated(&entry.device.taints, tolerations)
}

fn lookup<'e>(entry: &'e crate::index::DeviceEntry, driver: &str, attr: &str) -> Lookup<'e> {
    match entry.lookup_attribute(driver, attr) {
        Some(Ok(v)) => Lookup::Value(v),
        Some(Err(())) => Lookup::Invalid,
        None => Lookup::Missing,
    }
}

impl ClaimResult {
    /// Gives every shared result its share ID (Filter leaves them unset: only the allocation that
    /// Reserve commits needs them).
    pub fn assign_share_ids(&mut self, claim: &str, index: &Index) {
        for (position, (res, ch)) in self
            .allocation
            .devices
            .results
            .iter_mut()
            .zip(&self.choices)
            .enumerate()
        {
            if ch.shared {
                res.share_id = Some(share_id_for(
                    claim,
                    &res.request,
                    &index.device(ch.dev).key,
                    position,
                ));
            }
        }
    }
}

/// A deterministic share ID in UUID format: FNV-1a over the claim, request, device and position.
///
/// Upstream generates a random UUID; a deterministic one makes replays reproducible. Uniqueness
/// per device holds because one claim's request takes a device at most once per position.
pub fn share_id_for(claim: &str, request: &str, device: &DeviceKey, position: usize) -> String {
    fn fnv(seed: u64, parts: &[&[u8]]) -> u64 {
        let mut h = seed;
        for p in parts {
            for b in p.iter().chain(&[0xff]) {
                h ^= u64::from(*b);
                h = h.wrapping_mul(0x0000_0100_0000_01b3);
            }
        }
        h
    }
    let pos = (position as u64).to_le_bytes();
    let parts: [&[u8]; 4] = [
        claim.as_bytes(),
        request.as_bytes(),
        device.as_str().as_bytes(),
        &pos,
    ];
    let hi = fnv(0xcbf2_9ce4_8422_2325, &parts);
    let lo = fnv(0x8422_2325_cbf2_9ce4, &parts);
    // Version 8 (custom) and RFC 4122 variant bits.
    let hi = (hi & 0xffff_ffff_ffff_0fff) | 0x0000_0000_0000_8000;
    let lo = (lo & 0x3fff_ffff_ffff_ffff) | 0x8000_0000_0000_0000;
    format!(
        "{:08x}-{:04x}-{:04x}-{:04x}-{:012x}",
        hi >> 32,
        (hi >> 16) & 0xffff,
        hi & 0xffff,
        lo >> 48,
        lo & 0xffff_ffff_ffff
    )
}
