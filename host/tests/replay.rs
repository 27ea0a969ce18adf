//! Golden replays of `testdata/*/` through every engine, trap recovery of the component engine,
//! and the CLI with `--engine kswe`.
//!
//! For each scenario directory there is one trial per engine (`native/<scenario>`,
//! `component/<scenario>`, `kswe/<scenario>`, and `kswe-async/<scenario>` with kube-scheduler's
//! asynchronous binding). A trial replays `cluster.json` (with `config.json` as
//! the plugin configuration when present) and compares the JSON report without `timing` to
//! `expected.json`, printing a diff on mismatch. The component and kswe trials also require
//! decisions identical to the native engine's, and no trapped call during the replay (the kswe
//! trial also no guest log line: the KSWE guest logs the objects it refuses). A directory without
//! `expected.json` fails.
//!
//! `AFFINITY_BLESS=1 cargo test -p sharing-affinity-host --test replay` rewrites `expected.json` from
//! the native engine (the component and kswe trials then check they agree with it).

use std::path::Path;
use std::sync::OnceLock;
use std::time::Duration;

use libtest_mimic::{Arguments, Failed, Trial};
use serde_json::Value;
use sharing_affinity_core::contract::Scheduler;
use sharing_affinity_core::{Code, Plugin};
use sharing_affinity_host::artifact;
use sharing_affinity_host::component::{ComponentEngine, ComponentPlugin, Limits};
use sharing_affinity_host::engine::PluginRuntime;
use sharing_affinity_host::kswe::{KsweEngine, KsweModule};
use sharing_affinity_host::native;
use sharing_affinity_host::replay::{
    Binding, Cluster, PodOutcome, Replay, replay, replay_with, scenario_dirs, schedule,
};
use sharing_affinity_host::report;

fn main() {
    let args = Arguments::from_args();
    let mut trials = Vec::new();
    for dir in scenario_dirs() {
        let name = dir
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let native_dir = dir.clone();
        trials.push(Trial::test(format!("native/{name}"), move || {
            golden_native(&native_dir)
        }));
        let component_dir = dir.clone();
        trials.push(Trial::test(format!("component/{name}"), move || {
            golden_component(&component_dir)
        }));
        let kswe_dir = dir.clone();
        trials.push(Trial::test(format!("kswe/{name}"), move || {
            golden_kswe(&kswe_dir, Binding::Sync)
        }));
        trials.push(Trial::test(format!("kswe-async/{name}"), move || {
            golden_kswe(&dir, Binding::Async)
        }));
    }
    trials.push(Trial::test(
        "cli/engine-kswe-replays-a-scenario-and-names-the-engine",
        cli_kswe,
    ));
    trials.push(Trial::test(
        "native/structured-and-cel-declarations-decide-alike",
        structured_and_cel_decide_alike,
    ));
    trials.push(Trial::test(
        "component/time-limit-is-an-error-status-and-state-survives",
        time_limit_trap,
    ));
    trials.push(Trial::test(
        "component/trap-mid-cycle-resumes-the-cycle",
        trap_mid_cycle,
    ));
    trials.push(Trial::test(
        "component/memory-limit-trap-is-an-error-status",
        memory_limit_trap,
    ));
    trials.push(Trial::test(
        "component/prescore-scores-the-named-nodes-in-one-call",
        prescore_scores,
    ));
    trials.push(Trial::test(
        "component/prescore-across-the-node-index-bound",
        prescore_at_index_bound,
    ));
    trials.push(Trial::test(
        "component/nodes-interface-decides-as-the-named-exports",
        nodes_interface,
    ));
    libtest_mimic::run(&args, trials).exit();
}

fn blessing() -> bool {
    std::env::var_os("AFFINITY_BLESS").is_some_and(|v| v == "1")
}

/// The component, built and compiled once for all trials.
fn plugin() -> Result<&'static ComponentPlugin, Failed> {
    static PLUGIN: OnceLock<Result<ComponentPlugin, String>> = OnceLock::new();
    PLUGIN
        .get_or_init(|| {
            let path = artifact::default_component().map_err(|e| format!("{e:#}"))?;
            ComponentPlugin::from_file(&path).map_err(|e| format!("{e:#}"))
        })
        .as_ref()
        .map_err(|e| Failed::from(format!("the plugin component is not available: {e}")))
}

/// The KSWE guest core module, built (in its own target directory) and compiled once for all trials.
fn kswe_module() -> Result<&'static KsweModule, Failed> {
    static MODULE: OnceLock<Result<KsweModule, String>> = OnceLock::new();
    MODULE
        .get_or_init(|| {
            let path = artifact::default_kswe_module().map_err(|e| format!("{e:#}"))?;
            let wasm = artifact::read_kswe_module(&path).map_err(|e| format!("{e:#}"))?;
            KsweModule::new(&wasm).map_err(|e| format!("{}: {e:#}", path.display()))
        })
        .as_ref()
        .map_err(|e| Failed::from(format!("the KSWE guest module is not available: {e}")))
}

fn config(dir: &Path) -> Result<String, Failed> {
    let path = dir.join("config.json");
    if path.is_file() {
        read(&path)
    } else {
        Ok(String::new())
    }
}

fn read(path: &Path) -> Result<String, Failed> {
    std::fs::read_to_string(path).map_err(|e| format!("reading {}: {e}", path.display()).into())
}

fn run(engine: &mut dyn PluginRuntime, dir: &Path) -> Result<Replay, Failed> {
    let cluster = Cluster::from_file(&dir.join("cluster.json")).map_err(|e| format!("{e:#}"))?;
    replay(engine, &cluster, &mut || {}).map_err(|e| format!("{e:#}").into())
}

fn native(dir: &Path) -> Result<Replay, Failed> {
    let mut engine = native::plugin(&config(dir)?).map_err(|e| format!("{e:#}"))?;
    run(&mut engine, dir)
}

fn golden_native(dir: &Path) -> Result<(), Failed> {
    let actual = native(dir)?;
    let expected_path = dir.join("expected.json");
    if blessing() {
        let text = report::to_json_text(&actual, false) + "\n";
        return std::fs::write(&expected_path, text)
            .map_err(|e| format!("writing {}: {e}", expected_path.display()).into());
    }
    compare(
        &expected(dir)?,
        &report::decisions(&actual),
        "expected.json",
        "native",
    )
}

fn golden_component(dir: &Path) -> Result<(), Failed> {
    let expected = if blessing() { None } else { Some(expected(dir)?) };
    let mut engine = plugin()?
        .instantiate(&config(dir)?, Limits::default())
        .map_err(|e| format!("{e:#}"))?;
    let actual = report::decisions(&run(&mut engine, dir)?);
    if engine.replacements() > 0 {
        return Err(format!(
            "the instance trapped {} time(s) during the replay",
            engine.replacements()
        )
        .into());
    }
    compare(&report::decisions(&native(dir)?), &actual, "native", "component")?;
    match expected {
        Some(expected) => compare(&expected, &actual, "expected.json", "component"),
        None => Ok(()),
    }
}

/// The KSWE engine with synchronous or asynchronous binding (pod N's binding cycle after pod
/// N+1's PreFilter): the same decisions as the native engine either way.
fn golden_kswe(dir: &Path, binding: Binding) -> Result<(), Failed> {
    let expected = if blessing() { None } else { Some(expected(dir)?) };
    let mut engine = KsweEngine::from_module(kswe_module()?, &config(dir)?).map_err(|e| format!("{e:#}"))?;
    let cluster = Cluster::from_file(&dir.join("cluster.json")).map_err(|e| format!("{e:#}"))?;
    let replayed =
        replay_with(&mut engine, &cluster, binding, &mut || {}, &mut |_| {}).map_err(|e| format!("{e:#}"))?;
    let actual = report::decisions(&replayed);
    let logs = engine.take_logs();
    if engine.traps() > 0 || !logs.is_empty() {
        return Err(format!(
            "{} guest call(s) failed during the replay; guest log:\n{}",
            engine.traps(),
            logs.join("\n")
        )
        .into());
    }
    let name = format!("kswe ({binding:?} binding)");
    compare(&report::decisions(&native(dir)?), &actual, "native", &name)?;
    match expected {
        Some(expected) => compare(&expected, &actual, "expected.json", &name),
        None => Ok(()),
    }
}

/// The binary end to end: `replay DIR --engine kswe --output json` builds the KSWE guest itself,
/// decides as `expected.json` says and reports `timing.engine` as `kswe`.
fn cli_kswe() -> Result<(), Failed> {
    let dir = scenario_dirs()
        .into_iter()
        .find(|d| d.ends_with("multi-node-packing-compatible-lock"))
        .ok_or("testdata/multi-node-packing-compatible-lock is missing")?;
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_sharing-affinity"))
        .arg("replay")
        .arg(&dir)
        .args(["--engine", "kswe", "--output", "json"])
        .output()
        .map_err(|e| format!("running the CLI: {e}"))?;
    let stderr = String::from_utf8_lossy(&output.stderr);
    if !output.status.success() {
        return Err(format!("the CLI failed ({}):\n{stderr}", output.status).into());
    }
    if stderr.contains("plugin log") || stderr.contains("warning") {
        return Err(format!("unexpected warnings:\n{stderr}").into());
    }
    let mut report: Value =
        serde_json::from_slice(&output.stdout).map_err(|e| format!("the CLI's JSON: {e}"))?;
    let timing = report
        .as_object_mut()
        .and_then(|o| o.remove("timing"))
        .ok_or("the report has no timing")?;
    if timing["engine"] != "kswe" {
        return Err(format!("timing.engine is {}, not \"kswe\"", timing["engine"]).into());
    }
    let filters = timing["filterNsPerNode"]["max"].as_u64().unwrap_or(0);
    if filters == 0 {
        return Err(format!("no filter latency in {timing}").into());
    }
    compare(&expected(&dir)?, &report, "expected.json", "cli --engine kswe")
}

fn expected(dir: &Path) -> Result<Value, Failed> {
    let path = dir.join("expected.json");
    if !path.is_file() {
        return Err(format!(
            "{} has no expected.json: every scenario needs one (AFFINITY_BLESS=1 writes it from the native engine)",
            dir.display()
        )
        .into());
    }
    serde_json::from_str(&read(&path)?).map_err(|e| format!("{}: {e}", path.display()).into())
}

fn pretty(v: &Value) -> String {
    serde_json::to_string_pretty(v).expect("a Value serializes")
}

/// Fails with a unified diff when the two documents differ.
fn compare(expected: &Value, actual: &Value, expected_name: &str, actual_name: &str) -> Result<(), Failed> {
    if expected == actual {
        return Ok(());
    }
    let (e, a) = (pretty(expected), pretty(actual));
    let diff = similar::TextDiff::from_lines(&e, &a);
    Err(format!(
        "{actual_name} differs from {expected_name}:\n{}\nre-run with AFFINITY_BLESS=1 to update expected.json \
         if the new output is right",
        diff.unified_diff().context_radius(3).header(expected_name, actual_name)
    )
    .into())
}

/// One node, one shareable device with 10Gi of memory, and three pods whose claims each want 6Gi:
/// only the first fits, so a replacement instance that forgot the first binding would place the
/// second pod.
const SMALL_CLUSTER: &str = r#"{"apiVersion": "v1", "kind": "List", "items": [
  {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "node-1"}},
  {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": "gpu.example.com"}, "spec": {}},
  {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"name": "node-1-gpu"},
   "spec": {"driver": "gpu.example.com", "nodeName": "node-1",
            "pool": {"name": "node-1", "generation": 1, "resourceSliceCount": 1},
            "devices": [{"name": "gpu-0", "allowMultipleAllocations": true,
                         "capacity": {"memory": {"value": "10Gi"}}}]}},
  CLAIMS_AND_PODS
]}"#;

fn small_cluster() -> Cluster {
    let mut items = Vec::new();
    for (i, name) in ["a", "b", "c"].iter().enumerate() {
        items.push(format!(
            r#"{{"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
                 "metadata": {{"name": "claim-{name}", "namespace": "default"}},
                 "spec": {{"devices": {{"requests": [{{"name": "gpu", "exactly": {{
                     "deviceClassName": "gpu.example.com", "capacity": {{"requests": {{"memory": "6Gi"}}}}}}}}]}}}}}}"#
        ));
        items.push(format!(
            r#"{{"apiVersion": "v1", "kind": "Pod",
                 "metadata": {{"name": "pod-{name}", "namespace": "default", "creationTimestamp": "2025-01-01T00:00:0{i}Z"}},
                 "spec": {{"resourceClaims": [{{"name": "gpu", "resourceClaimName": "claim-{name}"}}]}}}}"#
        ));
    }
    Cluster::parse(&SMALL_CLUSTER.replace("CLAIMS_AND_PODS", &items.join(",\n")))
        .expect("the small cluster parses")
}

/// Schedules `pods` of the small cluster with a native engine: the reference decisions.
fn native_decisions(cluster: &Cluster) -> Result<Vec<PodOutcome>, Failed> {
    let mut engine = native::plugin("").map_err(|e| format!("{e:#}"))?;
    let result = replay(&mut engine, cluster, &mut || {}).map_err(|e| format!("{e:#}"))?;
    Ok(result.pods)
}

fn time_limit_trap() -> Result<(), Failed> {
    let cluster = small_cluster();
    let reference = native_decisions(&cluster)?;
    if reference[0].node.is_none() || reference[1].node.is_some() {
        return Err(format!("the small cluster should fit only its first pod: {reference:#?}").into());
    }
    let mut engine = plugin()?
        .instantiate("", Limits::default())
        .map_err(|e| format!("{e:#}"))?;
    let rejected = engine.load(&cluster.objects).map_err(|e| format!("{e:#}"))?;
    assert_eq!(rejected, Vec::<String>::new());
    let mut samples = Default::default();
    let first = schedule(&mut engine, &cluster.pending[0], &cluster.nodes, &mut samples);
    assert_eq!(first, reference[0], "first pod, before any trap");

    // Starve the next call: prefilter runs out of time at once, every node gets its Error status.
    engine.set_time_per_call(Duration::ZERO);
    let starved = schedule(&mut engine, &cluster.pending[1], &cluster.nodes, &mut samples);
    assert_eq!(engine.replacements(), 1, "the trapped instance was replaced");
    let status = &starved.nodes[0].status;
    assert_eq!(status.code, Code::Error, "{status}");
    assert!(
        status.reason.contains("prefilter") && status.reason.contains("exceeded its time limit of 0 s"),
        "{status}"
    );
    assert!(starved.node.is_none());

    // The replacement remembers the first binding: the rest of the replay matches the native one.
    engine.set_time_per_call(Limits::default().time_per_call);
    for (pod, expected) in cluster.pending.iter().zip(&reference).skip(1) {
        let outcome = schedule(&mut engine, pod, &cluster.nodes, &mut samples);
        assert_eq!(&outcome, expected, "pod {pod} after the trap");
    }
    Ok(())
}

fn trap_mid_cycle() -> Result<(), Failed> {
    let cluster = small_cluster();
    let reference = native_decisions(&cluster)?;
    let (pod, node) = (&cluster.pending[0], &cluster.nodes[0]);
    let mut engine = plugin()?
        .instantiate("", Limits::default())
        .map_err(|e| format!("{e:#}"))?;
    engine.load(&cluster.objects).map_err(|e| format!("{e:#}"))?;
    let normal = Limits::default().time_per_call;
    assert!(engine.prefilter(pod).is_success());

    // A trap in filter: the replacement resumes the cycle, so filtering again works.
    engine.set_time_per_call(Duration::ZERO);
    let trapped = engine.filter(node);
    assert_eq!(trapped.code, Code::Error, "{trapped}");
    assert!(trapped.reason.contains("trapped in filter"), "{trapped}");
    engine.set_time_per_call(normal);
    assert!(engine.filter(node).is_success(), "filter after the trap");

    // A trap in score: the replacement re-filtered the feasible node, so reserve and bind work.
    engine.set_time_per_call(Duration::ZERO);
    let trapped = engine.score(node).expect_err("score runs out of time");
    assert!(trapped.reason.contains("trapped in score"), "{trapped}");
    engine.set_time_per_call(normal);
    engine
        .reserve(node)
        .map_err(|s| format!("reserve after the trap: {s}"))?;
    let bound = engine
        .bind(pod, node)
        .map_err(|s| format!("bind after the trap: {s}"))?;
    assert_eq!(
        bound, reference[0].allocations,
        "the same allocation as without traps"
    );
    assert_eq!(engine.replacements(), 2);
    Ok(())
}

fn memory_limit_trap() -> Result<(), Failed> {
    // Enough memory to start, far too little to hold the cluster: loading traps, which is an error
    // for the load (the replay cannot start) rather than a panic or a silent empty plugin.
    let limits = Limits {
        memory_bytes: 4 << 20,
        ..Limits::default()
    };
    let mut engine = match plugin()?.instantiate("", limits) {
        Ok(engine) => engine,
        Err(e) => return Err(format!("a 4 MiB instance should start: {e:#}").into()),
    };
    // 300 nodes × 8 devices with their running pods: distinct objects, so the plugin must hold
    // them all (the load sends them in 1 MiB batches, so no single call is what overflows).
    let spec = sharing_affinity_host::generate::Spec::new(300, 8);
    let generated = sharing_affinity_host::generate::generate(&spec).map_err(|e| format!("{e:#}"))?;
    let objects = Cluster::parse(&generated.cluster)
        .map_err(|e| format!("{e:#}"))?
        .objects;
    let err = match engine.load(&objects) {
        Ok(rejected) => return Err(format!("loading past the memory limit succeeded: {rejected:?}").into()),
        Err(e) => format!("{e:#}"),
    };
    assert!(err.contains("trapped in update"), "{err}");
    assert_eq!(engine.replacements(), 1);
    // The replacement works: calls answer with statuses, not traps.
    let status = engine.prefilter("default/pod-a");
    assert_ne!(
        status.reason, "",
        "prefilter on an empty replacement explains itself"
    );
    assert_eq!(engine.replacements(), 1, "no further trap");
    Ok(())
}

/// `testdata/structured-config-and-cel-extractors-same-decisions` runs one story with CEL
/// extractors (`tenant/cel-*` on `cel-node`) and with the seed's structured declarations
/// (`tenant/st-*` on `structured-node`): each pair of pods gets the same decision (bound to its
/// way's node on the same devices, or not bound with the same code on every node).
fn structured_and_cel_decide_alike() -> Result<(), Failed> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../testdata/structured-config-and-cel-extractors-same-decisions");
    let r = native(&dir)?;
    let outcome = |pod: &PodOutcome| {
        let devices: Vec<String> = pod
            .allocations
            .iter()
            .flat_map(|a| a.allocation.devices.results.iter().map(|d| d.device.to_string()))
            .collect();
        let codes: Vec<Code> = pod.nodes.iter().map(|n| n.status.code).collect();
        (pod.node.is_some(), devices, codes.contains(&Code::Success))
    };
    let mut pairs = 0;
    for cel in r.pods.iter().filter(|p| p.pod.starts_with("tenant/cel-")) {
        let twin = cel.pod.replacen("tenant/cel-", "tenant/st-", 1);
        let st = r
            .pods
            .iter()
            .find(|p| p.pod == twin)
            .ok_or_else(|| format!("no twin {twin} for {}", cel.pod))?;
        if outcome(cel) != outcome(st) {
            return Err(format!("{} {:?} vs {} {:?}", cel.pod, outcome(cel), st.pod, outcome(st)).into());
        }
        if cel.node.as_deref().is_some_and(|n| n != "cel-node")
            || st.node.as_deref().is_some_and(|n| n != "structured-node")
        {
            return Err(format!("{} or {} bound to the other way's node", cel.pod, st.pod).into());
        }
        pairs += 1;
    }
    if pairs != 7 {
        return Err(format!("expected 7 pairs, found {pairs}").into());
    }
    Ok(())
}

/// `testdata/large-32-nodes-60-pods` loaded into a native and a component engine, its first
/// pending pod prefiltered and filtered on every node in both: the cluster, the engines and the
/// nodes that passed (at least two).
fn filtered_on_both() -> Result<(Cluster, Plugin, ComponentEngine, Vec<String>), Failed> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../testdata/large-32-nodes-60-pods");
    let cluster = Cluster::from_file(&dir.join("cluster.json")).map_err(|e| format!("{e:#}"))?;
    let mut native = native::plugin(&config(&dir)?).map_err(|e| format!("{e:#}"))?;
    let mut component = plugin()?
        .instantiate(&config(&dir)?, Limits::default())
        .map_err(|e| format!("{e:#}"))?;
    let pod = &cluster.pending[0];
    let mut feasible = Vec::new();
    for engine in [&mut native as &mut dyn PluginRuntime, &mut component] {
        engine.load(&cluster.objects).map_err(|e| format!("{e:#}"))?;
        assert!(engine.prefilter(pod).is_success());
        feasible = cluster
            .nodes
            .iter()
            .filter(|n| engine.filter(n).is_success())
            .cloned()
            .collect();
    }
    assert!(feasible.len() >= 2, "the test needs two feasible nodes");
    Ok((cluster, native, component, feasible))
}

/// The component host sends PreScore's list with `nodes.scores`, which scores every node it
/// names in the same call; Score answers from it. Scores match the native engine's, which calls
/// Score per node: for the whole list, a narrower one (a node outside it cannot be scored), the
/// whole list again, and after a node is filtered again.
fn prescore_scores() -> Result<(), Failed> {
    let (_, mut native, mut component, feasible) = filtered_on_both()?;
    let scores = |e: &mut dyn PluginRuntime, nodes: &[String]| -> Vec<Result<u32, String>> {
        nodes.iter().map(|n| e.score(n).map_err(|s| s.reason)).collect()
    };
    let both = |native: &mut Plugin, component: &mut ComponentEngine, nodes: &[String]| {
        assert!(native.prescore(nodes).is_success());
        assert!(component.prescore(nodes).is_success());
    };
    both(&mut native, &mut component, &feasible);
    let whole = scores(&mut native, &feasible);
    assert!(whole.iter().all(Result::is_ok), "{whole:?}");
    assert_eq!(scores(&mut component, &feasible), whole);
    // A narrower list: a node outside it can no longer be scored.
    let first = &feasible[..1];
    both(&mut native, &mut component, first);
    let outside = component
        .score(&feasible[1])
        .expect_err("a node prescore did not name");
    assert!(outside.reason.contains("prescore did not name"), "{outside}");
    assert_eq!(scores(&mut component, first), scores(&mut native, first));
    // The whole list again.
    both(&mut native, &mut component, &feasible);
    assert_eq!(scores(&mut component, &feasible), whole);
    // The table of node indexes emptied after PreScore: the names get other indexes as Score
    // asks for them (here in reverse order), and an index the PreScore list gave another node
    // must not answer with that node's score (the scores differ between nodes).
    assert!(
        whole.iter().any(|s| *s != whole[0]),
        "scores that tell nodes apart: {whole:?}"
    );
    component.forget_node_indexes().map_err(|s| s.reason)?;
    let reversed: Vec<String> = feasible.iter().rev().cloned().collect();
    let expected: Vec<_> = whole.iter().rev().cloned().collect();
    assert_eq!(scores(&mut component, &reversed), expected, "indexed again");
    assert_eq!(scores(&mut component, &reversed), expected, "by the new indexes");
    // A node filtered again after PreScore: Score asks the guest, as the native engine decides.
    assert!(native.filter(&feasible[0]).is_success());
    assert!(component.filter(&feasible[0]).is_success());
    assert_eq!(scores(&mut component, &feasible), scores(&mut native, &feasible));
    Ok(())
}

/// A PreScore list whose names would fill the guest's table of node indexes (65,536 names)
/// half-way through: the engine empties the table first, so every index of the call is from the
/// same table and the scores are right. A list longer than the table goes to the guest by name.
fn prescore_at_index_bound() -> Result<(), Failed> {
    let (cluster, mut native, mut component, feasible) = filtered_on_both()?;
    assert!(native.prescore(&feasible).is_success());
    let expected: Vec<_> = feasible.iter().map(|n| native.score(n)).collect();
    // Unknown names until the table has just been emptied (at 65,536) and holds none of the
    // feasible nodes, then until it has room for one more name only.
    let mut unknown = 0;
    let mut filter_unknown = |component: &mut ComponentEngine, n: usize| {
        for _ in 0..n {
            let gone = component.filter(&format!("gone-{unknown}"));
            assert!(gone.reason.contains("not found"), "{gone}");
            unknown += 1;
        }
    };
    filter_unknown(&mut component, 65_536 - cluster.nodes.len() + 1);
    filter_unknown(&mut component, 65_536 - 1 - 1);
    assert!(component.prescore(&feasible).is_success());
    let scores: Vec<_> = feasible.iter().map(|n| component.score(n)).collect();
    assert_eq!(scores, expected, "scores across the bound");
    // A list longer than the table: PreScore by name (here refused: unknown nodes in it).
    let mut long = feasible.clone();
    long.extend((0..65_537).map(|i| format!("gone-{i}")));
    let refused = component.prescore(&long);
    assert_eq!(refused.code, Code::Error, "{refused}");
    assert!(
        refused
            .reason
            .contains("prescore names node gone-0, which did not pass filter"),
        "the first unknown name of the list: {refused}"
    );
    Ok(())
}

/// The engine filters and scores through the `nodes` interface's indexes; the world's name-based
/// exports must answer the same, reasons included, for nodes that pass, nodes that do not, and a
/// node the plugin does not know, and the two may be mixed within a cycle.
fn nodes_interface() -> Result<(), Failed> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../testdata/large-32-nodes-60-pods");
    let cluster = Cluster::from_file(&dir.join("cluster.json")).map_err(|e| format!("{e:#}"))?;
    let mut component = plugin()?
        .instantiate(&config(&dir)?, Limits::default())
        .map_err(|e| format!("{e:#}"))?;
    component.load(&cluster.objects).map_err(|e| format!("{e:#}"))?;
    let mut nodes = cluster.nodes.clone();
    nodes.push("no-such-node".to_string());
    let (mut passed, mut failed) = (0, 0);
    for pod in cluster.pending.iter().take(3) {
        assert!(component.prefilter(pod).is_success());
        for node in &nodes {
            let by_handle = component.filter(node);
            let by_name = component.filter_by_name(node);
            assert_eq!(by_handle, by_name, "filter of {pod} on {node}");
            if by_handle.is_success() {
                passed += 1;
            } else {
                failed += 1;
            }
        }
        for node in &nodes {
            assert_eq!(
                component.score(node),
                component.score_by_name(node),
                "score of {pod} on {node}"
            );
        }
    }
    assert!(
        passed > 0 && failed > 0,
        "the test needs nodes that pass and nodes that fail"
    );
    // An index the guest's table does not hold is an error naming it; after `forget`, the first
    // index is gone until a name is indexed again, and the engine indexes names again.
    let names = nodes.len() as u32;
    let bad = component.filter_by_index(names + 7);
    assert_eq!(bad.code, Code::Error, "{bad}");
    assert!(bad.reason.contains(&format!("node index {}", names + 7)), "{bad}");
    let node = &cluster.nodes[0];
    let before = component.filter(node);
    component.forget_node_indexes().map_err(|s| s.reason)?;
    let stale = component.filter_by_index(1);
    assert!(stale.reason.contains("node index 1 is not"), "{stale}");
    assert_eq!(component.filter(node), before, "filter after forget");
    // Past 65,536 names the engine empties the guest's table: an index given before is gone
    // (without the bound it would name `gone-59999`, a node not found), and names index again.
    for i in 0..65_537 {
        let gone = component.filter(&format!("gone-{i}"));
        assert!(gone.reason.contains("not found"), "{gone}");
    }
    let old = component.filter_by_index(60_000);
    assert!(old.reason.contains("node index 60000 is not"), "{old}");
    assert_eq!(
        component.filter(node),
        before,
        "filter after the table was emptied"
    );
    Ok(())
}
