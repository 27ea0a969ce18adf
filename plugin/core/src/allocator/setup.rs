//! Preparing an allocation call: per-request data (class, mode, `All` device sets) and the
//! claim constraints.

use crate::FxHashMap;
use smallvec::SmallVec;

use std::sync::Arc;

use super::search::selectable;
use super::{Allocator, CacheKey, Input, MAX_RESULTS_PER_CLAIM, Mode, ReqData, ReqSelector, Reqs};
use crate::affinity;
use crate::constraints::{Constraint, RequestScope};
use crate::counters::CounterState;
use crate::model::{
    DeviceClass, DeviceRequest, DeviceSelector, DeviceSubRequest, DeviceToleration, ExactDeviceRequest, Map,
};
use crate::quantity::Quantity;

impl<'a> Allocator<'a> {
    /// An allocator for `input` with the requests the cycle prepared before (`reqs`; `None`:
    /// prepared by [`Allocator::prepare`]), working in the cycle's buffers (`scratch`, from
    /// [`Allocator::scratch`]). Kept apart from the fallible preparation so that the allocator
    /// (about 1 KB) is built in its final place instead of being copied out of a `Result`.
    pub(super) fn new(
        input: &'a Input<'a>,
        reqs: Option<Arc<Reqs>>,
        scratch: std::cell::RefMut<'a, super::Scratch>,
    ) -> Self {
        Allocator {
            input,
            cands: input.candidates.clone(),
            reqs: reqs.unwrap_or_default(),
            selected_sub: FxHashMap::default(),
            constraints: Vec::new(),
            results: SmallVec::with_capacity(input.claims.len()),
            counters: CounterState::default(),
            scratch,
            steps: 0,
        }
    }

    /// The cycle's buffers for one allocation call. Calls do not nest: buffers already
    /// borrowed are an internal error.
    pub(super) fn scratch(input: &'a Input<'a>) -> Result<std::cell::RefMut<'a, super::Scratch>, String> {
        input
            .cycle_cache
            .scratch
            .try_borrow_mut()
            .map_err(|_| "internal: an allocation call inside another".to_string())
    }

    /// The requests an earlier call of the cycle prepared for the same claims, if any.
    pub(super) fn cached_reqs(input: &Input<'_>) -> Option<Arc<Reqs>> {
        if !Self::cacheable(input) {
            return None;
        }
        input.cycle_cache.reqs.borrow().clone()
    }

    /// Whether the input's claims are the cycle's own, in order (no per-node variant): then
    /// their prepared requests are the same in every call of the cycle.
    fn cacheable(input: &Input<'_>) -> bool {
        input.claims.iter().enumerate().all(|(i, c)| c.slot == Some(i))
    }

    /// Prepares the requests (unless [`Allocator::new`] had them) and the constraints of the
    /// input's claims, claim by claim (the first error is the same either way). Requests are
    /// kept in the cycle cache for the next call unless one of them is in `All` mode (whose
    /// device set depends on the node).
    pub(super) fn prepare(&mut self) -> Result<(), String> {
        let input = self.input;
        // Requests from the cycle cache cover every claim; otherwise there are none yet.
        let build = self.reqs.len() != input.claims.len();
        let mut reqs = Reqs::new();
        for (ci, c) in input.claims.iter().enumerate() {
            if build {
                reqs.push(self.claim_requests(ci)?);
            }
            let cons = claim_constraints(c)?;
            if !cons.is_empty() {
                // Only up to the last claim with constraints: a pod without any allocates nothing.
                self.constraints.resize_with(ci, Vec::new);
                self.constraints.push(cons);
            }
            self.results.push(SmallVec::new());
        }
        if build {
            let reqs = Arc::new(reqs);
            let all = reqs.iter().flatten().flatten().any(|rd| rd.mode == Mode::All);
            if !all && Self::cacheable(input) {
                *input.cycle_cache.reqs.borrow_mut() = Some(Arc::clone(&reqs));
            }
            self.reqs = reqs;
        }
        Ok(())
    }

    /// The prepared requests of claim `ci`: per request, per subrequest (or one).
    fn claim_requests(&self, ci: usize) -> Result<SmallVec<[SmallVec<[ReqData; 1]>; 2]>, String> {
        let c = &self.input.claims[ci];
        let mut out: SmallVec<[SmallVec<[ReqData; 1]>; 2]> =
            SmallVec::with_capacity(c.claim.spec.devices.requests.len());
        // In u64 from the requested counts (not `num_devices`, which saturates at usize::MAX on
        // wasm32), saturating: the limit and its error read the same on every target.
        let mut min_devices = 0u64;
        for (ri, r) in c.claim.spec.devices.requests.iter().enumerate() {
            let key = |si: usize| {
                let slot = u32::try_from(c.slot?).ok()?;
                Some((slot, u32::try_from(ri).ok()?, u32::try_from(si).ok()?))
            };
            let mut per_req: SmallVec<[ReqData; 1]> = SmallVec::new();
            if let Some(ex) = &r.exactly {
                if !r.first_available.is_empty() {
                    return Err(format!(
                        "claim {}, request {}: exactly one of exactly and firstAvailable must be set",
                        c.key, r.name
                    ));
                }
                per_req.push(self.request_data(
                    (ci, ri, None),
                    RequestFields::exact(r, ex),
                    ex.admin_access.unwrap_or(false),
                    key(0),
                )?);
            } else if !r.first_available.is_empty() {
                for (si, s) in r.first_available.iter().enumerate() {
                    per_req.push(self.request_data(
                        (ci, ri, Some(si)),
                        RequestFields::sub(r, s),
                        false,
                        key(si),
                    )?);
                }
            } else {
                return Err(format!(
                    "claim {}, request {}: neither exactly nor firstAvailable is set (unsupported request type?)",
                    c.key, r.name
                ));
            }
            min_devices = min_devices.saturating_add(per_req.iter().map(|d| d.requested).min().unwrap_or(0));
            out.push(per_req);
        }
        if min_devices > MAX_RESULTS_PER_CLAIM as u64 {
            return Err(format!(
                "claim {}: number of requested devices {min_devices} exceeds the claim limit of {MAX_RESULTS_PER_CLAIM}",
                c.key
            ));
        }
        Ok(out)
    }

    fn request_data(
        &self,
        (ci, ri, si): (usize, usize, Option<usize>),
        fields: RequestFields<'a>,
        admin: bool,
        cache_key: Option<CacheKey>,
    ) -> Result<ReqData, String> {
        let RequestFields {
            request,
            sub,
            class_name,
            selectors,
            mode,
            count,
            ..
        } = fields;
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
            claim: ci,
            request: ri,
            sub: si,
            selectors: self.compiled_selectors(class, selectors, cache_key),
            mode,
            admin,
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
            cache_key,
            wanted_first: Default::default(),
            need_first: Default::default(),
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
                        if selectable(self.input, &rd, d)?
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

/// The constraints of a claim, with no value seen yet.
fn claim_constraints(c: &super::ClaimInput<'_>) -> Result<Vec<Constraint>, String> {
    let mut cons = Vec::new();
    for (i, k) in c.claim.spec.devices.constraints.iter().enumerate() {
        let scope = RequestScope::new(&k.requests);
        cons.push(match (&k.match_attribute, &k.distinct_attribute) {
            (Some(attr), None) => Constraint::Match { scope, attribute: attr.clone(), value: None, count: 0 },
            (None, Some(attr)) => Constraint::Distinct { scope, attribute: attr.clone(), values: Default::default() },
            _ => {
                return Err(format!(
                    "claim {}, constraint #{i}: exactly one of matchAttribute and distinctAttribute must be set",
                    c.key
                ));
            }
        });
    }
    Ok(cons)
}

/// The fields of an `exactly` request or of a subrequest, as the allocator reads them.
#[derive(Clone, Copy)]
pub(super) struct RequestFields<'a> {
    pub(super) request: &'a str,
    pub(super) sub: Option<&'a str>,
    pub(super) class_name: &'a str,
    pub(super) selectors: &'a [DeviceSelector],
    pub(super) mode: Option<&'a str>,
    pub(super) count: Option<i64>,
    pub(super) tolerations: &'a [DeviceToleration],
    pub(super) capacity: Option<&'a Map<String, Quantity>>,
}

impl<'a> RequestFields<'a> {
    pub(super) fn exact(r: &'a DeviceRequest, ex: &'a ExactDeviceRequest) -> Self {
        RequestFields {
            request: &r.name,
            sub: None,
            class_name: &ex.device_class_name,
            selectors: &ex.selectors,
            mode: ex.allocation_mode.as_deref(),
            count: ex.count,
            tolerations: &ex.tolerations,
            capacity: ex.capacity.as_ref().map(|c| &c.requests),
        }
    }

    pub(super) fn sub(r: &'a DeviceRequest, s: &'a DeviceSubRequest) -> Self {
        RequestFields {
            request: &r.name,
            sub: Some(&s.name),
            class_name: &s.device_class_name,
            selectors: &s.selectors,
            mode: s.allocation_mode.as_deref(),
            count: s.count,
            tolerations: &s.tolerations,
            capacity: s.capacity.as_ref().map(|c| &c.requests),
        }
    }

    /// `request` or `request/sub`.
    pub(super) fn full_name(&self) -> String {
        affinity::full_name(self.request, self.sub)
    }
}
