//! CEL for DRA: device selectors (`device.*`) and sharing-affinity extractors (`object.*`).
//!
//! Expressions run on [cel-rust](https://crates.io/crates/cel) 0.15 with its standard library and
//! strings extension, plus the Kubernetes functions DRA users write: `quantity()`, `isQuantity()`
//! and the quantity methods, `semver()`, `isSemver()` and the version methods, and `cel.bind()`.
//!
//! - **Variables.** Selectors see `device` with `driver` (string), `attributes[domain][id]`,
//!   `capacity[domain][id]` (a quantity) and `allowMultipleAllocations` (bool). Names without a
//!   domain belong to the driver's domain; an unknown domain is an empty map, so
//!   `device.attributes["x"].y` is a "no such key" error while `"y" in device.attributes["x"]` is
//!   false. Attribute values are `int`, `bool`, `string`, a semantic version, or lists of those.
//!   Extractors see the opaque configuration object as `object` (JSON mapped to CEL values).
//! - **Compilation** parses (cel-rust's Pratt parser, held by the `parse_tests` to the trees of
//!   its ANTLR parser; `cel.bind`, `optMap` and `optFlatMap` expanded after parsing) and checks
//!   names (variables, `device` fields, declared functions); results are cached by text in
//!   [`CelCache`], compile errors included. Constant `matches()` patterns are compiled with
//!   the expression: Go's RE2 syntax, parsed and translated by `regex-syntax` with Go's Unicode
//!   classes and case folding resolved from the core's own tables (the `unicode` module), and
//!   matched by `regex-lite` (the `re2` module, held by its tests and the `regex_oracle` module
//!   to the regex crate).
//! - **Evaluation** binds the prepared [`CelDevice`] or [`CelObject`] by reference (no per-call
//!   conversion) in a context over one shared environment, and enforces a cost budget
//!   ([`DEFAULT_COST_LIMIT`], as Kubernetes' `CELSelectorExpressionMaxCost`) by metering the
//!   instrumented expression: see the `cost` module for exactly what is charged.
//!
//! Modules, top down (each uses only modules below it):
//! - `compile`: compiles an expression and evaluates it; uses `parse`, `check`, `instrument`,
//!   `macros`, `re2`, `cost`, `values` and the leaves.
//! - `parse`: nesting limits, the source adapted to the Pratt parser, parsing; uses `macros`.
//! - `check`: names, after parsing; uses `root`.
//! - `library`: the environment's functions; uses `re2`, `cost`, `values` and `semver`.
//! - `instrument`: the cost charges written into the tree; uses `cost`.
//! - `macros`: the expansions after parsing.
//! - `re2`: Go's `regexp` over `regex-lite`; uses `unicode`.
//! - `cost`: the meter; uses `values`.
//! - `values`: DRA's CEL values (quantities, versions, the device map); uses `semver`.
//! - leaves: `error` ([`CelError`]), `root` (the variable an expression sees), `semver`,
//!   `unicode` (Go's Unicode tables).

mod check;
mod compile;
mod cost;
mod error;
mod instrument;
mod library;
mod macros;
mod parse;
#[cfg(test)]
mod parse_tests;
#[cfg(any(test, feature = "parser-oracle"))]
mod parser_oracle;
mod re2;
#[cfg(any(test, feature = "regex-oracle"))]
mod regex_oracle;
mod root;
mod semver;
mod unicode;
mod values;

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};

use cel::Env;
use cel::common::value::Val;

use crate::model::AttributeValue;
use crate::quantity::Quantity;
use compile::Program;
use cost::Outcome;
pub use error::CelError;
#[cfg(feature = "parser-oracle")]
pub use parser_oracle::compare_parsers;
#[cfg(feature = "regex-oracle")]
pub use regex_oracle::compare_regex;
use root::Root;
use values::StrMap;

/// Runtime cost limit of one evaluation, as Kubernetes' `CELSelectorExpressionMaxCost`.
pub const DEFAULT_COST_LIMIT: u64 = 1_000_000;

/// Compiled expressions a cache keeps before it starts over (upstream uses an LRU).
#[cfg(not(test))]
const CACHE_CAPACITY: usize = 4096;
#[cfg(test)]
const CACHE_CAPACITY: usize = 16;

/// A device prepared once for selector evaluation: `device.driver`, `device.attributes[domain][id]`,
/// `device.capacity[domain][id]`, `device.allowMultipleAllocations`.
pub struct CelDevice {
    /// The `device` value, or why it cannot be evaluated (a version attribute that is not a
    /// semantic version fails every evaluation, as upstream).
    value: Result<StrMap, String>,
}

impl CelDevice {
    /// Prepares a device. Attribute and capacity names without a domain belong to `driver`'s domain.
    pub fn new(
        driver: &str,
        attributes: &BTreeMap<String, AttributeValue>,
        capacity: &BTreeMap<String, Quantity>,
        allow_multiple_allocations: bool,
    ) -> Self {
        Self::from_entries(
            driver,
            attributes.iter().map(|(k, v)| (k.as_str(), v)),
            capacity.iter().map(|(k, q)| (k.as_str(), q)),
            allow_multiple_allocations,
        )
    }

    /// Prepares a device from its attributes and capacities as borrowed (name, value) pairs, in
    /// any order; a repeated name keeps its last value. Nothing is copied on the way but the
    /// values into CEL's form.
    pub fn from_entries<'a>(
        driver: &'a str,
        attributes: impl IntoIterator<Item = (&'a str, &'a AttributeValue)>,
        capacity: impl IntoIterator<Item = (&'a str, &'a Quantity)>,
        allow_multiple_allocations: bool,
    ) -> Self {
        CelDevice {
            value: values::device_value(driver, attributes, capacity, allow_multiple_allocations),
        }
    }
}

/// An opaque configuration object prepared once for extractor evaluation (`object.*`).
pub struct CelObject {
    value: Box<dyn Val>,
}

impl CelObject {
    /// Prepares the JSON value `text` (numbers read exactly: [`crate::json::number`]).
    pub fn from_json(text: &str) -> Result<Self, String> {
        values::json_value(text)
            .map(|value| CelObject { value })
            .map_err(|e| e.to_string())
    }

    /// Prepares a config's opaque parameters (kept as canonical JSON text, read here).
    pub fn from_parameters(parameters: &crate::model::Parameters) -> Result<Self, String> {
        Self::from_json(parameters.get()).map_err(|e| format!("opaque parameters: {e}"))
    }
}

/// A compiled device selector.
pub struct Selector {
    id: u32,
    program: Program,
    env: Arc<Env>,
    cost_limit: u64,
}

impl Selector {
    /// A number that identifies this compiled selector among all selectors of its cache (never
    /// reused, also after the cache starts over): a key for caching its results per device.
    pub fn id(&self) -> u32 {
        self.id
    }

    /// Evaluates the selector; a non-bool result is [`CelError::WrongType`].
    pub fn matches(&self, device: &CelDevice) -> Result<bool, CelError> {
        let value = device.value.as_ref().map_err(|e| CelError::Runtime(e.clone()))?;
        self.program
            .eval(&self.env, value, self.cost_limit, |result| match result {
                Outcome::Bool(b) => Ok(b),
                other => Err(wrong_type("bool", &other)),
            })
    }
}

/// A compiled sharing-affinity extractor expression.
pub struct Extractor {
    program: Program,
    env: Arc<Env>,
    cost_limit: u64,
}

impl Extractor {
    /// Evaluates the extractor; a non-string result is [`CelError::WrongType`].
    pub fn extract(&self, object: &CelObject) -> Result<String, CelError> {
        self.program.eval(
            &self.env,
            object.value.as_ref(),
            self.cost_limit,
            |result| match result {
                Outcome::String(s) => Ok(s),
                other => Err(wrong_type("string", &other)),
            },
        )
    }
}

fn wrong_type(expected: &'static str, got: &Outcome) -> CelError {
    CelError::WrongType {
        expected,
        got: got.type_name().to_owned(),
    }
}

type Entries<T> = Mutex<crate::hashing::FxHashMap<String, Result<Arc<T>, CelError>>>;

/// Compiles expressions once and caches them by text.
pub struct CelCache {
    env: Arc<Env>,
    cost_limit: u64,
    selectors: Entries<Selector>,
    extractors: Entries<Extractor>,
    next_selector_id: AtomicU32,
}

impl Default for CelCache {
    fn default() -> Self {
        CelCache::with_cost_limit(DEFAULT_COST_LIMIT)
    }
}

impl CelCache {
    /// A new, empty cache.
    pub fn new() -> Self {
        Self::default()
    }

    /// A new, empty cache whose expressions may each cost at most `limit` per evaluation.
    pub fn with_cost_limit(limit: u64) -> Self {
        CelCache {
            env: library::environment(),
            cost_limit: limit,
            selectors: Mutex::default(),
            extractors: Mutex::default(),
            next_selector_id: AtomicU32::new(0),
        }
    }

    /// The compiled selector for `expression`, compiling it on first use.
    pub fn selector(&self, expression: &str) -> Result<Arc<Selector>, CelError> {
        cached(&self.selectors, expression, || {
            Ok(Selector {
                id: self.next_selector_id.fetch_add(1, Ordering::Relaxed),
                program: compile::compile(&self.env, expression, Root::Device)?,
                env: Arc::clone(&self.env),
                cost_limit: self.cost_limit,
            })
        })
    }

    /// The compiled extractor for `expression`, compiling it on first use.
    pub fn extractor(&self, expression: &str) -> Result<Arc<Extractor>, CelError> {
        cached(&self.extractors, expression, || {
            Ok(Extractor {
                program: compile::compile(&self.env, expression, Root::Object)?,
                env: Arc::clone(&self.env),
                cost_limit: self.cost_limit,
            })
        })
    }
}

fn cached<T>(
    entries: &Entries<T>,
    expression: &str,
    compile: impl FnOnce() -> Result<T, CelError>,
) -> Result<Arc<T>, CelError> {
    // A panic elsewhere cannot leave the map half-updated: recover it.
    let lookup = |entries: &Entries<T>| {
        entries
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .get(expression)
            .cloned()
    };
    if let Some(found) = lookup(entries) {
        return found;
    }
    let compiled = compile().map(Arc::new);
    let mut map = entries.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    if map.len() >= CACHE_CAPACITY {
        map.clear();
    }
    map.entry(expression.to_owned()).or_insert(compiled).clone()
}

#[cfg(test)]
mod tests;
