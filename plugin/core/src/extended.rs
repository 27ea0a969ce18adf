//! KEP-5004 (`DRAExtendedResource`): extended resources backed by DRA.
//!
//! A pod that asks for an extended resource in `resources.requests` (for example
//! `example.com/gpu: 2`) gets its devices through one special claim the scheduler creates for it,
//! as the in-tree DynamicResources plugin does:
//! - a resource maps to a DeviceClass by the class's `spec.extendedResourceName` or by the implicit
//!   name `deviceclass.resource.kubernetes.io/<class>`;
//! - the claim has one `ExactCount` request per container and resource, named
//!   `container-<i>-request-<j>` (`i`: index in init containers followed by containers; `j`: index
//!   of the resource among the container's sorted request names), sorted by name;
//! - a regular init container (not a sidecar) first reuses the requests of the long-lived
//!   containers at or after its index, and asks only for the rest; of those init requests only the
//!   largest is kept, and every init mapping then names it;
//! - the claim is annotated `resource.kubernetes.io/extended-resource-claim: "true"`, controlled by
//!   the pod, and named from `generateName` `<pod>-extended-resources-`; Bind records it in
//!   `status.extendedResourceClaimStatus` with the container → request mappings.
//!
//! A node whose `status.allocatable` lists one of the resources above zero provides it through a
//! device plugin: there, as upstream's Filter does, the claim leaves out that resource's requests
//! (the NodeResourcesFit plugin checks it against the node's allocatable, which this plugin does
//! not model), and a node that provides every resource that way gets no special claim at all.
//! Elsewhere DRA serves them. The claim therefore varies per node (`node_variant`).
//!
//! What this plugin cannot decide exactly is an error, never a guess: two classes with the same
//! `extendedResourceName`, a fractional request.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use crate::model::{
    Container, ContainerExtendedResourceRequest, DeviceClaim, DeviceClass, DeviceRequest, ExactDeviceRequest,
    Node, ObjectMeta, OwnerReference, Pod, ResourceClaim, ResourceClaimSpec,
};
use crate::quantity::Quantity;

/// The annotation that marks the special claim.
pub const CLAIM_ANNOTATION: &str = "resource.kubernetes.io/extended-resource-claim";
/// Prefix of the implicit extended resource name of every class.
pub const IMPLICIT_PREFIX: &str = "deviceclass.resource.kubernetes.io/";
/// Longest `generateName` base the API server keeps (63 minus the 5 random characters).
const MAX_GENERATE_BASE: usize = 58;
/// The alphabet of the API server's random name suffixes.
const SUFFIX_ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";

/// Extended resource name → class name.
pub fn class_mapping<S: std::hash::BuildHasher>(
    classes: &std::collections::HashMap<String, DeviceClass, S>,
) -> Result<BTreeMap<String, String>, String> {
    let mut out = BTreeMap::new();
    let mut names: Vec<&String> = classes.keys().collect();
    crate::map::sort_by_str(&mut names, |n| n.as_str());
    for name in names {
        out.insert(format!("{IMPLICIT_PREFIX}{name}"), name.clone());
    }
    let mut explicit: BTreeMap<&str, &str> = BTreeMap::new();
    for (name, class) in classes {
        if let Some(r) = &class.spec.extended_resource_name {
            if let Some(other) = explicit.insert(r, name)
                && other != name
            {
                let (a, b) = if other < name.as_str() {
                    (other, name.as_str())
                } else {
                    (name.as_str(), other)
                };
                return Err(format!(
                    "device classes {a} and {b} both set spec.extendedResourceName {r}: which one backs it is not defined"
                ));
            }
            out.insert(r.clone(), name.clone());
        }
    }
    Ok(out)
}

/// A container's requests as the API server stores them: a limit without a request is the request.
fn requests(c: &Container) -> BTreeMap<&str, &Quantity> {
    // Requests (their keys are unique) first, then the limits that have no request.
    let mut r: BTreeMap<&str, &Quantity> = BTreeMap::new();
    for (k, v) in c.resources.requests.iter().chain(&c.resources.limits) {
        r.entry(k.as_str()).or_insert(v);
    }
    r
}

/// The DRA-backed resources the pod asks for (nonzero in some container), with their class.
pub fn pod_resources(pod: &Pod, mapping: &BTreeMap<String, String>) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    for c in pod.spec.init_containers.iter().chain(&pod.spec.containers) {
        for (name, q) in requests(c) {
            if !q.is_zero()
                && let Some(class) = mapping.get(name)
            {
                out.insert(name.to_string(), class.clone());
            }
        }
    }
    out
}

/// One container's request for one resource, after reusing `reusable` (long-lived requests).
fn container_request(
    index: usize,
    c: &Container,
    resource: &str,
    class: &str,
    reusable: &[Option<DeviceRequest>],
) -> Result<(Option<DeviceRequest>, Vec<ContainerExtendedResourceRequest>), String> {
    let reqs = requests(c);
    let Some(q) = reqs.get(resource) else {
        return Ok((None, Vec::new()));
    };
    let want = q.as_i64().ok_or_else(|| {
        format!(
            "container {}: {resource} request {q} is not a whole number",
            c.name
        )
    })?;
    if want == 0 {
        return Ok((None, Vec::new()));
    }
    let mapping = |request: &str| ContainerExtendedResourceRequest {
        container_name: c.name.clone(),
        resource_name: resource.to_string(),
        request_name: request.to_string(),
    };
    let mut mappings = Vec::new();
    let mut have = 0i64;
    for r in reusable.iter().flatten() {
        have += r.exactly.as_ref().and_then(|e| e.count).unwrap_or(1);
        mappings.push(mapping(&r.name));
        if have >= want {
            return Ok((None, mappings));
        }
    }
    let position = reqs.keys().position(|k| *k == resource).unwrap_or(0);
    let name = format!("container-{index}-request-{position}");
    mappings.push(mapping(&name));
    let request = DeviceRequest {
        name,
        exactly: Some(ExactDeviceRequest {
            device_class_name: class.to_string(),
            allocation_mode: Some("ExactCount".into()),
            count: Some(want - have),
            ..Default::default()
        }),
        first_available: Vec::new(),
    };
    Ok((Some(request), mappings))
}

/// The special claim's requests and the container mappings, for `resources` (resource → class).
pub fn requests_and_mappings(
    pod: &Pod,
    resources: &BTreeMap<String, String>,
) -> Result<(Vec<DeviceRequest>, Vec<ContainerExtendedResourceRequest>), String> {
    let inits = pod.spec.init_containers.len();
    let containers: Vec<&Container> = pod
        .spec
        .init_containers
        .iter()
        .chain(&pod.spec.containers)
        .collect();
    let short_lived = |i: usize| i < inits && containers[i].restart_policy.as_deref() != Some("Always");
    let mut requests = Vec::new();
    let mut mappings = Vec::new();
    for (resource, class) in resources {
        let mut long: Vec<Option<DeviceRequest>> = vec![None; containers.len()];
        let mut long_mappings = Vec::new();
        for (i, c) in containers.iter().enumerate().filter(|(i, _)| !short_lived(*i)) {
            let (r, m) = container_request(i, c, resource, class, &[])?;
            long[i] = r;
            long_mappings.extend(m);
        }
        let mut largest: Option<DeviceRequest> = None;
        let mut init_names = BTreeSet::new();
        let mut init_mappings = Vec::new();
        for (i, c) in containers.iter().enumerate().filter(|(i, _)| short_lived(*i)) {
            let (r, m) = container_request(i, c, resource, class, &long[i..])?;
            if let Some(r) = r {
                init_names.insert(r.name.clone());
                let count = |r: &DeviceRequest| r.exactly.as_ref().and_then(|e| e.count).unwrap_or(1);
                if largest.as_ref().is_none_or(|l| count(l) < count(&r)) {
                    largest = Some(r);
                }
            }
            init_mappings.extend(m);
        }
        if let Some(l) = &largest
            && init_names.len() > 1
        {
            for m in &mut init_mappings {
                if init_names.contains(&m.request_name) {
                    m.request_name = l.name.clone();
                }
            }
        }
        requests.extend(largest);
        requests.extend(long.into_iter().flatten());
        mappings.extend(long_mappings);
        mappings.extend(init_mappings);
    }
    crate::map::sort_by_str(&mut requests, |r| r.name.as_str());
    Ok((requests, mappings))
}

/// The name the API server gives the claim: `generateName` (truncated as the server does) plus
/// five characters. The server draws them at random; the replay derives them from the pod's UID so
/// that a replay is repeatable.
pub fn claim_name(pod: &Pod) -> String {
    let mut base = format!("{}-extended-resources-", pod.metadata.name);
    base.truncate(MAX_GENERATE_BASE);
    // FNV-1a over the UID (or name when there is none).
    let seed = if pod.metadata.uid.is_empty() {
        pod.metadata.name.as_str()
    } else {
        pod.metadata.uid.as_str()
    };
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in seed.bytes() {
        h = (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
    }
    for _ in 0..5 {
        base.push(SUFFIX_ALPHABET[(h % SUFFIX_ALPHABET.len() as u64) as usize] as char);
        h /= SUFFIX_ALPHABET.len() as u64;
    }
    base
}

/// Whether `claim` is the pod's special claim (annotation set, pod is the controlling owner).
pub fn is_claim_of(claim: &ResourceClaim, pod: &Pod) -> bool {
    claim
        .metadata
        .annotations
        .get(CLAIM_ANNOTATION)
        .map(String::as_str)
        == Some("true")
        && claim
            .metadata
            .owner_references
            .iter()
            .any(|o| o.controller == Some(true) && o.name == pod.metadata.name && o.uid == pod.metadata.uid)
}

/// The new special claim for the pod, with its requests.
pub fn new_claim(pod: &Pod, requests: Vec<DeviceRequest>) -> ResourceClaim {
    ResourceClaim {
        metadata: ObjectMeta {
            name: claim_name(pod).into(),
            namespace: pod.metadata.namespace.clone(),
            annotations: Arc::new(crate::model::Map::from([(
                CLAIM_ANNOTATION.to_string(),
                "true".to_string(),
            )])),
            owner_references: vec![OwnerReference {
                api_version: "v1".into(),
                kind: "Pod".into(),
                name: pod.metadata.name.clone(),
                uid: pod.metadata.uid.clone(),
                controller: Some(true),
            }],
            ..Default::default()
        },
        spec: Arc::new(ResourceClaimSpec {
            devices: DeviceClaim {
                requests,
                ..Default::default()
            },
        }),
        ..Default::default()
    }
}

/// The resources of the pod's special claim that `node` provides through a device plugin: those
/// with a nonzero `status.allocatable` entry. Upstream then leaves them to the device plugin on
/// that node and asks DRA only for the others. Sorted, without repeats.
pub fn device_plugin_resources<'a>(
    node: &Node,
    mappings: &'a [ContainerExtendedResourceRequest],
) -> Vec<&'a str> {
    let mut served: Vec<&str> = mappings
        .iter()
        .map(|m| m.resource_name.as_str())
        .filter(|r| node.status.allocatable.get(*r).is_some_and(|q| !q.is_zero()))
        .collect();
    crate::map::sort_unique(&mut served);
    served
}

/// The special claim as one node needs it, when the node provides some of its resources through a
/// device plugin.
#[derive(Clone, Debug)]
pub(super) struct NodeVariant {
    /// The claim with only the requests DRA serves on the node (possibly none).
    pub(super) claim: ResourceClaim,
    /// Indexes of the kept requests in the PreFilter claim.
    pub(super) keep: Vec<usize>,
    /// The container mappings of the kept requests.
    pub(super) mappings: Vec<ContainerExtendedResourceRequest>,
}

/// The node's variant of a special claim that is still to be allocated: `None` when the claim is
/// no such claim or the node provides none of its resources through a device plugin (the
/// PreFilter claim applies as it is). A request name belongs to one resource (init containers
/// reuse only requests of the same resource), so dropping a resource drops its requests and
/// mappings and nothing else.
pub(crate) fn node_variant(
    claim: &ResourceClaim,
    mappings: &[ContainerExtendedResourceRequest],
    node: &Node,
) -> Option<NodeVariant> {
    if mappings.is_empty() || claim.status.allocation.is_some() {
        return None;
    }
    let plugin_served = device_plugin_resources(node, mappings);
    if plugin_served.is_empty() {
        return None;
    }
    let dropped: Vec<&str> = mappings
        .iter()
        .filter(|m| plugin_served.binary_search(&m.resource_name.as_str()).is_ok())
        .map(|m| m.request_name.as_str())
        .collect();
    let keep: Vec<usize> = (0..claim.spec.devices.requests.len())
        .filter(|&i| !dropped.contains(&claim.spec.devices.requests[i].name.as_str()))
        .collect();
    let mut variant = claim.clone();
    Arc::make_mut(&mut variant.spec).devices.requests = keep
        .iter()
        .map(|&i| claim.spec.devices.requests[i].clone())
        .collect();
    Some(NodeVariant {
        claim: variant,
        keep,
        mappings: mappings
            .iter()
            .filter(|m| plugin_served.binary_search(&m.resource_name.as_str()).is_err())
            .cloned()
            .collect(),
    })
}

/// The pod's `status.extendedResourceClaimStatus` after binding it to `node`, as upstream's
/// PreBind records it: the mappings of the resources DRA serves on the node and the claim's name;
/// `None` when the pod asks for no DRA-backed resource or the node provides all of them through a
/// device plugin (no claim is created). The replay reports it from this function, so the report
/// and the core agree by construction.
pub fn status_on_node<S: std::hash::BuildHasher>(
    pod: &Pod,
    classes: &std::collections::HashMap<String, DeviceClass, S>,
    node: &Node,
) -> Result<Option<crate::model::PodExtendedResourceClaimStatus>, String> {
    if let Some(s) = &pod.status.extended_resource_claim_status {
        return Ok(Some(s.clone()));
    }
    let mapping = class_mapping(classes)?;
    let resources = pod_resources(pod, &mapping);
    if resources.is_empty() {
        return Ok(None);
    }
    let (_, mappings) = requests_and_mappings(pod, &resources)?;
    let plugin_served = device_plugin_resources(node, &mappings);
    let kept: Vec<ContainerExtendedResourceRequest> = mappings
        .iter()
        .filter(|m| plugin_served.binary_search(&m.resource_name.as_str()).is_err())
        .cloned()
        .collect();
    Ok(
        (!kept.is_empty()).then(|| crate::model::PodExtendedResourceClaimStatus {
            request_mappings: kept,
            resource_claim_name: claim_name(pod),
        }),
    )
}

/// The special claim as created for `pod` with `allocation` (on whichever node it was made), and
/// the pod's status: the requests by the rules above for the pod and `classes`, keeping those the
/// allocation has results for (a resource the node serves through a device plugin has none).
/// `None` when the pod asks for no DRA-backed resource; an error when a result names a request
/// the pod does not make.
pub fn claim_for_allocation<S: std::hash::BuildHasher>(
    pod: &Pod,
    classes: &std::collections::HashMap<String, DeviceClass, S>,
    allocation: &crate::model::AllocationResult,
) -> Result<Option<(ResourceClaim, crate::model::PodExtendedResourceClaimStatus)>, String> {
    let mapping = class_mapping(classes)?;
    let resources = pod_resources(pod, &mapping);
    if resources.is_empty() {
        return Ok(None);
    }
    let (requests, mappings) = requests_and_mappings(pod, &resources)?;
    let mut allocated: Vec<&str> = allocation
        .devices
        .results
        .iter()
        .map(|r| r.request.split('/').next().unwrap_or_default())
        .collect();
    crate::map::sort_unique(&mut allocated);
    if let Some(r) = allocated.iter().find(|r| !requests.iter().any(|q| q.name == **r)) {
        return Err(format!(
            "the allocation has a result for request {r}, which the pod does not make"
        ));
    }
    let requests = requests
        .into_iter()
        .filter(|q| allocated.binary_search(&q.name.as_str()).is_ok())
        .collect();
    let status = crate::model::PodExtendedResourceClaimStatus {
        request_mappings: mappings
            .into_iter()
            .filter(|m| allocated.binary_search(&m.request_name.as_str()).is_ok())
            .collect(),
        resource_claim_name: claim_name(pod),
    };
    Ok(Some((new_claim(pod, requests), status)))
}
