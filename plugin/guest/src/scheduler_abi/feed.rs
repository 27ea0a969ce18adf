//! The `sharing-affinity.dra/v1` change feed document (`docs/kswe-dra-extension.md`):
//! `{"cursor":"...","resync":bool,"events":[{"type":"ADDED|MODIFIED|DELETED","object":{...}}]}`.

use serde_json::Value;
use sharing_affinity_core::plugin::EventKind;

/// One object change.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FeedEvent {
    /// `ADDED` → Add, `MODIFIED` → Update, `DELETED` → Delete.
    pub kind: EventKind,
    /// The object's `kind`, `namespace/name` (for messages).
    pub label: String,
    /// The object as Kubernetes JSON.
    pub object: String,
}

/// A decoded feed document.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Feed {
    /// The cursor to send next time.
    pub cursor: String,
    /// True when the events are a full snapshot replacing all state.
    pub resync: bool,
    /// True when the host stopped the document short (a page): ask again from `cursor`.
    pub more: bool,
    /// The changes, oldest first.
    pub events: Vec<FeedEvent>,
}

fn label(object: &Value) -> String {
    let kind = object.get("kind").and_then(Value::as_str).unwrap_or("?");
    let meta = object.get("metadata");
    let name = meta
        .and_then(|m| m.get("name"))
        .and_then(Value::as_str)
        .unwrap_or("?");
    match meta.and_then(|m| m.get("namespace")).and_then(Value::as_str) {
        Some(ns) if !ns.is_empty() => format!("{kind} {ns}/{name}"),
        _ => format!("{kind} {name}"),
    }
}

/// Parses a feed document; errors name the offending field.
pub fn parse(bytes: &[u8]) -> Result<Feed, String> {
    let doc: Value = serde_json::from_slice(bytes).map_err(|e| format!("change feed: invalid JSON: {e}"))?;
    let cursor = doc
        .get("cursor")
        .and_then(Value::as_str)
        .ok_or("change feed: field cursor: missing or not a string")?
        .to_string();
    let resync = doc
        .get("resync")
        .and_then(Value::as_bool)
        .ok_or("change feed: field resync: missing or not a boolean")?;
    let more = match doc.get("more") {
        None => false,
        Some(v) => v.as_bool().ok_or("change feed: field more: not a boolean")?,
    };
    let list = doc
        .get("events")
        .and_then(Value::as_array)
        .ok_or("change feed: field events: missing or not an array")?;
    let mut events = Vec::with_capacity(list.len());
    for (i, e) in list.iter().enumerate() {
        let kind = match e.get("type").and_then(Value::as_str) {
            Some("ADDED") => EventKind::Add,
            Some("MODIFIED") => EventKind::Update,
            Some("DELETED") => EventKind::Delete,
            other => {
                return Err(format!(
                    "change feed: field events[{i}].type: unknown value {other:?}"
                ));
            }
        };
        let object = e
            .get("object")
            .filter(|o| o.is_object())
            .ok_or_else(|| format!("change feed: field events[{i}].object: missing or not an object"))?;
        events.push(FeedEvent {
            kind,
            label: label(object),
            object: object.to_string(),
        });
    }
    Ok(Feed {
        cursor,
        resync,
        more,
        events,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_events_in_order() {
        let doc = br#"{"cursor":"1.3","resync":false,"events":[
            {"type":"ADDED","object":{"kind":"Node","metadata":{"name":"n"}}},
            {"type":"MODIFIED","object":{"kind":"ResourceClaim","metadata":{"name":"c","namespace":"ns"}}},
            {"type":"DELETED","object":{"kind":"Pod","metadata":{"name":"p","namespace":"ns"}}}]}"#;
        let feed = parse(doc).unwrap();
        assert_eq!(
            (feed.cursor.as_str(), feed.resync, feed.more),
            ("1.3", false, false)
        );
        let page = parse(br#"{"cursor":"1.2","resync":true,"more":true,"events":[]}"#).unwrap();
        assert!(page.more && page.resync);
        let got: Vec<(EventKind, &str)> = feed.events.iter().map(|e| (e.kind, e.label.as_str())).collect();
        assert_eq!(
            got,
            [
                (EventKind::Add, "Node n"),
                (EventKind::Update, "ResourceClaim ns/c"),
                (EventKind::Delete, "Pod ns/p")
            ]
        );
        assert!(feed.events[0].object.contains(r#""name":"n""#));
    }

    #[test]
    fn bad_documents_name_the_field() {
        for (doc, field) in [
            (&b"nope"[..], "invalid JSON"),
            (br#"{"resync":true,"events":[]}"#, "field cursor"),
            (br#"{"cursor":"","events":[]}"#, "field resync"),
            (br#"{"cursor":"","resync":true}"#, "field events"),
            (
                br#"{"cursor":"","resync":true,"more":1,"events":[]}"#,
                "field more",
            ),
            (
                br#"{"cursor":"","resync":true,"events":[{"type":"BOOKMARK","object":{}}]}"#,
                "events[0].type",
            ),
            (
                br#"{"cursor":"","resync":true,"events":[{"type":"ADDED","object":1}]}"#,
                "events[0].object",
            ),
        ] {
            let err = parse(doc).unwrap_err();
            assert!(err.contains(field), "{err} should name {field}");
        }
    }
}
