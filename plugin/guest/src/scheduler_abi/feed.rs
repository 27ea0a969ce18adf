//! The `sharing-affinity.dra/v1` change feed document (`docs/kswe-dra-extension.md`):
//! `{"cursor":"...","resync":bool,"events":[{"type":"ADDED|MODIFIED|DELETED","object":{...}}]}`.

use sharing_affinity_core::EventKind;
use sharing_affinity_core::json;
use sharing_affinity_core::object;

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
        object::label(self.object)
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

/// The values of the members `names` of the JSON object `text`, each kept as text and decoded on
/// its own, so that an error names the field; `None` for a missing member or `null` (as serde
/// reads an optional field). A page is up to a MiB of objects: kept as text, they are neither
/// decoded into a `serde_json::Value` tree (several times the text in guest memory) nor written
/// out again. Other members are ignored; a member written twice is an error. Read through the
/// core's `json` functions, so that this crate compiles no serde_json reader of its own.
fn fields<'a, const N: usize>(text: &'a str, names: [&str; N]) -> Result<[Option<&'a str>; N], String> {
    let mut found = [None; N];
    for (key, value) in json::members(text).map_err(|e| e.to_string())? {
        if let Some(i) = names.iter().position(|n| *n == key) {
            if found[i].is_some() {
                return Err(format!("duplicate field `{key}`"));
            }
            found[i] = Some(value).filter(|v| *v != "null");
        }
    }
    Ok(found)
}

/// Parses a feed document; errors name the offending field.
pub fn parse(bytes: &[u8]) -> Result<Feed<'_>, String> {
    // Only an object is a document.
    if !bytes.trim_ascii_start().starts_with(b"{") {
        return Err("change feed: invalid JSON: the document is not a JSON object".to_string());
    }
    let text = std::str::from_utf8(bytes).map_err(|e| format!("change feed: invalid JSON: {e}"))?;
    let [cursor, resync, more, events] = fields(text, ["cursor", "resync", "more", "events"])
        .map_err(|e| format!("change feed: invalid JSON: {e}"))?;
    let cursor = cursor
        .and_then(|c| json::string(c).ok())
        .ok_or("change feed: field cursor: missing or not a string")?;
    let resync = resync
        .and_then(|r| json::boolean(r).ok())
        .ok_or("change feed: field resync: missing or not a boolean")?;
    // Absent or `null`: the last page.
    let more = match more {
        None => false,
        Some(m) => json::boolean(m).map_err(|_| "change feed: field more: not a boolean")?,
    };
    let list = events
        .and_then(|e| json::elements(e).ok())
        .ok_or("change feed: field events: missing or not an array")?;
    let mut events = Vec::with_capacity(list.len());
    for (i, e) in list.into_iter().enumerate() {
        if !e.starts_with('{') {
            return Err(format!("change feed: field events[{i}]: not an object"));
        }
        let [kind, object] = fields(e, ["type", "object"])
            .map_err(|err| format!("change feed: field events[{i}]: not an event object: {err}"))?;
        let kind = match kind.and_then(|k| json::string(k).ok()).as_deref() {
            Some("ADDED") => EventKind::Add,
            Some("MODIFIED") => EventKind::Update,
            Some("DELETED") => EventKind::Delete,
            _ => {
                let other = kind.unwrap_or("nothing");
                return Err(format!(
                    "change feed: field events[{i}].type: unknown value {other}"
                ));
            }
        };
        let object = object
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
        // Members the feed does not know are ignored.
        let extra = parse(br#"{"x":[1],"cursor":"2","resync":false,"events":[],"y":{}}"#).unwrap();
        assert_eq!((extra.cursor.as_str(), extra.events.len()), ("2", 0));
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
            (
                br#"{"cursor":"","resync":true,"events":[{"type":null,"object":{}}]}"#,
                "events[0].type: unknown value nothing",
            ),
            (
                br#"{"cursor":"a","resync":true,"cursor":"b","events":[]}"#,
                "invalid JSON: duplicate field `cursor`",
            ),
            (
                br#"{"cursor":"","resync":true,"events":[{"type":"ADDED","type":"DELETED","object":{}}]}"#,
                "events[0]: not an event object: duplicate field `type`",
            ),
            (br#"{"cursor":"","resync":true,"events":[]} x"#, "invalid JSON"),
            (
                b"{\"cursor\":\"\xff\",\"resync\":true,\"events\":[]}",
                "invalid JSON",
            ),
        ] {
            let err = parse(doc).unwrap_err();
            assert!(err.contains(field), "{err} should name {field}");
        }
    }
}
