//! Device taints and tolerations (`DRADeviceTaints`), with the Kubernetes toleration semantics the
//! allocator uses (`resourceclaim.ToleratesTaint` and `taintPreventsAllocation`).
//!
//! - Only `NoSchedule` and `NoExecute` taints keep a device from being allocated; `None` and any
//!   unknown effect never block.
//! - A toleration matches a taint when its effect is empty or equal to the taint's, its key is
//!   empty or equal to the taint's, and its operator is `Exists`, or `Equal`/empty with an equal
//!   value. Any other operator tolerates nothing.
//! - `tolerationSeconds` only matters for eviction and is ignored here.
//!
//! `DeviceTaintRule` objects put their taint on every device their selector picks, with the same
//! effect as a taint published in the slice ([`TaintRule`]; applied when the slice index is built).

use crate::cel::{CelCache, CelDevice};
use crate::model::{DeviceClass, DeviceTaint, DeviceTaintRule, DeviceToleration};

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
/// let taint = DeviceTaint { key: "maintenance".into(), value: "true".into(), effect: "NoSchedule".into(), time_added: None };
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

/// A `DeviceTaintRule` ready to be matched against devices.
///
/// Upstream semantics (`DeviceTaintSelector`): every criterion that is set must match; an empty
/// selector matches every device; a rule without a selector matches none. The `v1alpha3` fields of
/// Kubernetes 1.33 and 1.34 are honoured: `deviceClassName` requires the class's CEL selectors to
/// match, and `selectors` are CEL selectors that must all match.
#[derive(Clone, Debug, PartialEq)]
pub struct TaintRule {
    /// `DeviceTaintRule <name>`, for messages.
    pub label: String,
    /// `deviceSelector.driver`.
    pub driver: Option<String>,
    /// `deviceSelector.pool`.
    pub pool: Option<String>,
    /// `deviceSelector.device`.
    pub device: Option<String>,
    /// CEL selectors that must all match: `(field path, expression)`, the class's first.
    pub selectors: Vec<(String, String)>,
    /// Why the rule cannot be evaluated (its `deviceClassName` names no known class).
    pub unresolved: Option<String>,
    /// The taint.
    pub taint: DeviceTaint,
}

impl TaintRule {
    /// Resolves a rule against the known classes; `None` for a rule without a selector (it matches
    /// no device).
    pub fn resolve<S: std::hash::BuildHasher>(
        rule: &DeviceTaintRule,
        classes: &std::collections::HashMap<String, DeviceClass, S>,
    ) -> Option<TaintRule> {
        let sel = rule.spec.device_selector.as_ref()?;
        let mut selectors = Vec::new();
        let mut unresolved = None;
        if let Some(class) = &sel.device_class_name {
            match classes.get(class) {
                Some(c) => {
                    for (i, s) in c.spec.selectors.iter().enumerate() {
                        selectors.push((
                            format!("DeviceClass {class} spec.selectors[{i}]"),
                            s.cel.expression.clone(),
                        ));
                    }
                }
                None => {
                    unresolved = Some(format!(
                        "spec.deviceSelector.deviceClassName: device class {class} not found"
                    ));
                }
            }
        }
        for (i, s) in sel.selectors.iter().enumerate() {
            selectors.push((
                format!("spec.deviceSelector.selectors[{i}]"),
                s.cel.expression.clone(),
            ));
        }
        Some(TaintRule {
            label: format!("DeviceTaintRule {}", rule.metadata.name),
            driver: sel.driver.clone(),
            pool: sel.pool.clone(),
            device: sel.device.clone(),
            selectors,
            unresolved,
            taint: rule.spec.taint.clone(),
        })
    }

    /// Whether the rule picks the device `driver/pool/device`. `cel_device` prepares the device
    /// for CEL; it is only called when the rule has CEL selectors and the names matched. An error
    /// (an unknown class, a CEL error) names the rule and the device: such a rule is never guessed
    /// to match or not.
    pub fn matches<'d>(
        &self,
        (driver, pool, device): (&str, &str, &str),
        cel: &CelCache,
        cel_device: impl FnOnce() -> Result<&'d CelDevice, String>,
    ) -> Result<bool, String> {
        let name_ok = |want: &Option<String>, have: &str| want.as_deref().is_none_or(|w| w == have);
        if !name_ok(&self.driver, driver) || !name_ok(&self.pool, pool) || !name_ok(&self.device, device) {
            return Ok(false);
        }
        if let Some(why) = &self.unresolved {
            return Err(format!("{}: {why}", self.label));
        }
        if self.selectors.is_empty() {
            return Ok(true);
        }
        let id = format!("{driver}/{pool}/{device}");
        let dev = cel_device().map_err(|e| format!("{}: device {id}: {e}", self.label))?;
        for (path, expr) in &self.selectors {
            let sel = cel
                .selector(expr)
                .map_err(|e| format!("{}: {path} {expr:?}: CEL compile error: {e}", self.label))?;
            let m = sel.matches(dev).map_err(|e| {
                format!(
                    "{}: {path} {expr:?} on device {id}: CEL runtime error: {e}",
                    self.label
                )
            })?;
            if !m {
                return Ok(false);
            }
        }
        Ok(true)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn taint(key: &str, value: &str, effect: &str) -> DeviceTaint {
        DeviceTaint {
            key: key.to_string(),
            value: value.to_string(),
            effect: effect.to_string(),
            time_added: None,
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
