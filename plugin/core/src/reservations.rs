//! Reserve, Unreserve and Bind: the in-flight pods. Reserve commits the allocation Filter found
//! on the chosen node (re-checked against what changed since) as in flight in the
//! [`ClusterState`]; Unreserve takes it back; Bind (what PreBind writing `status.allocation`
//! does) moves it to the stored claims and sets the pod's node. Reservations are kept per pod,
//! apart from the current cycle: pod A's binding cycle may run while pod B's scheduling cycle is
//! in progress.

use crate::hashing::{FxHashMap as HashMap, FxHashSet as HashSet};
use std::collections::BTreeMap;

use crate::affinity;
use crate::allocator::{self, ClaimResult};
use crate::counters::CounterState;
use crate::cycle::Cycle;
use crate::index::DevIdx;
use crate::model::AllocationResult;
use crate::model::{
    Pod, PodExtendedResourceClaimStatus, PodResourceClaimStatus, ResourceClaimConsumerReference,
};
use crate::quantity::Quantity;
use crate::state::{ClusterState, Derived};
use crate::status::Status;

/// A pod's in-flight reservation: made by Reserve, ended by Bind or Unreserve. Kept per pod,
/// apart from the current cycle, so that the next pod's cycle never disturbs it.
#[derive(Clone, Debug)]
struct Reservation {
    /// The pod's UID at Reserve (empty when the pod has none): a recreated pod with the same
    /// name is not the reserved one.
    uid: String,
    node: String,
    allocations: Vec<ClaimAllocation>,
    /// Names of the claims generated from templates for this pod (created on bind).
    generated: Vec<String>,
    /// The pod's `status.extendedResourceClaimStatus` for its special extended-resource claim
    /// (KEP-5004), written on bind.
    extended: Option<crate::model::PodExtendedResourceClaimStatus>,
}

/// The allocation chosen for one claim of the pod.
#[derive(Clone, Debug, PartialEq)]
pub struct ClaimAllocation {
    /// `namespace/name` of the claim.
    pub claim: String,
    /// What PreBind writes to `status.allocation`.
    pub allocation: AllocationResult,
}

/// The in-flight reservations by pod key (`namespace/name`).
#[derive(Default)]
pub(crate) struct Reservations(BTreeMap<String, Reservation>);

impl Reservations {
    /// Whether `pod` holds a reservation.
    pub(crate) fn contains(&self, pod: &str) -> bool {
        self.0.contains_key(pod)
    }

    /// The node `pod` is reserved on.
    pub(crate) fn node(&self, pod: &str) -> Option<&str> {
        self.0.get(pod).map(|r| r.node.as_str())
    }

    /// Reserve: commits the allocation Filter computed for `node` as in-flight.
    pub(crate) fn reserve(
        &mut self,
        state: &mut ClusterState,
        cycle: &Cycle,
        id: Option<u32>,
        node: &str,
    ) -> Result<Vec<ClaimAllocation>, Status> {
        if self.0.contains_key(&cycle.pod) {
            return Err(Status::error(format!(
                "pod {}: reserve called twice in one cycle",
                cycle.pod
            )));
        }
        let r = id
            .and_then(|id| cycle.nodes.get(id))
            .ok_or_else(|| Status::error(format!("reserve on node {node} called before filter")))?;
        if !r.status.is_success() {
            return Err(Status::error(format!(
                "reserve on node {node} which did not pass filter"
            )));
        }
        let result = cycle.materialize(state, node, r)?;
        let variants = r.variants.clone();
        let variant = |n: usize| variants.get(n).and_then(Option::as_ref);
        let pod_key = cycle.pod.clone();
        // Re-check against state that may have changed since Filter (no second CEL pass).
        let d = state
            .derived
            .as_ref()
            .ok_or_else(|| Status::error("internal: slice index missing"))?;
        let mut result = result;
        for (cr, &i) in result.iter_mut().zip(&cycle.pending) {
            cr.assign_share_ids(&cycle.claims[i].key, &d.index);
        }
        let locks = state.lock_view(d);
        for cr in &result {
            for (ch, res) in cr.choices.iter().zip(&cr.allocation.devices.results) {
                let entry = d.index.device(ch.dev);
                let admin = res.admin_access == Some(true);
                if !entry.allow_multiple && !admin && state.allocated.dedicated.contains_key(&entry.key) {
                    return Err(Status::unschedulable(format!(
                        "{}: allocated to another claim since filter",
                        entry.device.name
                    )));
                }
                if let Some(w) = &ch.affinity
                    && let Err(why) = locks.lock(ch.dev).admits(w)
                {
                    return Err(Status::unschedulable(format!(
                        "{}: {why} (changed since filter)",
                        entry.device.name
                    )));
                }
            }
        }
        Self::recheck_capacity(state, d, &result)?;
        let pod = state.pods.get(&pod_key).cloned().unwrap_or_default();
        let consumer = consumer(&pod);
        let generated = cycle
            .claims
            .iter()
            .filter(|c| c.generated_for.is_some())
            .map(|c| c.claim.metadata.name.to_string())
            .collect();
        // KEP-5004: on a node that serves some resources through a device plugin, the status
        // maps only the others, and with none left there is no special claim and no status.
        let extended = cycle
            .claims
            .iter()
            .enumerate()
            .find(|(_, c)| !c.extended.is_empty())
            .and_then(|(i, c)| {
                let mappings = match cycle.pending.iter().position(|&p| p == i).and_then(variant) {
                    Some(v) => v.mappings.clone(),
                    None => c.extended.clone(),
                };
                (!mappings.is_empty()).then(|| PodExtendedResourceClaimStatus {
                    request_mappings: mappings,
                    resource_claim_name: c.claim.metadata.name.to_string(),
                })
            });
        let mut out = Vec::new();
        let mut staged = Vec::new();
        for (n, &i) in cycle.pending.iter().enumerate() {
            let cc = &cycle.claims[i];
            let cr = &result[n];
            let mut claim = match variant(n) {
                Some(v) if v.claim.spec.devices.requests.is_empty() => continue,
                Some(v) => v.claim.clone(),
                None => cc.claim.clone(),
            };
            claim.status.allocation = Some(cr.allocation.clone());
            if !claim
                .status
                .reserved_for
                .iter()
                .any(|c| c.uid == consumer.uid && c.name == consumer.name)
            {
                claim.status.reserved_for.push(consumer.clone());
            }
            for (ch, res) in cr.choices.iter().zip(&cr.allocation.devices.results) {
                if let Some(v) = &ch.affinity {
                    let key = d.index.device(ch.dev).key.clone();
                    let ids = d
                        .extractors
                        .applicable(&d.index, &state.cel, ch.dev)
                        .unwrap_or(&[]);
                    let fingerprint = affinity::fingerprint(&d.extractors, ids);
                    staged.push((
                        cc.key.clone(),
                        res.request.to_string(),
                        key,
                        (fingerprint, v.clone()),
                    ));
                }
            }
            out.push(ClaimAllocation {
                claim: cc.key.clone(),
                allocation: cr.allocation.clone(),
            });
            state.inflight.insert(cc.key.clone(), Box::new(claim));
        }
        for (claim, request, device, v) in staged {
            state.known_values.insert(&claim, request, device, v);
        }
        let keys: Vec<String> = out.iter().map(|c| c.claim.clone()).collect();
        for k in &keys {
            let claim = state.inflight.get(k).cloned().expect("just inserted");
            state.contribute(k, &claim, true);
        }
        self.0.insert(
            pod_key,
            Reservation {
                uid: pod.metadata.uid.clone(),
                node: node.to_string(),
                allocations: out.clone(),
                generated,
                extended,
            },
        );
        Ok(out)
    }

    /// Reserve's re-check of consumable capacity and counters against the current state: another
    /// pod may have taken the last slot or counter since Filter. The error names the device and
    /// the capacity or counter set.
    fn recheck_capacity(state: &ClusterState, d: &Derived, result: &[ClaimResult]) -> Result<(), Status> {
        let mut adding: HashMap<DevIdx, BTreeMap<String, Quantity>> = HashMap::default();
        let mut counters = CounterState::default();
        let mut counted: HashSet<DevIdx> = HashSet::default();
        for cr in result {
            for (ch, res) in cr.choices.iter().zip(&cr.allocation.devices.results) {
                if res.admin_access == Some(true) {
                    continue;
                }
                let entry = d.index.device(ch.dev);
                if let Some(consumed) = &res.consumed_capacity {
                    let slot = adding.entry(ch.dev).or_default();
                    let allocated = state.allocated.capacity.get(&entry.key);
                    for (name, q) in consumed {
                        let cur = slot.entry(name.clone()).or_insert_with(|| Quantity::from_i64(0));
                        *cur = cur.checked_add(q).unwrap_or_else(|| cur.clone());
                        let Some(cap) = entry.device.capacity.get(name) else {
                            continue;
                        };
                        let total = match allocated.and_then(|m| m.get(name)) {
                            Some(a) => cur.checked_add(a),
                            None => Some(cur.clone()),
                        };
                        if total.as_ref().is_none_or(|t| *t > cap.value) {
                            return Err(Status::unschedulable(format!(
                                "{}: capacity {name} of {} is no longer available (changed since filter)",
                                entry.device.name, cap.value
                            )));
                        }
                    }
                }
                let fresh = !state.allocated.is_allocated(&entry.key) && counted.insert(ch.dev);
                if fresh && !entry.device.consumes_counters.is_empty() {
                    if !counters.has_pool(entry.pool) {
                        allocator::init_pool_counters(&mut counters, &d.index, &d.uses, entry.pool);
                    }
                    if !counters.try_consume(entry.pool, &entry.device.consumes_counters) {
                        let sets: Vec<&str> = entry
                            .device
                            .consumes_counters
                            .iter()
                            .map(|c| c.counter_set.as_str())
                            .collect();
                        return Err(Status::unschedulable(format!(
                            "{}: counters of counter set {} are no longer available (changed since filter)",
                            entry.device.name,
                            sets.join(", ")
                        )));
                    }
                }
            }
        }
        Ok(())
    }

    /// Unreserve: drops the in-flight allocation of `pod` (`namespace/name`) reserved on `node`
    /// (empty = whichever node). Other pods' reservations are untouched.
    ///
    /// A pod without a reservation is a no-op that is reported as an `Error` status naming the pod;
    /// so is a node other than the reserved one (the reservation is then kept).
    pub(crate) fn unreserve(
        &mut self,
        state: &mut ClusterState,
        pod: &str,
        node: &str,
    ) -> Result<(), Status> {
        self.reservation(pod, node, "unreserve")?;
        self.release(state, pod);
        Ok(())
    }

    /// The reservation of `pod` on `node` (empty = any), or an error naming the pod.
    fn reservation(&self, pod: &str, node: &str, what: &str) -> Result<&Reservation, Status> {
        let r = self
            .0
            .get(pod)
            .ok_or_else(|| Status::error(format!("pod {pod}: {what} called without a successful reserve")))?;
        if !node.is_empty() && r.node != node {
            return Err(Status::error(format!(
                "pod {pod}: {what} on node {node}, but the pod was reserved on {}",
                r.node
            )));
        }
        Ok(r)
    }

    /// Drops a pod's reservation and its in-flight contributions.
    pub(crate) fn release(&mut self, state: &mut ClusterState, pod: &str) {
        let Some(r) = self.0.remove(pod) else {
            return;
        };
        for a in &r.allocations {
            if let Some(claim) = state.inflight.remove(&a.claim) {
                state.contribute(&a.claim, &claim, false);
            }
            state.known_values.remove_claim(&a.claim);
            // The stored object (updated by events meanwhile) contributes again.
            if let Some(stored) = state.claims.get(&a.claim).cloned() {
                state.contribute(&a.claim, &stored, true);
            }
        }
    }

    /// Bind (PreBind) for `pod` (`namespace/name`) on `node`: records its reserved allocation in
    /// the claims' status and the pod's node. Works while another pod's cycle is in progress; a
    /// pod without a reservation (or recreated since Reserve) gets an `Error` status naming it.
    pub(crate) fn bind(
        &mut self,
        state: &mut ClusterState,
        pod: &str,
        node: &str,
    ) -> Result<Vec<ClaimAllocation>, Status> {
        if node.is_empty() {
            return Err(Status::error(format!("pod {pod}: bind without a node name")));
        }
        let r = self.reservation(pod, node, "bind")?;
        if let Some(p) = state.pods.get(pod)
            && p.metadata.uid != r.uid
        {
            return Err(Status::error(format!(
                "pod {pod}: recreated since reserve (uid {} was reserved, the pod is now uid {})",
                r.uid, p.metadata.uid
            )));
        }
        for a in &r.allocations {
            let generated = r.generated.iter().any(|name| object_key_name(&a.claim) == name);
            if !generated && !state.claims.contains_key(&a.claim) {
                return Err(Status::error(format!(
                    "pod {pod}: resource claim {} was deleted since reserve",
                    a.claim
                )));
            }
        }
        let mut r = self.0.remove(pod).expect("checked above");
        // As upstream's PreBind: an allocation whose devices have binding conditions records
        // when it was made, for the binding timeout.
        if let Some(now) = state.now {
            let stamp = crate::time::format_rfc3339(now);
            for a in &mut r.allocations {
                let waits = a
                    .allocation
                    .devices
                    .results
                    .iter()
                    .any(|d| !d.binding_conditions.is_empty());
                if waits && a.allocation.allocation_timestamp.is_none() {
                    a.allocation.allocation_timestamp = Some(stamp.clone());
                    if let Some(claim) = state.inflight.get_mut(&a.claim)
                        && let Some(allocation) = &mut claim.status.allocation
                    {
                        allocation.allocation_timestamp = Some(stamp.clone());
                    }
                }
            }
        }
        for a in &r.allocations {
            if let Some(mut claim) = state.inflight.remove(&a.claim) {
                // Moves from in-flight to stored: contributions stay the same (the stored object
                // did not contribute while the claim was in flight). Metadata events that
                // arrived meanwhile are kept.
                if let Some(stored) = state.claims.get(&a.claim) {
                    claim.metadata = stored.metadata.clone();
                }
                if let Ok(v) = claim.metadata.resource_version.parse::<u64>() {
                    state.bound_at.insert(a.claim.clone(), v);
                }
                state.claims.insert(a.claim.clone(), claim);
            }
        }
        let mut written = r.allocations;
        if let Some(p) = state.pods.get_mut(pod) {
            p.spec.node_name = node.to_string();
            if r.extended.is_some() {
                p.status.extended_resource_claim_status = r.extended.clone();
            }
            let entries: Vec<String> = p.spec.resource_claims.iter().map(|e| e.name.clone()).collect();
            for name in &r.generated {
                if let Some(entry) = entries
                    .iter()
                    .find(|e| format!("{}-{e}", p.metadata.name) == *name)
                    && !p.status.resource_claim_statuses.iter().any(|s| s.name == *entry)
                {
                    p.status.resource_claim_statuses.push(PodResourceClaimStatus {
                        name: entry.clone(),
                        resource_claim_name: Some(name.clone()),
                    });
                }
            }
            let consumer = consumer(p);
            let keys = crate::binding::claim_keys(p);
            Self::reserve_allocated(state, &keys, &consumer, &mut written);
        }
        Ok(written)
    }

    /// As upstream's PreBind reserves every claim of the pod not yet reserved for it: the pod's
    /// claims that were allocated before its cycle get the pod in `status.reservedFor` too, and
    /// are returned with their allocation unchanged, for the host to write the consumer. A claim
    /// another pod holds in flight is left to that pod's Bind.
    fn reserve_allocated(
        state: &mut ClusterState,
        keys: &[String],
        consumer: &ResourceClaimConsumerReference,
        written: &mut Vec<ClaimAllocation>,
    ) {
        for key in keys {
            if consumer.uid.is_empty()
                || written.iter().any(|a| a.claim == *key)
                || state.inflight.contains_key(key)
            {
                continue;
            }
            let Some(allocation) = state.claims.get(key).and_then(|c| {
                let reserved = c.status.reserved_for.iter().any(|r| r.uid == consumer.uid);
                (!reserved).then(|| c.status.allocation.clone()).flatten()
            }) else {
                continue;
            };
            let mut claim = state.claims.remove(key).expect("read above");
            claim.status.reserved_for.push(consumer.clone());
            state.claims.insert(key.clone(), claim);
            written.push(ClaimAllocation {
                claim: key.clone(),
                allocation,
            });
        }
    }
}

/// The pod as a claim's consumer in `status.reservedFor`.
fn consumer(pod: &Pod) -> ResourceClaimConsumerReference {
    ResourceClaimConsumerReference {
        api_group: crate::model::Name::default(),
        resource: "pods".into(),
        name: pod.metadata.name.clone(),
        uid: pod.metadata.uid.clone(),
    }
}

/// The name part of a `namespace/name` key.
fn object_key_name(key: &str) -> &str {
    key.rsplit_once('/').map_or(key, |(_, n)| n)
}
