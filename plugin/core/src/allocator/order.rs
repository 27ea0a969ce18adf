//! Candidate ordering: devices already locked to the wanted values first (consolidation).

use super::Allocator;
use crate::affinity::LockState;
use crate::index::DevIdx;

impl<'a> Allocator<'a> {
    /// Candidate order for a request: devices already locked to the values the request wants come
    /// first (consolidation); otherwise first-fit order.
    pub(super) fn order_for(&mut self, ci: usize, ri: usize, si: usize) -> std::rc::Rc<[DevIdx]> {
        if let Some(o) = self.order.get(&(ci, ri, si)) {
            return o.clone();
        }
        let rd = &self.reqs[ci][ri][si];
        let mut first = Vec::new();
        let mut rest = Vec::new();
        if self.input.extractors.is_empty() || !self.input.consolidate {
            rest = self.cands.clone();
        } else {
            let index = self.input.index;
            for &d in &self.cands {
                // Only a shared device of an affinity pool that is locked can be joined; check the
                // cheap conditions before computing the values the request wants.
                let entry = index.device(d);
                let joined = entry.allow_multiple
                    && self.input.extractors.pool_has_affinity(index, d)
                    && match self.input.locks.lock(d) {
                        LockState::Locked(l) => matches!(self.wanted(rd, d), Ok(Some(w)) if w == l),
                        _ => false,
                    };
                if joined { first.push(d) } else { rest.push(d) }
            }
        }
        first.extend(rest);
        let order: std::rc::Rc<[DevIdx]> = first.into();
        self.order.insert((ci, ri, si), order.clone());
        order
    }
}
