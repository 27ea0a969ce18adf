//! # sharing-affinity-kswe-proto
//!
//! Protobuf messages of the KSWE ABI: the subset of `k8s.io.api.core.v1` Pod, Node and NodeList
//! (Kubernetes v1.33, proto2) that the sharing-affinity model carries, plus conversions from and to
//! the serde model in `sharing_affinity_core::model`.
//!
//! One crate for both sides of the ABI: the guest (`plugin/guest`, `scheduler_abi`) decodes these
//! messages and the wasmtime host (`host/src/kswe`) encodes them, so both agree on field numbers
//! by construction. Field numbers were checked against `core/v1/generated.proto` and
//! `apimachinery/pkg/apis/meta/v1/generated.proto` at `v0.33.4`; the KEP-5004 fields that v1.33
//! lacks (`PodStatus.extendedResourceClaimStatus` = 18 and its messages) against `k8s.io/api`
//! master (the 1.34+ `generated.proto`), where the numbers are final.
//!
//! Presence follows the gogo marshaller the upstream Go host uses: non-pointer Go fields (strings,
//! `generation`, `creationTimestamp`, the `spec`/`status` structs) are always written, pointer fields
//! only when set. Pods carry their containers (name, image, resources, restartPolicy), claim
//! statuses and KEP-5004 `extendedResourceClaimStatus`, and nodes their status
//! (capacity, allocatable, images); other fields outside the model are not written, and a guest
//! decoding these bytes sees them as unset, exactly as proto2 readers skip unknown fields.
#![forbid(unsafe_code)]

use std::fmt;

use sharing_affinity_core::model;
use sharing_affinity_core::time::{format_rfc3339, parse_rfc3339};

/// `k8s.io.apimachinery.pkg.apis.meta.v1.Time` (seconds since the epoch, and nanos).
#[derive(Clone, PartialEq, prost::Message)]
pub struct Time {
    /// Seconds since 1970-01-01T00:00:00Z.
    #[prost(int64, optional, tag = "1")]
    pub seconds: Option<i64>,
    /// Non-negative nanoseconds within the second.
    #[prost(int32, optional, tag = "2")]
    pub nanos: Option<i32>,
}

/// `meta.v1.OwnerReference`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct OwnerReference {
    /// Kind of the owner.
    #[prost(string, optional, tag = "1")]
    pub kind: Option<String>,
    /// Name of the owner.
    #[prost(string, optional, tag = "3")]
    pub name: Option<String>,
    /// UID of the owner.
    #[prost(string, optional, tag = "4")]
    pub uid: Option<String>,
    /// API version of the owner.
    #[prost(string, optional, tag = "5")]
    pub api_version: Option<String>,
    /// Whether the owner is the managing controller.
    #[prost(bool, optional, tag = "6")]
    pub controller: Option<bool>,
}

/// `meta.v1.ObjectMeta` (subset).
#[derive(Clone, PartialEq, prost::Message)]
pub struct ObjectMeta {
    /// `metadata.name`.
    #[prost(string, optional, tag = "1")]
    pub name: Option<String>,
    /// `metadata.generateName` (always written empty: not modelled).
    #[prost(string, optional, tag = "2")]
    pub generate_name: Option<String>,
    /// `metadata.namespace`.
    #[prost(string, optional, tag = "3")]
    pub namespace: Option<String>,
    /// `metadata.selfLink` (always written empty: not modelled).
    #[prost(string, optional, tag = "4")]
    pub self_link: Option<String>,
    /// `metadata.uid`.
    #[prost(string, optional, tag = "5")]
    pub uid: Option<String>,
    /// `metadata.resourceVersion`.
    #[prost(string, optional, tag = "6")]
    pub resource_version: Option<String>,
    /// `metadata.generation`.
    #[prost(int64, optional, tag = "7")]
    pub generation: Option<i64>,
    /// `metadata.creationTimestamp`; an empty message when unset (Go's zero time).
    #[prost(message, optional, tag = "8")]
    pub creation_timestamp: Option<Time>,
    /// `metadata.deletionTimestamp`.
    #[prost(message, optional, tag = "9")]
    pub deletion_timestamp: Option<Time>,
    /// `metadata.labels` (a `map<string, string>`, read as its entries: [`StringEntry`]).
    #[prost(message, repeated, tag = "11")]
    pub labels: Vec<StringEntry>,
    /// `metadata.annotations`.
    #[prost(message, repeated, tag = "12")]
    pub annotations: Vec<StringEntry>,
    /// `metadata.ownerReferences`.
    #[prost(message, repeated, tag = "13")]
    pub owner_references: Vec<OwnerReference>,
}

/// An entry of a `map<string, string>`. Protobuf writes a map as a repeated message of
/// (`key` = 1, `value` = 2) entries, so the maps are read as their entries and made maps in the
/// model, where a repeated key keeps its last value as in a protobuf map: prost's map decoding,
/// instantiated per map type, cost the KSWE guest 8 KB.
#[derive(Clone, PartialEq, prost::Message)]
pub struct StringEntry {
    /// The key.
    #[prost(string, optional, tag = "1")]
    pub key: Option<String>,
    /// The value.
    #[prost(string, optional, tag = "2")]
    pub value: Option<String>,
}

/// An entry of a `map<string, Quantity>` ([`StringEntry`]).
#[derive(Clone, PartialEq, prost::Message)]
pub struct QuantityEntry {
    /// The resource name.
    #[prost(string, optional, tag = "1")]
    pub key: Option<String>,
    /// The quantity.
    #[prost(message, optional, tag = "2")]
    pub value: Option<Quantity>,
}

/// `meta.v1.ListMeta` (subset; the host writes it empty, as upstream does for `nodeList`).
#[derive(Clone, PartialEq, prost::Message)]
pub struct ListMeta {
    /// `metadata.resourceVersion` of the list.
    #[prost(string, optional, tag = "2")]
    pub resource_version: Option<String>,
}

/// `core.v1.PodResourceClaim`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct PodResourceClaim {
    /// Entry name inside the pod.
    #[prost(string, optional, tag = "1")]
    pub name: Option<String>,
    /// Name of an existing ResourceClaim.
    #[prost(string, optional, tag = "3")]
    pub resource_claim_name: Option<String>,
    /// Name of a ResourceClaimTemplate.
    #[prost(string, optional, tag = "4")]
    pub resource_claim_template_name: Option<String>,
}

/// `k8s.io.apimachinery.pkg.api.resource.Quantity`: the quantity's string form.
#[derive(Clone, PartialEq, prost::Message)]
pub struct Quantity {
    /// The canonical string (`"4"`, `"16Gi"`).
    #[prost(string, optional, tag = "1")]
    pub string: Option<String>,
}

/// `core.v1.ResourceRequirements` (limits and requests; claims not modelled).
#[derive(Clone, PartialEq, prost::Message)]
pub struct ResourceRequirements {
    /// `limits` (a map, read as its entries: [`QuantityEntry`]).
    #[prost(message, repeated, tag = "1")]
    pub limits: Vec<QuantityEntry>,
    /// `requests`.
    #[prost(message, repeated, tag = "2")]
    pub requests: Vec<QuantityEntry>,
}

/// `core.v1.Container` (subset).
#[derive(Clone, PartialEq, prost::Message)]
pub struct Container {
    /// `name`.
    #[prost(string, optional, tag = "1")]
    pub name: Option<String>,
    /// `image`.
    #[prost(string, optional, tag = "2")]
    pub image: Option<String>,
    /// `resources` (a non-pointer Go struct: always written).
    #[prost(message, optional, tag = "8")]
    pub resources: Option<ResourceRequirements>,
    /// `restartPolicy` (a pointer: written when set; `Always` marks a sidecar init container).
    #[prost(string, optional, tag = "24")]
    pub restart_policy: Option<String>,
}

/// `core.v1.PodSpec` (subset).
#[derive(Clone, PartialEq, prost::Message)]
pub struct PodSpec {
    /// `spec.containers`.
    #[prost(message, repeated, tag = "2")]
    pub containers: Vec<Container>,
    /// `spec.initContainers`.
    #[prost(message, repeated, tag = "20")]
    pub init_containers: Vec<Container>,
    /// `spec.nodeName`.
    #[prost(string, optional, tag = "10")]
    pub node_name: Option<String>,
    /// `spec.schedulerName`.
    #[prost(string, optional, tag = "19")]
    pub scheduler_name: Option<String>,
    /// `spec.resourceClaims`.
    #[prost(message, repeated, tag = "39")]
    pub resource_claims: Vec<PodResourceClaim>,
}

/// `core.v1.PodResourceClaimStatus`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct PodResourceClaimStatus {
    /// The `spec.resourceClaims[].name` this status is for.
    #[prost(string, optional, tag = "1")]
    pub name: Option<String>,
    /// Name of the generated claim.
    #[prost(string, optional, tag = "2")]
    pub resource_claim_name: Option<String>,
}

/// `core.v1.ContainerExtendedResourceRequest` (KEP-5004).
#[derive(Clone, PartialEq, prost::Message)]
pub struct ContainerExtendedResourceRequest {
    /// The container's name.
    #[prost(string, optional, tag = "1")]
    pub container_name: Option<String>,
    /// The extended resource name in the container's requests.
    #[prost(string, optional, tag = "2")]
    pub resource_name: Option<String>,
    /// The request of the special claim that serves it.
    #[prost(string, optional, tag = "3")]
    pub request_name: Option<String>,
}

/// `core.v1.PodExtendedResourceClaimStatus` (KEP-5004).
#[derive(Clone, PartialEq, prost::Message)]
pub struct PodExtendedResourceClaimStatus {
    /// `requestMappings`.
    #[prost(message, repeated, tag = "1")]
    pub request_mappings: Vec<ContainerExtendedResourceRequest>,
    /// `resourceClaimName`.
    #[prost(string, optional, tag = "2")]
    pub resource_claim_name: Option<String>,
}

/// `core.v1.PodStatus` (subset).
#[derive(Clone, PartialEq, prost::Message)]
pub struct PodStatus {
    /// `status.resourceClaimStatuses`.
    #[prost(message, repeated, tag = "15")]
    pub resource_claim_statuses: Vec<PodResourceClaimStatus>,
    /// `status.extendedResourceClaimStatus` (a pointer: written when set).
    #[prost(message, optional, tag = "18")]
    pub extended_resource_claim_status: Option<PodExtendedResourceClaimStatus>,
}

/// `core.v1.Pod`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct Pod {
    /// `metadata`.
    #[prost(message, optional, tag = "1")]
    pub metadata: Option<ObjectMeta>,
    /// `spec`.
    #[prost(message, optional, tag = "2")]
    pub spec: Option<PodSpec>,
    /// `status`.
    #[prost(message, optional, tag = "3")]
    pub status: Option<PodStatus>,
}

/// `core.v1.NodeSpec`: no field is modelled; written as an empty message.
#[derive(Clone, PartialEq, prost::Message)]
pub struct NodeSpec {}

/// `core.v1.ContainerImage`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct ContainerImage {
    /// `names`.
    #[prost(string, repeated, tag = "1")]
    pub names: Vec<String>,
    /// `sizeBytes` (non-pointer: always written).
    #[prost(int64, optional, tag = "2")]
    pub size_bytes: Option<i64>,
}

/// `core.v1.NodeStatus` (subset: capacity, allocatable, images).
#[derive(Clone, PartialEq, prost::Message)]
pub struct NodeStatus {
    /// `status.capacity` (a map, read as its entries: [`QuantityEntry`]).
    #[prost(message, repeated, tag = "1")]
    pub capacity: Vec<QuantityEntry>,
    /// `status.allocatable`.
    #[prost(message, repeated, tag = "2")]
    pub allocatable: Vec<QuantityEntry>,
    /// `status.images`.
    #[prost(message, repeated, tag = "8")]
    pub images: Vec<ContainerImage>,
}

/// `core.v1.Node`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct Node {
    /// `metadata`.
    #[prost(message, optional, tag = "1")]
    pub metadata: Option<ObjectMeta>,
    /// `spec`.
    #[prost(message, optional, tag = "2")]
    pub spec: Option<NodeSpec>,
    /// `status`.
    #[prost(message, optional, tag = "3")]
    pub status: Option<NodeStatus>,
}

/// `core.v1.NodeList`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct NodeList {
    /// List metadata (empty).
    #[prost(message, optional, tag = "1")]
    pub metadata: Option<ListMeta>,
    /// The nodes.
    #[prost(message, repeated, tag = "2")]
    pub items: Vec<Node>,
}

/// A model value that has no protobuf form: names the object and the field.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConvertError {
    /// `Kind namespace/name`.
    pub object: String,
    /// JSON path of the field.
    pub field: &'static str,
    /// What is wrong.
    pub reason: String,
}

impl fmt::Display for ConvertError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: field {}: {}", self.object, self.field, self.reason)
    }
}

impl std::error::Error for ConvertError {}

// ---------------------------------------------------------------------------------------------
// model -> protobuf (host side)
// ---------------------------------------------------------------------------------------------

fn meta_to_proto(meta: &model::ObjectMeta, label: &str) -> Result<ObjectMeta, ConvertError> {
    let time = |field: &'static str, text: &str| {
        parse_rfc3339(text).map_err(|reason| ConvertError {
            object: label.to_string(),
            field,
            reason,
        })
    };
    let creation = if meta.creation_timestamp.is_empty() {
        Time::default()
    } else {
        let (seconds, nanos) = time("metadata.creationTimestamp", &meta.creation_timestamp)?;
        Time {
            seconds: Some(seconds),
            nanos: Some(nanos),
        }
    };
    let deletion = match &meta.deletion_timestamp {
        None => None,
        Some(text) => {
            let (seconds, nanos) = time("metadata.deletionTimestamp", text)?;
            Some(Time {
                seconds: Some(seconds),
                nanos: Some(nanos),
            })
        }
    };
    Ok(ObjectMeta {
        name: Some(meta.name.to_string()),
        generate_name: Some(String::new()),
        namespace: Some(meta.namespace.to_string()),
        self_link: Some(String::new()),
        uid: Some(meta.uid.to_string()),
        resource_version: Some(meta.resource_version.to_string()),
        generation: Some(meta.generation.unwrap_or(0)),
        creation_timestamp: Some(creation),
        deletion_timestamp: deletion,
        labels: string_map_to_proto(&meta.labels),
        annotations: string_map_to_proto(&meta.annotations),
        owner_references: meta
            .owner_references
            .iter()
            .map(|o| OwnerReference {
                kind: Some(o.kind.to_string()),
                name: Some(o.name.to_string()),
                uid: Some(o.uid.to_string()),
                api_version: Some(o.api_version.to_string()),
                controller: o.controller,
            })
            .collect(),
    })
}

fn string_map_to_proto(map: &model::Map<String, String>) -> Vec<StringEntry> {
    map.iter()
        .map(|(k, v)| StringEntry {
            key: Some(k.clone()),
            value: Some(v.clone()),
        })
        .collect()
}

fn quantities_to_proto(
    map: &model::Map<String, sharing_affinity_core::quantity::Quantity>,
) -> Vec<QuantityEntry> {
    map.iter()
        .map(|(k, v)| QuantityEntry {
            key: Some(k.clone()),
            value: Some(Quantity {
                string: Some(v.to_string()),
            }),
        })
        .collect()
}

/// Quantities from the host's protobuf. The scheduler sends the API server's canonical form; an
/// entry that does not parse is left out (the guest reads only identity fields of `currentPod`
/// and `node`, never their resources, so nothing decides on it).
fn quantities_from_proto(
    entries: Vec<QuantityEntry>,
) -> model::Map<String, sharing_affinity_core::quantity::Quantity> {
    entries
        .into_iter()
        .filter_map(|e| Some((e.key.unwrap_or_default(), e.value?.string?.parse().ok()?)))
        .collect()
}

/// A `map<string, string>` from its entries: an absent key or value is the empty string, as in
/// protobuf; a repeated key keeps its last value.
fn string_map_from_proto(entries: Vec<StringEntry>) -> model::Map<String, String> {
    entries
        .into_iter()
        .map(|e| (e.key.unwrap_or_default(), e.value.unwrap_or_default()))
        .collect()
}

fn containers_to_proto(containers: &[model::Container]) -> Vec<Container> {
    containers
        .iter()
        .map(|c| Container {
            name: Some(c.name.clone()),
            image: Some(c.image.clone()),
            resources: Some(ResourceRequirements {
                limits: quantities_to_proto(&c.resources.limits),
                requests: quantities_to_proto(&c.resources.requests),
            }),
            restart_policy: c.restart_policy.clone(),
        })
        .collect()
}

fn containers_from_proto(containers: Vec<Container>) -> Vec<model::Container> {
    containers
        .into_iter()
        .map(|c| {
            let r = c.resources.unwrap_or_default();
            model::Container {
                name: c.name.unwrap_or_default(),
                image: c.image.unwrap_or_default(),
                resources: model::ResourceRequirements {
                    limits: quantities_from_proto(r.limits),
                    requests: quantities_from_proto(r.requests),
                },
                restart_policy: c.restart_policy,
            }
        })
        .collect()
}

/// Encodes a model Pod as the protobuf `core.v1.Pod` the Go host would send.
pub fn pod_to_proto(pod: &model::Pod) -> Result<Pod, ConvertError> {
    let label = format!("Pod {}", key(&pod.metadata));
    Ok(Pod {
        metadata: Some(meta_to_proto(&pod.metadata, &label)?),
        spec: Some(PodSpec {
            containers: containers_to_proto(&pod.spec.containers),
            init_containers: containers_to_proto(&pod.spec.init_containers),
            node_name: Some(pod.spec.node_name.clone()),
            scheduler_name: Some(pod.spec.scheduler_name.clone()),
            resource_claims: pod
                .spec
                .resource_claims
                .iter()
                .map(|c| PodResourceClaim {
                    name: Some(c.name.clone()),
                    resource_claim_name: c.resource_claim_name.clone(),
                    resource_claim_template_name: c.resource_claim_template_name.clone(),
                })
                .collect(),
        }),
        status: Some(PodStatus {
            resource_claim_statuses: pod
                .status
                .resource_claim_statuses
                .iter()
                .map(|s| PodResourceClaimStatus {
                    name: Some(s.name.clone()),
                    resource_claim_name: s.resource_claim_name.clone(),
                })
                .collect(),
            extended_resource_claim_status: pod.status.extended_resource_claim_status.as_ref().map(|s| {
                PodExtendedResourceClaimStatus {
                    request_mappings: s
                        .request_mappings
                        .iter()
                        .map(|m| ContainerExtendedResourceRequest {
                            container_name: Some(m.container_name.clone()),
                            resource_name: Some(m.resource_name.clone()),
                            request_name: Some(m.request_name.clone()),
                        })
                        .collect(),
                    resource_claim_name: Some(s.resource_claim_name.clone()),
                }
            }),
        }),
    })
}

/// Encodes a model Node as the protobuf `core.v1.Node` the Go host would send.
pub fn node_to_proto(node: &model::Node) -> Result<Node, ConvertError> {
    let label = format!("Node {}", node.metadata.name);
    Ok(Node {
        metadata: Some(meta_to_proto(&node.metadata, &label)?),
        spec: Some(NodeSpec {}),
        status: Some(NodeStatus {
            capacity: quantities_to_proto(&node.status.capacity),
            allocatable: quantities_to_proto(&node.status.allocatable),
            images: node
                .status
                .images
                .iter()
                .map(|i| ContainerImage {
                    names: i.names.clone(),
                    size_bytes: Some(i.size_bytes),
                })
                .collect(),
        }),
    })
}

fn key(meta: &model::ObjectMeta) -> String {
    if meta.namespace.is_empty() {
        meta.name.to_string()
    } else {
        format!("{}/{}", meta.namespace, meta.name)
    }
}

// ---------------------------------------------------------------------------------------------
// protobuf -> model (guest side)
// ---------------------------------------------------------------------------------------------

fn meta_from_proto(meta: ObjectMeta) -> model::ObjectMeta {
    let time = |t: Time| format_rfc3339(t.seconds.unwrap_or(0));
    model::ObjectMeta {
        name: meta.name.unwrap_or_default().into(),
        namespace: meta.namespace.unwrap_or_default().into(),
        uid: meta.uid.unwrap_or_default(),
        labels: string_map_from_proto(meta.labels),
        annotations: std::sync::Arc::new(string_map_from_proto(meta.annotations)),
        // Go's zero time (an empty message) marshals to JSON null: leave the field unset.
        creation_timestamp: meta
            .creation_timestamp
            .filter(|t| t.seconds.is_some())
            .map(time)
            .unwrap_or_default(),
        resource_version: meta.resource_version.unwrap_or_default().into(),
        generation: meta.generation.filter(|g| *g != 0),
        owner_references: meta
            .owner_references
            .into_iter()
            .map(|o| model::OwnerReference {
                api_version: o.api_version.unwrap_or_default().into(),
                kind: o.kind.unwrap_or_default().into(),
                name: o.name.unwrap_or_default().into(),
                uid: o.uid.unwrap_or_default(),
                controller: o.controller,
            })
            .collect(),
        deletion_timestamp: meta.deletion_timestamp.map(time),
    }
}

/// Decodes the protobuf Pod into the model (fields outside the model are dropped).
pub fn pod_from_proto(pod: Pod) -> model::Pod {
    let spec = pod.spec.unwrap_or_default();
    let status = pod.status.unwrap_or_default();
    model::Pod {
        metadata: meta_from_proto(pod.metadata.unwrap_or_default()),
        spec: model::PodSpec {
            containers: containers_from_proto(spec.containers),
            init_containers: containers_from_proto(spec.init_containers),
            node_name: spec.node_name.unwrap_or_default(),
            scheduler_name: spec.scheduler_name.unwrap_or_default(),
            resource_claims: spec
                .resource_claims
                .into_iter()
                .map(|c| model::PodResourceClaim {
                    name: c.name.unwrap_or_default(),
                    resource_claim_name: c.resource_claim_name,
                    resource_claim_template_name: c.resource_claim_template_name,
                })
                .collect(),
        },
        status: model::PodStatus {
            resource_claim_statuses: status
                .resource_claim_statuses
                .into_iter()
                .map(|s| model::PodResourceClaimStatus {
                    name: s.name.unwrap_or_default(),
                    resource_claim_name: s.resource_claim_name,
                })
                .collect(),
            extended_resource_claim_status: status.extended_resource_claim_status.map(|s| {
                model::PodExtendedResourceClaimStatus {
                    request_mappings: s
                        .request_mappings
                        .into_iter()
                        .map(|m| model::ContainerExtendedResourceRequest {
                            container_name: m.container_name.unwrap_or_default(),
                            resource_name: m.resource_name.unwrap_or_default(),
                            request_name: m.request_name.unwrap_or_default(),
                        })
                        .collect(),
                    resource_claim_name: s.resource_claim_name.unwrap_or_default(),
                }
            }),
        },
    }
}

/// Decodes the protobuf Node into the model.
pub fn node_from_proto(node: Node) -> model::Node {
    let status = node.status.unwrap_or_default();
    model::Node {
        metadata: meta_from_proto(node.metadata.unwrap_or_default()),
        status: std::sync::Arc::new(model::NodeStatus {
            capacity: quantities_from_proto(status.capacity),
            allocatable: quantities_from_proto(status.allocatable),
            images: status
                .images
                .into_iter()
                .map(|i| model::ContainerImage {
                    names: i.names,
                    size_bytes: i.size_bytes.unwrap_or(0),
                })
                .collect(),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use prost::Message;
    use std::collections::BTreeMap;

    /// Maps read as their entries read what protobuf's map encoding writes, and a repeated key
    /// (which a map writer never sends, but the wire allows) keeps its last value, as in a
    /// protobuf map.
    #[test]
    fn map_entries_read_as_protobuf_maps() {
        #[derive(Clone, PartialEq, prost::Message)]
        struct MapShaped {
            #[prost(btree_map = "string, string", tag = "11")]
            labels: BTreeMap<String, String>,
            #[prost(btree_map = "string, string", tag = "12")]
            annotations: BTreeMap<String, String>,
        }
        let written = MapShaped {
            labels: BTreeMap::from([("b".into(), "2".into()), ("a".into(), String::new())]),
            annotations: BTreeMap::from([(String::new(), "v".into())]),
        };
        let meta = meta_from_proto(ObjectMeta::decode(&*written.encode_to_vec()).unwrap());
        assert_eq!(
            meta.labels.iter().collect::<Vec<_>>(),
            [(&"a".into(), &"".into()), (&"b".into(), &"2".into())]
        );
        assert_eq!(meta.annotations.get(""), Some(&"v".to_string()));

        let entry = |k: &str, v: Option<&str>| StringEntry {
            key: Some(k.into()),
            value: v.map(Into::into),
        };
        let repeated = ObjectMeta {
            labels: vec![
                entry("k", Some("first")),
                entry("j", None),
                entry("k", Some("last")),
            ],
            ..Default::default()
        };
        let meta = meta_from_proto(ObjectMeta::decode(&*repeated.encode_to_vec()).unwrap());
        assert_eq!(meta.labels.get("k"), Some(&"last".to_string()));
        assert_eq!(meta.labels.get("j"), Some(&String::new()));
        assert_eq!(meta.labels.len(), 2);
        // And what the model writes is a map's encoding.
        let written = meta_to_proto(&meta, "the pod").unwrap().encode_to_vec();
        let back = MapShaped::decode(&*written).unwrap();
        assert_eq!(
            back.labels,
            BTreeMap::from([("j".into(), String::new()), ("k".into(), "last".into())])
        );
    }

    #[test]
    fn field_numbers_match_generated_proto() {
        // One byte per tag: (field << 3) | wire type 2 (length-delimited).
        let pod = pod_to_proto(&model::Pod::default()).unwrap();
        let bytes = pod.encode_to_vec();
        assert_eq!(bytes[0], (1 << 3) | 2, "Pod.metadata = 1");
        let spec = PodSpec {
            node_name: Some("n".into()),
            ..Default::default()
        }
        .encode_to_vec();
        assert_eq!(spec, vec![(10 << 3) | 2, 1, b'n'], "PodSpec.nodeName = 10");
        let claim = PodSpec {
            resource_claims: vec![PodResourceClaim::default()],
            ..Default::default()
        };
        // Tag 39 needs a two-byte varint: 39 << 3 | 2 = 314 = 0xba 0x02.
        assert_eq!(
            &claim.encode_to_vec()[..2],
            &[0xba, 0x02],
            "PodSpec.resourceClaims = 39"
        );
        let status = PodStatus {
            resource_claim_statuses: vec![PodResourceClaimStatus::default()],
            extended_resource_claim_status: None,
        };
        assert_eq!(
            status.encode_to_vec()[0],
            (15 << 3) | 2,
            "PodStatus.resourceClaimStatuses = 15"
        );
        let meta = ObjectMeta {
            uid: Some("u".into()),
            ..Default::default()
        };
        assert_eq!(
            meta.encode_to_vec(),
            vec![(5 << 3) | 2, 1, b'u'],
            "ObjectMeta.uid = 5"
        );
        let list = NodeList {
            items: vec![Node::default()],
            ..Default::default()
        };
        assert_eq!(list.encode_to_vec(), vec![(2 << 3) | 2, 0], "NodeList.items = 2");
        let container = Container {
            name: None,
            image: Some("i".into()),
            resources: Some(ResourceRequirements {
                limits: Vec::new(),
                requests: vec![QuantityEntry {
                    key: Some("c".into()),
                    value: Some(Quantity {
                        string: Some("1".into()),
                    }),
                }],
            }),
            restart_policy: None,
        };
        assert_eq!(
            container.encode_to_vec(),
            // image = 2; resources = 8 { requests = 2 { map entry key = 1 "c", value = 2 { string = 1 "1" } } }
            vec![
                (2 << 3) | 2,
                1,
                b'i',
                (8 << 3) | 2,
                10,
                (2 << 3) | 2,
                8,
                10,
                1,
                b'c',
                18,
                3,
                10,
                1,
                b'1'
            ],
            "Container.image = 2, resources = 8, ResourceRequirements.requests = 2, Quantity.string = 1"
        );
        let spec = PodSpec {
            containers: vec![Container::default()],
            init_containers: vec![Container::default()],
            ..Default::default()
        };
        assert_eq!(
            spec.encode_to_vec(),
            vec![(2 << 3) | 2, 0, 0xa2, 0x01, 0],
            "PodSpec.containers = 2, initContainers = 20"
        );
        let status = NodeStatus {
            capacity: Vec::new(),
            allocatable: Vec::new(),
            images: vec![ContainerImage {
                names: vec!["n".into()],
                size_bytes: Some(5),
            }],
        };
        assert_eq!(
            status.encode_to_vec(),
            vec![(8 << 3) | 2, 5, (1 << 3) | 2, 1, b'n', 2 << 3, 5],
            "NodeStatus.images = 8, ContainerImage.names = 1, sizeBytes = 2"
        );
    }

    #[test]
    fn extended_resource_claim_status_and_restart_policy_field_numbers() {
        // PodStatus.extendedResourceClaimStatus = 18 (k8s.io/api core/v1 generated.proto).
        let status = PodStatus {
            resource_claim_statuses: Vec::new(),
            extended_resource_claim_status: Some(PodExtendedResourceClaimStatus {
                request_mappings: vec![ContainerExtendedResourceRequest {
                    container_name: Some("c".into()),
                    resource_name: Some("r".into()),
                    request_name: Some("q".into()),
                }],
                resource_claim_name: Some("n".into()),
            }),
        };
        assert_eq!(
            status.encode_to_vec(),
            // 18 = { requestMappings = 1 { containerName = 1, resourceName = 2, requestName = 3 },
            //        resourceClaimName = 2 }
            vec![
                0x92,
                0x01,
                14,
                (1 << 3) | 2,
                9,
                10,
                1,
                b'c',
                18,
                1,
                b'r',
                26,
                1,
                b'q',
                18,
                1,
                b'n'
            ],
            "PodStatus.extendedResourceClaimStatus = 18, PodExtendedResourceClaimStatus.requestMappings = 1, \
             resourceClaimName = 2, ContainerExtendedResourceRequest fields 1..3"
        );
        let container = Container {
            restart_policy: Some("Always".into()),
            ..Default::default()
        };
        // Tag 24 needs a two-byte varint: 24 << 3 | 2 = 194 = 0xc2 0x01.
        assert_eq!(
            &container.encode_to_vec()[..3],
            &[0xc2, 0x01, 6],
            "Container.restartPolicy = 24"
        );
    }

    #[test]
    fn extended_status_and_sidecars_round_trip() {
        let json = r#"{"metadata":{"name":"p","namespace":"ns","uid":"u1"},
            "spec":{"initContainers":[{"name":"side","image":"i","restartPolicy":"Always",
                      "resources":{"requests":{"example.com/gpu":"1"}}}],
                    "containers":[{"name":"main","image":"i","resources":{"requests":{"example.com/gpu":"2"}}}]},
            "status":{"extendedResourceClaimStatus":{"resourceClaimName":"p-extended-resources-abcde",
              "requestMappings":[{"containerName":"main","resourceName":"example.com/gpu",
                                  "requestName":"container-1-request-0"}]}}}"#;
        let pod: model::Pod = serde_json::from_str(json).unwrap();
        assert!(pod.status.extended_resource_claim_status.is_some());
        let bytes = pod_to_proto(&pod).unwrap().encode_to_vec();
        assert_eq!(pod_from_proto(Pod::decode(bytes.as_slice()).unwrap()), pod);
    }

    #[test]
    fn containers_and_node_status_round_trip() {
        let pod: model::Pod = serde_json::from_str(
            r#"{"metadata":{"name":"p","namespace":"ns"},"spec":{
                "initContainers":[{"name":"init","image":"busybox:1.36"}],
                "containers":[{"name":"app","image":"nginx:1.25",
                  "resources":{"requests":{"cpu":"500m","memory":"1Gi"},"limits":{"memory":"2Gi"}}}]}}"#,
        )
        .unwrap();
        assert_eq!(
            pod.spec.containers[0].resources.requests["cpu"].to_string(),
            "500m"
        );
        let bytes = pod_to_proto(&pod).unwrap().encode_to_vec();
        assert_eq!(pod_from_proto(Pod::decode(bytes.as_slice()).unwrap()), pod);
        let node: model::Node = serde_json::from_str(
            r#"{"metadata":{"name":"n"},"status":{"capacity":{"cpu":"8"},"allocatable":{"cpu":"7500m"},
                "images":[{"names":["nginx@sha256:ab","nginx:1.25"],"sizeBytes":187000000}]}}"#,
        )
        .unwrap();
        let bytes = node_to_proto(&node).unwrap().encode_to_vec();
        assert_eq!(node_from_proto(Node::decode(bytes.as_slice()).unwrap()), node);
    }

    #[test]
    fn pod_round_trips_through_protobuf() {
        let json = r#"{"metadata":{"name":"p","namespace":"ns","uid":"u1","labels":{"a":"b"},
            "creationTimestamp":"2024-05-06T07:08:09Z","resourceVersion":"7","generation":2,
            "ownerReferences":[{"apiVersion":"apps/v1","kind":"ReplicaSet","name":"rs","uid":"o1","controller":true}]},
            "spec":{"nodeName":"n1","schedulerName":"s","resourceClaims":[{"name":"gpu","resourceClaimTemplateName":"t"}]},
            "status":{"resourceClaimStatuses":[{"name":"gpu","resourceClaimName":"p-gpu"}]}}"#;
        let pod: model::Pod = serde_json::from_str(json).unwrap();
        let bytes = pod_to_proto(&pod).unwrap().encode_to_vec();
        let back = pod_from_proto(Pod::decode(bytes.as_slice()).unwrap());
        assert_eq!(back, pod);
    }

    #[test]
    fn empty_bytes_decode_to_an_empty_pod_and_zero_time_stays_unset() {
        let pod = pod_from_proto(Pod::decode(&[][..]).unwrap());
        assert_eq!(pod, model::Pod::default());
        let bytes = pod_to_proto(&model::Pod::default()).unwrap().encode_to_vec();
        assert!(
            !bytes.is_empty(),
            "gogo writes non-pointer fields even when empty"
        );
        assert_eq!(
            pod_from_proto(Pod::decode(bytes.as_slice()).unwrap()),
            model::Pod::default()
        );
    }

    #[test]
    fn bad_timestamp_names_object_and_field() {
        let mut pod = model::Pod::default();
        pod.metadata.name = "p".into();
        pod.metadata.namespace = "ns".into();
        pod.metadata.creation_timestamp = "yesterday".into();
        let err = pod_to_proto(&pod).unwrap_err().to_string();
        assert!(
            err.starts_with("Pod ns/p: field metadata.creationTimestamp:"),
            "{err}"
        );
    }
}
