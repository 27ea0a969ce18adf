//! KEP-5075 consumable capacity: how much of each device capacity one allocation consumes, whether
//! that amount obeys the capacity's request policy, and whether it still fits next to the amounts
//! already consumed by other allocations of the same (multi-allocatable) device.
//!
//! The rules follow the structured allocator's `consumable_capacity.go` (dynamic-resource-allocation
//! `3d036712`):
//! - [`consumed_capacity`]: a missing request consumes the policy default or the whole capacity; a
//!   `validRange` rounds up to `min` and then to the next `step` (integer `Value()` arithmetic, result
//!   in binary SI); `validValues` picks the first value at or above the request.
//! - [`violates_policy`]: above `max`, off the `step` grid, or outside `validValues`; a consumption
//!   equal to the default is always allowed (compared numerically, not structurally as upstream).
//! - [`consumed_for_device`]: one entry for **every** capacity of the device.
//! - [`check_request`]: the allocator's "is there room for one more allocation" test.
//!
//! Invariant for callers that track consumption: every successful [`ConsumedCapacity::add`] of an
//! allocation's consumption is undone by exactly one [`ConsumedCapacity::sub`] of the same amount.

use std::cmp::Ordering;
use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::model::{CapacityRequestPolicy, CapacityRequestPolicyRange, DeviceCapacity};
use crate::quantity::Quantity;

/// Bad capacity input or inconsistent bookkeeping. Each variant names the capacity involved.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum CapacityError {
    /// A request names a capacity the device does not define. The allocator skips such a device
    /// (upstream: "some requested capacity has not been defined").
    #[error(
        "capacity.requests[{request:?}]: the device of driver {driver:?} does not define this capacity \
         (some requested capacity has not been defined)"
    )]
    UndefinedCapacity {
        /// The request key as written in the claim.
        request: String,
        /// The driver of the device, whose domain short names belong to.
        driver: String,
    },
    /// Two request keys (short and qualified form) name the same device capacity.
    #[error("capacity.requests: {first:?} and {second:?} both request device capacity {capacity:?}")]
    DuplicateRequest {
        /// The first request key (in key order).
        first: String,
        /// The second request key.
        second: String,
        /// The device capacity both resolve to.
        capacity: String,
    },
    /// A `validRange.step` whose integer value is not positive: no grid can be built from it.
    #[error("capacity[{capacity:?}].requestPolicy.validRange.step: {step} is not a positive integer amount")]
    InvalidStep {
        /// The device capacity name.
        capacity: String,
        /// The step as written.
        step: String,
    },
    /// A sum of consumed amounts that does not fit the quantity representation.
    #[error("consumed capacity {capacity:?}: sum overflows")]
    Overflow {
        /// The capacity name.
        capacity: String,
    },
    /// Releasing more of a capacity than is recorded as consumed: the bookkeeping is inconsistent.
    #[error("consumed capacity {capacity:?}: releasing {released} but only {recorded} is recorded")]
    Underflow {
        /// The capacity name.
        capacity: String,
        /// The amount being released.
        released: String,
        /// The amount recorded before the release (`0` when there is no entry).
        recorded: String,
    },
}

/// The amount one allocation consumes: the request after policy rounding, or the default, or the
/// whole capacity value when the request does not name this capacity (`calculateConsumedCapacity`).
///
/// Precondition: the policy's `validRange.step`, if any, has a positive integer value (see
/// [`check_policy`]; [`consumed_for_device`] and [`check_request`] enforce it). With a non-positive
/// step the request is returned unrounded. A rounded value beyond `i64::MAX` saturates there
/// instead of wrapping around as Go's int64 arithmetic would.
///
/// ```
/// use sharing_affinity_core::capacity::consumed_capacity;
/// use sharing_affinity_core::model::{CapacityRequestPolicy, CapacityRequestPolicyRange, DeviceCapacity};
/// let q = |s: &str| s.parse().unwrap();
/// let cap = DeviceCapacity {
///     value: q("40Gi"),
///     request_policy: Some(CapacityRequestPolicy {
///         default: Some(q("1Gi")),
///         valid_values: vec![],
///         valid_range: Some(CapacityRequestPolicyRange { min: q("1Gi"), max: None, step: Some(q("2Gi")) }),
///     }),
/// };
/// assert_eq!(consumed_capacity(Some(&q("2Gi")), &cap), q("3Gi")); // 1Gi + 1 step
/// assert_eq!(consumed_capacity(None, &cap), q("1Gi")); // the default
/// ```
pub fn consumed_capacity(request: Option<&Quantity>, cap: &DeviceCapacity) -> Quantity {
    let Some(request) = request else {
        return match cap.request_policy.as_ref().and_then(|p| p.default.as_ref()) {
            Some(default) => default.clone(),
            None => cap.value.clone(),
        };
    };
    let Some(policy) = &cap.request_policy else {
        return request.clone();
    };
    if let Some(range) = &policy.valid_range {
        return round_up_range(request, range);
    }
    round_up_valid_values(request, &policy.valid_values)
}

/// `roundUpRange`: below `min` gives `min`; otherwise round `request - min` up to whole steps.
fn round_up_range(request: &Quantity, range: &CapacityRequestPolicyRange) -> Quantity {
    if request.cmp(&range.min) == Ordering::Less {
        return range.min.clone();
    }
    let Some(step) = &range.step else {
        return request.clone();
    };
    let step = i128::from(step.value());
    if step <= 0 {
        return request.clone();
    }
    let min = i128::from(range.min.value());
    let added = i128::from(request.value()) - min;
    // Truncating division and remainder, as Go's int64 `/` and `%`.
    let mut steps = added / step;
    if added % step != 0 {
        steps += 1;
    }
    let rounded = min + step * steps;
    Quantity::from_i64(i64::try_from(rounded).unwrap_or(i64::MAX))
}

/// `roundUpValidValues`: the first valid value at or above the request, else the request itself
/// (which then fails [`violates_policy`]). `validValues` is sorted ascending by API validation.
fn round_up_valid_values(request: &Quantity, valid_values: &[Quantity]) -> Quantity {
    valid_values
        .iter()
        .find(|v| request.cmp(v) != Ordering::Greater)
        .unwrap_or(request)
        .clone()
}

/// Whether a consumed amount breaks the capacity's request policy (`violatesPolicy`): above
/// `validRange.max`, not `min` plus a whole number of steps (integer `Value()` arithmetic), or not one
/// of `validValues`. An amount numerically equal to `default` never violates.
///
/// Same precondition on `step` as [`consumed_capacity`]; a non-positive step is not checked.
///
/// ```
/// use sharing_affinity_core::capacity::violates_policy;
/// use sharing_affinity_core::model::CapacityRequestPolicy;
/// let q = |s: &str| s.parse().unwrap();
/// let policy = CapacityRequestPolicy {
///     default: Some(q("1")),
///     valid_values: vec![q("1"), q("4")],
///     valid_range: None,
/// };
/// assert!(!violates_policy(&q("4"), Some(&policy)));
/// assert!(violates_policy(&q("2"), Some(&policy)));
/// assert!(!violates_policy(&q("2"), None));
/// ```
pub fn violates_policy(consumed: &Quantity, policy: Option<&CapacityRequestPolicy>) -> bool {
    let Some(policy) = policy else {
        return false;
    };
    if policy
        .default
        .as_ref()
        .is_some_and(|d| d.cmp(consumed) == Ordering::Equal)
    {
        return false;
    }
    if let Some(range) = &policy.valid_range {
        if range
            .max
            .as_ref()
            .is_some_and(|max| consumed.cmp(max) == Ordering::Greater)
        {
            return true;
        }
        if let Some(step) = &range.step {
            let step = i128::from(step.value());
            let added = i128::from(consumed.value()) - i128::from(range.min.value());
            if step > 0 && added % step != 0 {
                return true;
            }
        }
        return false;
    }
    if !policy.valid_values.is_empty() {
        return !policy
            .valid_values
            .iter()
            .any(|v| v.cmp(consumed) == Ordering::Equal);
    }
    false
}

/// Checks what [`consumed_capacity`] and [`violates_policy`] assume of a capacity's policy: a
/// `validRange.step`, if set, has a positive integer value. Other API validation rules (min ≤ value,
/// sorted `validValues`, ...) are the API server's job and are not repeated here.
pub fn check_policy(name: &str, cap: &DeviceCapacity) -> Result<(), CapacityError> {
    let step = cap
        .request_policy
        .as_ref()
        .and_then(|p| p.valid_range.as_ref())
        .and_then(|r| r.step.as_ref());
    match step {
        Some(step) if step.value() <= 0 => Err(CapacityError::InvalidStep {
            capacity: name.to_string(),
            step: step.to_string(),
        }),
        _ => Ok(()),
    }
}

/// Finds the device capacity a request key names. An exact key match wins; otherwise a qualified
/// key `<driver>/<id>` names the device's short key `<id>` and a short key `<id>` names the device's
/// key `<driver>/<id>`, because a name without a domain belongs to the driver's domain.
///
/// Note: upstream's `CmpRequestOverCapacity` (`3d036712`) looks request keys up verbatim, so there a
/// request written in the other form than the slice's key is "not defined"; the resolution here
/// follows the QualifiedName rule, as `lookupAttribute` does for attributes.
pub fn resolve_capacity_name<'a>(
    request: &str,
    device_capacity: &'a BTreeMap<String, DeviceCapacity>,
    driver: &str,
) -> Option<&'a str> {
    if let Some((key, _)) = device_capacity.get_key_value(request) {
        return Some(key);
    }
    let other_form = match request.split_once('/') {
        Some((domain, id)) if domain == driver => id.to_string(),
        Some(_) => return None,
        None => format!("{driver}/{request}"),
    };
    device_capacity
        .get_key_value(other_form.as_str())
        .map(|(key, _)| key.as_str())
}

/// Maps every request key to the device capacity it names (by device capacity name), rejecting
/// undefined and doubly requested capacities and invalid steps.
fn resolve_requests<'r>(
    requests: &'r BTreeMap<String, Quantity>,
    device_capacity: &BTreeMap<String, DeviceCapacity>,
    driver: &str,
) -> Result<BTreeMap<String, (&'r str, &'r Quantity)>, CapacityError> {
    let mut resolved: BTreeMap<String, (&str, &Quantity)> = BTreeMap::new();
    for (key, amount) in requests {
        let Some(name) = resolve_capacity_name(key, device_capacity, driver) else {
            return Err(CapacityError::UndefinedCapacity {
                request: key.clone(),
                driver: driver.to_string(),
            });
        };
        if let Some((first, _)) = resolved.get(name) {
            return Err(CapacityError::DuplicateRequest {
                first: (*first).to_string(),
                second: key.clone(),
                capacity: name.to_string(),
            });
        }
        resolved.insert(name.to_string(), (key.as_str(), amount));
    }
    for (name, cap) in device_capacity {
        check_policy(name, cap)?;
    }
    Ok(resolved)
}

/// What one allocation of a device consumes (`GetConsumedCapacityFromRequest`): an entry for every
/// capacity of the device, keyed by the device's capacity name, or `None` when the device has no
/// capacity. `requests` are the claim request's `capacity.requests` (short or `driver/`-qualified
/// keys, see [`resolve_capacity_name`]); an empty map means "nothing requested".
///
/// Errors when a request names a capacity the device lacks, when two keys name the same capacity,
/// or when a policy step is not positive. The policy itself is not checked here: see
/// [`check_request`].
pub fn consumed_for_device(
    requests: &BTreeMap<String, Quantity>,
    device_capacity: &BTreeMap<String, DeviceCapacity>,
    driver: &str,
) -> Result<Option<BTreeMap<String, Quantity>>, CapacityError> {
    let resolved = resolve_requests(requests, device_capacity, driver)?;
    if device_capacity.is_empty() {
        return Ok(None);
    }
    let consumed = device_capacity
        .iter()
        .map(|(name, cap)| {
            let request = resolved.get(name).map(|(_, amount)| *amount);
            (name.clone(), consumed_capacity(request, cap))
        })
        .collect();
    Ok(Some(consumed))
}

/// Consumed amounts per capacity name: the consumption of one allocation, or the sum over all
/// allocations of one device (upstream `schedulerapi.ConsumedCapacity`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct ConsumedCapacity(BTreeMap<String, Quantity>);

impl ConsumedCapacity {
    /// An empty record.
    pub fn new() -> Self {
        Self::default()
    }

    /// The amount recorded for a capacity, if any.
    pub fn get(&self, name: &str) -> Option<&Quantity> {
        self.0.get(name)
    }

    /// The entries in name order.
    pub fn iter(&self) -> impl Iterator<Item = (&String, &Quantity)> {
        self.0.iter()
    }

    /// Whether nothing is consumed: no entry, or only zero entries (upstream `Empty`).
    pub fn is_empty(&self) -> bool {
        self.0.values().all(Quantity::is_zero)
    }

    /// The underlying map (for `status.allocation.devices.results[].consumedCapacity`).
    pub fn as_map(&self) -> &BTreeMap<String, Quantity> {
        &self.0
    }

    /// Adds every entry of `other`, creating missing entries. On overflow nothing is changed.
    pub fn add(&mut self, other: &ConsumedCapacity) -> Result<(), CapacityError> {
        let mut sums = Vec::with_capacity(other.0.len());
        for (name, amount) in &other.0 {
            let sum = match self.0.get(name) {
                Some(current) => current
                    .checked_add(amount)
                    .ok_or_else(|| CapacityError::Overflow {
                        capacity: name.clone(),
                    })?,
                None => amount.clone(),
            };
            sums.push((name.clone(), sum));
        }
        self.0.extend(sums);
        Ok(())
    }

    /// Subtracts every entry of `other` and removes entries that reach zero. Releasing an amount
    /// that is not recorded (missing entry or a result below zero) is a bookkeeping error; then
    /// nothing is changed. Zero amounts in `other` are ignored.
    pub fn sub(&mut self, other: &ConsumedCapacity) -> Result<(), CapacityError> {
        let mut differences = Vec::with_capacity(other.0.len());
        for (name, amount) in &other.0 {
            if amount.is_zero() {
                continue;
            }
            let underflow = |recorded: String| CapacityError::Underflow {
                capacity: name.clone(),
                released: amount.to_string(),
                recorded,
            };
            let Some(current) = self.0.get(name) else {
                return Err(underflow("0".to_string()));
            };
            let difference = current
                .checked_sub(amount)
                .filter(|d| d.cmp(&Quantity::from_i64(0)) != Ordering::Less)
                .ok_or_else(|| underflow(current.to_string()))?;
            differences.push((name.clone(), difference));
        }
        for (name, difference) in differences {
            if difference.is_zero() {
                self.0.remove(&name);
            } else {
                self.0.insert(name, difference);
            }
        }
        Ok(())
    }

    /// The first device capacity (in name order) whose total `already + self` would exceed its
    /// value; `None` when everything fits. Capacities missing from either record
    /// count as zero; entries for capacities the device does not define are ignored.
    pub fn first_exceeding<'a>(
        &self,
        already: &ConsumedCapacity,
        device_capacity: &'a BTreeMap<String, DeviceCapacity>,
    ) -> Option<Exceeding<'a>> {
        let zero = Quantity::from_i64(0);
        for (name, cap) in device_capacity {
            let new = self.0.get(name).unwrap_or(&zero);
            let old = already.0.get(name).unwrap_or(&zero);
            match new.checked_add(old) {
                Some(total) if total.cmp(&cap.value) != Ordering::Greater => {}
                // An overflowing sum exceeds any representable capacity value.
                total => {
                    return Some(Exceeding {
                        capacity: name.as_str(),
                        total,
                        value: &cap.value,
                    });
                }
            }
        }
        None
    }

    /// Whether this consumption fits next to `already` (what other allocations of the device hold,
    /// including tentative ones): for every capacity of the device the new total must be ≤ its value.
    pub fn fits(
        &self,
        already: &ConsumedCapacity,
        device_capacity: &BTreeMap<String, DeviceCapacity>,
    ) -> bool {
        self.first_exceeding(already, device_capacity).is_none()
    }
}

/// A capacity whose total consumption would exceed its value (see
/// [`ConsumedCapacity::first_exceeding`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Exceeding<'a> {
    /// The device capacity name.
    pub capacity: &'a str,
    /// The total that would be consumed; `None` when the sum overflows.
    pub total: Option<Quantity>,
    /// The capacity value.
    pub value: &'a Quantity,
}

impl From<BTreeMap<String, Quantity>> for ConsumedCapacity {
    fn from(map: BTreeMap<String, Quantity>) -> Self {
        Self(map)
    }
}

impl FromIterator<(String, Quantity)> for ConsumedCapacity {
    fn from_iter<I: IntoIterator<Item = (String, Quantity)>>(iter: I) -> Self {
        Self(iter.into_iter().collect())
    }
}

/// Outcome of [`check_request`] for one candidate device.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CapacityCheck {
    /// The allocation can be added; it consumes this much (every capacity of the device; empty when
    /// the device has no capacity). Record it only for multi-allocatable devices.
    Fits(ConsumedCapacity),
    /// The rounded consumption breaks the capacity's request policy.
    ViolatesPolicy {
        /// The device capacity name.
        capacity: String,
        /// The consumption after rounding.
        consumed: Quantity,
    },
    /// The device does not have enough of this capacity left.
    Exceeds {
        /// The device capacity name.
        capacity: String,
        /// What would be consumed in total (`None` when the sum overflows).
        total: Option<Quantity>,
        /// The capacity value.
        value: Quantity,
    },
}

/// The allocator's capacity test for one more allocation of a device (`CmpRequestOverCapacity`,
/// dra-semantics §2.1 step 3): compute the consumption with [`consumed_for_device`], reject it when
/// any capacity's rounded amount violates its policy, then require `already + consumption ≤ value`
/// for every capacity. Capacities are checked in name order; the first failure is reported.
///
/// `already` is everything the device holds: allocated claims plus tentative allocations of the
/// current call. For a dedicated device pass an empty record (the test is then only a `≥` filter).
/// An `Err` means the device must be skipped for this request (upstream logs and continues).
pub fn check_request(
    requests: &BTreeMap<String, Quantity>,
    device_capacity: &BTreeMap<String, DeviceCapacity>,
    driver: &str,
    already: &ConsumedCapacity,
) -> Result<CapacityCheck, CapacityError> {
    let Some(consumed) = consumed_for_device(requests, device_capacity, driver)? else {
        return Ok(CapacityCheck::Fits(ConsumedCapacity::new()));
    };
    for (name, amount) in &consumed {
        let policy = device_capacity.get(name).and_then(|c| c.request_policy.as_ref());
        if violates_policy(amount, policy) {
            return Ok(CapacityCheck::ViolatesPolicy {
                capacity: name.clone(),
                consumed: amount.clone(),
            });
        }
    }
    let consumed = ConsumedCapacity(consumed);
    if let Some(exceeding) = consumed.first_exceeding(already, device_capacity) {
        return Ok(CapacityCheck::Exceeds {
            capacity: exceeding.capacity.to_string(),
            total: exceeding.total,
            value: exceeding.value.clone(),
        });
    }
    Ok(CapacityCheck::Fits(consumed))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn q(s: &str) -> Quantity {
        s.parse().expect("test quantity")
    }

    /// A policy from a compact spec: `-` is no policy, `` an empty policy, otherwise
    /// space-separated `default=`, `min=`, `max=`, `step=` and `values=a,b,c`.
    fn policy(spec: &str) -> Option<CapacityRequestPolicy> {
        if spec == "-" {
            return None;
        }
        let mut p = CapacityRequestPolicy::default();
        let mut min = None;
        let (mut max, mut step) = (None, None);
        for part in spec.split_whitespace() {
            let (k, v) = part.split_once('=').expect("key=value");
            match k {
                "default" => p.default = Some(q(v)),
                "values" => p.valid_values = v.split(',').map(q).collect(),
                "min" => min = Some(q(v)),
                "max" => max = Some(q(v)),
                "step" => step = Some(q(v)),
                _ => panic!("unknown policy key {k}"),
            }
        }
        if let Some(min) = min {
            p.valid_range = Some(CapacityRequestPolicyRange { min, max, step });
        }
        Some(p)
    }

    fn cap(value: &str, spec: &str) -> DeviceCapacity {
        DeviceCapacity {
            value: q(value),
            request_policy: policy(spec),
        }
    }

    fn map(entries: &[(&str, &str)]) -> BTreeMap<String, Quantity> {
        entries.iter().map(|(k, v)| (k.to_string(), q(v))).collect()
    }

    fn consumed(entries: &[(&str, &str)]) -> ConsumedCapacity {
        ConsumedCapacity::from(map(entries))
    }

    fn device(entries: &[(&str, &str, &str)]) -> BTreeMap<String, DeviceCapacity> {
        entries
            .iter()
            .map(|(name, value, spec)| (name.to_string(), cap(value, spec)))
            .collect()
    }

    type Entries = &'static [(&'static str, &'static str)];

    /// (request, capacity value, policy spec, expected consumption, message).
    type ConsumedCase = (
        Option<&'static str>,
        &'static str,
        &'static str,
        &'static str,
        &'static str,
    );

    fn check_consumed(cases: &[ConsumedCase]) {
        for (request, value, spec, expected, msg) in cases {
            let request = request.map(q);
            let got = consumed_capacity(request.as_ref(), &cap(value, spec));
            assert_eq!(got, q(expected), "{msg}");
        }
    }

    #[test]
    fn consumed_capacity_matches_upstream_unit_data() {
        // dra-semantics §2.2, consumable_capacity_test.go.
        #[rustfmt::skip]
        let cases: &[ConsumedCase] = &[
            (None,      "1", "",                       "1", "empty policy, no request: whole capacity"),
            (None,      "2", "default=1 min=1",        "1", "no request: range default"),
            (None,      "2", "default=1 values=1",     "1", "no request: default in set"),
            (Some("2"), "2", "default=1 min=1",        "2", "above min, no step: request as is"),
            (Some("1"), "2", "default=1 min=2",        "2", "below min: min"),
            (Some("2"), "3", "default=1 min=1 step=2", "3", "step rounds up"),
            (Some("2"), "2", "default=1 min=1 step=1", "2", "step without remainder"),
            (Some("2"), "3", "default=1 values=1,2,3", "2", "value in set"),
            (Some("2"), "3", "default=1 values=1,3",   "3", "set rounds up"),
            (Some("3"), "3", "default=1 values=1,2",   "3", "larger than set: the request itself"),
        ];
        check_consumed(cases);
    }

    #[test]
    fn consumed_capacity_edge_cases() {
        #[rustfmt::skip]
        let cases: &[ConsumedCase] = &[
            (None,          "8Gi",  "-",       "8Gi", "no request, no policy: the whole device"),
            (Some("3Gi"),   "8Gi",  "-",       "3Gi", "request without policy is taken as is"),
            (None,          "8Gi",  "min=1Gi", "8Gi", "policy without default: whole value"),
            (Some("2Gi"),   "40Gi", "default=1Gi min=1Gi step=2Gi", "3Gi", "binary units: min + 1 step"),
            (Some("5Gi"),   "40Gi", "default=1Gi min=1Gi step=2Gi", "5Gi", "on the grid stays"),
            (Some("1500m"), "8",    "min=1 step=1", "2",  "fractional request: Value() rounds 1.5 up"),
            (Some("1500m"), "8",    "min=1",   "1500m",   "no step: fractional request kept exactly"),
            (Some("0"),     "8",    "min=0 step=4", "0",  "zero request with zero min"),
            (Some("1"),     "8",    "min=0 step=4", "4",  "zero min rounds to the first step"),
            (Some("1500m"), "8",    "default=1 values=1,2,4", "2", "set compares exactly, not by Value()"),
            (Some("1"),     "8",    "default=2", "1",     "policy with only a default: request as is"),
            (Some("1"),     "8",    "min=1 step=0", "1",  "non-positive step (precondition broken): unrounded"),
        ];
        check_consumed(cases);
    }

    #[test]
    fn rounded_result_is_the_integer_value_in_binary_si() {
        let got = consumed_capacity(Some(&q("1500m")), &cap("8", "min=1 step=1"));
        assert_eq!(got, Quantity::from_i64(2));
    }

    #[test]
    fn rounding_saturates_instead_of_wrapping() {
        // min 1 + 2 steps of 2^62 is beyond i64::MAX; Go's int64 arithmetic would wrap.
        let c = cap("9223372036854775807", "min=1 step=4611686018427387904");
        let got = consumed_capacity(Some(&q("4611686018427387906")), &c);
        assert_eq!(got, Quantity::from_i64(i64::MAX));
    }

    #[test]
    fn violates_policy_table() {
        // The first five rows are the upstream unit data (dra-semantics §2.2).
        #[rustfmt::skip]
        let cases: &[(&str, &str, bool, &str)] = &[
            ("1",    "-",                                     false, "no policy"),
            ("1",    "default=1 min=1 max=2",                 false, "less than maximum"),
            ("2",    "default=1 min=1 max=1",                 true,  "more than maximum"),
            ("1",    "default=1 values=1",                    false, "in set"),
            ("2",    "default=1 values=1",                    true,  "not in set"),
            ("3",    "default=1 min=1 step=2",                false, "on the step grid"),
            ("4",    "default=1 min=1 step=2",                true,  "off the step grid"),
            ("4",    "default=4 min=1 step=2",                false, "default exempt from the grid"),
            ("3",    "default=3 min=1 max=2",                 false, "default exempt from max"),
            ("2",    "default=2 values=1",                    false, "default exempt from the set"),
            ("1024", "default=1Ki values=1",                  false, "default compared numerically"),
            ("2",    "default=1 min=1 max=2",                 false, "equal to max"),
            ("2",    "min=1",                                 false, "range without max or step"),
            ("7",    "",                                      false, "policy with no rule"),
            ("2Ki",  "default=1Ki values=1Ki,2048",           false, "set membership is numeric"),
            ("6Gi",  "default=2Gi min=2Gi max=8Gi step=2Gi",  false, "binary grid from min"),
            ("5Gi",  "default=2Gi min=2Gi max=8Gi step=2Gi",  true,  "binary grid miss"),
        ];
        for (consumed, spec, expected, msg) in cases {
            assert_eq!(
                violates_policy(&q(consumed), policy(spec).as_ref()),
                *expected,
                "{msg}"
            );
        }
    }

    #[test]
    fn larger_than_set_then_violates() {
        let c = cap("3", "default=1 values=1,2");
        let got = consumed_capacity(Some(&q("3")), &c);
        assert!(violates_policy(&got, c.request_policy.as_ref()));
    }

    #[test]
    fn consumed_for_device_matches_upstream_example() {
        // GetConsumedCapacityFromRequest test: a requested, a defaulted and a whole-value entry.
        let dev = device(&[
            ("capacity-0", "2", "default=2 min=1"),
            ("capacity-1", "2", "default=1 min=1"),
            ("dummy", "1", "-"),
        ]);
        let requests = map(&[("capacity-0", "1"), ("dummy", "1")]);
        let got = consumed_for_device(&requests, &dev, "driver-a");
        let expected = map(&[("capacity-0", "1"), ("capacity-1", "1"), ("dummy", "1")]);
        assert_eq!(got, Ok(Some(expected)));
    }

    #[test]
    fn consumed_for_device_resolves_names() {
        let driver = "dra.example.com";
        let dev = device(&[
            ("memory", "8Gi", "-"),
            ("dra.example.com/bandwidth", "10G", "-"),
            ("other.example.com/slots", "4", "-"),
        ]);
        // (requests, expected [bandwidth, memory, slots], message).
        #[rustfmt::skip]
        let cases: &[(Entries, [&str; 3], &str)] = &[
            (&[],                                 ["10G", "8Gi", "4"], "no request: every capacity whole"),
            (&[("memory", "1Gi")],                ["10G", "1Gi", "4"], "short name, exact key"),
            (&[("dra.example.com/memory", "1Gi")], ["10G", "1Gi", "4"], "driver domain names the short key"),
            (&[("bandwidth", "1G")],              ["1G", "8Gi", "4"],  "short name names the qualified key"),
            (&[("other.example.com/slots", "1")], ["10G", "8Gi", "1"], "foreign domain, exact key"),
        ];
        for (requests, [bandwidth, memory, slots], msg) in cases {
            let expected = map(&[
                ("dra.example.com/bandwidth", bandwidth),
                ("memory", memory),
                ("other.example.com/slots", slots),
            ]);
            assert_eq!(
                consumed_for_device(&map(requests), &dev, driver),
                Ok(Some(expected)),
                "{msg}"
            );
        }
    }

    #[test]
    fn consumed_for_device_errors() {
        let driver = "dra.example.com";
        let dev = device(&[("memory", "8Gi", "-"), ("other.example.com/slots", "4", "-")]);
        let undefined = |request: &str| CapacityError::UndefinedCapacity {
            request: request.to_string(),
            driver: driver.to_string(),
        };
        let duplicate = CapacityError::DuplicateRequest {
            first: "dra.example.com/memory".to_string(),
            second: "memory".to_string(),
            capacity: "memory".to_string(),
        };
        #[rustfmt::skip]
        let cases: Vec<(Entries, CapacityError, &str)> = vec![
            (&[("slots", "1")],                    undefined("slots"), "a short name is not another domain's"),
            (&[("other.example.com/memory", "1")], undefined("other.example.com/memory"), "foreign domain"),
            (&[("memory", "1"), ("gpus", "1")],    undefined("gpus"),  "one undefined among defined"),
            (&[("memory", "1Gi"), ("dra.example.com/memory", "2Gi")], duplicate, "both forms of one name"),
        ];
        for (requests, expected, msg) in cases {
            assert_eq!(
                consumed_for_device(&map(requests), &dev, driver),
                Err(expected),
                "{msg}"
            );
        }
    }

    #[test]
    fn consumed_for_device_without_capacity() {
        let none = BTreeMap::new();
        assert_eq!(consumed_for_device(&BTreeMap::new(), &none, "d"), Ok(None));
        let err = consumed_for_device(&map(&[("memory", "1")]), &none, "d");
        let expected = CapacityError::UndefinedCapacity {
            request: "memory".to_string(),
            driver: "d".to_string(),
        };
        assert_eq!(err, Err(expected));
    }

    #[test]
    fn non_positive_step_is_an_error_naming_the_field() {
        let dev = device(&[("memory", "8", "min=1 step=0")]);
        let err = consumed_for_device(&BTreeMap::new(), &dev, "d").unwrap_err();
        let expected = CapacityError::InvalidStep {
            capacity: "memory".to_string(),
            step: "0".to_string(),
        };
        assert_eq!(err, expected);
        let text = err.to_string();
        assert!(
            text.contains("capacity[\"memory\"].requestPolicy.validRange.step"),
            "{text}"
        );
        assert_eq!(
            check_request(&BTreeMap::new(), &dev, "d", &ConsumedCapacity::new()),
            Err(expected)
        );
        assert_eq!(check_policy("memory", &cap("8", "min=1 step=1")), Ok(()));
    }

    #[test]
    fn undefined_capacity_message_names_request_and_upstream_text() {
        let err = CapacityError::UndefinedCapacity {
            request: "gpus".to_string(),
            driver: "d".to_string(),
        };
        let text = err.to_string();
        assert!(text.contains("capacity.requests[\"gpus\"]"), "{text}");
        assert!(
            text.contains("some requested capacity has not been defined"),
            "{text}"
        );
    }

    #[test]
    fn add_and_sub_round_trip_and_drop_zero_entries() {
        let mut total = ConsumedCapacity::new();
        assert!(total.is_empty());
        let one = consumed(&[("memory", "1Gi"), ("bandwidth", "1G")]);
        total.add(&one).unwrap();
        total.add(&one).unwrap();
        assert_eq!(total, consumed(&[("memory", "2Gi"), ("bandwidth", "2G")]));
        assert!(!total.is_empty());
        total.sub(&one).unwrap();
        assert_eq!(total, one);
        total.sub(&one).unwrap();
        assert_eq!(total.as_map().len(), 0, "entries reaching zero are removed");
        assert!(total.is_empty());
    }

    #[test]
    fn sub_partial_keeps_remaining_entries() {
        let mut total = consumed(&[("memory", "3"), ("slots", "1")]);
        total.sub(&consumed(&[("slots", "1"), ("memory", "1")])).unwrap();
        assert_eq!(total, consumed(&[("memory", "2")]));
        assert_eq!(total.get("slots"), None);
        assert_eq!(total.get("memory"), Some(&q("2")));
        assert_eq!(total.iter().count(), 1);
    }

    #[test]
    fn is_empty_means_all_zero() {
        let zero = consumed(&[("memory", "0")]);
        assert!(zero.is_empty());
        let mut total = ConsumedCapacity::new();
        total.add(&zero).unwrap();
        assert!(total.is_empty());
        total.sub(&zero).unwrap();
        assert!(total.is_empty());
    }

    #[test]
    fn sub_rejects_unrecorded_amounts_without_changing_anything() {
        let underflow = |capacity: &str, released: &str, recorded: &str| CapacityError::Underflow {
            capacity: capacity.to_string(),
            released: released.to_string(),
            recorded: recorded.to_string(),
        };
        #[rustfmt::skip]
        let cases: Vec<(Entries, CapacityError, &str)> = vec![
            (&[("memory", "2")],                 underflow("memory", "2", "1"), "below zero"),
            (&[("memory", "1"), ("slots", "1")], underflow("slots", "1", "0"),  "missing entry"),
        ];
        for (released, expected, msg) in cases {
            let mut total = consumed(&[("memory", "1")]);
            assert_eq!(total.sub(&consumed(released)), Err(expected), "{msg}");
            assert_eq!(total, consumed(&[("memory", "1")]), "{msg}: unchanged");
        }
    }

    #[test]
    fn fits_checks_every_capacity_of_the_device() {
        let dev = device(&[("memory", "8Gi", "-"), ("slots", "4", "-")]);
        // (new consumption, already held, first exceeding capacity, message).
        #[rustfmt::skip]
        let cases: &[(Entries, Entries, Option<&str>, &str)] = &[
            (&[("memory", "4Gi"), ("slots", "1")], &[],                                 None,           "nothing held yet"),
            (&[("memory", "4Gi"), ("slots", "1")], &[("memory", "4Gi"), ("slots", "3")], None,           "exactly full"),
            (&[("memory", "4Gi"), ("slots", "1")], &[("memory", "4Gi"), ("slots", "4")], Some("slots"),  "slots over"),
            (&[("memory", "5Gi")],                 &[("memory", "4Gi")],                 Some("memory"), "missing entries count as zero"),
            (&[("memory", "1")],                   &[("memory", "8Gi"), ("gpus", "1")],  Some("memory"), "one byte over"),
            (&[("slots", "1")],                    &[("gpus", "100")],                   None,           "entries the device lacks are ignored"),
        ];
        for (new, already, exceeding, msg) in cases {
            let (new, already) = (consumed(new), consumed(already));
            assert_eq!(new.fits(&already, &dev), exceeding.is_none(), "{msg}");
            let got = new.first_exceeding(&already, &dev).map(|e| e.capacity);
            assert_eq!(got, *exceeding, "{msg}");
        }
    }

    #[test]
    fn check_request_combines_policy_and_room() {
        let driver = "dra.example.com";
        let dev = device(&[
            ("memory", "8Gi", "default=1Gi min=1Gi max=4Gi step=1Gi"),
            ("slots", "4", "default=1 values=1,2"),
        ]);
        let fits = |entries: Entries| Ok(CapacityCheck::Fits(consumed(entries)));
        let violates = |capacity: &str, amount: &str| {
            Ok(CapacityCheck::ViolatesPolicy {
                capacity: capacity.to_string(),
                consumed: q(amount),
            })
        };
        let exceeds = Ok(CapacityCheck::Exceeds {
            capacity: "memory".to_string(),
            total: Some(q("9Gi")),
            value: q("8Gi"),
        });
        let undefined = Err(CapacityError::UndefinedCapacity {
            request: "gpus".to_string(),
            driver: driver.to_string(),
        });
        // (requests, already held, outcome, message).
        #[rustfmt::skip]
        let cases: Vec<(Entries, Entries, Result<CapacityCheck, CapacityError>, &str)> = vec![
            (&[],                     &[], fits(&[("memory", "1Gi"), ("slots", "1")]), "defaults"),
            (&[("memory", "1500Mi")], &[], fits(&[("memory", "2Gi"), ("slots", "1")]), "rounded up a step"),
            (&[("memory", "5Gi")],    &[], violates("memory", "5Gi"),                  "above max"),
            (&[("slots", "3")],       &[], violates("slots", "3"),                     "not in set"),
            (&[("memory", "4Gi")],    &[("memory", "4Gi"), ("slots", "3")],
                                           fits(&[("memory", "4Gi"), ("slots", "1")]), "fills the device"),
            (&[("memory", "4Gi")],    &[("memory", "5Gi")], exceeds,                   "no room left"),
            (&[("gpus", "1")],        &[], undefined,                                  "undefined capacity"),
        ];
        for (requests, already, expected, msg) in cases {
            let got = check_request(&map(requests), &dev, driver, &consumed(already));
            assert_eq!(got, expected, "{msg}");
        }
    }

    #[test]
    fn check_request_dedicated_device_is_a_filter() {
        // A dedicated device (no policy) with nothing recorded: a request above the value fails,
        // and without a request the whole value is consumed, which always fits.
        let dev = device(&[("memory", "8Gi", "-")]);
        let empty = ConsumedCapacity::new();
        let exceeds = CapacityCheck::Exceeds {
            capacity: "memory".to_string(),
            total: Some(q("9Gi")),
            value: q("8Gi"),
        };
        assert_eq!(
            check_request(&map(&[("memory", "9Gi")]), &dev, "d", &empty),
            Ok(exceeds)
        );
        let whole = CapacityCheck::Fits(consumed(&[("memory", "8Gi")]));
        assert_eq!(check_request(&BTreeMap::new(), &dev, "d", &empty), Ok(whole));
        let nothing = CapacityCheck::Fits(ConsumedCapacity::new());
        assert_eq!(
            check_request(&BTreeMap::new(), &BTreeMap::new(), "d", &empty),
            Ok(nothing)
        );
    }

    #[test]
    fn consumed_capacity_serializes_as_a_plain_map() {
        let c = consumed(&[("memory", "2")]);
        let json = serde_json::to_value(&c).unwrap();
        assert_eq!(json, serde_json::json!({"memory": "2"}));
        let back: ConsumedCapacity = serde_json::from_value(json).unwrap();
        assert_eq!(back, c);
        let collected: ConsumedCapacity = [("memory".to_string(), q("2"))].into_iter().collect();
        assert_eq!(collected, c);
    }
}
