//! The undo log: what one tentative device allocation changed, and how to take it back.

use super::search::consumption;
use super::{Allocator, lookup};
use crate::index::DevIdx;

/// What one tentative device allocation changed.
pub(super) struct Undo<'a> {
    pub(super) claim: usize,
    pub(super) dev: DevIdx,
    pub(super) dedicated: bool,
    /// A shared allocation: its consumed capacity (in the chosen result, which is still last)
    /// is taken back.
    pub(super) capacity: bool,
    pub(super) counters: Option<usize>,
    pub(super) affinity: bool,
    pub(super) request: &'a str,
    pub(super) sub: Option<&'a str>,
}

impl<'a> Allocator<'a> {
    pub(super) fn deallocate(&mut self, undo: Undo<'a>) {
        let index = self.input.index;
        let entry = index.device(undo.dev);
        let driver = &index.pools[entry.pool].driver;
        for c in self.constraints.get_mut(undo.claim).into_iter().flatten() {
            let value = lookup(entry, driver, c.attribute());
            c.remove(undo.request, undo.sub, value);
        }
        if undo.dedicated
            && let Some(v) = self.scratch.allocating_devices.get_mut(&undo.dev)
            && let Some(p) = v.iter().rposition(|c| *c == undo.claim)
        {
            v.remove(p);
            if v.is_empty() {
                self.scratch.allocating_devices.recycle(&undo.dev);
            }
        }
        if undo.capacity {
            // The chosen result is still last: what it consumed is taken back.
            let requested = self.results[undo.claim]
                .last()
                .map(|ch| self.fields(&self.reqs[undo.claim][ch.req.0][ch.req.1]).capacity);
            if let Some(slot) = self.scratch.allocating_capacity.get_mut(&undo.dev)
                && let Some(requested) = requested
            {
                for (cur, q) in slot.iter_mut().zip(consumption(requested, &entry.capacity)) {
                    if let Some(v) = cur.checked_sub(&q) {
                        *cur = v;
                    }
                }
            }
            // The device had no in-call share before this one iff no other result uses it.
            let others = self
                .results
                .iter()
                .flatten()
                .filter(|ch| ch.dev == undo.dev)
                .count();
            if others <= 1 {
                self.scratch.allocating_capacity.recycle(&undo.dev);
            }
        }
        if let Some(p) = undo.counters {
            self.counters.release(p, &entry.device.consumes_counters);
        }
        if undo.affinity
            && let Some(slot) = self.scratch.allocating_affinity.get_mut(&undo.dev)
        {
            slot.1 -= 1;
            if slot.1 == 0 {
                self.scratch.allocating_affinity.remove(&undo.dev);
            }
        }
        self.results[undo.claim].pop();
    }
}
