//! Our plugin as a KSWE guest, end to end: the test builds `sharing-affinity-guest` for
//! `wasm32-unknown-unknown` with `--features scheduler-abi` in `target/kswe-guest` (a no-op when up
//! to date), loads it in the KSWE host with the DRA extension, replays recorded scenarios from `testdata/`, and checks
//! that every decision and allocation equals the native core's, and that the host's store ends
//! with the allocations written through `sharing-affinity.dra/v1`.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use sharing_affinity_core::Code;
use sharing_affinity_core::object::{Kind, Object, parse_objects};
use sharing_affinity_core::{ClaimAllocation, Plugin};
use sharing_affinity_host::artifact;
use sharing_affinity_host::engine::PluginRuntime;
use sharing_affinity_host::kswe::abi::Export;
use sharing_affinity_host::kswe::cycle::{Outcome, run_cycle};
use sharing_affinity_host::kswe::store::Change;
use sharing_affinity_host::kswe::{KsweConfig, KsweEngine, KsweModule};

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf()
}

/// Builds the guest once per test binary (in its own target directory, see
/// [`artifact::default_kswe_module`]) and returns its bytes.
fn guest_wasm() -> &'static [u8] {
    static WASM: OnceLock<Vec<u8>> = OnceLock::new();
    WASM.get_or_init(|| {
        let path =
            artifact::default_kswe_module().unwrap_or_else(|e| panic!("building the KSWE guest: {e:#}"));
        artifact::read_kswe_module(&path).unwrap_or_else(|e| panic!("{e:#}"))
    })
}

/// One pod's decision: the node (or the PreFilter/Filter failure) and the allocations bound.
#[derive(Debug, PartialEq)]
struct Decision {
    pod: String,
    node: Result<String, Vec<(String, Code)>>,
    allocations: Vec<ClaimAllocation>,
}

fn objects(name: &str, json: &str) -> Vec<Object> {
    let parsed = parse_objects(json).unwrap();
    assert!(parsed.errors.is_empty(), "{name}: {:?}", parsed.errors);
    parsed.objects
}

fn scenario(name: &str) -> (Vec<Object>, String) {
    let dir = workspace().join("testdata").join(name);
    let json = std::fs::read_to_string(dir.join("cluster.json")).unwrap();
    let config = std::fs::read_to_string(dir.join("config.json")).unwrap_or_default();
    (objects(name, &json), config)
}

/// Two nodes with two plain devices each (no CEL anywhere): five pods each generate a one-device
/// claim from a template, and pod `q` needs both devices of one node through an existing claim.
const SMALL: &str = r#"{"apiVersion":"v1","kind":"List","items":[
 {"apiVersion":"v1","kind":"Node","metadata":{"name":"node-a"}},
 {"apiVersion":"v1","kind":"Node","metadata":{"name":"node-b"}},
 {"apiVersion":"resource.k8s.io/v1","kind":"DeviceClass","metadata":{"name":"dev.example.com"},"spec":{}},
 {"apiVersion":"resource.k8s.io/v1","kind":"ResourceSlice","metadata":{"name":"node-a-slice"},"spec":{"driver":"dev.example.com","nodeName":"node-a","pool":{"name":"node-a","generation":1,"resourceSliceCount":1},"devices":[{"name":"dev-0"},{"name":"dev-1"}]}},
 {"apiVersion":"resource.k8s.io/v1","kind":"ResourceSlice","metadata":{"name":"node-b-slice"},"spec":{"driver":"dev.example.com","nodeName":"node-b","pool":{"name":"node-b","generation":1,"resourceSliceCount":1},"devices":[{"name":"dev-0"},{"name":"dev-1"}]}},
 {"apiVersion":"resource.k8s.io/v1","kind":"ResourceClaimTemplate","metadata":{"name":"one-dev","namespace":"ns"},"spec":{"spec":{"devices":{"requests":[{"name":"r","exactly":{"deviceClassName":"dev.example.com"}}]}}}},
 {"apiVersion":"resource.k8s.io/v1","kind":"ResourceClaim","metadata":{"name":"shared","namespace":"ns","uid":"c-shared"},"spec":{"devices":{"requests":[{"name":"r","exactly":{"deviceClassName":"dev.example.com","count":2,"allocationMode":"ExactCount"}}]}}},
 {"apiVersion":"v1","kind":"Pod","metadata":{"name":"p0","namespace":"ns","uid":"uid-p0","creationTimestamp":"2025-01-01T00:00:00Z"},"spec":{"resourceClaims":[{"name":"dev","resourceClaimTemplateName":"one-dev"}]}},
 {"apiVersion":"v1","kind":"Pod","metadata":{"name":"p1","namespace":"ns","uid":"uid-p1","creationTimestamp":"2025-01-01T00:00:01Z"},"spec":{"resourceClaims":[{"name":"dev","resourceClaimTemplateName":"one-dev"}]}},
 {"apiVersion":"v1","kind":"Pod","metadata":{"name":"p2","namespace":"ns","uid":"uid-p2","creationTimestamp":"2025-01-01T00:00:02Z"},"spec":{"resourceClaims":[{"name":"dev","resourceClaimTemplateName":"one-dev"}]}},
 {"apiVersion":"v1","kind":"Pod","metadata":{"name":"q","namespace":"ns","uid":"uid-q","creationTimestamp":"2025-01-01T00:00:00Z"},"spec":{"resourceClaims":[{"name":"both","resourceClaimName":"shared"}]}}
]}"#;

fn pending_pods(objects: &[Object]) -> Vec<String> {
    let mut pods: Vec<(String, String)> = objects
        .iter()
        .filter_map(|o| match o {
            Object::Pod(p) if p.spec.node_name.is_empty() => {
                Some((p.metadata.creation_timestamp.clone(), o.key()))
            }
            _ => None,
        })
        .collect();
    pods.sort();
    pods.into_iter().map(|(_, k)| k).collect()
}

/// The replay loop: every pending pod through PreFilter, Filter on every node, Score on the
/// feasible ones (highest wins, ties by name), Reserve and Bind.
fn drive(engine: &mut dyn PluginRuntime, objects: &[Object]) -> Vec<Decision> {
    let rejected = engine.load(objects).unwrap();
    assert!(rejected.is_empty(), "{}: {rejected:?}", engine.name());
    let nodes: Vec<String> = objects
        .iter()
        .filter(|o| o.kind() == Kind::Node)
        .map(Object::key)
        .collect();
    let mut decisions = Vec::new();
    for pod in pending_pods(objects) {
        let status = engine.prefilter(&pod);
        if !status.is_success() {
            decisions.push(Decision {
                pod,
                node: Err(vec![(String::new(), status.code)]),
                allocations: vec![],
            });
            continue;
        }
        let mut feasible = Vec::new();
        let mut failures = Vec::new();
        for node in &nodes {
            let status = engine.filter(node);
            assert_ne!(
                status.code,
                Code::Error,
                "{} filter {pod} on {node}: {status}",
                engine.name()
            );
            if status.is_success() {
                feasible.push(node.clone())
            } else {
                failures.push((node.clone(), status.code))
            }
        }
        let mut best: Option<(u32, String)> = None;
        for node in &feasible {
            let score = engine
                .score(node)
                .unwrap_or_else(|s| panic!("{} score {pod} on {node}: {s}", engine.name()));
            if best.as_ref().is_none_or(|(b, _)| score > *b) {
                best = Some((score, node.clone()));
            }
        }
        let Some((_, node)) = best else {
            decisions.push(Decision {
                pod,
                node: Err(failures),
                allocations: vec![],
            });
            continue;
        };
        let reserved = engine
            .reserve(&node)
            .unwrap_or_else(|s| panic!("{} reserve {pod}: {s}", engine.name()));
        let bound = engine
            .bind(&pod, &node)
            .unwrap_or_else(|s| panic!("{} bind {pod}: {s}", engine.name()));
        assert_eq!(
            reserved,
            bound,
            "{}: Reserve and Bind report the same allocations",
            engine.name()
        );
        decisions.push(Decision {
            pod,
            node: Ok(node),
            allocations: bound,
        });
    }
    decisions
}

fn compare(name: &str) -> (Vec<Decision>, KsweEngine) {
    let (objects, config) = scenario(name);
    compare_objects(name, &objects, &config)
}

fn compare_objects(name: &str, objects: &[Object], config: &str) -> (Vec<Decision>, KsweEngine) {
    let objects = objects.to_vec();
    let native = drive(&mut Plugin::new(config).unwrap(), &objects);
    let mut kswe = KsweEngine::new(guest_wasm(), config).unwrap();
    let decisions = drive(&mut kswe, &objects);
    assert_eq!(
        decisions, native,
        "{name}: the KSWE guest decides as the native core"
    );
    let logs = kswe.host().take_logs();
    assert!(logs.is_empty(), "{name}: guest logged {logs:?}");
    (decisions, kswe)
}

#[test]
fn guest_exports_the_documented_hooks_only() {
    let module = KsweModule::new(guest_wasm()).unwrap();
    let host = module.host(KsweConfig::default()).unwrap();
    let mask = host.mask();
    assert!(
        mask.filter && mask.score && mask.reserve && mask.bind && mask.permit,
        "{mask:?}"
    );
    use sharing_affinity_host::kswe::load::bits;
    assert!(mask.has(bits::PRE_FILTER) && mask.has(bits::PRE_BIND) && mask.has(bits::POST_BIND));
    assert!(
        !mask.has(bits::SCORE_EXTENSIONS),
        "no normalizescore: Score normalises over PreScore's nodes"
    );
    assert!(mask.has(bits::PRE_SCORE), "prescore gives the feasible nodes");
    assert!(mask.has(bits::POST_FILTER), "postfilter deallocates");
    assert!(
        !mask.has(bits::ENQUEUE),
        "no enqueue: KSWE's event table cannot name the resource.k8s.io resources"
    );
    let module = wasmtime::Module::new(&wasmtime::Engine::default(), guest_wasm()).unwrap();
    let mut imports: Vec<String> = module
        .imports()
        .map(|i| format!("{}.{}", i.module(), i.name()))
        .collect();
    imports.sort();
    assert_eq!(
        imports,
        [
            "k8s.io/klog.logs",
            "k8s.io/klog.severity",
            "k8s.io/scheduler.currentNodeName",
            "k8s.io/scheduler.currentPod",
            "k8s.io/scheduler.filteredNodeList",
            "k8s.io/scheduler.get_config",
            "k8s.io/scheduler.result.status_reason",
            "sharing-affinity.dra/v1.allocation",
            "sharing-affinity.dra/v1.changes",
            "sharing-affinity.dra/v1.deallocation",
            "sharing-affinity.dra/v1.now",
            "sharing-affinity.dra/v1.pending_allocation",
            "sharing-affinity.dra/v1.wait",
        ],
        "no WASI, nothing else"
    );
    let mut exports: Vec<&str> = module
        .exports()
        .map(|e| e.name())
        .filter(|n| !n.starts_with("__"))
        .collect();
    exports.sort();
    let mut expected = [
        "memory",
        "_start",
        "prefilter",
        "filter",
        "postfilter",
        "prescore",
        "score",
        "reserve",
        "unreserve",
        "permit",
        "prebind",
    ]
    .to_vec();
    expected.extend([Export::Bind.name(), Export::PostBind.name()]);
    expected.sort();
    assert_eq!(exports, expected);
}

/// Each pod with the node it was bound to, if any.
fn placed(decisions: &[Decision]) -> Vec<(&str, Option<&str>)> {
    decisions
        .iter()
        .map(|d| (d.pod.as_str(), d.node.as_ref().ok().map(String::as_str)))
        .collect()
}

#[test]
fn small_scenario_matches_native_and_the_store_holds_the_result() {
    let objects = objects("small", SMALL);
    let (decisions, mut kswe) = compare_objects("small", &objects, "");
    let placed = placed(&decisions);
    assert_eq!(
        placed,
        [
            ("ns/p0", Some("node-a")),
            ("ns/q", Some("node-b")),
            ("ns/p1", Some("node-a")),
            ("ns/p2", None)
        ],
        "p0 first by name; q needs a whole node; p1 takes node-a's last device; p2 fits nowhere"
    );
    let cluster = kswe.host().cluster();
    match cluster.store.get(Kind::ResourceClaim, "ns/p0-dev") {
        Some(Object::ResourceClaim(c)) => {
            assert_eq!(
                c.metadata.owner_references[0].uid, "uid-p0",
                "generated from the template by the host"
            );
            assert_eq!(
                c.status.allocation.as_ref().unwrap().devices.results[0].pool,
                "node-a"
            );
        }
        other => panic!("generated claim missing: {other:?}"),
    }
    let p0 = cluster.store.pod("ns/p0").unwrap();
    assert_eq!(p0.spec.node_name, "node-a");
    assert_eq!(
        p0.status.resource_claim_statuses[0]
            .resource_claim_name
            .as_deref(),
        Some("p0-dev")
    );
    assert!(
        cluster.store.get(Kind::ResourceClaim, "ns/p2-dev").is_none(),
        "no claim for the unplaced pod"
    );
}

#[test]
fn packing_scenario_matches_native_and_writes_allocations_back() {
    let (decisions, mut kswe) = compare("multi-node-packing-compatible-lock");
    let placed = placed(&decisions);
    assert_eq!(
        placed,
        [
            ("svc/svc-x-1", Some("node-b")),
            ("svc/svc-z-0", Some("node-a")),
            ("svc/svc-z-1", Some("node-a")),
            ("svc/svc-y-1", Some("node-a")),
            ("svc/svc-w-0", Some("node-b")),
            ("svc/svc-v-0", None),
        ],
        "the README's expected decisions"
    );
    let cluster = kswe.host().cluster();
    for d in decisions.iter().filter(|d| d.node.is_ok()) {
        let pod = cluster.store.pod(&d.pod).unwrap();
        assert_eq!(
            Ok(&pod.spec.node_name),
            d.node.as_ref(),
            "{} bound in the store",
            d.pod
        );
        for a in &d.allocations {
            match cluster.store.get(Kind::ResourceClaim, &a.claim) {
                Some(Object::ResourceClaim(c)) => {
                    assert_eq!(c.status.allocation.as_ref(), Some(&a.allocation), "{}", a.claim);
                    assert!(
                        c.status.reserved_for.iter().any(|r| r.uid == pod.metadata.uid),
                        "{}",
                        a.claim
                    );
                }
                other => panic!("{}: claim not in the store: {other:?}", a.claim),
            }
        }
    }
    assert!(
        cluster.store.pending().is_empty(),
        "every pending allocation was written or dropped"
    );
}

#[test]
fn more_scenarios_match_native() {
    for name in [
        "rdma-pkey-locked-mlx5-0-next-device",
        "config-extractors-nic-subnet-16-slots",
        "pod-fits-nowhere-lock-conflict-and-full",
    ] {
        compare(name);
    }
}

#[test]
fn a_fresh_host_cycle_driver_binds_through_the_default_binder() {
    let (objects, config) = (objects("small", SMALL), String::new());
    let module = KsweModule::new(guest_wasm()).unwrap();
    let mut host = module
        .host(KsweConfig {
            guest_config: config,
            ..KsweConfig::default()
        })
        .unwrap();
    {
        let mut cluster = host.cluster();
        for o in &objects {
            cluster.store.apply(Change::Add, o.clone()).unwrap();
        }
    }
    let report = run_cycle(&mut host, "ns/q").unwrap();
    assert_eq!(
        report.outcome,
        Outcome::Bound {
            node: "node-a".into(),
            by_plugin: false
        }
    );
    assert_eq!(report.pending.len(), 1);
    assert_eq!(report.allocations.len(), 1);
    assert_eq!(report.filter.len(), 2);
    assert_eq!(
        (host.instances_created(), host.pool_sizes()),
        (1, (0, 0, 1)),
        "PostBind freed the instance"
    );
}

#[test]
fn a_bad_guest_config_fails_plugin_creation() {
    let module = KsweModule::new(guest_wasm()).unwrap();
    let config = KsweConfig {
        guest_config: "{not json".into(),
        ..KsweConfig::default()
    };
    let err = module
        .host(config)
        .err()
        .map(|e| e.to_string())
        .unwrap_or_default();
    // The guest's own reason first (it logs it before trapping), then the trap.
    assert!(
        err.starts_with("failed to create a guest pool: the guest logged \"error: sharing-affinity: cannot start error=guestConfig: configuration:")
            && err.contains("and then failed: wasm: instantiate error: module[1] function[_start] failed: wasm error: unreachable"),
        "{err}"
    );
}
