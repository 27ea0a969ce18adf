//! The `sharing-affinity.dra/v1` change feed document (`docs/kswe-dra-extension.md`):
//! `{"cursor":"...","resync":bool,"events":[{"type":"ADDED|MODIFIED|DELETED","object":{...}}]}`.

use serde::Deserialize;
use serde_json::Value;
use serde_json::value::RawValue;
use sharing_affinity_core::plugin::EventKind;

/// One object change, borrowed from the page it came in.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FeedEvent<'a> {
    /// `ADDED` → Add, `MODIFIED` → Update, `DELETED` → Delete.
    pub kind: EventKind,
    /// The object as Kubernetes JSON: its text in the page, not decoded here (the plugin decodes
    /// it once, when it applies the event).
    pub object: &'a str,
}

impl FeedEvent<'_> {
    /// The object's `kind`, `namespace/name`, for messages (decoded only when one is needed).
    pub fn label(&self) -> String {
        let object: Value = serde_json::from_str(self.object).unwrap_or(Value::Null);
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
}

/// A decoded feed document, borrowing its objects' text from the page.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Feed<'a> {
    /// The cursor to send next time.
    pub cursor: String,
    /// True when the events are a full snapshot replacing all state.
    pub resync: bool,
    /// True when the host stopped the document short (a page): ask again from `cursor`.
    pub more: bool,
    /// The changes, oldest first.
    pub events: Vec<FeedEvent<'a>>,
}

/// The document's fields, each kept as text and decoded on its own, so that an error names the
/// field. A page is up to a MiB of objects: kept as text, they are neither decoded into a
/// `serde_json::Value` tree (several times the text in guest memory) nor written out again.
#[derive(Deserialize)]
struct RawFeed<'a> {
    #[serde(borrow)]
    cursor: Option<&'a RawValue>,
    #[serde(borrow)]
    resync: Option<&'a RawValue>,
    #[serde(borrow)]
    more: Option<&'a RawValue>,
    #[serde(borrow)]
    events: Option<&'a RawValue>,
}

/// One event's fields, as [`RawFeed`]'s.
#[derive(Deserialize)]
struct RawEvent<'a> {
    #[serde(borrow, rename = "type")]
    kind: Option<&'a RawValue>,
    #[serde(borrow)]
    object: Option<&'a RawValue>,
}

/// The value of a field kept as text, or `None` when it is missing or not a `T`.
fn field<'a, T: Deserialize<'a>>(raw: Option<&'a RawValue>) -> Option<T> {
    raw.and_then(|r| serde_json::from_str(r.get()).ok())
}

/// Parses a feed document; errors name the offending field.
pub fn parse(bytes: &[u8]) -> Result<Feed<'_>, String> {
    // Derived structs also decode from arrays (fields by position): only an object is a document.
    if !bytes.trim_ascii_start().starts_with(b"{") {
        return Err("change feed: invalid JSON: the document is not a JSON object".to_string());
    }
    let doc: RawFeed<'_> =
        serde_json::from_slice(bytes).map_err(|e| format!("change feed: invalid JSON: {e}"))?;
    let cursor: String = field(doc.cursor).ok_or("change feed: field cursor: missing or not a string")?;
    let resync: bool = field(doc.resync).ok_or("change feed: field resync: missing or not a boolean")?;
    // Absent or `null` (serde reads a `null` field as `None`): the last page.
    let more = match doc.more {
        None => false,
        Some(v) => field(Some(v)).ok_or("change feed: field more: not a boolean")?,
    };
    let list: Vec<&RawValue> =
        field(doc.events).ok_or("change feed: field events: missing or not an array")?;
    let mut events = Vec::with_capacity(list.len());
    for (i, e) in list.into_iter().enumerate() {
        if !e.get().starts_with('{') {
            return Err(format!("change feed: field events[{i}]: not an object"));
        }
        let e: RawEvent<'_> = serde_json::from_str(e.get())
            .map_err(|err| format!("change feed: field events[{i}]: not an event object: {err}"))?;
        let kind = match field::<String>(e.kind).as_deref() {
            Some("ADDED") => EventKind::Add,
            Some("MODIFIED") => EventKind::Update,
            Some("DELETED") => EventKind::Delete,
            _ => {
                let other = e.kind.map_or("nothing", RawValue::get);
                return Err(format!(
                    "change feed: field events[{i}].type: unknown value {other}"
                ));
            }
        };
        let object = e
            .object
            .map(RawValue::get)
            .filter(|o| o.starts_with('{'))
            .ok_or_else(|| format!("change feed: field events[{i}].object: missing or not an object"))?;
        events.push(FeedEvent { kind, object });
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
        // `more` is optional: absent or `null` (unset, as in Kubernetes JSON) is the last page.
        for doc in [
            &br#"{"cursor":"1","resync":false,"events":[]}"#[..],
            br#"{"cursor":"1","resync":false,"more":null,"events":[]}"#,
        ] {
            assert!(!parse(doc).unwrap().more);
        }
        let labels: Vec<(EventKind, String)> = feed.events.iter().map(|e| (e.kind, e.label())).collect();
        let got: Vec<(EventKind, &str)> = labels.iter().map(|(k, l)| (*k, l.as_str())).collect();
        assert_eq!(
            got,
            [
                (EventKind::Add, "Node n"),
                (EventKind::Update, "ResourceClaim ns/c"),
                (EventKind::Delete, "Pod ns/p")
            ]
        );
        // The object is the page's own text, as sent.
        assert_eq!(
            feed.events[0].object,
            r#"{"kind":"Node","metadata":{"name":"n"}}"#
        );
        // A type with an escape is the same string.
        let escaped =
            parse(br#"{"cursor":"1","resync":false,"events":[{"type":"ADD\u0045D","object":{}}]}"#).unwrap();
        assert_eq!(escaped.events[0].kind, EventKind::Add);
    }

    #[test]
    fn bad_documents_name_the_field() {
        for (doc, field) in [
            (&b"nope"[..], "invalid JSON"),
            (br#"{"resync":true,"events":[]}"#, "field cursor"),
            (br#"{"cursor":"","events":[]}"#, "field resync"),
            (br#"{"cursor":null,"resync":true,"events":[]}"#, "field cursor"),
            (br#"{"cursor":"","resync":null,"events":[]}"#, "field resync"),
            (br#"{"cursor":"","resync":true,"events":null}"#, "field events"),
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
            (
                br#"{"cursor":"","resync":true,"events":[{"type":"ADDED"}]}"#,
                "events[0].object",
            ),
            (br#"  ["", true, false, []]"#, "not a JSON object"),
            (
                br#"{"cursor":"","resync":true,"events":[["ADDED",{}]]}"#,
                "events[0]: not an object",
            ),
            (
                br#"{"cursor":"","resync":true,"events":[{"type":"ADDED","object":{}},{"type":1}]}"#,
                "events[1].type: unknown value 1",
            ),
        ] {
            let err = parse(doc).unwrap_err();
            assert!(err.contains(field), "{err} should name {field}");
        }
    }
}
