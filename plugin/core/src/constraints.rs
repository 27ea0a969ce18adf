//! Claim constraints across requests: `matchAttribute` and `distinctAttribute`.
//!
//! Each constraint is a small struct with `add` and `remove`. The allocator calls `add` when it is
//! about to allocate a device for a request; for every successful `add` there is exactly one
//! matching `remove` with the same arguments when that choice is backtracked. Constraints are
//! monotonic: once `add` fails, adding more devices never makes it succeed.

use std::collections::BTreeMap;

use crate::model::AttributeValue;

/// Which requests a constraint covers: empty = all; `<req>` also covers its subrequests.
#[derive(Clone, Debug, Default)]
pub struct RequestScope(Vec<String>);

impl RequestScope {
    /// A scope from a constraint's or config's `requests` list.
    pub fn new(requests: &[String]) -> Self {
        RequestScope(requests.to_vec())
    }

    /// Whether the scope covers `request` (and, when set, its subrequest `sub`).
    pub fn covers(&self, request: &str, sub: Option<&str>) -> bool {
        if self.0.is_empty() {
            return true;
        }
        self.0.iter().any(|r| {
            r == request
                || sub
                    .is_some_and(|s| r.len() == request.len() + 1 + s.len() && *r == format!("{request}/{s}"))
        })
    }
}

/// The attribute value of a device for a constraint, or why there is none.
pub enum Lookup<'a> {
    /// The device has the attribute.
    Value(&'a AttributeValue),
    /// The device lacks the attribute.
    Missing,
    /// The attribute is set but has no or several values.
    Invalid,
}

/// A claim constraint with its tracking state.
#[derive(Debug)]
pub enum Constraint {
    /// All covered devices have the same value.
    Match {
        /// Covered requests.
        scope: RequestScope,
        /// Attribute (fully qualified).
        attribute: String,
        /// The value of the first device, while any device is in the set.
        value: Option<AttributeValue>,
        /// Number of devices in the set.
        count: usize,
    },
    /// All covered devices have distinct values.
    Distinct {
        /// Covered requests.
        scope: RequestScope,
        /// Attribute (fully qualified).
        attribute: String,
        /// Values in the set, with how many devices hold each (list values expanded).
        values: BTreeMap<AttributeValue, usize>,
    },
}

impl Constraint {
    /// The attribute the constraint is about.
    pub fn attribute(&self) -> &str {
        match self {
            Constraint::Match { attribute, .. } | Constraint::Distinct { attribute, .. } => attribute,
        }
    }

    fn scope(&self) -> &RequestScope {
        match self {
            Constraint::Match { scope, .. } | Constraint::Distinct { scope, .. } => scope,
        }
    }

    /// Tries to add a device for `request`/`sub`. Returns false when the device violates the
    /// constraint (nothing is recorded then).
    pub fn add(&mut self, request: &str, sub: Option<&str>, value: Lookup<'_>) -> bool {
        if !self.scope().covers(request, sub) {
            return true;
        }
        let Lookup::Value(value) = value else {
            return false;
        };
        match self {
            Constraint::Match {
                value: first, count, ..
            } => {
                if *count == 0 {
                    *first = Some(value.clone());
                    *count = 1;
                    return true;
                }
                let ok = first.as_ref().is_some_and(|f| match_values(f, value));
                if ok {
                    *count += 1;
                }
                ok
            }
            Constraint::Distinct { values, .. } => {
                let items = expand(value);
                if items.iter().any(|i| values.contains_key(i)) {
                    return false;
                }
                for i in items {
                    *values.entry(i).or_default() += 1;
                }
                true
            }
        }
    }

    /// Undoes one successful [`Constraint::add`] with the same arguments.
    pub fn remove(&mut self, request: &str, sub: Option<&str>, value: Lookup<'_>) {
        if !self.scope().covers(request, sub) {
            return;
        }
        match self {
            Constraint::Match {
                value: first, count, ..
            } => {
                *count = count.saturating_sub(1);
                if *count == 0 {
                    *first = None;
                }
            }
            Constraint::Distinct { values, .. } => {
                if let Lookup::Value(value) = value {
                    for i in expand(value) {
                        if let Some(n) = values.get_mut(&i) {
                            *n -= 1;
                            if *n == 0 {
                                values.remove(&i);
                            }
                        }
                    }
                }
            }
        }
    }
}

/// Scalars compare by type and value; list values match when their sets intersect.
fn match_values(a: &AttributeValue, b: &AttributeValue) -> bool {
    use AttributeValue as V;
    match (a, b) {
        (V::Int(_) | V::Bool(_) | V::String(_) | V::Version(_), _) => a == b,
        (V::Ints(x), V::Ints(y)) => x.iter().any(|v| y.contains(v)),
        (V::Bools(x), V::Bools(y)) => x.iter().any(|v| y.contains(v)),
        (V::Strings(x), V::Strings(y)) => x.iter().any(|v| y.contains(v)),
        (V::Versions(x), V::Versions(y)) => x.iter().any(|v| y.contains(v)),
        _ => false,
    }
}

/// A list value as its scalar members (for pairwise-disjoint checks); a scalar as itself.
fn expand(v: &AttributeValue) -> Vec<AttributeValue> {
    use AttributeValue as V;
    match v {
        V::Ints(x) => x.iter().map(|i| V::Int(*i)).collect(),
        V::Bools(x) => x.iter().map(|i| V::Bool(*i)).collect(),
        V::Strings(x) => x.iter().map(|i| V::String(i.as_str().into())).collect(),
        V::Versions(x) => x.iter().map(|i| V::Version(i.as_str().into())).collect(),
        other => vec![other.clone()],
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use AttributeValue as V;

    fn m(scope: &[&str]) -> Constraint {
        Constraint::Match {
            scope: RequestScope::new(&scope.iter().map(|s| s.to_string()).collect::<Vec<_>>()),
            attribute: "d/a".into(),
            value: None,
            count: 0,
        }
    }

    fn d(scope: &[&str]) -> Constraint {
        Constraint::Distinct {
            scope: RequestScope::new(&scope.iter().map(|s| s.to_string()).collect::<Vec<_>>()),
            attribute: "d/a".into(),
            values: BTreeMap::new(),
        }
    }

    #[test]
    fn match_requires_same_type_and_value() {
        let mut c = m(&[]);
        assert!(
            c.add("r0", None, Lookup::Value(&V::Int(1))),
            "first device always fits"
        );
        assert!(c.add("r1", None, Lookup::Value(&V::Int(1))));
        assert!(!c.add("r2", None, Lookup::Value(&V::Int(2))), "different value");
        assert!(
            !c.add("r2", None, Lookup::Value(&V::String("1".into()))),
            "different type"
        );
        assert!(!c.add("r2", None, Lookup::Missing), "missing attribute");
        c.remove("r1", None, Lookup::Value(&V::Int(1)));
        c.remove("r0", None, Lookup::Value(&V::Int(1)));
        assert!(
            c.add("r0", None, Lookup::Value(&V::Int(2))),
            "empty again after rollback"
        );
    }

    #[test]
    fn match_lists_need_intersection() {
        let mut c = m(&[]);
        assert!(c.add("r0", None, Lookup::Value(&V::Ints(vec![1, 2]))));
        assert!(c.add("r1", None, Lookup::Value(&V::Ints(vec![2, 3]))));
        assert!(!c.add("r2", None, Lookup::Value(&V::Ints(vec![4]))));
    }

    #[test]
    fn distinct_rejects_repeats_and_rolls_back() {
        let mut c = d(&[]);
        assert!(c.add("r0", None, Lookup::Value(&V::Bool(true))));
        assert!(!c.add("r1", None, Lookup::Value(&V::Bool(true))));
        assert!(c.add("r1", None, Lookup::Value(&V::Bool(false))));
        c.remove("r1", None, Lookup::Value(&V::Bool(false)));
        assert!(!c.add("r2", None, Lookup::Missing), "attribute not set");
        assert!(c.add("r2", None, Lookup::Value(&V::Bool(false))));
    }

    #[test]
    fn distinct_lists_must_be_disjoint() {
        let mut c = d(&[]);
        assert!(c.add(
            "r0",
            None,
            Lookup::Value(&V::Strings(vec!["a".into(), "b".into()]))
        ));
        assert!(!c.add("r1", None, Lookup::Value(&V::Strings(vec!["b".into()]))));
        assert!(c.add("r1", None, Lookup::Value(&V::Strings(vec!["c".into()]))));
    }

    #[test]
    fn scope_covers_requests_and_subrequests() {
        let s = RequestScope::new(&["r0".into(), "r1/s1".into()]);
        for (req, sub, want, msg) in [
            ("r0", None, true, "named request"),
            ("r0", Some("s0"), true, "parent covers its subrequests"),
            ("r1", Some("s1"), true, "named subrequest"),
            ("r1", Some("s0"), false, "other subrequest"),
            ("r1", None, false, "parent not named"),
            ("r2", None, false, "other request"),
        ] {
            assert_eq!(s.covers(req, sub), want, "{msg}");
        }
        assert!(RequestScope::new(&[]).covers("any", None), "empty = all");
        let mut c = m(&["r0"]);
        assert!(
            c.add("r9", None, Lookup::Missing),
            "uncovered requests are not checked"
        );
    }
}
