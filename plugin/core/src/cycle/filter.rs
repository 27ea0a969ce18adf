//! Filter: one node of the cycle, the claims' node selectors then the allocator over the node's
//! pools; and the API results of the allocation found, built for the node Reserve commits.

use super::Cycle;
use super::results::NodeResult;
use super::score::node_rank;
use crate::allocator::{self, AllocError, AllocOutcome, ClaimInput, ClaimResult};
use crate::index::DevIdx;
use crate::node_selector;
use crate::object::Kind;
use crate::state::{ClusterState, Derived};
use crate::status::Status;

impl Cycle {
    /// Filter's result for the node named `node_name` (its id and object; `None`: not known).
    pub(crate) fn filter(
        &self,
        state: &ClusterState,
        node: Option<(u32, &crate::model::Node)>,
        node_name: &str,
    ) -> NodeResult {
        let fail = |status: Status| NodeResult {
            status,
            allocation: None,
            variants: Vec::new(),
            rank: 0,
            named: false,
        };
        let cycle = self;
        if !cycle.status.is_success() {
            return fail(cycle.status.clone());
        }
        let Some((id, node)) = node else {
            return fail(Status::unresolvable(state.rejected.missing(
                Kind::Node,
                node_name,
                &format!("node {node_name}"),
                || format!("node {node_name} not found"),
            )));
        };
        for c in &cycle.claims {
            if let Some(a) = &c.claim.status.allocation
                && let Some(sel) = &a.node_selector
            {
                match node_selector::matches(sel, node) {
                    Ok(true) => {}
                    Ok(false) => {
                        return fail(Status::unresolvable(format!(
                            "resource claim {} is allocated and not available on node {node_name}",
                            c.key
                        )));
                    }
                    Err(e) => {
                        return fail(Status::error(format!(
                            "claim {}: status.allocation.nodeSelector: {e}",
                            c.key
                        )));
                    }
                }
            }
        }
        if let Some(why) = &cycle.unusable {
            return fail(Status::unresolvable(why.clone()));
        }
        if cycle.pending.is_empty() {
            return NodeResult {
                status: Status::success(),
                allocation: None,
                variants: Vec::new(),
                rank: 0,
                named: false,
            };
        }
        let Some(d) = state.derived.as_ref() else {
            return fail(Status::error("internal: slice index missing"));
        };
        // The node's pools are computed once per node and index; the cache stays borrowed for
        // the allocation call, which does not touch it.
        let mut cache = d.node_pools.borrow_mut();
        let slot = id as usize;
        if cache.len() <= slot {
            cache.resize_with(slot + 1, || None);
        }
        let (pools, candidates) = match cache[slot].get_or_insert_with(|| {
            d.index.pools_for_node(node).map(|pools| {
                let cands = allocator::candidates(&d.index, &pools);
                (pools, cands)
            })
        }) {
            Ok((p, c)) => (p.as_slice(), &*c),
            Err(e) => return fail(Status::error(e.clone())),
        };
        // KEP-5004: the special claim without the resources this node serves through a device
        // plugin; a claim left with no request is not allocated on this node. Without such a
        // claim in the cycle nothing varies per node (`variants` stays empty).
        let variants: Vec<Option<crate::extended::NodeVariant>> = if cycle.extended {
            cycle
                .pending
                .iter()
                .map(|&i| {
                    let c = &cycle.claims[i];
                    crate::extended::node_variant(&c.claim, &c.extended, node)
                })
                .collect()
        } else {
            Vec::new()
        };
        let trimmed = cycle.trimmed_affinity(&variants);
        let inputs = cycle.claim_inputs(&variants, &trimmed);
        if inputs.is_empty() {
            drop(inputs);
            return NodeResult {
                status: Status::success(),
                allocation: None,
                variants,
                rank: 0,
                named: false,
            };
        }
        let locks = state.lock_table(d, candidates);
        let on = Self::node_input(d, &locks, node, (pools, candidates));
        let outcome = cycle.allocator(state, d, &inputs).allocate(&on);
        // The claims borrow `variants`, which the result keeps.
        drop(inputs);
        match outcome {
            Ok(AllocOutcome::Allocated(a)) => NodeResult {
                status: Status::success(),
                rank: node_rank(
                    a.prioritized_rank(),
                    if state.config.consolidate {
                        a.rank(&d.index, &d.extractors)
                    } else {
                        0
                    },
                ),
                named: false,
                allocation: Some(a),
                variants,
            },
            Ok(AllocOutcome::Unfit(notes)) => {
                let mut reason = "cannot allocate all claims".to_string();
                if !notes.is_empty() {
                    reason.push_str(": ");
                    reason.push_str(&notes.join("; "));
                }
                fail(Status::unschedulable(reason))
            }
            Err(e @ AllocError::TimedOut) => fail(Status::unresolvable(e)),
            Err(e @ AllocError::InvalidPool { .. }) => fail(Status::unschedulable(e)),
            Err(e) => fail(Status::error(e)),
        }
    }

    /// The allocator of the current cycle for `claims` (Filter, and Reserve building the chosen
    /// node's results).
    fn allocator<'a>(
        &'a self,
        state: &'a ClusterState,
        d: &'a Derived,
        claims: &'a [ClaimInput<'a>],
    ) -> allocator::Allocator<'a> {
        allocator::Allocator {
            index: &d.index,
            extractors: &d.extractors,
            cel: &state.cel,
            classes: &state.classes,
            claims,
            consolidate: state.config.consolidate,
            selector_cache: &d.selector_cache,
            cycle_cache: &self.cache,
        }
    }

    /// What the allocator reads of one node.
    fn node_input<'a>(
        d: &'a Derived,
        locks: &'a crate::affinity::LockTable,
        node: &'a crate::model::Node,
        (pools, candidates): (&'a [crate::index::NodePool], &'a std::sync::Arc<[DevIdx]>),
    ) -> allocator::NodeInput<'a> {
        allocator::NodeInput {
            node,
            pools,
            candidates,
            uses: &d.uses,
            locks,
        }
    }

    /// The API results of the allocation Filter found on `node` (built only now, for the node
    /// Reserve commits), aligned with the cycle's pending claims: an empty result for a claim
    /// the node leaves out (KEP-5004).
    pub(crate) fn materialize(
        &self,
        state: &ClusterState,
        node_name: &str,
        r: &NodeResult,
    ) -> Result<Vec<ClaimResult>, Status> {
        let cycle = self;
        let empty = || ClaimResult {
            allocation: Default::default(),
            choices: Vec::new(),
        };
        let mut out: Vec<ClaimResult> = cycle.pending.iter().map(|_| empty()).collect();
        let Some(allocation) = &r.allocation else {
            return Ok(out);
        };
        let d = state
            .derived
            .as_ref()
            .ok_or_else(|| Status::error("internal: slice index missing"))?;
        let (id, node) = state.nodes.get(node_name).ok_or_else(|| {
            Status::error(
                state
                    .rejected
                    .missing(Kind::Node, node_name, &format!("node {node_name}"), || {
                        format!("node {node_name} not found")
                    }),
            )
        })?;
        let cache = d.node_pools.borrow();
        let (pools, candidates) = match cache.get(id as usize) {
            Some(Some(Ok((p, c)))) => (p.as_slice(), c),
            Some(Some(Err(e))) => return Err(Status::error(e.clone())),
            _ => {
                return Err(Status::error(format!(
                    "internal: pools of node {node_name} missing"
                )));
            }
        };
        let trimmed = cycle.trimmed_affinity(&r.variants);
        let inputs = cycle.claim_inputs(&r.variants, &trimmed);
        let positions = cycle.positions(&r.variants);
        let locks = state.lock_table(d, candidates);
        let on = Self::node_input(d, &locks, node, (pools, candidates));
        let results = cycle
            .allocator(state, d, &inputs)
            .materialize(&on, allocation)
            .map_err(Status::error)?;
        for (cr, n) in results.into_iter().zip(positions) {
            out[n] = cr;
        }
        Ok(out)
    }
}
