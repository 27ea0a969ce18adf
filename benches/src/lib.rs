//! Shared set-up for the criterion benches: scenario discovery over `testdata/*/` and the state the
//! `filter` benches start from.
//!
//! A scenario is benchmarked at its first pending pod: the cluster is loaded, the pod prefiltered,
//! and each node's expected filter code is read from the scenario's `expected.json`, so the bench
//! loop asserts the verdict it measures (a wrong answer fails the bench instead of timing it).

use std::path::{Path, PathBuf};

use sharing_affinity_core::object::Kind;
use sharing_affinity_core::{Code, Status};
use sharing_affinity_host::engine::PluginRuntime;
use sharing_affinity_host::replay::Cluster;

/// One `testdata/<name>/` directory, parsed.
pub struct Scenario {
    /// The directory name.
    pub name: String,
    /// The directory.
    pub dir: PathBuf,
    /// `cluster.json`.
    pub cluster: Cluster,
    /// `config.json`, or empty.
    pub config: String,
    /// The first pending pod and the filter code `expected.json` gives each node for it.
    pub first_pod: (String, Vec<(String, Code)>),
}

/// The object kinds in the order the per-kind memory examples (`memory`, `heap`) load them:
/// classes, rules and templates first, then nodes, the slices on them, the claims and the pods.
pub const KINDS_IN_LOAD_ORDER: [Kind; 7] = [
    Kind::DeviceClass,
    Kind::DeviceTaintRule,
    Kind::ResourceClaimTemplate,
    Kind::Node,
    Kind::ResourceSlice,
    Kind::ResourceClaim,
    Kind::Pod,
];

/// The testdata directory of the workspace.
pub fn testdata_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..").join("testdata")
}

/// All scenarios that can be benchmarked, sorted by name. Directories without a pending pod whose
/// prefilter succeeds in `expected.json` are skipped with a note on stderr.
pub fn scenarios() -> Vec<Scenario> {
    let dirs = sharing_affinity_host::replay::scenario_dirs();
    dirs.into_iter()
        .filter_map(|dir| match load(&dir) {
            Ok(s) => Some(s),
            Err(why) => {
                eprintln!("skipping {}: {why}", dir.display());
                None
            }
        })
        .collect()
}

fn load(dir: &Path) -> Result<Scenario, String> {
    let name = dir
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let cluster = Cluster::from_file(&dir.join("cluster.json")).map_err(|e| format!("{e:#}"))?;
    let config_path = dir.join("config.json");
    let config = if config_path.is_file() {
        std::fs::read_to_string(&config_path).map_err(|e| format!("{}: {e}", config_path.display()))?
    } else {
        String::new()
    };
    let expected_path = dir.join("expected.json");
    let text =
        std::fs::read_to_string(&expected_path).map_err(|e| format!("{}: {e}", expected_path.display()))?;
    let expected: serde_json::Value =
        serde_json::from_str(&text).map_err(|e| format!("{}: {e}", expected_path.display()))?;
    let first = expected["pods"]
        .get(0)
        .ok_or("expected.json has no pending pod")?;
    let pod = first["pod"]
        .as_str()
        .ok_or("expected.json: pods[0].pod is not a string")?
        .to_string();
    let mut nodes = Vec::new();
    for n in first["nodes"]
        .as_array()
        .ok_or("expected.json: pods[0].nodes is not an array")?
    {
        let node = n["node"]
            .as_str()
            .ok_or("expected.json: a node entry has no name")?;
        let code = n["code"]
            .as_str()
            .and_then(Code::from_name)
            .ok_or("expected.json: a node entry has no valid code")?;
        nodes.push((node.to_string(), code));
    }
    if nodes.is_empty() {
        return Err("the first pod has no nodes to filter".into());
    }
    Ok(Scenario {
        name,
        dir: dir.to_path_buf(),
        cluster,
        config,
        first_pod: (pod, nodes),
    })
}

/// Loads the scenario into `engine` and prefilters its first pod. Fails when prefilter does not
/// succeed (then `expected.json` gives every node the prefilter status and there is no filter to time).
pub fn prepare(engine: &mut dyn PluginRuntime, scenario: &Scenario) -> Result<(), String> {
    engine
        .load(&scenario.cluster.objects)
        .map_err(|e| format!("{e:#}"))?;
    let status: Status = engine.prefilter(&scenario.first_pod.0);
    if status.is_success() {
        Ok(())
    } else {
        Err(format!("prefilter of {}: {status}", scenario.first_pod.0))
    }
}

/// Filters `node` and panics when the code is not the expected one.
pub fn filter_checked(engine: &mut dyn PluginRuntime, node: &str, expected: Code) {
    let status = engine.filter(node);
    assert_eq!(status.code, expected, "filter on {node}: {status}");
}

/// Quick mode (`SA_BENCH_QUICK=1`): small generated clusters only, so that CI can prove the
/// benches work in well under two minutes (`cargo bench ... -- --test`).
pub fn quick() -> bool {
    std::env::var_os("SA_BENCH_QUICK").is_some_and(|v| !v.is_empty() && v != "0")
}

/// The cluster sizes (nodes) of the scale benches: `SA_BENCH_NODES` (comma-separated), else
/// 100, 1,000 and 5,000 (50 in quick mode).
pub fn scale_nodes() -> Vec<usize> {
    if let Some(list) = std::env::var_os("SA_BENCH_NODES") {
        return list
            .to_string_lossy()
            .split(',')
            .map(|n| {
                n.trim()
                    .parse()
                    .expect("SA_BENCH_NODES: comma-separated node counts")
            })
            .collect();
    }
    if quick() {
        vec![50]
    } else {
        vec![100, 1_000, 5_000]
    }
}

/// A generated cluster (the default `nic` profile: half the devices' worth of running pods, 8
/// groups, extractors in metadata slices) with its first pending pod.
pub struct Generated {
    /// `<nodes>x<devices per node>`.
    pub label: String,
    /// The parsed cluster.
    pub cluster: Cluster,
    /// The plugin configuration (empty: extractors are in metadata slices).
    pub config: String,
    /// The first pending pod.
    pub pod: String,
}

/// Generates `nodes × devices_per_node` with 10 pending pods (seed 5981).
pub fn generated(nodes: usize, devices_per_node: usize) -> Generated {
    let spec = sharing_affinity_host::generate::Spec {
        pods: 10,
        ..sharing_affinity_host::generate::Spec::new(nodes, devices_per_node)
    };
    let g = sharing_affinity_host::generate::generate(&spec).expect("generating the cluster");
    let cluster = Cluster::parse(&g.cluster).expect("the generated cluster parses");
    let pod = cluster.pending[0].clone();
    Generated {
        label: format!("{nodes}x{devices_per_node}"),
        cluster,
        config: g.config,
        pod,
    }
}

/// A fresh engine by name (`native`, `component` or `kswe`) with `config`, for the examples;
/// panics on an unknown name or when a guest cannot be built or compiled.
pub fn engine_named(name: &str, config: &str) -> Box<dyn PluginRuntime> {
    use sharing_affinity_host::{artifact, component, kswe, native};
    match name {
        "native" => Box::new(native::plugin(config).expect("native engine")),
        "component" => {
            let path = artifact::default_component().expect("building the component");
            let plugin = component::ComponentPlugin::from_file(&path).expect("compiling the component");
            Box::new(
                plugin
                    .instantiate(config, component::Limits::default())
                    .expect("component engine"),
            )
        }
        "kswe" => {
            let path = artifact::default_kswe_module().expect("building the KSWE guest");
            let wasm = artifact::read_kswe_module(&path).expect("reading the KSWE guest");
            let module = kswe::KsweModule::new(&wasm).expect("compiling the KSWE guest");
            Box::new(kswe::KsweEngine::from_module(&module, config).expect("KSWE engine"))
        }
        other => panic!("engine {other}: expected native, component or kswe"),
    }
}

/// Loads a cluster and panics when an object is rejected.
pub fn load_checked(engine: &mut dyn PluginRuntime, cluster: &Cluster) {
    let rejected = engine.load(&cluster.objects).expect("loading the cluster");
    assert!(rejected.is_empty(), "rejected objects: {rejected:?}");
}

/// One full scheduling cycle without its side effect, in kube-scheduler's order: PreFilter,
/// Filter on every node, PreScore with the feasible ones, Score on each, Reserve on the best
/// (highest score, ties to the first node), then Unreserve, so the next cycle starts from the same
/// state. Returns the node chosen.
pub fn cycle(engine: &mut dyn PluginRuntime, pod: &str, nodes: &[String]) -> Option<String> {
    let status = engine.prefilter(pod);
    assert!(status.is_success(), "prefilter of {pod}: {status}");
    let feasible: Vec<String> = nodes
        .iter()
        .filter(|n| engine.filter(n).is_success())
        .cloned()
        .collect();
    finish_cycle(engine, pod, &feasible)
}

/// The rest of `pod`'s cycle after Filter: PreScore with the `feasible` nodes, Score on each,
/// Reserve on the best (highest score, ties to the first node), then Unreserve. Returns the node
/// chosen (`None` when no node is feasible).
pub fn finish_cycle(engine: &mut dyn PluginRuntime, pod: &str, feasible: &[String]) -> Option<String> {
    if feasible.is_empty() {
        return None;
    }
    let status = engine.prescore(feasible);
    assert!(status.is_success(), "prescore: {status}");
    let mut best: Option<(u32, &String)> = None;
    for node in feasible {
        let score = engine.score(node).expect("score of a feasible node");
        if best.is_none_or(|(b, _)| score > b) {
            best = Some((score, node));
        }
    }
    let (_, node) = best?;
    engine.reserve(node).expect("reserve on the best node");
    engine.unreserve(pod, node).expect("unreserve after reserve");
    Some(node.clone())
}

/// The filter code of every node for the prepared pod, from `engine` (the native engine is the
/// reference the wasm engines are checked against).
pub fn filter_codes(engine: &mut dyn PluginRuntime, nodes: &[String]) -> Vec<(String, Code)> {
    nodes.iter().map(|n| (n.clone(), engine.filter(n).code)).collect()
}
