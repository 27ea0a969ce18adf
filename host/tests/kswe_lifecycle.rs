//! KSWE instance lifecycle and host behaviour over whole cycles, with the `.wat` guests in
//! `tests/wat/`: the instance pool (scheduling instance reused, handed to binding at Permit/PreBind,
//! freed at PostBind, leaked without `postbind`), `proc_exit`, NormalizeScore's by-index copy, WASI
//! clocks and random, and the `sharing-affinity.dra/v1` extension.

use std::path::Path;

use serde_json::Value;
use sharing_affinity_core::model::Pod;
use sharing_affinity_core::object::{Kind, Object, parse_objects};
use sharing_affinity_host::kswe::cycle::{Outcome, run_cycle};
use sharing_affinity_host::kswe::store::Change;
use sharing_affinity_host::kswe::{KsweConfig, KsweHost, PreparedPod};

fn wat(name: &str) -> Vec<u8> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/wat").join(name);
    wat::parse_file(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn load(name: &str, config: KsweConfig) -> KsweHost {
    KsweHost::new(&wat(name), config).unwrap_or_else(|e| panic!("{name}: {e:#}"))
}

fn pod(name: &str) -> PreparedPod {
    let json = format!(r#"{{"metadata":{{"name":"{name}","namespace":"ns","uid":"uid-{name}"}}}}"#);
    PreparedPod::new(&serde_json::from_str::<Pod>(&json).unwrap()).unwrap()
}

/// Adds nodes and pods (and any other JSON objects) to the host's store.
fn add(host: &KsweHost, json: &str) {
    let parsed = parse_objects(json).unwrap();
    assert!(parsed.errors.is_empty(), "{:?}", parsed.errors);
    let mut cluster = host.cluster();
    for o in parsed.objects {
        cluster.store.apply(Change::Add, o).unwrap();
    }
}

fn node_json(name: &str) -> String {
    format!(r#"{{"apiVersion":"v1","kind":"Node","metadata":{{"name":"{name}"}}}}"#)
}

fn pod_json(name: &str) -> String {
    format!(
        r#"{{"apiVersion":"v1","kind":"Pod","metadata":{{"name":"{name}","namespace":"ns","uid":"uid-{name}"}}}}"#
    )
}

#[test]
fn the_scheduling_instance_is_reused_and_handed_to_binding_at_permit() {
    let mut host = load("lifecycle.wat", KsweConfig::default());
    assert_eq!(
        (host.instances_created(), host.pool_sizes()),
        (1, (0, 0, 1)),
        "one instance created eagerly"
    );
    let a = pod("a");
    assert_eq!(
        host.prefilter(&a).unwrap().1.code,
        1,
        "the free instance becomes the scheduling one"
    );
    assert_eq!(host.scheduled_pod_uid(), "uid-a");
    assert_eq!(host.filter(&a, "n").unwrap().code, 2);
    assert_eq!(
        host.score(&a, "n").unwrap().0,
        3,
        "same instance: cycle state lives in the guest"
    );
    assert_eq!(host.permit(&a, "n").unwrap().0.code, 4);
    assert_eq!(
        host.pool_sizes(),
        (0, 1, 0),
        "moved to binding for pod a at the end of Permit"
    );
    let b = pod("b");
    assert_eq!(
        host.prefilter(&b).unwrap().1.code,
        1,
        "pod b needs a new instance"
    );
    assert_eq!(host.instances_created(), 2);
    assert_eq!(
        host.prebind(&a, "n").unwrap().0.code,
        5,
        "pod a's binding cycle keeps its instance"
    );
    assert_eq!(host.bind(&a, "n").unwrap().code, 6);
    assert_eq!(host.postbind(&a, "n").unwrap(), None);
    assert_eq!(
        host.pool_sizes(),
        (1, 0, 1),
        "PostBind returned pod a's instance to the free pool"
    );
    assert_eq!(
        host.filter(&b, "n").unwrap().code,
        2,
        "pod b stays on its scheduling instance"
    );
    assert_eq!(host.permit(&b, "n").unwrap().0.code, 3);
    let c = pod("c");
    assert_eq!(
        host.prefilter(&c).unwrap().1.code,
        8,
        "pod c reuses the freed instance (7 calls before)"
    );
    assert_eq!(host.instances_created(), 2);
}

#[test]
fn binding_without_a_scheduled_instance_panics_the_go_host() {
    let mut host = load("lifecycle.wat", KsweConfig::default());
    let err = host.prebind(&pod("a"), "n").unwrap_err().to_string();
    assert_eq!(err, "unexpected podUID");
    host.create_binding_guest("uid-a").unwrap();
    assert_eq!(
        host.prebind(&pod("a"), "n").unwrap().0.code,
        1,
        "upstream tests' CreateGuestInBindingGuestPool"
    );
}

#[test]
fn without_postbind_every_bound_pod_leaks_its_instance() {
    let mut host = load("bind_without_postbind.wat", KsweConfig::default());
    add(
        &host,
        &format!("{}\n{}\n{}", node_json("n1"), pod_json("a"), pod_json("b")),
    );
    for (i, p) in ["ns/a", "ns/b"].into_iter().enumerate() {
        let report = run_cycle(&mut host, p).unwrap();
        assert_eq!(
            report.outcome,
            Outcome::Bound {
                node: "n1".into(),
                by_plugin: true
            },
            "{p}"
        );
        assert_eq!(host.pool_sizes(), (0, i + 1, 0), "binding instances pile up");
    }
    assert_eq!(
        host.instances_created(),
        2,
        "the second cycle needed a new instance"
    );
    let pod = host.cluster().store.pod("ns/a").cloned().unwrap();
    assert_eq!(pod.spec.node_name, "n1", "the cycle bound the pod in the store");
}

#[test]
fn proc_exit_closes_the_instance() {
    let mut host = load(
        "exit.wat",
        KsweConfig {
            args: vec!["x".into()],
            ..KsweConfig::default()
        },
    );
    for _ in 0..2 {
        let status = host.filter(&pod("p"), "n").unwrap();
        assert_eq!(
            (status.code, status.reason.as_str()),
            (1, "wasm: filter error: module closed with exit_code(0)")
        );
    }
    let err = KsweHost::new(
        &wat("exit.wat"),
        KsweConfig {
            args: vec!["x".into(), "y".into()],
            ..KsweConfig::default()
        },
    )
    .err()
    .map(|e| e.to_string());
    assert_eq!(
        err.as_deref(),
        Some("failed to create a guest pool: wasm: instantiate error: module closed with exit_code(1)")
    );
    let mut host = load("exit.wat", KsweConfig::default());
    for _ in 0..2 {
        let status = host.filter(&pod("p"), "n").unwrap();
        assert_eq!(
            status.reason,
            "wasm: filter error: module closed with exit_code(7)"
        );
    }
}

#[test]
fn normalize_score_copies_the_rebuilt_list_by_index() {
    let mut host = load("normalize_reorder.wat", KsweConfig::default());
    let p = pod("p");
    let mut scores = vec![("b".to_string(), 10), ("a".to_string(), 20)];
    let status = host.normalize_score(&p, &mut scores).unwrap();
    assert_eq!(
        status.reason, r#"{"a":20,"b":10}"#,
        "nodeScoreList is a JSON map with sorted keys"
    );
    assert_eq!(
        scores,
        [("a".to_string(), 2), ("b".to_string(), 1)],
        "the guest said b=1, a=2; the rebuilt list replaces the input by index (upstream bug)"
    );
    host.set_global("mode_global", 1);
    let err = host.normalize_score(&p, &mut scores).unwrap_err().to_string();
    assert_eq!(
        err,
        "size mismatch: scores has 2 elements, but updatedScores has 1 elements"
    );
    host.set_global("mode_global", 2);
    let mut kept = vec![("b".to_string(), 10), ("a".to_string(), 20)];
    host.normalize_score(&p, &mut kept).unwrap();
    assert_eq!(
        kept,
        [("b".to_string(), 10), ("a".to_string(), 20)],
        "null keeps the input list"
    );
    host.set_global("mode_global", 3);
    let err = host.normalize_score(&p, &mut kept).unwrap_err().to_string();
    assert!(
        err.starts_with("size mismatch: scores has 2 elements, but updatedScores has 0"),
        "{err}"
    );
}

#[test]
fn wasi_clocks_and_random_are_deterministic_and_args_have_no_argv0() {
    let config = KsweConfig {
        args: vec!["test".into(), "filter".into()],
        ..KsweConfig::default()
    };
    let mut host = load("wasi_clock_random.wat", config.clone());
    let p = pod("p");
    assert_eq!(
        host.prefilter(&p).unwrap().1.code,
        1,
        "+1 ms per wall-clock reading"
    );
    assert_eq!(
        host.filter(&p, "n").unwrap().code,
        1_640_995_200,
        "the fake epoch is 2022-01-01T00:00:00Z"
    );
    assert_eq!(host.score(&p, "n").unwrap().0, 0, "monotonic starts at 0");
    assert_eq!(host.score(&p, "n").unwrap().0, 1);
    let first = host.reserve(&p, "n").unwrap().0.code;
    let mut other = load("wasi_clock_random.wat", config);
    assert_eq!(
        other.reserve(&p, "n").unwrap().0.code,
        first,
        "random_get is deterministic per instance"
    );
    assert_ne!(host.reserve(&p, "n").unwrap().0.code, first, "but not constant");
    let status = host.prebind(&p, "n").unwrap().0;
    assert_eq!((status.code, status.reason.as_str()), (2, "test|filter|"));
}

#[test]
fn dra_extension_feed_writes_and_error_codes() {
    let mut host = load("dra_extension.wat", KsweConfig::default());
    add(
        &host,
        &format!(
            "{}\n{}\n{}",
            node_json("n1"),
            pod_json("p"),
            r#"{"apiVersion":"resource.k8s.io/v1","kind":"ResourceClaim","metadata":{"name":"c","namespace":"ns"}}"#
        ),
    );
    let p = PreparedPod::new(&host.cluster().store.pod("ns/p").cloned().unwrap()).unwrap();
    let (_, status) = host.prefilter(&p).unwrap();
    let doc: Value = serde_json::from_str(&status.reason).unwrap();
    assert_eq!(status.code, 0);
    assert_eq!(doc["resync"], true);
    let kinds: Vec<&str> = doc["events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["object"]["kind"].as_str().unwrap())
        .collect();
    assert_eq!(
        kinds,
        ["Node", "Pod", "ResourceClaim"],
        "all objects, in revision order"
    );
    host.set_global("probe_global", 1);
    assert_eq!(host.filter(&p, "n1").unwrap().code, 2, "invalid allocation JSON");
    assert_eq!(host.score(&p, "n1").unwrap().0, 1, "unknown claim");
    host.set_global("probe_global", 0);
    let (status, pending) = host.reserve(&p, "n1").unwrap();
    assert_eq!((status.code, pending.len()), (0, 1));
    assert_eq!(
        host.cluster().store.pending().keys().collect::<Vec<_>>(),
        ["ns/c"]
    );
    let report = run_cycle(&mut host, "ns/p").unwrap();
    assert_eq!(
        report.outcome,
        Outcome::Bound {
            node: "n1".into(),
            by_plugin: false
        },
        "bind returned Skip"
    );
    assert_eq!(
        report.allocations.len(),
        1,
        "the second, conflicting write was refused"
    );
    let cluster = host.cluster();
    assert!(
        cluster.store.pending().is_empty(),
        "the written allocation replaced the pending one"
    );
    match cluster.store.get(Kind::ResourceClaim, "ns/c") {
        Some(Object::ResourceClaim(c)) => {
            assert_eq!(
                c.status.allocation.as_ref().unwrap().devices.results[0].device,
                "x"
            );
            assert_eq!(c.status.reserved_for[0].uid, "uid-p");
        }
        other => panic!("unexpected {other:?}"),
    }
    assert_eq!(cluster.store.pod("ns/p").unwrap().spec.node_name, "n1");
}

#[test]
fn unreserve_drops_pending_allocations() {
    let mut host = load("dra_extension.wat", KsweConfig::default());
    add(
        &host,
        &format!(
            "{}\n{}",
            pod_json("p"),
            r#"{"apiVersion":"resource.k8s.io/v1","kind":"ResourceClaim","metadata":{"name":"c","namespace":"ns"}}"#
        ),
    );
    let p = PreparedPod::new(&host.cluster().store.pod("ns/p").cloned().unwrap()).unwrap();
    host.prefilter(&p).unwrap();
    host.reserve(&p, "n1").unwrap();
    assert_eq!(host.cluster().store.pending().len(), 1);
    assert_eq!(host.unreserve(&p, "n1").unwrap(), None);
    assert!(host.cluster().store.pending().is_empty());
}

#[test]
fn kswe_engine_replaces_a_trapped_instance_and_restores_the_cycle() {
    use sharing_affinity_core::Code;
    use sharing_affinity_core::contract::Scheduler;
    use sharing_affinity_host::engine::PluginRuntime;
    use sharing_affinity_host::kswe::KsweEngine;
    let mut engine = KsweEngine::new(&wat("engine_restore.wat"), "").unwrap();
    let objects = parse_objects(&format!("{}\n{}", node_json("n"), pod_json("p")))
        .unwrap()
        .objects;
    assert!(engine.load(&objects).unwrap().is_empty());
    assert!(engine.prefilter("ns/p").is_success());
    assert!(engine.filter("n").is_success());
    assert_eq!(engine.traps(), 0);
    let status = engine.filter("boom");
    assert_eq!(engine.traps(), 1, "the trap is counted");
    assert_eq!(status.code, Code::Error);
    assert!(
        status
            .reason
            .starts_with("wasm: filter error: wasm error: unreachable"),
        "{}",
        status.reason
    );
    assert!(
        engine.filter("n").is_success(),
        "PreFilter was re-run on the fresh instance"
    );
    assert_eq!(
        engine.host().instances_created(),
        2,
        "the trapped instance was replaced"
    );
    let status = engine.prefilter("ns/missing");
    assert_eq!(
        (status.code, status.reason.as_str()),
        (Code::Error, "Pod ns/missing: not found")
    );
}
