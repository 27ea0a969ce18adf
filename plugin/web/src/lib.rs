//! Thin wasm-bindgen adapter for the explainer page: one function,
//! [`explain`], that loads a recorded cycle into the core [`Plugin`] and runs each pending pod
//! through PreFilter, Filter on every node, PreScore, Score, Reserve and Bind.
//!
//! Not yet the host's replay loop (host/src/replay.rs, wasmtime-dependent): pods are ordered by
//! creation time then key, nodes by name, and the highest-scoring node wins (ties: first by name).
//! Moving the engine-independent replay into a wasm-free crate both use is the next step.

use serde_json::{Value, json};
use sharing_affinity_core::Status;
use sharing_affinity_core::plugin::Plugin;
use wasm_bindgen::prelude::wasm_bindgen;

/// Explains a recorded cycle: `cluster_json` is the output of the README's `kubectl get ... -o
/// json`, `config_json` the plugin configuration (empty = defaults). Returns a JSON document
/// `{"pods": [{"pod", "node", "status", "reason", "filter": [{"node", "code", "reason"}]}],
/// "rejected": [...], "warnings": [...]}`, or `{"error": ...}`.
#[wasm_bindgen]
pub fn explain(cluster_json: &str, config_json: &str) -> String {
    match run(cluster_json, config_json) {
        Ok(v) => v.to_string(),
        Err(e) => json!({ "error": e }).to_string(),
    }
}

fn status_json(s: &Status) -> Value {
    json!({ "code": s.code.as_str(), "reason": s.reason })
}

/// Pending pods (no `spec.nodeName`), by creation time then `namespace/name`.
fn pending_pods(doc: &Value) -> Vec<String> {
    let items: Vec<&Value> = match doc.get("items").and_then(Value::as_array) {
        Some(items) => items.iter().collect(),
        None => vec![doc],
    };
    let mut pods: Vec<(String, String)> = items
        .into_iter()
        .filter(|o| o.get("kind").and_then(Value::as_str) == Some("Pod"))
        .filter(|o| {
            o.pointer("/spec/nodeName")
                .and_then(Value::as_str)
                .is_none_or(str::is_empty)
        })
        .map(|o| {
            let meta = |f: &str| {
                o.pointer(&format!("/metadata/{f}"))
                    .and_then(Value::as_str)
                    .unwrap_or("")
                    .to_string()
            };
            (
                meta("creationTimestamp"),
                format!("{}/{}", meta("namespace"), meta("name")),
            )
        })
        .collect();
    pods.sort();
    pods.into_iter().map(|(_, k)| k).collect()
}

fn run(cluster_json: &str, config_json: &str) -> Result<Value, String> {
    let mut plugin = Plugin::new(config_json).map_err(|e| format!("invalid plugin configuration: {e}"))?;
    let doc: Value = serde_json::from_str(cluster_json).map_err(|e| format!("cluster JSON: {e}"))?;
    let rejected: Vec<String> = plugin
        .load(cluster_json)
        .map_err(|e| format!("cluster JSON: {e}"))?
        .iter()
        .map(ToString::to_string)
        .collect();
    let nodes = plugin.node_names();
    let mut out = Vec::new();
    for pod in pending_pods(&doc) {
        let pre = plugin.prefilter(&pod);
        if !pre.is_success() {
            out.push(json!({ "pod": pod, "node": null, "status": pre.code.as_str(),
                "reason": pre.reason, "filter": [] }));
            continue;
        }
        let mut filter = Vec::new();
        let mut feasible = Vec::new();
        for node in &nodes {
            let s = plugin.filter(node);
            if s.is_success() {
                feasible.push(node.clone());
            }
            let mut f = status_json(&s);
            f["node"] = json!(node);
            filter.push(f);
        }
        if feasible.is_empty() {
            out.push(json!({ "pod": pod, "node": null, "status": "Unschedulable",
                "reason": format!("0/{} nodes are available", nodes.len()), "filter": filter }));
            continue;
        }
        let _prescore = plugin.prescore(&feasible);
        let mut best: Option<(u32, String)> = None;
        for node in &feasible {
            let score = plugin.score(node).unwrap_or(0);
            if best.as_ref().is_none_or(|(b, _)| score > *b) {
                best = Some((score, node.clone()));
            }
        }
        let Some((_, node)) = best else { continue };
        let decision = match plugin.reserve(&node) {
            Ok(_) => match plugin.bind(&pod, &node) {
                Ok(_) => Status::success(),
                Err(s) => s,
            },
            Err(s) => {
                let _no_reservation = plugin.unreserve(&pod, &node);
                s
            }
        };
        out.push(json!({ "pod": pod,
            "node": if decision.is_success() { json!(node) } else { Value::Null },
            "status": decision.code.as_str(), "reason": decision.reason, "filter": filter }));
    }
    Ok(json!({ "pods": out, "rejected": rejected, "warnings": plugin.take_warnings() }))
}
