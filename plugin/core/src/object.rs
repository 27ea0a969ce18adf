//! Loading Kubernetes JSON: a single object, a `List` (`kind: List`, `items`), or a stream of them.
//!
//! Each object is decoded on its own, so one malformed object is reported (naming its kind,
//! namespace, name and the JSON path of the bad field) and skipped while the others load.

use std::borrow::Cow;

use serde::de::DeserializeOwned;
use serde_json::Value;
use serde_json::value::RawValue;

use crate::error::Error;
use std::collections::BTreeMap;

use crate::model::{
    DeviceClass, DeviceTaintRule, Node, Pod, ResourceClaim, ResourceClaimTemplate, ResourceSlice,
};

/// Largest JSON document accepted by [`parse_objects`] (64 MiB): bigger inputs are refused up front
/// instead of exhausting memory.
pub const MAX_INPUT_BYTES: usize = 64 << 20;

/// One decoded Kubernetes object of a kind the plugin uses.
#[derive(Clone, Debug, PartialEq)]
pub enum Object {
    /// `v1` Node.
    Node(Box<Node>),
    /// `v1` Pod.
    Pod(Box<Pod>),
    /// `resource.k8s.io/v1` ResourceSlice.
    ResourceSlice(Box<ResourceSlice>),
    /// `resource.k8s.io/v1` DeviceClass.
    DeviceClass(Box<DeviceClass>),
    /// `resource.k8s.io/v1` ResourceClaim.
    ResourceClaim(Box<ResourceClaim>),
    /// `resource.k8s.io/v1` ResourceClaimTemplate.
    ResourceClaimTemplate(Box<ResourceClaimTemplate>),
    /// `resource.k8s.io` DeviceTaintRule (`v1`, `v1beta2` or `v1alpha3`).
    DeviceTaintRule(Box<DeviceTaintRule>),
}

/// The object kinds the plugin tracks.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Kind {
    /// Node.
    Node,
    /// Pod.
    Pod,
    /// ResourceSlice.
    ResourceSlice,
    /// DeviceClass.
    DeviceClass,
    /// ResourceClaim.
    ResourceClaim,
    /// ResourceClaimTemplate.
    ResourceClaimTemplate,
    /// DeviceTaintRule.
    DeviceTaintRule,
}

impl Kind {
    /// The Kubernetes kind name.
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Node => "Node",
            Kind::Pod => "Pod",
            Kind::ResourceSlice => "ResourceSlice",
            Kind::DeviceClass => "DeviceClass",
            Kind::ResourceClaim => "ResourceClaim",
            Kind::ResourceClaimTemplate => "ResourceClaimTemplate",
            Kind::DeviceTaintRule => "DeviceTaintRule",
        }
    }

    /// Parses a Kubernetes kind name.
    pub fn from_name(kind: &str) -> Option<Kind> {
        Some(match kind {
            "Node" => Kind::Node,
            "Pod" => Kind::Pod,
            "ResourceSlice" => Kind::ResourceSlice,
            "DeviceClass" => Kind::DeviceClass,
            "ResourceClaim" => Kind::ResourceClaim,
            "ResourceClaimTemplate" => Kind::ResourceClaimTemplate,
            "DeviceTaintRule" => Kind::DeviceTaintRule,
            _ => return None,
        })
    }

    /// The API version this plugin reads for the kind (and writes in [`Object::to_json`]).
    pub fn api_version(self) -> &'static str {
        match self {
            Kind::Node | Kind::Pod => "v1",
            _ => "resource.k8s.io/v1",
        }
    }

    /// Every API version this plugin reads for the kind, newest first.
    pub fn api_versions(self) -> &'static [&'static str] {
        match self {
            Kind::Node | Kind::Pod => &["v1"],
            Kind::DeviceTaintRule => &[
                "resource.k8s.io/v1",
                "resource.k8s.io/v1beta2",
                DEVICE_TAINT_RULE_ALPHA,
            ],
            _ => &["resource.k8s.io/v1"],
        }
    }
}

/// The one DeviceTaintRule version with `deviceSelector.deviceClassName` and
/// `deviceSelector.selectors` (Kubernetes 1.33 and 1.34; dropped in 1.35).
pub const DEVICE_TAINT_RULE_ALPHA: &str = "resource.k8s.io/v1alpha3";

impl Object {
    /// The object's kind.
    pub fn kind(&self) -> Kind {
        match self {
            Object::Node(_) => Kind::Node,
            Object::Pod(_) => Kind::Pod,
            Object::ResourceSlice(_) => Kind::ResourceSlice,
            Object::DeviceClass(_) => Kind::DeviceClass,
            Object::ResourceClaim(_) => Kind::ResourceClaim,
            Object::ResourceClaimTemplate(_) => Kind::ResourceClaimTemplate,
            Object::DeviceTaintRule(_) => Kind::DeviceTaintRule,
        }
    }

    /// The object's metadata.
    pub fn metadata(&self) -> &crate::model::ObjectMeta {
        match self {
            Object::Node(o) => &o.metadata,
            Object::Pod(o) => &o.metadata,
            Object::ResourceSlice(o) => &o.metadata,
            Object::DeviceClass(o) => &o.metadata,
            Object::ResourceClaim(o) => &o.metadata,
            Object::ResourceClaimTemplate(o) => &o.metadata,
            Object::DeviceTaintRule(o) => &o.metadata,
        }
    }

    /// `namespace/name` for namespaced objects, `name` otherwise.
    pub fn key(&self) -> String {
        let meta = self.metadata();
        object_key(&meta.namespace, &meta.name)
    }

    /// Serializes the object back to Kubernetes JSON (with `apiVersion` and `kind`).
    pub fn to_json(&self) -> Value {
        let (kind, mut v) = match self {
            Object::Node(o) => (Kind::Node, serde_json::to_value(o)),
            Object::Pod(o) => (Kind::Pod, serde_json::to_value(o)),
            Object::ResourceSlice(o) => (Kind::ResourceSlice, serde_json::to_value(o)),
            Object::DeviceClass(o) => (Kind::DeviceClass, serde_json::to_value(o)),
            Object::ResourceClaim(o) => (Kind::ResourceClaim, serde_json::to_value(o)),
            Object::ResourceClaimTemplate(o) => (Kind::ResourceClaimTemplate, serde_json::to_value(o)),
            Object::DeviceTaintRule(o) => (Kind::DeviceTaintRule, serde_json::to_value(o)),
        };
        // A rule with the fields only v1alpha3 has stays v1alpha3, so that it decodes again.
        let api_version = match self {
            Object::DeviceTaintRule(r) if r.uses_alpha_fields() => DEVICE_TAINT_RULE_ALPHA,
            _ => kind.api_version(),
        };
        if let Ok(Value::Object(map)) = &mut v {
            map.insert("apiVersion".into(), Value::String(api_version.into()));
            map.insert("kind".into(), Value::String(kind.as_str().into()));
        }
        v.unwrap_or(Value::Null)
    }
}

impl Object {
    /// [`Object::to_json`] as text, written in one pass (no [`Value`] tree): the same members,
    /// `apiVersion` and `kind` first. What hosts send to the plugin for each object event.
    pub fn to_json_string(&self) -> String {
        match self {
            Object::Node(o) => json_string(Kind::Node, o),
            Object::Pod(o) => json_string(Kind::Pod, o),
            Object::ResourceSlice(o) => json_string(Kind::ResourceSlice, o),
            Object::DeviceClass(o) => json_string(Kind::DeviceClass, o),
            Object::ResourceClaim(o) => json_string(Kind::ResourceClaim, o),
            Object::ResourceClaimTemplate(o) => json_string(Kind::ResourceClaimTemplate, o),
            // A rule with the fields only v1alpha3 has stays v1alpha3, so that it decodes again.
            Object::DeviceTaintRule(r) if r.uses_alpha_fields() => with_header(
                DEVICE_TAINT_RULE_ALPHA,
                Kind::DeviceTaintRule,
                serde_json::to_string(r),
            ),
            Object::DeviceTaintRule(o) => json_string(Kind::DeviceTaintRule, o),
        }
    }
}

/// An object of `kind` (its typed body: `object` must be of that kind) as Kubernetes JSON text,
/// [`Object::to_json_string`] for one kind: a caller that writes only one kind compiles only
/// that kind's serialisers.
pub fn json_string<T: serde::Serialize>(kind: Kind, object: &T) -> String {
    with_header(kind.api_version(), kind, serde_json::to_string(object))
}

/// `apiVersion` and `kind` put first into a typed object's JSON text.
fn with_header(api_version: &str, kind: Kind, body: serde_json::Result<String>) -> String {
    // The typed objects are structs: their JSON is an object, `{` first.
    let body = body.unwrap_or_default();
    let members = body.strip_prefix('{').unwrap_or("}");
    let separator = if members.starts_with('}') { "" } else { "," };
    format!(
        "{{\"apiVersion\":\"{api_version}\",\"kind\":\"{}\"{separator}{members}",
        kind.as_str()
    )
}

/// An object's `kind` and `namespace/name` (`name` without a namespace) from its JSON text, for
/// messages: `ResourceClaim ns/c`; `?` for what is missing or not a string, `? ?` for text that is
/// not JSON.
pub fn label(json: &str) -> String {
    let object: Value = serde_json::from_str(json).unwrap_or(Value::Null);
    let text = |v: Option<&Value>| v.and_then(Value::as_str).unwrap_or("?").to_string();
    let meta = object.get("metadata");
    let name = text(meta.and_then(|m| m.get("name")));
    let namespace = meta.and_then(|m| m.get("namespace")).and_then(Value::as_str);
    format!(
        "{} {}",
        text(object.get("kind")),
        object_key(namespace.unwrap_or(""), &name)
    )
}

/// `namespace/name`, or `name` when the namespace is empty.
pub fn object_key(namespace: &str, name: &str) -> String {
    if namespace.is_empty() {
        name.to_string()
    } else {
        format!("{namespace}/{name}")
    }
}

/// What [`parse_objects`] produced: the objects that decoded, and one error per object that did
/// not. Objects of kinds the plugin does not use are counted, by kind, in `ignored`: every object
/// of the input is in exactly one of the three.
#[derive(Debug, Default)]
pub struct Parsed {
    /// Successfully decoded objects, in input order.
    pub objects: Vec<Object>,
    /// Where each of [`Parsed::objects`] starts: its byte offset in the document.
    pub offsets: Vec<usize>,
    /// One error per object that failed to decode.
    pub errors: Vec<Error>,
    /// Objects of other kinds (Namespaces, Events, Deployments...) by kind: not used.
    pub ignored: BTreeMap<String, usize>,
    /// The JSON text of each object in `errors` whose kind and name could be read
    /// ([`identify`]): a host that hands objects to the plugin itself hands these over too, so
    /// that the plugin says they were rejected where a decision misses them.
    pub refused: Vec<String>,
}

/// Parses a JSON document holding one object, a `List` of objects, or a stream of either.
///
/// A document that is not JSON at all is an error; individual bad objects are reported in
/// [`Parsed::errors`] and skipped.
pub fn parse_objects(json: &str) -> Result<Parsed, Error> {
    if json.len() > MAX_INPUT_BYTES {
        return Err(Error::Json(format!(
            "input is {} bytes, more than the limit of {MAX_INPUT_BYTES}",
            json.len()
        )));
    }
    let mut parsed = Parsed::default();
    let mut index = 0usize;
    for document in serde_json::Deserializer::from_str(json).into_iter::<&RawValue>() {
        let document = document.map_err(|e| Error::Json(e.to_string()))?.get();
        collect(document, offset_in(json, document), &mut index, &mut parsed);
    }
    Ok(parsed)
}

/// The byte offset of `inner` in `outer`, of which it is a slice (the values serde_json borrows
/// from a document are); 0 for a string that is not a slice of `outer`.
pub fn offset_in(outer: &str, inner: &str) -> usize {
    let (start, at) = (outer.as_ptr() as usize, inner.as_ptr() as usize);
    if at >= start && at + inner.len() <= start + outer.len() {
        at - start
    } else {
        0
    }
}

/// The fields of a DRA object (`spec`, and a claim's `status.allocation`) that the plugin does
/// not read, each as a path (`spec.devices[0].bindsToNodeX`): a field Kubernetes added that the
/// model does not know, or a misspelt one. Nothing of a Node or Pod, and nothing of `metadata`
/// or of a claim's driver-written `status.devices`, which carry no scheduling meaning here. For
/// hosts, which warn about each: the decode itself ignores unknown fields, as the API machinery
/// does, so that a newer API server's objects still load.
pub fn unread_fields(json: &str) -> Vec<String> {
    fn ignored<T: DeserializeOwned>(json: &str) -> Vec<String> {
        let mut paths = Vec::new();
        let mut de = serde_json::Deserializer::from_str(json);
        let reader = crate::json::ApiJson::new(&mut de);
        // An object that does not decode is reported as rejected, not here.
        let _ = serde_ignored::deserialize::<_, _, T>(reader, |path| paths.push(path.to_string()));
        paths
    }
    let Some((kind, _)) = identify(json) else {
        return Vec::new();
    };
    let paths = match kind {
        Kind::ResourceSlice => ignored::<ResourceSlice>(json),
        Kind::ResourceClaim => ignored::<ResourceClaim>(json),
        Kind::ResourceClaimTemplate => ignored::<ResourceClaimTemplate>(json),
        Kind::DeviceClass => ignored::<DeviceClass>(json),
        Kind::DeviceTaintRule => ignored::<DeviceTaintRule>(json),
        Kind::Node | Kind::Pod => return Vec::new(),
    };
    paths
        .into_iter()
        .filter(|p| p.starts_with("spec.") || p.starts_with("status.allocation."))
        .map(|p| {
            // serde_ignored writes list indices as segments (`devices.0`), which the core's
            // errors write as `devices[0]`, and `?` for an `Option` or newtype it passed
            // through, which is no field.
            p.split('.')
                .filter(|segment| *segment != "?")
                .fold(String::new(), |mut path, segment| {
                    if !segment.is_empty() && segment.bytes().all(|b| b.is_ascii_digit()) {
                        path.push_str(&format!("[{segment}]"));
                    } else {
                        if !path.is_empty() {
                            path.push('.');
                        }
                        path.push_str(segment);
                    }
                    path
                })
        })
        .collect()
}

/// `List`s inside `List`s deeper than this are an error. Each level reads its list's text again
/// (the items are found by skipping the rest of the object), so the depth bounds that work: at
/// most 16 passes over a document, where recorded clusters nest one or two `List`s.
const MAX_LIST_DEPTH: usize = 16;

/// Adds one JSON value, as text (an object, or a `List` of them, walked recursively), to
/// `parsed`; `offset` is where `json` starts in its document, `index` counts objects for error
/// messages. [`parse_objects`] calls it per document; a host that reads documents over
/// [`MAX_INPUT_BYTES`] itself calls it per value. Each object is decoded as by [`decode_str`], in
/// one pass when it is valid; each error is an [`Error::At`] with its byte offset in the
/// document, and each object's offset is in [`Parsed::offsets`].
pub fn collect(json: &str, offset: usize, index: &mut usize, parsed: &mut Parsed) {
    collect_at(json, offset, index, parsed, 0);
}

fn collect_at(json: &str, offset: usize, index: &mut usize, parsed: &mut Parsed, depth: usize) {
    /// What tells a `List` from an object; the rest of the text is skipped.
    #[derive(serde::Deserialize)]
    struct Document<'a> {
        #[serde(default, borrow)]
        kind: Option<Cow<'a, str>>,
        #[serde(default, borrow)]
        items: Option<&'a RawValue>,
    }
    let document: Option<Document<'_>> = serde_json::from_str(json).ok();
    if let Some(Document {
        kind: Some(kind),
        items,
    }) = &document
        && kind.ends_with("List")
        // `items` absent or `null` is an empty list, as Go decodes a nil slice.
        && let Ok(items) = items.map_or(Ok(Vec::new()), |i| serde_json::from_str::<Vec<&RawValue>>(i.get()))
    {
        if depth >= MAX_LIST_DEPTH {
            parsed.errors.push(Error::At {
                offset,
                error: Box::new(Error::Unidentified {
                    index: *index,
                    reason: format!("a {kind} nested in more than {MAX_LIST_DEPTH} lists"),
                }),
            });
            *index += 1;
            return;
        }
        for item in items {
            let item = item.get();
            collect_at(item, offset + offset_in(json, item), index, parsed, depth + 1);
        }
        return;
    }
    let i = *index;
    *index += 1;
    match decode_located(json, i) {
        Ok(Some(o)) => {
            parsed.objects.push(o);
            parsed.offsets.push(offset);
        }
        Ok(None) => {
            let kind = match document {
                Some(d) => d.kind.map(Cow::into_owned),
                // A repeated `kind`: the last one, as the `Value` read it.
                None => serde_json::from_str::<Value>(json)
                    .ok()
                    .and_then(|v| v.get("kind").and_then(Value::as_str).map(str::to_string)),
            };
            *parsed.ignored.entry(kind.unwrap_or_default()).or_default() += 1;
        }
        Err((error, at)) => {
            if identify(json).is_some() {
                parsed.refused.push(json.to_string());
            }
            // The position in the document replaces the one serde_json counted in the object.
            let error = match error {
                Error::Json(message) => Error::Json(without_serde_position(&message).to_string()),
                other => other,
            };
            parsed.errors.push(Error::At {
                offset: offset + at,
                error: Box::new(error),
            });
        }
    }
}

/// serde_json's message without the position it appends (` at line 1 column 502`).
fn without_serde_position(message: &str) -> &str {
    let Some((text, position)) = message.rsplit_once(" at line ") else {
        return message;
    };
    let numbers = position.split_once(" column ");
    let digits = |t: &str| !t.is_empty() && t.bytes().all(|b| b.is_ascii_digit());
    match numbers {
        Some((line, column)) if digits(line) && digits(column) => text,
        _ => message,
    }
}

/// Where the scalar that ends at byte `end` of `text` starts: serde_json reports a bad number,
/// literal or string right after it, and a reader looks for its start. `end` itself when no
/// scalar ends there.
fn value_start(text: &str, end: usize) -> usize {
    let bytes = &text.as_bytes()[..end.min(text.len())];
    match bytes.last() {
        Some(b'"') => {
            // The opening quote: the last quote before the closing one that no odd run of
            // backslashes escapes.
            let mut at = bytes.len() - 1;
            while let Some(quote) = bytes[..at].iter().rposition(|&b| b == b'"') {
                let backslashes = bytes[..quote].iter().rev().take_while(|&&b| b == b'\\').count();
                if backslashes % 2 == 0 {
                    return quote;
                }
                at = quote;
            }
            end
        }
        Some(b) if b.is_ascii_alphanumeric() || matches!(b, b'+' | b'-' | b'.') => {
            let scalar = |b: &u8| b.is_ascii_alphanumeric() || matches!(b, b'+' | b'-' | b'.');
            bytes.iter().rposition(|b| !scalar(b)).map_or(0, |at| at + 1)
        }
        _ => end,
    }
}

/// The byte offset in `text` of serde_json's (1-based) line and (0-based, in bytes) column;
/// 0 when serde_json gave no position.
fn byte_at(text: &str, line: usize, column: usize) -> usize {
    if line == 0 {
        return 0;
    }
    let start = if line == 1 {
        0
    } else {
        text.match_indices('\n').nth(line - 2).map_or(0, |(at, _)| at + 1)
    };
    (start + column).min(text.len())
}

/// The fields [`decode_str`] reads before decoding the whole object; everything else is skipped.
#[derive(serde::Deserialize)]
#[serde(rename_all = "camelCase")]
struct Head<'a> {
    #[serde(default, borrow)]
    kind: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    api_version: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    metadata: Option<HeadMeta<'a>>,
}

/// `metadata` as [`Head`] reads it.
#[derive(serde::Deserialize)]
struct HeadMeta<'a> {
    #[serde(default, borrow)]
    name: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    namespace: Option<Cow<'a, str>>,
}

/// The kind and `namespace/name` of an object of a kind the plugin uses, from its JSON text,
/// whether or not the rest of it decodes: what names an object the plugin rejected. `None` for
/// text that is not a JSON object, another kind, or an object without a name.
pub fn identify(json: &str) -> Option<(Kind, String)> {
    let head: Head<'_> = serde_json::from_str(json).ok()?;
    let kind = Kind::from_name(head.kind.as_deref()?)?;
    let meta = head.metadata?;
    let name = meta.name.filter(|n| !n.is_empty())?;
    Some((kind, object_key(meta.namespace.as_deref().unwrap_or(""), &name)))
}

/// Decodes one object from its JSON text, as `decode_object(serde_json::from_str(json)?, index)`
/// does, with the same result and the same errors, but in one pass for a valid object of a kind
/// the plugin uses: the typed object is read straight from the text, with no
/// [`serde_json::Value`] tree in between (at 5,000 nodes that tree was most of the load's time and
/// transient memory). Anything else (text that is not JSON, a kind the plugin does not use, a
/// missing name, an unsupported version, a field that does not decode) takes the `Value` path,
/// which gives today's messages (JSON paths without text positions).
///
/// One difference: JSON that serde_json's `Value` cannot hold (a number out of range such as
/// `1e400`, nesting past its recursion limit) is not "malformed JSON" when the object names its
/// kind and name: the error names the object and the field, as for any field that does not
/// decode.
pub fn decode_str(json: &str, index: usize) -> Result<Option<Object>, Error> {
    decode_located(json, index).map_err(|(error, _)| error)
}

/// [`decode_str`], with each error's byte offset in `json`: where the decoder stopped for a
/// field that does not decode or text it cannot read, else 0 (the object as a whole).
fn decode_located(json: &str, index: usize) -> Result<Option<Object>, (Error, usize)> {
    let fast = match decode_fast(json) {
        Ok(object) => return Ok(Some(object)),
        Err(fast) => fast,
    };
    let value: Value = match serde_json::from_str(json) {
        Ok(value) => value,
        Err(e) => return Err(unreadable(json, e)),
    };
    // The typed object is read from the canonical text of `json`, not from `value` written out:
    // serde_json read the value's numbers inexactly (see `json::canonical`).
    let decoded = decode_parsed(value, index, |_| {
        crate::json::canonical(json).map_err(|e| Error::Json(e.to_string()))
    });
    decoded.map_err(|error| {
        // The one-pass decoder read the text itself, so where it stopped is a place in `json`;
        // the `Value` path read canonical text, whose places differ. Both name the same field
        // when they failed on the same one.
        let at = match (&error, &fast) {
            (Error::Field { path, .. }, Some(fast)) if *path == field_path(fast) => {
                value_start(json, byte_at(json, fast.error.line(), fast.error.column()))
            }
            _ => 0,
        };
        (error, at)
    })
}

/// The path [`typed`] names for a [`crate::json::PathError`].
fn field_path(e: &crate::json::PathError) -> String {
    if e.path.is_empty() {
        "(root)".into()
    } else {
        e.path.clone()
    }
}

/// The error for an object whose text serde_json's `Value` cannot read, and where: named by its
/// kind and name, with the path of the value serde_json stopped at, when [`identify`] reads
/// them; else malformed JSON. (The one-pass decoder, when it failed too, may name only an
/// enclosing field: a configuration's parameters are read whole.)
fn unreadable(json: &str, e: serde_json::Error) -> (Error, usize) {
    let at = value_start(json, byte_at(json, e.line(), e.column()));
    let Some((kind, key)) = identify(json) else {
        return (Error::Json(e.to_string()), at);
    };
    let path = match crate::json::from_text::<Value>(json) {
        Err(located) => field_path(&located),
        Ok(_) => "(root)".into(),
    };
    let error = Error::Field {
        object: format!("{} {key}", kind.as_str()),
        path,
        reason: without_serde_position(&e.to_string()).to_string(),
    };
    (error, at)
}

/// The one-pass decode of [`decode_str`]; `Err` whenever the object needs the `Value` path, with
/// the typed decoder's error when it was the typed decoding that failed.
fn decode_fast(json: &str) -> Result<Object, Option<crate::json::PathError>> {
    let head: Head<'_> = serde_json::from_str(json).map_err(|_| None)?;
    let kind = head.kind.as_deref().and_then(Kind::from_name).ok_or(None)?;
    let meta = head.metadata.ok_or(None)?;
    meta.name.as_deref().filter(|n| !n.is_empty()).ok_or(None)?;
    let api = head.api_version.as_deref();
    if api.is_some_and(|a| !kind.api_versions().contains(&a)) {
        return Err(None);
    }
    fn text<T: DeserializeOwned>(json: &str) -> Result<T, Option<crate::json::PathError>> {
        crate::json::from_text(json).map_err(Some)
    }
    Ok(match kind {
        Kind::Node => Object::Node(Box::new(text(json)?)),
        Kind::Pod => Object::Pod(Box::new(text(json)?)),
        Kind::ResourceSlice => Object::ResourceSlice(Box::new(text(json)?)),
        Kind::DeviceClass => Object::DeviceClass(Box::new(text(json)?)),
        Kind::ResourceClaim => Object::ResourceClaim(Box::new(text(json)?)),
        Kind::ResourceClaimTemplate => Object::ResourceClaimTemplate(Box::new(text(json)?)),
        Kind::DeviceTaintRule => {
            let rule: DeviceTaintRule = text(json)?;
            let alpha = api.is_none_or(|a| a == DEVICE_TAINT_RULE_ALPHA);
            if rule.uses_alpha_fields() && !alpha {
                return Err(None);
            }
            Object::DeviceTaintRule(Box::new(rule))
        }
    })
}

/// Decodes one object. Returns `Ok(None)` for kinds the plugin does not use. Numbers are the
/// value's, as serde_json read them; [`decode_str`] reads them exactly.
pub fn decode_object(value: Value, index: usize) -> Result<Option<Object>, Error> {
    decode_parsed(value, index, |value| Ok(value.to_string()))
}

/// [`decode_object`], with the typed object read from the text `text` gives for the value (its
/// keys unique, the last of a repeated key kept, and in order), once the value passed the checks.
fn decode_parsed(
    value: Value,
    index: usize,
    text: impl FnOnce(Value) -> Result<String, Error>,
) -> Result<Option<Object>, Error> {
    let Some(obj) = value.as_object() else {
        return Err(Error::Unidentified {
            index,
            reason: format!("expected a JSON object, got {}", kind_of(&value)),
        });
    };
    let Some(kind_name) = obj.get("kind").and_then(Value::as_str) else {
        return Err(Error::Unidentified {
            index,
            reason: "field kind: missing or not a string".into(),
        });
    };
    let Some(kind) = Kind::from_name(kind_name) else {
        return Ok(None);
    };
    let meta = obj.get("metadata");
    let name = meta
        .and_then(|m| m.get("name"))
        .and_then(Value::as_str)
        .unwrap_or("");
    let namespace = meta
        .and_then(|m| m.get("namespace"))
        .and_then(Value::as_str)
        .unwrap_or("");
    let label = format!("{} {}", kind.as_str(), object_key(namespace, name));
    if name.is_empty() {
        return Err(Error::Field {
            object: label,
            path: "metadata.name".into(),
            reason: "missing or empty".into(),
        });
    }
    let api = obj.get("apiVersion").and_then(Value::as_str).map(str::to_string);
    if let Some(api) = api.as_deref()
        && !kind.api_versions().contains(&api)
    {
        let expected: Vec<String> = kind.api_versions().iter().map(|v| format!("{v:?}")).collect();
        return Err(Error::Field {
            object: label,
            path: "apiVersion".into(),
            reason: format!("{api:?} is not supported, expected {}", expected.join(" or ")),
        });
    }
    let text = text(value)?;
    let object = match kind {
        Kind::Node => Object::Node(Box::new(typed(&text, &label)?)),
        Kind::Pod => Object::Pod(Box::new(typed(&text, &label)?)),
        Kind::ResourceSlice => Object::ResourceSlice(Box::new(typed(&text, &label)?)),
        Kind::DeviceClass => Object::DeviceClass(Box::new(typed(&text, &label)?)),
        Kind::ResourceClaim => Object::ResourceClaim(Box::new(typed(&text, &label)?)),
        Kind::ResourceClaimTemplate => Object::ResourceClaimTemplate(Box::new(typed(&text, &label)?)),
        Kind::DeviceTaintRule => {
            let rule: DeviceTaintRule = typed(&text, &label)?;
            let alpha = api.as_deref().is_none_or(|a| a == DEVICE_TAINT_RULE_ALPHA);
            if rule.uses_alpha_fields() && !alpha {
                return Err(Error::Field {
                    object: label,
                    path: "spec.deviceSelector".into(),
                    reason: format!(
                        "deviceClassName and selectors exist only in {DEVICE_TAINT_RULE_ALPHA}, not in {}",
                        api.unwrap_or_default()
                    ),
                });
            }
            Object::DeviceTaintRule(Box::new(rule))
        }
    };
    Ok(Some(object))
}

/// The typed object, read from its text by the one deserializer of [`decode_str`]'s one-pass
/// path, so that each type's decoding is compiled once. The text is the value written out: its
/// keys are unique (the last of a repeated key won when the value was parsed, as in Go) and in the
/// value's order, the order in which a bad field was found before.
fn typed<T: DeserializeOwned>(text: &str, label: &str) -> Result<T, Error> {
    crate::json::from_text(text).map_err(|e| Error::Field {
        object: label.to_string(),
        path: if e.path.is_empty() {
            "(root)".into()
        } else {
            e.path.clone()
        },
        reason: e.message(),
    })
}

fn kind_of(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labels_name_the_kind_and_namespace_slash_name() {
        for (json, want) in [
            (r#"{"kind":"Node","metadata":{"name":"n"}}"#, "Node n"),
            (
                r#"{"kind":"ResourceClaim","metadata":{"name":"c","namespace":"ns"}}"#,
                "ResourceClaim ns/c",
            ),
            (
                r#"{"kind":"Pod","metadata":{"name":"p","namespace":""}}"#,
                "Pod p",
            ),
            (r#"{"metadata":{"name":7,"namespace":"ns"}}"#, "? ns/?"),
            (r#"{"kind":"Pod"}"#, "Pod ?"),
            ("[1]", "? ?"),
            ("not json", "? ?"),
        ] {
            assert_eq!(label(json), want, "{json}");
        }
    }
    use serde_json::json;

    #[test]
    fn loads_list_and_stream_and_single() {
        let single = r#"{"apiVersion":"v1","kind":"Node","metadata":{"name":"n1"}}"#;
        let list = format!(r#"{{"apiVersion":"v1","kind":"List","items":[{single},{single}]}}"#);
        let stream = format!("{single}\n{list}");
        assert_eq!(parse_objects(single).unwrap().objects.len(), 1);
        assert_eq!(parse_objects(&list).unwrap().objects.len(), 2);
        assert_eq!(parse_objects(&stream).unwrap().objects.len(), 3);
    }

    /// Lists are walked as text: a `List` nested too deep is one error (not a stack overflow),
    /// and a number out of range is the error of its object only.
    #[test]
    fn lists_nested_deep_and_numbers_out_of_range() {
        let node = r#"{"apiVersion":"v1","kind":"Node","metadata":{"name":"n1"}}"#;
        let mut deep = node.to_string();
        for _ in 0..1_000 {
            deep = format!(r#"{{"kind":"List","items":[{deep}]}}"#);
        }
        let parsed = parse_objects(&deep).unwrap();
        assert_eq!((parsed.objects.len(), parsed.errors.len()), (0, 1));
        assert!(parsed.errors[0].to_string().contains("nested in more than 16"));
        let shallow = format!(r#"{{"kind":"List","items":[{{"kind":"NodeList","items":[{node}]}}]}}"#);
        assert_eq!(parse_objects(&shallow).unwrap().objects.len(), 1);

        let json = format!(
            r#"{{"kind":"List","items":[{node},
                {{"apiVersion":"resource.k8s.io/v1","kind":"ResourceSlice","metadata":{{"name":"s1"}},
                  "spec":{{"driver":"d","pool":{{"name":"p","generation":1e999,"resourceSliceCount":1}}}}}}]}}"#
        );
        let parsed = parse_objects(&json).unwrap();
        assert_eq!((parsed.objects.len(), parsed.errors.len()), (1, 1));
        assert!(
            parsed.errors[0].to_string().contains("out of range"),
            "{}",
            parsed.errors[0]
        );
    }

    #[test]
    fn malformed_json_is_an_error() {
        let err = parse_objects(r#"{"kind": "Node", "#).unwrap_err();
        assert!(matches!(err, Error::Json(_)), "{err}");
    }

    #[test]
    fn bad_object_is_reported_with_path_and_others_load() {
        let json = r#"{"kind":"List","items":[
            {"apiVersion":"resource.k8s.io/v1","kind":"ResourceSlice","metadata":{"name":"s1"},
             "spec":{"driver":"d","pool":{"name":"p","generation":1,"resourceSliceCount":1},
                     "devices":[{"name":"dev0","capacity":{"mem":{"value":"12xyz"}}}]}},
            {"apiVersion":"v1","kind":"Node","metadata":{"name":"n1"}}]}"#;
        let parsed = parse_objects(json).unwrap();
        assert_eq!(parsed.objects.len(), 1);
        assert_eq!(parsed.errors.len(), 1);
        let msg = parsed.errors[0].to_string();
        assert!(msg.contains("ResourceSlice s1"), "{msg}");
        assert!(msg.contains("spec.devices[0].capacity.mem.value"), "{msg}");
    }

    #[test]
    fn missing_required_field_names_it() {
        let json = r#"{"apiVersion":"resource.k8s.io/v1","kind":"ResourceSlice","metadata":{"name":"s1"},
            "spec":{"pool":{"name":"p","generation":1,"resourceSliceCount":1}}}"#;
        let parsed = parse_objects(json).unwrap();
        let msg = parsed.errors[0].to_string();
        assert!(
            msg.contains("ResourceSlice s1") && msg.contains("driver"),
            "{msg}"
        );
    }

    #[test]
    fn missing_name_and_kind_are_errors() {
        let parsed = parse_objects(r#"[1]"#).unwrap();
        assert!(matches!(
            parsed.errors[0].without_position(),
            Error::Unidentified { .. }
        ));
        let parsed = parse_objects(r#"{"metadata":{"name":"x"}}"#).unwrap();
        assert!(parsed.errors[0].to_string().contains("kind"));
        let parsed = parse_objects(r#"{"kind":"Pod","apiVersion":"v1","metadata":{}}"#).unwrap();
        assert!(parsed.errors[0].to_string().contains("metadata.name"));
    }

    #[test]
    fn other_kinds_and_wrong_versions() {
        let parsed =
            parse_objects(r#"{"kind":"ConfigMap","apiVersion":"v1","metadata":{"name":"x"}}"#).unwrap();
        assert_eq!(parsed.ignored, BTreeMap::from([("ConfigMap".to_string(), 1)]));
        let parsed = parse_objects(
            r#"{"kind":"ResourceClaim","apiVersion":"resource.k8s.io/v1beta1","metadata":{"name":"x","namespace":"ns"}}"#,
        )
        .unwrap();
        let msg = parsed.errors[0].to_string();
        assert!(
            msg.contains("ResourceClaim ns/x") && msg.contains("apiVersion"),
            "{msg}"
        );
    }

    #[test]
    fn device_taint_rules_keep_a_version_that_reads_them_again() {
        let alpha = r#"{"kind":"DeviceTaintRule","apiVersion":"resource.k8s.io/v1alpha3","metadata":{"name":"r"},
            "spec":{"deviceSelector":{"selectors":[{"cel":{"expression":"true"}}]},
                    "taint":{"key":"k","effect":"NoSchedule"}}}"#;
        let plain = r#"{"kind":"DeviceTaintRule","apiVersion":"resource.k8s.io/v1beta2","metadata":{"name":"r"},
            "spec":{"deviceSelector":{"driver":"d"},"taint":{"key":"k","effect":"NoSchedule"}}}"#;
        for (json, version) in [(alpha, "resource.k8s.io/v1alpha3"), (plain, "resource.k8s.io/v1")] {
            let o = parse_objects(json).unwrap().objects.remove(0);
            let out = o.to_json();
            assert_eq!(out["apiVersion"], version);
            let again = decode_object(out, 0).unwrap().unwrap();
            assert_eq!(again, o, "round trip through {version}");
        }
    }

    #[test]
    fn to_json_string_is_to_json_as_text() {
        let json = r#"{"kind":"List","items":[
            {"apiVersion":"v1","kind":"Node","metadata":{"name":"n1","labels":{"a":"b"}}},
            {"apiVersion":"resource.k8s.io/v1","kind":"DeviceClass","metadata":{"name":"c"}},
            {"kind":"DeviceTaintRule","apiVersion":"resource.k8s.io/v1alpha3","metadata":{"name":"r"},
             "spec":{"deviceSelector":{"selectors":[{"cel":{"expression":"true"}}]},
                     "taint":{"key":"k","effect":"NoSchedule"}}}]}"#;
        for o in parse_objects(json).unwrap().objects {
            let text = o.to_json_string();
            let value: Value = serde_json::from_str(&text).unwrap();
            assert_eq!(value, o.to_json(), "{text}");
            assert!(text.starts_with(r#"{"apiVersion":"#), "{text}");
        }
    }

    /// An object that takes the `Value` path (here for a repeated key) keeps its configuration's
    /// numbers as the nearest double: it is decoded from the canonical text of what was read, not
    /// from serde_json's `Value` of it, which misses this one by a unit in the last place when
    /// serde_json is built without `float_roundtrip`, as in the guests and in `cargo test -p
    /// sharing-affinity-core`.
    #[test]
    fn the_value_path_reads_configuration_numbers_exactly() {
        let n = "9333333000000629387372";
        let json = format!(
            r#"{{"apiVersion":"resource.k8s.io/v1","kind":"ResourceClaim","kind":"ResourceClaim",
                "metadata":{{"name":"c","namespace":"ns"}},
                "spec":{{"devices":{{"config":[{{"opaque":{{"driver":"d","parameters":{{"n":{n}}}}}}}]}}}}}}"#
        );
        assert!(decode_fast(&json).is_err(), "a repeated key takes the Value path");
        let Ok(Some(Object::ResourceClaim(claim))) = decode_str(&json, 0) else {
            panic!("the claim decodes");
        };
        let opaque = claim.spec.devices.config[0].opaque.as_ref().unwrap();
        let nearest: f64 = n.parse().unwrap();
        let want = format!(r#"{{"n":{}}}"#, serde_json::to_string(&nearest).unwrap());
        assert_eq!(opaque.parameters.get(), want);
    }

    /// `decode_str` gives what decoding the parsed `Value` gives, objects and errors alike.
    #[test]
    fn decode_str_matches_the_value_path() {
        let cases = [
            r#"{"apiVersion":"v1","kind":"Node","metadata":{"name":"n1","labels":{"a":"b"}}}"#,
            r#"{"kind":"Node","metadata":{"name":"n1"}} "#,
            r#"{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p","namespace":"ns"},
                "spec":{"containers":[{"name":"c","resources":{"requests":{"cpu":"1x"}}}]}}"#,
            r#"{"apiVersion":"resource.k8s.io/v1","kind":"ResourceSlice","metadata":{"name":"s1"},
                "spec":{"driver":"d","pool":{"name":"p","generation":1,"resourceSliceCount":1},
                        "devices":[{"name":"dev0","capacity":{"mem":{"value":"12xyz"}}}]}}"#,
            r#"{"apiVersion":"resource.k8s.io/v1","kind":"ResourceSlice","metadata":{"name":"s1"},
                "spec":{"pool":{"name":"p","generation":1,"resourceSliceCount":1}}}"#,
            r#"{"kind":"ResourceClaim","apiVersion":"resource.k8s.io/v1beta1","metadata":{"name":"x","namespace":"ns"}}"#,
            r#"{"kind":"Pod","apiVersion":"v1","metadata":{}}"#,
            r#"{"kind":"Pod","apiVersion":"v1","metadata":{"name":7}}"#,
            r#"{"kind":"ConfigMap","apiVersion":"v1","metadata":{"name":"x"}}"#,
            r#"{"metadata":{"name":"x"}}"#,
            r#"[1]"#,
            r#"{"kind":"DeviceTaintRule","apiVersion":"resource.k8s.io/v1","metadata":{"name":"r"},
                "spec":{"deviceSelector":{"selectors":[{"cel":{"expression":"true"}}]},
                        "taint":{"key":"k","effect":"NoSchedule"}}}"#,
            r#"{"kind":"DeviceTaintRule","apiVersion":"resource.k8s.io/v1alpha3","metadata":{"name":"r"},
                "spec":{"deviceSelector":{"selectors":[{"cel":{"expression":"true"}}]},
                        "taint":{"key":"k","effect":"NoSchedule"}}}"#,
            r#"{"kind":"Node","metadata":{"name":"n1"}} {}"#,
            r#"{"kind": "Node", "#,
        ];
        for json in cases {
            let expected = serde_json::from_str::<Value>(json)
                .map_err(|e| Error::Json(e.to_string()))
                .and_then(|v| decode_object(v, 3));
            let got = decode_str(json, 3);
            assert_eq!(format!("{got:?}"), format!("{expected:?}"), "{json}");
        }
    }

    /// The paths and messages of bad fields are the ones the path-tracking deserializer over a
    /// `Value` gives (serde_path_to_error): every node of recorded objects of every kind is
    /// replaced by values of the wrong types, and an unknown member is added to every object
    /// node. The oracle reads through the core's rules for structs and `null` (`json::ApiJson`).
    #[test]
    fn bad_fields_are_named_as_the_path_tracking_decoder_named_them() {
        fn tracked<T: DeserializeOwned>(value: Value, label: &str) -> Result<T, Error> {
            serde_path_to_error::deserialize(crate::json::ApiJson::new(value)).map_err(|e| {
                let path = e.path().to_string();
                Error::Field {
                    object: label.to_string(),
                    path: if path == "." { "(root)".into() } else { path },
                    reason: e.into_inner().to_string(),
                }
            })
        }
        /// The object of `value`'s kind, each type decoded by `decode`.
        macro_rules! by_kind {
            ($value:expr, $decode:ident) => {{
                let (value, label) = ($value, "the object");
                Ok(match value["kind"].as_str().unwrap() {
                    "Node" => Object::Node(Box::new($decode(value, label)?)),
                    "Pod" => Object::Pod(Box::new($decode(value, label)?)),
                    "ResourceSlice" => Object::ResourceSlice(Box::new($decode(value, label)?)),
                    "DeviceClass" => Object::DeviceClass(Box::new($decode(value, label)?)),
                    "ResourceClaim" => Object::ResourceClaim(Box::new($decode(value, label)?)),
                    "ResourceClaimTemplate" => {
                        Object::ResourceClaimTemplate(Box::new($decode(value, label)?))
                    }
                    "DeviceTaintRule" => Object::DeviceTaintRule(Box::new($decode(value, label)?)),
                    other => panic!("{other}"),
                })
            }};
        }
        fn oracle(value: Value) -> Result<Object, Error> {
            by_kind!(value, tracked)
        }
        fn written<T: DeserializeOwned>(value: Value, label: &str) -> Result<T, Error> {
            typed(&value.to_string(), label)
        }
        fn ours(value: Value) -> Result<Object, Error> {
            by_kind!(value, written)
        }
        let wrong = [
            json!(7),
            json!("x"),
            json!([]),
            json!([1]),
            json!({}),
            json!(null),
            json!(1.5),
            json!(-1),
            json!(true),
        ];
        let (mut compared, mut failed) = (0, 0);
        let mut kinds = std::collections::BTreeSet::new();
        for file in crate::json::fixtures::CLUSTERS {
            let list: Value = serde_json::from_str(file).unwrap();
            for item in list["items"].as_array().unwrap() {
                let kind = item["kind"].as_str().unwrap();
                if Kind::from_name(kind).is_none() || !kinds.insert((file.len(), kind.to_string())) {
                    continue;
                }
                let mut nodes = Vec::new();
                crate::json::fixtures::pointers(item, String::new(), &mut nodes);
                let mut variants = Vec::new();
                for p in &nodes {
                    if p == "/kind" {
                        continue;
                    }
                    for w in &wrong {
                        let mut v = item.clone();
                        *v.pointer_mut(p).unwrap() = w.clone();
                        // A `null` struct reads as the struct read from `{}`; when that misses a
                        // required field, the error has no position of its own and names the
                        // enclosing object or list, where the oracle names the struct.
                        let zero_struct = w.is_null() && item.pointer(p).unwrap().is_object();
                        variants.push((v, zero_struct));
                    }
                    if item.pointer(p).unwrap().is_object() {
                        let mut v = item.clone();
                        v.pointer_mut(p).unwrap()["zzUnknown"] = json!(1);
                        variants.push((v, false));
                    }
                }
                for (v, zero_struct) in variants {
                    let (want, got) = (oracle(v.clone()), ours(v.clone()));
                    match (&want, &got, zero_struct) {
                        (
                            Err(Error::Field {
                                path: inner,
                                reason: r1,
                                ..
                            }),
                            Err(Error::Field {
                                path: outer,
                                reason: r2,
                                ..
                            }),
                            true,
                        ) => {
                            assert_eq!(r1, r2, "{v}");
                            assert!(inner.starts_with(outer.as_str()), "{v}: {outer} encloses {inner}");
                        }
                        _ => assert_eq!(format!("{got:?}"), format!("{want:?}"), "{v}"),
                    }
                    compared += 1;
                    failed += usize::from(got.is_err());
                }
            }
        }
        eprintln!("{compared} compared, {failed} errors");
        assert!(
            compared > 10_000 && failed > 3_000,
            "{compared} compared, {failed} errors"
        );
    }

    /// A `List` whose `items` is `null` (a nil slice, as Go writes it) or absent holds nothing:
    /// no object, no error, no ignored kind.
    #[test]
    fn a_list_with_null_items_is_empty() {
        for json in [
            r#"{"apiVersion":"v1","kind":"List","items":null}"#,
            r#"{"apiVersion":"v1","kind":"List","metadata":{"resourceVersion":""}}"#,
            r#"{"kind":"List","items":[{"kind":"NodeList","items":null}]}"#,
        ] {
            let parsed = parse_objects(json).unwrap();
            assert_eq!(
                (parsed.objects.len(), parsed.errors.len(), parsed.ignored.len()),
                (0, 0, 0),
                "{json}"
            );
        }
    }

    /// Every error of a document names where in the document it is: the bad value for a field
    /// that does not decode (also one serde_json's `Value` cannot hold, which names the object
    /// and the field too), the object for an error about it as a whole. Objects' offsets too.
    #[test]
    fn errors_carry_their_byte_offset_in_the_document() {
        let node = r#"{"apiVersion":"v1","kind":"Node","metadata":{"name":"n1"}}"#;
        let template = r#"{"apiVersion":"resource.k8s.io/v1","kind":"ResourceClaimTemplate",
            "metadata":{"name":"nic-x","namespace":"t"},"spec":{"spec":{"devices":{"config":[
            {"opaque":{"driver":"d","parameters":{"mtu":1e400}}}]}}}}"#;
        let bad_label = r#"{"apiVersion":"v1","kind":"Node","metadata":{"name":"n2","labels":{"a":7}}}"#;
        let no_name = r#"{"apiVersion":"v1","kind":"Pod","metadata":{}}"#;
        let deep = format!("{}1{}", r#"{"a":"#.repeat(200), "}".repeat(200));
        let bad_string = r#"{"apiVersion":"v1","kind":"Node","metadata":{"name":"n3","generation":"a\"b"}}"#;
        let json = format!(
            "{{\"kind\":\"List\",\"items\":[\n{node},\n{template},\n{bad_label},\n{no_name},\n{deep},\n{bad_string}]}}\n{node}"
        );
        let parsed = parse_objects(&json).unwrap();
        let start = |object: &str| json.find(object).unwrap();
        assert_eq!(parsed.offsets, [start(node), json.rfind(node).unwrap()]);
        let errors: Vec<(String, usize)> = parsed
            .errors
            .iter()
            .map(|e| (e.without_position().to_string(), e.offset().unwrap()))
            .collect();
        assert_eq!(errors.len(), 5, "{errors:?}");
        // serde_json stops right after a bad value; the position is where the value starts.
        let e400 = start(template) + template.find("1e400").unwrap();
        assert_eq!(
            errors[0],
            (
                "ResourceClaimTemplate t/nic-x: field spec.spec.devices.config[0].opaque.parameters.mtu: \
                 number out of range"
                    .to_string(),
                e400
            )
        );
        let seven = start(bad_label) + bad_label.find(":7").unwrap() + 1;
        assert_eq!(errors[1].1, seven, "{}", errors[1].0);
        assert!(
            errors[1]
                .0
                .starts_with("Node n2: field metadata.labels.a: invalid type"),
            "{}",
            errors[1].0
        );
        assert_eq!(
            errors[2],
            (
                "Pod : field metadata.name: missing or empty".to_string(),
                start(no_name)
            )
        );
        assert_eq!(
            errors[3].0, "malformed JSON: recursion limit exceeded",
            "the position is the document's"
        );
        assert!(
            (start(&deep)..start(&deep) + deep.len()).contains(&errors[3].1),
            "{errors:?}"
        );
        let quote = start(bad_string) + bad_string.find(r#""a\"b""#).unwrap();
        assert_eq!(errors[4].1, quote, "{}", errors[4].0);
        assert!(
            parsed.errors[0]
                .to_string()
                .ends_with(&format!("(at byte {e400})"))
        );
    }

    /// Timestamps are read as `metav1.Time` reads them: `null` or absent is no time, and any
    /// string must be an RFC 3339 time (an empty one too), else the object is rejected naming
    /// the field.
    #[test]
    fn timestamps_must_be_rfc3339() {
        let pod = |meta: &str, status: &str| {
            format!(
                r#"{{"apiVersion":"v1","kind":"Pod","metadata":{{"name":"p","namespace":"t"{meta}}}{status}}}"#
            )
        };
        let claim = |allocation: &str| {
            format!(
                r#"{{"apiVersion":"resource.k8s.io/v1","kind":"ResourceClaim","metadata":{{"name":"c","namespace":"t"}},
                "spec":{{}},"status":{{"allocation":{{"devices":{{}}{allocation}}}}}}}"#
            )
        };
        for good in [
            pod("", ""),
            pod(r#","creationTimestamp":null"#, ""),
            pod(r#","creationTimestamp":"2026-12-05T05:00:00Z""#, ""),
            pod(r#","deletionTimestamp":"2026-12-05T05:00:00.5+01:00""#, ""),
            claim(r#","allocationTimestamp":"2026-12-05T05:00:00Z""#),
        ] {
            assert!(matches!(decode_str(&good, 0), Ok(Some(_))), "{good}");
        }
        for (bad, field) in [
            (
                pod(r#","creationTimestamp":"garbage""#, ""),
                "metadata.creationTimestamp",
            ),
            (
                pod(r#","creationTimestamp":"""#, ""),
                "metadata.creationTimestamp",
            ),
            (
                pod(r#","deletionTimestamp":"2026-12-05""#, ""),
                "metadata.deletionTimestamp",
            ),
            (
                claim(r#","allocationTimestamp":"yesterday""#),
                "status.allocation.allocationTimestamp",
            ),
        ] {
            let err = decode_str(&bad, 0).map(|_| ()).unwrap_err().to_string();
            assert!(
                err.contains(&format!("field {field}: ")) && err.contains("is not an RFC 3339 timestamp"),
                "{bad}: {err}"
            );
        }
    }

    /// A field of a DRA object's spec that the model does not read is named; metadata, Pods,
    /// Nodes and known fields are not.
    #[test]
    fn unread_fields_of_dra_objects_are_named() {
        let slice = r#"{"apiVersion":"resource.k8s.io/v1","kind":"ResourceSlice",
            "metadata":{"name":"s","managedFields":[{"manager":"kubectl"}]},
            "spec":{"driver":"d","nodeName":"n","pool":{"name":"p","generation":1,"resourceSliceCount":1,"futureField":1},
                    "devices":[{"name":"a"},{"name":"b","bindsToNodeX":true}]}}"#;
        assert_eq!(
            unread_fields(slice),
            ["spec.pool.futureField", "spec.devices[1].bindsToNodeX"]
        );
        let claim = r#"{"apiVersion":"resource.k8s.io/v1","kind":"ResourceClaim","metadata":{"name":"c","namespace":"n"},
            "spec":{"devices":{"requests":[{"name":"r","exactly":{"deviceClassName":"x","newKnob":"y"}}]}},
            "status":{"allocation":{"devices":{"results":[]},"newResult":1},"devices":[{"driver":"d","pool":"p","device":"a"}]}}"#;
        assert_eq!(
            unread_fields(claim),
            [
                "spec.devices.requests[0].exactly.newKnob",
                "status.allocation.newResult"
            ]
        );
        let pod = r#"{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p","namespace":"n"},"spec":{"whatever":1}}"#;
        assert!(unread_fields(pod).is_empty());
    }

    #[test]
    fn unknown_fields_are_ignored() {
        let parsed = parse_objects(
            r#"{"kind":"Node","apiVersion":"v1","metadata":{"name":"n","labels":{"a":"b"},"managedFields":[]},"status":{"capacity":{}}}"#,
        )
        .unwrap();
        assert_eq!(parsed.objects.len(), 1);
    }
}
