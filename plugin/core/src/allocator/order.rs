//! Candidate ordering: devices already locked to the wanted values first (consolidation).

use super::Allocator;
use crate::affinity::LockState;
use crate::index::DevIdx;

impl<'a> Allocator<'a> {
    /// Candidate order for a request: devices already locked to the values the request wants come
    /// first (consolidation), persistent locks and this call's tentative locks alike; otherwise
    /// first-fit order.
    pub(super) fn order_for(&mut self, ci: usize, ri: usize, si: usize) -> std::sync::Arc<[DevIdx]> {
        let base = self.persistent_order(ci, ri, si);
        self.with_tentative_joins(ci, ri, si, base)
    }

    /// [`Allocator::order_for`] before this call's tentative locks, cached per request.
    fn persistent_order(&mut self, ci: usize, ri: usize, si: usize) -> std::sync::Arc<[DevIdx]> {
        if let Some((_, o)) = self.order.iter().find(|(k, _)| *k == (ci, ri, si)) {
            return o.clone();
        }
        let rd = &self.reqs[ci][ri][si];
        let mut first = Vec::new();
        if self.input.consolidate && !self.input.extractors.is_empty() {
            let index = self.input.index;
            for &d in self.cands.iter() {
                // Only a shared device of an affinity pool that is locked can be joined; check the
                // cheap conditions before computing the values the request wants.
                let entry = index.device(d);
                let joined = entry.allow_multiple
                    && self.input.extractors.pool_has_affinity(index, d)
                    && match self.lock(d) {
                        LockState::Locked(l) => {
                            matches!(self.wanted(rd, d), Ok(Some(w)) if self.input.extractors.same(&w, l))
                        }
                        _ => false,
                    };
                if joined {
                    first.push(d);
                }
            }
        }
        // Without a join the order is the first-fit order, shared (no copy).
        let order: std::sync::Arc<[DevIdx]> = if first.is_empty() {
            self.cands.clone()
        } else {
            // `first` is a subsequence of `cands`: one merge walk leaves it out of the rest.
            let mut out = Vec::with_capacity(self.cands.len());
            out.extend_from_slice(&first);
            let mut j = 0;
            for &d in self.cands.iter() {
                if first.get(j) == Some(&d) {
                    j += 1;
                } else {
                    out.push(d);
                }
            }
            out.into()
        };
        self.order.push(((ci, ri, si), order.clone()));
        order
    }

    /// Moves the devices that another request or claim of this call tentatively locked to the
    /// values this request wants to the front (after the persistent joins), so that a pod's second
    /// claim with the same values joins the first claim's device instead of opening a new one.
    ///
    /// Locks this request itself set are left out, so the order stays the same for all devices of
    /// the request (the search resumes at a position in it).
    fn with_tentative_joins(
        &self,
        ci: usize,
        ri: usize,
        si: usize,
        base: std::sync::Arc<[DevIdx]>,
    ) -> std::sync::Arc<[DevIdx]> {
        if !self.input.consolidate || self.allocating_affinity.is_empty() {
            return base;
        }
        let rd = &self.reqs[ci][ri][si];
        let joins: Vec<DevIdx> = self
            .allocating_affinity
            .iter()
            .filter(|&(&d, (values, holders))| {
                let own = self.results[ci]
                    .iter()
                    .filter(|c| c.req == (ri, si) && c.dev == d && c.affinity.is_some())
                    .count();
                *holders > own
                    && !matches!(self.lock(d), LockState::Locked(_))
                    && matches!(self.wanted(rd, d), Ok(Some(w)) if self.input.extractors.same(&w, values))
            })
            .map(|(&d, _)| d)
            .collect();
        if joins.is_empty() {
            return base;
        }
        // Persistent joins stay first (they lead `base`), then the tentative joins, both in
        // first-fit order, then the rest.
        let persistent = base
            .iter()
            .take_while(|&&d| match self.lock(d) {
                LockState::Locked(l) => {
                    matches!(self.wanted(rd, d), Ok(Some(w)) if self.input.extractors.same(&w, l))
                }
                _ => false,
            })
            .count();
        let mut out: Vec<DevIdx> = base[..persistent].to_vec();
        out.extend(base[persistent..].iter().copied().filter(|d| joins.contains(d)));
        out.extend(base[persistent..].iter().copied().filter(|d| !joins.contains(d)));
        out.into()
    }
}
