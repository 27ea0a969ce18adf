//! `core/v1` NodeSelector matching, as the DRA allocator uses it for network-attached slices and
//! per-device node selection (upstream `nodeaffinity.NewNodeSelector` + `Match`).
//!
//! - Terms are ORed, the requirements of one term are ANDed. A term with neither
//!   `matchExpressions` nor `matchFields` matches nothing; a selector without terms matches nothing.
//! - `matchExpressions` test node labels with `In`, `NotIn`, `Exists`, `DoesNotExist`, `Gt`, `Lt`.
//!   `Gt`/`Lt` compare base-10 `int64` values; a label value that is not an integer does not match.
//! - `matchFields` support only `metadata.name` with `In`/`NotIn` and exactly one value. As
//!   upstream, they are not evaluated for a node without a name.
//! - The selector is validated as a whole before any node is matched, so a bad requirement is an
//!   error even when an earlier term would match (upstream parses eagerly). Errors carry the path,
//!   e.g. `nodeSelectorTerms[0].matchExpressions[1]`, the key and the operator.
//!
//! Parse once with [`ParsedNodeSelector::parse`] and call [`ParsedNodeSelector::matches`] per node,
//! or use [`matches()`] for a one-off check.

use crate::model::{Node, NodeSelector, NodeSelectorRequirement, NodeSelectorTerm};

/// The only field `matchFields` may name.
pub const NODE_NAME_FIELD: &str = "metadata.name";

/// Label keys and values are at most this long (the name part of a key, and a value).
const LABEL_MAX_LENGTH: usize = 63;
/// A key prefix (DNS subdomain) is at most this long.
const DNS1123_SUBDOMAIN_MAX_LENGTH: usize = 253;

/// An invalid node selector requirement. `path` is the requirement's position, e.g.
/// `nodeSelectorTerms[0].matchExpressions[1]`.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum NodeSelectorError {
    /// An operator the requirement kind does not support.
    #[error("{path}.operator: key {key:?}: unsupported operator {operator:?} (supported: {supported})")]
    UnsupportedOperator {
        /// Position of the requirement.
        path: String,
        /// The requirement key.
        key: String,
        /// The operator as written.
        operator: String,
        /// The supported operators.
        supported: &'static str,
    },
    /// A wrong number or form of values for the operator.
    #[error("{path}.values: key {key:?}, operator {operator}: {reason}")]
    InvalidValues {
        /// Position of the requirement.
        path: String,
        /// The requirement key.
        key: String,
        /// The operator.
        operator: String,
        /// What is wrong.
        reason: String,
    },
    /// A label key that is not a qualified name.
    #[error("{path}.key: invalid label key {key:?}: {reason}")]
    InvalidKey {
        /// Position of the requirement.
        path: String,
        /// The key as written.
        key: String,
        /// What is wrong.
        reason: String,
    },
    /// A `matchFields` key other than `metadata.name`.
    #[error("{path}.key: unsupported field {key:?} (supported: metadata.name)")]
    UnsupportedField {
        /// Position of the requirement.
        path: String,
        /// The key as written.
        key: String,
    },
}

/// A label requirement after validation.
#[derive(Clone, Debug, PartialEq, Eq)]
enum LabelRequirement {
    In(String, Vec<String>),
    NotIn(String, Vec<String>),
    Exists(String),
    DoesNotExist(String),
    Gt(String, i64),
    Lt(String, i64),
}

impl LabelRequirement {
    fn matches(&self, node: &Node) -> bool {
        let labels = &node.metadata.labels;
        match self {
            Self::In(key, values) => labels.get(key).is_some_and(|v| values.contains(v)),
            Self::NotIn(key, values) => labels.get(key).is_none_or(|v| !values.contains(v)),
            Self::Exists(key) => labels.contains_key(key),
            Self::DoesNotExist(key) => !labels.contains_key(key),
            Self::Gt(key, bound) => label_int(node, key).is_some_and(|v| v > *bound),
            Self::Lt(key, bound) => label_int(node, key).is_some_and(|v| v < *bound),
        }
    }
}

/// A node label as a base-10 `int64`; `None` when absent or not an integer (upstream: no match).
fn label_int(node: &Node, key: &str) -> Option<i64> {
    node.metadata.labels.get(key)?.parse().ok()
}

/// A `metadata.name` requirement after validation: `In` (equal) or `NotIn` (not equal).
#[derive(Clone, Debug, PartialEq, Eq)]
struct FieldRequirement {
    name: String,
    equal: bool,
}

/// One non-empty term after validation.
#[derive(Clone, Debug, PartialEq, Eq)]
struct ParsedTerm {
    labels: Vec<LabelRequirement>,
    fields: Vec<FieldRequirement>,
}

impl ParsedTerm {
    fn matches(&self, node: &Node) -> bool {
        if !self.labels.iter().all(|r| r.matches(node)) {
            return false;
        }
        let name = &node.metadata.name;
        // Upstream skips field requirements when the node has no fields (no name).
        name.is_empty() || self.fields.iter().all(|f| (f.name == *name) == f.equal)
    }
}

/// A validated node selector, ready to be matched against many nodes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ParsedNodeSelector {
    terms: Vec<ParsedTerm>,
}

impl ParsedNodeSelector {
    /// Validates every requirement of every term; the first invalid one (in term order, expressions
    /// before fields) is reported. Empty terms are dropped: they match nothing.
    pub fn parse(selector: &NodeSelector) -> Result<Self, NodeSelectorError> {
        let mut terms = Vec::with_capacity(selector.node_selector_terms.len());
        for (i, term) in selector.node_selector_terms.iter().enumerate() {
            if term.match_expressions.is_empty() && term.match_fields.is_empty() {
                continue;
            }
            terms.push(parse_term(term, &format!("nodeSelectorTerms[{i}]"))?);
        }
        Ok(Self { terms })
    }

    /// Whether the node satisfies at least one term.
    pub fn matches(&self, node: &Node) -> bool {
        self.terms.iter().any(|t| t.matches(node))
    }
}

/// Whether `node` matches `selector` (terms ORed, requirements ANDed), or why the selector is
/// invalid.
///
/// ```
/// use sharing_affinity_core::model::{Node, ObjectMeta};
/// use sharing_affinity_core::node_selector::{matches, node_name_selector};
/// let node = Node {
///     metadata: ObjectMeta { name: "worker-1".into(), ..Default::default() },
///     ..Default::default()
/// };
/// assert_eq!(matches(&node_name_selector("worker-1"), &node), Ok(true));
/// assert_eq!(matches(&node_name_selector("worker-2"), &node), Ok(false));
/// ```
pub fn matches(selector: &NodeSelector, node: &Node) -> Result<bool, NodeSelectorError> {
    Ok(ParsedNodeSelector::parse(selector)?.matches(node))
}

/// The selector the allocator writes into `status.allocation.nodeSelector` when an allocated device
/// is local to one node: one term with `matchFields metadata.name In [node]`.
pub fn node_name_selector(node: &str) -> NodeSelector {
    NodeSelector {
        node_selector_terms: vec![NodeSelectorTerm {
            match_expressions: Vec::new(),
            match_fields: vec![NodeSelectorRequirement::new(
                NODE_NAME_FIELD,
                "In",
                vec![node.to_string()],
            )],
        }],
    }
}

fn parse_term(term: &NodeSelectorTerm, path: &str) -> Result<ParsedTerm, NodeSelectorError> {
    let labels = term
        .match_expressions
        .iter()
        .enumerate()
        .map(|(i, r)| parse_label_requirement(r, &format!("{path}.matchExpressions[{i}]")))
        .collect::<Result<_, _>>()?;
    let fields = term
        .match_fields
        .iter()
        .enumerate()
        .map(|(i, r)| parse_field_requirement(r, &format!("{path}.matchFields[{i}]")))
        .collect::<Result<_, _>>()?;
    Ok(ParsedTerm { labels, fields })
}

fn parse_label_requirement(
    r: &NodeSelectorRequirement,
    path: &str,
) -> Result<LabelRequirement, NodeSelectorError> {
    let invalid_values = |reason: String| NodeSelectorError::InvalidValues {
        path: path.to_string(),
        key: r.key.clone(),
        operator: r.operator.clone(),
        reason,
    };
    if let Err(reason) = check_label_key(&r.key) {
        return Err(NodeSelectorError::InvalidKey {
            path: path.to_string(),
            key: r.key.clone(),
            reason,
        });
    }
    let key = r.key.clone();
    let values = &r.values;
    let requirement = match r.operator.as_str() {
        "In" | "NotIn" => {
            if values.is_empty() {
                return Err(invalid_values("at least one value is required".to_string()));
            }
            if r.operator == "In" {
                LabelRequirement::In(key, values.clone())
            } else {
                LabelRequirement::NotIn(key, values.clone())
            }
        }
        "Exists" | "DoesNotExist" => {
            if !values.is_empty() {
                return Err(invalid_values(format!("values must be empty, got {values:?}")));
            }
            if r.operator == "Exists" {
                LabelRequirement::Exists(key)
            } else {
                LabelRequirement::DoesNotExist(key)
            }
        }
        "Gt" | "Lt" => {
            let [value] = values.as_slice() else {
                return Err(invalid_values(format!(
                    "exactly one value is required, got {values:?}"
                )));
            };
            let bound: i64 = value
                .parse()
                .map_err(|_| invalid_values(format!("value {value:?} is not a base-10 int64 integer")))?;
            if r.operator == "Gt" {
                LabelRequirement::Gt(key, bound)
            } else {
                LabelRequirement::Lt(key, bound)
            }
        }
        _ => {
            return Err(NodeSelectorError::UnsupportedOperator {
                path: path.to_string(),
                key: r.key.clone(),
                operator: r.operator.clone(),
                supported: "In, NotIn, Exists, DoesNotExist, Gt, Lt",
            });
        }
    };
    for value in values {
        check_label_value(value).map_err(|reason| invalid_values(format!("value {value:?}: {reason}")))?;
    }
    Ok(requirement)
}

fn parse_field_requirement(
    r: &NodeSelectorRequirement,
    path: &str,
) -> Result<FieldRequirement, NodeSelectorError> {
    if r.key != NODE_NAME_FIELD {
        return Err(NodeSelectorError::UnsupportedField {
            path: path.to_string(),
            key: r.key.clone(),
        });
    }
    let equal = match r.operator.as_str() {
        "In" => true,
        "NotIn" => false,
        _ => {
            return Err(NodeSelectorError::UnsupportedOperator {
                path: path.to_string(),
                key: r.key.clone(),
                operator: r.operator.clone(),
                supported: "In, NotIn",
            });
        }
    };
    let [name] = r.values.as_slice() else {
        return Err(NodeSelectorError::InvalidValues {
            path: path.to_string(),
            key: r.key.clone(),
            operator: r.operator.clone(),
            reason: format!("exactly one value is required, got {:?}", r.values),
        });
    };
    Ok(FieldRequirement {
        name: name.clone(),
        equal,
    })
}

/// `[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?`: the label-name and label-value character rule.
fn is_label_token(s: &str) -> bool {
    let bytes = s.as_bytes();
    match (bytes.first(), bytes.last()) {
        (Some(first), Some(last)) => {
            first.is_ascii_alphanumeric()
                && last.is_ascii_alphanumeric()
                && bytes
                    .iter()
                    .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
        }
        _ => false,
    }
}

/// RFC 1123 subdomain: dot-separated lowercase labels `[a-z0-9]([-a-z0-9]*[a-z0-9])?`.
fn is_dns1123_subdomain(s: &str) -> bool {
    s.len() <= DNS1123_SUBDOMAIN_MAX_LENGTH
        && s.split('.').all(|label| {
            let bytes = label.as_bytes();
            match (bytes.first(), bytes.last()) {
                (Some(first), Some(last)) => {
                    (first.is_ascii_lowercase() || first.is_ascii_digit())
                        && (last.is_ascii_lowercase() || last.is_ascii_digit())
                        && bytes
                            .iter()
                            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || *b == b'-')
                }
                _ => false,
            }
        })
}

/// A label key: `[prefix/]name`, prefix a DNS subdomain, name at most 63 label characters.
fn check_label_key(key: &str) -> Result<(), String> {
    let name = match key.split('/').collect::<Vec<_>>().as_slice() {
        [name] => *name,
        [prefix, name] => {
            if prefix.is_empty() {
                return Err("the prefix before '/' is empty".to_string());
            }
            if !is_dns1123_subdomain(prefix) {
                return Err(format!(
                    "the prefix {prefix:?} is not a DNS subdomain (at most 253 characters of \
                     lowercase alphanumeric labels separated by '.')"
                ));
            }
            *name
        }
        _ => return Err("at most one '/' is allowed".to_string()),
    };
    if name.is_empty() {
        return Err("the name part is empty".to_string());
    }
    if name.len() > LABEL_MAX_LENGTH {
        return Err(format!(
            "the name part is longer than {LABEL_MAX_LENGTH} characters"
        ));
    }
    if !is_label_token(name) {
        return Err(
            "the name part must consist of alphanumeric characters, '-', '_' or '.', \
                    and must start and end with an alphanumeric character"
                .to_string(),
        );
    }
    Ok(())
}

/// A label value: empty, or at most 63 label characters.
fn check_label_value(value: &str) -> Result<(), String> {
    if value.len() > LABEL_MAX_LENGTH {
        return Err(format!("longer than {LABEL_MAX_LENGTH} characters"));
    }
    if !value.is_empty() && !is_label_token(value) {
        return Err(
            "not a valid label value (alphanumeric characters, '-', '_' or '.', \
                    starting and ending with an alphanumeric character)"
                .to_string(),
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::ObjectMeta;

    fn node(name: &str, labels: &[(&str, &str)]) -> Node {
        let labels = labels
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        Node {
            metadata: ObjectMeta {
                name: name.into(),
                labels,
                ..Default::default()
            },
            ..Node::default()
        }
    }

    fn req(key: &str, operator: &str, values: &[&str]) -> NodeSelectorRequirement {
        NodeSelectorRequirement::new(key, operator, values.iter().map(|v| v.to_string()).collect())
    }

    fn term(exprs: Vec<NodeSelectorRequirement>, fields: Vec<NodeSelectorRequirement>) -> NodeSelectorTerm {
        NodeSelectorTerm {
            match_expressions: exprs,
            match_fields: fields,
        }
    }

    fn selector(terms: Vec<NodeSelectorTerm>) -> NodeSelector {
        NodeSelector {
            node_selector_terms: terms,
        }
    }

    /// One term with these label requirements.
    fn exprs(reqs: Vec<NodeSelectorRequirement>) -> NodeSelector {
        selector(vec![term(reqs, vec![])])
    }

    /// One term with these field requirements.
    fn fields(reqs: Vec<NodeSelectorRequirement>) -> NodeSelector {
        selector(vec![term(vec![], reqs)])
    }

    fn invalid_values(path: &str, key: &str, operator: &str, reason: &str) -> NodeSelectorError {
        NodeSelectorError::InvalidValues {
            path: path.to_string(),
            key: key.to_string(),
            operator: operator.to_string(),
            reason: reason.to_string(),
        }
    }

    fn invalid_key(key: &str, reason: &str) -> NodeSelectorError {
        NodeSelectorError::InvalidKey {
            path: EXPR0.to_string(),
            key: key.to_string(),
            reason: reason.to_string(),
        }
    }

    const EXPR0: &str = "nodeSelectorTerms[0].matchExpressions[0]";
    const FIELD0: &str = "nodeSelectorTerms[0].matchFields[0]";
    const NOT_A_LABEL_VALUE: &str = "not a valid label value (alphanumeric characters, '-', '_' or '.', \
                                     starting and ending with an alphanumeric character)";

    #[test]
    fn match_expressions_operators() {
        let n = node(
            "worker-1",
            &[("zone", "a"), ("gpus", "4"), ("tier", "gold"), ("odd", "four")],
        );
        #[rustfmt::skip]
        let cases: Vec<(NodeSelector, bool, &str)> = vec![
            (exprs(vec![req("zone", "In", &["a", "b"])]),    true,  "In: value listed"),
            (exprs(vec![req("zone", "In", &["b"])]),         false, "In: value not listed"),
            (exprs(vec![req("missing", "In", &["a"])]),      false, "In: label absent"),
            (exprs(vec![req("zone", "NotIn", &["b"])]),      true,  "NotIn: value not listed"),
            (exprs(vec![req("zone", "NotIn", &["a"])]),      false, "NotIn: value listed"),
            (exprs(vec![req("missing", "NotIn", &["a"])]),   true,  "NotIn: label absent matches"),
            (exprs(vec![req("zone", "Exists", &[])]),        true,  "Exists: present"),
            (exprs(vec![req("missing", "Exists", &[])]),     false, "Exists: absent"),
            (exprs(vec![req("missing", "DoesNotExist", &[])]), true, "DoesNotExist: absent"),
            (exprs(vec![req("zone", "DoesNotExist", &[])]),  false, "DoesNotExist: present"),
            (exprs(vec![req("gpus", "Gt", &["3"])]),         true,  "Gt: 4 > 3"),
            (exprs(vec![req("gpus", "Gt", &["4"])]),         false, "Gt: strict"),
            (exprs(vec![req("gpus", "Lt", &["5"])]),         true,  "Lt: 4 < 5"),
            (exprs(vec![req("gpus", "Lt", &["4"])]),         false, "Lt: strict"),
            (exprs(vec![req("gpus", "Lt", &["0010"])]),      true,  "Lt: leading zeros, 4 < 10"),
            (exprs(vec![req("missing", "Gt", &["0"])]),      false, "Gt: label absent"),
            (exprs(vec![req("odd", "Gt", &["0"])]),          false, "Gt: non-integer label never matches"),
            (exprs(vec![req("odd", "Lt", &["0"])]),          false, "Lt: non-integer label never matches"),
            (exprs(vec![req("zone", "In", &["a"]), req("tier", "In", &["gold"])]),   true,  "ANDed: all hold"),
            (exprs(vec![req("zone", "In", &["a"]), req("tier", "In", &["silver"])]), false, "ANDed: one fails"),
            (selector(vec![term(vec![req("zone", "In", &["b"])], vec![]),
                           term(vec![req("tier", "In", &["gold"])], vec![])]),   true,  "ORed: second term matches"),
            (selector(vec![term(vec![req("zone", "In", &["b"])], vec![]),
                           term(vec![req("tier", "In", &["silver"])], vec![])]), false, "ORed: no term matches"),
            (selector(vec![]),                                false, "no terms match nothing"),
            (selector(vec![term(vec![], vec![])]),            false, "an empty term matches nothing"),
            (selector(vec![term(vec![], vec![]), term(vec![req("zone", "Exists", &[])], vec![])]),
                                                              true,  "empty term skipped, next term matches"),
        ];
        for (sel, expected, msg) in cases {
            assert_eq!(matches(&sel, &n), Ok(expected), "{msg}");
        }
    }

    #[test]
    fn match_fields_on_node_name() {
        let n = node("worker-1", &[("zone", "a")]);
        #[rustfmt::skip]
        let cases: Vec<(NodeSelector, bool, &str)> = vec![
            (node_name_selector("worker-1"),                             true,  "In: own name"),
            (node_name_selector("worker-2"),                             false, "In: other name"),
            (fields(vec![req("metadata.name", "NotIn", &["worker-2"])]), true,  "NotIn: other name"),
            (fields(vec![req("metadata.name", "NotIn", &["worker-1"])]), false, "NotIn: own name"),
            (selector(vec![term(vec![req("zone", "In", &["a"])], vec![req("metadata.name", "In", &["worker-2"])])]),
                                                                         false, "labels and fields ANDed"),
            (selector(vec![term(vec![req("zone", "In", &["a"])], vec![req("metadata.name", "In", &["worker-1"])])]),
                                                                         true,  "labels and fields both hold"),
        ];
        for (sel, expected, msg) in cases {
            assert_eq!(matches(&sel, &n), Ok(expected), "{msg}");
        }
    }

    #[test]
    fn match_fields_ignored_for_a_node_without_name() {
        // Upstream only evaluates field requirements when the node has fields (a name).
        let unnamed = node("", &[]);
        assert_eq!(matches(&node_name_selector("worker-1"), &unnamed), Ok(true));
    }

    #[test]
    fn node_name_selector_shape() {
        let json = serde_json::to_value(node_name_selector("n1")).unwrap();
        let expected = serde_json::json!({"nodeSelectorTerms": [{"matchFields": [
            {"key": "metadata.name", "operator": "In", "values": ["n1"]}
        ]}]});
        assert_eq!(json, expected);
    }

    #[test]
    fn invalid_selectors_are_errors() {
        let n = node("worker-1", &[("zone", "a")]);
        let unsupported =
            |path: &str, key: &str, operator: &str, supported| NodeSelectorError::UnsupportedOperator {
                path: path.to_string(),
                key: key.to_string(),
                operator: operator.to_string(),
                supported,
            };
        let label_ops = "In, NotIn, Exists, DoesNotExist, Gt, Lt";
        let not_int = |v: &str| format!("value {v:?} is not a base-10 int64 integer");
        let bad_prefix = "the prefix \"Example.com\" is not a DNS subdomain (at most 253 characters of \
                          lowercase alphanumeric labels separated by '.')";
        #[rustfmt::skip]
        let cases: Vec<(NodeSelector, NodeSelectorError, &str)> = vec![
            (exprs(vec![req("zone", "Equals", &["a"])]),
             unsupported(EXPR0, "zone", "Equals", label_ops), "unknown label operator"),
            (exprs(vec![req("zone", "in", &["a"])]),
             unsupported(EXPR0, "zone", "in", label_ops), "operators are case-sensitive"),
            (exprs(vec![req("zone", "In", &[])]),
             invalid_values(EXPR0, "zone", "In", "at least one value is required"), "In without values"),
            (exprs(vec![req("zone", "NotIn", &[])]),
             invalid_values(EXPR0, "zone", "NotIn", "at least one value is required"), "NotIn without values"),
            (exprs(vec![req("zone", "Exists", &["a"])]),
             invalid_values(EXPR0, "zone", "Exists", "values must be empty, got [\"a\"]"), "Exists with values"),
            (exprs(vec![req("zone", "DoesNotExist", &["a"])]),
             invalid_values(EXPR0, "zone", "DoesNotExist", "values must be empty, got [\"a\"]"),
             "DoesNotExist with values"),
            (exprs(vec![req("gpus", "Gt", &["1", "2"])]),
             invalid_values(EXPR0, "gpus", "Gt", "exactly one value is required, got [\"1\", \"2\"]"),
             "Gt with two values"),
            (exprs(vec![req("gpus", "Lt", &[])]),
             invalid_values(EXPR0, "gpus", "Lt", "exactly one value is required, got []"), "Lt without value"),
            (exprs(vec![req("gpus", "Gt", &["four"])]),
             invalid_values(EXPR0, "gpus", "Gt", &not_int("four")), "Gt with a non-integer"),
            (exprs(vec![req("gpus", "Lt", &["1.5"])]),
             invalid_values(EXPR0, "gpus", "Lt", &not_int("1.5")), "Lt with a decimal"),
            (exprs(vec![req("gpus", "Gt", &["9223372036854775808"])]),
             invalid_values(EXPR0, "gpus", "Gt", &not_int("9223372036854775808")), "Gt beyond int64"),
            (exprs(vec![req("gpus", "Gt", &["-1"])]),
             invalid_values(EXPR0, "gpus", "Gt", &format!("value \"-1\": {NOT_A_LABEL_VALUE}")),
             "a negative integer is not a label value"),
            (exprs(vec![req("zone", "In", &["a b"])]),
             invalid_values(EXPR0, "zone", "In", &format!("value \"a b\": {NOT_A_LABEL_VALUE}")),
             "In with an invalid label value"),
            (exprs(vec![req("zone", "In", &[&"a".repeat(64)])]),
             invalid_values(EXPR0, "zone", "In", &format!("value {:?}: longer than 63 characters", "a".repeat(64))),
             "label value too long"),
            (exprs(vec![req("example.com/a/b", "Exists", &[])]),
             invalid_key("example.com/a/b", "at most one '/' is allowed"), "key with two slashes"),
            (exprs(vec![req("", "Exists", &[])]), invalid_key("", "the name part is empty"), "empty key"),
            (exprs(vec![req("/zone", "Exists", &[])]),
             invalid_key("/zone", "the prefix before '/' is empty"), "empty prefix"),
            (exprs(vec![req("Example.com/zone", "Exists", &[])]),
             invalid_key("Example.com/zone", bad_prefix), "uppercase prefix"),
            (exprs(vec![req("-zone", "Exists", &[])]),
             invalid_key("-zone", "the name part must consist of alphanumeric characters, '-', '_' or '.', \
                                   and must start and end with an alphanumeric character"),
             "name starting with a dash"),
            (exprs(vec![req(&"k".repeat(64), "Exists", &[])]),
             invalid_key(&"k".repeat(64), "the name part is longer than 63 characters"), "name too long"),
            (fields(vec![req("metadata.uid", "In", &["x"])]),
             NodeSelectorError::UnsupportedField { path: FIELD0.to_string(), key: "metadata.uid".to_string() },
             "field other than metadata.name"),
            (fields(vec![req("metadata.name", "Exists", &[])]),
             unsupported(FIELD0, "metadata.name", "Exists", "In, NotIn"), "field operator other than In/NotIn"),
            (fields(vec![req("metadata.name", "In", &["a", "b"])]),
             invalid_values(FIELD0, "metadata.name", "In", "exactly one value is required, got [\"a\", \"b\"]"),
             "field with two values"),
            (selector(vec![term(vec![req("zone", "In", &["a"])], vec![]),
                           term(vec![], vec![]),
                           term(vec![req("zone", "Gt", &["x"])], vec![])]),
             invalid_values("nodeSelectorTerms[2].matchExpressions[0]", "zone", "Gt", &not_int("x")),
             "an invalid later term is an error even though the first term matches"),
        ];
        for (sel, expected, msg) in cases {
            assert_eq!(matches(&sel, &n), Err(expected), "{msg}");
        }
    }

    #[test]
    fn valid_keys_and_values() {
        let n = node("w", &[("example.com/My_key.1", "v-1.x_Y"), ("a", "")]);
        #[rustfmt::skip]
        let cases: Vec<(NodeSelector, bool, &str)> = vec![
            (exprs(vec![req("example.com/My_key.1", "In", &["v-1.x_Y"])]), true, "prefixed key, mixed case"),
            (exprs(vec![req("a", "In", &[""])]),                          true,  "empty value is a label value"),
            (exprs(vec![req("a", "NotIn", &["", "b"])]),                  false, "empty value listed"),
            (exprs(vec![req(&"k".repeat(63), "DoesNotExist", &[])]),     true,  "63-character name"),
        ];
        for (sel, expected, msg) in cases {
            assert_eq!(matches(&sel, &n), Ok(expected), "{msg}");
        }
    }

    #[test]
    fn error_messages_name_path_key_and_operator() {
        let err = matches(&exprs(vec![req("gpus", "Gt", &["x"])]), &node("n", &[])).unwrap_err();
        let text = err.to_string();
        assert!(
            text.starts_with("nodeSelectorTerms[0].matchExpressions[0].values"),
            "{text}"
        );
        assert!(text.contains("\"gpus\"") && text.contains("Gt"), "{text}");
    }

    #[test]
    fn parsed_selector_is_reusable_across_nodes() {
        let parsed = ParsedNodeSelector::parse(&exprs(vec![req("zone", "In", &["a"])])).unwrap();
        assert!(parsed.matches(&node("n1", &[("zone", "a")])));
        assert!(!parsed.matches(&node("n2", &[("zone", "b")])));
    }
}
