//! A cluster rewritten the way Go's `encoding/json` writes typed Kubernetes objects: a zero
//! `metav1.Time` as `null`, a nil slice or map without `omitempty` as `null`. Opaque parameters
//! are raw JSON to Go too, and stay as they are.

use serde_json::{Map, Value};

/// The value rewritten as Go writes typed objects: empty lists and maps become `null`, at every
/// depth but inside `parameters`.
fn nulled(value: &mut Value) {
    match value {
        Value::Object(map) => {
            for (key, v) in map.iter_mut() {
                if key == "parameters" {
                    continue;
                }
                match v {
                    Value::Array(a) if a.is_empty() => *v = Value::Null,
                    Value::Object(o) if o.is_empty() => *v = Value::Null,
                    _ => nulled(v),
                }
            }
        }
        Value::Array(items) => items.iter_mut().for_each(nulled),
        _ => {}
    }
}

/// A cluster (`List`) as a Go program that decoded each object into its typed struct writes it
/// back: `metadata.creationTimestamp: null` where it was unset, `status: null` where absent,
/// empty lists and maps as `null` (see [`nulled`]).
pub fn go_written(cluster: &str) -> String {
    let mut list: Value = serde_json::from_str(cluster).expect("a recorded cluster is JSON");
    for item in list["items"].as_array_mut().expect("a List") {
        nulled(item);
        let object = item.as_object_mut().expect("an object");
        let meta = object
            .entry("metadata")
            .or_insert_with(|| Value::Object(Map::new()));
        if let Some(meta) = meta.as_object_mut() {
            meta.entry("creationTimestamp").or_insert(Value::Null);
            meta.entry("deletionTimestamp").or_insert(Value::Null);
        }
        object.entry("status").or_insert(Value::Null);
    }
    list.to_string()
}
