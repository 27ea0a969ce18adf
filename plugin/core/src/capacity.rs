//! KEP-5075 consumable capacity: how much of each device capacity one allocation consumes, and
//! whether that amount obeys the capacity's request policy.
//!
//! The rules follow the structured allocator's `consumable_capacity.go` (dynamic-resource-allocation
//! `3d036712`):
//! - [`consumed_capacity`]: a missing request consumes the policy default or the whole capacity; a
//!   `validRange` rounds up to `min` and then to the next `step`, in exact decimal arithmetic as
//!   Kubernetes v1.37 does with `DRAFractionalCapacityRange` (beta, on by default): fractional
//!   steps (`100m`) round to fractional amounts; `validValues` picks the first value at or above
//!   the request.
//! - [`violates_policy`]: above `max`, off the `step` grid (exactly), or outside `validValues`; a
//!   consumption equal to the default is always allowed (compared numerically, not structurally as
//!   upstream).
//!
//! The allocator (`allocator.rs`, `capacity_fits`) adds the amounts already consumed by allocated
//! claims and by earlier choices of the same call, for every capacity of the device.

use std::cmp::Ordering;

use crate::model::{CapacityRequestPolicy, CapacityRequestPolicyRange, DeviceCapacity};
use crate::quantity::{Format, Quantity};

/// Nano-units per unit: [`Quantity::nanos`] is exact to the nano-unit.
const NANOS_PER_UNIT: i128 = 1_000_000_000;

/// The amount one allocation consumes: the request after policy rounding, or the default, or the
/// whole capacity value when the request does not name this capacity (`calculateConsumedCapacity`).
///
/// A `validRange.step` that is not a positive integer (invalid per API validation) leaves the
/// request unrounded rather than dividing by zero. A rounded value beyond `i64::MAX` saturates there
/// instead of wrapping around as Go's int64 arithmetic would.
///
/// ```
/// use sharing_affinity_core::capacity::consumed_capacity;
/// use sharing_affinity_core::model::{CapacityRequestPolicy, CapacityRequestPolicyRange, DeviceCapacity};
/// let q = |s: &str| s.parse().unwrap();
/// let cap = DeviceCapacity {
///     value: q("40Gi"),
///     request_policy: Some(std::sync::Arc::new(CapacityRequestPolicy {
///         default: Some(q("1Gi")),
///         valid_values: vec![],
///         valid_range: Some(Box::new(CapacityRequestPolicyRange { min: q("1Gi"), max: None, step: Some(q("2Gi")) })),
///     })),
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

/// `roundUpRange`: below `min` gives `min`; otherwise `request - min` rounded up to whole
/// steps, in exact decimal arithmetic (`DRAFractionalCapacityRange`, beta and on by default in
/// Kubernetes v1.37: with `min: 100m, step: 100m`, a request of `250m` consumes `300m`). A whole
/// result is written in binary SI, as upstream's integer arithmetic writes it; a fractional one in
/// decimal SI.
fn round_up_range(request: &Quantity, range: &CapacityRequestPolicyRange) -> Quantity {
    if request.cmp(&range.min) == Ordering::Less {
        return range.min.clone();
    }
    let Some(step) = &range.step else {
        return request.clone();
    };
    let step = step.nanos();
    if step <= 0 {
        return request.clone();
    }
    let min = range.min.nanos();
    let added = request.nanos() - min;
    // `added` is not negative: the request is at least `min`.
    let steps = added / step + i128::from(added % step != 0);
    let rounded = step.checked_mul(steps).and_then(|grid| grid.checked_add(min));
    match rounded {
        Some(rounded) if rounded % NANOS_PER_UNIT == 0 => match i64::try_from(rounded / NANOS_PER_UNIT) {
            Ok(units) => Quantity::from_i64(units),
            Err(_) => Quantity::from_i64(i64::MAX),
        },
        Some(rounded) if rounded <= i128::from(i64::MAX) * NANOS_PER_UNIT => {
            Quantity::from_nanos(rounded, Format::DecimalSI)
        }
        _ => Quantity::from_i64(i64::MAX),
    }
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
/// `validRange.max`, not exactly `min` plus a whole number of steps, or not one of `validValues`. An amount numerically equal to `default` never violates.
///
/// A non-positive `step` (invalid per API validation) is not checked.
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
            let step = step.nanos();
            let added = consumed.nanos() - range.min.nanos();
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
            p.valid_range = Some(Box::new(CapacityRequestPolicyRange { min, max, step }));
        }
        Some(p)
    }

    fn cap(value: &str, spec: &str) -> DeviceCapacity {
        DeviceCapacity {
            value: q(value),
            request_policy: policy(spec).map(std::sync::Arc::new),
        }
    }

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
            (Some("1500m"), "8",    "min=1 step=1", "2",  "fractional request on a whole grid: 1.5 rounds up to 2"),
            (Some("1500m"), "8",    "min=1",   "1500m",   "no step: fractional request kept exactly"),
            (Some("0"),     "8",    "min=0 step=4", "0",  "zero request with zero min"),
            (Some("1"),     "8",    "min=0 step=4", "4",  "zero min rounds to the first step"),
            (Some("1500m"), "8",    "default=1 values=1,2,4", "2", "set compares exactly, not by Value()"),
            (Some("1"),     "8",    "default=2", "1",     "policy with only a default: request as is"),
            (Some("1"),     "8",    "min=1 step=0", "1",  "non-positive step (precondition broken): unrounded"),
        ];
        check_consumed(cases);
    }

    /// `DRAFractionalCapacityRange` (Kubernetes v1.37, beta, on): fractional minimums and steps
    /// round exactly.
    #[test]
    fn fractional_steps_round_exactly() {
        #[rustfmt::skip]
        let cases: &[ConsumedCase] = &[
            (Some("250m"), "1", "default=100m min=100m max=1 step=100m", "300m", "250m rounds to the next 100m"),
            (Some("300m"), "1", "default=100m min=100m max=1 step=100m", "300m", "on the grid stays"),
            (Some("50m"),  "1", "default=100m min=100m max=1 step=100m", "100m", "below min: min"),
            (Some("1"),    "1", "default=100m min=100m max=1 step=100m", "1",    "a whole amount"),
            (Some("1100m"), "4", "min=500m step=250m", "1250m", "grid from a fractional min"),
            (Some("1Gi"),  "4Gi", "min=0 step=0.5Gi", "1Gi", "binary grid"),
            (Some("1n"),   "1", "min=0 step=3n", "3n", "nano steps"),
        ];
        check_consumed(cases);
        let policy = policy("default=100m min=100m max=1 step=100m");
        assert!(!violates_policy(&q("300m"), policy.as_ref()));
        assert!(
            violates_policy(&q("250m"), policy.as_ref()),
            "off the fractional grid"
        );
        // Three 250m claims consume 900m of a device of 1: a fourth does not fit.
        let cap = cap("1", "default=100m min=100m max=1 step=100m");
        let three = consumed_capacity(Some(&q("250m")), &cap).nanos() * 3;
        assert_eq!(three, q("900m").nanos());
        assert_eq!(consumed_capacity(Some(&q("250m")), &cap).to_string(), "300m");
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
        assert!(violates_policy(&got, c.request_policy.as_deref()));
    }
}
