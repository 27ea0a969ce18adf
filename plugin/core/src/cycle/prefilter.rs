//! PreFilter: the pod's claims resolved (by name, or generated from a template as
//! `<pod>-<entry>`), their classes checked, and the sharing-affinity extractors that apply to
//! each pending request's candidate devices evaluated against the claim's config, once.

use std::collections::BTreeSet;
use std::rc::Rc;

use super::{Cycle, CycleClaim};
use crate::affinity::{self, ExtId, Extractors, Outcome};
use crate::allocator::ClaimAffinity;
use crate::cel::CelCache;
use crate::extended;
use crate::index::Index;
use crate::model::{DeviceClass, DeviceSelector, OwnerReference, Pod, ResourceClaim};
use crate::object::{Kind, object_key};
use crate::state::{CandidateCache, ClusterState};
use crate::status::Status;

/// `ResourceClaimReservedForMaxSize`: the most consumers a claim's `status.reservedFor` holds.
const RESERVED_FOR_MAX: usize = 256;

impl Cycle {
    /// PreFilter for the pod `pod_key` (`namespace/name`): resolves its claims, checks their
    /// classes, and evaluates the sharing-affinity extractors against each pending claim once.
    pub(crate) fn prepare(state: &ClusterState, pod_key: &str) -> Result<Cycle, Status> {
        let pod = state
            .pods
            .get(pod_key)
            .ok_or_else(|| {
                Status::error(state.rejected.missing(Kind::Pod, pod_key, &format!("pod {pod_key}"), || {
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
            let stored = state.inflight.get(&key).or_else(|| state.claims.get(&key));
            let claim = match (stored, &generated) {
                (Some(c), _) => ResourceClaim::clone(c),
                (None, Some(template)) => {
                    let tkey = object_key(&ns, template);
                    let t = state.templates.get(&tkey).ok_or_else(|| {
                        let what = format!("resource claim template {tkey}");
                        Status::unresolvable(state.rejected.missing(
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
                    return Err(Status::unresolvable(state.rejected.missing(
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
                    state.now.and_then(|now| {
                        claim
                            .status
                            .binding_timed_out(now, state.config.binding_timeout_seconds)
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
        if let Some(special) = extended_claim(state, &pod, pod_key)? {
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
                    if !state.classes.contains_key(class) {
                        let missing = state.rejected.missing(
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
        let d = state
            .derived
            .as_ref()
            .ok_or_else(|| Status::error("internal: slice index missing"))?;
        let mut affinity = Vec::with_capacity(pending.len());
        let mut candidates = Candidates {
            cel: &state.cel,
            index: &d.index,
            extractors: &d.extractors,
            classes: &state.classes,
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
}

/// Which extractors apply to the devices a request could select, per (class, request selectors):
/// only those are evaluated at PreFilter.
struct Candidates<'a> {
    cel: &'a CelCache,
    index: &'a Index,
    extractors: &'a Extractors,
    classes: &'a crate::hashing::FxHashMap<String, DeviceClass>,
    /// Kept in the slice-derived state across pods; cleared when a DeviceClass changes.
    cache: &'a CandidateCache,
}

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

/// The pod's special claim for this cycle: the one created in an earlier cycle, or a new one;
/// `None` when the pod asks for no DRA-backed extended resource.
fn extended_claim(
    state: &ClusterState,
    pod: &Pod,
    pod_key: &str,
) -> Result<Option<crate::cycle::CycleClaim>, crate::status::Status> {
    use crate::status::Status;
    let has_request = pod
        .spec
        .init_containers
        .iter()
        .chain(&pod.spec.containers)
        .any(|c| !c.resources.requests.is_empty() || !c.resources.limits.is_empty());
    if !has_request {
        return Ok(None);
    }
    let mapping = extended::class_mapping(&state.classes)
        .map_err(|e| Status::error(format!("pod {pod_key}: extended resources: {e}")))?;
    let resources = extended::pod_resources(pod, &mapping);
    if resources.is_empty() {
        return Ok(None);
    }
    if let Some((key, claim)) = state.claims.iter().find(|(_, c)| extended::is_claim_of(c, pod)) {
        if claim.status.allocation.is_none() && !claim.spec.devices.requests.is_empty() {
            // Upstream: a claim left from an earlier cycle is deleted before a new attempt.
            return Err(Status::unschedulable(format!(
                "cannot schedule extended resource claim {key}"
            )));
        }
        let mappings = pod
            .status
            .extended_resource_claim_status
            .as_ref()
            .map(|s| s.request_mappings.clone())
            .unwrap_or_default();
        return Ok(Some(crate::cycle::CycleClaim {
            key: key.clone(),
            claim: crate::model::ResourceClaim::clone(claim),
            generated_for: None,
            extended: mappings,
        }));
    }
    let (requests, mappings) = extended::requests_and_mappings(pod, &resources)
        .map_err(|e| Status::unresolvable(format!("pod {pod_key}: {e}")))?;
    let claim = extended::new_claim(pod, requests);
    Ok(Some(crate::cycle::CycleClaim {
        key: crate::object::object_key(&claim.metadata.namespace, &claim.metadata.name),
        claim,
        generated_for: Some(pod_key.to_string()),
        extended: mappings,
    }))
}
