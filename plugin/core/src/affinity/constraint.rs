//! The sharing-affinity constraint as the allocator applies it, in the shape of upstream's
//! `constraint.go`: for a request and a candidate device, the values the request wants there
//! ([`Gate::wanted`], cached across devices and nodes) and the lock it meets (the device's
//! persistent lock, or a lock an earlier request of the same call took tentatively), and the
//! tentative locks of one allocation call, taken when a device is admitted and given back when
//! the search backtracks ([`AffinityConstraint`]).

use std::cell::RefCell;
use std::sync::{Arc, OnceLock};

use super::{ExtId, Extractors, LockState, LockTable, Outcome, Rejection, SetOf, Values};
use crate::cel::CelCache;
use crate::hashing::FxHashMap;
use crate::index::{DevIdx, Index};

/// What a request wants on a device: `Ok(None)` when affinity does not apply (no extractor
/// applies, the device is not shared, admin access), the interned values otherwise, `Err` when
/// the device is not viable for the request.
pub type Wanted = Result<Option<Arc<Values>>, Rejection>;

/// What a request wants on the devices of the first applicable extractor set it meets: a
/// request meets one set on most nodes, so the allocator's device loop compares one id instead
/// of probing the cycle's map ([`WantedCache`]). Kept with the prepared request, shared by the
/// calls of a cycle.
#[derive(Debug, Default)]
pub struct WantedMemo(OnceLock<(u32, Wanted)>);

/// What requests want per (claim slot, request, subrequest, [`Extractors::applicable_set`] id),
/// shared by the allocation calls of one cycle for the sets past a request's [`WantedMemo`].
#[derive(Debug, Default)]
pub struct WantedCache(RefCell<FxHashMap<(u32, u32, u32, u32), Wanted>>);

/// The affinity outcomes of the claims of one allocation call, computed at PreFilter: per
/// claim, per request, per subrequest (or one entry), per extractor group
/// ([`Extractors::group`]). Read only when a request meets an extractor set for the first time.
pub trait ClaimOutcomes {
    /// The outcomes of request `request` (subrequest `sub`, 0 for an `exactly` request) of claim
    /// `claim`; empty when there are none.
    fn outcomes(&self, claim: usize, request: usize, sub: usize) -> &[Option<Outcome>];
}

/// What the gate reads of one request (or subrequest) of a claim: kept with the prepared
/// request, shared by the calls of a cycle.
#[derive(Debug, Default)]
pub struct RequestAffinity {
    /// Admin access: affinity does not apply.
    pub admin: bool,
    /// The claim's position ([`ClaimOutcomes`]).
    pub claim: usize,
    /// The request's position in the claim.
    pub request: usize,
    /// The subrequest's position in the request (0 for an `exactly` request).
    pub sub: usize,
    /// (claim slot, request, subrequest) in the cycle's [`WantedCache`]; `None`: not cached.
    pub key: Option<(u32, u32, u32)>,
    /// What the request wants on the first applicable extractor set it meets.
    pub memo: WantedMemo,
}

/// What the constraint reads of the cycle and the node: the extractors, the persistent locks,
/// the claims' outcomes and the cycle's cache of wanted values. Built once per allocation call.
#[derive(Clone, Copy)]
pub struct Gate<'x> {
    /// Slices, indexed.
    pub index: &'x Index,
    /// Extractors.
    pub extractors: &'x Extractors,
    /// CEL cache.
    pub cel: &'x CelCache,
    /// Persistent lock states, with an entry for every candidate device of the node.
    pub locks: &'x LockTable,
    /// What requests want, per cycle.
    pub cache: &'x WantedCache,
    /// The claims' outcomes.
    pub claims: &'x dyn ClaimOutcomes,
}

impl<'x> Gate<'x> {
    /// The affinity values the request wants on the device: `Ok(None)` when no extractor applies
    /// (or the device is not shared), `Err` when the device is not viable. The answer depends only
    /// on the request and the device's applicable extractor set, so it is cached across devices
    /// and nodes: for the first set the request meets in the request itself ([`WantedMemo`]), for
    /// other sets per cycle ([`WantedCache`]).
    pub fn wanted(&self, req: &RequestAffinity, d: DevIdx) -> Wanted {
        // Admin access bypasses sharing affinity: no gating, no lock check, and no lock is set,
        // joined or held (its results do not count as holders either).
        if req.admin {
            return Ok(None);
        }
        let index = self.index;
        if !index.flags(d).allow_multiple() || !self.extractors.pool_has_affinity(index, d) {
            return Ok(None);
        }
        let extractors = self.extractors;
        match extractors.set_of(index, self.cel, d) {
            SetOf::Empty => return Ok(None),
            SetOf::Set(set) => {
                if let Some((first, w)) = req.memo.0.get()
                    && *first == set
                {
                    return w.clone();
                }
            }
            SetOf::Other => {}
        }
        let (set, ids) = extractors
            .applicable_set(index, self.cel, d)
            .map_err(Rejection::Device)?;
        if ids.is_empty() {
            return Ok(None);
        }
        let (first, w) = req.memo.0.get_or_init(|| (set, self.wanted_for(req, ids)));
        if *first == set {
            return w.clone();
        }
        let Some((slot, ri, si)) = req.key else {
            return self.wanted_for(req, ids);
        };
        let key = (slot, ri, si, set);
        if let Some(w) = self.cache.0.borrow().get(&key) {
            return w.clone();
        }
        let w = self.wanted_for(req, ids);
        self.cache.0.borrow_mut().insert(key, w.clone());
        w
    }

    /// [`Gate::wanted`] for a non-empty applicable extractor set, uncached.
    fn wanted_for(&self, req: &RequestAffinity, ids: &[ExtId]) -> Wanted {
        let missing = Outcome::Missing(String::new());
        let outcomes: Vec<&Outcome> = ids
            .iter()
            .map(|&id| {
                self.claims
                    .outcomes(req.claim, req.request, req.sub)
                    .get(self.extractors.group[id])
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
        super::wanted(&outcomes).map(|v| Some(self.extractors.intern(Arc::new(v))))
    }

    /// The device's persistent lock. The gate has one for every candidate; a device without
    /// one counts as unreconstructable (never shared).
    #[inline]
    pub fn lock(&self, d: DevIdx) -> &'x LockState {
        self.locks.get_or_unreconstructable(d)
    }

    /// Whether affinity admits the request on the device before the call's tentative locks
    /// (`All` mode fixes its device set with this).
    pub fn persistently_viable(&self, req: &RequestAffinity, d: DevIdx) -> bool {
        match self.wanted(req, d) {
            Ok(None) => true,
            Ok(Some(w)) => admits(self.extractors, self.lock(d), &w).is_ok(),
            Err(_) => false,
        }
    }

    /// Whether the device's persistent lock holds exactly the values the request wants there
    /// (the device can be joined).
    #[inline]
    pub fn joins(&self, req: &RequestAffinity, d: DevIdx, lock: &Arc<Values>) -> bool {
        // The request's memo, when it answers for the device's extractor set, is read in place:
        // consolidation asks this of every candidate, and [`Gate::wanted`] would clone the values.
        if !req.admin
            && self.index.flags(d).allow_multiple()
            && self.extractors.pool_has_affinity(self.index, d)
            && let SetOf::Set(set) = self.extractors.set_of(self.index, self.cel, d)
            && let Some((first, w)) = req.memo.0.get()
            && *first == set
        {
            return matches!(w, Ok(Some(w)) if self.extractors.same(w, lock));
        }
        matches!(self.wanted(req, d), Ok(Some(w)) if self.extractors.same(&w, lock))
    }
}

/// [`LockState::admits`], comparing interned values by pointer ([`Extractors::same`]).
#[inline]
pub fn admits(extractors: &Extractors, lock: &LockState, wanted: &Arc<Values>) -> Result<(), Rejection> {
    match lock {
        LockState::Locked(l) if !extractors.same(l, wanted) => Err(Rejection::Locked {
            lock: l.clone(),
            wanted: wanted.clone(),
        }),
        other => other.admits(wanted),
    }
}

/// The tentative affinity locks of one allocation call: per device, the values the call locked
/// it to and how many of the call's results hold it. A lock is taken when the first result of
/// the call admits a device ([`AffinityConstraint::admit`]) and dropped when the search gives
/// the last one back ([`AffinityConstraint::undo`]). A call touches a handful of devices: a
/// vector searched linearly (no hashing, capacity kept from call to call).
#[derive(Debug, Default)]
pub struct AffinityConstraint {
    locks: Vec<(DevIdx, Arc<Values>, usize)>,
}

impl AffinityConstraint {
    #[inline]
    fn position(&self, d: DevIdx) -> Option<usize> {
        self.locks.iter().position(|(k, _, _)| *k == d)
    }

    /// The call's tentative lock of device `d`, if any.
    #[inline]
    pub fn tentative(&self, d: DevIdx) -> Option<&Arc<Values>> {
        self.position(d).map(|i| &self.locks[i].1)
    }

    /// Whether a request wanting `wanted` may use device `d`, whose persistent lock is
    /// `persistent`: the call's tentative lock counts first. `Ok(true)` when the device is
    /// already locked to the values (the request joins a lock), `Ok(false)` when it is clean.
    #[inline]
    pub fn admits(
        &self,
        extractors: &Extractors,
        persistent: &LockState,
        d: DevIdx,
        wanted: &Arc<Values>,
    ) -> Result<bool, Rejection> {
        match self.tentative(d) {
            Some(lock) if extractors.same(lock, wanted) => Ok(true),
            Some(lock) => Err(Rejection::Locked {
                lock: lock.clone(),
                wanted: wanted.clone(),
            }),
            None => {
                admits(extractors, persistent, wanted).map(|()| matches!(persistent, LockState::Locked(_)))
            }
        }
    }

    /// Takes a hold on device `d` for a result wanting `wanted` (checked by
    /// [`AffinityConstraint::admits`]): the first hold locks the device to the values.
    #[inline]
    pub fn admit(&mut self, d: DevIdx, wanted: &Arc<Values>) {
        match self.position(d) {
            Some(i) => self.locks[i].2 += 1,
            None => self.locks.push((d, wanted.clone(), 1)),
        }
    }

    /// Gives back a hold [`AffinityConstraint::admit`] took; the last one clears the lock.
    #[inline]
    pub fn undo(&mut self, d: DevIdx) {
        if let Some(i) = self.position(d) {
            self.locks[i].2 -= 1;
            if self.locks[i].2 == 0 {
                self.locks.swap_remove(i);
            }
        }
    }

    /// Whether the call holds no tentative lock.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.locks.is_empty()
    }

    /// The tentative locks: device, values, holders.
    pub fn iter(&self) -> impl Iterator<Item = (DevIdx, &Arc<Values>, usize)> {
        self.locks.iter().map(|(d, v, n)| (*d, v, *n))
    }

    /// Drops every lock (the call ended), keeping the capacity.
    pub fn clear(&mut self) {
        self.locks.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A tentative lock admits only equal values, counts as a join, and clears with its last
    /// holder, after which the persistent lock decides again.
    #[test]
    fn tentative_locks_admit_equal_values_until_the_last_holder_leaves() {
        let ex = Extractors::build(
            &Index::default(),
            &crate::config::Config::default(),
            &CelCache::new(),
        );
        let subnet = |v: &str| ex.intern(Arc::new(Values::from([("subnet".to_string(), v.to_string())])));
        let (a, b) = (subnet("a"), subnet("b"));
        let mut c = AffinityConstraint::default();
        assert_eq!(
            c.admits(&ex, &LockState::Clean, 1, &a),
            Ok(false),
            "clean: no join"
        );
        c.admit(1, &a);
        c.admit(1, &a);
        assert_eq!(
            c.admits(&ex, &LockState::Clean, 1, &a),
            Ok(true),
            "tentative join"
        );
        assert!(matches!(
            c.admits(&ex, &LockState::Clean, 1, &b),
            Err(Rejection::Locked { .. })
        ));
        c.undo(1);
        assert!(c.tentative(1).is_some(), "one holder left");
        c.undo(1);
        assert!(c.is_empty(), "the last holder cleared the lock");
        assert_eq!(c.admits(&ex, &LockState::Locked(b.clone()), 1, &b), Ok(true));
        assert_eq!(
            c.admits(&ex, &LockState::Unreconstructable, 1, &b),
            Err(Rejection::Unreconstructable)
        );
    }
}
