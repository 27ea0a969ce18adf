//! `core/v1`: Node, NodeSelector, Pod (the fields the plugin reads).

use std::sync::Arc;

use serde::{Deserialize, Serialize};

use super::{Map, ObjectMeta, exact};
use crate::quantity::Quantity;

/// `core/v1` Node: identity and labels matter to node selectors; the status is carried for
/// wasm hosts that hand the whole Node to a guest (the core does not read it).
#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct Node {
    /// Object metadata (`metadata.name` and `metadata.labels`).
    #[serde(default)]
    pub metadata: ObjectMeta,
    /// Node status (capacity, allocatable, images). Shared: the nodes of one machine type
    /// report equal statuses, and the plugin stores one copy of each (change it with
    /// `Arc::make_mut`).
    #[serde(default, skip_serializing_if = "status_empty")]
    pub status: Arc<NodeStatus>,
}

fn status_empty(status: &Arc<NodeStatus>) -> bool {
    status.is_empty()
}

/// `core/v1` NodeStatus (subset).
#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct NodeStatus {
    /// `status.capacity`: resource name → quantity.
    #[serde(default, skip_serializing_if = "Map::is_empty")]
    pub capacity: Map<String, Quantity>,
    /// `status.allocatable`: resource name → quantity.
    #[serde(default, skip_serializing_if = "Map::is_empty")]
    pub allocatable: Map<String, Quantity>,
    /// `status.images`: the container images on the node.
    #[serde(
        default,
        deserialize_with = "exact::vec",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub images: Vec<ContainerImage>,
}

impl NodeStatus {
    /// True when no field is set.
    pub fn is_empty(&self) -> bool {
        self.capacity.is_empty() && self.allocatable.is_empty() && self.images.is_empty()
    }
}

/// `core/v1` ContainerImage.
#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ContainerImage {
    /// Names known for the image (`repo:tag`, `repo@digest`).
    #[serde(
        default,
        deserialize_with = "exact::vec",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub names: Vec<String>,
    /// The image size in bytes.
    #[serde(default)]
    pub size_bytes: i64,
}

/// `core/v1` Container (subset): name, image and resources.
#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct Container {
    /// Container name.
    #[serde(default)]
    pub name: String,
    /// Image reference.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub image: String,
    /// Resource requests and limits.
    #[serde(default, skip_serializing_if = "ResourceRequirements::is_empty")]
    pub resources: ResourceRequirements,
    /// `Always` makes an init container a sidecar (it runs alongside the regular containers).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub restart_policy: Option<String>,
}

/// `core/v1` ResourceRequirements (subset).
#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ResourceRequirements {
    /// `limits`: resource name → quantity.
    #[serde(default, skip_serializing_if = "Map::is_empty")]
    pub limits: Map<String, Quantity>,
    /// `requests`: resource name → quantity.
    #[serde(default, skip_serializing_if = "Map::is_empty")]
    pub requests: Map<String, Quantity>,
}

impl ResourceRequirements {
    /// True when neither limits nor requests are set.
    pub fn is_empty(&self) -> bool {
        self.limits.is_empty() && self.requests.is_empty()
    }
}

/// `core/v1` NodeSelector: terms are ORed.
#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct NodeSelector {
    /// The terms; a node matches when any term matches.
    #[serde(default, deserialize_with = "exact::vec")]
    pub node_selector_terms: Vec<NodeSelectorTerm>,
}

/// `core/v1` NodeSelectorTerm: requirements are ANDed.
#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct NodeSelectorTerm {
    /// Requirements on node labels.
    #[serde(
        default,
        deserialize_with = "exact::vec",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub match_expressions: Vec<NodeSelectorRequirement>,
    /// Requirements on node fields (only `metadata.name` is supported, as upstream).
    #[serde(
        default,
        deserialize_with = "exact::vec",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub match_fields: Vec<NodeSelectorRequirement>,
}

/// `core/v1` NodeSelectorRequirement.
#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct NodeSelectorRequirement {
    /// Label key or field name.
    #[serde(deserialize_with = "crate::json::required")]
    pub key: String,
    /// `In`, `NotIn`, `Exists`, `DoesNotExist`, `Gt` or `Lt`.
    #[serde(deserialize_with = "crate::json::required")]
    pub operator: String,
    /// Values for the operator.
    #[serde(
        default,
        deserialize_with = "exact::vec",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub values: Vec<String>,
}

impl NodeSelectorRequirement {
    /// A requirement on `key`.
    pub fn new(key: impl Into<String>, operator: impl Into<String>, values: Vec<String>) -> Self {
        NodeSelectorRequirement {
            key: key.into(),
            operator: operator.into(),
            values,
        }
    }
}

/// `core/v1` Pod: the fields that connect a pod to its claims.
#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct Pod {
    /// Object metadata.
    #[serde(default)]
    pub metadata: ObjectMeta,
    /// Pod spec.
    #[serde(default)]
    pub spec: PodSpec,
    /// Pod status.
    #[serde(default)]
    pub status: PodStatus,
}

/// `core/v1` PodSpec (subset).
#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct PodSpec {
    /// Node the pod is bound to; empty while pending.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub node_name: String,
    /// Scheduler that handles the pod.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub scheduler_name: String,
    /// `spec.resourceClaims[]`.
    #[serde(
        default,
        deserialize_with = "exact::vec",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub resource_claims: Vec<PodResourceClaim>,
    /// `spec.containers[]` (carried for wasm hosts; the core does not read them).
    #[serde(
        default,
        deserialize_with = "exact::vec",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub containers: Vec<Container>,
    /// `spec.initContainers[]`.
    #[serde(
        default,
        deserialize_with = "exact::vec",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub init_containers: Vec<Container>,
}

/// `core/v1` PodResourceClaim: exactly one of the two sources is set.
#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct PodResourceClaim {
    /// Name of this entry inside the pod.
    #[serde(deserialize_with = "crate::json::required")]
    pub name: String,
    /// Name of an existing ResourceClaim in the pod's namespace.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resource_claim_name: Option<String>,
    /// Name of a ResourceClaimTemplate from which a claim is generated for the pod.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resource_claim_template_name: Option<String>,
}

/// `core/v1` PodStatus (subset).
#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct PodStatus {
    /// Names of the claims generated for `spec.resourceClaims` entries that use templates.
    #[serde(
        default,
        deserialize_with = "exact::vec",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub resource_claim_statuses: Vec<PodResourceClaimStatus>,
    /// KEP-5004: the claim the scheduler created for extended resources backed by DRA.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub extended_resource_claim_status: Option<PodExtendedResourceClaimStatus>,
}

/// `core/v1` PodExtendedResourceClaimStatus.
#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct PodExtendedResourceClaimStatus {
    /// Which request of the claim serves which resource of which container.
    #[serde(default, deserialize_with = "exact::vec")]
    pub request_mappings: Vec<ContainerExtendedResourceRequest>,
    /// Name of the claim, in the pod's namespace.
    #[serde(default)]
    pub resource_claim_name: String,
}

/// `core/v1` ContainerExtendedResourceRequest.
#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct ContainerExtendedResourceRequest {
    /// Container name.
    #[serde(deserialize_with = "crate::json::required")]
    pub container_name: String,
    /// Extended resource name.
    #[serde(deserialize_with = "crate::json::required")]
    pub resource_name: String,
    /// Request name in the claim.
    #[serde(deserialize_with = "crate::json::required")]
    pub request_name: String,
}

/// `core/v1` PodResourceClaimStatus.
#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct PodResourceClaimStatus {
    /// The `spec.resourceClaims[].name` this status belongs to.
    #[serde(deserialize_with = "crate::json::required")]
    pub name: String,
    /// Name of the generated ResourceClaim; unset when no claim was needed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resource_claim_name: Option<String>,
}
