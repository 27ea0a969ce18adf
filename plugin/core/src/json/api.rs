//! A deserializer that reads JSON the way Kubernetes' API machinery (Go's `encoding/json`) reads
//! it into typed objects. Two rules differ from serde_json's own:
//!
//! - **A struct is read from a JSON object only.** serde_json also reads a struct from an array
//!   of its fields in order (`["n", "ns"]` for `{"name": "n", "namespace": "ns"}` in
//!   `ObjectMeta`); the Kubernetes API never writes one and Go rejects one. [`ApiJson`] asks the
//!   inner deserializer for a map wherever a struct is wanted, at every depth, so the derived
//!   positional readers (`visit_seq`) are never called and the guests do not contain them.
//! - **`null` is the type's zero value.** Go leaves a field unset for `null`, so a typed object
//!   written by Go carries `"creationTimestamp": null` for a zero time and `null` for a nil slice
//!   or map, and `kubectl create --dry-run=client -o json` prints the same. Wherever a string, a
//!   number, a boolean, a list, a map or a struct is wanted, `null` reads as `""`, `0`, `false`,
//!   an empty list or map, or a struct read from `{}` (whose required fields are then missing, an
//!   error that names them). `Option` reads `null` as `None`; a required field ([`required`])
//!   refuses `null` with serde_json's own error at the field; a type that reads any value
//!   (`deserialize_any`: quantities, opaque parameters) sees the `null` itself.
//!
//! Every other call is passed through unchanged, so errors keep serde_json's positions. (A struct
//! variant of an enum is asked for through the variant, not as a struct; the model derives no
//! enum deserializers.)

use std::fmt;
use std::marker::PhantomData;

use serde::de::{
    self, Deserialize, DeserializeSeed, Deserializer, EnumAccess, MapAccess, SeqAccess, VariantAccess,
    Visitor,
};

/// `D` reading JSON as the API machinery does (see the module docs).
pub type ApiJson<D> = Reader<D, true>;

/// The deserializer behind [`ApiJson`]: with `NULL_IS_ZERO` false, the one value of a required
/// field, whose `null` the inner deserializer refuses with its own error and position; the
/// values inside it are read by [`ApiJson`] again.
pub struct Reader<D, const NULL_IS_ZERO: bool>(D);

impl<D> ApiJson<D> {
    /// `inner` reading as the API machinery does.
    pub fn new(inner: D) -> Self {
        Reader(inner)
    }
}

/// The newtype name [`required`] asks for: [`Reader`] answers it with its strict self; any
/// other deserializer reads the value as it would.
const REQUIRED: &str = "$sharing_affinity::json::required";

/// A field the API requires: `null` is an error at the field, as a missing field is. For
/// `#[serde(deserialize_with = "crate::json::required")]` on the model's required fields; every
/// other field reads `null` as its zero value ([`ApiJson`]).
pub fn required<'de, D: Deserializer<'de>, T: Deserialize<'de>>(d: D) -> Result<T, D::Error> {
    /// Reads `T` from the deserializer the newtype visit hands over.
    struct Strict<T>(PhantomData<T>);
    impl<'de, T: Deserialize<'de>> Visitor<'de> for Strict<T> {
        type Value = T;
        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("a value")
        }
        fn visit_newtype_struct<D: Deserializer<'de>>(self, d: D) -> Result<T, D::Error> {
            T::deserialize(d)
        }
    }
    d.deserialize_newtype_struct(REQUIRED, Strict(PhantomData))
}

/// A visitor whose nested deserializers are wrapped in [`ApiJson`].
struct Wrap<V>(V);

/// A seed that deserializes through [`ApiJson`].
struct Seed<S>(S);

/// Map, sequence and enum access whose elements deserialize through [`ApiJson`].
struct Access<A>(A);

/// Passes `deserialize_*` calls to the inner deserializer with the visitor wrapped.
macro_rules! forward {
    ($($method:ident($($arg:ident: $ty:ty),*))*) => {
        $(
            fn $method<V: Visitor<'de>>(self, $($arg: $ty,)* visitor: V) -> Result<V::Value, D::Error> {
                self.0.$method($($arg,)* Wrap(visitor))
            }
        )*
    };
}

/// Asks the inner deserializer for an option: `null` visits the zero value of the wanted type,
/// anything else is read as that type ([`OrZero`]).
macro_rules! null_is_zero {
    ($($method:ident => $want:ident)*) => {
        $(
            fn $method<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, D::Error> {
                if NULL_IS_ZERO {
                    self.0.deserialize_option(OrZero { want: Want::$want, visitor: Wrap(visitor) })
                } else {
                    self.0.$method(Wrap(visitor))
                }
            }
        )*
    };
}

impl<'de, D: Deserializer<'de>, const NULL_IS_ZERO: bool> Deserializer<'de> for Reader<D, NULL_IS_ZERO> {
    type Error = D::Error;

    /// A struct is read from a map only.
    fn deserialize_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        _fields: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, D::Error> {
        if NULL_IS_ZERO {
            self.0.deserialize_option(OrZero {
                want: Want::Map,
                visitor: Wrap(visitor),
            })
        } else {
            self.0.deserialize_map(Wrap(visitor))
        }
    }

    /// A required field's value ([`required`]) is read strictly; other newtypes as the inner
    /// deserializer reads them.
    fn deserialize_newtype_struct<V: Visitor<'de>>(
        self,
        name: &'static str,
        visitor: V,
    ) -> Result<V::Value, D::Error> {
        if name == REQUIRED {
            visitor.visit_newtype_struct(Reader::<D, false>(self.0))
        } else {
            self.0.deserialize_newtype_struct(name, Wrap(visitor))
        }
    }

    null_is_zero! {
        deserialize_bool => Bool
        deserialize_i8 => I8
        deserialize_i16 => I16
        deserialize_i32 => I32
        deserialize_i64 => I64
        deserialize_u8 => U8
        deserialize_u16 => U16
        deserialize_u32 => U32
        deserialize_u64 => U64
        deserialize_f32 => F32
        deserialize_f64 => F64
        deserialize_str => Str
        deserialize_string => String
        deserialize_seq => Seq
    }

    /// As a struct: `null` is an empty map.
    fn deserialize_map<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, D::Error> {
        if NULL_IS_ZERO {
            self.0.deserialize_option(OrZero {
                want: Want::Map,
                visitor: Wrap(visitor),
            })
        } else {
            self.0.deserialize_map(Wrap(visitor))
        }
    }

    forward! {
        deserialize_any()
        deserialize_i128()
        deserialize_u128()
        deserialize_char()
        deserialize_bytes()
        deserialize_byte_buf()
        deserialize_option()
        deserialize_unit()
        deserialize_unit_struct(name: &'static str)
        deserialize_tuple(len: usize)
        deserialize_tuple_struct(name: &'static str, len: usize)
        deserialize_enum(name: &'static str, variants: &'static [&'static str])
        deserialize_identifier()
        deserialize_ignored_any()
    }

    fn is_human_readable(&self) -> bool {
        self.0.is_human_readable()
    }
}

/// Passes `visit_*` calls of plain values to the inner visitor.
macro_rules! visit {
    ($field:tt => $($method:ident($ty:ty))*) => {
        $(
            fn $method<E: de::Error>(self, v: $ty) -> Result<V::Value, E> {
                self.$field.$method(v)
            }
        )*
    };
}

/// The type a `deserialize_*` call wanted ([`OrZero`]).
#[derive(Clone, Copy)]
enum Want {
    Bool,
    I8,
    I16,
    I32,
    I64,
    U8,
    U16,
    U32,
    U64,
    F32,
    F64,
    Str,
    String,
    Seq,
    /// A map, or a struct (read from a map only).
    Map,
}

/// The visitor [`ApiJson`] hands the inner `deserialize_option`: `None` (a `null`) visits the
/// zero value of `want`; `Some` reads the value as `want`. An error of a zero value (a struct
/// whose required field is missing from `{}`) has no position of its own: serde_json places it
/// at the end of the enclosing object or list, whose path it then names.
struct OrZero<V> {
    want: Want,
    visitor: V,
}

impl<'de, V: Visitor<'de>> Visitor<'de> for OrZero<V> {
    type Value = V::Value;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.visitor.expecting(f)
    }

    fn visit_none<E: de::Error>(self) -> Result<V::Value, E> {
        let v = self.visitor;
        match self.want {
            Want::Bool => v.visit_bool(false),
            Want::I8 | Want::I16 | Want::I32 | Want::I64 => v.visit_i64(0),
            Want::U8 | Want::U16 | Want::U32 | Want::U64 => v.visit_u64(0),
            Want::F32 | Want::F64 => v.visit_f64(0.0),
            Want::Str | Want::String => v.visit_borrowed_str(""),
            Want::Seq => v.visit_seq(Empty(PhantomData)),
            Want::Map => v.visit_map(Empty(PhantomData)),
        }
    }

    fn visit_unit<E: de::Error>(self) -> Result<V::Value, E> {
        self.visit_none()
    }

    // A deserializer whose `deserialize_option` visits the value itself, not through
    // `visit_some` (serde_json's raw values do), reaches these: the value goes to the visitor.
    visit! { visitor =>
        visit_bool(bool)
        visit_i8(i8)
        visit_i16(i16)
        visit_i32(i32)
        visit_i64(i64)
        visit_i128(i128)
        visit_u8(u8)
        visit_u16(u16)
        visit_u32(u32)
        visit_u64(u64)
        visit_u128(u128)
        visit_f32(f32)
        visit_f64(f64)
        visit_char(char)
        visit_str(&str)
        visit_borrowed_str(&'de str)
        visit_string(String)
        visit_bytes(&[u8])
        visit_borrowed_bytes(&'de [u8])
        visit_byte_buf(Vec<u8>)
    }

    fn visit_newtype_struct<D: Deserializer<'de>>(self, d: D) -> Result<V::Value, D::Error> {
        self.visitor.visit_newtype_struct(d)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<V::Value, A::Error> {
        self.visitor.visit_seq(seq)
    }

    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<V::Value, A::Error> {
        self.visitor.visit_map(map)
    }

    fn visit_enum<A: EnumAccess<'de>>(self, data: A) -> Result<V::Value, A::Error> {
        self.visitor.visit_enum(data)
    }

    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<V::Value, D::Error> {
        let v = self.visitor;
        match self.want {
            Want::Bool => d.deserialize_bool(v),
            Want::I8 => d.deserialize_i8(v),
            Want::I16 => d.deserialize_i16(v),
            Want::I32 => d.deserialize_i32(v),
            Want::I64 => d.deserialize_i64(v),
            Want::U8 => d.deserialize_u8(v),
            Want::U16 => d.deserialize_u16(v),
            Want::U32 => d.deserialize_u32(v),
            Want::U64 => d.deserialize_u64(v),
            Want::F32 => d.deserialize_f32(v),
            Want::F64 => d.deserialize_f64(v),
            Want::Str => d.deserialize_str(v),
            Want::String => d.deserialize_string(v),
            Want::Seq => d.deserialize_seq(v),
            Want::Map => d.deserialize_map(v),
        }
    }
}

/// An empty sequence or map, with the error type of the visit it serves: what `null` reads as
/// where a list, a map or a struct is wanted.
struct Empty<E>(PhantomData<E>);

impl<'de, E: de::Error> SeqAccess<'de> for Empty<E> {
    type Error = E;

    fn next_element_seed<T: DeserializeSeed<'de>>(&mut self, _seed: T) -> Result<Option<T::Value>, E> {
        Ok(None)
    }
}

impl<'de, E: de::Error> MapAccess<'de> for Empty<E> {
    type Error = E;

    fn next_key_seed<K: DeserializeSeed<'de>>(&mut self, _seed: K) -> Result<Option<K::Value>, E> {
        Ok(None)
    }

    fn next_value_seed<T: DeserializeSeed<'de>>(&mut self, _seed: T) -> Result<T::Value, E> {
        Err(de::Error::custom("an empty map has no values"))
    }
}

impl<'de, V: Visitor<'de>> Visitor<'de> for Wrap<V> {
    type Value = V::Value;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.expecting(f)
    }

    visit! { 0 =>
        visit_bool(bool)
        visit_i8(i8)
        visit_i16(i16)
        visit_i32(i32)
        visit_i64(i64)
        visit_i128(i128)
        visit_u8(u8)
        visit_u16(u16)
        visit_u32(u32)
        visit_u64(u64)
        visit_u128(u128)
        visit_f32(f32)
        visit_f64(f64)
        visit_char(char)
        visit_str(&str)
        visit_borrowed_str(&'de str)
        visit_string(String)
        visit_bytes(&[u8])
        visit_borrowed_bytes(&'de [u8])
        visit_byte_buf(Vec<u8>)
    }

    fn visit_none<E: de::Error>(self) -> Result<V::Value, E> {
        self.0.visit_none()
    }

    fn visit_unit<E: de::Error>(self) -> Result<V::Value, E> {
        self.0.visit_unit()
    }

    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<V::Value, D::Error> {
        self.0.visit_some(ApiJson::new(d))
    }

    fn visit_newtype_struct<D: Deserializer<'de>>(self, d: D) -> Result<V::Value, D::Error> {
        self.0.visit_newtype_struct(ApiJson::new(d))
    }

    fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<V::Value, A::Error> {
        self.0.visit_seq(Access(seq))
    }

    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<V::Value, A::Error> {
        self.0.visit_map(Access(map))
    }

    fn visit_enum<A: EnumAccess<'de>>(self, data: A) -> Result<V::Value, A::Error> {
        self.0.visit_enum(Access(data))
    }
}

impl<'de, S: DeserializeSeed<'de>> DeserializeSeed<'de> for Seed<S> {
    type Value = S::Value;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<S::Value, D::Error> {
        self.0.deserialize(ApiJson::new(d))
    }
}

impl<'de, A: SeqAccess<'de>> SeqAccess<'de> for Access<A> {
    type Error = A::Error;

    fn next_element_seed<T: DeserializeSeed<'de>>(&mut self, seed: T) -> Result<Option<T::Value>, A::Error> {
        self.0.next_element_seed(Seed(seed))
    }

    fn size_hint(&self) -> Option<usize> {
        self.0.size_hint()
    }
}

impl<'de, A: MapAccess<'de>> MapAccess<'de> for Access<A> {
    type Error = A::Error;

    fn next_key_seed<K: DeserializeSeed<'de>>(&mut self, seed: K) -> Result<Option<K::Value>, A::Error> {
        self.0.next_key_seed(Seed(seed))
    }

    fn next_value_seed<T: DeserializeSeed<'de>>(&mut self, seed: T) -> Result<T::Value, A::Error> {
        self.0.next_value_seed(Seed(seed))
    }

    fn size_hint(&self) -> Option<usize> {
        self.0.size_hint()
    }
}

impl<'de, A: EnumAccess<'de>> EnumAccess<'de> for Access<A> {
    type Error = A::Error;
    type Variant = Access<A::Variant>;

    fn variant_seed<T: DeserializeSeed<'de>>(self, seed: T) -> Result<(T::Value, Self::Variant), A::Error> {
        self.0
            .variant_seed(Seed(seed))
            .map(|(value, variant)| (value, Access(variant)))
    }
}

impl<'de, A: VariantAccess<'de>> VariantAccess<'de> for Access<A> {
    type Error = A::Error;

    fn unit_variant(self) -> Result<(), A::Error> {
        self.0.unit_variant()
    }

    fn newtype_variant_seed<T: DeserializeSeed<'de>>(self, seed: T) -> Result<T::Value, A::Error> {
        self.0.newtype_variant_seed(Seed(seed))
    }

    fn tuple_variant<V: Visitor<'de>>(self, len: usize, visitor: V) -> Result<V::Value, A::Error> {
        self.0.tuple_variant(len, Wrap(visitor))
    }

    fn struct_variant<V: Visitor<'de>>(
        self,
        fields: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, A::Error> {
        self.0.struct_variant(fields, Wrap(visitor))
    }
}

#[cfg(test)]
mod tests {
    use serde::de::DeserializeOwned;
    use serde_json::Value;

    use crate::json::fixtures::{CLUSTERS, pointers};
    use crate::json::from_text;
    use crate::model::{
        DeviceClass, DeviceTaintRule, Node, ObjectMeta, Pod, ResourceClaim, ResourceClaimTemplate,
        ResourceSlice,
    };

    /// What serde_json alone reads from `text`, and what `from_text` reads: the value's `Debug`
    /// text, or the error's message without its position.
    fn both<T: DeserializeOwned + std::fmt::Debug>(
        text: &str,
    ) -> (Result<String, String>, Result<String, String>) {
        let plain = serde_json::from_str::<T>(text)
            .map(|v| format!("{v:?}"))
            .map_err(|e| {
                let position = format!(" at line {} column {}", e.line(), e.column());
                e.to_string().trim_end_matches(&position).to_string()
            });
        let ours = from_text::<T>(text)
            .map(|v| format!("{v:?}"))
            .map_err(|e| e.message());
        (plain, ours)
    }

    /// A struct given as an array of its fields in order, which serde_json alone accepts, is an
    /// error naming the struct's path, at the top and nested in maps, sequences and options.
    #[test]
    fn a_struct_written_as_an_array_is_refused_at_every_depth() {
        let meta = serde_json::from_str::<ObjectMeta>(r#"["n", "ns"]"#).unwrap();
        assert_eq!(
            (meta.name.as_str(), meta.namespace.as_str()),
            ("n", "ns"),
            "serde_json alone"
        );
        let err = from_text::<ObjectMeta>(r#"["n", "ns"]"#).unwrap_err();
        assert_eq!(err.path, "");
        assert_eq!(
            err.message(),
            "invalid type: sequence, expected struct ObjectMeta"
        );

        let cases = [
            (r#"{"metadata":["n"]}"#, "metadata", "struct ObjectMeta"),
            (
                r#"{"metadata":{"name":"c","ownerReferences":[["v1","Pod","p","u"]]}}"#,
                "metadata.ownerReferences[0]",
                "struct OwnerReference",
            ),
            (
                r#"{"metadata":{"name":"c"},"spec":{"devices":{"requests":[{"name":"r","exactly":["c"]}]}}}"#,
                "spec.devices.requests[0].exactly",
                "struct ExactDeviceRequest",
            ),
            (
                r#"{"metadata":{"name":"c"},"status":[[]]}"#,
                "status",
                "struct ResourceClaimStatus",
            ),
        ];
        for (text, path, expected) in cases {
            assert!(
                both::<ResourceClaim>(text).0.is_ok(),
                "serde_json alone reads {text}"
            );
            let err = from_text::<ResourceClaim>(text).unwrap_err();
            assert_eq!(err.path, path, "{text}");
            assert_eq!(
                err.message(),
                format!("invalid type: sequence, expected {expected}"),
                "{text}"
            );
        }
    }

    /// Everything but a struct written as an array and `null` reads as serde_json alone reads it: every
    /// recorded object of every kind in the bundled clusters, and the same with a value of each
    /// JSON type in place of every node (errors and all).
    #[test]
    fn every_other_value_reads_as_serde_json_reads_it() {
        fn compare(item: &Value) -> bool {
            let text = item.to_string();
            let (plain, ours) = match item["kind"].as_str() {
                Some("Node") => both::<Node>(&text),
                Some("Pod") => both::<Pod>(&text),
                Some("ResourceSlice") => both::<ResourceSlice>(&text),
                Some("DeviceClass") => both::<DeviceClass>(&text),
                Some("ResourceClaim") => both::<ResourceClaim>(&text),
                Some("ResourceClaimTemplate") => both::<ResourceClaimTemplate>(&text),
                Some("DeviceTaintRule") => both::<DeviceTaintRule>(&text),
                _ => return false,
            };
            assert_eq!(ours, plain, "{text}");
            true
        }
        // `null` is the other difference, tested below.
        let others = [
            serde_json::json!(7),
            serde_json::json!("x"),
            serde_json::json!({}),
            serde_json::json!(true),
            serde_json::json!([]),
        ];
        let (mut objects, mut variants) = (0, 0);
        for file in CLUSTERS {
            let list: Value = serde_json::from_str(file).unwrap();
            for item in list["items"].as_array().unwrap() {
                if !compare(item) {
                    continue;
                }
                objects += 1;
                let mut nodes = Vec::new();
                pointers(item, String::new(), &mut nodes);
                for p in nodes.iter().filter(|p| *p != "/kind") {
                    for other in &others {
                        // An array where a struct was is the one difference (an array where a
                        // map was is left out with it: objects are structs and maps alike).
                        if other.is_array() && item.pointer(p).unwrap().is_object() {
                            continue;
                        }
                        let mut v = item.clone();
                        *v.pointer_mut(p).unwrap() = other.clone();
                        assert!(compare(&v));
                        variants += 1;
                    }
                }
            }
        }
        assert!(
            objects > 40 && variants > 5_000,
            "{objects} objects, {variants} variants"
        );
    }

    /// The object of `item`'s kind decoded by `from_text`: its `Debug` text, or the path and
    /// message of the error.
    fn decoded(item: &Value) -> Result<String, (String, String)> {
        fn read<T: DeserializeOwned + std::fmt::Debug>(text: &str) -> Result<String, (String, String)> {
            from_text::<T>(text)
                .map(|v| format!("{v:?}"))
                .map_err(|e| (e.path.clone(), e.message()))
        }
        let text = item.to_string();
        match item["kind"].as_str() {
            Some("Node") => read::<Node>(&text),
            Some("Pod") => read::<Pod>(&text),
            Some("ResourceSlice") => read::<ResourceSlice>(&text),
            Some("DeviceClass") => read::<DeviceClass>(&text),
            Some("ResourceClaim") => read::<ResourceClaim>(&text),
            Some("ResourceClaimTemplate") => read::<ResourceClaimTemplate>(&text),
            Some("DeviceTaintRule") => read::<DeviceTaintRule>(&text),
            other => panic!("{other:?}"),
        }
    }

    /// Go's rule for `null`, on every member of every recorded object of every kind: a member
    /// whose value is `null` reads as the member left out, unless the field is required, where it
    /// is an error that names the field and says it is required. Members of opaque parameters
    /// are JSON values, not fields: their `null` stays (the canonical text keeps it).
    #[test]
    fn a_null_member_reads_as_the_member_left_out_unless_required() {
        let (mut same, mut required) = (0, 0);
        for file in CLUSTERS {
            let list: Value = serde_json::from_str(file).unwrap();
            for item in list["items"].as_array().unwrap() {
                if !matches!(
                    item["kind"].as_str(),
                    Some(
                        "Node"
                            | "Pod"
                            | "ResourceSlice"
                            | "DeviceClass"
                            | "ResourceClaim"
                            | "ResourceClaimTemplate"
                            | "DeviceTaintRule"
                    )
                ) {
                    continue;
                }
                let mut nodes = Vec::new();
                pointers(item, String::new(), &mut nodes);
                for p in &nodes {
                    let (parent, key) = p.rsplit_once('/').unwrap();
                    let parent_value = if parent.is_empty() {
                        item
                    } else {
                        item.pointer(parent).unwrap()
                    };
                    // Members of maps (labels, capacities, attributes...) are entries, not fields:
                    // Go reads an entry's `null` as an entry with the zero value.
                    let map_entry = [
                        "labels",
                        "annotations",
                        "capacity",
                        "allocatable",
                        "attributes",
                        "requests",
                        "limits",
                        "consumedCapacity",
                        "counters",
                    ]
                    .iter()
                    .any(|m| parent.ends_with(&format!("/{m}")))
                        || (parent.contains("/sharingAffinity/") && parent.ends_with("/cel"));
                    if !parent_value.is_object() || map_entry || p == "/kind" || p.contains("/parameters") {
                        continue;
                    }
                    let mut with_null = item.clone();
                    *with_null.pointer_mut(p).unwrap() = Value::Null;
                    let mut left_out = item.clone();
                    let target = if parent.is_empty() {
                        &mut left_out
                    } else {
                        left_out.pointer_mut(parent).unwrap()
                    };
                    target
                        .as_object_mut()
                        .unwrap()
                        .remove(&key.replace("~1", "/").replace("~0", "~"));
                    match (decoded(&with_null), decoded(&left_out)) {
                        (Ok(a), Ok(b)) => {
                            assert_eq!(a, b, "{p}: null and left out differ");
                            same += 1;
                        }
                        (Err((path, message)), Err((_, missing))) => {
                            assert!(missing.starts_with("missing field"), "{p}: {missing}");
                            assert!(message.starts_with("invalid type: null"), "{p}: {message}");
                            let dotted = p[1..].replace('/', ".").replace("~1", "/").replace("~0", "~");
                            let named = path.replace('[', ".").replace(']', "");
                            assert_eq!(dotted, named, "{p}: the error names {path}");
                            required += 1;
                        }
                        (a, b) => panic!("{p}: null gives {a:?}, left out gives {b:?}"),
                    }
                }
            }
        }
        assert!(
            same > 500 && required > 50,
            "{same} optional, {required} required"
        );
    }

    /// `null` where a list, a map, a string, a number or a struct is wanted reads as Go reads it:
    /// the zero value (elements and map values too); `Option` reads it as `None`.
    #[test]
    fn null_reads_as_the_zero_value_as_go_reads_it() {
        let node: Node = from_text(
            r#"{"metadata":{"name":"n","creationTimestamp":null,"labels":{"a":null},"annotations":null,
                "ownerReferences":null,"generation":null,"deletionTimestamp":null},
               "status":{"capacity":null,"allocatable":null,"images":[null]}}"#,
        )
        .unwrap();
        assert_eq!(node.metadata.creation_timestamp, "");
        assert_eq!(node.metadata.labels.get("a").map(String::as_str), Some(""));
        assert!(node.metadata.annotations.is_empty() && node.metadata.owner_references.is_empty());
        assert_eq!(
            (node.metadata.generation, node.metadata.deletion_timestamp),
            (None, None)
        );
        assert!(node.status.capacity.is_empty());
        assert!(node.status.allocatable.is_empty());
        assert_eq!(node.status.images.len(), 1, "a null element is a zero element");
        let claim: ResourceClaim = from_text(
            r#"{"metadata":{"name":"c"},"spec":null,"status":{"allocation":null,"reservedFor":null}}"#,
        )
        .unwrap();
        assert_eq!(
            claim,
            from_text::<ResourceClaim>(r#"{"metadata":{"name":"c"}}"#).unwrap()
        );
    }

    /// A required field given `null` is an error at its path, as a missing one is.
    #[test]
    fn a_required_field_refuses_null_at_its_path() {
        let slice = r#"{"metadata":{"name":"s"},"spec":{"driver":null,"pool":{"name":"p","generation":1,"resourceSliceCount":1}}}"#;
        let err = from_text::<ResourceSlice>(slice).unwrap_err();
        assert_eq!(err.path, "spec.driver");
        assert_eq!(err.message(), "invalid type: null, expected a string");
        let slice = r#"{"metadata":{"name":"s"},"spec":{"driver":"d","pool":{"name":"p","generation":1,"resourceSliceCount":1},
            "devices":[{"name":"d0","capacity":{"mem":{"value":null}}}]}}"#;
        let err = from_text::<ResourceSlice>(slice).unwrap_err();
        assert_eq!(err.path, "spec.devices[0].capacity.mem.value");
    }
}
