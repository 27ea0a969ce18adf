//! Candidate ordering: devices already locked to the wanted values first (consolidation).

use super::Search;
use crate::affinity::LockState;
use crate::index::DevIdx;

/// A candidate order of one request: the node's candidates in first-fit order, or a range of
/// the call's order buffer (`Scratch::order_buf`). Valid while the level of the search that
/// computed it runs: a level drops the orders computed below it when it returns
/// ([`Search::order_truncate`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Order {
    /// [`Search::cands`] as they are.
    Cands,
    /// `order_buf[start..start + len]`.
    Buf { start: usize, len: usize },
}

/// The lengths of the order buffer and of the order cache at a level of the search.
#[derive(Clone, Copy)]
pub(super) struct OrderMark(usize, usize);

impl<'a> Search<'a> {
    /// Where the orders stand now.
    pub(super) fn order_mark(&self) -> OrderMark {
        OrderMark(self.scratch.order_buf.len(), self.scratch.order.len())
    }

    /// Drops the orders computed since `mark` (a persistent order dropped is computed again when
    /// it is needed).
    pub(super) fn order_truncate(&mut self, mark: OrderMark) {
        self.scratch.order_buf.truncate(mark.0);
        self.scratch.order.truncate(mark.1);
    }

    /// Candidate order for a request: devices already locked to the values the request wants come
    /// first (consolidation), persistent locks and this call's tentative locks alike; otherwise
    /// first-fit order.
    pub(super) fn order_for(&mut self, ci: usize, ri: usize, si: usize) -> Order {
        let base = self.persistent_order(ci, ri, si);
        self.with_tentative_joins(ci, ri, si, base)
    }

    /// The number of devices in an order.
    pub(super) fn order_len(&self, order: Order) -> usize {
        match order {
            Order::Cands => self.cands.len(),
            Order::Buf { len, .. } => len,
        }
    }

    /// The device at position `pos` of an order (`pos` below [`Search::order_len`]).
    pub(super) fn order_at(&self, order: Order, pos: usize) -> DevIdx {
        match order {
            Order::Cands => self.cands[pos],
            Order::Buf { start, .. } => self.scratch.order_buf[start + pos],
        }
    }

    /// [`Search::order_for`] before this call's tentative locks, cached per request.
    fn persistent_order(&mut self, ci: usize, ri: usize, si: usize) -> Order {
        if let Some((_, o)) = self.scratch.order.iter().find(|(k, _)| *k == (ci, ri, si)) {
            return *o;
        }
        // Taken out while the request's data is borrowed, put back below.
        let mut buf = std::mem::take(&mut self.scratch.order_buf);
        let start = buf.len();
        if self.alloc.consolidate && !self.alloc.extractors.is_empty() {
            let req = &self.reqs[ci][ri][si].affinity;
            let gate = self.gate;
            let index = self.alloc.index;
            for &d in self.cands.iter() {
                // Only a shared device of an affinity pool that is locked can be joined; check the
                // cheap conditions before computing the values the request wants, the lock first
                // (a dense table: most devices of a node are not locked).
                let joined = match gate.lock(d) {
                    LockState::Locked(l) => {
                        index.flags(d).allow_multiple()
                            && self.alloc.extractors.pool_has_affinity(index, d)
                            && gate.joins(req, d, l)
                    }
                    _ => false,
                };
                if joined {
                    buf.push(d);
                }
            }
        }
        let joins = buf.len() - start;
        // Without a join the order is the first-fit order itself (nothing copied).
        let order = if joins == 0 {
            Order::Cands
        } else {
            // The joins are a subsequence of `cands`: one merge walk appends the rest.
            let mut j = 0;
            for &d in self.cands.iter() {
                if j < joins && buf[start + j] == d {
                    j += 1;
                } else {
                    buf.push(d);
                }
            }
            Order::Buf {
                start,
                len: self.cands.len(),
            }
        };
        self.scratch.order_buf = buf;
        self.scratch.order.push(((ci, ri, si), order));
        order
    }

    /// Moves the devices that another request or claim of this call tentatively locked to the
    /// values this request wants to the front (after the persistent joins), so that a pod's second
    /// claim with the same values joins the first claim's device instead of opening a new one.
    ///
    /// Locks this request itself set are left out, so the order stays the same for all devices of
    /// the request (the search resumes at a position in it).
    fn with_tentative_joins(&mut self, ci: usize, ri: usize, si: usize, base: Order) -> Order {
        if !self.alloc.consolidate || self.scratch.tentative.affinity.is_empty() {
            return base;
        }
        let req = &self.reqs[ci][ri][si].affinity;
        let gate = self.gate;
        let joins: Vec<DevIdx> = self
            .scratch
            .tentative
            .affinity
            .iter()
            .filter(|&(d, values, holders)| {
                let own = self.results[ci]
                    .iter()
                    .filter(|c| c.req == (ri, si) && c.dev == d && c.affinity.is_some())
                    .count();
                holders > own && !matches!(gate.lock(d), LockState::Locked(_)) && gate.joins(req, d, values)
            })
            .map(|(d, _, _)| d)
            .collect();
        if joins.is_empty() {
            return base;
        }
        // Persistent joins stay first (they lead `base`), then the tentative joins, both in
        // first-fit order, then the rest.
        let len = self.order_len(base);
        let persistent = (0..len)
            .map(|pos| self.order_at(base, pos))
            .take_while(|&d| match gate.lock(d) {
                LockState::Locked(l) => gate.joins(req, d, l),
                _ => false,
            })
            .count();
        let start = self.scratch.order_buf.len();
        for pos in 0..persistent {
            let d = self.order_at(base, pos);
            self.scratch.order_buf.push(d);
        }
        for tentative in [true, false] {
            for pos in persistent..len {
                let d = self.order_at(base, pos);
                if joins.contains(&d) == tentative {
                    self.scratch.order_buf.push(d);
                }
            }
        }
        Order::Buf { start, len }
    }
}
