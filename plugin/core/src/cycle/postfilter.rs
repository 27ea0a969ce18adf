//! PostFilter: when no node fits, the allocated claim of the pod to deallocate, as upstream's
//! DynamicResources PostFilter picks it.

use super::Cycle;
use crate::node_selector;
use crate::state::ClusterState;
use crate::status::Status;

/// PostFilter's answer when no node fits the cycle's pod: the status to return, and the claim
/// whose allocation the host must clear (`status.allocation`, `status.reservedFor` and
/// `status.devices`) so that the next attempt can allocate it again, as upstream's
/// DynamicResources PostFilter does.
#[derive(Clone, Debug, PartialEq)]
pub struct PostFilter {
    /// Always `Unschedulable`: PostFilter never makes the pod fit in this cycle.
    pub status: Status,
    /// The claim to deallocate (`namespace/name`), with the `metadata.resourceVersion` the plugin
    /// saw, so that the host can refuse a claim that changed since.
    pub deallocate: Option<(String, String)>,
}

impl Cycle {
    /// PostFilter's choice for `pod` after no node passed Filter: an allocated claim of the pod
    /// unavailable on some node Filtered in this cycle that no other pod uses (see
    /// [`crate::plugin::Plugin::postfilter`]).
    pub(crate) fn postfilter(&self, state: &ClusterState, pod: &str) -> PostFilter {
        let unschedulable = |reason: &str, deallocate| PostFilter {
            status: Status::unschedulable(reason),
            deallocate,
        };
        let cycle = self;
        if cycle.pod != pod {
            return PostFilter {
                status: Status::error(format!(
                    "postfilter for pod {pod}, but the current cycle is for pod {}",
                    cycle.pod
                )),
                deallocate: None,
            };
        }
        if cycle.claims.is_empty() {
            return unschedulable("no new claims to deallocate", None);
        }
        let uid = state.pods.get(pod).map(|p| p.metadata.uid.as_str()).unwrap_or("");
        for c in &cycle.claims {
            if !c.extended.is_empty() {
                continue;
            }
            let status = &c.claim.status;
            let Some(allocation) = &status.allocation else {
                continue;
            };
            let timed_out = state.now.is_some_and(|now| {
                status
                    .binding_timed_out(now, state.config.binding_timeout_seconds)
                    .is_some()
            });
            let unavailable = status.binding_failure().is_some()
                || timed_out
                || allocation.node_selector.as_ref().is_some_and(|sel| {
                    cycle.nodes.ids().any(|id| {
                        state
                            .nodes
                            .by_id(id)
                            .is_some_and(|(_, node)| matches!(node_selector::matches(sel, node), Ok(false)))
                    })
                });
            let unused = match status.reserved_for.as_slice() {
                [] => true,
                [only] => !uid.is_empty() && only.uid == uid,
                _ => false,
            };
            if unavailable && unused {
                return unschedulable(
                    "deallocation of ResourceClaim completed",
                    Some((c.key.clone(), c.claim.metadata.resource_version.to_string())),
                );
            }
        }
        unschedulable("still not schedulable", None)
    }
}
