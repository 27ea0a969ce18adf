//! Preparing an allocation call: per-request data (class, mode, `All` device sets) and the
//! claim constraints.

use crate::hashing::FxHashMap;
use smallvec::SmallVec;

use std::sync::Arc;

use super::{
    AllocError, Allocator, CacheKey, MAX_RESULTS_PER_CLAIM, Mode, NodeInput, ReqData, ReqSelector, Reqs,
    RequestName, Search,
};
use crate::affinity::{self, Gate, RequestAffinity};
use crate::constraints::{Constraint, RequestScope};
use crate::model::{
    DeviceClass, DeviceRequest, DeviceSelector, DeviceSubRequest, DeviceToleration, ExactDeviceRequest, Map,
};
use crate::quantity::Quantity;

impl<'a> Search<'a> {
    /// A search on `node` for the cycle's allocator, with the requests the cycle prepared before
    /// (`reqs`; `None`: prepared by [`Search::prepare`]), working in the cycle's buffers
    /// (`scratch`). Kept apart from the fallible preparation so that the search (about 1 KB) is
    /// built in its final place instead of being copied out of a `Result`.
    pub(super) fn new(
        alloc: &'a Allocator<'a>,
        node: &'a NodeInput<'a>,
        reqs: Option<Arc<Reqs>>,
        scratch: std::cell::RefMut<'a, super::Scratch>,
    ) -> Self {
        Search {
            alloc,
            node,
            gate: Gate {
                index: alloc.index,
                extractors: alloc.extractors,
                cel: alloc.cel,
                locks: node.locks,
                cache: &alloc.cycle_cache.wanted,
                claims: alloc,
            },
            cands: node.candidates.clone(),
            reqs: reqs.unwrap_or_default(),
            selected_sub: FxHashMap::default(),
            results: SmallVec::with_capacity(alloc.claims.len()),
            scratch,
            steps: 0,
        }
    }

    /// Prepares the requests (unless [`Search::new`] had them) and the constraints of the
    /// allocator's claims, claim by claim (the first error is the same either way). Requests are
    /// kept in the cycle cache for the next call unless one of them is in `All` mode (whose
    /// device set depends on the node).
    pub(super) fn prepare(&mut self) -> Result<(), AllocError> {
        let alloc = self.alloc;
        // Requests from the cycle cache cover every claim; otherwise there are none yet.
        let build = self.reqs.len() != alloc.claims.len();
        let mut reqs = Reqs::new();
        for (ci, c) in alloc.claims.iter().enumerate() {
            if build {
                reqs.push(self.claim_requests(ci)?);
            }
            let cons = claim_constraints(c)?;
            if !cons.is_empty() {
                // Only up to the last claim with constraints: a pod without any allocates nothing.
                let constraints = &mut self.scratch.tentative.constraints;
                constraints.resize_with(ci, Vec::new);
                constraints.push(cons);
            }
            self.results.push(SmallVec::new());
        }
        if build {
            let reqs = Arc::new(reqs);
            let all = reqs.iter().flatten().flatten().any(|rd| rd.mode == Mode::All);
            if !all && alloc.cacheable() {
                *alloc.cycle_cache.reqs.borrow_mut() = Some(Arc::clone(&reqs));
            }
            self.reqs = reqs;
        }
        Ok(())
    }

    /// The prepared requests of claim `ci`: per request, per subrequest (or one).
    fn claim_requests(&self, ci: usize) -> Result<SmallVec<[SmallVec<[ReqData; 1]>; 2]>, AllocError> {
        let c = &self.alloc.claims[ci];
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
                    return Err(AllocError::ExactlyAndFirstAvailable {
                        claim: c.key.to_string(),
                        request: r.name.clone(),
                    });
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
                return Err(AllocError::NoRequestType {
                    claim: c.key.to_string(),
                    request: r.name.clone(),
                });
            }
            min_devices = min_devices.saturating_add(per_req.iter().map(|d| d.requested).min().unwrap_or(0));
            out.push(per_req);
        }
        if min_devices > MAX_RESULTS_PER_CLAIM as u64 {
            return Err(AllocError::TooManyDevices {
                claim: c.key.to_string(),
                requested: min_devices,
                limit: MAX_RESULTS_PER_CLAIM,
            });
        }
        Ok(out)
    }

    fn request_data(
        &self,
        (ci, ri, si): (usize, usize, Option<usize>),
        fields: RequestFields<'a>,
        admin: bool,
        cache_key: Option<CacheKey>,
    ) -> Result<ReqData, AllocError> {
        let RequestFields {
            request,
            sub,
            class_name,
            selectors,
            mode,
            count,
            ..
        } = fields;
        // Owned only into an error.
        let claim = || self.alloc.claims[ci].key.to_string();
        let name = || RequestName::new(request, sub);
        if class_name.is_empty() {
            return Err(AllocError::MissingClassName {
                claim: claim(),
                request: name(),
            });
        }
        let class = self
            .alloc
            .classes
            .get(class_name)
            .ok_or_else(|| AllocError::ClassNotFound {
                claim: claim(),
                request: name(),
                class: class_name.to_string(),
            })?;
        let mode = match mode.unwrap_or("ExactCount") {
            "ExactCount" | "" => {
                let n = count.unwrap_or(1);
                if n < 1 {
                    return Err(AllocError::BadCount {
                        claim: claim(),
                        request: name(),
                        count: n,
                    });
                }
                Mode::Exact(usize::try_from(n).unwrap_or(usize::MAX))
            }
            "All" => Mode::All,
            other => {
                return Err(AllocError::UnsupportedMode {
                    claim: claim(),
                    request: name(),
                    mode: other.to_string(),
                });
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
            affinity: RequestAffinity {
                admin,
                claim: ci,
                request: ri,
                sub: si.unwrap_or(0),
                key: cache_key,
                memo: Default::default(),
            },
            need_first: Default::default(),
        };
        if mode == Mode::All {
            for np in self.node.pools {
                let pool = &self.alloc.index.pools[np.pool];
                if !pool.complete {
                    return Err(AllocError::AllModePoolUpdating {
                        claim: claim(),
                        request: name(),
                        pool: pool.id(),
                    });
                }
                if pool.invalid.is_some() {
                    return Err(AllocError::AllModePoolInvalid {
                        claim: claim(),
                        request: name(),
                        pool: pool.id(),
                    });
                }
                for &s in &np.slices {
                    for &d in &pool.slices[s].devices {
                        // Devices that are not viable because of persistent state are left out, like
                        // capacity-insufficient shared devices: a lock to other values, an
                        // unreconstructable device, strict gating failing for this request.
                        if self.selectable(&rd, d)?
                            && self.capacity_fits(&rd, d) == Some(true)
                            && self.gate.persistently_viable(&rd.affinity, d)
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
                .map(|(from_class, s)| (from_class, self.alloc.cel.selector(&s.cel.expression)))
                .collect()
        };
        let Some(key) = cache_key else {
            return compile();
        };
        if let Some(c) = self.alloc.cycle_cache.selectors.borrow().get(&key) {
            return c.clone();
        }
        let c = compile();
        self.alloc
            .cycle_cache
            .selectors
            .borrow_mut()
            .insert(key, c.clone());
        c
    }
}

/// The constraints of a claim, with no value seen yet.
fn claim_constraints(c: &super::ClaimInput<'_>) -> Result<Vec<Constraint>, AllocError> {
    let mut cons = Vec::new();
    for (i, k) in c.claim.spec.devices.constraints.iter().enumerate() {
        let scope = RequestScope::new(&k.requests);
        cons.push(match (&k.match_attribute, &k.distinct_attribute) {
            (Some(attr), None) => Constraint::Match {
                scope,
                attribute: attr.clone(),
                value: None,
                count: 0,
            },
            (None, Some(attr)) => Constraint::Distinct {
                scope,
                attribute: attr.clone(),
                values: Default::default(),
            },
            _ => {
                return Err(AllocError::BadConstraint {
                    claim: c.key.to_string(),
                    index: i,
                });
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
