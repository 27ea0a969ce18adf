//! PreBind's wait for binding conditions (KEP-5007). After Bind has recorded the pod's
//! allocations, a device with binding conditions may not be used until a driver reports each of
//! them `True` in the claim's `status.devices[].conditions`. As upstream's DynamicResources
//! PreBind, the plugin checks the pod's claims at once and then every [`POLL_SECONDS`]:
//!
//! - every binding condition of every allocated device is `True` (or none has any): PreBind
//!   succeeds;
//! - a binding failure condition is `True`: Error `claim <name> binding failed: ...`;
//! - a claim is not ready and its `allocationTimestamp` is more than `bindingTimeoutSeconds` ago:
//!   Error `claim <name> binding timeout`;
//! - the wait itself has lasted `bindingTimeoutSeconds`: Error `device binding timeout`.
//!
//! The caller owns the waiting ([`Plugin::binding_poll`] says how long, the host sleeps or
//! advances its clock, the caller applies what changed and sets the time) and, after an Error,
//! [`Plugin::unbind`] takes back what Bind recorded in the plugin's state, as the framework's
//! Unreserve does upstream: the pod leaves the claims' `status.reservedFor`, the allocations stay.
//! The next cycle's Filter then finds the claim failed or timed out and PostFilter deallocates it.
//!
//! [`Plugin::binding_poll`]: crate::Plugin::binding_poll
//! [`Plugin::unbind`]: crate::Plugin::unbind

use crate::model::{Pod, ResourceClaim};
use crate::state::ClusterState;
use crate::status::Status;

/// Seconds between two checks of the binding conditions (upstream's poll interval).
pub const POLL_SECONDS: u32 = 5;

/// What one check of a pod's binding conditions found.
#[derive(Clone, Debug, PartialEq)]
pub enum BindingPoll {
    /// The pod may be bound: no allocated device waits for a binding condition.
    Ready,
    /// Check again after this many seconds, with the changes made meanwhile and the new time.
    Wait(u32),
    /// PreBind fails with this `Error` status; the caller then calls [`crate::Plugin::unbind`].
    Failed(Status),
}

/// The `namespace/name` keys of the claims `pod` uses, as Bind recorded them: its direct claims,
/// those generated from templates (named in `status.resourceClaimStatuses`, or `<pod>-<entry>`)
/// and its KEP-5004 extended-resource claim.
pub(crate) fn claim_keys(pod: &Pod) -> Vec<String> {
    let ns = &pod.metadata.namespace;
    let mut keys: Vec<String> = pod
        .spec
        .resource_claims
        .iter()
        .filter_map(
            |entry| match (&entry.resource_claim_name, &entry.resource_claim_template_name) {
                (Some(name), _) => Some(name.to_string()),
                (None, Some(_)) => {
                    let status = pod
                        .status
                        .resource_claim_statuses
                        .iter()
                        .find(|s| s.name == entry.name);
                    match status {
                        Some(s) => s.resource_claim_name.clone(),
                        None => Some(format!("{}-{}", pod.metadata.name, entry.name)),
                    }
                }
                (None, None) => None,
            },
        )
        .chain(
            pod.status
                .extended_resource_claim_status
                .iter()
                .map(|s| s.resource_claim_name.clone()),
        )
        .map(|name| format!("{ns}/{name}"))
        .collect();
    keys.sort();
    keys.dedup();
    keys
}

/// Upstream's readiness of one claim: `Ok(true)` when each allocated device with binding
/// conditions reports all of them `True` and none of its binding failure conditions `True`;
/// `Err` names the failure condition that is `True`.
fn claim_ready(claim: &ResourceClaim) -> Result<bool, String> {
    let Some(allocation) = &claim.status.allocation else {
        return Ok(false);
    };
    for r in &allocation.devices.results {
        if r.binding_conditions.is_empty() {
            continue;
        }
        let Some(device) = claim.status.devices.iter().find(|d| {
            d.driver == r.driver && d.pool == r.pool && d.device == r.device && d.share_id == r.share_id
        }) else {
            return Ok(false);
        };
        let is_true = |t: &String| {
            device
                .conditions
                .iter()
                .find(|c| &c.type_ == t && c.status == "True")
        };
        if let Some(failed) = r.binding_failure_conditions.iter().find_map(is_true) {
            return Err(format!(
                "claim {} binding failed: reason={}, message={:?}",
                claim.metadata.name, failed.reason, failed.message
            ));
        }
        if !r.binding_conditions.iter().all(|t| is_true(t).is_some()) {
            return Ok(false);
        }
    }
    Ok(true)
}

/// Check number `polls` (0 for the first, made at once after Bind) of `pod`'s binding
/// conditions. The wait ends after `bindingTimeoutSeconds / POLL_SECONDS` waits whatever the
/// clock says, so a host whose clock does not move still ends it.
pub(crate) fn poll(state: &ClusterState, pod_key: &str, polls: u32) -> BindingPoll {
    let Some(pod) = state.pods.get(pod_key) else {
        return BindingPoll::Failed(Status::error(format!(
            "pod {pod_key} was deleted while waiting for binding conditions"
        )));
    };
    let timeout = state.config.binding_timeout_seconds;
    let mut ready = true;
    for key in claim_keys(pod) {
        let Some(claim) = state.claims.get(&key) else {
            return BindingPoll::Failed(Status::error(format!(
                "resource claim {key} was deleted while waiting for binding conditions"
            )));
        };
        match claim_ready(claim) {
            Err(why) => return BindingPoll::Failed(Status::error(why)),
            Ok(true) => {}
            Ok(false) => {
                let timed_out = state
                    .now
                    .is_some_and(|now| claim.status.binding_timed_out(now, timeout).is_some());
                if timed_out {
                    return BindingPoll::Failed(Status::error(format!(
                        "claim {} binding timeout",
                        claim.metadata.name
                    )));
                }
                ready = false;
            }
        }
    }
    if ready {
        BindingPoll::Ready
    } else if u64::from(polls + 1) * u64::from(POLL_SECONDS) > timeout {
        BindingPoll::Failed(Status::error("device binding timeout"))
    } else {
        BindingPoll::Wait(POLL_SECONDS)
    }
}

/// Takes back what Bind recorded for `pod` after its PreBind failed: the pod leaves
/// `status.reservedFor` of its claims (the allocations stay) and is no longer bound to a node.
/// Returns the claims it left.
pub(crate) fn unbind(state: &mut ClusterState, pod_key: &str) -> Vec<String> {
    let Some(pod) = state.pods.get_mut(pod_key) else {
        return Vec::new();
    };
    pod.spec.node_name.clear();
    let uid = pod.metadata.uid.clone();
    let keys = claim_keys(pod);
    let mut left = Vec::new();
    for key in keys {
        let reserved = state
            .claims
            .get(&key)
            .is_some_and(|c| c.status.reserved_for.iter().any(|r| r.uid == uid));
        if !reserved || uid.is_empty() {
            continue;
        }
        let mut claim = state.claims.remove(&key).expect("checked above");
        claim.status.reserved_for.retain(|r| r.uid != uid);
        state.claims.insert(key.clone(), claim);
        left.push(key);
    }
    left
}
