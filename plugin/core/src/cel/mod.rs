//! CEL for DRA: device selectors (`device.*`) and sharing-affinity extractors (`object.*`).
//!
//! SKELETON: the helper owning this module replaces the bodies; the public API below is the contract
//! the allocator codes against.

use std::collections::BTreeMap;
use std::sync::Arc;

use crate::model::AttributeValue;
use crate::quantity::Quantity;

/// Why a CEL expression could not be used.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum CelError {
    /// The expression does not compile (syntax or type error).
    #[error("compilation failed: {0}")]
    Compile(String),
    /// The expression failed at run time (missing key, no such overload, cost budget exceeded...).
    #[error("evaluation failed: {0}")]
    Runtime(String),
    /// The expression returned a value of the wrong type.
    #[error("expression must return {expected}, got {got}")]
    WrongType {
        /// Expected type name (`bool` or `string`).
        expected: &'static str,
        /// Actual type name.
        got: String,
    },
}

/// A device prepared once for selector evaluation: `device.driver`, `device.attributes[domain][id]`,
/// `device.capacity[domain][id]`, `device.allowMultipleAllocations`.
pub struct CelDevice {
    _private: (),
}

impl CelDevice {
    /// Prepares a device. Attribute and capacity names without a domain belong to `driver`'s domain.
    pub fn new(
        driver: &str,
        attributes: &BTreeMap<String, AttributeValue>,
        capacity: &BTreeMap<String, Quantity>,
        allow_multiple_allocations: bool,
    ) -> Self {
        let _ = (driver, attributes, capacity, allow_multiple_allocations);
        todo!()
    }
}

/// An opaque configuration object prepared once for extractor evaluation (`object.*`).
pub struct CelObject {
    _private: (),
}

impl CelObject {
    /// Prepares a JSON object.
    pub fn new(object: &serde_json::Value) -> Self {
        let _ = object;
        todo!()
    }
}

/// A compiled device selector.
pub struct Selector {
    _private: (),
}

impl Selector {
    /// Evaluates the selector; a non-bool result is [`CelError::WrongType`].
    pub fn matches(&self, device: &CelDevice) -> Result<bool, CelError> {
        let _ = device;
        todo!()
    }
}

/// A compiled sharing-affinity extractor expression.
pub struct Extractor {
    _private: (),
}

impl Extractor {
    /// Evaluates the extractor; a non-string result is [`CelError::WrongType`].
    pub fn extract(&self, object: &CelObject) -> Result<String, CelError> {
        let _ = object;
        todo!()
    }
}

/// Compiles expressions once and caches them by text.
#[derive(Default)]
pub struct CelCache {
    _private: (),
}

impl CelCache {
    /// A new, empty cache.
    pub fn new() -> Self {
        Self::default()
    }
    /// The compiled selector for `expression`, compiling it on first use.
    pub fn selector(&self, expression: &str) -> Result<Arc<Selector>, CelError> {
        let _ = expression;
        todo!()
    }
    /// The compiled extractor for `expression`, compiling it on first use.
    pub fn extractor(&self, expression: &str) -> Result<Arc<Extractor>, CelError> {
        let _ = expression;
        todo!()
    }
}
