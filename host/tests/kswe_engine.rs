//! [`KsweEngine`] with KSWE guests other than ours (`.wat` written here): the replay treats the
//! guest's extension points as kube-scheduler does. Unexported hooks are not called, a PreFilter
//! `Skip` skips Filter, PreFilter node names restrict the nodes, and PreScore/Score/NormalizeScore
//! run as a batch over the nodes that passed Filter.
//!
//! Every guest learns the node from `currentNodeName` and looks at its sixth byte: the `a`, `b`
//! or `c` of `node-a`, `node-b`, `node-c`.

use sharing_affinity_core::Code;
use sharing_affinity_core::contract::Scheduler;
use sharing_affinity_host::engine::PluginRuntime;
use sharing_affinity_host::kswe::KsweEngine;
use sharing_affinity_host::replay::{Cluster, PodOutcome, replay};

/// Three nodes and one pending pod without claims.
const CLUSTER: &str = r#"{"kind":"List","items":[
 {"apiVersion":"v1","kind":"Node","metadata":{"name":"node-a"}},
 {"apiVersion":"v1","kind":"Node","metadata":{"name":"node-b"}},
 {"apiVersion":"v1","kind":"Node","metadata":{"name":"node-c"}},
 {"apiVersion":"v1","kind":"Pod","metadata":{"name":"p","namespace":"ns","uid":"uid-p"}}
]}"#;

/// The imports every guest shares (more imports go after these, before any function).
const IMPORTS: &str = r#"
  (import "k8s.io/scheduler" "currentNodeName" (func $node (param i32 i32) (result i32)))
  (import "k8s.io/scheduler" "result.status_reason" (func $reason (param i32 i32)))"#;

/// The memory and `$letter`, the sixth byte of the current node name.
const COMMON: &str = r#"
  (memory (export "memory") 1)
  (func $letter (result i32)
    (drop (call $node (i32.const 1024) (i32.const 64)))
    (i32.load8_u (i32.const 1029)))"#;

fn engine(body: &str) -> KsweEngine {
    engine_with("", body)
}

fn engine_with(imports: &str, body: &str) -> KsweEngine {
    let text = format!("(module {IMPORTS} {imports} {COMMON} {body})");
    let wasm = wat::parse_str(&text).unwrap_or_else(|e| panic!("{e}\n{text}"));
    KsweEngine::new(&wasm, "").unwrap_or_else(|e| panic!("{e:#}\n{text}"))
}

fn run(engine: &mut KsweEngine) -> PodOutcome {
    let cluster = Cluster::parse(CLUSTER).unwrap();
    let result = replay(engine, &cluster, &mut || {}).unwrap();
    assert!(result.rejected.is_empty(), "{:?}", result.rejected);
    assert_eq!(engine.traps(), 0, "no guest call failed");
    result.pods.into_iter().next().unwrap()
}

fn codes(outcome: &PodOutcome) -> Vec<Code> {
    outcome.nodes.iter().map(|n| n.status.code).collect()
}

fn scores(outcome: &PodOutcome) -> Vec<Option<u32>> {
    outcome.nodes.iter().map(|n| n.score).collect()
}

#[test]
fn a_filter_only_guest_gets_neutral_scores_no_reserve_and_the_default_binder() {
    // Filter passes node-b only; no prefilter, score, reserve or bind exports.
    let mut engine = engine(
        r#"(func (export "filter") (result i32)
             (if (result i32) (i32.eq (call $letter) (i32.const 98))
               (then (i32.const 0)) (else (i32.const 2))))"#,
    );
    let outcome = run(&mut engine);
    assert_eq!(
        codes(&outcome),
        [Code::Unschedulable, Code::Success, Code::Unschedulable]
    );
    assert_eq!(scores(&outcome), [None, Some(0), None], "Score not exported: 0");
    assert_eq!(outcome.node.as_deref(), Some("node-b"), "{outcome:?}");
    assert!(
        outcome.allocations.is_empty() && outcome.error.is_none(),
        "{outcome:?}"
    );
    let cluster = engine.host().cluster();
    assert_eq!(
        cluster.store.pod("ns/p").unwrap().spec.node_name,
        "node-b",
        "default binder"
    );
}

#[test]
fn a_score_only_guest_sees_every_node_pass_filter() {
    // Score: node-c 90, the others 10; no filter export.
    let mut engine = engine(
        r#"(func (export "score") (result i64)
             (if (result i64) (i32.eq (call $letter) (i32.const 99))
               (then (i64.shl (i64.const 90) (i64.const 32)))
               (else (i64.shl (i64.const 10) (i64.const 32)))))"#,
    );
    let outcome = run(&mut engine);
    assert_eq!(codes(&outcome), [Code::Success; 3], "Filter not exported");
    assert_eq!(scores(&outcome), [Some(10), Some(10), Some(90)]);
    assert_eq!(outcome.node.as_deref(), Some("node-c"));
}

/// Filter rejects every node; PreFilter returns the code in global `prefilter_code`.
const SKIP_GUEST: &str = r#"
  (global $code (export "prefilter_code") (mut i32) (i32.const 0))
  (func (export "prefilter") (result i32) (global.get $code))
  (func (export "filter") (result i32) (i32.const 2))"#;

#[test]
fn prefilter_skip_skips_filter_for_the_cycle() {
    let mut engine = engine(SKIP_GUEST);
    let outcome = run(&mut engine);
    assert_eq!(
        codes(&outcome),
        [Code::Unschedulable; 3],
        "PreFilter Success: Filter runs"
    );

    let mut engine = self::engine(SKIP_GUEST);
    assert!(engine.host().set_global("prefilter_code", 5));
    let outcome = run(&mut engine);
    assert_eq!(codes(&outcome), [Code::Success; 3], "PreFilter Skip: no Filter");
    assert_eq!(outcome.node.as_deref(), Some("node-a"));
}

#[test]
fn prefilter_node_names_restrict_the_nodes() {
    // PreFilter returns node-c and node-b (each NUL-terminated: upstream drops an unterminated
    // last entry); Filter passes everything it is asked about.
    let mut engine = engine_with(
        r#"(import "k8s.io/scheduler" "result.node_names" (func $names (param i32 i32)))"#,
        r#"(data (i32.const 0) "node-c\00node-b\00")
           (func (export "prefilter") (result i32)
             (call $names (i32.const 0) (i32.const 14)) (i32.const 0))
           (func (export "filter") (result i32) (i32.const 0))"#,
    );
    let outcome = run(&mut engine);
    assert_eq!(
        codes(&outcome),
        [Code::UnschedulableAndUnresolvable, Code::Success, Code::Success]
    );
    assert!(
        outcome.nodes[0].status.reason.contains("PreFilter"),
        "{}",
        outcome.nodes[0].status
    );
    assert_eq!(outcome.node.as_deref(), Some("node-b"));
}

/// The batch guest: filter rejects node-a. PreScore, by global `mode`: 0 fails with the filteredNodeList JSON as
/// its reason, 1 skips, 2 succeeds. Score: node-c 70, others 10. NormalizeScore sets
/// `{"node-b":100,"node-c":0}`.
const BATCH_IMPORTS: &str = r#"
  (import "k8s.io/scheduler" "filteredNodeList" (func $filtered (param i32 i32) (result i32)))
  (import "k8s.io/scheduler" "result.normalized_score_list" (func $set_list (param i32 i32)))"#;

/// See [`BATCH_IMPORTS`].
const BATCH_GUEST: &str = r#"
  (global $mode (export "mode") (mut i32) (i32.const 0))
  (data (i32.const 0) "{\"node-b\":100,\"node-c\":0}")
  (func (export "filter") (result i32)
    (if (result i32) (i32.eq (call $letter) (i32.const 97)) (then (i32.const 2)) (else (i32.const 0))))
  (func (export "prescore") (result i32)
    (if (i32.eqz (global.get $mode))
      (then
        (call $reason (i32.const 2048) (call $filtered (i32.const 2048) (i32.const 1024)))
        (return (i32.const 2))))
    (if (result i32) (i32.eq (global.get $mode) (i32.const 1)) (then (i32.const 5)) (else (i32.const 0))))
  (func (export "score") (result i64)
    (if (result i64) (i32.eq (call $letter) (i32.const 99))
      (then (i64.shl (i64.const 70) (i64.const 32)))
      (else (i64.shl (i64.const 10) (i64.const 32)))))
  (func (export "normalizescore") (result i32)
    (call $set_list (i32.const 0) (i32.const 25))
    (i32.const 0))"#;

fn batch_engine(mode: i32) -> KsweEngine {
    let mut engine = engine_with(BATCH_IMPORTS, BATCH_GUEST);
    assert!(engine.host().set_global("mode", mode));
    engine
}

#[test]
fn prescore_gets_the_nodes_that_passed_filter_and_its_failure_fails_the_cycle() {
    let outcome = run(&mut batch_engine(0));
    assert_eq!(outcome.node, None);
    let error = outcome.error.as_deref().unwrap_or_default();
    assert!(
        error.contains(r#"["node-b","node-c"]"#) && error.contains("Unschedulable"),
        "{error}"
    );
}

#[test]
fn prescore_skip_gives_every_node_zero() {
    let outcome = run(&mut batch_engine(1));
    assert_eq!(scores(&outcome), [None, Some(0), Some(0)], "Score not called");
    assert_eq!(outcome.node.as_deref(), Some("node-b"), "tie: the smaller name");
}

#[test]
fn normalize_score_rewrites_the_scores() {
    let outcome = run(&mut batch_engine(2));
    assert_eq!(
        scores(&outcome),
        [None, Some(100), Some(0)],
        "70 and 10 before NormalizeScore"
    );
    assert_eq!(outcome.node.as_deref(), Some("node-b"));
}

#[test]
fn batch_score_of_a_node_that_failed_filter_is_an_error() {
    let mut engine = batch_engine(2);
    let cluster = Cluster::parse(CLUSTER).unwrap();
    engine.load(&cluster.objects).unwrap();
    assert!(engine.prefilter("ns/p").is_success());
    for node in &cluster.nodes {
        engine.filter(node);
    }
    let err = engine.score("node-a").expect_err("node-a failed Filter");
    assert_eq!(err.code, Code::Error);
    assert!(err.reason.contains("did not pass Filter"), "{err}");
    assert_eq!(engine.score("node-b"), Ok(100));
}
