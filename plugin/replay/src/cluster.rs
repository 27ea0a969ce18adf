//! A recorded cluster: the objects of the README's `kubectl get ... -o json`, parsed once, with
//! the pending pods in scheduling order, the node names, and where in the input each object and
//! each error is.

use std::collections::{BTreeMap, HashMap};
use std::path::Path;

use serde_json::value::RawValue;
use sharing_affinity_core::object::{Kind, Object, Parsed, collect, identify, offset_in, unread_fields};
use sharing_affinity_core::{EventKind, Plugin};

/// Why a cluster document cannot be read at all (one bad object is not an error: it is listed in
/// [`Cluster::invalid`]).
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The text is not JSON.
    #[error("malformed JSON: {message}")]
    Malformed {
        /// The JSON parser's message, with its line and column.
        message: String,
    },
    /// A value at the top level is not an object.
    #[error(
        "value #{index}, at {at}, is {what}, not an object: the input must be Kubernetes objects \
         (one object, a List such as kubectl prints, or several one after the other)"
    )]
    NotAnObject {
        /// The value's position among the top-level values, from 0.
        index: usize,
        /// Where it starts.
        at: Position,
        /// What it is (`an array`, `a number`...).
        what: &'static str,
    },
    /// The file cannot be read.
    #[error("reading {path}: {error}")]
    Read {
        /// The file.
        path: String,
        /// The I/O error.
        error: std::io::Error,
    },
    /// The file's text cannot be read as a cluster.
    #[error("parsing {path}: {message}")]
    Parse {
        /// The file.
        path: String,
        /// What [`Cluster::parse`] said.
        message: String,
    },
}

/// A recorded cluster, parsed.
#[derive(Debug)]
pub struct Cluster {
    /// The objects of the kinds the plugin uses, in input order.
    pub objects: Vec<Object>,
    /// The replay's clock, in Unix seconds: the newest `metadata.creationTimestamp` of an object
    /// or `status.allocation.allocationTimestamp` of a claim in the input (a recording is at
    /// least that recent), and never before 0 (the Unix epoch). The clock stands still during the replay: no
    /// time passes between cycles. `replay --now` sets it.
    pub now: i64,
    /// Objects that failed to decode, one message each (they are not loaded). The messages are
    /// those the plugin gives for the object alone, so they read the same on every engine;
    /// [`Cluster::invalid_at`] says where each error is in the input.
    pub invalid: Vec<String>,
    /// Where in the input each error of [`Cluster::invalid`] is (same order): the bad value when
    /// the decoder stopped at one, else the start of the object.
    pub invalid_at: Vec<Position>,
    /// Where in the input each of [`Cluster::objects`] starts (same order).
    pub objects_at: Vec<Position>,
    /// The JSON text of each object that failed to decode but names its kind and name: the
    /// replay hands these to the engine as well, whose plugin rejects them and then names them
    /// where a decision misses them.
    pub refused: Vec<String>,
    /// Objects of kinds the plugin does not use (Namespaces, Events...), counted by kind.
    pub ignored: BTreeMap<String, usize>,
    /// Node names, sorted: those of the Nodes that decoded and of those that did not (the
    /// scheduler knows a node whatever the plugin made of it).
    pub nodes: Vec<String>,
    /// Pending pods (`namespace/name`) in scheduling order.
    pub pending: Vec<String>,
    /// Objects that share their kind and name with a later one, which replaced them (see
    /// [`Cluster::parse`]).
    pub duplicates: Vec<Duplicate>,
    /// Fields of DRA objects that the plugin does not read ([`unread_fields`]), each with its
    /// object (`Kind namespace/name`) and where the object starts.
    pub unread: Vec<Unread>,
}

/// Adds `objects` to the plugin as `Add` events; returns one message per object it rejected. The
/// objects go through JSON text, exactly as they cross into the wasm engines.
pub fn add_objects(plugin: &mut Plugin, objects: &[Object]) -> Vec<String> {
    objects
        .iter()
        .filter_map(|object| plugin.apply(EventKind::Add, &object.to_json_string()).err())
        .map(|e| e.to_string())
        .collect()
}

/// Hands the plugin objects (JSON text, [`Cluster::refused`]) that it rejects: it records them,
/// and names them where a decision misses them. Their errors are those the cluster's decoding
/// listed already.
pub fn add_refused(plugin: &mut Plugin, objects: &[String]) {
    for object in objects {
        let _rejected = plugin.apply(EventKind::Add, object);
    }
}

/// A field of a DRA object that the plugin does not read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Unread {
    /// `Kind namespace/name`.
    pub object: String,
    /// The field's path (`spec.devices[0].newField`).
    pub field: String,
    /// Where the object starts.
    pub at: Position,
}

/// An object replaced by a later one of the same kind and name.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Duplicate {
    /// `Kind namespace/name`.
    pub object: String,
    /// Where the replaced object starts.
    pub replaced: Position,
    /// Where the object that replaced it starts.
    pub by: Position,
}

impl Cluster {
    /// Parses a JSON document (a `List`, a single object or a stream of them). Text that is not
    /// JSON, and a value at the top level that is not an object (an array, a number...), is an
    /// error; an object that does not decode is listed in [`Cluster::invalid`].
    ///
    /// Names are unique per kind in an API server, so two decoded objects of one kind and name
    /// are one object seen twice: the last one in the input is kept, as a later update replaces
    /// an object, and each replaced one is listed in [`Cluster::duplicates`].
    pub fn parse(json: &str) -> Result<Cluster, Error> {
        let mut parsed = parse_documents(json)?;
        let duplicates = keep_the_last_of_each_name(json, &mut parsed);
        let unread = unread_in(json, &parsed);
        let mut nodes = Vec::new();
        let mut pending = Vec::new();
        for object in &parsed.objects {
            match object {
                Object::Node(node) => nodes.push(node.metadata.name.to_string()),
                Object::Pod(pod) if pod.spec.node_name.is_empty() => {
                    pending.push((pod.metadata.creation_timestamp.clone(), object.key()));
                }
                _ => {}
            }
        }
        nodes.extend(parsed.refused.iter().filter_map(|json| match identify(json) {
            Some((Kind::Node, name)) => Some(name),
            _ => None,
        }));
        nodes.sort();
        nodes.dedup();
        pending.sort();
        let errors_at: Vec<usize> = parsed.errors.iter().map(|e| e.offset().unwrap_or(0)).collect();
        Ok(Cluster {
            now: recording_time(&parsed.objects),
            invalid: parsed
                .errors
                .iter()
                .map(|e| e.without_position().to_string())
                .collect(),
            invalid_at: Position::all(json, &errors_at),
            objects_at: Position::all(json, &parsed.offsets),
            refused: parsed.refused,
            ignored: parsed.ignored,
            objects: parsed.objects,
            nodes,
            pending: pending.into_iter().map(|(_, key)| key).collect(),
            duplicates,
            unread,
        })
    }

    /// The one summary line for the objects not used, by kind (`None` when every object was used):
    /// `not used by the plugin: 3 objects (Event 2, Namespace 1)`.
    pub fn ignored_summary(&self) -> Option<String> {
        if self.ignored.is_empty() {
            return None;
        }
        let total: usize = self.ignored.values().sum();
        let kinds: Vec<String> = self.ignored.iter().map(|(k, n)| format!("{k} {n}")).collect();
        let noun = if total == 1 { "object" } else { "objects" };
        Some(format!(
            "not used by the plugin: {total} {noun} ({})",
            kinds.join(", ")
        ))
    }

    /// Where in the input the `index`th rejection of a replay of this cluster (the host's `Replay::rejected`:
    /// first [`Cluster::invalid`], then what the plugin refused while loading, each named
    /// `Kind namespace/name: ...`) is.
    pub fn rejection_at(&self, index: usize, message: &str) -> Option<Position> {
        if let Some(at) = self.invalid_at.get(index) {
            return Some(*at);
        }
        let (label, _) = message.split_once(": ")?;
        let (kind, key) = label.split_once(' ')?;
        let kind = Kind::from_name(kind)?;
        self.objects
            .iter()
            .position(|o| o.kind() == kind && o.key() == key)
            .and_then(|i| self.objects_at.get(i).copied())
    }

    /// Reads and parses a cluster file.
    pub fn from_file(path: &Path) -> Result<Cluster, Error> {
        let json = std::fs::read_to_string(path).map_err(|error| Error::Read {
            path: path.display().to_string(),
            error,
        })?;
        Cluster::parse(&json).map_err(|e| Error::Parse {
            path: path.display().to_string(),
            message: e.to_string(),
        })
    }
}

/// See [`Cluster::now`].
fn recording_time(objects: &[Object]) -> i64 {
    let stamps = objects.iter().flat_map(|o| {
        let created = o.metadata().creation_timestamp.as_str();
        let allocated = match o {
            Object::ResourceClaim(c) => c
                .status
                .allocation
                .as_ref()
                .and_then(|a| a.allocation_timestamp.as_deref()),
            _ => None,
        };
        [Some(created), allocated]
    });
    stamps
        .flatten()
        .filter_map(|t| sharing_affinity_core::time::parse_rfc3339(t).ok())
        .map(|(seconds, _)| seconds)
        .fold(0, i64::max)
}

/// The values of a document, each an object or a `List` of them. The replay reads the whole
/// document, so it walks the values here and decodes each object as the plugin does, whatever the
/// document's size: a generated cluster of thousands of nodes is over the plugin's per-input limit
/// ([`sharing_affinity_core::object::MAX_INPUT_BYTES`]), and its objects reach the plugin one
/// event at a time, each under it.
fn parse_documents(json: &str) -> Result<Parsed, Error> {
    let mut parsed = Parsed::default();
    let mut index = 0;
    for (n, document) in serde_json::Deserializer::from_str(json)
        .into_iter::<&RawValue>()
        .enumerate()
    {
        let text = document
            .map_err(|e| Error::Malformed {
                message: e.to_string(),
            })?
            .get();
        let offset = offset_in(json, text);
        // An array at the top level is not a List: kubectl never prints one, and reading it as
        // one object gave a single rejection and an empty replay.
        if !text.starts_with('{') {
            return Err(Error::NotAnObject {
                index: n,
                at: Position::all(json, &[offset])[0],
                what: json_type(text),
            });
        }
        collect(text, offset, &mut index, &mut parsed);
    }
    Ok(parsed)
}

/// The fields the plugin does not read of every decoded DRA object (each object's text is found
/// again at its offset).
fn unread_in(json: &str, parsed: &Parsed) -> Vec<Unread> {
    let mut found: Vec<(usize, String, String)> = Vec::new();
    for (object, &offset) in parsed.objects.iter().zip(&parsed.offsets) {
        if matches!(object, Object::Node(_) | Object::Pod(_)) {
            continue;
        }
        let mut values = serde_json::Deserializer::from_str(&json[offset..]).into_iter::<&RawValue>();
        let Some(Ok(text)) = values.next() else {
            continue;
        };
        for field in unread_fields(text.get()) {
            found.push((
                offset,
                format!("{} {}", object.kind().as_str(), object.key()),
                field,
            ));
        }
    }
    let offsets: Vec<usize> = found.iter().map(|(offset, ..)| *offset).collect();
    let at = Position::all(json, &offsets);
    found
        .into_iter()
        .zip(at)
        .map(|((_, object, field), at)| Unread { object, field, at })
        .collect()
}

/// Drops every decoded object that a later one of the same kind and name follows, and says
/// which (in input order of the replaced objects).
fn keep_the_last_of_each_name(json: &str, parsed: &mut Parsed) -> Vec<Duplicate> {
    let mut last: HashMap<(Kind, String), usize> = HashMap::with_capacity(parsed.objects.len());
    for (i, object) in parsed.objects.iter().enumerate() {
        last.insert((object.kind(), object.key()), i);
    }
    if last.len() == parsed.objects.len() {
        return Vec::new();
    }
    let at = Position::all(json, &parsed.offsets);
    let mut duplicates = Vec::new();
    let mut kept = 0;
    for i in 0..parsed.objects.len() {
        let object = &parsed.objects[i];
        let winner = last[&(object.kind(), object.key())];
        if winner == i {
            parsed.objects.swap(kept, i);
            parsed.offsets.swap(kept, i);
            kept += 1;
        } else {
            duplicates.push(Duplicate {
                object: format!("{} {}", object.kind().as_str(), object.key()),
                replaced: at[i],
                by: at[winner],
            });
        }
    }
    parsed.objects.truncate(kept);
    parsed.offsets.truncate(kept);
    duplicates
}

/// A place in the input text: line and column (both from 1; the column counts characters) and
/// the byte offset (from 0).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Position {
    /// Line, from 1.
    pub line: usize,
    /// Column in characters, from 1.
    pub column: usize,
    /// Bytes before it.
    pub byte: usize,
}

impl std::fmt::Display for Position {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "line {} column {} (byte {})",
            self.line, self.column, self.byte
        )
    }
}

impl Position {
    /// The positions of the byte offsets `bytes` in `text`, in one pass over the text when they
    /// are in increasing order (as the objects and errors of a document are): counting from the
    /// start for each would be quadratic in a one-line file of thousands of objects.
    pub fn all(text: &str, bytes: &[usize]) -> Vec<Position> {
        let text = text.as_bytes();
        let mut at = Position {
            line: 1,
            column: 1,
            byte: 0,
        };
        let mut out = Vec::with_capacity(bytes.len());
        for &byte in bytes {
            let byte = byte.min(text.len());
            if byte < at.byte {
                at = Position {
                    line: 1,
                    column: 1,
                    byte: 0,
                };
            }
            for &b in &text[at.byte..byte] {
                if b == b'\n' {
                    at.line += 1;
                    at.column = 1;
                } else if b & 0xC0 != 0x80 {
                    // Not a UTF-8 continuation byte: a character starts here.
                    at.column += 1;
                }
            }
            at.byte = byte;
            out.push(at);
        }
        out
    }
}

/// What kind of JSON value `text` (valid JSON) is, for messages.
fn json_type(text: &str) -> &'static str {
    match text.as_bytes().first() {
        Some(b'[') => "an array",
        Some(b'"') => "a string",
        Some(b't' | b'f') => "a boolean",
        Some(b'n') => "null",
        Some(b'{') => "an object",
        _ => "a number",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pending_pods_are_ordered_by_creation_then_key_and_nodes_by_name() {
        let json = r#"{"kind":"List","items":[
            {"apiVersion":"v1","kind":"Node","metadata":{"name":"node-b"}},
            {"apiVersion":"v1","kind":"Node","metadata":{"name":"node-a"}},
            {"apiVersion":"v1","kind":"Pod","metadata":{"name":"late","namespace":"a","creationTimestamp":"2025-01-02T00:00:00Z"}},
            {"apiVersion":"v1","kind":"Pod","metadata":{"name":"z","namespace":"b","creationTimestamp":"2025-01-01T00:00:00Z"}},
            {"apiVersion":"v1","kind":"Pod","metadata":{"name":"y","namespace":"b","creationTimestamp":"2025-01-01T00:00:00Z"}},
            {"apiVersion":"v1","kind":"Pod","metadata":{"name":"bound","namespace":"a"},"spec":{"nodeName":"node-a"}}
        ]}"#;
        let cluster = Cluster::parse(json).unwrap();
        assert_eq!(cluster.nodes, ["node-a", "node-b"]);
        assert_eq!(cluster.pending, ["b/y", "b/z", "a/late"]);
    }

    #[test]
    fn a_value_at_the_top_level_that_is_not_an_object_is_an_error() {
        for (json, what) in [
            ("[1, 2]", "value #0, at line 1 column 1 (byte 0), is an array"),
            (
                r#"[{"apiVersion":"v1","kind":"Node","metadata":{"name":"n"}}]"#,
                "is an array",
            ),
            (
                "{\"apiVersion\":\"v1\",\"kind\":\"Node\",\"metadata\":{\"name\":\"n\"}}\n 7",
                "value #1, at line 2 column 2 (byte 59), is a number",
            ),
            (r#""x""#, "is a string"),
            ("null", "is null"),
        ] {
            let err = Cluster::parse(json).map(|_| ()).unwrap_err().to_string();
            assert!(
                err.contains(what) && err.contains("not an object"),
                "{json}: {err}"
            );
        }
    }

    #[test]
    fn positions_count_lines_and_characters() {
        let text = "ab\n\u{e7}d\n\nx";
        let at = |line, column, byte| Position { line, column, byte };
        assert_eq!(
            Position::all(text, &[0, 1, 3, 5, 7, 8, 2, 99]),
            [
                at(1, 1, 0),
                at(1, 2, 1),
                at(2, 1, 3),
                at(2, 2, 5),
                at(3, 1, 7),
                at(4, 1, 8),
                at(1, 3, 2),
                at(4, 2, 9),
            ]
        );
    }

    /// Each rejection of a replay is located: a decoding error where it is, an object the plugin
    /// refused while loading (named `Kind namespace/name: ...`) where it starts.
    #[test]
    fn rejections_are_located_in_the_input() {
        let json = "{\"kind\":\"List\",\"items\":[\n\
            {\"apiVersion\":\"v1\",\"kind\":\"Node\",\"metadata\":{\"name\":\"n1\"}},\n\
            {\"apiVersion\":\"v1\",\"kind\":\"Node\",\"metadata\":{\"name\":\"n2\",\"labels\":{\"a\":7}}},\n\
            {\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"metadata\":{\"name\":\"p\",\"namespace\":\"ns\"}}]}";
        let cluster = Cluster::parse(json).unwrap();
        assert_eq!(cluster.invalid.len(), 1);
        let seven = json.find(":7").unwrap() + 1;
        assert_eq!(
            cluster.rejection_at(0, &cluster.invalid[0]),
            Some(Position {
                line: 3,
                column: seven
                    - json
                        .rfind("\n{\"apiVersion\":\"v1\",\"kind\":\"Node\",\"metadata\":{\"name\":\"n2")
                        .unwrap(),
                byte: seven
            })
        );
        let pod = json.find("{\"apiVersion\":\"v1\",\"kind\":\"Pod\"").unwrap();
        assert_eq!(
            cluster.rejection_at(1, "Pod ns/p: refused by the store"),
            Some(Position {
                line: 4,
                column: 1,
                byte: pod
            })
        );
        assert_eq!(cluster.rejection_at(1, "Pod ns/q: not in the input"), None);
        assert_eq!(cluster.rejection_at(1, "no label"), None);
    }

    #[test]
    fn a_document_over_the_plugin_input_limit_is_parsed_by_the_host() {
        use sharing_affinity_core::object::MAX_INPUT_BYTES;
        let padding = "x".repeat(MAX_INPUT_BYTES);
        let json = format!(
            r#"{{"kind":"List","items":[{{"apiVersion":"v1","kind":"Node","metadata":{{"name":"n"}}}},
            {{"apiVersion":"v1","kind":"ConfigMap","metadata":{{"name":"pad"}},"data":{{"p":"{padding}"}}}},
            {{"apiVersion":"v1","kind":"Pod","metadata":{{}}}}]}}"#
        );
        let cluster = Cluster::parse(&json).unwrap();
        assert_eq!(cluster.nodes, ["n"]);
        assert_eq!(cluster.invalid.len(), 1, "{:?}", cluster.invalid);
        assert!(Cluster::parse(&format!("{json} {{")).is_err(), "truncated JSON");
    }

    #[test]
    fn unused_kinds_are_counted_by_kind_in_one_line() {
        let json = r#"{"kind":"List","items":[
            {"apiVersion":"v1","kind":"Namespace","metadata":{"name":"a"}},
            {"apiVersion":"v1","kind":"Event","metadata":{"name":"e1","namespace":"a"}},
            {"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"d","namespace":"a"}},
            {"apiVersion":"v1","kind":"Event","metadata":{"name":"e2","namespace":"a"}},
            {"apiVersion":"v1","kind":"Node","metadata":{"name":"n"}}
        ]}"#;
        let cluster = Cluster::parse(json).unwrap();
        assert_eq!(
            cluster.ignored_summary().as_deref(),
            Some("not used by the plugin: 4 objects (Deployment 1, Event 2, Namespace 1)")
        );
        assert_eq!(cluster.objects.len(), 1);
        let used = Cluster::parse(r#"{"apiVersion":"v1","kind":"Node","metadata":{"name":"n"}}"#).unwrap();
        assert_eq!(used.ignored_summary(), None);
    }

    #[test]
    fn a_used_kind_in_an_unreadable_version_is_an_error_naming_it() {
        let json = r#"{"kind":"List","items":[
            {"apiVersion":"resource.k8s.io/v1beta1","kind":"ResourceSlice","metadata":{"name":"s"}},
            {"apiVersion":"resource.k8s.io/v1beta1","kind":"DeviceTaintRule","metadata":{"name":"r"}}
        ]}"#;
        let cluster = Cluster::parse(json).unwrap();
        assert_eq!(cluster.invalid.len(), 2, "{:?}", cluster.invalid);
        assert!(cluster.ignored.is_empty(), "never a skip");
        for (msg, name) in cluster
            .invalid
            .iter()
            .zip(["ResourceSlice s", "DeviceTaintRule r"])
        {
            assert!(
                msg.contains(name) && msg.contains("resource.k8s.io/v1beta1"),
                "{msg}"
            );
        }
    }

    #[test]
    fn invalid_objects_are_listed_and_not_json_is_an_error() {
        let json = r#"{"kind":"List","items":[{"apiVersion":"v1","kind":"Pod","metadata":{}}]}"#;
        let cluster = Cluster::parse(json).unwrap();
        assert_eq!(cluster.invalid.len(), 1, "{:?}", cluster.invalid);
        assert!(
            cluster.invalid[0].contains("metadata.name"),
            "{:?}",
            cluster.invalid
        );
        assert!(Cluster::parse("{not json").is_err());
    }
}
