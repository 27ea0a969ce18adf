//! Entry points of the fuzz targets, one per input surface of the core library. Each takes the raw
//! fuzzer input and panics only when a property is broken (a panic inside the library is a bug).
//!
//! Compiled both by the cargo-fuzz crate in `fuzz/` and, through `#[path]`, by the normal test
//! suite that replays the committed corpora.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::OnceLock;

use arbitrary::{Arbitrary, Result as ArbResult, Unstructured};
use serde_json::Value;
use sharing_affinity_core::audit::{Rule, Violation, audit_with, record_allocations};
use sharing_affinity_core::cel::{CelCache, CelDevice, CelObject};
use sharing_affinity_core::config::Config;
use sharing_affinity_core::object::{Object, decode_object, decode_str, object_key, parse_objects};
use sharing_affinity_core::quantity::Quantity;
use sharing_affinity_core::{EventKind, Plugin};

/// Recorded clusters (with their plugin configuration) the `cycle` and `cel` targets start from.
pub const CLUSTERS: &[(&str, &str)] = &[
    (
        include_str!("../../testdata/racy-placeholder-two-subnets-share-eth1/cluster.json"),
        "",
    ),
    (
        include_str!("../../testdata/rdma-pkey-locked-mlx5-0-next-device/cluster.json"),
        "",
    ),
    (
        include_str!("../../testdata/config-extractors-multi-key-pool-scoped/cluster.json"),
        include_str!("../../testdata/config-extractors-multi-key-pool-scoped/config.json"),
    ),
    (
        include_str!("../../testdata/consumable-memory-validrange-no-affinity/cluster.json"),
        "",
    ),
    (
        include_str!("../../testdata/heterogeneous-pool-nic-vf-vendor/cluster.json"),
        "",
    ),
    (
        include_str!("../../testdata/fpga-two-bitstreams-lock-blocks-free-capacity/cluster.json"),
        "",
    ),
];

/// `objects`: Kubernetes JSON (objects, Lists, streams). Never panics; every decoded object
/// serializes back to JSON text that decodes to the same object (the text a stored object writes
/// back; a `serde_json::Value` in between would read numbers inexactly where serde_json is built
/// without `float_roundtrip`, as here).
pub fn objects(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let Ok(parsed) = parse_objects(text) else { return };
    for (i, object) in parsed.objects.iter().enumerate() {
        let back = decode_str(&object.to_json_string(), i);
        assert!(
            matches!(&back, Ok(Some(o)) if o == object),
            "round trip of {}: {back:?}",
            object.key()
        );
    }
    for e in &parsed.errors {
        assert!(!e.to_string().is_empty());
    }
}

/// `quantity`: quantity text. Never panics; a parsed quantity prints as text that parses to an
/// equal quantity, and checked arithmetic never panics.
pub fn quantity(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let (a, b) = text.split_once('\n').unwrap_or((text, "1"));
    let Ok(q) = a.parse::<Quantity>() else { return };
    let printed = q.to_string();
    let again: Quantity = printed
        .parse()
        .unwrap_or_else(|e| panic!("{a:?} prints as {printed:?}, which does not parse: {e}"));
    assert_eq!(again, q, "{a:?} prints as {printed:?}");
    let _ = (
        q.value(),
        q.milli_value(),
        q.as_i64(),
        q.as_approximate_f64(),
        q.sign(),
    );
    if let Ok(r) = b.parse::<Quantity>() {
        let _ = (q.checked_add(&r), q.checked_sub(&r), q.cmp(&r));
        if let Some(f) = r.as_i64() {
            let _ = q.checked_mul(f);
        }
    }
}

/// `cel_parsers`: the text as a CEL expression, parsed by the core's parser (cel-rust's Pratt
/// parser with the core's source adaptations and macro expansions) and by cel-rust's ANTLR
/// parser, built from cel-go's grammar: the same tree, or both reject.
pub fn cel_parsers(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    if let Err(disagreement) = sharing_affinity_core::cel::compare_parsers(text) {
        panic!("{disagreement}");
    }
}

/// `regex`: `<pattern>\0<text>\0<text>...`: `matches()` (regex-syntax's translation matched by
/// regex-lite) against the regex crate given the same pattern with Go's ASCII classes; both
/// compile it or neither does, and both answer every text alike (the pattern itself and a few
/// fixed texts besides the input's).
pub fn regex(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let mut parts = text.split('\0');
    let pattern = parts.next().unwrap_or_default();
    let fixed = ["", "a", "A1 b_2", "école\nÉCOLE", "\u{212a}ß日本", "x\r\ny"];
    let texts: Vec<&str> = parts.chain(fixed).chain([pattern]).collect();
    if let Err(disagreement) = sharing_affinity_core::cel::compare_regex(pattern, &texts) {
        panic!("{disagreement}");
    }
}

/// `cel`: `<mode byte><expression>\0<JSON>`. Mode even: a device selector, evaluated against the
/// devices of a recorded cluster; odd: an extractor evaluated against the JSON (or a NICConfig).
/// Compile and evaluate with a small cost budget; never panics.
pub fn cel(data: &[u8]) {
    let Some((&mode, rest)) = data.split_first() else {
        return;
    };
    let Ok(text) = std::str::from_utf8(rest) else {
        return;
    };
    let (expr, json) = text.split_once('\0').unwrap_or((text, ""));
    let limit = if mode & 2 == 0 {
        10_000
    } else {
        sharing_affinity_core::cel::DEFAULT_COST_LIMIT
    };
    let cache = CelCache::with_cost_limit(limit);
    if mode & 1 == 0 {
        let Ok(selector) = cache.selector(expr) else {
            return;
        };
        for device in sample_devices(usize::from(mode >> 2)) {
            let _ = selector.matches(&device);
        }
    } else {
        let Ok(extractor) = cache.extractor(expr) else {
            return;
        };
        const NIC_CONFIG: &str = r#"{"apiVersion": "networking.example.com/v1", "kind": "NICConfig",
            "subnetID": "subnet-a", "ibPKey": "0x8001", "mtu": 9000}"#;
        let object = CelObject::from_json(json)
            .or_else(|_| CelObject::from_json(NIC_CONFIG))
            .expect("the fallback object is JSON");
        let _ = extractor.extract(&object);
    }
}

/// Up to three devices of one recorded cluster, prepared for CEL.
fn sample_devices(which: usize) -> Vec<CelDevice> {
    let (json, _) = CLUSTERS[which % CLUSTERS.len()];
    let mut out = Vec::new();
    for object in parse_objects(json).map(|p| p.objects).unwrap_or_default() {
        let Object::ResourceSlice(slice) = object else {
            continue;
        };
        for d in slice.spec.devices.iter().take(3 - out.len().min(3)) {
            let attributes = d
                .attributes
                .iter()
                .filter_map(|(k, a)| a.value().map(|v| (k.to_string(), v)))
                .collect();
            let capacity = d
                .capacity
                .iter()
                .map(|(k, c)| (k.clone(), c.value.clone()))
                .collect();
            out.push(CelDevice::new(
                &slice.spec.driver,
                &attributes,
                &capacity,
                d.allow_multiple_allocations == Some(true),
            ));
        }
    }
    out
}

/// A JSON leaf a mutation writes.
#[derive(Debug)]
pub enum Leaf {
    /// A string.
    Str(String),
    /// A number.
    Int(i64),
    /// A boolean.
    Bool(bool),
    /// `null`.
    Null,
    /// A quantity-looking string.
    Quantity(u16, u8),
}

/// One step of the `cycle` target.
#[derive(Debug)]
pub enum Op {
    /// Add/Update an object of the cluster, optionally with one leaf replaced.
    Apply {
        /// Update instead of Add.
        update: bool,
        /// Which object.
        object: u8,
        /// Which leaf (in a depth-first walk) and its new value.
        mutate: Option<(u16, Leaf)>,
    },
    /// Delete an object.
    Delete {
        /// Which object.
        object: u8,
    },
    /// PreFilter a pod (by index among the pods; past the end: a missing pod).
    Prefilter(u8),
    /// Filter a node (past the end: a missing node).
    Filter(u8),
    /// Score a node.
    Score(u8),
    /// Reserve on a node.
    Reserve(u8),
    /// Unreserve on a node.
    Unreserve(u8),
    /// Bind on a node.
    Bind(u8),
    /// A whole cycle for a pod: prefilter, filter every node, score, reserve and bind the best.
    Cycle(u8),
}

// Written by hand rather than derived: the derive feature of `arbitrary` would change the feature
// set of a crate wasmtime's build shares, and rebuild wasmtime for the normal test suite.
impl<'a> Arbitrary<'a> for Leaf {
    fn arbitrary(u: &mut Unstructured<'a>) -> ArbResult<Self> {
        Ok(match u.int_in_range(0..=4u8)? {
            0 => Leaf::Str(String::arbitrary(u)?),
            1 => Leaf::Int(i64::arbitrary(u)?),
            2 => Leaf::Bool(bool::arbitrary(u)?),
            3 => Leaf::Null,
            _ => Leaf::Quantity(u16::arbitrary(u)?, u8::arbitrary(u)?),
        })
    }
}

impl<'a> Arbitrary<'a> for Op {
    fn arbitrary(u: &mut Unstructured<'a>) -> ArbResult<Self> {
        Ok(match u.int_in_range(0..=8u8)? {
            0 => Op::Apply {
                update: bool::arbitrary(u)?,
                object: u8::arbitrary(u)?,
                mutate: Option::<(u16, Leaf)>::arbitrary(u)?,
            },
            1 => Op::Delete {
                object: u8::arbitrary(u)?,
            },
            2 => Op::Prefilter(u8::arbitrary(u)?),
            3 => Op::Filter(u8::arbitrary(u)?),
            4 => Op::Score(u8::arbitrary(u)?),
            5 => Op::Reserve(u8::arbitrary(u)?),
            6 => Op::Unreserve(u8::arbitrary(u)?),
            7 => Op::Bind(u8::arbitrary(u)?),
            _ => Op::Cycle(u8::arbitrary(u)?),
        })
    }
}

/// `cycle`: an arbitrary interleaving of object events and cycle calls over a recorded cluster.
/// Never panics; while no slice, class or claim was changed by hand, no Bind introduces an audit
/// violation naming the claims it bound.
pub fn cycle(data: &[u8]) {
    let mut u = Unstructured::new(data);
    let Ok(which) = u.int_in_range(0..=CLUSTERS.len() - 1) else {
        return;
    };
    let Ok(ops) = Vec::<Op>::arbitrary(&mut u) else {
        return;
    };
    run_cycle(which, &ops);
}

/// A recorded cluster of [`CLUSTERS`], prepared once per process: what every `cycle` input
/// starts from, so that an input pays only for its own operations.
struct Base {
    /// The `List`'s items.
    items: Vec<Value>,
    /// Each item as JSON text (what Delete events carry).
    texts: Vec<String>,
    /// Each item decoded, as an Add event would decode it (`None`: refused or not used).
    decoded: Vec<Option<Object>>,
    /// The plugin configuration, as JSON text and parsed.
    config_json: &'static str,
    config: Config,
    /// The decoded items in order: the auditor's view of the starting state.
    mirror: Vec<Object>,
    /// The audit of the starting state.
    audit: BTreeSet<Violation>,
}

/// The prepared clusters (`None` for one whose text is not a `List`).
fn bases() -> &'static [Option<Base>] {
    static BASES: OnceLock<Vec<Option<Base>>> = OnceLock::new();
    BASES.get_or_init(|| {
        CLUSTERS
            .iter()
            .map(|(json, config_json)| {
                let items = match serde_json::from_str::<Value>(json) {
                    Ok(Value::Object(mut m)) => match m.remove("items") {
                        Some(Value::Array(items)) => items,
                        _ => return None,
                    },
                    _ => return None,
                };
                let texts: Vec<String> = items.iter().map(Value::to_string).collect();
                let decoded: Vec<Option<Object>> = items
                    .iter()
                    .map(|item| decode_object(item.clone(), 0).ok().flatten())
                    .collect();
                let config = Config::from_json(config_json).expect("recorded configuration");
                let mirror: Vec<Object> = decoded.iter().flatten().cloned().collect();
                let audit = audit_with(&mirror, &config, audit_cel()).into_iter().collect();
                Some(Base {
                    items,
                    texts,
                    decoded,
                    config_json,
                    config,
                    mirror,
                    audit,
                })
            })
            .collect()
    })
}

/// One CEL cache for every audit of the process (the auditor's compiled expressions are pure).
fn audit_cel() -> &'static CelCache {
    static CEL: OnceLock<CelCache> = OnceLock::new();
    CEL.get_or_init(CelCache::new)
}

/// Runs `ops` against cluster `which`; see [`cycle`]. Returns the number of audited Binds.
pub fn run_cycle(which: usize, ops: &[Op]) -> usize {
    let Some(Some(b)) = bases().get(which) else {
        return 0;
    };
    let mut plugin = Plugin::new(b.config_json).expect("recorded configuration");
    let config = &b.config;
    let cel = audit_cel();
    let base = &b.items;
    if base.is_empty() {
        return 0;
    }
    // The starting state, as Add events of the decoded items (what `apply` would decode).
    for o in b.decoded.iter().flatten() {
        plugin.upsert(o.clone());
    }
    let mut binds = 0;
    let mut mirror: Vec<Object> = b.mirror.clone();
    let mut pristine = true;
    let mut before: BTreeSet<Violation> = b.audit.clone();
    let mut current_pod: Option<String> = None;
    for op in ops.iter().take(64) {
        let pods: Vec<String> = mirror
            .iter()
            .filter(|o| matches!(o, Object::Pod(p) if p.spec.node_name.is_empty()))
            .map(Object::key)
            .collect();
        let nodes = plugin.node_names();
        let node = |i: &u8| {
            nodes
                .get(usize::from(*i))
                .cloned()
                .unwrap_or_else(|| format!("no-node-{i}"))
        };
        let mut bound = None;
        match op {
            Op::Apply {
                update,
                object,
                mutate,
            } => {
                let index = usize::from(*object) % base.len();
                let kind = if *update {
                    EventKind::Update
                } else {
                    EventKind::Add
                };
                if let Some((at, leaf)) = mutate {
                    let mut item = base[index].clone();
                    set_leaf(&mut item, usize::from(*at), leaf);
                    if !matches!(item["kind"].as_str(), Some("Pod" | "Node")) {
                        pristine = false;
                    }
                    if plugin.apply(kind, &item.to_string()).is_ok()
                        && let Ok(Some(o)) = decode_object(item, 0)
                    {
                        upsert(&mut mirror, o);
                    }
                } else if let Some(o) = &b.decoded[index] {
                    // Unchanged: Add and Update both upsert the object `apply` would decode.
                    plugin.upsert(o.clone());
                    upsert(&mut mirror, o.clone());
                }
            }
            Op::Delete { object } => {
                let index = usize::from(*object) % base.len();
                let item = &base[index];
                if plugin.apply(EventKind::Delete, &b.texts[index]).is_ok() {
                    if !matches!(item["kind"].as_str(), Some("Pod" | "Node")) {
                        pristine = false;
                    }
                    if let Some(o) = &b.decoded[index] {
                        let key = (o.kind(), o.key());
                        mirror.retain(|m| (m.kind(), m.key()) != key);
                    }
                }
            }
            Op::Prefilter(i) => {
                let pod = pods
                    .get(usize::from(*i))
                    .cloned()
                    .unwrap_or_else(|| "ns/missing".into());
                let _ = plugin.prefilter(&pod);
                current_pod = Some(pod);
            }
            Op::Filter(i) => {
                let _ = plugin.filter(&node(i));
            }
            Op::Score(i) => {
                let _ = plugin.score(&node(i));
            }
            Op::Reserve(i) => {
                let _ = plugin.reserve(&node(i));
            }
            Op::Unreserve(i) => {
                let pod = current_pod.clone().unwrap_or_default();
                let _ = plugin.unreserve(&pod, &node(i));
            }
            Op::Bind(i) => {
                if let Some(pod) = &current_pod
                    && let Ok(a) = plugin.bind(pod, &node(i))
                {
                    bound = Some((pod.clone(), node(i), a));
                }
            }
            Op::Cycle(i) => {
                let Some(pod) = pods.get(usize::from(*i)).cloned() else {
                    continue;
                };
                current_pod = Some(pod.clone());
                if !plugin.prefilter(&pod).is_success() {
                    continue;
                }
                let mut best: Option<(u32, String)> = None;
                for n in &nodes {
                    if plugin.filter(n).is_success()
                        && let Ok(s) = plugin.score(n)
                        && best.as_ref().is_none_or(|(b, _)| s > *b)
                    {
                        best = Some((s, n.clone()));
                    }
                }
                let Some((_, n)) = best else { continue };
                if plugin.reserve(&n).is_err() {
                    let _ = plugin.unreserve(&pod, &n);
                    continue;
                }
                match plugin.bind(&pod, &n) {
                    Ok(a) => bound = Some((pod, n, a)),
                    Err(_) => {
                        let _ = plugin.unreserve(&pod, &n);
                    }
                }
            }
        }
        let Some((pod, node_name, allocations)) = bound else {
            continue;
        };
        // Bind recorded the pod on the node (as the API server would after the binding).
        for o in &mut mirror {
            if let Object::Pod(p) = o
                && object_key(&p.metadata.namespace, &p.metadata.name) == pod
            {
                p.spec.node_name = node_name.clone();
            }
        }
        record_allocations(&mut mirror, &pod, &allocations);
        binds += 1;
        let after: BTreeSet<Violation> = audit_with(&mirror, config, cel).into_iter().collect();
        if pristine {
            let claims: BTreeSet<&str> = allocations.iter().map(|a| a.claim.as_str()).collect();
            let devices_before: BTreeSet<&str> = before.iter().map(|v| v.device.as_str()).collect();
            for v in after.difference(&before) {
                let names_bound = v.claims.iter().any(|c| claims.contains(c.as_str()));
                assert!(
                    !names_bound
                        || devices_before.contains(v.device.as_str())
                        || v.rule == Rule::UnknownReference,
                    "bind of {pod} on {node_name} broke a rule: {v}\nallocations: {allocations:#?}"
                );
            }
        }
        before = after;
    }
    binds
}

fn upsert(mirror: &mut Vec<Object>, o: Object) {
    let key = (o.kind(), o.key());
    match mirror.iter_mut().find(|m| (m.kind(), m.key()) == key) {
        Some(slot) => *slot = o,
        None => mirror.push(o),
    }
}

/// Replaces the `at`-th leaf (modulo the number of leaves, depth first) of `v`.
pub fn set_leaf(v: &mut Value, at: usize, leaf: &Leaf) {
    let count = count_leaves(v);
    if count == 0 {
        return;
    }
    let mut n = at % count;
    replace_nth(v, &mut n, leaf);
}

fn count_leaves(v: &Value) -> usize {
    match v {
        Value::Object(m) => m.values().map(count_leaves).sum(),
        Value::Array(a) => a.iter().map(count_leaves).sum(),
        _ => 1,
    }
}

fn replace_nth(v: &mut Value, n: &mut usize, leaf: &Leaf) -> bool {
    match v {
        Value::Object(m) => m.values_mut().any(|c| replace_nth(c, n, leaf)),
        Value::Array(a) => a.iter_mut().any(|c| replace_nth(c, n, leaf)),
        _ if *n == 0 => {
            *v = match leaf {
                Leaf::Str(s) => Value::String(s.clone()),
                Leaf::Int(i) => Value::from(*i),
                Leaf::Bool(b) => Value::Bool(*b),
                Leaf::Null => Value::Null,
                Leaf::Quantity(n, suffix) => {
                    let units = ["", "m", "k", "Ki", "Mi", "Gi", "M", "G", "e3", "E"];
                    Value::String(format!("{n}{}", units[usize::from(*suffix) % units.len()]))
                }
            };
            true
        }
        _ => {
            *n -= 1;
            false
        }
    }
}

/// Every CEL expression in the recorded clusters and configurations: `(is_selector, text)`, for
/// seeding the `cel` corpus.
pub fn recorded_expressions() -> BTreeMap<String, bool> {
    let mut out = BTreeMap::new();
    fn walk(v: &Value, parent: &str, out: &mut BTreeMap<String, bool>) {
        match v {
            Value::Object(m) => {
                for (k, c) in m {
                    if k == "expression"
                        && let Some(s) = c.as_str()
                    {
                        out.insert(s.to_string(), true);
                    } else if parent == "cel"
                        && let Some(s) = c.as_str()
                    {
                        out.insert(s.to_string(), false);
                    } else {
                        walk(c, k, out);
                    }
                }
            }
            Value::Array(a) => a.iter().for_each(|c| walk(c, parent, out)),
            _ => {}
        }
    }
    for (cluster, config) in CLUSTERS {
        for text in [cluster, config] {
            if let Ok(v) = serde_json::from_str::<Value>(text) {
                walk(&v, "", &mut out);
            }
        }
    }
    out
}
