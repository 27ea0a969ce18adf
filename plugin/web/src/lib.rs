//! Thin wasm-bindgen adapter for the explainer page (web/): the recorded cluster is parsed,
//! replayed and explained by `sharing-affinity-replay`, the same code the `sharing-affinity` CLI
//! runs, with the core compiled in. Each export takes JSON text and returns JSON text; a failure
//! is `{"error": "..."}`.

use serde_json::json;
use sharing_affinity_replay::cluster::Cluster;
use sharing_affinity_replay::explain;
use wasm_bindgen::prelude::wasm_bindgen;

/// The grid cells [`explain()`] computes in advance (nodes × device names, summed over pods); the
/// page asks [`grid`] for the pods past it.
pub const GRID_CELLS: usize = 50_000;

/// Explains a recorded cluster: `cluster_json` is the output of the README's `kubectl get ... -o
/// json`, `config_json` the plugin configuration (empty = defaults). Returns the
/// [`explain::Explanation`] as JSON, with the grids of the pods that fit in [`GRID_CELLS`].
#[wasm_bindgen]
pub fn explain(cluster_json: &str, config_json: &str) -> String {
    answer(
        Cluster::parse(cluster_json)
            .map_err(|e| e.to_string())
            .and_then(|cluster| explain::explain_with_grids(&cluster, config_json, GRID_CELLS)),
    )
}

/// The node × device grid for one pending pod (`namespace/name`) as JSON ([`explain::Grid`]).
#[wasm_bindgen]
pub fn grid(cluster_json: &str, config_json: &str, pod: &str) -> String {
    answer(
        Cluster::parse(cluster_json)
            .map_err(|e| e.to_string())
            .and_then(|cluster| explain::grid(&cluster, config_json, pod)),
    )
}

/// The value as JSON, or `{"error": ...}`.
fn answer<T: serde::Serialize>(result: Result<T, String>) -> String {
    match result.and_then(|value| serde_json::to_string(&value).map_err(|e| e.to_string())) {
        Ok(json) => json,
        Err(error) => json!({ "error": error }).to_string(),
    }
}
