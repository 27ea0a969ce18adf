//! `resource.k8s.io/v1`: ResourceSlice, DeviceClass, ResourceClaim, ResourceClaimTemplate, and
//! DeviceTaintRule (`v1`, `v1beta2`, `v1alpha3`), with the KEP-5981 `sharingAffinity` field of
//! ResourceSlices.

use std::sync::Arc;

use serde::{Deserialize, Serialize};

use super::{Map, Name, NodeSelector, ObjectMeta, exact};
use crate::quantity::Quantity;

/// `resource.k8s.io/v1` ResourceSlice.
#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ResourceSlice {
    /// Object metadata.
    #[serde(default)]
    pub metadata: ObjectMeta,
    /// Slice spec.
    #[serde(deserialize_with = "crate::json::required")]
    pub spec: ResourceSliceSpec,
}

/// `ResourceSliceSpec`.
#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ResourceSliceSpec {
    /// Driver name.
    #[serde(deserialize_with = "crate::json::required")]
    pub driver: String,
    /// The pool this slice belongs to.
    #[serde(deserialize_with = "crate::json::required")]
    pub pool: ResourcePool,
    /// Node-local slice: the node it belongs to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_name: Option<Name>,
    /// Network-attached slice: the nodes that can reach it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_selector: Option<NodeSelector>,
    /// The slice is reachable from every node.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub all_nodes: Option<bool>,
    /// Each device sets its own node selection.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub per_device_node_selection: Option<bool>,
    /// The devices. Shared (`Arc`) with the slice index ([`crate::index::DeviceData::device`]),
    /// which reads them without a copy of its own.
    #[serde(default, skip_serializing_if = "Vec::is_empty", with = "shared_devices")]
    pub devices: Vec<Arc<Device>>,
    /// Counter sets consumed by partitionable devices.
    #[serde(
        default,
        deserialize_with = "exact::vec",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub shared_counters: Vec<CounterSet>,
    /// KEP-5981: sharing-affinity extractors (only in metadata slices, which have no devices).
    /// Shared (`Arc`): a driver publishes the same extractors for each of its pools, and the
    /// stored slices hold one copy of each ([`crate::index::PoolExtractor::spec`] too).
    #[serde(
        default,
        deserialize_with = "exact::vec",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub sharing_affinity: Vec<Arc<SharingAffinityExtractor>>,
}

/// `ResourcePool`.
#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ResourcePool {
    /// Pool name.
    #[serde(deserialize_with = "crate::json::required")]
    pub name: Name,
    /// Generation; consumers use only the highest.
    #[serde(deserialize_with = "crate::json::required")]
    pub generation: i64,
    /// Number of slices in this generation of the pool.
    #[serde(deserialize_with = "crate::json::required")]
    pub resource_slice_count: i64,
}

/// `CounterSet`.
#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct CounterSet {
    /// Counter-set name, unique in the pool.
    #[serde(deserialize_with = "crate::json::required")]
    pub name: String,
    /// Counters by name.
    #[serde(default)]
    pub counters: Map<String, Counter>,
}

/// `Counter`.
#[derive(Clone, Debug, Deserialize, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct Counter {
    /// Counter value.
    #[serde(deserialize_with = "crate::json::required")]
    pub value: Quantity,
}

/// `Device`.
#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct Device {
    /// Device name, unique in the pool.
    #[serde(deserialize_with = "crate::json::required")]
    pub name: Name,
    /// Attributes by qualified name (without domain: the driver's domain). The names are
    /// shared: the devices of a driver repeat the same few names, and the plugin stores one copy
    /// of each.
    #[serde(default, skip_serializing_if = "Map::is_empty")]
    pub attributes: Map<Arc<str>, DeviceAttribute>,
    /// Capacities by qualified name. Shared: a driver's devices usually publish equal
    /// capacities, and the plugin stores one copy of each (change it with `Arc::make_mut`).
    #[serde(default = "no_capacity", skip_serializing_if = "capacity_empty")]
    pub capacity: Arc<Map<String, DeviceCapacity>>,
    /// Counters this device consumes (partitionable devices).
    #[serde(
        default,
        deserialize_with = "exact::vec",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub consumes_counters: Vec<DeviceCounterConsumption>,
    /// Per-device node name (with `perDeviceNodeSelection`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_name: Option<Name>,
    /// Per-device node selector (with `perDeviceNodeSelection`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_selector: Option<NodeSelector>,
    /// Per-device all-nodes flag (with `perDeviceNodeSelection`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub all_nodes: Option<bool>,
    /// Taints.
    #[serde(
        default,
        deserialize_with = "exact::vec",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub taints: Vec<DeviceTaint>,
    /// KEP-5075: the device can be allocated more than once.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub allow_multiple_allocations: Option<bool>,
    /// KEP-5007: using the device binds the claim to the node it was allocated for, even when
    /// the device is reachable from other nodes: the allocation's node selector names that node.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub binds_to_node: Option<bool>,
    /// Binding conditions (copied into the allocation result).
    #[serde(
        default,
        deserialize_with = "exact::vec",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub binding_conditions: Vec<String>,
    /// Binding failure conditions (copied into the allocation result).
    #[serde(
        default,
        deserialize_with = "exact::vec",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub binding_failure_conditions: Vec<String>,
    /// The seed's structured-configuration design (not in the resource.k8s.io API; today's API
    /// servers drop it): which structured claim attributes must match for sharing this device.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sharing_affinity: Option<DeviceSharingAffinity>,
}

/// No capacity: one shared empty map, so that decoding a device without capacities does not
/// allocate.
fn no_capacity() -> Arc<Map<String, DeviceCapacity>> {
    static EMPTY: std::sync::LazyLock<Arc<Map<String, DeviceCapacity>>> =
        std::sync::LazyLock::new(Arc::default);
    Arc::clone(&EMPTY)
}

fn capacity_empty(capacity: &Arc<Map<String, DeviceCapacity>>) -> bool {
    capacity.is_empty()
}

/// `Device.sharingAffinity` of the seed's structured-configuration design.
#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct DeviceSharingAffinity {
    /// Qualified names of the structured claim attributes that must be equal among the claims
    /// sharing the device (without a domain: the driver's domain).
    #[serde(default, deserialize_with = "exact::vec")]
    pub attribute_keys: Vec<String>,
}

/// `DeviceConfiguration.structured` of the seed's structured-configuration design (not in the
/// resource.k8s.io API; today's API servers drop it): typed attributes the scheduler reads.
#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct StructuredDeviceConfiguration {
    /// The driver whose devices the attributes are for; names without a domain are in its domain.
    #[serde(deserialize_with = "crate::json::required")]
    pub driver: String,
    /// Attributes by qualified name.
    #[serde(default)]
    pub attributes: Map<String, DeviceAttribute>,
}

/// `DeviceAttribute`: a one-of of scalar and list values, stored as the typed value when exactly
/// one member is set (as API validation requires), and as written otherwise, so that an invalid
/// attribute is reported (upstream: "unsupported attribute value") and written back unchanged.
/// The typed form is about a fifth of the eight optional members' size: at 40,000 devices with
/// four attributes each, that was about 12 MiB of guest memory.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(from = "AttributeFields")]
pub enum DeviceAttribute {
    /// Exactly one member set.
    Valid(AttributeValue),
    /// No member, or several, set.
    Invalid(Box<AttributeFields>),
}

/// The members of a `DeviceAttribute` as written.
#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct AttributeFields {
    /// Integer value.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub int: Option<i64>,
    /// Boolean value.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bool: Option<bool>,
    /// String value.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub string: Option<Name>,
    /// Semantic version value.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<Name>,
    /// List of integers.
    #[serde(
        default,
        deserialize_with = "exact::option_vec",
        skip_serializing_if = "Option::is_none"
    )]
    pub ints: Option<Vec<i64>>,
    /// List of booleans.
    #[serde(
        default,
        deserialize_with = "exact::option_vec",
        skip_serializing_if = "Option::is_none"
    )]
    pub bools: Option<Vec<bool>>,
    /// List of strings.
    #[serde(
        default,
        deserialize_with = "exact::option_vec",
        skip_serializing_if = "Option::is_none"
    )]
    pub strings: Option<Vec<String>>,
    /// List of versions.
    #[serde(
        default,
        deserialize_with = "exact::option_vec",
        skip_serializing_if = "Option::is_none"
    )]
    pub versions: Option<Vec<String>>,
}

impl From<AttributeFields> for DeviceAttribute {
    fn from(f: AttributeFields) -> Self {
        let set = [
            f.int.is_some(),
            f.bool.is_some(),
            f.string.is_some(),
            f.version.is_some(),
            f.ints.is_some(),
            f.bools.is_some(),
            f.strings.is_some(),
            f.versions.is_some(),
        ];
        if set.iter().filter(|b| **b).count() != 1 {
            return DeviceAttribute::Invalid(Box::new(f));
        }
        DeviceAttribute::Valid(match f {
            AttributeFields { int: Some(v), .. } => AttributeValue::Int(v),
            AttributeFields { bool: Some(v), .. } => AttributeValue::Bool(v),
            AttributeFields { string: Some(v), .. } => AttributeValue::String(v),
            AttributeFields { version: Some(v), .. } => AttributeValue::Version(v),
            AttributeFields { ints: Some(v), .. } => AttributeValue::Ints(v),
            AttributeFields { bools: Some(v), .. } => AttributeValue::Bools(v),
            AttributeFields { strings: Some(v), .. } => AttributeValue::Strings(v),
            AttributeFields {
                versions: Some(v), ..
            } => AttributeValue::Versions(v),
            AttributeFields { .. } => unreachable!("counted exactly one member set"),
        })
    }
}

impl Serialize for DeviceAttribute {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let value = match self {
            DeviceAttribute::Valid(value) => value,
            DeviceAttribute::Invalid(fields) => return fields.serialize(serializer),
        };
        let mut map = serializer.serialize_map(Some(1))?;
        match value {
            AttributeValue::Int(v) => map.serialize_entry("int", v)?,
            AttributeValue::Bool(v) => map.serialize_entry("bool", v)?,
            AttributeValue::String(v) => map.serialize_entry("string", v)?,
            AttributeValue::Version(v) => map.serialize_entry("version", v)?,
            AttributeValue::Ints(v) => map.serialize_entry("ints", v)?,
            AttributeValue::Bools(v) => map.serialize_entry("bools", v)?,
            AttributeValue::Strings(v) => map.serialize_entry("strings", v)?,
            AttributeValue::Versions(v) => map.serialize_entry("versions", v)?,
        }
        map.end()
    }
}

/// A typed attribute value: the one member of a [`DeviceAttribute`] that is set.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum AttributeValue {
    /// `int`.
    Int(i64),
    /// `bool`.
    Bool(bool),
    /// `string`.
    String(Name),
    /// `version` (semver 2.0.0 text).
    Version(Name),
    /// `ints`.
    Ints(Vec<i64>),
    /// `bools`.
    Bools(Vec<bool>),
    /// `strings`.
    Strings(Vec<String>),
    /// `versions`.
    Versions(Vec<String>),
}

impl DeviceAttribute {
    /// The one value that is set, or `None` when zero or several members are set
    /// (upstream: "unsupported attribute value").
    pub fn value(&self) -> Option<AttributeValue> {
        self.as_value().cloned()
    }

    /// [`DeviceAttribute::value`] without a copy.
    pub fn as_value(&self) -> Option<&AttributeValue> {
        match self {
            DeviceAttribute::Valid(v) => Some(v),
            DeviceAttribute::Invalid(_) => None,
        }
    }
}

/// `DeviceCapacity`.
#[derive(Clone, Debug, Deserialize, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct DeviceCapacity {
    /// Total capacity.
    #[serde(deserialize_with = "crate::json::required")]
    pub value: Quantity,
    /// How requests for this capacity are rounded and validated (multi-allocatable devices only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request_policy: Option<Arc<CapacityRequestPolicy>>,
}

/// `CapacityRequestPolicy`.
#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct CapacityRequestPolicy {
    /// Amount consumed when the request does not name this capacity.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default: Option<Quantity>,
    /// Allowed values, ascending.
    #[serde(
        default,
        deserialize_with = "exact::vec",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub valid_values: Vec<Quantity>,
    /// Allowed range (boxed: three quantities that most policies do not set).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub valid_range: Option<Box<CapacityRequestPolicyRange>>,
}

impl CapacityRequestPolicy {
    /// Equal and printed the same ([`Quantity::identical`] for every quantity): a consumed
    /// amount taken from a policy prints as the policy writes it, so only identical policies
    /// may be shared between devices.
    pub fn identical(&self, other: &CapacityRequestPolicy) -> bool {
        fn opt(a: Option<&Quantity>, b: Option<&Quantity>) -> bool {
            match (a, b) {
                (None, None) => true,
                (Some(a), Some(b)) => a.identical(b),
                _ => false,
            }
        }
        let range = match (self.valid_range.as_deref(), other.valid_range.as_deref()) {
            (None, None) => true,
            (Some(a), Some(b)) => {
                a.min.identical(&b.min)
                    && opt(a.max.as_ref(), b.max.as_ref())
                    && opt(a.step.as_ref(), b.step.as_ref())
            }
            _ => false,
        };
        range
            && opt(self.default.as_ref(), other.default.as_ref())
            && self.valid_values.len() == other.valid_values.len()
            && self
                .valid_values
                .iter()
                .zip(&other.valid_values)
                .all(|(a, b)| a.identical(b))
    }
}

/// `CapacityRequestPolicyRange`.
#[derive(Clone, Debug, Deserialize, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct CapacityRequestPolicyRange {
    /// Minimum.
    #[serde(deserialize_with = "crate::json::required")]
    pub min: Quantity,
    /// Maximum.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max: Option<Quantity>,
    /// Step.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub step: Option<Quantity>,
}

/// `DeviceCounterConsumption`.
#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct DeviceCounterConsumption {
    /// The counter set in the same pool.
    #[serde(deserialize_with = "crate::json::required")]
    pub counter_set: String,
    /// Amounts consumed per counter.
    #[serde(default)]
    pub counters: Map<String, Counter>,
    /// KEP-5963 compatibility groups (alpha in Kubernetes v1.37, `DRADeviceCompatibilityGroups`,
    /// off by default). Read so that it is never dropped silently: the index makes a pool that
    /// uses it invalid, as v1.37's scheduler with the gate off skips such a pool.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub compatibility_groups: Vec<String>,
}

/// `DeviceTaint`.
#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct DeviceTaint {
    /// Taint key.
    #[serde(deserialize_with = "crate::json::required")]
    pub key: String,
    /// Taint value.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub value: String,
    /// `None`, `NoSchedule` or `NoExecute`.
    #[serde(deserialize_with = "crate::json::required")]
    pub effect: String,
    /// When the taint was added (RFC 3339); informational.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub time_added: Option<String>,
}

/// `DeviceToleration`.
#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct DeviceToleration {
    /// Taint key; empty matches all keys (with `Exists`).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub key: String,
    /// `Equal` (default) or `Exists`.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub operator: String,
    /// Value for `Equal`.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub value: String,
    /// Effect to match; empty matches all effects.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub effect: String,
    /// Ignored by the allocator (eviction only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub toleration_seconds: Option<i64>,
}

/// KEP-5981 `SharingAffinityExtractor`.
#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct SharingAffinityExtractor {
    /// Devices this extractor applies to; none means every device of the pool.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub selector: Option<DeviceSelector>,
    /// Affinity key → CEL expression over `object` (the parsed opaque parameters).
    #[serde(default)]
    pub cel: Map<String, String>,
}

// ---------------------------------------------------------------------------------------------
// resource.k8s.io/v1: DeviceClass, ResourceClaim, ResourceClaimTemplate
// ---------------------------------------------------------------------------------------------

/// `DeviceSelector`.
#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct DeviceSelector {
    /// CEL selector.
    #[serde(deserialize_with = "crate::json::required")]
    pub cel: CelDeviceSelector,
}

/// `CELDeviceSelector`.
#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct CelDeviceSelector {
    /// The expression; must evaluate to bool.
    #[serde(deserialize_with = "crate::json::required")]
    pub expression: String,
}

/// `resource.k8s.io/v1` DeviceClass.
#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct DeviceClass {
    /// Object metadata.
    #[serde(default)]
    pub metadata: ObjectMeta,
    /// Class spec.
    #[serde(default)]
    pub spec: DeviceClassSpec,
}

/// `DeviceClassSpec`.
#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct DeviceClassSpec {
    /// Selectors every device of the class must match.
    #[serde(
        default,
        deserialize_with = "exact::vec",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub selectors: Vec<DeviceSelector>,
    /// Configuration passed to drivers (`FromClass` in the allocation result).
    #[serde(
        default,
        deserialize_with = "exact::vec",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub config: Vec<DeviceClassConfiguration>,
    /// KEP-5004: the extended resource name pods use to request devices of this class.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub extended_resource_name: Option<String>,
}

/// `DeviceClassConfiguration`.
#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct DeviceClassConfiguration {
    /// Opaque driver configuration (shared: see [`OpaqueDeviceConfiguration`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub opaque: Option<Arc<OpaqueDeviceConfiguration>>,
}

/// `OpaqueDeviceConfiguration`. Held behind an `Arc` by the configurations that carry it: a
/// claim's allocation copies its spec's configuration, and claims from one template carry equal
/// ones; the plugin stores one copy of each.
#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct OpaqueDeviceConfiguration {
    /// Driver the parameters are for.
    #[serde(deserialize_with = "crate::json::required")]
    pub driver: String,
    /// Arbitrary JSON parameters.
    #[serde(default)]
    pub parameters: Parameters,
}

/// `opaque.parameters`: arbitrary JSON, kept as its canonical text (compact, keys sorted: what
/// serialising the parsed value gives; [`crate::json::canonical`], which reads numbers exactly).
/// A parsed `serde_json::Value` costs a B-tree leaf per object; at 20,000 allocated claims, each
/// with its config in the spec and in the allocation, that was about 20 MiB of guest memory. CEL
/// extractors read the text when they run ([`crate::cel::CelObject::from_parameters`]).
#[derive(Clone, Debug, Serialize)]
#[serde(transparent)]
pub struct Parameters(Box<serde_json::value::RawValue>);

impl Parameters {
    /// The canonical JSON text.
    pub fn get(&self) -> &str {
        self.0.get()
    }
}

impl Default for Parameters {
    /// `null`, what an absent `parameters` decodes to.
    fn default() -> Self {
        Parameters(serde_json::value::RawValue::NULL.to_owned())
    }
}

/// Equal when the JSON values are equal (the text is canonical).
impl PartialEq for Parameters {
    fn eq(&self, other: &Self) -> bool {
        self.get() == other.get()
    }
}

impl<'de> Deserialize<'de> for Parameters {
    /// Takes the value's text as written and makes it canonical: serde_json's own number parser
    /// (inexact without its `float_roundtrip` feature, which the guests leave out) never reads it.
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let raw = Box::<serde_json::value::RawValue>::deserialize(deserializer)?;
        crate::json::canonical(raw.get())
            .and_then(serde_json::value::RawValue::from_string)
            .map(Parameters)
            .map_err(serde::de::Error::custom)
    }
}

/// `resource.k8s.io/v1` ResourceClaim.
#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ResourceClaim {
    /// Object metadata.
    #[serde(default)]
    pub metadata: ObjectMeta,
    /// Claim spec, shared: claims generated from one template carry equal specs, and the plugin
    /// stores one copy of each (change it with `Arc::make_mut`).
    #[serde(default)]
    pub spec: Arc<ResourceClaimSpec>,
    /// Claim status.
    #[serde(default)]
    pub status: ResourceClaimStatus,
}

/// `ResourceClaimSpec`.
#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ResourceClaimSpec {
    /// Device requests, constraints and config.
    #[serde(default)]
    pub devices: DeviceClaim,
}

/// `DeviceClaim`.
#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct DeviceClaim {
    /// Requests.
    #[serde(
        default,
        deserialize_with = "exact::vec",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub requests: Vec<DeviceRequest>,
    /// Constraints across requests.
    #[serde(
        default,
        deserialize_with = "exact::vec",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub constraints: Vec<DeviceConstraint>,
    /// Configuration (also the source of sharing-affinity values).
    #[serde(
        default,
        deserialize_with = "exact::vec",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub config: Vec<DeviceClaimConfiguration>,
}

/// `DeviceRequest`: exactly one of `exactly` and `firstAvailable`.
#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct DeviceRequest {
    /// Request name.
    #[serde(deserialize_with = "crate::json::required")]
    pub name: String,
    /// A request for exactly this kind of device.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exactly: Option<ExactDeviceRequest>,
    /// Prioritized alternatives; the first that can be satisfied wins.
    #[serde(
        default,
        deserialize_with = "exact::vec",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub first_available: Vec<DeviceSubRequest>,
}

/// `ExactDeviceRequest`.
#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ExactDeviceRequest {
    /// DeviceClass name.
    #[serde(deserialize_with = "crate::json::required")]
    pub device_class_name: String,
    /// Additional selectors.
    #[serde(
        default,
        deserialize_with = "exact::vec",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub selectors: Vec<DeviceSelector>,
    /// `ExactCount` (default) or `All`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub allocation_mode: Option<String>,
    /// Number of devices for `ExactCount` (default 1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub count: Option<i64>,
    /// Admin access: the device may be in use.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub admin_access: Option<bool>,
    /// Tolerations for device taints.
    #[serde(
        default,
        deserialize_with = "exact::vec",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub tolerations: Vec<DeviceToleration>,
    /// Consumable-capacity requests, per device allocation.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub capacity: Option<CapacityRequirements>,
}

/// `DeviceSubRequest`.
#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct DeviceSubRequest {
    /// Subrequest name.
    #[serde(deserialize_with = "crate::json::required")]
    pub name: String,
    /// DeviceClass name.
    #[serde(deserialize_with = "crate::json::required")]
    pub device_class_name: String,
    /// Additional selectors.
    #[serde(
        default,
        deserialize_with = "exact::vec",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub selectors: Vec<DeviceSelector>,
    /// `ExactCount` (default) or `All`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub allocation_mode: Option<String>,
    /// Number of devices for `ExactCount` (default 1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub count: Option<i64>,
    /// Tolerations for device taints.
    #[serde(
        default,
        deserialize_with = "exact::vec",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub tolerations: Vec<DeviceToleration>,
    /// Consumable-capacity requests, per device allocation.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub capacity: Option<CapacityRequirements>,
}

/// `CapacityRequirements`.
#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct CapacityRequirements {
    /// Requested amount per capacity name.
    #[serde(default)]
    pub requests: Map<String, Quantity>,
}

/// `DeviceConstraint`.
#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct DeviceConstraint {
    /// Requests the constraint applies to; empty = all.
    #[serde(
        default,
        deserialize_with = "exact::vec",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub requests: Vec<String>,
    /// All devices must have the same value of this attribute.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub match_attribute: Option<String>,
    /// All devices must have distinct values of this attribute.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub distinct_attribute: Option<String>,
}

/// `DeviceClaimConfiguration`.
#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct DeviceClaimConfiguration {
    /// Requests the config applies to; empty = all; `<req>` covers its subrequests.
    #[serde(
        default,
        deserialize_with = "exact::vec",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub requests: Vec<String>,
    /// Opaque driver configuration (shared: see [`OpaqueDeviceConfiguration`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub opaque: Option<Arc<OpaqueDeviceConfiguration>>,
    /// Structured configuration (the seed's design; not in the resource.k8s.io API).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub structured: Option<StructuredDeviceConfiguration>,
}

/// `ResourceClaimStatus`.
#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ResourceClaimStatus {
    /// The allocation, once allocated.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub allocation: Option<AllocationResult>,
    /// Consumers of the claim.
    #[serde(
        default,
        deserialize_with = "exact::vec",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub reserved_for: Vec<ResourceClaimConsumerReference>,
    /// What the drivers report about the allocated devices (KEP-4817); the plugin reads their
    /// conditions, which binding conditions (KEP-5007) refer to.
    #[serde(
        default,
        deserialize_with = "exact::vec",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub devices: Vec<AllocatedDeviceStatus>,
}

/// `AllocatedDeviceStatus`: a driver's report on one allocated device. `data` and `networkData`
/// are the driver's own and not read.
#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct AllocatedDeviceStatus {
    /// Driver.
    #[serde(default)]
    pub driver: Name,
    /// Pool.
    #[serde(default)]
    pub pool: Name,
    /// Device.
    #[serde(default)]
    pub device: Name,
    /// The share of a multi-allocatable device the report is about.
    #[serde(rename = "shareID", default, skip_serializing_if = "Option::is_none")]
    pub share_id: Option<String>,
    /// The device's conditions.
    #[serde(
        default,
        deserialize_with = "exact::vec",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub conditions: Vec<Condition>,
}

/// `metav1.Condition`, the fields the plugin reads.
#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct Condition {
    /// The condition's type.
    #[serde(rename = "type", default)]
    pub type_: String,
    /// `True`, `False` or `Unknown`.
    #[serde(default)]
    pub status: String,
    /// Machine-readable reason of the last transition.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub reason: String,
    /// Human-readable message.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub message: String,
}

impl ResourceClaimStatus {
    /// Why the allocation can no longer be used, if a driver reported one of the binding failure
    /// conditions (KEP-5007) of an allocated device as `True`: upstream's DynamicResources then
    /// treats the claim as unavailable on every node.
    pub fn binding_failure(&self) -> Option<String> {
        let allocation = self.allocation.as_ref()?;
        for r in &allocation.devices.results {
            if r.binding_conditions.is_empty() || r.binding_failure_conditions.is_empty() {
                continue;
            }
            let Some(status) = self.devices.iter().find(|d| {
                d.driver == r.driver && d.pool == r.pool && d.device == r.device && d.share_id == r.share_id
            }) else {
                continue;
            };
            for failure in &r.binding_failure_conditions {
                if let Some(c) = status
                    .conditions
                    .iter()
                    .find(|c| &c.type_ == failure && c.status == "True")
                {
                    return Some(format!(
                        "binding of device {}/{}/{} failed: condition {} is True (reason={}, message={:?})",
                        r.driver, r.pool, r.device, c.type_, c.reason, c.message
                    ));
                }
            }
        }
        None
    }

    /// Why the allocation can no longer be used, if its binding timed out (KEP-5007): a device
    /// of the allocation has binding conditions that are not all `True` in `status.devices`, and
    /// `allocationTimestamp + timeout` is before `now` (Unix seconds). An allocation without a
    /// timestamp never times out, as upstream's.
    pub fn binding_timed_out(&self, now: i64, timeout: u64) -> Option<String> {
        let allocation = self.allocation.as_ref()?;
        let stamp = allocation.allocation_timestamp.as_deref()?;
        let (at, _) = crate::time::parse_rfc3339(stamp).ok()?;
        if at.saturating_add(timeout as i64) >= now {
            return None;
        }
        allocation.devices.results.iter().find_map(|r| {
            if r.binding_conditions.is_empty() {
                return None;
            }
            let status = self.devices.iter().find(|d| {
                d.driver == r.driver && d.pool == r.pool && d.device == r.device && d.share_id == r.share_id
            });
            let pending = r.binding_conditions.iter().find(|want| {
                !status.is_some_and(|s| s.conditions.iter().any(|c| &c.type_ == *want && c.status == "True"))
            })?;
            Some(format!(
                "binding of device {}/{}/{} timed out: condition {pending} is not True {timeout}s after the allocation at {stamp}",
                r.driver, r.pool, r.device
            ))
        })
    }
}

/// `ResourceClaimConsumerReference`.
#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ResourceClaimConsumerReference {
    /// API group of the consumer (empty for core).
    #[serde(default, skip_serializing_if = "Name::is_empty")]
    pub api_group: Name,
    /// Resource, e.g. `pods`.
    #[serde(default)]
    pub resource: Name,
    /// Name of the consumer.
    #[serde(default)]
    pub name: Name,
    /// UID of the consumer.
    #[serde(default)]
    pub uid: String,
}

/// `AllocationResult`.
#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct AllocationResult {
    /// Allocated devices and configuration.
    #[serde(default)]
    pub devices: DeviceAllocationResult,
    /// Nodes on which the allocation is usable. Shared: the claims allocated on one node carry
    /// equal selectors, and the plugin stores one copy of each.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_selector: Option<Arc<NodeSelector>>,
    /// When the allocation was made.
    #[serde(
        default,
        deserialize_with = "crate::time::optional_timestamp",
        skip_serializing_if = "Option::is_none"
    )]
    pub allocation_timestamp: Option<String>,
}

impl AllocationResult {
    /// The allocation as JSON text (`status.allocation` of a ResourceClaim). Not generic: the
    /// adapters write allocations through it, and serde_json's writer for them is compiled once,
    /// in this crate.
    pub fn to_json_text(&self) -> Result<String, serde_json::Error> {
        serde_json::to_string(self)
    }
}

/// `DeviceAllocationResult`.
#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct DeviceAllocationResult {
    /// One result per allocated device.
    #[serde(
        default,
        deserialize_with = "exact::vec",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub results: Vec<DeviceRequestAllocationResult>,
    /// Configuration for the allocated devices.
    #[serde(
        default,
        deserialize_with = "exact::vec",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub config: Vec<DeviceAllocationConfiguration>,
}

/// `DeviceRequestAllocationResult`.
#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct DeviceRequestAllocationResult {
    /// `<req>` or `<req>/<sub>`.
    #[serde(deserialize_with = "crate::json::required")]
    pub request: Name,
    /// Driver.
    #[serde(deserialize_with = "crate::json::required")]
    pub driver: Name,
    /// Pool.
    #[serde(deserialize_with = "crate::json::required")]
    pub pool: Name,
    /// Device.
    #[serde(deserialize_with = "crate::json::required")]
    pub device: Name,
    /// Allocated with admin access.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub admin_access: Option<bool>,
    /// Copy of the request's tolerations.
    #[serde(
        default,
        deserialize_with = "exact::vec",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub tolerations: Vec<DeviceToleration>,
    /// Copy of the device's binding conditions.
    #[serde(
        default,
        deserialize_with = "exact::vec",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub binding_conditions: Vec<String>,
    /// Copy of the device's binding failure conditions.
    #[serde(
        default,
        deserialize_with = "exact::vec",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub binding_failure_conditions: Vec<String>,
    /// Share ID of an allocation of a multi-allocatable device.
    #[serde(rename = "shareID", default, skip_serializing_if = "Option::is_none")]
    pub share_id: Option<String>,
    /// Capacity consumed by this share (multi-allocatable devices only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub consumed_capacity: Option<Map<String, Quantity>>,
}

/// `DeviceAllocationConfiguration`.
#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct DeviceAllocationConfiguration {
    /// `FromClass` or `FromClaim`.
    #[serde(deserialize_with = "crate::json::required")]
    pub source: Name,
    /// Requests the config applies to; empty = all.
    #[serde(
        default,
        deserialize_with = "exact::vec",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub requests: Vec<String>,
    /// Opaque driver configuration (shared: see [`OpaqueDeviceConfiguration`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub opaque: Option<Arc<OpaqueDeviceConfiguration>>,
    /// Structured configuration copied from the claim (the seed's design).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub structured: Option<StructuredDeviceConfiguration>,
}

/// `resource.k8s.io/v1` ResourceClaimTemplate.
#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ResourceClaimTemplate {
    /// Object metadata.
    #[serde(default)]
    pub metadata: ObjectMeta,
    /// Template spec.
    #[serde(deserialize_with = "crate::json::required")]
    pub spec: ResourceClaimTemplateSpec,
}

/// `ResourceClaimTemplateSpec`.
#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ResourceClaimTemplateSpec {
    /// Metadata copied into generated claims.
    #[serde(default)]
    pub metadata: ObjectMeta,
    /// The claim spec, shared with the claims generated from the template.
    #[serde(default)]
    pub spec: Arc<ResourceClaimSpec>,
}

// ---------------------------------------------------------------------------------------------
// resource.k8s.io: DeviceTaintRule (v1, v1beta2, v1alpha3)
// ---------------------------------------------------------------------------------------------

/// `resource.k8s.io` DeviceTaintRule: a taint put on every device its selector picks.
#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct DeviceTaintRule {
    /// Object metadata.
    #[serde(default)]
    pub metadata: ObjectMeta,
    /// Rule spec.
    #[serde(deserialize_with = "crate::json::required")]
    pub spec: DeviceTaintRuleSpec,
}

/// `DeviceTaintRuleSpec`.
#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct DeviceTaintRuleSpec {
    /// The devices; the empty selector matches all devices, no selector matches none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub device_selector: Option<DeviceTaintSelector>,
    /// The taint put on the matching devices.
    #[serde(deserialize_with = "crate::json::required")]
    pub taint: DeviceTaint,
}

/// `DeviceTaintSelector`: every criterion that is set must match.
#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct DeviceTaintSelector {
    /// Only devices of this driver.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub driver: Option<String>,
    /// Only devices of this pool.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pool: Option<String>,
    /// Only devices with this name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub device: Option<String>,
    /// `v1alpha3` before 1.35 only: the class's selectors must match.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub device_class_name: Option<String>,
    /// `v1alpha3` before 1.35 only: CEL selectors that must all match.
    #[serde(
        default,
        deserialize_with = "exact::vec",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub selectors: Vec<DeviceSelector>,
}

impl DeviceTaintRule {
    /// Whether the rule uses the `v1alpha3` fields that later versions dropped
    /// (`deviceSelector.deviceClassName`, `deviceSelector.selectors`).
    pub fn uses_alpha_fields(&self) -> bool {
        self.spec
            .device_selector
            .as_ref()
            .is_some_and(|s| s.device_class_name.is_some() || !s.selectors.is_empty())
    }
}

/// Serde for `Vec<Arc<Device>>` as a plain JSON array of devices.
mod shared_devices {
    use std::sync::Arc;

    use serde::{Deserialize, Deserializer, Serializer};

    use super::{CapacityRequestPolicy, Device};

    pub fn serialize<S: Serializer>(devices: &[Arc<Device>], s: S) -> Result<S::Ok, S::Error> {
        s.collect_seq(devices.iter().map(|d| &**d))
    }

    /// Decodes the devices; identical capacity request policies within the slice share one
    /// allocation (a driver usually publishes the same policy for every device of a slice).
    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<Arc<Device>>, D::Error> {
        let mut devices = Vec::<Device>::deserialize(d)?;
        let mut distinct: Vec<Arc<CapacityRequestPolicy>> = Vec::new();
        for policy in devices
            .iter_mut()
            .filter_map(|d| Arc::get_mut(&mut d.capacity))
            .flat_map(|c| c.values_mut())
            .filter_map(|c| c.request_policy.as_mut())
        {
            match distinct.iter().find(|p| p.identical(policy)) {
                Some(p) => *policy = Arc::clone(p),
                None if distinct.len() < MAX_DISTINCT => distinct.push(Arc::clone(policy)),
                None => {}
            }
        }
        // Not `into_iter().map(Arc::new).collect()`: that collects in place, into the devices'
        // own allocation, which would stay (a slice of four devices kept room for four devices
        // behind its four pointers).
        let mut shared = Vec::with_capacity(devices.len());
        shared.extend(devices.into_iter().map(Arc::new));
        Ok(shared)
    }

    /// Distinct policies compared per slice: bounds the comparisons for a slice whose devices all
    /// differ.
    const MAX_DISTINCT: usize = 8;
}
