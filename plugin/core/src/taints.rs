//! Device taints and tolerations (`DRADeviceTaints`), with the Kubernetes toleration semantics the
//! allocator uses (`resourceclaim.ToleratesTaint` and `taintPreventsAllocation`).
//!
//! - Only `NoSchedule` and `NoExecute` taints keep a device from being allocated; `None` and any
//!   unknown effect never block.
//! - A toleration matches a taint when its effect is empty or equal to the taint's, its key is
//!   empty or equal to the taint's, and its operator is `Exists`, or `Equal`/empty with an equal
//!   value. Any other operator tolerates nothing.
//! - `tolerationSeconds` only matters for eviction and is ignored here.

use crate::model::{DeviceTaint, DeviceToleration};

/// Taint effect: the device is not allocated unless the taint is tolerated.
pub const EFFECT_NO_SCHEDULE: &str = "NoSchedule";
/// Taint effect: like `NoSchedule`; in addition, running consumers are evicted.
pub const EFFECT_NO_EXECUTE: &str = "NoExecute";
/// Taint effect: informational only; never blocks allocation.
pub const EFFECT_NONE: &str = "None";
/// Toleration operator: the toleration matches any value (and with an empty key, any key).
pub const OPERATOR_EXISTS: &str = "Exists";
/// Toleration operator (the default when empty): the values must be equal.
pub const OPERATOR_EQUAL: &str = "Equal";

/// Whether `toleration` tolerates `taint` (effect, key and value matched as described in the
/// module documentation). Whether the taint's effect matters at all is decided by the caller, see
/// [`all_taints_tolerated`].
///
/// ```
/// use sharing_affinity_core::model::{DeviceTaint, DeviceToleration};
/// use sharing_affinity_core::taints::tolerates;
/// let taint = DeviceTaint { key: "maintenance".into(), value: "true".into(), effect: "NoSchedule".into() };
/// let any = DeviceToleration { operator: "Exists".into(), ..Default::default() };
/// assert!(tolerates(&any, &taint));
/// let other_value = DeviceToleration { key: "maintenance".into(), value: "false".into(), ..Default::default() };
/// assert!(!tolerates(&other_value, &taint));
/// ```
pub fn tolerates(toleration: &DeviceToleration, taint: &DeviceTaint) -> bool {
    if !toleration.effect.is_empty() && toleration.effect != taint.effect {
        return false;
    }
    if !toleration.key.is_empty() && toleration.key != taint.key {
        return false;
    }
    match toleration.operator.as_str() {
        "" | OPERATOR_EQUAL => toleration.value == taint.value,
        OPERATOR_EXISTS => true,
        _ => false,
    }
}

/// Whether a taint with this effect must be tolerated for the device to be allocated.
pub fn effect_blocks_allocation(effect: &str) -> bool {
    effect == EFFECT_NO_SCHEDULE || effect == EFFECT_NO_EXECUTE
}

/// Whether every blocking (`NoSchedule`/`NoExecute`) taint of a device is tolerated by at least one
/// of the request's tolerations; when `false` the device cannot be allocated for that request.
pub fn all_taints_tolerated(taints: &[DeviceTaint], tolerations: &[DeviceToleration]) -> bool {
    taints
        .iter()
        .filter(|taint| effect_blocks_allocation(&taint.effect))
        .all(|taint| tolerations.iter().any(|t| tolerates(t, taint)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn taint(key: &str, value: &str, effect: &str) -> DeviceTaint {
        DeviceTaint {
            key: key.to_string(),
            value: value.to_string(),
            effect: effect.to_string(),
        }
    }

    fn tol(key: &str, operator: &str, value: &str, effect: &str) -> DeviceToleration {
        DeviceToleration {
            key: key.to_string(),
            operator: operator.to_string(),
            value: value.to_string(),
            effect: effect.to_string(),
            toleration_seconds: None,
        }
    }

    #[test]
    fn tolerates_table() {
        let t = taint("example.com/maint", "soon", "NoSchedule");
        let cases: Vec<(DeviceToleration, bool, &str)> = vec![
            (
                tol("example.com/maint", "Equal", "soon", "NoSchedule"),
                true,
                "exact match",
            ),
            (
                tol("example.com/maint", "", "soon", "NoSchedule"),
                true,
                "empty operator means Equal",
            ),
            (
                tol("example.com/maint", "Equal", "later", "NoSchedule"),
                false,
                "Equal: other value",
            ),
            (
                tol("example.com/maint", "", "", ""),
                false,
                "Equal: empty value is not a wildcard",
            ),
            (
                tol("example.com/maint", "Exists", "", "NoSchedule"),
                true,
                "Exists: any value",
            ),
            (
                tol("example.com/maint", "Exists", "", ""),
                true,
                "empty effect matches all effects",
            ),
            (
                tol("example.com/maint", "Exists", "", "NoExecute"),
                false,
                "other effect",
            ),
            (tol("example.com/other", "Exists", "", ""), false, "other key"),
            (
                tol("", "Exists", "", ""),
                true,
                "empty key with Exists: everything",
            ),
            (
                tol("", "Exists", "", "NoExecute"),
                false,
                "empty key, effect still compared",
            ),
            (
                tol("", "Equal", "soon", ""),
                true,
                "empty key with Equal compares the value only",
            ),
            (
                tol("example.com/maint", "In", "soon", ""),
                false,
                "unknown operator tolerates nothing",
            ),
            (
                tol("example.com/maint", "exists", "", ""),
                false,
                "operators are case-sensitive",
            ),
        ];
        for (toleration, expected, msg) in cases {
            assert_eq!(tolerates(&toleration, &t), expected, "{msg}");
        }
    }

    #[test]
    fn all_taints_tolerated_table() {
        let cases: Vec<(Vec<DeviceTaint>, Vec<DeviceToleration>, bool, &str)> = vec![
            (vec![], vec![], true, "untainted device"),
            (
                vec![taint("k", "v", "NoSchedule")],
                vec![],
                false,
                "NoSchedule blocks",
            ),
            (
                vec![taint("k", "v", "NoExecute")],
                vec![],
                false,
                "NoExecute blocks",
            ),
            (vec![taint("k", "v", "None")], vec![], true, "None never blocks"),
            (
                vec![taint("k", "v", "PreferNoSchedule")],
                vec![],
                true,
                "unknown effect is ignored",
            ),
            (
                vec![taint("k", "v", "NoSchedule")],
                vec![tol("k", "Equal", "v", "NoSchedule")],
                true,
                "tolerated",
            ),
            (
                vec![taint("a", "", "NoSchedule"), taint("b", "", "NoExecute")],
                vec![tol("a", "Exists", "", "")],
                false,
                "every blocking taint needs a toleration",
            ),
            (
                vec![taint("a", "", "NoSchedule"), taint("b", "", "NoExecute")],
                vec![tol("a", "Exists", "", ""), tol("b", "Exists", "", "NoExecute")],
                true,
                "each taint tolerated by a different toleration",
            ),
            (
                vec![taint("a", "", "NoSchedule"), taint("b", "x", "None")],
                vec![tol("a", "Exists", "", "")],
                true,
                "None taint needs no toleration",
            ),
            (
                vec![taint("a", "1", "NoSchedule"), taint("b", "2", "NoExecute")],
                vec![tol("", "Exists", "", "")],
                true,
                "tolerate everything",
            ),
            (
                vec![taint("a", "1", "NoExecute")],
                vec![tol("", "Exists", "", "NoSchedule")],
                false,
                "wildcard limited to NoSchedule",
            ),
        ];
        for (taints, tolerations, expected, msg) in cases {
            assert_eq!(all_taints_tolerated(&taints, &tolerations), expected, "{msg}");
        }
    }
}
