//! Serde views of the Kubernetes objects the plugin reads, as `kubectl get -o json` prints them.
//!
//! Only the fields the allocator and the sharing-affinity check use are modelled; unknown fields are
//! ignored, as a Kubernetes client built against an older API would do. Field names follow the
//! `resource.k8s.io/v1` and `core/v1` JSON names (camelCase). Quantities are parsed on load into
//! [`crate::quantity::Quantity`], so an invalid quantity is reported with the object and the field path.
//!
//! These types are the *API* representation. The allocator works on the compact internal
//! representation built from them in [`crate::index`], as upstream converts API types to `draapi`.
//!
//! By API group: `meta/v1` here ([`ObjectMeta`], [`OwnerReference`]), `core/v1` in `core_v1`
//! (Node, Pod, NodeSelector), `resource.k8s.io` in `resource_v1` (ResourceSlice, DeviceClass,
//! ResourceClaim, ResourceClaimTemplate, DeviceTaintRule); both are re-exported here.

pub use crate::map::Map;
pub use core_v1::*;
pub use resource_v1::*;

mod core_v1;
mod resource_v1;

use std::sync::Arc;

use serde::{Deserialize, Serialize};

/// A string the model stores inline when it is short: up to 12 bytes in the 32-bit wasm guests
/// (24 natively) take no heap block of their own. For the names, kinds and values that every
/// stored claim, slice and device carries (`nic`, `eth2`, `node-01569`, `v1`, `Pod`, `pods`):
/// at 20,000 claims and 40,000 devices their blocks were a tenth of the guest's memory.
pub type Name = compact_str::CompactString;

/// `metadata` of any object: the fields used for identity, ordering and node selection.
#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ObjectMeta {
    /// Object name.
    #[serde(default)]
    pub name: Name,
    /// Namespace; empty for cluster-scoped objects.
    #[serde(default, skip_serializing_if = "Name::is_empty")]
    pub namespace: Name,
    /// Unique ID assigned by the API server.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub uid: String,
    /// Labels.
    #[serde(default, skip_serializing_if = "Map::is_empty")]
    pub labels: Map<String, String>,
    /// Annotations (kept so that recorded objects round-trip). Shared: claims generated from one
    /// template carry equal annotations, and the plugin stores one copy of each.
    #[serde(default = "no_annotations", skip_serializing_if = "annotations_empty")]
    pub annotations: Arc<Map<String, String>>,
    /// RFC 3339 creation time, as printed by the API server.
    #[serde(
        default,
        deserialize_with = "crate::time::timestamp",
        skip_serializing_if = "String::is_empty"
    )]
    pub creation_timestamp: String,
    /// Resource version, used as a change cursor.
    #[serde(default, skip_serializing_if = "Name::is_empty")]
    pub resource_version: Name,
    /// Generation of the object spec.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub generation: Option<i64>,
    /// Owner references (a claim generated from a template is owned by its pod).
    #[serde(
        default,
        deserialize_with = "exact::vec",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub owner_references: Vec<OwnerReference>,
    /// Set when the object is being deleted.
    #[serde(
        default,
        deserialize_with = "crate::time::optional_timestamp",
        skip_serializing_if = "Option::is_none"
    )]
    pub deletion_timestamp: Option<String>,
}

/// No annotations: one shared empty map, so that decoding an object without annotations does not
/// allocate.
fn no_annotations() -> Arc<Map<String, String>> {
    static EMPTY: std::sync::LazyLock<Arc<Map<String, String>>> = std::sync::LazyLock::new(Arc::default);
    Arc::clone(&EMPTY)
}

fn annotations_empty(annotations: &Arc<Map<String, String>>) -> bool {
    annotations.is_empty()
}

/// `metadata.ownerReferences[]`.
#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct OwnerReference {
    /// API version of the owner.
    #[serde(default)]
    pub api_version: Name,
    /// Kind of the owner.
    #[serde(default)]
    pub kind: Name,
    /// Name of the owner.
    #[serde(default)]
    pub name: Name,
    /// UID of the owner.
    #[serde(default)]
    pub uid: String,
    /// Whether the owner is the managing controller.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub controller: Option<bool>,
}

/// Decoding of lists to their length. serde decodes a JSON array into a `Vec` grown one push at a
/// time (serde_json gives no length up front), so a one-element list holds room for four: at
/// 20,000 allocated claims with one result, config, consumer and owner reference each, about
/// 13 MiB of the guest's memory held nothing.
mod exact {
    use serde::{Deserialize, Deserializer};

    /// A `Vec` without spare capacity.
    pub fn vec<'de, D: Deserializer<'de>, T: Deserialize<'de>>(d: D) -> Result<Vec<T>, D::Error> {
        let mut v = Vec::<T>::deserialize(d)?;
        v.shrink_to_fit();
        Ok(v)
    }

    /// An optional `Vec` without spare capacity.
    pub fn option_vec<'de, D: Deserializer<'de>, T: Deserialize<'de>>(
        d: D,
    ) -> Result<Option<Vec<T>>, D::Error> {
        let mut v = Option::<Vec<T>>::deserialize(d)?;
        if let Some(v) = &mut v {
            v.shrink_to_fit();
        }
        Ok(v)
    }
}

#[cfg(test)]
mod tests {
    use super::{
        AttributeValue, Device, DeviceAttribute, Name, OpaqueDeviceConfiguration, Parameters, ResourceClaim,
        ResourceSliceSpec,
    };

    /// Decoded lists hold no spare room (serde grows a `Vec` to four entries for one), and a
    /// slice's devices are not kept in the allocation they were decoded into.
    #[test]
    fn decoded_lists_are_exactly_sized() {
        let claim: ResourceClaim = serde_json::from_str(
            r#"{"metadata":{"name":"c","ownerReferences":[{"apiVersion":"v1","kind":"Pod","name":"p","uid":"u"}]},
                "spec":{"devices":{"requests":[{"name":"r","exactly":{"deviceClassName":"c"}}]}},
                "status":{"allocation":{"devices":{
                    "results":[{"request":"r","driver":"d","pool":"p","device":"x"}],
                    "config":[{"source":"FromClaim","requests":["r"]}]}},
                  "reservedFor":[{"resource":"pods","name":"p","uid":"u"}]}}"#,
        )
        .unwrap();
        let alloc = claim.status.allocation.as_ref().unwrap();
        let lists = [
            ("ownerReferences", claim.metadata.owner_references.capacity()),
            ("requests", claim.spec.devices.requests.capacity()),
            ("results", alloc.devices.results.capacity()),
            ("config", alloc.devices.config.capacity()),
            ("config requests", alloc.devices.config[0].requests.capacity()),
            ("reservedFor", claim.status.reserved_for.capacity()),
        ];
        for (list, capacity) in lists {
            assert_eq!(capacity, 1, "{list}");
        }
        let slice: ResourceSliceSpec = serde_json::from_str(
            r#"{"driver":"d","pool":{"name":"p","generation":1,"resourceSliceCount":1},
                "devices":[{"name":"a"},{"name":"b"},{"name":"c"}]}"#,
        )
        .unwrap();
        assert_eq!(slice.devices.capacity(), 3, "devices");
    }

    /// The short names every stored claim and device repeats are kept inline (no heap block
    /// of their own; 12 bytes fit in the 32-bit guests), a long one on the heap, and both write
    /// back as read.
    #[test]
    fn short_names_take_no_heap_block() {
        let text = r#"{"metadata":{"name":"svc-00000","namespace":"batch","resourceVersion":"1","ownerReferences":[{"apiVersion":"v1","kind":"Pod","name":"svc-00000","uid":"u"}]},"spec":{"devices":{}},"status":{"allocation":{"devices":{"results":[{"request":"nic","driver":"networking.example.com","pool":"node-01569","device":"eth2"}],"config":[{"source":"FromClaim","requests":["nic"]}]}},"reservedFor":[{"resource":"pods","name":"svc-00000","uid":"u"}]}}"#;
        let claim: ResourceClaim = serde_json::from_str(text).unwrap();
        let alloc = claim.status.allocation.as_ref().unwrap();
        let (owner, consumer) = (&claim.metadata.owner_references[0], &claim.status.reserved_for[0]);
        let result = &alloc.devices.results[0];
        let short = [
            ("metadata.name", &claim.metadata.name),
            ("metadata.namespace", &claim.metadata.namespace),
            ("metadata.resourceVersion", &claim.metadata.resource_version),
            ("ownerReferences[0].apiVersion", &owner.api_version),
            ("ownerReferences[0].kind", &owner.kind),
            ("ownerReferences[0].name", &owner.name),
            ("results[0].request", &result.request),
            ("results[0].pool", &result.pool),
            ("results[0].device", &result.device),
            ("config[0].source", &alloc.devices.config[0].source),
            ("reservedFor[0].resource", &consumer.resource),
            ("reservedFor[0].name", &consumer.name),
        ];
        for (field, value) in short {
            assert!(
                value.len() <= 12 && !value.is_heap_allocated(),
                "{field}: {value}"
            );
        }
        let long = Name::from("networking.example.com/node-01569/eth2-with-a-longer-name");
        assert!(long.is_heap_allocated());
        assert_eq!(serde_json::to_string(&claim).unwrap(), text);
        let device: Device =
            serde_json::from_str(r#"{"name":"eth2","attributes":{"model":{"string":"cx7"}}}"#).unwrap();
        assert!(!device.name.is_heap_allocated());
        match device.attributes.get("model").and_then(DeviceAttribute::as_value) {
            Some(AttributeValue::String(s)) => assert!(!s.is_heap_allocated()),
            other => panic!("model: {other:?}"),
        }
    }

    /// Identical request policies of one slice's devices share one allocation; a different one
    /// (also one only written differently) does not, and the slice writes back what was read.
    #[test]
    fn equal_request_policies_of_a_slice_are_shared() {
        let text = r#"{"driver":"d","pool":{"name":"p","generation":1,"resourceSliceCount":1},"devices":[
            {"name":"a","capacity":{"s":{"value":"16","requestPolicy":{"default":"1","validValues":["1"]}}}},
            {"name":"b","capacity":{"s":{"value":"16","requestPolicy":{"default":"1","validValues":["1"]}}}},
            {"name":"c","capacity":{"s":{"value":"16","requestPolicy":{"default":"2","validValues":["2"]}}}},
            {"name":"d","capacity":{"s":{"value":"16","requestPolicy":{"default":"2048","validValues":["2048"]}}}},
            {"name":"e","capacity":{"s":{"value":"16","requestPolicy":{"default":"2Ki","validValues":["2Ki"]}}}}]}"#;
        let spec: super::ResourceSliceSpec = serde_json::from_str(text).unwrap();
        let policy = |i: usize| {
            spec.devices[i]
                .capacity
                .get("s")
                .unwrap()
                .request_policy
                .clone()
                .unwrap()
        };
        assert!(std::sync::Arc::ptr_eq(&policy(0), &policy(1)));
        assert!(!std::sync::Arc::ptr_eq(&policy(0), &policy(2)));
        // Equal values written differently print differently: not shared.
        assert_eq!(policy(3), policy(4));
        assert!(!std::sync::Arc::ptr_eq(&policy(3), &policy(4)));
        let back: serde_json::Value = serde_json::to_value(&spec).unwrap();
        let read: serde_json::Value = serde_json::from_str(text).unwrap();
        assert_eq!(back["devices"], read["devices"]);
    }

    /// An attribute with exactly one member is stored typed; one with none or several is kept as
    /// written (and has no value); both write back what was read.
    #[test]
    fn device_attributes_are_typed_when_valid_and_kept_as_written_otherwise() {
        let cases = [
            (r#"{"int":7}"#, Some(AttributeValue::Int(7))),
            (r#"{"bool":false}"#, Some(AttributeValue::Bool(false))),
            (r#"{"string":"a"}"#, Some(AttributeValue::String("a".into()))),
            (
                r#"{"version":"1.2.3"}"#,
                Some(AttributeValue::Version("1.2.3".into())),
            ),
            (r#"{"ints":[1,2]}"#, Some(AttributeValue::Ints(vec![1, 2]))),
            (r#"{"bools":[true]}"#, Some(AttributeValue::Bools(vec![true]))),
            (
                r#"{"strings":["x"]}"#,
                Some(AttributeValue::Strings(vec!["x".into()])),
            ),
            (
                r#"{"versions":["1.0.0"]}"#,
                Some(AttributeValue::Versions(vec!["1.0.0".into()])),
            ),
            (r#"{}"#, None),
            (r#"{"int":1,"string":"a"}"#, None),
        ];
        for (text, want) in cases {
            let attr: DeviceAttribute = serde_json::from_str(text).unwrap();
            assert_eq!(attr.value(), want, "{text}");
            assert_eq!(
                matches!(attr, DeviceAttribute::Valid(_)),
                want.is_some(),
                "{text}"
            );
            assert_eq!(serde_json::to_string(&attr).unwrap(), text);
        }
        let bad = serde_json::from_str::<DeviceAttribute>(r#"{"int":"seven"}"#).unwrap_err();
        assert!(bad.to_string().contains("invalid type"), "{bad}");
    }

    /// Opaque parameters keep the text that serialising the parsed value gives (compact, keys
    /// sorted), from text and from a `Value` alike, so stored claims write back what they did when
    /// the parameters were a `Value`, and compare as JSON values do.
    #[test]
    fn opaque_parameters_are_canonical_json_text() {
        let pretty = "{\"driver\": \"d\", \"parameters\": {\n    \"subnet\": \"a\",\n    \"kind\": \"K\",\n    \"n\": [1, 2.5]\n}}";
        let from_text: OpaqueDeviceConfiguration = serde_json::from_str(pretty).unwrap();
        assert_eq!(
            from_text.parameters.get(),
            r#"{"kind":"K","n":[1,2.5],"subnet":"a"}"#
        );
        let value: serde_json::Value = serde_json::from_str(pretty).unwrap();
        let from_value: OpaqueDeviceConfiguration = serde_json::from_value(value.clone()).unwrap();
        assert_eq!(from_value, from_text);
        let parsed: serde_json::Value = serde_json::from_str(from_text.parameters.get()).unwrap();
        assert_eq!(parsed, value["parameters"]);
        let from_value_alone: Parameters = serde_json::from_value(value["parameters"].clone()).unwrap();
        assert_eq!(from_value_alone, from_text.parameters);
        assert_eq!(
            serde_json::to_value(&from_text).unwrap(),
            serde_json::json!({"driver": "d", "parameters": {"kind": "K", "n": [1, 2.5], "subnet": "a"}})
        );
        let absent: OpaqueDeviceConfiguration = serde_json::from_str(r#"{"driver": "d"}"#).unwrap();
        assert_eq!(absent.parameters.get(), "null");
        assert_ne!(absent.parameters, from_text.parameters);
    }

    /// A number in `parameters` is read as the nearest double, as Go's `encoding/json` reads it,
    /// so its canonical text reads back as the same number: a stored claim writes back what it
    /// read. (Found by the `objects` fuzz target: serde_json's default float parsing can be off
    /// by one unit in the last place, and the canonical text then read back as another double.)
    #[test]
    fn numbers_in_parameters_read_back_as_the_same_number() {
        let numbers = [
            "9333333000000629387372",
            "9.333333000000628e+21",
            "2.2250738585072011e-308",
            "0.30000000000000004",
            "1.7976931348623157e308",
            "123456789012345678901234567890",
            "4.9e-324",
            "9007199254740993",
        ];
        for n in numbers {
            let text = format!(r#"{{"driver": "d", "parameters": {{"n": {n}}}}}"#);
            let first: OpaqueDeviceConfiguration = serde_json::from_str(&text).unwrap();
            let again: OpaqueDeviceConfiguration =
                serde_json::from_str(&serde_json::to_string(&first).unwrap()).unwrap();
            assert_eq!(again.parameters, first.parameters, "{n}");
            let exact: f64 = n.parse().unwrap();
            let text = first.parameters.get();
            let member = text.strip_prefix(r#"{"n":"#).and_then(|t| t.strip_suffix('}'));
            let read = match crate::json::number(member.unwrap()).unwrap() {
                crate::json::Number::U64(u) => u as f64,
                crate::json::Number::I64(i) => i as f64,
                crate::json::Number::F64(f) => f,
            };
            assert_eq!(
                read.to_bits(),
                exact.to_bits(),
                "{n}: read {read}, nearest double {exact}"
            );
        }
    }
}
