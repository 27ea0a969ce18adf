//! The tentative state of one allocation call, and how a device is taken and given back.
//!
//! What the call has taken so far: dedicated devices, capacity consumed on shared devices, the
//! pools' counters, the claims' constraint values and the affinity locks. The search takes a
//! device with [`Tentative::take`] once its checks pass, and gives it back with
//! [`Tentative::undo`] when the branch fails, so that every change is undone in one place.

use std::sync::Arc;

use super::DeviceUse;
use super::devmap::DevMap;
use crate::affinity::{AffinityConstraint, Values};
use crate::constraints::{Constraint, Lookup};
use crate::counters::CounterState;
use crate::index::{DevIdx, DeviceEntry, Index};
use crate::quantity::Quantity;

/// The tentative state of one allocation call. It lives in the cycle's buffers
/// ([`super::CycleCache`]): a call finds it empty ([`Tentative::clear`]), with the capacity of
/// the calls before.
#[derive(Default)]
pub(super) struct Tentative {
    /// Dedicated devices taken in this call, with the claims taking them.
    devices: DevMap<Vec<usize>>,
    /// Per shared device taken in this call: the capacity consumed, aligned with the device's
    /// `capacity` map (no names copied on the search path), and how many results share it.
    capacity: DevMap<(Vec<Quantity>, usize)>,
    /// The pools' counters, per pool on first use.
    pub(super) counters: CounterState,
    /// Per claim, up to the last claim that has constraints (a claim past the end has none).
    pub(super) constraints: Vec<Vec<Constraint>>,
    /// The call's affinity locks.
    pub(super) affinity: AffinityConstraint,
}

/// One device a request takes, with what the search already worked out for it (`'n`: the
/// request's names, kept by the undo record).
#[derive(Clone, Copy)]
pub(super) struct Take<'x, 'n> {
    /// The claim's position.
    pub(super) claim: usize,
    /// (request, subrequest) positions of the request.
    pub(super) req: (usize, usize),
    /// The device.
    pub(super) dev: DevIdx,
    /// Its entry in the index.
    pub(super) entry: &'x DeviceEntry,
    /// Its driver.
    pub(super) driver: &'x str,
    /// The request's name, and subrequest's (the constraints' scopes).
    pub(super) request: &'n str,
    /// The subrequest's name.
    pub(super) sub: Option<&'n str>,
    /// A shared allocation of a multi-allocatable device (else the device is dedicated).
    pub(super) shared: bool,
    /// The device's counters are consumed (its pool's counters are initialised).
    pub(super) counters: bool,
    /// The affinity values the request locks the device to (admitted by the constraint).
    pub(super) wanted: Option<&'x Arc<Values>>,
}

/// Why [`Tentative::take`] refused a device (nothing was changed).
pub(super) enum Refused {
    /// The pool's counters do not cover the device.
    Counters,
    /// A claim constraint rejects the device's attribute.
    Constraint,
}

/// What one tentative device allocation changed, for [`Tentative::undo`].
pub(super) struct Undo<'a> {
    /// The claim's position.
    pub(super) claim: usize,
    /// (request, subrequest) positions of the request.
    pub(super) req: (usize, usize),
    /// The device.
    pub(super) dev: DevIdx,
    dedicated: bool,
    /// A shared allocation: its consumed capacity is taken back.
    pub(super) capacity: bool,
    counters: Option<usize>,
    affinity: bool,
    request: &'a str,
    sub: Option<&'a str>,
}

impl Tentative {
    /// Empties the state for the next call, keeping the buffers (and the maps' values as
    /// spares).
    pub(super) fn clear(&mut self) {
        self.devices.clear_recycling();
        self.capacity.clear_recycling();
        self.counters = CounterState::default();
        self.constraints.clear();
        self.affinity.clear();
    }

    /// Whether device `d` is taken without a share by some claim of this call.
    #[inline]
    pub(super) fn dedicated(&self, d: DevIdx) -> bool {
        self.devices.get(&d).is_some_and(|v| !v.is_empty())
    }

    /// Whether claim `claim` took device `d` without a share in this call.
    #[inline]
    pub(super) fn dedicated_to(&self, d: DevIdx, claim: usize) -> bool {
        self.devices.get(&d).is_some_and(|v| v.contains(&claim))
    }

    /// Whether device `d` is shared by some result of this call.
    #[inline]
    pub(super) fn shared(&self, d: DevIdx) -> bool {
        self.capacity.contains_key(&d)
    }

    /// The capacity consumed on shared device `d` in this call, if it is shared.
    #[inline]
    pub(super) fn consumed(&self, d: DevIdx) -> Option<&[Quantity]> {
        self.capacity.get(&d).map(|(v, _)| v.as_slice())
    }

    /// Takes the device: consumes its counters and adds its attributes to the claim's
    /// constraints (either may refuse, and then nothing is changed), then records the
    /// capacity consumed (`consumes`, aligned with the device's capacity map: shared) or the
    /// dedication, and the affinity lock.
    #[inline]
    pub(super) fn take<'n>(
        &mut self,
        t: &Take<'_, 'n>,
        consumes: Option<&[Quantity]>,
    ) -> Result<Undo<'n>, Refused> {
        let Take {
            claim,
            req,
            dev,
            entry,
            driver,
            request,
            sub,
            shared,
            counters,
            wanted,
        } = *t;
        let mut counters_pool = None;
        if counters {
            if !self
                .counters
                .try_consume(entry.pool, &entry.device.consumes_counters)
            {
                return Err(Refused::Counters);
            }
            counters_pool = Some(entry.pool);
        }
        // Claims without constraints have no entry (see `Tentative::constraints`).
        let constraints = self
            .constraints
            .get_mut(claim)
            .map_or(&mut [][..], Vec::as_mut_slice);
        for i in 0..constraints.len() {
            let value = lookup(entry, driver, constraints[i].attribute());
            if !constraints[i].add(request, sub, value) {
                for c in &mut constraints[..i] {
                    let value = lookup(entry, driver, c.attribute());
                    c.remove(request, sub, value);
                }
                if let Some(p) = counters_pool {
                    self.counters.release(p, &entry.device.consumes_counters);
                }
                return Err(Refused::Constraint);
            }
        }
        if shared {
            let n = entry.capacity.len();
            let zero = || Quantity::from_i64(0);
            let slot = self.capacity.or_insert_reused(
                dev,
                |(v, holders)| {
                    v.clear();
                    v.resize_with(n, zero);
                    *holders = 0;
                },
                || (vec![zero(); n], 0),
            );
            for (cur, q) in slot.0.iter_mut().zip(consumes.into_iter().flatten()) {
                if let Some(v) = cur.checked_add(q) {
                    *cur = v;
                }
            }
            slot.1 += 1;
        } else {
            self.devices
                .or_insert_reused(dev, Vec::clear, Vec::new)
                .push(claim);
        }
        if let Some(w) = wanted {
            self.affinity.admit(dev, w);
        }
        Ok(Undo {
            claim,
            req,
            dev,
            dedicated: !shared,
            capacity: shared,
            counters: counters_pool,
            affinity: wanted.is_some(),
            request,
            sub,
        })
    }

    /// Gives back what [`Tentative::take`] took; `consumes` is what the shared allocation
    /// consumed (the same as at take).
    #[inline]
    pub(super) fn undo(
        &mut self,
        undo: &Undo<'_>,
        entry: &DeviceEntry,
        driver: &str,
        consumes: Option<&[Quantity]>,
    ) {
        for c in self.constraints.get_mut(undo.claim).into_iter().flatten() {
            let value = lookup(entry, driver, c.attribute());
            c.remove(undo.request, undo.sub, value);
        }
        if undo.dedicated
            && let Some(v) = self.devices.get_mut(&undo.dev)
            && let Some(p) = v.iter().rposition(|c| *c == undo.claim)
        {
            v.remove(p);
            if v.is_empty() {
                self.devices.recycle(&undo.dev);
            }
        }
        if undo.capacity
            && let Some((slot, holders)) = self.capacity.get_mut(&undo.dev)
        {
            for (cur, q) in slot.iter_mut().zip(consumes.into_iter().flatten()) {
                if let Some(v) = cur.checked_sub(q) {
                    *cur = v;
                }
            }
            // The last share of the call gives the device back.
            *holders -= 1;
            if *holders == 0 {
                self.capacity.recycle(&undo.dev);
            }
        }
        if let Some(p) = undo.counters {
            self.counters.release(p, &entry.device.consumes_counters);
        }
        if undo.affinity {
            self.affinity.undo(undo.dev);
        }
    }
}

/// A device attribute as the claim constraints see it.
fn lookup<'e>(entry: &'e DeviceEntry, driver: &str, attr: &str) -> Lookup<'e> {
    match entry.lookup_attribute(driver, attr) {
        Some(Ok(v)) => Lookup::Value(v),
        Some(Err(())) => Lookup::Invalid,
        None => Lookup::Missing,
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
