//! Our KSWE guest under kube-scheduler's real concurrency, through the KSWE host with upstream's
//! instance pool: pod N's binding cycle runs while pod N+1's scheduling cycle is in progress, the
//! handover to binding happens at Permit (or, for a guest without `permit`, at PreBind, after the
//! next pod's PreFilter used the instance), Unreserve runs on the scheduling instance, and a
//! trapped instance is reused.
//!
//! The interleavings below fail against a guest without a `permit` export, with one reservation
//! per instance dropped by the next PreFilter, or with a `RefCell` borrow left behind by a trap:
//! "bind called without a successful reserve", and every call after a trap trapping again.

use std::sync::OnceLock;

use sharing_affinity_core::Code;
use sharing_affinity_core::contract::Scheduler;
use sharing_affinity_core::object::{Object, parse_objects};
use sharing_affinity_host::artifact;
use sharing_affinity_host::engine::PluginRuntime;
use sharing_affinity_host::kswe::abi::code;
use sharing_affinity_host::kswe::store::Change;
use sharing_affinity_host::kswe::{KsweConfig, KsweEngine, KsweHost, KsweModule, PreparedPod, TrapPolicy};
use sharing_affinity_host::replay::{Binding, Cluster, replay_with, schedule};

/// Two nodes with one GPU each; two pods, each with a claim for one GPU.
const CLUSTER: &str = r#"{"apiVersion": "v1", "kind": "List", "items": [
  {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "node-a"}},
  {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "node-b"}},
  {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": "gpu.example.com"}, "spec": {}},
  {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"name": "node-a-gpu"},
   "spec": {"driver": "gpu.example.com", "nodeName": "node-a",
            "pool": {"name": "node-a", "generation": 1, "resourceSliceCount": 1},
            "devices": [{"name": "gpu-0"}]}},
  {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"name": "node-b-gpu"},
   "spec": {"driver": "gpu.example.com", "nodeName": "node-b",
            "pool": {"name": "node-b", "generation": 1, "resourceSliceCount": 1},
            "devices": [{"name": "gpu-0"}]}},
  {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim", "metadata": {"name": "claim-a", "namespace": "default"},
   "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu.example.com"}}]}}},
  {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim", "metadata": {"name": "claim-b", "namespace": "default"},
   "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu.example.com"}}]}}},
  {"apiVersion": "v1", "kind": "Pod",
   "metadata": {"name": "pod-a", "namespace": "default", "uid": "uid-a", "creationTimestamp": "2025-01-01T00:00:00Z"},
   "spec": {"resourceClaims": [{"name": "gpu", "resourceClaimName": "claim-a"}]}},
  {"apiVersion": "v1", "kind": "Pod",
   "metadata": {"name": "pod-b", "namespace": "default", "uid": "uid-b", "creationTimestamp": "2025-01-01T00:00:01Z"},
   "spec": {"resourceClaims": [{"name": "gpu", "resourceClaimName": "claim-b"}]}}
]}"#;

fn module() -> &'static KsweModule {
    static MODULE: OnceLock<KsweModule> = OnceLock::new();
    MODULE.get_or_init(|| {
        let path =
            artifact::default_kswe_module().unwrap_or_else(|e| panic!("building the KSWE guest: {e:#}"));
        let wasm = artifact::read_kswe_module(&path).unwrap_or_else(|e| panic!("{e:#}"));
        KsweModule::new(&wasm).unwrap_or_else(|e| panic!("{e:#}"))
    })
}

fn objects() -> Vec<Object> {
    let parsed = parse_objects(CLUSTER).unwrap();
    assert!(parsed.errors.is_empty(), "{:?}", parsed.errors);
    parsed.objects
}

/// A host with the DRA extension and the cluster loaded, reusing trapped instances (upstream).
fn host() -> KsweHost {
    let host = module().host(KsweConfig::default()).unwrap();
    {
        let mut cluster = host.cluster();
        for o in objects() {
            cluster.store.apply(Change::Add, o).unwrap();
        }
    }
    host
}

fn pod(host: &KsweHost, key: &str) -> PreparedPod {
    PreparedPod::new(host.cluster().store.pod(key).unwrap()).unwrap()
}

#[test]
fn permit_is_exported_and_hands_the_scheduling_instance_to_binding() {
    let mut host = host();
    assert!(host.mask().permit, "the guest exports permit");
    let a = pod(&host, "default/pod-a");
    assert!(host.prefilter(&a).unwrap().1.is_success());
    assert!(host.filter(&a, "node-a").unwrap().is_success());
    assert!(host.reserve(&a, "node-a").unwrap().0.is_success());
    let (status, timeout) = host.permit(&a, "node-a").unwrap();
    assert_eq!((status.code, timeout), (code::SUCCESS, 0), "{status}");
    assert_eq!(
        host.pool_sizes(),
        (0, 1, 0),
        "the instance went to pod-a's binding cycle"
    );
    // The next pod's PreFilter gets a new instance; pod-a's binding cycle keeps its own.
    let b = pod(&host, "default/pod-b");
    assert!(host.prefilter(&b).unwrap().1.is_success());
    assert_eq!(host.instances_created(), 2);
    let (status, written) = host.prebind(&a, "node-a").unwrap();
    assert!(status.is_success(), "{status}");
    assert_eq!(written.len(), 1);
    assert!(host.postbind(&a, "node-a").unwrap().is_none());
    assert_eq!(
        host.pool_sizes(),
        (1, 0, 1),
        "pod-a's instance back in the free pool"
    );
}

/// Upstream's pool when the handover happens at PreBind (a guest without `permit`, or any hook
/// order where the next pod reaches the scheduling instance first): pod-b's PreFilter and an
/// Unreserve for pod-b run on the instance that holds pod-a's reservation.
#[test]
fn the_next_pods_prefilter_and_unreserve_keep_an_in_flight_reservation() {
    let mut host = host();
    let (a, b) = (pod(&host, "default/pod-a"), pod(&host, "default/pod-b"));
    assert!(host.prefilter(&a).unwrap().1.is_success());
    assert!(host.filter(&a, "node-a").unwrap().is_success());
    assert!(host.reserve(&a, "node-a").unwrap().0.is_success());

    // pod-b's scheduling cycle starts on the same instance before pod-a's binding cycle.
    assert!(host.prefilter(&b).unwrap().1.is_success());
    let full = host.filter(&b, "node-a").unwrap();
    assert_eq!(full.code, code::UNSCHEDULABLE, "pod-a's GPU is in flight: {full}");
    assert!(host.filter(&b, "node-b").unwrap().is_success());
    // An Unreserve for pod-b (it holds nothing) must not touch pod-a's reservation.
    assert_eq!(host.unreserve(&b, "node-b").unwrap(), None);

    // pod-a's binding cycle: no binding instance yet, so upstream takes the scheduling one.
    let (status, written) = host.prebind(&a, "node-a").unwrap();
    assert!(
        status.is_success(),
        "pod-a's reservation survived pod-b's cycle: {status}"
    );
    assert_eq!(written.len(), 1, "claim-a written");
    assert_eq!(written[0].claim, "default/claim-a");

    // pod-b's next hook reaches a new instance, which has no cycle for it: an Error naming the
    // pod, never another pod's state.
    let (_, status) = host.score(&b, "node-b").unwrap();
    assert_eq!(status.code, code::ERROR, "{status}");
    assert!(
        status.reason.contains("pod default/pod-b") && status.reason.contains("no scheduling cycle"),
        "{status}"
    );
    assert_eq!(host.instances_created(), 2);
}

#[test]
fn a_hook_for_another_pod_than_the_cycle_is_an_error_naming_it() {
    let mut host = host();
    let (a, b) = (pod(&host, "default/pod-a"), pod(&host, "default/pod-b"));
    assert!(host.prefilter(&a).unwrap().1.is_success());
    for (hook, status) in [
        ("Filter", host.filter(&b, "node-a").unwrap()),
        ("Reserve", host.reserve(&b, "node-a").unwrap().0),
    ] {
        assert_eq!(status.code, code::ERROR, "{hook}: {status}");
        assert!(
            status.reason.contains("pod default/pod-b") && status.reason.contains("default/pod-a"),
            "{hook}: {status}"
        );
    }
    assert!(
        host.filter(&a, "node-a").unwrap().is_success(),
        "pod-a's cycle untouched"
    );
}

/// The replay in both binding modes: the same decisions, and in async mode the pool behaves as
/// upstream's (a second instance for pod-b's scheduling cycle while pod-a binds).
#[test]
fn async_binding_decides_as_sync_binding() {
    let cluster = Cluster::parse(CLUSTER).unwrap();
    let mut results = Vec::new();
    for binding in [Binding::Sync, Binding::Async] {
        let mut engine = KsweEngine::from_module(module(), "").unwrap();
        let replay = replay_with(&mut engine, &cluster, binding, &mut || {}, &mut |_| {}).unwrap();
        assert_eq!(engine.traps(), 0, "{binding:?}");
        assert!(engine.take_logs().is_empty(), "{binding:?}");
        let placed: Vec<_> = replay
            .pods
            .iter()
            .map(|p| {
                (
                    p.pod.clone(),
                    p.node.clone(),
                    p.error.clone(),
                    p.allocations.clone(),
                )
            })
            .collect();
        let created = engine.host().instances_created();
        results.push((placed, created));
    }
    assert_eq!(results[0].0, results[1].0, "same decisions");
    assert_eq!(
        results[0].0.iter().map(|p| p.1.as_deref()).collect::<Vec<_>>(),
        [Some("node-a"), Some("node-b")]
    );
    assert_eq!(
        (results[0].1, results[1].1),
        (1, 2),
        "instances created (sync, async)"
    );
}

/// Upstream keeps calling a trapped instance. The guest rebuilds its state on the next call: the
/// interrupted cycle answers Error naming the pod (the scheduler retries the pod), and the next
/// cycles decide as before, on the same instance.
#[test]
fn a_trapped_instance_that_is_reused_recovers() {
    let cluster = Cluster::parse(CLUSTER).unwrap();
    let config = KsweConfig {
        trap_policy: TrapPolicy::Reuse,
        ..KsweConfig::default()
    };
    let mut engine = KsweEngine::with_config(module(), config).unwrap();
    assert!(engine.load(&cluster.objects).unwrap().is_empty());
    assert!(engine.prefilter("default/pod-a").is_success());
    engine.host().inject_trap("currentNodeName");
    let trapped = engine.filter("node-a");
    assert_eq!(trapped.code, Code::Error);
    assert!(
        trapped.reason.contains("wasm: filter error") && trapped.reason.contains("injected fault"),
        "{trapped}"
    );
    let after = engine.filter("node-b");
    assert_eq!(after.code, Code::Error, "{after}");
    assert!(
        after.reason.contains("pod default/pod-a") && after.reason.contains("no scheduling cycle"),
        "the state was rebuilt without the interrupted cycle: {after}"
    );
    assert_eq!(engine.traps(), 1, "only the injected trap");

    let mut samples = Default::default();
    let a = schedule(&mut engine, "default/pod-a", &cluster.nodes, &mut samples);
    let b = schedule(&mut engine, "default/pod-b", &cluster.nodes, &mut samples);
    assert_eq!(
        (a.node.as_deref(), b.node.as_deref()),
        (Some("node-a"), Some("node-b")),
        "{a:?}\n{b:?}"
    );
    assert_eq!(a.allocations.len(), 1);
    assert_eq!(engine.traps(), 1);
    assert_eq!(
        engine.host().instances_created(),
        1,
        "the trapped instance was reused"
    );
}
