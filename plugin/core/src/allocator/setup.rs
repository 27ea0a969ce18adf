//! Preparing an allocation call: per-request data (class, mode, `All` device sets) and the
//! claim constraints.

use crate::FxHashMap;
use smallvec::SmallVec;

use super::search::selectable;
use super::{Allocator, CacheKey, Input, MAX_RESULTS_PER_CLAIM, Mode, ReqData, ReqSelector};
use crate::affinity::{self, Outcome};
use crate::constraints::{Constraint, RequestScope};
use crate::counters::CounterState;
use crate::model::DeviceToleration;
use crate::model::{DeviceClass, Map};
use crate::quantity::Quantity;

impl<'a> Allocator<'a> {
    pub(super) fn new(input: &'a Input<'a>) -> Result<Self, String> {
        // Buffers the previous call of the cycle left (empty); returned when this one ends.
        let scratch = input
            .cycle_cache
            .scratch
            .try_borrow_mut()
            .map(|mut s| std::mem::take(&mut *s))
            .unwrap_or_default();
        let mut a = Allocator {
            input,
            cands: input.candidates.clone(),
            reqs: SmallVec::with_capacity(input.claims.len()),
            selected_sub: FxHashMap::default(),
            constraints: Vec::new(),
            results: SmallVec::with_capacity(input.claims.len()),
            allocating_devices: scratch.allocating_devices,
            allocating_capacity: scratch.allocating_capacity,
            allocating_affinity: scratch.allocating_affinity,
            counters: CounterState::default(),
            order: scratch.order,
            order_buf: scratch.order_buf,
            notes: scratch.notes,
        };
        // The request data is written in place (a `ReqData` is a few hundred bytes: building
        // the nested vectors apart and pushing them would copy each one twice per call).
        for (ci, c) in input.claims.iter().enumerate() {
            a.reqs
                .push(SmallVec::with_capacity(c.claim.spec.devices.requests.len()));
            // In u64 from the requested counts (not `num_devices`, which saturates at usize::MAX on
            // wasm32), saturating: the limit and its error read the same on every target.
            let mut min_devices = 0u64;
            for (ri, r) in c.claim.spec.devices.requests.iter().enumerate() {
                let aff = |si: usize| c.affinity.get(ri).and_then(|v| v.get(si)).map(Vec::as_slice);
                let key = |si: usize| {
                    let slot = u32::try_from(c.slot?).ok()?;
                    Some((slot, u32::try_from(ri).ok()?, u32::try_from(si).ok()?))
                };
                a.reqs[ci].push(SmallVec::new());
                if let Some(ex) = &r.exactly {
                    if !r.first_available.is_empty() {
                        return Err(format!(
                            "claim {}, request {}: exactly one of exactly and firstAvailable must be set",
                            c.key, r.name
                        ));
                    }
                    let rd = a.request_data(
                        ci,
                        &r.name,
                        None,
                        &ex.device_class_name,
                        &ex.selectors,
                        ex.allocation_mode.as_deref(),
                        ex.count,
                        ex.admin_access.unwrap_or(false),
                        &ex.tolerations,
                        ex.capacity.as_ref().map(|c| &c.requests),
                        (aff(0), key(0)),
                    )?;
                    a.reqs[ci][ri].push(rd);
                } else if !r.first_available.is_empty() {
                    for (si, s) in r.first_available.iter().enumerate() {
                        let rd = a.request_data(
                            ci,
                            &r.name,
                            Some(&s.name),
                            &s.device_class_name,
                            &s.selectors,
                            s.allocation_mode.as_deref(),
                            s.count,
                            false,
                            &s.tolerations,
                            s.capacity.as_ref().map(|c| &c.requests),
                            (aff(si), key(si)),
                        )?;
                        a.reqs[ci][ri].push(rd);
                    }
                } else {
                    return Err(format!(
                        "claim {}, request {}: neither exactly nor firstAvailable is set (unsupported request type?)",
                        c.key, r.name
                    ));
                }
                min_devices =
                    min_devices.saturating_add(a.reqs[ci][ri].iter().map(|d| d.requested).min().unwrap_or(0));
            }
            if min_devices > MAX_RESULTS_PER_CLAIM as u64 {
                return Err(format!(
                    "claim {}: number of requested devices {min_devices} exceeds the claim limit of {MAX_RESULTS_PER_CLAIM}",
                    c.key
                ));
            }
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
            if !cons.is_empty() {
                // Only up to the last claim with constraints: a pod without any allocates nothing.
                a.constraints.resize_with(ci, Vec::new);
                a.constraints.push(cons);
            }
            a.results.push(SmallVec::new());
        }
        Ok(a)
    }

    #[allow(
        clippy::too_many_arguments,
        reason = "mirrors the fields of a request or subrequest"
    )]
    pub(super) fn request_data(
        &mut self,
        ci: usize,
        request: &'a str,
        sub: Option<&'a str>,
        class_name: &'a str,
        selectors: &'a [crate::model::DeviceSelector],
        mode: Option<&'a str>,
        count: Option<i64>,
        admin: bool,
        tolerations: &'a [DeviceToleration],
        capacity: Option<&'a Map<String, Quantity>>,
        (affinity, cache_key): (Option<&'a [Option<Outcome>]>, Option<CacheKey>),
    ) -> Result<ReqData<'a>, String> {
        let claim = self.input.claims[ci].key;
        // Formatted only into an error.
        let name = affinity::FullName(request, sub);
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
            selectors: self.compiled_selectors(class, selectors, cache_key),
            own_selectors: selectors,
            mode,
            admin,
            tolerations,
            capacity,
            all_devices: Vec::new(),
            num_devices: match mode {
                Mode::Exact(n) => n,
                Mode::All => 0,
            },
            // `count` is at least 1 here in `Exact` mode; `All` sets it below.
            requested: match mode {
                Mode::Exact(_) => count.map_or(1, i64::unsigned_abs),
                Mode::All => 0,
            },
            affinity: affinity.unwrap_or(&[]),
            cache_key,
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
                        // Devices that are not viable because of persistent state are left out, like
                        // capacity-insufficient shared devices: a lock to other values, an
                        // unreconstructable device, strict gating failing for this request.
                        if selectable(self.input, ci, &rd, d)?
                            && self.capacity_fits(&rd, d) == Some(true)
                            && self.persistently_viable(&rd, d)
                        {
                            rd.all_devices.push(d);
                        }
                    }
                }
            }
            rd.num_devices = rd.all_devices.len();
            rd.requested = rd.num_devices as u64;
        }
        Ok(rd)
    }

    /// The class's then the request's selectors, compiled: from the cycle cache when the request
    /// has a cache key.
    fn compiled_selectors(
        &self,
        class: &DeviceClass,
        selectors: &[crate::model::DeviceSelector],
        cache_key: Option<CacheKey>,
    ) -> std::sync::Arc<[ReqSelector]> {
        let compile = || -> std::sync::Arc<[ReqSelector]> {
            class
                .spec
                .selectors
                .iter()
                .map(|s| (true, s))
                .chain(selectors.iter().map(|s| (false, s)))
                .map(|(from_class, s)| (from_class, self.input.cel.selector(&s.cel.expression)))
                .collect()
        };
        let Some(key) = cache_key else {
            return compile();
        };
        if let Some(c) = self.input.cycle_cache.selectors.borrow().get(&key) {
            return c.clone();
        }
        let c = compile();
        self.input
            .cycle_cache
            .selectors
            .borrow_mut()
            .insert(key, c.clone());
        c
    }
}
