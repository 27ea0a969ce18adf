//! The per-request search: backtracking over claims, requests, subrequests and devices, and
//! the availability checks for one candidate device.

use super::undo::Undo;
use super::{Allocator, Chosen, DeviceUse, Input, MAX_RESULTS_PER_CLAIM, Mode, Pos, ReqData, Stop, lookup};
use crate::affinity::LockState;
use crate::capacity;
use crate::counters::CounterState;
use crate::index::{DevIdx, Index, device_node_matches};
use crate::model::{DeviceCapacity, DeviceToleration, Map};
use crate::quantity::Quantity;
use crate::taints;
use smallvec::SmallVec;
use std::sync::Arc;

impl<'a> Allocator<'a> {
    /// Upstream `CmpRequestOverCapacity` for request `rd`: `None` when it names a capacity the
    /// device lacks (the device is skipped), else whether every capacity stays within its value.
    pub(super) fn capacity_fits(&self, rd: &ReqData, d: DevIdx) -> Option<bool> {
        let caps = &self.input.index.device(d).capacity;
        let allocated = &self.device_use(d).consumed;
        let allocating = self.scratch.allocating_capacity.get(&d);
        with_need(self.input, rd, caps, |need| {
            let consumes = match need {
                Need::Lacks => return None,
                Need::BreaksPolicy => return Some(false),
                Need::Consumes(c) => c,
            };
            for (i, (consumed, cap)) in consumes.iter().zip(caps.values()).enumerate() {
                let mut total = consumed.clone();
                for extra in [allocated.get(i), allocating.and_then(|v| v.get(i))]
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
        })
    }

    /// The device's allocated state outside this call.
    pub(super) fn device_use(&self, d: DevIdx) -> &'a DeviceUse {
        static UNUSED: DeviceUse = DeviceUse {
            dedicated: false,
            shared: false,
            consumed: Vec::new(),
        };
        // `uses` has one entry per device of the index (see [`Input::uses`]).
        self.input.uses.get(d as usize).unwrap_or(&UNUSED)
    }

    pub(super) fn device_in_use(&self, d: DevIdx) -> bool {
        self.device_use(d).dedicated
            || self
                .scratch
                .allocating_devices
                .get(&d)
                .is_some_and(|v| !v.is_empty())
    }

    pub(super) fn capacity_in_use(&self, d: DevIdx) -> bool {
        self.device_use(d).shared || self.scratch.allocating_capacity.contains_key(&d)
    }

    pub(super) fn allocate_one(&mut self, r: Pos, in_sub: bool, start: usize) -> Result<bool, Stop> {
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
        if self.results[r.claim]
            .len()
            .saturating_add(rd.num_devices - r.device)
            > MAX_RESULTS_PER_CLAIM
        {
            return Err(Stop::MaxSize);
        }
        if all {
            let d = rd.all_devices[r.device];
            self.step()?;
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
        // The orders computed below this level (the deeper levels' tentative orders) are
        // dropped when this level returns, so the buffer holds one order per level of the
        // search, however long it backtracks.
        let mark = self.order_mark();
        let done = self.try_devices(r, in_sub, start);
        self.order_truncate(mark);
        done
    }

    /// The device loop of [`Allocator::allocate_one`] for an `ExactCount` request: each
    /// candidate from position `start` of the request's order, then the rest of the search.
    fn try_devices(&mut self, r: Pos, in_sub: bool, start: usize) -> Result<bool, Stop> {
        let order = self.order_for(r.claim, r.request, r.sub);
        for pos in start..self.order_len(order) {
            let d = self.order_at(order, pos);
            let admin = self.reqs[r.claim][r.request][r.sub].admin;
            if admin
                && self
                    .scratch
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
            if !selectable(self.input, rd, d)? {
                continue;
            }
            self.step()?;
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
    pub(super) fn allocate_device(
        &mut self,
        r: Pos,
        d: DevIdx,
        must: bool,
    ) -> Result<Option<Undo<'a>>, Stop> {
        let index = self.input.index;
        let entry = index.device(d);
        let flags = index.flags(d);
        let rd = &self.reqs[r.claim][r.request][r.sub];
        let ama = flags.allow_multiple();
        if !ama
            && rd.admin
            && self
                .scratch
                .allocating_devices
                .get(&d)
                .is_some_and(|v| v.contains(&r.claim))
        {
            return Ok(None);
        }
        if !rd.admin && self.device_in_use(d) {
            return Ok(None);
        }
        let fields = self.fields(rd);
        // The device object is read only when the flags say it has taints (or counters, below).
        if flags.tainted() && !all_taints_ok(entry, fields.tolerations) {
            return Ok(None);
        }
        if self.capacity_fits(rd, d) != Some(true) {
            return Ok(None);
        }
        // Sharing affinity, next to the capacity check.
        let wanted = match self.wanted(rd, d) {
            Ok(w) => w,
            Err(why) => {
                self.note(d, why);
                return Ok(None);
            }
        };
        let mut joined_lock = false;
        if let Some(w) = &wanted {
            let lock = self.current_lock(d);
            if let Err(why) = self.admits(&lock, w) {
                self.note(d, why);
                return Ok(None);
            }
            // Joining includes a tentative lock of this call (another request or claim of the pod).
            joined_lock = matches!(lock, LockState::Locked(_));
        }
        // Counters: consumed once per multi-allocatable device.
        let skip_counters = ama && self.capacity_in_use(d);
        let mut counters_pool = None;
        if !skip_counters && flags.counters() {
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
        // Claims without constraints have no entry (see `Allocator::constraints`).
        let constraints = self
            .constraints
            .get_mut(r.claim)
            .map_or(&mut [][..], Vec::as_mut_slice);
        for i in 0..constraints.len() {
            let value = lookup(entry, driver, constraints[i].attribute());
            if !constraints[i].add(fields.request, fields.sub, value) {
                for c in &mut constraints[..i] {
                    let value = lookup(entry, driver, c.attribute());
                    c.remove(fields.request, fields.sub, value);
                }
                if let Some(p) = counters_pool {
                    self.counters.release(p, &entry.device.consumes_counters);
                }
                if must {
                    return Err(Stop::Fatal(format!(
                        "claim {}, request {}: cannot add device {} because a claim constraint would not be satisfied",
                        self.input.claims[r.claim].key,
                        fields.full_name(),
                        entry.key
                    )));
                }
                return Ok(None);
            }
        }
        let (request, sub, admin) = (fields.request, fields.sub, rd.admin);
        let mut undo = Undo {
            claim: r.claim,
            dev: d,
            dedicated: !ama,
            capacity: false,
            counters: counters_pool,
            affinity: false,
            request,
            sub,
        };
        let mut shared = false;
        if ama {
            let caps = &entry.capacity;
            let zero = || Quantity::from_i64(0);
            let slot = self.scratch.allocating_capacity.or_insert_reused(
                d,
                |v| {
                    v.clear();
                    v.resize_with(caps.len(), zero);
                },
                || vec![zero(); caps.len()],
            );
            // The capacity check passed, so the request consumes.
            with_need(self.input, rd, caps, |need| {
                if let Need::Consumes(consumes) = need {
                    for (cur, q) in slot.iter_mut().zip(consumes) {
                        if let Some(v) = cur.checked_add(q) {
                            *cur = v;
                        }
                    }
                }
            });
            undo.capacity = true;
            shared = true;
        } else {
            self.scratch
                .allocating_devices
                .or_insert_reused(d, Vec::clear, Vec::new)
                .push(r.claim);
        }
        if let Some(w) = &wanted {
            let slot = self
                .scratch
                .allocating_affinity
                .or_insert_with(d, || (w.clone(), 0));
            slot.1 += 1;
            undo.affinity = true;
        }
        self.results[r.claim].push(Chosen {
            req: (r.request, r.sub),
            dev: d,
            admin,
            shared,
            affinity: wanted,
            joined_lock,
        });
        Ok(Some(undo))
    }

    pub(super) fn init_counters(&mut self, pool: usize) {
        if self.counters.has_pool(pool) {
            return;
        }
        init_pool_counters(&mut self.counters, self.input.index, self.input.uses, pool);
    }
}

/// Sets a pool's available counters: its counter sets minus what allocated devices consume.
pub fn init_pool_counters(counters: &mut CounterState, index: &Index, uses: &[DeviceUse], pool: usize) {
    let p = &index.pools[pool];
    let used = p
        .slices
        .iter()
        .flat_map(|s| s.devices.iter())
        .filter(|&&d| uses.get(d as usize).is_some_and(DeviceUse::is_allocated))
        .map(|&d| index.device(d).device.consumes_counters.as_slice());
    counters.init_pool(pool, &p.counter_sets, used);
}

/// Class selectors, request selectors, per-device node selection. Selector results depend only on
/// the device and the expression: they are cached per (device, compiled selector) across nodes,
/// pods and cycles, in the slice-derived state (dropped when slices change). Errors are not
/// cached (their text names the claim).
pub(super) fn selectable(input: &Input<'_>, rd: &ReqData, d: DevIdx) -> Result<bool, String> {
    let index = input.index;
    // The entry and its pool are read only for a selector result not yet cached, an error, or
    // per-device node selection; the flags (one line for the node's devices) answer the rest.
    let entry = || index.device(d);
    // Built at the first selector whose result is not cached, once for the rest.
    let mut dev = None;
    for (i, (from_class, compiled)) in rd.selectors.iter().enumerate() {
        // Formatted only into an error.
        let owner = || {
            let (class, expr) = super::selector_source(input, rd, i);
            let owner = match class {
                Some(class) if *from_class => format!("class {}", class.metadata.name),
                _ => format!("claim {}", input.claims[rd.claim].key),
            };
            (owner, expr)
        };
        let sel = compiled.as_ref().map_err(|e| {
            let (owner, expr) = owner();
            format!("{owner}: selector {expr:?}: CEL compile error: {e}")
        })?;
        let cached = input.selector_cache.get(d, sel.id());
        let m = match cached {
            Some(m) => m,
            None => {
                let dev = match &dev {
                    Some(d) => d,
                    None => dev.insert(
                        entry()
                            .cel(&index.pool_of(d).driver)
                            .map_err(|e| format!("{}: device {}: {e}", owner().0, entry().key))?,
                    ),
                };
                let m = sel.matches(dev).map_err(|e| {
                    let (owner, expr) = owner();
                    format!(
                        "{owner}: selector #{i} {expr:?} on device {}: CEL runtime error: {e}",
                        entry().key
                    )
                })?;
                input.selector_cache.insert(d, sel.id(), m);
                m
            }
        };
        if !m {
            return Ok(false);
        }
    }
    if index.flags(d).per_device() {
        let entry = entry();
        return device_node_matches(input.node, &entry.device)
            .map_err(|e| format!("device {}: {e}", entry.key));
    }
    Ok(true)
}

/// What a request needs of a device's capacities, before the device's use is added (upstream
/// `CmpRequestOverCapacity`'s per-capacity part). It depends only on the request and the
/// device's capacity map, so a request computes it once per capacity shape ([`with_need`]).
#[derive(Debug)]
pub(super) enum Need {
    /// The request names a capacity the device lacks: the device is skipped.
    Lacks,
    /// What the request consumes of some capacity breaks that capacity's request policy.
    BreaksPolicy,
    /// What the request consumes of each capacity, aligned with the device's capacity map.
    Consumes(SmallVec<[Quantity; 2]>),
}

impl Need {
    fn of(requested: Option<&Map<String, Quantity>>, caps: &Map<String, DeviceCapacity>) -> Need {
        if let Some(req) = requested
            && req.keys().any(|k| !caps.contains_key(k))
        {
            return Need::Lacks;
        }
        let consumes: SmallVec<[Quantity; 2]> = consumption(requested, caps).collect();
        let breaks = consumes
            .iter()
            .zip(caps.values())
            .any(|(q, cap)| capacity::violates_policy(q, cap.request_policy.as_deref()));
        if breaks {
            Need::BreaksPolicy
        } else {
            Need::Consumes(consumes)
        }
    }
}

/// Calls `f` with what request `rd` needs of a device whose capacity map is `caps`: from the
/// request's memo when `caps` is the first shape the request met ([`ReqData::need_first`]), else
/// computed (the request's capacities are looked up only then).
pub(super) fn with_need<R>(
    input: &Input<'_>,
    rd: &ReqData,
    caps: &Arc<Map<String, DeviceCapacity>>,
    f: impl FnOnce(&Need) -> R,
) -> R {
    let need = || Need::of(super::request_fields(input, rd).capacity, caps);
    let (shape, first) = rd.need_first.get_or_init(|| (Arc::clone(caps), need()));
    if Arc::ptr_eq(shape, caps) {
        f(first)
    } else {
        f(&need())
    }
}

/// The capacity a request consumes on a device, aligned with the device's capacity map `caps`
/// (what a shared allocation adds to the device's consumed capacity).
pub(super) fn consumption<'x>(
    requested: Option<&'x Map<String, Quantity>>,
    caps: &'x Map<String, DeviceCapacity>,
) -> impl Iterator<Item = Quantity> + 'x {
    caps.iter()
        .map(move |(n, cap)| capacity::consumed_capacity(requested.and_then(|q| q.get(n)), cap))
}

fn all_taints_ok(entry: &crate::index::DeviceEntry, tolerations: &[DeviceToleration]) -> bool {
    taints::all_taints_tolerated(&entry.device.taints, tolerations)
}
