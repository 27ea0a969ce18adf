//! Sharing-affinity lock states derived from the claims holding each device.

use super::{ClusterState, Derived};
use crate::affinity::{self, ExtId, Extractors, LockState, LockTable, Outcome, Values};
use crate::cel::CelCache;
use crate::index::DevIdx;
use crate::model::ResourceClaim;

/// Lock states derived from holders, cached in the plugin.
pub(crate) struct Locks<'a> {
    pub(crate) state: &'a ClusterState,
    pub(crate) derived: &'a Derived,
}

impl Locks<'_> {
    /// The lock state of a device (affinity pools only), computed once and cached in the plugin.
    pub(crate) fn lock(&self, dev: DevIdx) -> LockState {
        if let Some(l) = self.state.locks.borrow().get(dev) {
            return l.clone();
        }
        let state = self.compute(dev);
        let n = self.derived.index.devices.len();
        let mut locks = self.state.locks.borrow_mut();
        locks.make_room(1);
        locks.set(dev, state.clone(), n);
        state
    }
}

impl ClusterState {
    /// The lock-state table with an entry for each of `devices` (computed and cached where
    /// missing), borrowed for one allocation call: the search reads locks without a clone.
    pub(crate) fn lock_table<'a>(
        &'a self,
        d: &'a Derived,
        devices: &[DevIdx],
    ) -> std::cell::Ref<'a, LockTable> {
        let missing = {
            let table = self.locks.borrow();
            !devices.iter().all(|&x| table.has(x))
        };
        if missing {
            // Room for every candidate first: a table that started again half-way would forget
            // the states set before, which the allocator would then read as unreconstructable.
            self.locks.borrow_mut().make_room(devices.len());
            let view = self.lock_view(d);
            for &x in devices {
                view.lock(x);
            }
        }
        self.locks.borrow()
    }
}

impl Locks<'_> {
    fn compute(&self, dev: DevIdx) -> LockState {
        let d = self.derived;
        let p = self.state;
        let entry = d.index.device(dev);
        let Some(holders) = p.holders.get(&entry.key) else {
            return LockState::Clean;
        };
        let ids = match d.extractors.applicable(&d.index, &p.cel, dev) {
            Ok(ids) if !ids.is_empty() => ids,
            Ok(_) => return LockState::Clean,
            Err(_) => return LockState::Unreconstructable,
        };
        let mut keys: Vec<&str> = ids
            .iter()
            .flat_map(|&id| d.extractors.list[id].keys.keys().map(String::as_str))
            .collect();
        crate::map::sort_unique(&mut keys);
        let fingerprint = affinity::fingerprint(&d.extractors, ids);
        let mut derived: Vec<Option<std::sync::Arc<Values>>> = Vec::with_capacity(holders.len());
        for ((claim_key, request), h) in holders {
            // Values fixed by our Reserve are a cache, used while the applicable extractors have
            // the same content; after any extractor change (a new expression or selector, even
            // with the same key names) they are re-derived from the claim's config, and a claim
            // that no longer yields every key makes the device unreconstructable.
            let v = match &h.values {
                Some((f, v)) if *f == fingerprint => Some(v.clone()),
                _ => p
                    .claims
                    .get(claim_key)
                    .or_else(|| p.inflight.get(claim_key))
                    .and_then(|c| derive_values(&p.cel, &d.extractors, ids, c, claim_key, request))
                    .filter(|v| v.keys().map(String::as_str).eq(keys.iter().copied()))
                    .map(std::sync::Arc::new),
            };
            derived.push(v);
        }
        match affinity::lock_from(derived.iter().map(Option::as_deref)) {
            LockState::Locked(v) => LockState::Locked(d.extractors.intern(v)),
            other => other,
        }
    }
}

/// Re-derives the values an allocated claim locks a device to; `None` when it cannot.
fn derive_values(
    cel: &CelCache,
    extractors: &Extractors,
    ids: &[ExtId],
    claim: &ResourceClaim,
    claim_key: &str,
    request: &str,
) -> Option<Values> {
    let (req, sub) = match request.split_once('/') {
        Some((r, s)) => (r, Some(s)),
        None => (request, None),
    };
    let objects = affinity::claim_objects(claim);
    let mut outcomes = Vec::new();
    for &id in ids {
        outcomes.push(affinity::extract(cel, &extractors.list[id], &objects, req, sub, claim_key).ok()?);
    }
    let refs: Vec<&Outcome> = outcomes.iter().collect();
    affinity::wanted(&refs).ok().filter(|v| !v.is_empty())
}
