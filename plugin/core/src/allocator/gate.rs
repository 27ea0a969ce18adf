//! The sharing-affinity gate: the values a request wants on a device and the lock it meets.

use std::sync::Arc;

use super::{Allocator, ReqData, Wanted};
use crate::affinity::{self, ExtId, LockState, Outcome, Rejection, SetOf, Values};
use crate::index::DevIdx;

impl<'a> Allocator<'a> {
    /// The affinity values the request wants on the device: `Ok(None)` when no extractor applies
    /// (or the device is not shared), `Err` when the device is not viable. The answer depends only
    /// on the request and the device's applicable extractor set, so it is cached across devices
    /// and nodes: for the first set the request meets in the request itself
    /// ([`ReqData::wanted_first`]), for other sets per cycle ([`super::CycleCache`]).
    pub(super) fn wanted(&self, rd: &ReqData, d: DevIdx) -> Wanted {
        // Admin access bypasses sharing affinity: no gating, no lock check, and no lock is set,
        // joined or held (its results do not count as holders either).
        if rd.admin {
            return Ok(None);
        }
        let index = self.input.index;
        if !index.flags(d).allow_multiple() || !self.input.extractors.pool_has_affinity(index, d) {
            return Ok(None);
        }
        let extractors = self.input.extractors;
        match extractors.set_of(index, self.input.cel, d) {
            SetOf::Empty => return Ok(None),
            SetOf::Set(set) => {
                if let Some((first, w)) = rd.wanted_first.get()
                    && *first == set
                {
                    return w.clone();
                }
            }
            SetOf::Other => {}
        }
        let (set, ids) = extractors
            .applicable_set(index, self.input.cel, d)
            .map_err(Rejection::Device)?;
        if ids.is_empty() {
            return Ok(None);
        }
        let (first, w) = rd.wanted_first.get_or_init(|| (set, self.wanted_for(rd, ids)));
        if *first == set {
            return w.clone();
        }
        let Some((slot, ri, si)) = rd.cache_key else {
            return self.wanted_for(rd, ids);
        };
        let key = (slot, ri, si, set);
        if let Some(w) = self.input.cycle_cache.wanted.borrow().get(&key) {
            return w.clone();
        }
        let w = self.wanted_for(rd, ids);
        self.input.cycle_cache.wanted.borrow_mut().insert(key, w.clone());
        w
    }

    /// [`Allocator::wanted`] for a non-empty applicable extractor set, uncached.
    fn wanted_for(&self, rd: &ReqData, ids: &[ExtId]) -> Wanted {
        let missing = Outcome::Missing(String::new());
        let outcomes: Vec<&Outcome> = ids
            .iter()
            .map(|&id| {
                self.affinity_of(rd)
                    .get(self.input.extractors.group[id])
                    .and_then(Option::as_ref)
                    .unwrap_or(&missing)
            })
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
        affinity::wanted(&outcomes).map(|v| Some(self.input.extractors.intern(Arc::new(v))))
    }

    /// Whether affinity admits the request on the device before this call's tentative locks
    /// (`All` mode fixes its device set with this).
    pub(super) fn persistently_viable(&self, rd: &ReqData, d: DevIdx) -> bool {
        match self.wanted(rd, d) {
            Ok(None) => true,
            Ok(Some(w)) => self.admits(self.lock(d), &w).is_ok(),
            Err(_) => false,
        }
    }

    /// The device's lock as this call sees it: tentative in-call lock first, then persistent.
    pub(super) fn current_lock(&self, d: DevIdx) -> LockState {
        match self.scratch.allocating_affinity.get(&d) {
            Some((v, _)) => LockState::Locked(v.clone()),
            None => self.lock(d).clone(),
        }
    }

    /// [`LockState::admits`], comparing interned values by pointer ([`crate::affinity::Extractors::same`]).
    pub(super) fn admits(&self, lock: &LockState, wanted: &Arc<Values>) -> Result<(), Rejection> {
        match lock {
            LockState::Locked(l) if !self.input.extractors.same(l, wanted) => Err(Rejection::Locked {
                lock: l.clone(),
                wanted: wanted.clone(),
            }),
            other => other.admits(wanted),
        }
    }

    /// The device's persistent lock. The input has one for every candidate; a device without
    /// one counts as unreconstructable (never shared).
    pub(super) fn lock(&self, d: DevIdx) -> &'a LockState {
        self.input.locks.get_or_unreconstructable(d)
    }

    /// Records why a device was rejected; the text is built only if the call fails.
    pub(super) fn note(&mut self, d: DevIdx, why: Rejection) {
        self.scratch.notes.push((d, why));
    }
}
