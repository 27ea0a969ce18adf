//! The extension points of one scheduling cycle: PreFilter, Filter, Score, Reserve, Unreserve, Bind.

use crate::{FxHashMap as HashMap, FxHashSet as HashSet};
use std::cell::Cell;
use std::collections::{BTreeMap, BTreeSet};
use std::rc::Rc;

use super::{
    ClaimAllocation, Cycle, CycleClaim, NodeMemo, NodeResult, Plugin, PostFilter, Reservation, Scoring,
};
use crate::affinity::{self, ExtId, Extractors, Outcome};
use crate::allocator::{self, AllocError, AllocOutcome, ClaimAffinity, ClaimInput, ClaimResult};
use crate::cel::CelCache;
use crate::counters::CounterState;
use crate::index::{DevIdx, Index};
use crate::model::{
    DeviceClass, DeviceSelector, OwnerReference, PodExtendedResourceClaimStatus, PodResourceClaimStatus,
    ResourceClaim, ResourceClaimConsumerReference,
};
use crate::node_selector;
use crate::object::{Kind, object_key};
use crate::quantity::Quantity;
use crate::status::Status;

impl Cycle {
    /// Whether a pending claim is a KEP-5004 special claim (its requests may vary per node).
    fn any_extended(claims: &[CycleClaim], pending: &[usize]) -> bool {
        pending.iter().any(|&i| !claims[i].extended.is_empty())
    }

    /// Per pending claim: the affinity outcomes of the node's variant's kept requests (`None`:
    /// the PreFilter outcomes apply). Empty when `variants` is.
    fn trimmed_affinity(
        &self,
        variants: &[Option<super::extended::NodeVariant>],
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
    fn takes_part(variants: &[Option<super::extended::NodeVariant>], n: usize) -> bool {
        variants
            .get(n)
            .and_then(Option::as_ref)
            .is_none_or(|v| !v.claim.spec.devices.requests.is_empty())
    }

    /// The allocator's claims for a node ([`Cycle::positions`] gives each one's position in
    /// `pending`).
    fn claim_inputs<'c>(
        &'c self,
        variants: &'c [Option<super::extended::NodeVariant>],
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
    fn positions(&self, variants: &[Option<super::extended::NodeVariant>]) -> Vec<usize> {
        (0..self.pending.len())
            .filter(|&n| Self::takes_part(variants, n))
            .collect()
    }
}

impl Plugin {
    /// PreFilter for the pod `namespace/name`: resolves its claims and starts a cycle.
    ///
    /// Reservations of other pods (in their binding cycle) are left alone. A reservation the same
    /// pod still holds is dropped first, as the scheduler's Unreserve would: a pod is scheduled
    /// again only after its previous attempt ended.
    pub fn prefilter(&mut self, pod: &str) -> Status {
        if self.reservations.contains_key(pod) {
            self.release(pod);
        }
        // The previous cycle's result slots, written over by this cycle's Filter.
        let mut results = match self.cycle.take() {
            Some(c) => c.nodes,
            None => std::mem::take(&mut self.spare_results),
        };
        results.next_cycle(self.nodes.id_bound());
        let (status, mut cycle) = match self.prepare(pod) {
            Ok(c) => (Status::success(), c),
            Err(s) => {
                let c = Cycle {
                    pod: pod.to_string(),
                    status: s.clone(),
                    unusable: None,
                    claims: Vec::new(),
                    pending: Vec::new(),
                    affinity: Vec::new(),
                    extended: false,
                    nodes: Default::default(),
                    scoring: None,
                    any_named: false,
                    cache: Default::default(),
                };
                (s, c)
            }
        };
        cycle.nodes = results;
        self.cycle = Some(cycle);
        status
    }

    fn prepare(&mut self, pod_key: &str) -> Result<Cycle, Status> {
        let pod = self
            .pods
            .get(pod_key)
            .ok_or_else(|| {
                Status::error(self.rejected.missing(Kind::Pod, pod_key, &format!("pod {pod_key}"), || {
                    format!(
                        "pod {pod_key} not found (or bound to a node: only pods without spec.nodeName are scheduled)"
                    )
                }))
            })?
            .clone();
        let ns = pod.metadata.namespace.clone();
        let mut claims = Vec::new();
        let mut unusable = None;
        for entry in &pod.spec.resource_claims {
            let (name, generated) = match (&entry.resource_claim_name, &entry.resource_claim_template_name) {
                (Some(n), None) => (n.clone(), None),
                (None, Some(t)) => {
                    match pod
                        .status
                        .resource_claim_statuses
                        .iter()
                        .find(|s| s.name == entry.name)
                    {
                        Some(st) => match &st.resource_claim_name {
                            Some(n) => (n.clone(), None),
                            None => continue,
                        },
                        None => (format!("{}-{}", pod.metadata.name, entry.name), Some(t.clone())),
                    }
                }
                _ => {
                    return Err(Status::unresolvable(format!(
                        "pod {pod_key}: spec.resourceClaims[{}]: exactly one of resourceClaimName and resourceClaimTemplateName must be set",
                        entry.name
                    )));
                }
            };
            let key = object_key(&ns, &name);
            // A claim another pod reserved is seen with its in-flight allocation.
            let stored = self.inflight.get(&key).or_else(|| self.claims.get(&key));
            let claim = match (stored, &generated) {
                (Some(c), _) => ResourceClaim::clone(c),
                (None, Some(template)) => {
                    let tkey = object_key(&ns, template);
                    let t = self.templates.get(&tkey).ok_or_else(|| {
                        let what = format!("resource claim template {tkey}");
                        Status::unresolvable(self.rejected.missing(
                            Kind::ResourceClaimTemplate,
                            &tkey,
                            &what,
                            || format!("{what} not found"),
                        ))
                    })?;
                    let mut metadata = t.spec.metadata.clone();
                    metadata.name = name.as_str().into();
                    metadata.namespace = ns.as_str().into();
                    metadata.owner_references = vec![OwnerReference {
                        api_version: "v1".into(),
                        kind: "Pod".into(),
                        name: pod.metadata.name.clone(),
                        uid: pod.metadata.uid.clone(),
                        controller: Some(true),
                    }];
                    ResourceClaim {
                        metadata,
                        spec: t.spec.spec.clone(),
                        ..Default::default()
                    }
                }
                (None, None) => {
                    return Err(Status::unresolvable(self.rejected.missing(
                        Kind::ResourceClaim,
                        &key,
                        &format!("resource claim {key}"),
                        || format!("waiting for resource claim {key} to be created"),
                    )));
                }
            };
            // A claim named in `status.resourceClaimStatuses` must have been generated for this
            // pod (upstream `resourceclaim.IsForPod`: the pod is its controlling owner).
            if entry.resource_claim_template_name.is_some()
                && generated.is_none()
                && !claim
                    .metadata
                    .owner_references
                    .iter()
                    .any(|o| o.controller == Some(true) && o.uid == pod.metadata.uid)
            {
                return Err(Status::unresolvable(format!(
                    "resource claim {key} was not created for pod {pod_key} (pod is not owner)"
                )));
            }
            if claim.metadata.deletion_timestamp.is_some() {
                return Err(Status::unresolvable(format!(
                    "resource claim {key} is being deleted"
                )));
            }
            // Upstream's PreFilter: a claim reserved for as many consumers as the API allows
            // cannot take this pod until one lets go.
            if claim.status.reserved_for.len() >= RESERVED_FOR_MAX
                && !claim
                    .status
                    .reserved_for
                    .iter()
                    .any(|r| r.uid == pod.metadata.uid)
            {
                return Err(Status::unschedulable(format!(
                    "resource claim {key} is in use: reserved for {} consumers, the most `status.reservedFor` holds",
                    claim.status.reserved_for.len()
                )));
            }
            // As upstream's Filter: such a claim is unavailable on every node, and PostFilter
            // may deallocate it.
            if unusable.is_none()
                && let Some(why) = claim.status.binding_failure().or_else(|| {
                    self.now.and_then(|now| {
                        claim
                            .status
                            .binding_timed_out(now, self.config.binding_timeout_seconds)
                    })
                })
            {
                unusable = Some(format!("resource claim {key} is not available: {why}"));
            }
            claims.push(CycleClaim {
                key,
                claim,
                generated_for: generated.map(|_| pod_key.to_string()),
                extended: Vec::new(),
            });
        }
        if let Some(special) = self.extended_claim(&pod, pod_key)? {
            claims.push(special);
        }
        let pending: Vec<usize> = (0..claims.len())
            .filter(|&i| claims[i].claim.status.allocation.is_none())
            .collect();
        for &i in &pending {
            let c = &claims[i];
            for r in &c.claim.spec.devices.requests {
                let classes = r
                    .exactly
                    .iter()
                    .map(|e| e.device_class_name.as_str())
                    .chain(r.first_available.iter().map(|s| s.device_class_name.as_str()));
                for class in classes {
                    if !self.classes.contains_key(class) {
                        let missing = self.rejected.missing(
                            Kind::DeviceClass,
                            class,
                            &format!("device class {class}"),
                            || format!("device class {class} not found"),
                        );
                        return Err(Status::unresolvable(format!(
                            "claim {}, request {}: {missing}",
                            c.key, r.name
                        )));
                    }
                }
            }
        }
        self.derived();
        let d = self.derived.as_ref().expect("built above");
        let mut affinity = Vec::with_capacity(pending.len());
        let mut candidates = Candidates {
            cel: &self.cel,
            index: &d.index,
            extractors: &d.extractors,
            classes: &self.classes,
            cache: &d.candidates,
        };
        for &i in &pending {
            affinity.push(claim_affinity(&mut candidates, &claims[i]).map_err(Status::unresolvable)?);
        }
        Ok(Cycle {
            pod: pod_key.to_string(),
            status: Status::success(),
            unusable,
            extended: Cycle::any_extended(&claims, &pending),
            claims,
            pending,
            affinity,
            // The previous cycle's slots, set by `prefilter`.
            nodes: Default::default(),
            scoring: None,
            any_named: false,
            cache: Default::default(),
        })
    }

    fn cycle(&self, what: &str) -> Result<&Cycle, Status> {
        self.cycle
            .as_ref()
            .ok_or_else(|| Status::error(format!("{what} called before prefilter")))
    }

    /// Filter for one node of the current cycle.
    pub fn filter(&mut self, node_name: &str) -> Status {
        let node = self.nodes.id(node_name);
        self.filter_found(node, node_name)
    }

    /// [`Plugin::filter`] for a caller that filters the same node names again and keeps a
    /// [`NodeMemo`] per name: the name is looked up only when nodes were added since
    /// `memo` was last used (with the same name).
    pub fn filter_remembered(&mut self, node_name: &str, memo: &Cell<NodeMemo>) -> Status {
        let node = self.nodes.id_remembered(node_name, memo);
        self.filter_found(node, node_name)
    }

    /// Filter for the node named `node_name`, found under id `node` (`None`: not known).
    fn filter_found(&mut self, node: Option<u32>, node_name: &str) -> Status {
        let result = self.compute(node.and_then(|id| self.nodes.by_id(id)), node_name);
        // A success has no reason: nothing to copy.
        let status = if result.status.reason.is_empty() {
            Status::new(result.status.code, String::new())
        } else {
            result.status.clone()
        };
        // A node the plugin does not know is not recorded: Score and Reserve name it themselves.
        if let Some(id) = node
            && let Some(c) = &mut self.cycle
        {
            // A node Filtered again keeps its place among the nodes PreScore named (`insert`).
            c.nodes.insert(id, result);
            if c.scoring.as_ref().is_some_and(|s| !s.named) {
                c.scoring = None;
            }
        }
        status
    }

    /// PostFilter for the cycle's pod after no node passed Filter: picks an allocated claim of
    /// the pod that was unavailable on at least one node Filtered in this cycle (its
    /// `status.allocation.nodeSelector` did not match, or a binding failure condition of one of
    /// its devices holds) and that no other pod uses (`status.reservedFor` is empty or holds
    /// only this pod), and asks for its deallocation. Upstream picks one such claim at random;
    /// this plugin takes the first in the pod's order, so that replays repeat.
    ///
    /// The plugin clears the claim's allocation in its own state at once (as [`Plugin::bind`]
    /// records an allocation), and the host writes the same to the API server.
    pub fn postfilter(&mut self, pod: &str) -> PostFilter {
        let answer = self.postfilter_choice(pod);
        if let Some((key, _)) = &answer.deallocate
            && let Some(stored) = self.claims.get(key)
        {
            let mut claim = stored.clone();
            claim.status.allocation = None;
            claim.status.reserved_for.clear();
            claim.status.devices.clear();
            self.upsert(crate::object::Object::ResourceClaim(claim));
        }
        answer
    }

    fn postfilter_choice(&self, pod: &str) -> PostFilter {
        let unschedulable = |reason: &str, deallocate| PostFilter {
            status: Status::unschedulable(reason),
            deallocate,
        };
        let cycle = match self.cycle("postfilter") {
            Ok(c) if c.pod == pod => c,
            Ok(c) => {
                return PostFilter {
                    status: Status::error(format!(
                        "postfilter for pod {pod}, but the current cycle is for pod {}",
                        c.pod
                    )),
                    deallocate: None,
                };
            }
            Err(status) => {
                return PostFilter {
                    status,
                    deallocate: None,
                };
            }
        };
        if cycle.claims.is_empty() {
            return unschedulable("no new claims to deallocate", None);
        }
        let uid = self.pods.get(pod).map(|p| p.metadata.uid.as_str()).unwrap_or("");
        for c in &cycle.claims {
            if !c.extended.is_empty() {
                continue;
            }
            let status = &c.claim.status;
            let Some(allocation) = &status.allocation else {
                continue;
            };
            let timed_out = self.now.is_some_and(|now| {
                status
                    .binding_timed_out(now, self.config.binding_timeout_seconds)
                    .is_some()
            });
            let unavailable = status.binding_failure().is_some()
                || timed_out
                || allocation.node_selector.as_ref().is_some_and(|sel| {
                    cycle.nodes.ids().any(|id| {
                        self.nodes
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

    /// Filter's result for the node named `node_name` (its id and object; `None`: not known).
    fn compute(&self, node: Option<(u32, &crate::model::Node)>, node_name: &str) -> NodeResult {
        let fail = |status: Status| NodeResult {
            status,
            allocation: None,
            variants: Vec::new(),
            rank: 0,
            named: false,
        };
        let cycle = match self.cycle("filter") {
            Ok(c) => c,
            Err(s) => return fail(s),
        };
        if !cycle.status.is_success() {
            return fail(cycle.status.clone());
        }
        let Some((id, node)) = node else {
            return fail(Status::unresolvable(self.rejected.missing(
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
        let Some(d) = self.derived.as_ref() else {
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
        let variants: Vec<Option<super::extended::NodeVariant>> = if cycle.extended {
            cycle
                .pending
                .iter()
                .map(|&i| {
                    let c = &cycle.claims[i];
                    super::extended::node_variant(&c.claim, &c.extended, node)
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
        let locks = self.lock_table(d, candidates);
        let on = self.node_input(d, &locks, node, (pools, candidates));
        let outcome = self.allocator((cycle, d), &inputs).allocate(&on);
        // The claims borrow `variants`, which the result keeps.
        drop(inputs);
        match outcome {
            Ok(AllocOutcome::Allocated(a)) => NodeResult {
                status: Status::success(),
                rank: node_rank(
                    a.prioritized_rank(),
                    if self.config.consolidate {
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
        (cycle, d): (&'a Cycle, &'a super::Derived),
        claims: &'a [ClaimInput<'a>],
    ) -> allocator::Allocator<'a> {
        allocator::Allocator {
            index: &d.index,
            extractors: &d.extractors,
            cel: &self.cel,
            classes: &self.classes,
            claims,
            consolidate: self.config.consolidate,
            selector_cache: &d.selector_cache,
            cycle_cache: &cycle.cache,
        }
    }

    /// What the allocator reads of one node.
    fn node_input<'a>(
        &'a self,
        d: &'a super::Derived,
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
    fn materialize(&self, node_name: &str, r: &NodeResult) -> Result<Vec<ClaimResult>, Status> {
        let cycle = self.cycle("reserve")?;
        let empty = || ClaimResult {
            allocation: Default::default(),
            choices: Vec::new(),
        };
        let mut out: Vec<ClaimResult> = cycle.pending.iter().map(|_| empty()).collect();
        let Some(allocation) = &r.allocation else {
            return Ok(out);
        };
        let d = self
            .derived
            .as_ref()
            .ok_or_else(|| Status::error("internal: slice index missing"))?;
        let (id, node) = self.nodes.get(node_name).ok_or_else(|| {
            Status::error(
                self.rejected
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
        let locks = self.lock_table(d, candidates);
        let on = self.node_input(d, &locks, node, (pools, candidates));
        let results = self
            .allocator((cycle, d), &inputs)
            .materialize(&on, allocation)
            .map_err(Status::error)?;
        for (cr, n) in results.into_iter().zip(positions) {
            out[n] = cr;
        }
        Ok(out)
    }

    /// PreScore: the feasible nodes of the cycle (those that passed every Filter plugin), over
    /// which [`Plugin::score`] normalises. Every node named must have passed this plugin's Filter.
    pub fn prescore<S: AsRef<str>>(&mut self, nodes: &[S]) -> Status {
        let ids = nodes.iter().map(|n| self.nodes.id(n.as_ref())).collect();
        match self.prescore_ranks(ids, |i| nodes[i].as_ref()) {
            Ok(..) => Status::success(),
            Err(s) => s,
        }
    }

    /// [`Plugin::prescore`] with `nodes`, then [`Plugin::score`] for each of them, in one pass:
    /// the scores in the order of `nodes`, or PreScore's status when it fails (after a PreScore
    /// that succeeded, Score succeeds on every node it named).
    pub fn prescore_scores<S: AsRef<str>>(&mut self, nodes: &[S]) -> Result<Vec<u32>, Status> {
        let ids = nodes.iter().map(|n| self.nodes.id(n.as_ref())).collect();
        self.scores_of(ids, |i| nodes[i].as_ref())
    }

    /// [`Plugin::prescore_scores`] for a caller that keeps a [`NodeMemo`] per node name, as
    /// [`Plugin::filter_remembered`] does: each name is looked up only when nodes were added
    /// since its memo was last used.
    pub fn prescore_scores_remembered(
        &mut self,
        nodes: &[(&str, &Cell<NodeMemo>)],
    ) -> Result<Vec<u32>, Status> {
        let ids = nodes
            .iter()
            .map(|(name, memo)| self.nodes.id_remembered(name, memo))
            .collect();
        self.scores_of(ids, |i| nodes[i].0)
    }

    /// The scores of [`Plugin::prescore_scores`] for the nodes with `ids` (`None`: not known),
    /// named by `name` in errors.
    fn scores_of<'n>(
        &mut self,
        ids: Vec<Option<u32>>,
        name: impl Fn(usize) -> &'n str,
    ) -> Result<Vec<u32>, Status> {
        let (ranks, min, max) = self.prescore_ranks(ids, name)?;
        Ok(ranks.into_iter().map(|r| normalize(r, min, max)).collect())
    }

    /// PreScore: the ranks of the nodes with `ids` (`None`: not known; `name` names them in
    /// errors), in order, with the lowest and highest of them (the range Score normalises over).
    fn prescore_ranks<'n>(
        &mut self,
        ids: Vec<Option<u32>>,
        name: impl Fn(usize) -> &'n str,
    ) -> Result<(Vec<u32>, u32, u32), Status> {
        let Some(cycle) = self.cycle.as_mut() else {
            return Err(Status::error("prescore called before prefilter"));
        };
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

    /// The raw sharing-affinity rank of a node that passed Filter in the current cycle (before
    /// normalisation; see [`Plugin::score`]).
    ///
    /// Per allocated device: 2 when it joins a device locked to compatible values (by an
    /// allocated claim, or tentatively by another request or claim of this pod earlier in the
    /// same allocation), 1 when it takes a clean affinity-gated device, 0 when it shares a device
    /// of an affinity pool that no extractor gates (unknown affinity). A device affinity cannot
    /// apply to is neutral: one of a pool without extractors, a dedicated (not
    /// multi-allocatable) device, or one allocated with admin access. Per request (KEP-4816's
    /// per-request pattern): `50 · Σ ranks / non-neutral devices`, so 100 = every device joins a
    /// lock, 50 = clean, 0 = unknown affinity; a request with only neutral devices adds 0. The
    /// node's rank is the sum over requests, so neutral requests never dilute the others.
    pub fn affinity_rank(&self, node: &str) -> Result<u32, Status> {
        Ok(self.passed(node, "affinity rank")?.rank % AFFINITY_SPAN)
    }

    /// The prioritized-list rank of a node that passed Filter in the current cycle: per
    /// `firstAvailable` request allocated there, `8 - i` for its `i`th subrequest, as upstream's
    /// DynamicResources Score ranks it.
    pub fn prioritized_rank(&self, node: &str) -> Result<u32, Status> {
        Ok(self.passed(node, "prioritized rank")?.rank / AFFINITY_SPAN)
    }

    fn passed(&self, node: &str, what: &str) -> Result<&NodeResult, Status> {
        let cycle = self.cycle(what)?;
        let r = self
            .nodes
            .id(node)
            .and_then(|id| cycle.nodes.get(id))
            .ok_or_else(|| Status::error(format!("{what} for node {node} called before filter")))?;
        if !r.status.is_success() {
            return Err(Status::error(format!(
                "{what} for node {node} which did not pass filter"
            )));
        }
        Ok(r)
    }

    /// Score (0..=100) for a node that passed Filter in the current cycle: its rank normalised
    /// over the feasible nodes as `(rank - min) · 100 / (max - min)` (KEP-4816's reference
    /// normalisation). The rank orders nodes first by [`Plugin::prioritized_rank`] (the claims'
    /// own order of preference, which upstream's DynamicResources scores: a node that gives a
    /// `firstAvailable` request an earlier subrequest wins, whatever the packing), then by
    /// [`Plugin::affinity_rank`] (sharing-affinity packing; not with `consolidate: false`). The
    /// feasible nodes are those named at [`Plugin::prescore`]; when PreScore was not called in
    /// this cycle, every node that passed this plugin's Filter (the same set when no other
    /// plugin filters). When all ranks are equal every node scores 0: the plugin then has no
    /// preference, and the choice is left to other plugins (and the replay's node-name
    /// tie-break).
    ///
    /// The plugin normalises inside Score rather than in a NormalizeScore step, so the KSWE guest
    /// needs no `normalizescore` export (whose upstream host reassigns scores by map order; see
    /// `docs/kswe-dra-extension.md`).
    pub fn score(&mut self, node: &str) -> Result<u32, Status> {
        let (rank, named) = self.passed(node, "score").map(|r| (r.rank, r.named))?;
        let cycle = self
            .cycle
            .as_mut()
            .ok_or_else(|| Status::error("score called before prefilter"))?;
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

    /// Reserve: commits the allocation Filter computed for `node` as in-flight.
    pub fn reserve(&mut self, node: &str) -> Result<Vec<ClaimAllocation>, Status> {
        let cycle = self.cycle("reserve")?;
        if self.reservations.contains_key(&cycle.pod) {
            return Err(Status::error(format!(
                "pod {}: reserve called twice in one cycle",
                cycle.pod
            )));
        }
        let r = self
            .nodes
            .id(node)
            .and_then(|id| cycle.nodes.get(id))
            .ok_or_else(|| Status::error(format!("reserve on node {node} called before filter")))?;
        if !r.status.is_success() {
            return Err(Status::error(format!(
                "reserve on node {node} which did not pass filter"
            )));
        }
        let result = self.materialize(node, r)?;
        let variants = r.variants.clone();
        let variant = |n: usize| variants.get(n).and_then(Option::as_ref);
        let pod_key = cycle.pod.clone();
        // Re-check against state that may have changed since Filter (no second CEL pass).
        let d = self
            .derived
            .as_ref()
            .ok_or_else(|| Status::error("internal: slice index missing"))?;
        let mut result = result;
        for (cr, &i) in result.iter_mut().zip(&cycle.pending) {
            cr.assign_share_ids(&cycle.claims[i].key, &d.index);
        }
        let locks = self.lock_view(d);
        for cr in &result {
            for (ch, res) in cr.choices.iter().zip(&cr.allocation.devices.results) {
                let entry = d.index.device(ch.dev);
                let admin = res.admin_access == Some(true);
                if !entry.allow_multiple && !admin && self.allocated.dedicated.contains_key(&entry.key) {
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
        self.recheck_capacity(d, &result)?;
        let pod = self.pods.get(&pod_key).cloned().unwrap_or_default();
        let consumer = ResourceClaimConsumerReference {
            api_group: crate::model::Name::default(),
            resource: "pods".into(),
            name: pod.metadata.name.clone(),
            uid: pod.metadata.uid.clone(),
        };
        let cycle = self.cycle.as_ref().expect("checked above");
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
                        .applicable(&d.index, &self.cel, ch.dev)
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
            self.inflight.insert(cc.key.clone(), Box::new(claim));
        }
        for (claim, request, device, v) in staged {
            self.known_values.insert(&claim, request, device, v);
        }
        let keys: Vec<String> = out.iter().map(|c| c.claim.clone()).collect();
        for k in &keys {
            let claim = self.inflight.get(k).cloned().expect("just inserted");
            self.contribute(k, &claim, true);
        }
        self.reservations.insert(
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
    fn recheck_capacity(&self, d: &super::Derived, result: &[ClaimResult]) -> Result<(), Status> {
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
                    let allocated = self.allocated.capacity.get(&entry.key);
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
                let fresh = !self.allocated.is_allocated(&entry.key) && counted.insert(ch.dev);
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
    pub fn unreserve(&mut self, pod: &str, node: &str) -> Result<(), Status> {
        self.reservation(pod, node, "unreserve")?;
        self.release(pod);
        Ok(())
    }

    /// The reservation of `pod` on `node` (empty = any), or an error naming the pod.
    fn reservation(&self, pod: &str, node: &str, what: &str) -> Result<&Reservation, Status> {
        let r = self
            .reservations
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
    fn release(&mut self, pod: &str) {
        let Some(r) = self.reservations.remove(pod) else {
            return;
        };
        for a in &r.allocations {
            if let Some(claim) = self.inflight.remove(&a.claim) {
                self.contribute(&a.claim, &claim, false);
            }
            self.known_values.remove_claim(&a.claim);
            // The stored object (updated by events meanwhile) contributes again.
            if let Some(stored) = self.claims.get(&a.claim).cloned() {
                self.contribute(&a.claim, &stored, true);
            }
        }
    }

    /// Bind (PreBind) for `pod` (`namespace/name`) on `node`: records its reserved allocation in
    /// the claims' status and the pod's node. Works while another pod's cycle is in progress; a
    /// pod without a reservation (or recreated since Reserve) gets an `Error` status naming it.
    pub fn bind(&mut self, pod: &str, node: &str) -> Result<Vec<ClaimAllocation>, Status> {
        if node.is_empty() {
            return Err(Status::error(format!("pod {pod}: bind without a node name")));
        }
        let r = self.reservation(pod, node, "bind")?;
        if let Some(p) = self.pods.get(pod)
            && p.metadata.uid != r.uid
        {
            return Err(Status::error(format!(
                "pod {pod}: recreated since reserve (uid {} was reserved, the pod is now uid {})",
                r.uid, p.metadata.uid
            )));
        }
        for a in &r.allocations {
            let generated = r.generated.iter().any(|name| object_key_name(&a.claim) == name);
            if !generated && !self.claims.contains_key(&a.claim) {
                return Err(Status::error(format!(
                    "pod {pod}: resource claim {} was deleted since reserve",
                    a.claim
                )));
            }
        }
        let mut r = self.reservations.remove(pod).expect("checked above");
        // As upstream's PreBind: an allocation whose devices have binding conditions records
        // when it was made, for the binding timeout.
        if let Some(now) = self.now {
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
                    if let Some(claim) = self.inflight.get_mut(&a.claim)
                        && let Some(allocation) = &mut claim.status.allocation
                    {
                        allocation.allocation_timestamp = Some(stamp.clone());
                    }
                }
            }
        }
        for a in &r.allocations {
            if let Some(mut claim) = self.inflight.remove(&a.claim) {
                // Moves from in-flight to stored: contributions stay the same (the stored object
                // did not contribute while the claim was in flight). Metadata events that
                // arrived meanwhile are kept.
                if let Some(stored) = self.claims.get(&a.claim) {
                    claim.metadata = stored.metadata.clone();
                }
                if let Ok(v) = claim.metadata.resource_version.parse::<u64>() {
                    self.bound_at.insert(a.claim.clone(), v);
                }
                self.claims.insert(a.claim.clone(), claim);
            }
        }
        if let Some(p) = self.pods.get_mut(pod) {
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
        }
        if self.cycle.as_ref().is_some_and(|c| c.pod == pod)
            && let Some(c) = self.cycle.take()
        {
            self.spare_results = c.nodes;
        }
        Ok(r.allocations)
    }
}

/// The name part of a `namespace/name` key.
fn object_key_name(key: &str) -> &str {
    key.rsplit_once('/').map_or(key, |(_, n)| n)
}

/// `ResourceClaimReservedForMaxSize`: the most consumers a claim's `status.reservedFor` holds.
const RESERVED_FOR_MAX: usize = 256;

/// The affinity rank's place in a node's rank: below it, the prioritized-list rank above. An
/// affinity rank (100 per request at most) reaches it only with hundreds of requests, where it
/// stops there; a prioritized-list rank (8 per request) cannot reach `u32::MAX / AFFINITY_SPAN`.
const AFFINITY_SPAN: u32 = 1 << 16;

/// A node's rank: the prioritized-list rank first, then the affinity rank.
fn node_rank(prioritized: u32, affinity: u32) -> u32 {
    prioritized
        .saturating_mul(AFFINITY_SPAN)
        .saturating_add(affinity.min(AFFINITY_SPAN - 1))
}

/// `(rank - min) · 100 / (max - min)`, clamped to 0..=100; 0 when `max == min`.
fn normalize(rank: u32, min: u32, max: u32) -> u32 {
    if max <= min {
        return 0;
    }
    let scaled = u64::from(rank.clamp(min, max) - min) * 100 / u64::from(max - min);
    u32::try_from(scaled).unwrap_or(100)
}

/// Which extractors apply to the devices a request could select, per (class, request selectors):
/// only those are evaluated at PreFilter.
struct Candidates<'a> {
    cel: &'a CelCache,
    index: &'a Index,
    extractors: &'a Extractors,
    classes: &'a crate::FxHashMap<String, DeviceClass>,
    /// Kept in the slice-derived state across pods; cleared when a DeviceClass changes.
    cache: &'a CandidateCache,
}

/// [`Candidates::extractors_for`] results per (class, request selectors).
pub(super) type CandidateCache = std::cell::RefCell<HashMap<(String, Vec<String>), Rc<[ExtId]>>>;

impl Candidates<'_> {
    /// Of the extractors that apply to some device of an affinity pool passing the class and
    /// request selectors (on any node), the first of each key-set group (see
    /// `Extractors::group`), ascending: the ones PreFilter evaluates. A selector that fails on a
    /// device counts as a match: Filter reports that error, and the extractor is evaluated to be
    /// safe. Kept per group, not per extractor: a cluster whose every pool publishes the same
    /// extractor has as many candidates as pools, and PreFilter would walk them all for each pod.
    fn extractors_for(&mut self, class: &str, selectors: &[DeviceSelector]) -> Rc<[ExtId]> {
        let exprs: Vec<String> = selectors.iter().map(|s| s.cel.expression.clone()).collect();
        let key = (class.to_string(), exprs);
        if let Some(ids) = self.cache.borrow().get(&key) {
            return ids.clone();
        }
        let mut all: Vec<&str> = Vec::new();
        if let Some(c) = self.classes.get(class) {
            all.extend(c.spec.selectors.iter().map(|s| s.cel.expression.as_str()));
        }
        all.extend(key.1.iter().map(String::as_str));
        let mut out = BTreeSet::new();
        for (pi, pool) in self.index.pools.iter().enumerate() {
            let Ok(pool_ids) = &self.extractors.per_pool[pi] else {
                continue;
            };
            if pool_ids.is_empty() || pool_ids.iter().all(|id| out.contains(id)) {
                continue;
            }
            for s in &pool.slices {
                for &d in &s.devices {
                    let entry = self.index.device(d);
                    let selected = entry.cel(&pool.driver).map_or(true, |dev| {
                        all.iter().all(|expr| {
                            self.cel
                                .selector(expr)
                                .map_or(true, |sel| sel.matches(&dev).unwrap_or(true))
                        })
                    });
                    if selected && let Ok(ids) = self.extractors.applicable(self.index, self.cel, d) {
                        out.extend(ids.iter().copied());
                    }
                }
            }
        }
        let mut seen = vec![false; self.extractors.groups.len()];
        let firsts: Rc<[ExtId]> = out
            .into_iter()
            .filter(|&id| !std::mem::replace(&mut seen[self.extractors.group[id]], true))
            .collect();
        self.cache.borrow_mut().insert(key, firsts.clone());
        firsts
    }
}

/// Evaluates the extractors that apply to the request's candidate devices against the claim's
/// config objects, per request and subrequest. A conflict (two values for one key) is
/// `UnschedulableAndUnresolvable` only among those.
fn claim_affinity(candidates: &mut Candidates<'_>, cc: &CycleClaim) -> Result<ClaimAffinity, String> {
    let (cel, extractors) = (candidates.cel, candidates.extractors);
    if extractors.is_empty() {
        return Ok(Vec::new());
    }
    let objects = affinity::claim_objects(&cc.claim);
    let mut out = Vec::new();
    for r in &cc.claim.spec.devices.requests {
        let subs: Vec<(Option<&str>, &str, &[DeviceSelector])> = match &r.exactly {
            Some(e) => vec![(None, e.device_class_name.as_str(), e.selectors.as_slice())],
            None => r
                .first_available
                .iter()
                .map(|s| {
                    (
                        Some(s.name.as_str()),
                        s.device_class_name.as_str(),
                        s.selectors.as_slice(),
                    )
                })
                .collect(),
        };
        let mut per_req = Vec::with_capacity(subs.len());
        for (sub, class, selectors) in subs {
            let ids = candidates.extractors_for(class, selectors);
            // One outcome per key set (see `Extractors::group`), from the first candidate
            // extractor declaring it: no per-pool map, however many pools publish the extractor.
            let mut outcomes: Vec<Option<Outcome>> = vec![None; extractors.groups.len()];
            for &id in ids.iter() {
                outcomes[extractors.group[id]] = Some(affinity::extract(
                    cel,
                    &extractors.list[id],
                    &objects,
                    &r.name,
                    sub,
                    &cc.key,
                )?);
            }
            per_req.push(outcomes);
        }
        out.push(per_req);
    }
    Ok(out)
}
