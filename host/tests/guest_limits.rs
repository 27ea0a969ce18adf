//! Resource exhaustion in both wasm hosts (docs/RELIABILITY.md, "Resource exhaustion"): hostile
//! guests of our own (`tests/wat/hostile_component.wat`, `tests/wat/hostile_kswe.wat`) loop
//! forever, grow memory, recurse without end, set huge status reasons and hand the host garbage
//! pointers. Each such call must end with an `Error` status that says why, and the next call must
//! work (the instance replaced or kept as it should be). Then the real plugin, component and KSWE,
//! replays a recorded cycle with hostile calls (a call interrupted by the time limit) spread over
//! it, and must make exactly the decisions of the native engine: no state is lost.
//!
//! No assertion on wall time: a test that hangs is the failure.

use std::path::Path;
use std::sync::OnceLock;
use std::time::Duration;

use sharing_affinity_core::contract::Scheduler;
use sharing_affinity_core::object::Object;
use sharing_affinity_core::{ClaimAllocation, Code, Status};
use sharing_affinity_host::artifact;
use sharing_affinity_host::component::{ComponentEngine, ComponentPlugin};
use sharing_affinity_host::engine::PluginRuntime;
use sharing_affinity_host::kswe::{KsweConfig, KsweEngine, KsweHost, KsweModule, PreparedPod, TrapPolicy};
use sharing_affinity_host::limits::{Bytes, Limits};
use sharing_affinity_host::native;
use sharing_affinity_host::replay::{Cluster, replay};
use sharing_affinity_host::report;

fn wat(name: &str) -> Vec<u8> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/wat").join(name);
    wat::parse_file(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// Limits small enough for quick tests: 200 ms per call, 16 MiB of memory.
fn small_limits() -> Limits {
    Limits {
        time_per_call: Duration::from_millis(200),
        memory_bytes: 16 << 20,
        ..Limits::default()
    }
}

// --- The component host -------------------------------------------------------------------------

/// The hostile core module with the `sharing-affinity:plugin` world of `wit/` embedded, encoded as
/// a component.
fn hostile_component() -> &'static [u8] {
    static BYTES: OnceLock<Vec<u8>> = OnceLock::new();
    BYTES.get_or_init(|| {
        let mut module = wat("hostile_component.wat");
        let mut resolve = wit_parser::Resolve::default();
        let (package, _) = resolve
            .push_path(artifact::workspace_root().join("wit"))
            .expect("wit/ parses");
        let world = resolve
            .select_world(&[package], Some("plugin"))
            .expect("wit/ has the plugin world");
        wit_component::embed_component_metadata(
            &mut module,
            &resolve,
            world,
            wit_component::StringEncoding::UTF8,
            false,
        )
        .expect("embedding the world");
        artifact::encode_component(&module).expect("the hostile module encodes as a component")
    })
}

fn component_engine(limits: Limits) -> ComponentEngine {
    ComponentPlugin::from_bytes_with_limits(hostile_component(), &limits)
        .and_then(|p| p.instantiate("", limits))
        .unwrap_or_else(|e| panic!("{e:#}"))
}

/// Runs `filter(node)` on a fresh hostile component after a successful prefilter; the status must
/// be an `Error` containing every `expected` text, and a following filter must succeed.
fn component_case(limits: Limits, node: &str, expected: &[&str], replaced: bool) {
    let mut engine = component_engine(limits);
    assert!(engine.prefilter("ns/pod").is_success());
    let status = engine.filter(node);
    assert_eq!(status.code, Code::Error, "{node}: {status}");
    for text in expected {
        assert!(status.reason.contains(text), "{node}: {text:?} not in {status}");
    }
    assert_eq!(
        engine.replacements(),
        usize::from(replaced),
        "{node}: instance replaced"
    );
    let next = engine.filter("node-ok");
    assert!(next.is_success(), "{node}: the next call: {next}");
    assert_eq!(
        engine.replacements(),
        usize::from(replaced),
        "{node}: no second replacement"
    );
}

#[test]
fn component_infinite_loop_ends_at_the_time_limit() {
    component_case(
        small_limits(),
        "loop",
        &[
            "plugin trapped in filter",
            "guest exceeded its time limit of 200 ms",
        ],
        true,
    );
}

#[test]
fn component_memory_growth_ends_at_the_memory_limit() {
    component_case(
        small_limits(),
        "grow",
        &[
            "plugin trapped in filter",
            "guest exceeded its memory limit of 16 MiB: growing a linear memory from",
        ],
        true,
    );
}

#[test]
fn component_deep_recursion_ends_at_the_stack_limit() {
    for stack in [64 << 10, 512 << 10] {
        let limits = Limits {
            max_wasm_stack: stack,
            ..small_limits()
        };
        let expected = format!("guest exceeded its wasm stack limit of {} KiB", stack >> 10);
        component_case(limits, "recurse", &["plugin trapped in filter", &expected], true);
    }
}

#[test]
fn component_huge_status_reasons_are_error_statuses() {
    // 1 GiB: beyond the guest's memory; lifting it traps.
    component_case(
        small_limits(),
        "huge",
        &["plugin trapped in filter", "out of bounds"],
        true,
    );
    // 64 KiB inside memory: over the reason limit; the instance is fine and kept.
    component_case(
        small_limits(),
        "big",
        &["guest exceeded its status reason limit of 16 KiB: a reason of 65536 bytes in filter"],
        false,
    );
    let limits = Limits {
        max_status_reason_bytes: 1 << 20,
        ..small_limits()
    };
    let mut engine = component_engine(limits);
    assert!(engine.prefilter("ns/pod").is_success());
    // The engine filters through the `nodes` interface, where a reason is read only for a code
    // that is not a success: the hostile guest answers `error` for a node that leaves a reason.
    let status = engine.filter("big");
    assert_eq!(
        (status.code, status.reason.len()),
        (Code::Error, 65536),
        "a raised limit lets the reason through"
    );
}

#[test]
fn component_garbage_pointers_are_error_statuses() {
    component_case(
        small_limits(),
        "x-garbage-return-area",
        &["plugin trapped in filter", "out of bounds"],
        true,
    );
    component_case(
        small_limits(),
        "y-garbage-reason",
        &["plugin trapped in filter", "out of bounds"],
        true,
    );
}

#[test]
fn component_limits_apply_to_every_hook_and_the_cycle_goes_on() {
    let mut engine = component_engine(small_limits());
    let status = engine.prefilter("loop/pod");
    assert!(
        status.code == Code::Error && status.reason.contains("trapped in prefilter"),
        "{status}"
    );
    assert!(engine.prefilter("ns/pod").is_success());
    assert!(engine.filter("node-ok").is_success());
    let err = engine.score("grow").expect_err("score past the memory limit");
    assert!(
        err.reason.contains("trapped in score") && err.reason.contains("memory limit"),
        "{err}"
    );
    assert_eq!(engine.score("node-ok"), Ok(50), "score after the trap");
    let err = engine.score("big").expect_err("a 64 KiB reason");
    assert!(err.reason.contains("status reason limit"), "{err}");
    assert_eq!(engine.reserve("node-ok"), Ok(Vec::new()));
    assert_eq!(engine.bind("ns/pod", "node-ok"), Ok(Vec::new()));
    assert_eq!(engine.replacements(), 2);
}

#[test]
fn component_that_waits_for_binding_conditions_forever_is_refused() {
    // A plugin whose `binding-poll` always answers `wait`: the host stops after the longest
    // wait the core allows (a day, checked every 5 s), fails Bind and asks the plugin to unbind.
    let mut engine = component_engine(small_limits());
    engine.set_time(1_767_225_600);
    assert!(engine.prefilter("wait/pod").is_success());
    assert!(engine.filter("node-ok").is_success());
    assert_eq!(engine.reserve("node-ok"), Ok(Vec::new()));
    let err = engine
        .bind("wait/pod", "node-ok")
        .expect_err("a wait without end");
    assert_eq!(err.code, Code::Error);
    assert!(
        err.reason
            .contains("wait for binding conditions more than 17281 times"),
        "{err}"
    );
    assert_eq!(engine.replacements(), 0);
}

#[test]
fn component_limits_apply_to_prescore_with_its_scores_and_the_cycle_goes_on() {
    let mut engine = component_engine(small_limits());
    assert!(engine.prefilter("ns/pod").is_success());
    assert!(engine.filter("node-ok").is_success());
    let names = |n: &[&str]| n.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    // PreScore sends every node in one `nodes.scores` call: a limit hit by any node is the call's.
    for (node, limit) in [
        ("loop", "time limit"),
        ("grow", "memory limit"),
        ("recurse", "stack"),
        ("x-area", "trapped in prescore"),
    ] {
        let status = engine.prescore(&names(&["node-ok", node]));
        assert!(
            status.code == Code::Error
                && status.reason.contains("trapped in prescore")
                && status.reason.contains(limit),
            "{node}: {status}"
        );
    }
    let status = engine.prescore(&names(&["node-ok", "big"]));
    assert!(status.reason.contains("status reason limit"), "{status}");
    // After the traps, the replacement instance answers; Score reads what `scores` returned.
    assert!(engine.prescore(&names(&["node-ok"])).is_success());
    assert_eq!(engine.replacements(), 4);
    // With no time to run, any call into the guest would trap: Score does not call it.
    engine.set_time_per_call(Duration::ZERO);
    assert_eq!(engine.score("node-ok"), Ok(50));
    // A node PreScore did not name goes to the guest (and here runs out of time).
    let err = engine.score("node-2").expect_err("a guest call with no time");
    assert!(err.reason.contains("trapped in score"), "{err}");
    engine.set_time_per_call(small_limits().time_per_call);
    // That trap replaced the instance, which got the PreScore list again under its own table of
    // node indexes: Score still answers without calling the guest.
    assert_eq!(engine.replacements(), 5);
    engine.set_time_per_call(Duration::ZERO);
    assert_eq!(
        engine.score("node-ok"),
        Ok(50),
        "score from the restored PreScore"
    );
    engine.set_time_per_call(small_limits().time_per_call);
    assert_eq!(engine.reserve("node-ok"), Ok(Vec::new()));
    assert_eq!(engine.bind("ns/pod", "node-ok"), Ok(Vec::new()));
}

#[test]
fn an_unbounded_time_limit_does_not_wrap_into_an_immediate_interrupt() {
    let limits = Limits {
        time_per_call: Duration::MAX,
        ..small_limits()
    };
    let mut engine = component_engine(limits);
    assert!(engine.prefilter("ns/pod").is_success());
    assert!(engine.filter("node-ok").is_success());
    let mut host = kswe_host(limits);
    assert!(host.filter(&pod(), "node-ok").unwrap().is_success());
}

#[test]
fn component_stack_limits_must_match_the_compiled_ones() {
    let plugin = ComponentPlugin::from_bytes(hostile_component()).unwrap();
    let limits = Limits {
        max_wasm_stack: 1 << 20,
        ..Limits::default()
    };
    let err = plugin
        .instantiate("", limits)
        .err()
        .expect("another stack than compiled");
    assert!(
        format!("{err:#}").contains("compiled with a wasm stack limit of 512 KiB"),
        "{err:#}"
    );
}

// --- The KSWE host ------------------------------------------------------------------------------

fn kswe_host(limits: Limits) -> KsweHost {
    let module = KsweModule::with_limits(&wat("hostile_kswe.wat"), &limits).unwrap();
    module
        .host(KsweConfig {
            trap_policy: TrapPolicy::Replace,
            limits,
            ..KsweConfig::default()
        })
        .unwrap_or_else(|e| panic!("{e:#}"))
}

fn pod() -> PreparedPod {
    let pod = serde_json::from_str(r#"{"metadata":{"name":"p","namespace":"ns","uid":"uid-p"}}"#).unwrap();
    PreparedPod::new(&pod).unwrap()
}

/// Filter on `node` with the hostile KSWE guest: an Error status (code 1) with every `expected`
/// text; a trapped instance is replaced (a new one is created for the next call); the next call
/// succeeds.
fn kswe_case(limits: Limits, node: &str, expected: &[&str], trapped: bool) {
    let mut host = kswe_host(limits);
    let p = pod();
    assert!(host.prefilter(&p).unwrap().1.is_success());
    let created = host.instances_created();
    let status = host.filter(&p, node).unwrap();
    assert_eq!(status.code, 1, "{node}: {status:?}");
    assert_eq!(status.trapped, trapped, "{node}: {status:?}");
    for text in expected {
        assert!(
            status.reason.contains(text),
            "{node}: {text:?} not in {}",
            status.reason
        );
    }
    let next = host.filter(&p, "node-ok").unwrap();
    assert!(next.is_success(), "{node}: the next call: {next:?}");
    assert_eq!(
        host.instances_created(),
        created + u64::from(trapped),
        "{node}: a trapped instance is replaced, a sound one kept"
    );
}

#[test]
fn kswe_infinite_loop_ends_at_the_time_limit() {
    kswe_case(
        small_limits(),
        "loop",
        &[
            "wasm: filter error: guest exceeded its time limit of 200 ms: wasm error: wasm trap: interrupt",
            "hostile_kswe.act",
        ],
        true,
    );
}

#[test]
fn kswe_memory_growth_ends_at_the_memory_limit() {
    kswe_case(
        small_limits(),
        "grow",
        &["wasm: filter error: guest exceeded its memory limit of 16 MiB: growing a linear memory from"],
        true,
    );
}

#[test]
fn kswe_deep_recursion_ends_at_the_stack_limit() {
    for stack in [64 << 10, 512 << 10] {
        let limits = Limits {
            max_wasm_stack: stack,
            ..small_limits()
        };
        let expected = format!("guest exceeded its wasm stack limit of {} KiB", stack >> 10);
        kswe_case(limits, "recurse", &[&expected, "stack overflow"], true);
    }
}

#[test]
fn kswe_huge_status_reasons_are_error_statuses() {
    kswe_case(
        small_limits(),
        "huge",
        &["guest exceeded its status reason limit of 16 KiB: a reason of 1073741824 bytes"],
        true,
    );
    kswe_case(
        small_limits(),
        "big",
        &["guest exceeded its status reason limit of 16 KiB: a reason of 65536 bytes"],
        true,
    );
}

#[test]
fn kswe_garbage_pointers_are_error_statuses() {
    // A reason outside memory: upstream's text, and an Error whatever code the guest returned
    // (it returned 0); nothing trapped, so the instance is kept.
    kswe_case(
        small_limits(),
        "x-reason-outside-memory",
        &["BUG: out of memory reading message"],
        false,
    );
    // A buffer the host cannot write the pod into: the Go host's panic, a trap.
    kswe_case(
        small_limits(),
        "pod-into-garbage",
        &["wasm: filter error: out of memory (recovered by wazero)"],
        true,
    );
}

#[test]
fn kswe_captured_output_is_cut_at_64_kib() {
    kswe_case(
        small_limits(),
        "output",
        &[
            "[2031616 more bytes of output dropped: the host keeps 65536 per call]",
            "wasm error: unreachable",
        ],
        true,
    );
    let mut host = kswe_host(small_limits());
    let status = host.filter(&pod(), "output").unwrap();
    assert!(status.reason.len() < (64 << 10) + 1024, "{}", status.reason.len());
}

#[test]
fn kswe_keeps_at_most_10000_log_records_until_they_are_taken() {
    let mut host = kswe_host(small_limits());
    let status = host.filter(&pod(), "klog-flood").unwrap();
    assert!(status.is_success(), "{status:?}");
    let logs = host.take_logs();
    assert_eq!(logs.len(), 10_001);
    assert_eq!(
        logs[10_000].message,
        "10000 more log records dropped: the host keeps 10000 until they are taken"
    );
    assert_eq!(logs[0].message, "klo", "the guest's record");
    assert!(host.take_logs().is_empty(), "taking resets the count");
}

#[test]
fn kswe_limits_apply_to_score_and_a_zero_time_limit_interrupts_at_once() {
    let mut host = kswe_host(small_limits());
    let p = pod();
    let (score, status) = host.score(&p, "grow").unwrap();
    assert_eq!((score, status.code), (0, 1));
    assert!(
        status.reason.contains("memory limit of 16 MiB"),
        "{}",
        status.reason
    );
    assert_eq!(host.score(&p, "node-ok").unwrap().0, 50);
    host.set_time_per_call(Duration::ZERO);
    let status = host.filter(&p, "node-ok").unwrap();
    assert!(
        status.reason.contains("guest exceeded its time limit of 0 s"),
        "{}",
        status.reason
    );
    host.set_time_per_call(small_limits().time_per_call);
    assert!(host.filter(&p, "node-ok").unwrap().is_success());
}

#[test]
fn kswe_stack_limits_must_match_the_compiled_ones() {
    let module = KsweModule::new(&wat("hostile_kswe.wat")).unwrap();
    let config = KsweConfig {
        limits: Limits {
            max_wasm_stack: 1 << 20,
            ..Limits::default()
        },
        ..KsweConfig::default()
    };
    let err = module.host(config).err().expect("another stack than compiled");
    assert!(format!("{err:#}").contains("cannot run with 1 MiB"), "{err:#}");
}

// --- The real plugin: hostile calls spread over a replay lose no state ---------------------------

/// An engine whose time limit a test can set to zero for one call.
trait Interruptible: PluginRuntime {
    fn set_time_limit(&mut self, time: Duration);
    fn score_enters_guest(&mut self) -> bool {
        true
    }
}

impl Interruptible for ComponentEngine {
    fn set_time_limit(&mut self, time: Duration) {
        self.set_time_per_call(time);
    }
}

impl Interruptible for KsweEngine {
    fn set_time_limit(&mut self, time: Duration) {
        self.set_time_per_call(time);
    }
    fn score_enters_guest(&mut self) -> bool {
        KsweEngine::score_enters_guest(self)
    }
}

/// Wraps an engine: every `every`-th hook call is first made with a zero time limit (it must
/// fail with the time-limit error, and the instance is replaced), then made again normally; the
/// wrapper returns the normal answer. So the replay sees the real plugin's decisions, which must
/// match the native engine's if the replacement instances lost no state.
struct Hostile<E> {
    inner: E,
    every: usize,
    calls: usize,
    interrupted: Vec<String>,
}

impl<E: Interruptible> Hostile<E> {
    fn hostile(&mut self) -> bool {
        self.calls += 1;
        self.calls.is_multiple_of(self.every)
    }

    /// Runs `f` once with a zero time limit and checks the error it gives.
    fn interrupt<T: std::fmt::Debug>(&mut self, what: &str, f: impl FnOnce(&mut E) -> Result<T, Status>) {
        self.inner.set_time_limit(Duration::ZERO);
        let result = f(&mut self.inner);
        self.inner.set_time_limit(Limits::default().time_per_call);
        match result {
            Err(status) => {
                assert_eq!(status.code, Code::Error, "{what}: {status}");
                assert!(
                    status.reason.contains("guest exceeded its time limit of 0 s"),
                    "{what}: {status}"
                );
                self.interrupted.push(what.to_string());
            }
            Ok(v) => panic!("{what} ran with a zero time limit: {v:?}"),
        }
    }
}

fn as_result(status: Status) -> Result<(), Status> {
    if status.is_success() { Ok(()) } else { Err(status) }
}

impl<E: Interruptible> PluginRuntime for Hostile<E> {
    fn name(&self) -> &'static str {
        self.inner.name()
    }
    fn load(&mut self, objects: &[Object]) -> wasmtime::Result<Vec<String>> {
        self.inner.load(objects)
    }
}

impl<E: Interruptible> Scheduler for Hostile<E> {
    fn prefilter(&mut self, pod: &str) -> Status {
        if self.hostile() {
            self.interrupt(&format!("prefilter {pod}"), |e| as_result(e.prefilter(pod)));
        }
        self.inner.prefilter(pod)
    }
    fn filter(&mut self, node: &str) -> Status {
        if self.hostile() {
            self.interrupt(&format!("filter {node}"), |e| as_result(e.filter(node)));
        }
        self.inner.filter(node)
    }
    fn set_time(&mut self, unix_seconds: i64) {
        self.inner.set_time(unix_seconds)
    }
    fn postfilter(&mut self, pod: &str, nodes: &[String]) -> (Status, Option<String>) {
        // PostFilter mutates (a deallocation): it is not interrupted and replayed.
        self.inner.postfilter(pod, nodes)
    }
    fn score(&mut self, node: &str) -> Result<u32, Status> {
        // The KSWE engine scores every feasible node in one guest call at the cycle's first
        // Score (the guest normalises over the PreScore nodes) and answers the others from that
        // batch without entering the guest: only a call that enters the guest can be interrupted.
        if self.hostile() && self.inner.score_enters_guest() {
            self.interrupt(&format!("score {node}"), |e| e.score(node));
        }
        self.inner.score(node)
    }
    fn reserve(&mut self, node: &str) -> Result<Vec<ClaimAllocation>, Status> {
        if self.hostile() {
            self.interrupt(&format!("reserve {node}"), |e| e.reserve(node));
        }
        self.inner.reserve(node)
    }
    fn unreserve(&mut self, pod: &str, node: &str) -> Result<(), Status> {
        self.inner.unreserve(pod, node)
    }
    fn bind(&mut self, pod: &str, node: &str) -> Result<Vec<ClaimAllocation>, Status> {
        self.inner.bind(pod, node)
    }
}

const SCENARIOS: [&str; 3] = [
    "nic-subnet-16-slots-17th-opens-eth2",
    "multi-node-packing-compatible-lock",
    "allocated-claims-rebuild-locks",
];

fn scenario(name: &str) -> (Cluster, String) {
    let dir = artifact::workspace_root().join("testdata").join(name);
    let cluster = Cluster::from_file(&dir.join("cluster.json")).unwrap();
    let config = std::fs::read_to_string(dir.join("config.json")).unwrap_or_default();
    (cluster, config)
}

fn native_decisions(cluster: &Cluster, config: &str) -> serde_json::Value {
    let mut engine = native::plugin(config).unwrap();
    report::decisions(&replay(&mut engine, cluster, &mut || {}).unwrap())
}

fn check_hostile_replay<E: Interruptible>(
    name: &str,
    engine: E,
    cluster: &Cluster,
    config: &str,
    every: usize,
) {
    let mut hostile = Hostile {
        inner: engine,
        every,
        calls: 0,
        interrupted: Vec::new(),
    };
    let result = replay(&mut hostile, cluster, &mut || {}).unwrap();
    assert!(
        hostile.interrupted.len() >= 3,
        "{name}: only {:?} interrupted",
        hostile.interrupted
    );
    let hooks: std::collections::BTreeSet<&str> = hostile
        .interrupted
        .iter()
        .filter_map(|w| w.split(' ').next())
        .collect();
    assert!(hooks.len() >= 2, "{name}: interrupted only {hooks:?}");
    assert_eq!(
        report::decisions(&result),
        native_decisions(cluster, config),
        "{name}: decisions after {} interrupted calls ({:?})",
        hostile.interrupted.len(),
        hostile.interrupted
    );
}

#[test]
fn component_replay_with_interrupted_calls_decides_as_native() {
    let path = artifact::default_component().unwrap();
    let plugin = ComponentPlugin::from_file(&path).unwrap();
    for name in SCENARIOS {
        let (cluster, config) = scenario(name);
        for every in [3, 5] {
            let engine = plugin.instantiate(&config, Limits::default()).unwrap();
            check_hostile_replay(name, engine, &cluster, &config, every);
        }
    }
}

#[test]
fn kswe_replay_with_interrupted_calls_decides_as_native() {
    let path = artifact::default_kswe_module().unwrap();
    let wasm = artifact::read_kswe_module(&path).unwrap();
    let module = KsweModule::new(&wasm).unwrap();
    for name in SCENARIOS {
        let (cluster, config) = scenario(name);
        for every in [3, 5] {
            let engine = KsweEngine::from_module(&module, &config).unwrap();
            check_hostile_replay(name, engine, &cluster, &config, every);
        }
    }
}

#[test]
fn kswe_real_guest_over_its_memory_limit_reports_it_and_the_replay_goes_on() {
    let path = artifact::default_kswe_module().unwrap();
    let wasm = artifact::read_kswe_module(&path).unwrap();
    let (cluster, config) = scenario("large-32-nodes-60-pods");
    // The limit lies between the empty instance's memory and what the replay needs, so the
    // guest instantiates and then runs out on its first sync, however small the guest gets.
    let (empty, needed) = {
        let module = KsweModule::new(&wasm).unwrap();
        let mut engine = KsweEngine::from_module(&module, &config).unwrap();
        let empty = engine.guest_memory_bytes().unwrap() as usize;
        replay(&mut engine, &cluster, &mut || {}).unwrap();
        (empty, engine.guest_memory_bytes().unwrap() as usize)
    };
    const PAGE: usize = 64 << 10;
    assert!(
        needed >= empty + 2 * PAGE,
        "the replay needs {needed} bytes, the empty instance has {empty}: nothing to limit"
    );
    let memory_bytes = (empty + (needed - empty) / 2) / PAGE * PAGE;
    let limits = Limits {
        memory_bytes,
        ..Limits::default()
    };
    let module = KsweModule::with_limits(&wasm, &limits).unwrap();
    let mut engine = KsweEngine::with_config(
        &module,
        KsweConfig {
            guest_config: config.clone(),
            trap_policy: TrapPolicy::Replace,
            limits,
            ..KsweConfig::default()
        },
    )
    .unwrap();
    let result = replay(&mut engine, &cluster, &mut || {}).unwrap();
    assert_eq!(result.pods.len(), cluster.pending.len(), "every pod got a cycle");
    for pod in &result.pods {
        assert!(pod.node.is_none(), "{}: bound without its cluster", pod.pod);
        let status = &pod.nodes[0].status;
        assert_eq!(status.code, Code::Error, "{}: {status}", pod.pod);
        assert!(
            status.reason.contains(&format!(
                "guest exceeded its memory limit of {}",
                Bytes(memory_bytes)
            )),
            "{}: {status}",
            pod.pod
        );
    }
}
