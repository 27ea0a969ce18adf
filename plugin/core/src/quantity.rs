//! Kubernetes resource quantities (`"80Gi"`, `"1500m"`, `"1e3"`), parsed and compared exactly.
//!
//! SKELETON: the helper owning this file replaces the bodies.

use std::fmt;
use std::str::FromStr;

/// A Kubernetes quantity, exact to the nano unit, with the format it was written in.
#[derive(Clone, Debug)]
pub struct Quantity {
    nanos: i128,
}

/// A quantity that could not be parsed.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("invalid quantity {text:?}: {reason}")]
pub struct QuantityError {
    /// The text that failed.
    pub text: String,
    /// Why it failed.
    pub reason: String,
}

impl Quantity {
    /// The value as an integer, rounded up (Go `Quantity.Value()`).
    pub fn value(&self) -> i64 {
        todo!()
    }
    /// A quantity of `v` units in binary-SI format (Go `resource.NewQuantity(v, BinarySI)`).
    pub fn from_i64(v: i64) -> Self {
        Quantity { nanos: v as i128 * 1_000_000_000 }
    }
    /// Exact sum.
    pub fn checked_add(&self, other: &Quantity) -> Option<Quantity> {
        let _ = other;
        todo!()
    }
    /// Exact difference.
    pub fn checked_sub(&self, other: &Quantity) -> Option<Quantity> {
        let _ = other;
        todo!()
    }
    /// Whether the quantity is zero.
    pub fn is_zero(&self) -> bool {
        self.nanos == 0
    }
}

impl PartialEq for Quantity {
    fn eq(&self, other: &Self) -> bool {
        self.nanos == other.nanos
    }
}
impl Eq for Quantity {}
impl PartialOrd for Quantity {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Quantity {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.nanos.cmp(&other.nanos)
    }
}

impl FromStr for Quantity {
    type Err = QuantityError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let _ = s;
        todo!()
    }
}

impl fmt::Display for Quantity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let _ = f;
        todo!()
    }
}

impl serde::Serialize for Quantity {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> serde::Deserialize<'de> for Quantity {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        s.parse().map_err(serde::de::Error::custom)
    }
}
