//! A deserializer that reads a struct only from a JSON object.
//!
//! serde_json reads a struct from an object or from an array of its fields in order (`["n", "ns"]`
//! for `{"name": "n", "namespace": "ns"}` in `ObjectMeta`), so every derived struct deserializer
//! carries a second, positional reader (`visit_seq`) beside its keyed one (`visit_map`). The
//! Kubernetes API never writes a struct as an array, and Go's `encoding/json` rejects one, as
//! the plugin now does. [`MapsOnly`] wraps a deserializer and asks it for a map wherever a
//! struct is wanted, at every depth; the positional readers are never called, so the guests do
//! not contain them (about 68 KB per guest, docs/PERFORMANCE.md, "Twenty-first round"). Every
//! other call is passed through unchanged: the wrappers are inlined away. (A struct variant of an
//! enum is asked for through the variant, not as a struct, and is still read either way; the
//! model derives no enum deserializers.)

use std::fmt;

use serde::de::{
    self, DeserializeSeed, Deserializer, EnumAccess, MapAccess, SeqAccess, VariantAccess, Visitor,
};

/// `D` with structs read from maps only; everything else as `D` reads it.
pub struct MapsOnly<D>(pub D);

/// A visitor whose nested deserializers are wrapped in [`MapsOnly`].
struct Wrap<V>(V);

/// A seed that deserializes through [`MapsOnly`].
struct Seed<S>(S);

/// Map, sequence and enum access whose elements deserialize through [`MapsOnly`].
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

impl<'de, D: Deserializer<'de>> Deserializer<'de> for MapsOnly<D> {
    type Error = D::Error;

    fn deserialize_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        _fields: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, D::Error> {
        self.0.deserialize_map(Wrap(visitor))
    }

    forward! {
        deserialize_any()
        deserialize_bool()
        deserialize_i8()
        deserialize_i16()
        deserialize_i32()
        deserialize_i64()
        deserialize_i128()
        deserialize_u8()
        deserialize_u16()
        deserialize_u32()
        deserialize_u64()
        deserialize_u128()
        deserialize_f32()
        deserialize_f64()
        deserialize_char()
        deserialize_str()
        deserialize_string()
        deserialize_bytes()
        deserialize_byte_buf()
        deserialize_option()
        deserialize_unit()
        deserialize_unit_struct(name: &'static str)
        deserialize_newtype_struct(name: &'static str)
        deserialize_seq()
        deserialize_tuple(len: usize)
        deserialize_tuple_struct(name: &'static str, len: usize)
        deserialize_map()
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
    ($($method:ident($ty:ty))*) => {
        $(
            fn $method<E: de::Error>(self, v: $ty) -> Result<V::Value, E> {
                self.0.$method(v)
            }
        )*
    };
}

impl<'de, V: Visitor<'de>> Visitor<'de> for Wrap<V> {
    type Value = V::Value;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.expecting(f)
    }

    visit! {
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
        self.0.visit_some(MapsOnly(d))
    }

    fn visit_newtype_struct<D: Deserializer<'de>>(self, d: D) -> Result<V::Value, D::Error> {
        self.0.visit_newtype_struct(MapsOnly(d))
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
        self.0.deserialize(MapsOnly(d))
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

    /// Everything but a struct written as an array reads as serde_json alone reads it: every
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
        let others = [
            serde_json::json!(7),
            serde_json::json!("x"),
            serde_json::json!({}),
            serde_json::json!(null),
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
}
