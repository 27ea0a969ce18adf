//! Shared set-up for the criterion benches: scenario discovery over `testdata/*/` and the state the
//! `filter` benches start from.
//!
//! A scenario is benchmarked at its first pending pod: the cluster is loaded, the pod prefiltered,
//! and each node's expected filter code is read from the scenario's `expected.json`, so the bench
//! loop asserts the verdict it measures (a wrong answer fails the bench instead of timing it).

use std::path::{Path, PathBuf};

use sharing_affinity_core::{Code, Status};
use sharing_affinity_host::engine::Engine;
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
pub fn prepare(engine: &mut dyn Engine, scenario: &Scenario) -> Result<(), String> {
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
pub fn filter_checked(engine: &mut dyn Engine, node: &str, expected: Code) {
    let status = engine.filter(node);
    assert_eq!(status.code, expected, "filter on {node}: {status}");
}
