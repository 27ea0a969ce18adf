//! Filter's results of a cycle, one slot per node id.

use crate::status::Status;

/// Filter's result for one node.
#[derive(Clone, Debug)]
pub(crate) struct NodeResult {
    pub(crate) status: Status,
    /// The allocation found (compact; `None` when nothing was allocated on the node).
    pub(crate) allocation: Option<crate::allocator::Allocation>,
    /// Per pending claim (same order; empty when there is none): the node's variant of the
    /// KEP-5004 special claim when the node serves some of its resources through a device plugin.
    pub(crate) variants: Vec<Option<crate::extended::NodeVariant>>,
    /// The node's raw affinity rank ([`crate::plugin::Plugin::affinity_rank`]), computed at Filter.
    pub(crate) rank: u32,
    /// Named by this cycle's PreScore (see [`Scoring::named`]).
    pub(crate) named: bool,
}

/// Filter's results of a cycle, by node id ([`crate::state::Nodes`]): a slot per id, so that a Filter on every
/// node writes its results one after another (ids follow the order the nodes were added in),
/// not at a hash position each: at 5,000 nodes every scattered write is a likely cache miss.
///
/// The slots outlive the cycle: a new cycle ([`NodeResults::next_cycle`]) only counts up, and a
/// slot holding an earlier cycle's result reads as empty. That result is dropped when the node's
/// next Filter overwrites it, on the line the write fetches anyway, instead of in a pass over
/// every node's result when the next PreFilter starts (at 5,000 nodes, thousands of lines long out
/// of the cache).
#[derive(Default)]
pub(crate) struct NodeResults {
    /// Per node id: the cycle of the result, and the result.
    slots: Vec<Option<(u32, NodeResult)>>,
    /// The current cycle's number.
    current: u32,
}

impl NodeResults {
    /// Starts a new cycle: every result so far reads as empty. Room for the ids below `ids`, so
    /// that a Filter on every node does not move the results.
    pub(crate) fn next_cycle(&mut self, ids: usize) {
        match self.current.checked_add(1) {
            Some(c) => self.current = c,
            // After 2³² cycles the numbers start again: no slot may keep an old one.
            None => {
                self.slots.clear();
                self.current = 0;
            }
        }
        self.slots.reserve(ids.saturating_sub(self.slots.len()));
    }

    pub(crate) fn get(&self, id: u32) -> Option<&NodeResult> {
        match self.slots.get(id as usize)? {
            Some((c, r)) if *c == self.current => Some(r),
            _ => None,
        }
    }

    pub(crate) fn get_mut(&mut self, id: u32) -> Option<&mut NodeResult> {
        match self.slots.get_mut(id as usize)? {
            Some((c, r)) if *c == self.current => Some(r),
            _ => None,
        }
    }

    /// Stores the result for node `id`, in place of the slot's earlier one. A node Filtered again
    /// in the same cycle keeps its place among the nodes PreScore named.
    pub(crate) fn insert(&mut self, id: u32, mut result: NodeResult) {
        let i = id as usize;
        if self.slots.len() <= i {
            self.slots.resize_with(i + 1, || None);
        }
        let current = self.current;
        let slot = &mut self.slots[i];
        if let Some((c, old)) = slot
            && *c == current
        {
            result.named |= old.named;
        }
        *slot = Some((current, result));
    }

    pub(crate) fn remove(&mut self, id: u32) {
        if let Some(slot) = self.slots.get_mut(id as usize) {
            *slot = None;
        }
    }

    /// Drops every result.
    pub(crate) fn clear(&mut self) {
        self.slots.clear();
    }

    /// The ids of the nodes with a result in this cycle.
    pub(crate) fn ids(&self) -> impl Iterator<Item = u32> {
        let current = self.current;
        self.slots
            .iter()
            .enumerate()
            .filter(move |(_, s)| s.as_ref().is_some_and(|(c, _)| *c == current))
            .map(|(i, _)| i as u32)
    }

    pub(crate) fn values(&self) -> impl Iterator<Item = &NodeResult> + Clone {
        let current = self.current;
        self.slots
            .iter()
            .filter_map(move |s| s.as_ref().filter(|(c, _)| *c == current).map(|(_, r)| r))
    }

    pub(crate) fn values_mut(&mut self) -> impl Iterator<Item = &mut NodeResult> {
        let current = self.current;
        self.slots
            .iter_mut()
            .filter_map(move |s| s.as_mut().filter(|(c, _)| *c == current).map(|(_, r)| r))
    }
}

#[cfg(test)]
mod tests {
    use super::{NodeResult, NodeResults};
    use crate::status::Status;

    fn result(rank: u32) -> NodeResult {
        NodeResult {
            status: Status::success(),
            allocation: None,
            variants: Vec::new(),
            rank,
            named: false,
        }
    }

    /// A new cycle's results start empty although the slots keep the earlier cycle's: an
    /// earlier result is never read or listed, its named mark does not pass to the new result,
    /// and the cycle numbers wrapping around empties the slots.
    #[test]
    fn node_results_of_an_earlier_cycle_read_as_empty() {
        let ranks = |r: &NodeResults| r.values().map(|x| x.rank).collect::<Vec<_>>();
        let mut r = NodeResults::default();
        r.next_cycle(4);
        r.insert(0, result(10));
        r.insert(2, result(12));
        r.get_mut(2).expect("stored").named = true;
        r.insert(2, result(22));
        assert!(
            r.get(2).is_some_and(|x| x.named),
            "same cycle: the named mark is kept"
        );
        let rank = |r: &NodeResults, id: u32| r.get(id).map(|x| x.rank);
        assert_eq!((rank(&r, 2), rank(&r, 1), rank(&r, 9)), (Some(22), None, None));
        assert_eq!(ranks(&r), [10, 22]);
        r.next_cycle(4);
        assert_eq!(
            (rank(&r, 0), rank(&r, 2)),
            (None, None),
            "the last cycle's results"
        );
        assert!(r.get_mut(0).is_none());
        assert_eq!(ranks(&r), Vec::<u32>::new());
        // Slot 2 still holds the last cycle's result, marked named.
        r.insert(2, result(32));
        assert!(
            r.get(2).is_some_and(|x| !x.named),
            "an earlier cycle's named mark is not kept"
        );
        r.values_mut().for_each(|x| x.rank += 1);
        assert_eq!(ranks(&r), [33]);
        r.remove(2);
        assert_eq!((rank(&r, 2), ranks(&r).len()), (None, 0));
        r.insert(1, result(41));
        r.clear();
        assert_eq!(ranks(&r).len(), 0);
        // The numbers wrap around: the slots written under the last number must not be read
        // as the first number's.
        r.insert(3, result(50));
        r.current = u32::MAX;
        r.insert(1, result(51));
        r.next_cycle(4);
        assert_eq!(r.current, 0);
        for id in 0..4 {
            assert!(r.get(id).is_none(), "node {id} after the wrap");
        }
        assert_eq!(ranks(&r).len(), 0);
    }
}
