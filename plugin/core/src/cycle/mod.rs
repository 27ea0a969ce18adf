//! One scheduling cycle of one pod, shaped as the framework's extension points: PreFilter
//! ([`prefilter`]) builds a [`Cycle`] from the [`crate::state::ClusterState`]; Filter
//! ([`filter`]) reads it (`&self`) and the state for one node; PreScore and Score ([`score`])
//! rank the nodes that passed; PostFilter ([`postfilter`]) names a claim to deallocate when none
//! did. Reserve, Unreserve and Bind are [`crate::reservations`]. Filter's results per node are
//! kept in [`results`].

mod filter;
mod postfilter;
mod prefilter;
pub(crate) mod results;
mod score;

pub use postfilter::PostFilter;
pub(crate) use score::normalize;

use crate::allocator::{ClaimAffinity, ClaimInput};
use crate::model::ResourceClaim;
use crate::status::Status;
use results::NodeResults;

impl Cycle {
    /// The cycle of a pod whose PreFilter failed with `status`: every later call says so.
    pub(crate) fn failed(pod: &str, status: Status) -> Cycle {
        Cycle {
            pod: pod.to_string(),
            status,
            unusable: None,
            claims: Vec::new(),
            pending: Vec::new(),
            affinity: Vec::new(),
            extended: false,
            nodes: NodeResults::default(),
            scoring: None,
            any_named: false,
            cache: Default::default(),
        }
    }

    /// Whether a pending claim is a KEP-5004 special claim (its requests may vary per node).
    pub(crate) fn any_extended(claims: &[CycleClaim], pending: &[usize]) -> bool {
        pending.iter().any(|&i| !claims[i].extended.is_empty())
    }

    /// Per pending claim: the affinity outcomes of the node's variant's kept requests (`None`:
    /// the PreFilter outcomes apply). Empty when `variants` is.
    pub(crate) fn trimmed_affinity(
        &self,
        variants: &[Option<crate::extended::NodeVariant>],
    ) -> Vec<Option<ClaimAffinity>> {
        variants
            .iter()
            .zip(&self.affinity)
            .map(|(v, aff)| {
                v.as_ref()
                    .filter(|_| !aff.is_empty())
                    .map(|v| v.keep.iter().map(|&k| aff[k].clone()).collect())
            })
            .collect()
    }

    /// Whether pending claim `n` is allocated on the node: a node variant with no request left
    /// is not.
    pub(crate) fn takes_part(variants: &[Option<crate::extended::NodeVariant>], n: usize) -> bool {
        variants
            .get(n)
            .and_then(Option::as_ref)
            .is_none_or(|v| !v.claim.spec.devices.requests.is_empty())
    }

    /// The allocator's claims for a node ([`Cycle::positions`] gives each one's position in
    /// `pending`).
    pub(crate) fn claim_inputs<'c>(
        &'c self,
        variants: &'c [Option<crate::extended::NodeVariant>],
        trimmed: &'c [Option<ClaimAffinity>],
    ) -> smallvec::SmallVec<[ClaimInput<'c>; 2]> {
        if variants.is_empty() {
            // No node variant (the common case): every pending claim as PreFilter resolved it.
            return self
                .pending
                .iter()
                .enumerate()
                .map(|(n, &i)| ClaimInput {
                    key: &self.claims[i].key,
                    claim: &self.claims[i].claim,
                    affinity: &self.affinity[n],
                    slot: Some(n),
                })
                .collect();
        }
        self.pending
            .iter()
            .enumerate()
            .filter(|&(n, _)| Self::takes_part(variants, n))
            .map(|(n, &i)| {
                let variant = variants.get(n).and_then(Option::as_ref);
                ClaimInput {
                    key: &self.claims[i].key,
                    claim: variant.map_or(&self.claims[i].claim, |v| &v.claim),
                    affinity: trimmed
                        .get(n)
                        .and_then(Option::as_ref)
                        .unwrap_or(&self.affinity[n]),
                    slot: variant.is_none().then_some(n),
                }
            })
            .collect()
    }

    /// The position in `pending` of each of [`Cycle::claim_inputs`].
    pub(crate) fn positions(&self, variants: &[Option<crate::extended::NodeVariant>]) -> Vec<usize> {
        (0..self.pending.len())
            .filter(|&n| Self::takes_part(variants, n))
            .collect()
    }
}

/// One claim of the pod in the current cycle.
#[derive(Clone, Debug)]
pub(crate) struct CycleClaim {
    pub(crate) key: String,
    pub(crate) claim: ResourceClaim,
    /// Generated from a template in this cycle (created on bind).
    pub(crate) generated_for: Option<String>,
    /// For the KEP-5004 extended-resource claim: which request serves which container resource.
    pub(crate) extended: Vec<crate::model::ContainerExtendedResourceRequest>,
}

/// What PreFilter prepared for one pod: its claims, the pending ones with their affinity
/// outcomes, the allocator's per-cycle caches; and Filter's results per node, which the plugin
/// writes after each [`Cycle::filter`] (itself `&self`).
pub(crate) struct Cycle {
    pub(crate) pod: String,
    pub(crate) status: Status,
    /// Why an allocated claim of the pod cannot be used on any node (a binding failure
    /// condition of one of its devices holds): Filter's reason on every node.
    pub(crate) unusable: Option<String>,
    pub(crate) claims: Vec<CycleClaim>,
    /// Indexes into `claims` of the claims that need allocation.
    pub(crate) pending: Vec<usize>,
    pub(crate) affinity: Vec<ClaimAffinity>,
    /// Whether a pending claim is the KEP-5004 special claim (whose requests vary per node).
    pub(crate) extended: bool,
    /// Filter's results by node id ([`crate::state::Nodes`]).
    pub(crate) nodes: NodeResults,
    /// The nodes Score normalises over and their rank range: set by PreScore, or at the first
    /// Score without PreScore (every node that passed Filter; cleared by a later Filter).
    pub(crate) scoring: Option<Scoring>,
    /// Some result of `nodes` is marked as named by PreScore ([`NodeResult::named`]).
    pub(crate) any_named: bool,
    /// The allocator's per-cycle caches (what each pending request wants per applicable
    /// extractor set, compiled selectors). The claims' outcomes and the extractors are fixed for
    /// the cycle (a slice change ends it); a DeviceClass change drops the cache.
    pub(crate) cache: crate::allocator::CycleCache,
}

/// See [`Cycle::scoring`].
pub(crate) struct Scoring {
    /// PreScore named the nodes to normalise over (each marked [`NodeResult::named`]); false:
    /// every node that passed Filter.
    pub(crate) named: bool,
    /// Lowest and highest rank among them.
    pub(crate) min: u32,
    pub(crate) max: u32,
}
