//! CEL values the DRA environment adds to cel-rust's: quantities, semantic versions, and the
//! shared string-keyed maps that hold a prepared device.

use std::any::Any;
use std::collections::HashMap;
use std::sync::Arc;

use cel::ExecutionError;
use cel::common::traits::{self, Container, Indexer, Iterable, Sizer};
use cel::common::types::{
    CelBool, CelDouble, CelInt, CelList, CelMap, CelMapKey, CelNull, CelString, CelUInt, Kind, MAP_TYPE, Type,
};
use cel::common::value::{CowVal, StaticVal, Val};

use super::semver::Semver;
use crate::model::AttributeValue;
use crate::quantity::Quantity;

/// `kubernetes.Quantity`.
pub(crate) static QUANTITY_TYPE: Type = Type::new_unspecified_type("kubernetes.Quantity");
/// `kubernetes.Semver`.
pub(crate) static SEMVER_TYPE: Type = Type::new_unspecified_type("kubernetes.Semver");
/// A regular expression compiled with its expression (never written by users).
pub(crate) static REGEX_TYPE: Type = Type::new_unspecified_type("@regex");

/// The constant pattern of a `matches()` call, compiled once with the expression instead of on
/// every call.
#[derive(Clone, Debug)]
pub(crate) struct RegexVal(pub(crate) Arc<regex_lite::Regex>);

impl Val for RegexVal {
    fn get_type(&self) -> &Type {
        &REGEX_TYPE
    }
    fn cel_type() -> &'static Type {
        &REGEX_TYPE
    }
    fn clone_as_boxed<'v>(&self) -> Box<dyn Val + 'v> {
        Box::new(self.clone())
    }
    fn as_any(&self) -> Option<&dyn Any> {
        Some(self)
    }
}
impl StaticVal for RegexVal {}

/// A `kubernetes.Quantity` value. Equal to another quantity of the same numeric value; no `<`
/// (use `compareTo`, `isLessThan`, `isGreaterThan`), as in Kubernetes.
#[derive(Clone, Debug)]
pub(crate) struct QuantityVal(pub(crate) Quantity);

impl Val for QuantityVal {
    fn get_type(&self) -> &Type {
        &QUANTITY_TYPE
    }
    fn cel_type() -> &'static Type {
        &QUANTITY_TYPE
    }
    fn equals(&self, other: &dyn Val) -> bool {
        other.downcast_ref::<QuantityVal>().is_some_and(|o| o.0 == self.0)
    }
    fn clone_as_boxed<'v>(&self) -> Box<dyn Val + 'v> {
        Box::new(self.clone())
    }
    fn as_any(&self) -> Option<&dyn Any> {
        Some(self)
    }
}
impl StaticVal for QuantityVal {}

/// A `kubernetes.Semver` value. Equal to another version of the same precedence (build metadata
/// ignored); ordered with `compareTo`, `isLessThan`, `isGreaterThan`.
#[derive(Clone, Debug)]
pub(crate) struct SemverVal(pub(crate) Semver);

impl Val for SemverVal {
    fn get_type(&self) -> &Type {
        &SEMVER_TYPE
    }
    fn cel_type() -> &'static Type {
        &SEMVER_TYPE
    }
    fn equals(&self, other: &dyn Val) -> bool {
        other
            .downcast_ref::<SemverVal>()
            .is_some_and(|o| o.0.compare(&self.0).is_eq())
    }
    fn clone_as_boxed<'v>(&self) -> Box<dyn Val + 'v> {
        Box::new(self.clone())
    }
    fn as_any(&self) -> Option<&dyn Any> {
        Some(self)
    }
}
impl StaticVal for SemverVal {}

#[derive(Debug)]
struct StrMapInner {
    /// Sorted, unique.
    keys: Vec<CelString<'static>>,
    values: Vec<Box<dyn Val>>,
    /// Returned for a missing key, when set: DRA's "unknown domain gives an empty map".
    default: Option<StrMap>,
}

/// An immutable CEL `map` with string keys, shared behind an `Arc` so that binding it to a
/// variable (`cel.bind`, comprehensions) copies a pointer, not the entries.
///
/// It compares equal to any map with the same entries; cel-rust's own map type only compares
/// equal to its own kind, so `{"a": 1} == m` is false where `m == {"a": 1}` is true.
#[derive(Clone, Debug)]
pub(crate) struct StrMap(Arc<StrMapInner>);

impl StrMap {
    /// A map of `entries` (a repeated key keeps its last value). With `default`, looking up a
    /// missing key yields `default` instead of a "no such key" error; `in` and iteration still
    /// only see the real keys.
    pub(crate) fn new(mut entries: Vec<(String, Box<dyn Val>)>, default: Option<StrMap>) -> StrMap {
        // A stable sort keeps a repeated key's entries in order; the last of each run wins.
        crate::map::sort_stable_by(&mut entries, |a, b| a.0.cmp(&b.0));
        let mut keys: Vec<CelString<'static>> = Vec::with_capacity(entries.len());
        let mut values: Vec<Box<dyn Val>> = Vec::with_capacity(entries.len());
        for (key, value) in entries {
            match (keys.last(), values.last_mut()) {
                (Some(last), Some(slot)) if last.inner() == key.as_str() => *slot = value,
                _ => {
                    keys.push(CelString::from(key));
                    values.push(value);
                }
            }
        }
        StrMap(Arc::new(StrMapInner {
            keys,
            values,
            default,
        }))
    }

    pub(crate) fn find(&self, key: &str) -> Option<&(dyn Val + 'static)> {
        self.0
            .keys
            .binary_search_by(|k| k.inner().cmp(key))
            .ok()
            .map(|i| self.0.values[i].as_ref())
    }

    /// The entries, keys as CEL strings.
    pub(crate) fn entries(&self) -> impl Iterator<Item = (&CelString<'static>, &(dyn Val + 'static))> {
        self.0.keys.iter().zip(self.0.values.iter().map(|v| v.as_ref()))
    }

    fn len(&self) -> usize {
        self.0.keys.len()
    }

    fn missing(key: &dyn Val) -> ExecutionError {
        match key.downcast_ref::<CelString>() {
            Some(s) => ExecutionError::no_such_key(s.inner()),
            None => ExecutionError::no_such_key(&format!("{key:?}")),
        }
    }
}

impl Val for StrMap {
    fn get_type(&self) -> &Type {
        &MAP_TYPE
    }
    fn cel_type() -> &'static Type {
        &MAP_TYPE
    }
    fn as_container(&self) -> Option<&dyn Container> {
        Some(self)
    }
    fn as_indexer<'b, 'v>(&'b self) -> Option<&'b (dyn Indexer + 'v)>
    where
        Self: 'v,
    {
        Some(self)
    }
    fn as_iterable<'b, 'v>(&'b self) -> Option<&'b (dyn Iterable + 'v)>
    where
        Self: 'v,
    {
        Some(self)
    }
    fn as_sizer(&self) -> Option<&dyn Sizer> {
        Some(self)
    }
    fn equals(&self, other: &dyn Val) -> bool {
        if let Some(o) = other.downcast_ref::<StrMap>() {
            return self.len() == o.len()
                && self
                    .entries()
                    .all(|(k, v)| o.find(k.inner()).is_some_and(|ov| v.equals(ov)));
        }
        if other.get_type().kind() != Kind::Map {
            return false;
        }
        let (Some(sizer), Some(indexer)) = (other.as_sizer(), other.as_indexer()) else {
            return false;
        };
        *sizer.size().inner() == self.len() as i64
            && self.entries().all(|(k, v)| {
                indexer
                    .get(k)
                    .is_ok_and(|ov: CowVal<'_, '_>| v.equals(ov.as_ref()))
            })
    }
    fn clone_as_boxed<'v>(&self) -> Box<dyn Val + 'v> {
        Box::new(self.clone())
    }
    fn as_any(&self) -> Option<&dyn Any> {
        Some(self)
    }
}
impl StaticVal for StrMap {}

impl Container for StrMap {
    fn contains(&self, value: &dyn Val) -> Result<bool, ExecutionError> {
        Ok(value
            .downcast_ref::<CelString>()
            .is_some_and(|s| self.find(s.inner()).is_some()))
    }
}

impl Indexer for StrMap {
    fn get<'b, 'v>(&'b self, key: &dyn Val) -> Result<CowVal<'b, 'v>, ExecutionError>
    where
        Self: 'v,
    {
        let found = key.downcast_ref::<CelString>().and_then(|s| self.find(s.inner()));
        match (found, &self.0.default) {
            (Some(v), _) => Ok(CowVal::Borrowed(v)),
            (None, Some(default)) if key.downcast_ref::<CelString>().is_some() => {
                Ok(CowVal::Borrowed(default))
            }
            _ => Err(StrMap::missing(key)),
        }
    }

    fn steal<'v>(self: Box<Self>, key: &dyn Val) -> Result<Box<dyn Val + 'v>, ExecutionError>
    where
        Self: 'v,
    {
        let value = self.get(key)?.into_owned();
        Ok(value)
    }
}

struct KeyIter<'b> {
    keys: std::slice::Iter<'b, CelString<'static>>,
}

impl<'b, 'v> traits::Iterator<'b, 'v> for KeyIter<'b> {
    fn next(&mut self) -> Option<&'b (dyn Val + 'v)> {
        self.keys.next().map(|k| k as &dyn Val)
    }
}

impl Iterable for StrMap {
    fn iter<'b, 'v>(&'b self) -> Box<dyn traits::Iterator<'b, 'v> + 'b>
    where
        Self: 'v,
    {
        Box::new(KeyIter {
            keys: self.0.keys.iter(),
        })
    }
}

impl Sizer for StrMap {
    fn size(&self) -> CelInt {
        CelInt::from(self.len() as i64)
    }
}

/// A map entry before it is sorted into a [`StrMap`].
type Entry = (String, Box<dyn Val>);

/// Splits a qualified name into domain and id; no `/` means the driver's domain.
fn split_qualified<'a>(name: &'a str, driver: &'a str) -> (&'a str, &'a str) {
    name.split_once('/').unwrap_or((driver, name))
}

fn semver_val(name: &str, text: &str) -> Result<Box<dyn Val>, String> {
    Semver::parse(text)
        .map(|v| Box::new(SemverVal(v)) as Box<dyn Val>)
        .map_err(|e| format!("attribute {name}: parse semantic version {text:?}: {e}"))
}

fn list<T>(items: &[T], f: impl Fn(&T) -> Box<dyn Val>) -> Box<dyn Val> {
    Box::new(CelList::from(items.iter().map(f).collect::<Vec<_>>()))
}

fn attribute_val(name: &str, value: &AttributeValue) -> Result<Box<dyn Val>, String> {
    Ok(match value {
        AttributeValue::Int(i) => Box::new(CelInt::from(*i)),
        AttributeValue::Bool(b) => Box::new(CelBool::from(*b)),
        AttributeValue::String(s) => Box::new(CelString::from(s.to_string())),
        AttributeValue::Version(v) => semver_val(name, v)?,
        AttributeValue::Ints(v) => list(v, |i| Box::new(CelInt::from(*i))),
        AttributeValue::Bools(v) => list(v, |b| Box::new(CelBool::from(*b))),
        AttributeValue::Strings(v) => list(v, |s| Box::new(CelString::from(s.clone()))),
        AttributeValue::Versions(v) => Box::new(CelList::from(
            v.iter()
                .map(|s| semver_val(name, s))
                .collect::<Result<Vec<_>, _>>()?,
        )),
    })
}

/// `map[domain]map[id]value`, with unknown domains giving an empty map.
fn domain_map<'a>(driver: &'a str, entries: impl Iterator<Item = (&'a str, Box<dyn Val>)>) -> StrMap {
    // A device names one or two domains: a list searched in place beats a tree of them.
    let mut domains: Vec<(&str, Vec<Entry>)> = Vec::new();
    for (name, value) in entries {
        let (domain, id) = split_qualified(name, driver);
        let at = match domains.iter().position(|(d, _)| *d == domain) {
            Some(at) => at,
            None => {
                domains.push((domain, Vec::new()));
                domains.len() - 1
            }
        };
        domains[at].1.push((id.to_owned(), value));
    }
    let inner = domains
        .into_iter()
        .map(|(domain, ids)| {
            (
                domain.to_owned(),
                Box::new(StrMap::new(ids, None)) as Box<dyn Val>,
            )
        })
        .collect();
    StrMap::new(inner, Some(StrMap::new(Vec::new(), None)))
}

/// The `device` variable of a selector, or why the device cannot be evaluated (as upstream,
/// an attribute that does not convert fails every evaluation on that device).
pub(crate) fn device_value<'a>(
    driver: &'a str,
    attributes: impl IntoIterator<Item = (&'a str, &'a AttributeValue)>,
    capacity: impl IntoIterator<Item = (&'a str, &'a Quantity)>,
    allow_multiple_allocations: bool,
) -> Result<StrMap, String> {
    let attributes = attributes
        .into_iter()
        .map(|(name, value)| Ok((name, attribute_val(name, value)?)))
        .collect::<Result<Vec<_>, String>>()?;
    let capacity = capacity
        .into_iter()
        .map(|(name, q)| (name, Box::new(QuantityVal(q.clone())) as Box<dyn Val>));
    // In key order, so that `StrMap::new` finds them sorted.
    Ok(StrMap::new(
        vec![
            (
                "allowMultipleAllocations".to_owned(),
                Box::new(CelBool::from(allow_multiple_allocations)),
            ),
            (
                "attributes".to_owned(),
                Box::new(domain_map(driver, attributes.into_iter())),
            ),
            ("capacity".to_owned(), Box::new(domain_map(driver, capacity))),
            ("driver".to_owned(), Box::new(CelString::from(driver.to_owned()))),
        ],
        None,
    ))
}

/// The JSON value `text` as CEL sees it: objects are maps (the last of a repeated key wins),
/// arrays lists, integers `int` (or `uint` above `i64::MAX`), other numbers `double`; nesting
/// beyond [`crate::json::MAX_NESTING`] is an error.
pub(crate) fn json_value(text: &str) -> Result<Box<dyn Val>, serde_json::Error> {
    Ok(cel_value(crate::json::parse(text)?))
}

fn cel_value(value: crate::json::Json<'_>) -> Box<dyn Val> {
    use crate::json::{Json, Number};
    match value {
        Json::Null => Box::new(CelNull),
        Json::Bool(b) => Box::new(CelBool::from(b)),
        Json::Number(Number::U64(u)) => match i64::try_from(u) {
            Ok(i) => Box::new(CelInt::from(i)),
            Err(_) => Box::new(CelUInt::from(u)),
        },
        Json::Number(Number::I64(i)) => Box::new(CelInt::from(i)),
        Json::Number(Number::F64(f)) => Box::new(CelDouble::from(f)),
        Json::String(s) => Box::new(CelString::from(s.into_owned())),
        Json::Array(items) => Box::new(CelList::from(
            items.into_iter().map(cel_value).collect::<Vec<_>>(),
        )),
        Json::Object(members) => {
            let mut map = HashMap::with_capacity(members.len());
            for (key, value) in members {
                map.insert(CelMapKey::from(key.into_owned()), cel_value(value));
            }
            Box::new(CelMap::from(map))
        }
    }
}
