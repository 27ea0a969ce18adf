//! PreScore and Score: a node's rank (the prioritized-list rank first, then the
//! sharing-affinity rank of [`crate::affinity`]) normalised over the feasible nodes.

use super::results::NodeResult;
use super::{Cycle, Scoring};
use crate::status::Status;

impl Cycle {
    /// PreScore: the ranks of the nodes with `ids` (`None`: not known; `name` names them in
    /// errors), in order, with the lowest and highest of them (the range Score normalises over).
    pub(crate) fn prescore<'n>(
        &mut self,
        ids: Vec<Option<u32>>,
        name: impl Fn(usize) -> &'n str,
    ) -> Result<(Vec<u32>, u32, u32), Status> {
        let cycle = self;
        let mut ranks = Vec::with_capacity(ids.len());
        for (i, id) in ids.iter().enumerate() {
            match id.and_then(|id| cycle.nodes.get(id)) {
                Some(r) if r.status.is_success() => ranks.push(r.rank),
                _ => {
                    return Err(Status::error(format!(
                        "prescore names node {}, which did not pass filter in this cycle",
                        name(i)
                    )));
                }
            }
        }
        // Only a second PreScore in the cycle has names to clear: the first does not walk every
        // node's result (thousands of lines out of the cache at 5,000 nodes).
        if cycle.any_named {
            for r in cycle.nodes.values_mut() {
                r.named = false;
            }
        }
        for id in ids.into_iter().flatten() {
            if let Some(r) = cycle.nodes.get_mut(id) {
                r.named = true;
                cycle.any_named = true;
            }
        }
        let min = ranks.iter().copied().min().unwrap_or(0);
        let max = ranks.iter().copied().max().unwrap_or(0);
        cycle.scoring = Some(Scoring {
            named: true,
            min,
            max,
        });
        Ok((ranks, min, max))
    }

    /// The result of node `id` (named `node`), which must have passed Filter in this cycle.
    pub(crate) fn passed(&self, id: Option<u32>, node: &str, what: &str) -> Result<&NodeResult, Status> {
        let r = id
            .and_then(|id| self.nodes.get(id))
            .ok_or_else(|| Status::error(format!("{what} for node {node} called before filter")))?;
        if !r.status.is_success() {
            return Err(Status::error(format!(
                "{what} for node {node} which did not pass filter"
            )));
        }
        Ok(r)
    }

    /// The affinity part of a passed node's rank ([`crate::plugin::Plugin::affinity_rank`]).
    pub(crate) fn affinity_rank(&self, id: Option<u32>, node: &str) -> Result<u32, Status> {
        Ok(self.passed(id, node, "affinity rank")?.rank % AFFINITY_SPAN)
    }

    /// The prioritized-list part of a passed node's rank ([`crate::plugin::Plugin::prioritized_rank`]).
    pub(crate) fn prioritized_rank(&self, id: Option<u32>, node: &str) -> Result<u32, Status> {
        Ok(self.passed(id, node, "prioritized rank")?.rank / AFFINITY_SPAN)
    }

    /// Score for node `id` (named `node`): see [`crate::plugin::Plugin::score`].
    pub(crate) fn score(&mut self, id: Option<u32>, node: &str) -> Result<u32, Status> {
        let (rank, named) = self.passed(id, node, "score").map(|r| (r.rank, r.named))?;
        let cycle = self;
        // The range is computed once per cycle (PreScore, or the first Score), not per node.
        let scoring = cycle.scoring.get_or_insert_with(|| {
            let passed = cycle.nodes.values().filter(|r| r.status.is_success());
            Scoring {
                named: false,
                min: passed.clone().map(|r| r.rank).min().unwrap_or(0),
                max: passed.map(|r| r.rank).max().unwrap_or(0),
            }
        });
        if scoring.named && !named {
            return Err(Status::error(format!(
                "score for node {node}, which prescore did not name"
            )));
        }
        Ok(normalize(rank, scoring.min, scoring.max))
    }
}

/// The affinity rank's place in a node's rank: below it, the prioritized-list rank above. An
/// affinity rank (100 per request at most) reaches it only with hundreds of requests, where it
/// stops there; a prioritized-list rank (8 per request) cannot reach `u32::MAX / AFFINITY_SPAN`.
const AFFINITY_SPAN: u32 = 1 << 16;

/// A node's rank: the prioritized-list rank first, then the affinity rank.
pub(crate) fn node_rank(prioritized: u32, affinity: u32) -> u32 {
    prioritized
        .saturating_mul(AFFINITY_SPAN)
        .saturating_add(affinity.min(AFFINITY_SPAN - 1))
}

/// `(rank - min) · 100 / (max - min)`, clamped to 0..=100; 0 when `max == min`.
pub(crate) fn normalize(rank: u32, min: u32, max: u32) -> u32 {
    if max <= min {
        return 0;
    }
    let scaled = u64::from(rank.clamp(min, max) - min) * 100 / u64::from(max - min);
    u32::try_from(scaled).unwrap_or(100)
}
