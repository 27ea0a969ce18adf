//! The per-request search: backtracking over claims, requests, subrequests and devices, and
//! the availability checks for one candidate device.

use super::need::with_need;
use super::tentative::{Refused, Take, Undo, init_pool_counters};
use super::{
    AllocError, Chosen, DeviceUse, MAX_RESULTS_PER_CLAIM, Mode, Pos, ReqData, RequestName, Search,
    SelectorOwner, Stop,
};
use crate::index::{DevIdx, device_node_matches};
use crate::model::DeviceToleration;
use crate::taints;

impl<'a> Search<'a> {
    /// The device's allocated state outside this call.
    pub(super) fn device_use(&self, d: DevIdx) -> &'a DeviceUse {
        static UNUSED: DeviceUse = DeviceUse {
            dedicated: false,
            shared: false,
            consumed: Vec::new(),
        };
        // `uses` has one entry per device of the index (see [`super::NodeInput::uses`]).
        self.node.uses.get(d as usize).unwrap_or(&UNUSED)
    }

    pub(super) fn device_in_use(&self, d: DevIdx) -> bool {
        self.device_use(d).dedicated || self.scratch.tentative.dedicated(d)
    }

    pub(super) fn capacity_in_use(&self, d: DevIdx) -> bool {
        self.device_use(d).shared || self.scratch.tentative.shared(d)
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
        let has_subs = self.alloc.claims[r.claim].claim.spec.devices.requests[r.request]
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

    /// The device loop of [`Search::allocate_one`] for an `ExactCount` request: each
    /// candidate from position `start` of the request's order, then the rest of the search.
    fn try_devices(&mut self, r: Pos, in_sub: bool, start: usize) -> Result<bool, Stop> {
        let order = self.order_for(r.claim, r.request, r.sub);
        for pos in start..self.order_len(order) {
            let d = self.order_at(order, pos);
            let admin = self.reqs[r.claim][r.request][r.sub].admin;
            if admin && self.scratch.tentative.dedicated_to(d, r.claim) {
                continue;
            }
            if !admin && self.device_in_use(d) {
                continue;
            }
            let rd = &self.reqs[r.claim][r.request][r.sub];
            if !self.selectable(rd, d)? {
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
        let index = self.alloc.index;
        let entry = index.device(d);
        let flags = index.flags(d);
        let rd = &self.reqs[r.claim][r.request][r.sub];
        let ama = flags.allow_multiple();
        if !ama && rd.admin && self.scratch.tentative.dedicated_to(d, r.claim) {
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
            let lock = self.gate.lock(d);
            match self
                .scratch
                .tentative
                .affinity
                .admits(self.alloc.extractors, lock, d, w)
            {
                // Joining includes a tentative lock of this call (another request or claim of the
                // pod).
                Ok(joined) => joined_lock = joined,
                Err(why) => {
                    self.note(d, why);
                    return Ok(None);
                }
            }
        }
        // Counters: consumed once per multi-allocatable device.
        let skip_counters = ama && self.capacity_in_use(d);
        let counters = !skip_counters && flags.counters();
        if counters {
            self.init_counters(entry.pool);
        }
        let rd = &self.reqs[r.claim][r.request][r.sub];
        let admin = rd.admin;
        let take = Take {
            claim: r.claim,
            req: (r.request, r.sub),
            dev: d,
            entry,
            driver: &index.pools[entry.pool].driver,
            request: fields.request,
            sub: fields.sub,
            shared: ama,
            counters,
            wanted: wanted.as_ref(),
        };
        let tentative = &mut self.scratch.tentative;
        let taken = if ama {
            // The capacity check passed, so the request consumes.
            with_need(self.alloc, rd, &entry.capacity, |need| {
                tentative.take(&take, need.consumes())
            })
        } else {
            tentative.take(&take, None)
        };
        let undo = match taken {
            Ok(undo) => undo,
            Err(Refused::Constraint) if must => {
                return Err(Stop::from(AllocError::AllModeConstraint {
                    claim: self.alloc.claims[r.claim].key.to_string(),
                    request: RequestName::new(fields.request, fields.sub),
                    device: entry.key.clone(),
                }));
            }
            Err(Refused::Counters | Refused::Constraint) => return Ok(None),
        };
        self.results[r.claim].push(Chosen {
            req: (r.request, r.sub),
            dev: d,
            admin,
            shared: ama,
            affinity: wanted,
            joined_lock,
        });
        Ok(Some(undo))
    }

    /// Gives back what [`Search::allocate_device`] took, and drops its result (still the last of
    /// its claim).
    pub(super) fn deallocate(&mut self, undo: Undo<'a>) {
        let index = self.alloc.index;
        let entry = index.device(undo.dev);
        let driver = &index.pools[entry.pool].driver;
        let tentative = &mut self.scratch.tentative;
        if undo.capacity {
            let rd = &self.reqs[undo.claim][undo.req.0][undo.req.1];
            with_need(self.alloc, rd, &entry.capacity, |need| {
                tentative.undo(&undo, entry, driver, need.consumes())
            });
        } else {
            tentative.undo(&undo, entry, driver, None);
        }
        self.results[undo.claim].pop();
    }

    /// Records why a device was rejected; the text is built only if the call fails.
    pub(super) fn note(&mut self, d: DevIdx, why: crate::affinity::Rejection) {
        self.scratch.notes.push((d, why));
    }

    pub(super) fn init_counters(&mut self, pool: usize) {
        let counters = &mut self.scratch.tentative.counters;
        if counters.has_pool(pool) {
            return;
        }
        init_pool_counters(counters, self.alloc.index, self.node.uses, pool);
    }

    /// Class selectors, request selectors, per-device node selection. Selector results depend only on
    /// the device and the expression: they are cached per (device, compiled selector) across nodes,
    /// pods and cycles, in the slice-derived state (dropped when slices change). Errors are not
    /// cached (their text names the claim).
    pub(super) fn selectable(&self, rd: &ReqData, d: DevIdx) -> Result<bool, AllocError> {
        let alloc = self.alloc;
        let index = alloc.index;
        // The entry and its pool are read only for a selector result not yet cached, an error, or
        // per-device node selection; the flags (one line for the node's devices) answer the rest.
        let entry = || index.device(d);
        // Built at the first selector whose result is not cached, once for the rest.
        let mut dev = None;
        for (i, (from_class, compiled)) in rd.selectors.iter().enumerate() {
            // Formatted only into an error.
            let owner = || {
                let (class, expr) = super::selector_source(alloc, rd, i);
                let owner = match class {
                    Some(class) if *from_class => SelectorOwner::Class(class.metadata.name.to_string()),
                    _ => SelectorOwner::Claim(alloc.claims[rd.claim].key.to_string()),
                };
                (owner, expr)
            };
            let sel = compiled.as_ref().map_err(|e| {
                let (owner, expr) = owner();
                AllocError::SelectorCompile {
                    owner,
                    expr: expr.to_string(),
                    error: e.clone(),
                }
            })?;
            let cached = alloc.selector_cache.get(d, sel.id());
            let m = match cached {
                Some(m) => m,
                None => {
                    let dev = match &dev {
                        Some(d) => d,
                        None => dev.insert(entry().cel(&index.pool_of(d).driver).map_err(|error| {
                            AllocError::DeviceCel {
                                owner: owner().0,
                                device: entry().key.clone(),
                                error,
                            }
                        })?),
                    };
                    let m = sel.matches(dev).map_err(|error| {
                        let (owner, expr) = owner();
                        AllocError::SelectorRuntime {
                            owner,
                            index: i,
                            expr: expr.to_string(),
                            device: entry().key.clone(),
                            error,
                        }
                    })?;
                    alloc.selector_cache.insert(d, sel.id(), m);
                    m
                }
            };
            if !m {
                return Ok(false);
            }
        }
        if index.flags(d).per_device() {
            let entry = entry();
            return device_node_matches(self.node.node, &entry.device).map_err(|error| {
                AllocError::NodeSelection {
                    device: entry.key.clone(),
                    error,
                }
            });
        }
        Ok(true)
    }
}

fn all_taints_ok(entry: &crate::index::DeviceEntry, tolerations: &[DeviceToleration]) -> bool {
    taints::all_taints_tolerated(&entry.device.taints, tolerations)
}
