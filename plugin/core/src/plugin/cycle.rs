//! The extension points of one scheduling cycle: PreFilter, Filter, Score, Reserve, Unreserve, Bind.

use std::collections::{BTreeMap, HashMap};

use super::{ClaimAllocation, Cycle, CycleClaim, NodeResult, Plugin};
use crate::affinity::{self, ExtId, Extractors, Outcome};
use crate::allocator::{self, AllocOutcome, ClaimAffinity, ClaimInput, ClaimResult, LockSource};
use crate::cel::CelCache;
use crate::model::{
    OwnerReference, PodExtendedResourceClaimStatus, PodResourceClaimStatus, ResourceClaim,
    ResourceClaimConsumerReference,
};
use crate::node_selector;
use crate::object::object_key;
use crate::status::Status;

impl Plugin {
    /// PreFilter for the pod `namespace/name`: resolves its claims and starts a cycle.
    pub fn prefilter(&mut self, pod: &str) -> Status {
        if let Some(c) = &self.cycle
            && c.reserved.is_some()
        {
            // A new cycle drops an unfinished reservation, as the scheduler's Unreserve would.
            let node = c.reserved.as_ref().map(|r| r.0.clone()).unwrap_or_default();
            self.unreserve(&node);
        }
        self.cycle = None;
        let (status, cycle) = match self.prepare(pod) {
            Ok(c) => (Status::success(), c),
            Err(s) => {
                let c = Cycle {
                    pod: pod.to_string(),
                    status: s.clone(),
                    claims: Vec::new(),
                    pending: Vec::new(),
                    affinity: Vec::new(),
                    nodes: HashMap::new(),
                    reserved: None,
                };
                (s, c)
            }
        };
        self.cycle = Some(cycle);
        status
    }

    fn prepare(&mut self, pod_key: &str) -> Result<Cycle, Status> {
        let pod = self
            .pods
            .get(pod_key)
            .ok_or_else(|| Status::error(format!("pod {pod_key} not found")))?
            .clone();
        let ns = pod.metadata.namespace.clone();
        let mut claims = Vec::new();
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
            let claim = match (self.claims.get(&key), &generated) {
                (Some(c), _) => c.clone(),
                (None, Some(template)) => {
                    let tkey = object_key(&ns, template);
                    let t = self.templates.get(&tkey).ok_or_else(|| {
                        Status::unresolvable(format!("resource claim template {tkey} not found"))
                    })?;
                    let mut metadata = t.spec.metadata.clone();
                    metadata.name = name.clone();
                    metadata.namespace = ns.clone();
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
                    return Err(Status::unresolvable(format!(
                        "waiting for resource claim {key} to be created"
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
                        return Err(Status::unresolvable(format!(
                            "claim {}, request {}: device class {class} not found",
                            c.key, r.name
                        )));
                    }
                }
            }
        }
        self.derived();
        let d = self.derived.as_ref().expect("built above");
        let mut affinity = Vec::with_capacity(pending.len());
        for &i in &pending {
            affinity
                .push(claim_affinity(&self.cel, &d.extractors, &claims[i]).map_err(Status::unresolvable)?);
        }
        Ok(Cycle {
            pod: pod_key.to_string(),
            status: Status::success(),
            claims,
            pending,
            affinity,
            nodes: HashMap::new(),
            reserved: None,
        })
    }

    fn cycle(&self, what: &str) -> Result<&Cycle, Status> {
        self.cycle
            .as_ref()
            .ok_or_else(|| Status::error(format!("{what} called before prefilter")))
    }

    /// Filter for one node of the current cycle.
    pub fn filter(&mut self, node: &str) -> Status {
        let result = self.compute(node);
        let status = result.status.clone();
        if let Some(c) = &mut self.cycle {
            c.nodes.insert(node.to_string(), result);
        }
        status
    }

    fn compute(&mut self, node_name: &str) -> NodeResult {
        let fail = |status: Status| NodeResult {
            status,
            allocation: Vec::new(),
        };
        let cycle = match self.cycle("filter") {
            Ok(c) => c,
            Err(s) => return fail(s),
        };
        if !cycle.status.is_success() {
            return fail(cycle.status.clone());
        }
        let Some(node) = self.nodes.get(node_name) else {
            return fail(Status::unresolvable(format!("node {node_name} not found")));
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
        if cycle.pending.is_empty() {
            return NodeResult {
                status: Status::success(),
                allocation: Vec::new(),
            };
        }
        let Some(d) = self.derived.as_ref() else {
            return fail(Status::error("internal: slice index missing"));
        };
        // The node's pools are computed once per node and index; the cache stays borrowed for
        // the allocation call, which does not touch it.
        let mut cache = d.node_pools.borrow_mut();
        if !cache.contains_key(node_name) {
            cache.insert(node_name.to_string(), d.index.pools_for_node(node));
        }
        let pools = match &cache[node_name] {
            Ok(p) => p.as_slice(),
            Err(e) => return fail(Status::error(e.clone())),
        };
        let inputs: Vec<ClaimInput<'_>> = cycle
            .pending
            .iter()
            .zip(&cycle.affinity)
            .map(|(&i, aff)| ClaimInput {
                key: &cycle.claims[i].key,
                claim: &cycle.claims[i].claim,
                affinity: aff,
            })
            .collect();
        let locks = self.lock_view(d);
        let input = allocator::Input {
            index: &d.index,
            extractors: &d.extractors,
            cel: &self.cel,
            classes: &self.classes,
            allocated: &self.allocated,
            locks: &locks,
            node,
            pools,
            claims: &inputs,
            consolidate: self.config.consolidate,
        };
        match allocator::allocate(&input) {
            Ok(AllocOutcome::Allocated(a)) => NodeResult {
                status: Status::success(),
                allocation: a,
            },
            Ok(AllocOutcome::Unfit(notes)) => {
                let mut reason = "cannot allocate all claims".to_string();
                if !notes.is_empty() {
                    reason.push_str(": ");
                    reason.push_str(&notes.join("; "));
                }
                fail(Status::unschedulable(reason))
            }
            Err(e) if e.starts_with("invalid resource pool") => fail(Status::unschedulable(e)),
            Err(e) => fail(Status::error(e)),
        }
    }

    /// Score (0..=100) for a node that passed Filter in the current cycle.
    ///
    /// Per allocated device: 2 when it joins a device already locked to compatible affinity
    /// values, 1 when it takes a clean device in an affinity pool, 0 otherwise; the node's score is
    /// `sum * 100 / (2 * devices)`. Without sharing affinity every node scores 0, which leaves the
    /// choice to other plugins (and the replay's node-name tie-break).
    pub fn score(&mut self, node: &str) -> Result<u32, Status> {
        let cycle = self.cycle("score")?;
        let r = cycle
            .nodes
            .get(node)
            .ok_or_else(|| Status::error(format!("score for node {node} called before filter")))?;
        if !r.status.is_success() {
            return Err(Status::error(format!(
                "score for node {node} which did not pass filter"
            )));
        }
        Ok(if self.config.consolidate {
            score_of(&r.allocation)
        } else {
            0
        })
    }

    /// Reserve: commits the allocation Filter computed for `node` as in-flight.
    pub fn reserve(&mut self, node: &str) -> Result<Vec<ClaimAllocation>, Status> {
        let cycle = self.cycle("reserve")?;
        if cycle.reserved.is_some() {
            return Err(Status::error("reserve called twice in one cycle"));
        }
        let r = cycle
            .nodes
            .get(node)
            .ok_or_else(|| Status::error(format!("reserve on node {node} called before filter")))?;
        if !r.status.is_success() {
            return Err(Status::error(format!(
                "reserve on node {node} which did not pass filter"
            )));
        }
        let result = r.allocation.clone();
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
        let pod = self.pods.get(&pod_key).cloned().unwrap_or_default();
        let consumer = ResourceClaimConsumerReference {
            api_group: String::new(),
            resource: "pods".into(),
            name: pod.metadata.name.clone(),
            uid: pod.metadata.uid.clone(),
        };
        let cycle = self.cycle.as_ref().expect("checked above");
        let mut out = Vec::new();
        let mut staged = Vec::new();
        for (n, &i) in cycle.pending.iter().enumerate() {
            let cc = &cycle.claims[i];
            let cr = &result[n];
            let mut claim = cc.claim.clone();
            claim.status.allocation = Some(cr.allocation.clone());
            if !claim
                .status
                .reserved_for
                .iter()
                .any(|c| c.uid == consumer.uid && c.name == consumer.name)
            {
                claim.status.reserved_for.push(consumer.clone());
            }
            for ch in &cr.choices {
                if let Some(v) = &ch.affinity {
                    let key = d.index.device(ch.dev).key.clone();
                    staged.push(((cc.key.clone(), key), v.clone()));
                }
            }
            out.push(ClaimAllocation {
                claim: cc.key.clone(),
                allocation: cr.allocation.clone(),
            });
            self.inflight.insert(cc.key.clone(), claim);
        }
        for (k, v) in staged {
            self.known_values.insert(k, v);
        }
        let keys: Vec<String> = out.iter().map(|c| c.claim.clone()).collect();
        for k in &keys {
            let claim = self.inflight.get(k).cloned().expect("just inserted");
            self.contribute(k, &claim, true);
        }
        if let Some(c) = &mut self.cycle {
            c.reserved = Some((node.to_string(), out.clone()));
        }
        Ok(out)
    }

    /// Unreserve: drops the in-flight allocation of the current cycle.
    pub fn unreserve(&mut self, node: &str) {
        let Some(cycle) = &mut self.cycle else { return };
        let Some((reserved_node, allocs)) = cycle.reserved.take() else {
            return;
        };
        debug_assert!(node.is_empty() || node == reserved_node);
        for a in allocs {
            if let Some(claim) = self.inflight.remove(&a.claim) {
                self.contribute(&a.claim, &claim, false);
            }
            self.known_values.retain(|(c, _), _| *c != a.claim);
        }
    }

    /// Bind (PreBind): records the reserved allocation in the claims' status and the pod's node.
    pub fn bind(&mut self, node: &str) -> Result<Vec<ClaimAllocation>, Status> {
        let cycle = self.cycle("bind")?;
        let Some((reserved_node, allocs)) = &cycle.reserved else {
            return Err(Status::error("bind called without a successful reserve"));
        };
        if reserved_node != node {
            return Err(Status::error(format!(
                "bind on node {node}, but the pod was reserved on {reserved_node}"
            )));
        }
        let allocs = allocs.clone();
        let pod_key = cycle.pod.clone();
        let generated: Vec<(String, String)> = cycle
            .claims
            .iter()
            .filter(|c| c.generated_for.is_some())
            .map(|c| (c.key.clone(), c.claim.metadata.name.clone()))
            .collect();
        let extended =
            cycle
                .claims
                .iter()
                .find(|c| !c.extended.is_empty())
                .map(|c| PodExtendedResourceClaimStatus {
                    request_mappings: c.extended.clone(),
                    resource_claim_name: c.claim.metadata.name.clone(),
                });
        let entries: Vec<String> = self
            .pods
            .get(&pod_key)
            .map(|p| p.spec.resource_claims.iter().map(|e| e.name.clone()).collect())
            .unwrap_or_default();
        for a in &allocs {
            if let Some(claim) = self.inflight.remove(&a.claim) {
                // Moves from in-flight to stored: contributions stay the same.
                self.claims.insert(a.claim.clone(), claim);
            }
        }
        if let Some(pod) = self.pods.get_mut(&pod_key) {
            pod.spec.node_name = node.to_string();
            if extended.is_some() {
                pod.status.extended_resource_claim_status = extended;
            }
            for (_, name) in &generated {
                if let Some(entry) = entries
                    .iter()
                    .find(|e| format!("{}-{e}", pod.metadata.name) == *name)
                    && !pod
                        .status
                        .resource_claim_statuses
                        .iter()
                        .any(|s| s.name == *entry)
                {
                    pod.status.resource_claim_statuses.push(PodResourceClaimStatus {
                        name: entry.clone(),
                        resource_claim_name: Some(name.clone()),
                    });
                }
            }
        }
        self.cycle = None;
        Ok(allocs)
    }
}

/// See [`Plugin::score`].
fn score_of(allocation: &[ClaimResult]) -> u32 {
    let mut sum = 0u32;
    let mut n = 0u32;
    for c in allocation {
        for ch in &c.choices {
            n += 1;
            sum += match (&ch.affinity, ch.joined_lock) {
                (Some(_), true) => 2,
                (Some(_), false) => 1,
                (None, _) => 0,
            };
        }
    }
    if n == 0 { 0 } else { sum * 100 / (2 * n) }
}

/// Evaluates every extractor against the claim's config objects, per request and subrequest.
fn claim_affinity(cel: &CelCache, extractors: &Extractors, cc: &CycleClaim) -> Result<ClaimAffinity, String> {
    if extractors.is_empty() {
        return Ok(Vec::new());
    }
    let objects = affinity::claim_objects(&cc.claim);
    let mut out = Vec::new();
    for r in &cc.claim.spec.devices.requests {
        let subs: Vec<Option<&str>> = if r.exactly.is_some() {
            vec![None]
        } else {
            r.first_available.iter().map(|s| Some(s.name.as_str())).collect()
        };
        let mut per_req = Vec::with_capacity(subs.len());
        for sub in subs {
            let mut m: HashMap<ExtId, Outcome> = HashMap::new();
            // Pools of one driver usually publish the same extractor: evaluate each distinct key
            // set once per request.
            let mut seen: HashMap<&BTreeMap<String, String>, Outcome> = HashMap::new();
            for (id, ex) in extractors.list.iter().enumerate() {
                let outcome = match seen.get(&ex.keys) {
                    Some(o) => o.clone(),
                    None => {
                        let o = affinity::extract(cel, ex, &objects, &r.name, sub, &cc.key)?;
                        seen.insert(&ex.keys, o.clone());
                        o
                    }
                };
                m.insert(id, outcome);
            }
            per_req.push(m);
        }
        out.push(per_req);
    }
    Ok(out)
}
