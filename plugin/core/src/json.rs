//! Typed decoding of JSON text, with the path of the field that did not decode.
//!
//! Every typed object is read by one deserializer, serde_json's over text: its code is compiled
//! once per type, and that code is most of the guests' deserialization (a second decoding path,
//! over a `serde_json::Value` with a path-tracking wrapper, cost each guest about 380 KB). The
//! path of a failed field is found after the fact, from where in the text serde_json stopped:
//! `path_at` walks the text to that byte and names the innermost value (or member key) there,
//! in the notation `spec.devices[0].capacity.mem.value`.

use serde::Deserializer as _;
use std::borrow::Cow;

use serde::de::{DeserializeOwned, DeserializeSeed, MapAccess, Visitor};
use serde_json::value::RawValue;

mod api;
mod canonical;

pub use api::{ApiJson, required};
pub use canonical::{Json, MAX_NESTING, Number, canonical, number, parse};

/// Recorded objects for the decoding tests, and the nodes of a JSON value.
#[cfg(test)]
pub(crate) mod fixtures {
    use serde_json::Value;

    /// Five recorded clusters (`List`s) that hold objects of all seven kinds between them.
    pub(crate) const CLUSTERS: [&str; 5] = [
        include_str!("../../../testdata/kubectl-recording-controller-claims-managed-fields/cluster.json"),
        include_str!("../../../testdata/structured-config-and-cel-extractors-same-decisions/cluster.json"),
        include_str!(
            "../../../testdata/device-taint-rules-block-one-pod-tolerating-pod-schedules/cluster.json"
        ),
        include_str!("../../../testdata/extended-resources-dra-class-device-plugin-node/cluster.json"),
        include_str!("../../../testdata/allocated-claims-rebuild-locks/cluster.json"),
    ];

    /// Pointers (RFC 6901) to every node of `v` but the root, children before their parent.
    pub(crate) fn pointers(v: &Value, at: String, out: &mut Vec<String>) {
        let children: Vec<(String, &Value)> = match v {
            Value::Object(m) => m
                .iter()
                .map(|(k, c)| (k.replace('~', "~0").replace('/', "~1"), c))
                .collect(),
            Value::Array(a) => a.iter().enumerate().map(|(i, c)| (i.to_string(), c)).collect(),
            _ => Vec::new(),
        };
        for (k, c) in children {
            let p = format!("{at}/{k}");
            pointers(c, p.clone(), out);
            out.push(p);
        }
    }
}

/// A value of `T` read from `text` (the whole text: trailing characters are an error), as the API
/// machinery reads it ([`ApiJson`]: structs from JSON objects only, `null` as the zero value).
pub fn from_text<T: DeserializeOwned>(text: &str) -> Result<T, PathError> {
    let mut de = serde_json::Deserializer::from_str(text);
    T::deserialize(ApiJson::new(&mut de))
        .and_then(|value| de.end().map(|()| value))
        .map_err(|error| PathError::new(text, error))
}

/// The members of the JSON object `text`, in order, each value kept as its text (a key written
/// twice appears twice; `null` is the text `null`).
///
/// With [`elements`], [`string`] and [`boolean`]: how an adapter reads a small document of its
/// own (the KSWE change feed) field by field. These are not generic, so serde_json's reader is
/// compiled once, here, and not again in each crate that reads JSON through them (45 KB of the
/// KSWE guest, after `wasm-opt`, when its adapter instantiated serde_json itself).
pub fn members(text: &str) -> Result<Vec<(Cow<'_, str>, &str)>, serde_json::Error> {
    /// A key, borrowed from the text unless it has escapes.
    struct Key;
    impl<'de> Visitor<'de> for Key {
        type Value = Cow<'de, str>;
        fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("a string")
        }
        fn visit_borrowed_str<E>(self, key: &'de str) -> Result<Self::Value, E> {
            Ok(Cow::Borrowed(key))
        }
        fn visit_str<E>(self, key: &str) -> Result<Self::Value, E> {
            Ok(Cow::Owned(key.to_string()))
        }
    }
    impl<'de> DeserializeSeed<'de> for Key {
        type Value = Cow<'de, str>;
        fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
            d.deserialize_str(self)
        }
    }
    struct Members;
    impl<'de> Visitor<'de> for Members {
        type Value = Vec<(Cow<'de, str>, &'de str)>;
        fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("a JSON object")
        }
        fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
            let mut members = Vec::new();
            while let Some(key) = map.next_key_seed(Key)? {
                let value: &RawValue = map.next_value()?;
                members.push((key, value.get()));
            }
            Ok(members)
        }
    }
    let mut de = serde_json::Deserializer::from_str(text);
    let members = de.deserialize_map(Members)?;
    de.end().map(|()| members)
}

/// The elements of the JSON array `text`, in order, each kept as its text ([`members`]).
pub fn elements(text: &str) -> Result<Vec<&str>, serde_json::Error> {
    let elements: Vec<&RawValue> = serde_json::from_str(text)?;
    Ok(elements.into_iter().map(RawValue::get).collect())
}

/// The JSON string `text` ([`members`]).
pub fn string(text: &str) -> Result<String, serde_json::Error> {
    serde_json::from_str(text)
}

/// The JSON boolean `text` ([`members`]).
pub fn boolean(text: &str) -> Result<bool, serde_json::Error> {
    serde_json::from_str(text)
}

/// Why [`from_text`] failed, and where.
#[derive(Debug)]
pub struct PathError {
    /// The path of the field, `spec.devices[0].name`; empty for the document itself.
    pub path: String,
    /// serde_json's error, with its line and column in the text.
    pub error: serde_json::Error,
}

impl PathError {
    fn new(text: &str, error: serde_json::Error) -> PathError {
        // serde_json reports a value of the wrong type where it starts when it is a sequence or
        // a map (it does not read it), and a container that a type read and rejected where its
        // first member starts: the message tells which.
        let message = error.to_string();
        let opening = if message.starts_with("invalid type: sequence") {
            Some(b'[')
        } else if message.starts_with("invalid type: map") {
            Some(b'{')
        } else {
            None
        };
        let path = match byte_at(text, error.line(), error.column()) {
            Some(at) => path_at(text, at, opening),
            None => String::new(),
        };
        PathError { path, error }
    }

    /// serde_json's message without its position (`invalid type: integer `7`, expected a
    /// string`): the path names the place.
    pub fn message(&self) -> String {
        let text = self.error.to_string();
        if self.error.line() == 0 {
            return text;
        }
        let position = format!(" at line {} column {}", self.error.line(), self.error.column());
        match text.strip_suffix(&position) {
            Some(message) => message.to_string(),
            None => text,
        }
    }
}

/// The byte offset of serde_json's (1-based) line and (0-based, in bytes) column.
fn byte_at(text: &str, line: usize, column: usize) -> Option<usize> {
    if line == 0 {
        return None;
    }
    let start = if line == 1 {
        0
    } else {
        text.match_indices('\n').nth(line - 2)?.0 + 1
    };
    Some(start + column)
}

/// One step of a path.
enum Segment {
    Key(String),
    Index(usize),
}

/// The path, in `text`, of the innermost value or member key where serde_json reported an error
/// at byte `at`. A value holds the places from just after its first byte to just after its last
/// (serde_json reports most errors right after the value it read); its first byte too when it
/// opens with `opening` (a sequence or map of the wrong type, reported unread); a member key holds
/// the place just after it (an unknown field). Empty for the document itself. Stops, without
/// failing, at text that is not JSON.
///
/// One case cannot be told apart: a sequence whose first element is a sequence, rejected whole
/// by a type that reads any value (a quantity given `[[1]]`), is named by that first element,
/// since serde_json reports both at the same byte with the same message.
fn path_at(text: &str, at: usize, opening: Option<u8>) -> String {
    let mut scan = Scan {
        text,
        i: 0,
        at,
        opening,
        path: Vec::new(),
    };
    if scan.value(0) != Place::Found {
        scan.path.clear();
    }
    let mut out = String::new();
    for segment in &scan.path {
        match segment {
            Segment::Key(key) => {
                if !out.is_empty() {
                    out.push('.');
                }
                out.push_str(key);
            }
            Segment::Index(i) => out.push_str(&format!("[{i}]")),
        }
    }
    out
}

/// Deeper than serde_json's own recursion limit ([`MAX_NESTING`], 128): text nested deeper never
/// decoded.
const MAX_DEPTH: usize = 2 * MAX_NESTING;

/// Where the place is, seen from one value.
#[derive(Debug, PartialEq)]
enum Place {
    /// Before the value: in its container.
    Before,
    /// In the value; `path` names it.
    Found,
    /// After the value.
    Past,
}

struct Scan<'a> {
    text: &'a str,
    i: usize,
    at: usize,
    opening: Option<u8>,
    path: Vec<Segment>,
}

impl Scan<'_> {
    fn peek(&self) -> Option<u8> {
        self.text.as_bytes().get(self.i).copied()
    }

    fn skip_whitespace(&mut self) {
        while matches!(self.peek(), Some(b' ' | b'\t' | b'\n' | b'\r')) {
            self.i += 1;
        }
    }

    /// Walks the member or element at the cursor, named `segment`, of a container at `depth`;
    /// `true` once the place is found: in it (`path` then names it), or before it (in the
    /// container, which `path` then names).
    fn member(&mut self, segment: Segment, depth: usize) -> bool {
        self.path.push(segment);
        let place = self.value(depth + 1);
        if place != Place::Found {
            self.path.pop();
        }
        place != Place::Past
    }

    /// Walks the value at the cursor.
    fn value(&mut self, depth: usize) -> Place {
        self.skip_whitespace();
        let first = self.peek();
        if self.i > self.at || (self.i == self.at && first != self.opening) || depth > MAX_DEPTH {
            return Place::Before;
        }
        match first {
            None => return Place::Before,
            Some(b'{') => {
                self.i += 1;
                loop {
                    self.skip_whitespace();
                    match self.peek() {
                        Some(b'}') => {
                            self.i += 1;
                            break;
                        }
                        Some(b',') => {
                            self.i += 1;
                            continue;
                        }
                        Some(b'"') if self.i < self.at => {}
                        _ => return Place::Found,
                    }
                    let Some(key) = self.string() else {
                        return Place::Found;
                    };
                    self.skip_whitespace();
                    if self.i >= self.at || self.peek() != Some(b':') {
                        // Just after the key (an unknown field), or text that is not JSON.
                        self.path.push(Segment::Key(key));
                        return Place::Found;
                    }
                    self.i += 1;
                    if self.member(Segment::Key(key), depth) {
                        return Place::Found;
                    }
                }
            }
            Some(b'[') => {
                self.i += 1;
                let mut index = 0;
                loop {
                    self.skip_whitespace();
                    match self.peek() {
                        Some(b']') => {
                            self.i += 1;
                            break;
                        }
                        Some(b',') => {
                            self.i += 1;
                            index += 1;
                            continue;
                        }
                        None => return Place::Found,
                        Some(_) => {}
                    }
                    if self.member(Segment::Index(index), depth) {
                        return Place::Found;
                    }
                }
            }
            Some(b'"') => {
                if self.string().is_none() {
                    return Place::Found;
                }
            }
            Some(_) => {
                while self
                    .peek()
                    .is_some_and(|b| !matches!(b, b',' | b'}' | b']' | b' ' | b'\t' | b'\n' | b'\r'))
                {
                    self.i += 1;
                }
            }
        }
        if self.at <= self.i {
            Place::Found
        } else {
            Place::Past
        }
    }

    /// The string at the cursor, unescaped; the cursor ends after its closing quote. `None` when
    /// it does not end.
    fn string(&mut self) -> Option<String> {
        let bytes = self.text.as_bytes();
        let start = self.i;
        let mut i = start + 1;
        loop {
            match bytes.get(i)? {
                b'"' => break,
                b'\\' => i += 2,
                _ => i += 1,
            }
        }
        self.i = i + 1;
        let raw = self.text.get(start..self.i)?;
        Some(serde_json::from_str(raw).unwrap_or_else(|_| raw[1..raw.len() - 1].to_string()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::Value;

    #[test]
    fn members_elements_and_scalars_read_as_serde_json_reads_them() {
        let text = r#" {"b": {"x": [1, 2]}, "a\u0062c": null, "b": "two", "n": -1.5e3} "#;
        let got = members(text).unwrap();
        let want: Vec<(Cow<'_, str>, &str)> = vec![
            ("b".into(), r#"{"x": [1, 2]}"#),
            // Keys are decoded; a repeated key and `null` are kept as written.
            ("abc".into(), "null"),
            ("b".into(), r#""two""#),
            ("n".into(), "-1.5e3"),
        ];
        assert_eq!(got, want);
        // Keys are borrowed from the text unless they have escapes.
        assert!(matches!(got[0].0, Cow::Borrowed("b")) && matches!(got[1].0, Cow::Owned(_)));
        assert_eq!(members("{}").unwrap(), Vec::<(Cow<'_, str>, &str)>::new());
        for bad in ["[1]", "7", r#""{}""#, "{", r#"{"a":1} x"#, r#"{"a"}"#] {
            let e = members(bad).unwrap_err().to_string();
            assert!(!e.is_empty(), "{bad}");
        }
        assert!(
            members("[]")
                .unwrap_err()
                .to_string()
                .contains("expected a JSON object")
        );

        assert_eq!(
            elements(r#"[ {"k": 1}, "s", [], null ]"#).unwrap(),
            [r#"{"k": 1}"#, r#""s""#, "[]", "null"]
        );
        assert!(elements("{}").is_err() && elements("[1,").is_err());

        // Every object and array in five recorded clusters, as written and pretty-printed: the
        // members and elements are those of serde_json's `Value`, each value's text reading back
        // as that value.
        let (mut objects, mut arrays) = (0, 0);
        for file in fixtures::CLUSTERS {
            let root: Value = serde_json::from_str(file).unwrap();
            let mut at = Vec::new();
            fixtures::pointers(&root, String::new(), &mut at);
            for node in at.iter().filter_map(|p| root.pointer(p)) {
                for text in [node.to_string(), serde_json::to_string_pretty(node).unwrap()] {
                    match node {
                        Value::Object(map) => {
                            let got = members(&text).unwrap();
                            assert_eq!(got.len(), map.len(), "{text}");
                            for (key, value) in got {
                                let read: Value = serde_json::from_str(value).unwrap();
                                assert_eq!(Some(&read), map.get(key.as_ref()), "{text}");
                            }
                            objects += 1;
                        }
                        Value::Array(items) => {
                            let got = elements(&text).unwrap();
                            let read: Vec<Value> =
                                got.iter().map(|e| serde_json::from_str(e).unwrap()).collect();
                            assert_eq!(&read, items, "{text}");
                            arrays += 1;
                        }
                        Value::String(s) => assert_eq!(&string(&text).unwrap(), s),
                        Value::Bool(b) => assert_eq!(boolean(&text).unwrap(), *b),
                        _ => {}
                    }
                }
            }
        }
        assert!(
            objects > 1_000 && arrays > 200,
            "{objects} objects, {arrays} arrays"
        );

        assert_eq!(string(r#""a\"b\u00e9""#).unwrap(), "a\"b\u{e9}");
        assert!(string("1").is_err() && string("null").is_err());
        assert!(boolean("true").unwrap() && !boolean(" false ").unwrap());
        assert!(boolean("\"true\"").is_err() && boolean("1").is_err());
    }

    /// Where serde_json stops is named as serde_path_to_error named it: the value just read, the
    /// container whose member is missing, the unknown key, the element.
    #[test]
    fn errors_are_placed_on_the_field() {
        #[derive(Debug, serde::Deserialize)]
        #[serde(deny_unknown_fields)]
        struct Inner {
            #[allow(dead_code, reason = "only decoded")]
            n: u32,
        }
        #[derive(Debug, serde::Deserialize)]
        #[allow(dead_code, reason = "only decoded")]
        struct Outer {
            #[serde(default)]
            list: Vec<Inner>,
            #[serde(default)]
            map: std::collections::BTreeMap<String, Inner>,
            #[serde(default)]
            name: String,
        }
        let cases = [
            (
                r#"{"list":[{"n":1},{"n":"x"}]}"#,
                "list[1].n",
                "invalid type: string \"x\", expected u32",
            ),
            (r#"{"list":[{"n":1},{}]}"#, "list[1]", "missing field `n`"),
            (
                r#"{"list":[{"n":1,"m":2}]}"#,
                "list[0].m",
                "unknown field `m`, expected `n`",
            ),
            (
                r#"{"map":{"a.b/c":{"n":-1}}}"#,
                "map.a.b/c.n",
                "invalid value: integer `-1`, expected u32",
            ),
            (
                r#"{"map":{"q\"k":{"n":{}}}}"#,
                "map.q\"k.n",
                "invalid type: map, expected u32",
            ),
            (
                r#"{"name":[1,2]}"#,
                "name",
                "invalid type: sequence, expected a string",
            ),
            (r#"{"list":{}}"#, "list", "invalid type: map, expected a sequence"),
            (
                r#"{"list":[5]}"#,
                "list[0]",
                "invalid type: integer `5`, expected struct Inner",
            ),
            (r#""x""#, "", "invalid type: string \"x\", expected struct Outer"),
            (
                "{\n  \"list\": [\n    {\"n\": true}\n  ]\n}",
                "list[0].n",
                "invalid type: boolean `true`, expected u32",
            ),
            (r#"{"name":"a"} x"#, "", "trailing characters"),
        ];
        for (text, path, message) in cases {
            let err = from_text::<Outer>(text).unwrap_err();
            assert_eq!(
                (err.path.as_str(), err.message().as_str()),
                (path, message),
                "{text}"
            );
        }
    }

    #[test]
    fn paths_of_places_in_the_text() {
        let text = r#"{"a":{"b":[10,{"c":"x"}],"d":null},"e":1}"#;
        let at = |s: &str| text.find(s).unwrap();
        let path = |at: usize| path_at(text, at, None);
        assert_eq!(path(0), "");
        assert_eq!(path(at("10") + 2), "a.b[0]");
        assert_eq!(path(at(r#""x""#) + 3), "a.b[1].c");
        assert_eq!(path(at(r#"}],"#) + 1), "a.b[1]");
        assert_eq!(path(at(r#""d""#) + 3), "a.d", "just after a key");
        assert_eq!(path(at(r#""d""#)), "a", "at a key: its map");
        assert_eq!(path(at("null") + 4), "a.d");
        assert_eq!(path(at("10")), "a.b", "at a scalar: its container");
        assert_eq!(path(text.len() - 1), "e");
        assert_eq!(path(text.len()), "");
        // At the first byte of a sequence or map: that value when it is the kind the error names.
        assert_eq!(path_at(text, at("[10"), Some(b'[')), "a.b");
        assert_eq!(path_at(text, at("[10"), Some(b'{')), "a");
        assert_eq!(path_at(text, at(r#"{"c""#), Some(b'{')), "a.b[1]");
        assert_eq!(path_at(text, at(r#"{"c""#), None), "a.b");
        // Text that is not JSON, or a place past its end, never fails.
        for broken in [r#"{"a":[1,"#, r#"{"a"#, r#"{"a":"x"#, "[[[[", "}", r#"{"a\"#, ""] {
            for at in 0..=broken.len() + 1 {
                for opening in [None, Some(b'['), Some(b'{')] {
                    path_at(broken, at, opening);
                }
            }
        }
    }
}
