//! The KSWE guest in the real, unmodified kube-scheduler-wasm-extension plugin (Go, wazero):
//! runs `go test ./...` in `kswe-harness/` (every scenario against `expected.json`, async binding,
//! the Go `sharing-affinity.dra/v1` module), then replays every scenario with the harness binary
//! and requires the same decisions as our wasmtime KSWE host ([`KsweEngine`]) on the same guest.
//! The harness hands Pods and Nodes to the guest as Go's `encoding/json` writes its typed objects
//! (`"creationTimestamp": null` where it is unset); each scenario is also replayed rewritten so,
//! every kind (`support/go_written.rs`), and must decide the same.
//!
//! Needs `go` and the KSWE source ([`GoHarness`]); otherwise it prints `SKIPPED: ...` and
//! passes. The guest is built by the artifact code and handed to Go as `KSWE_GUEST`; the harness
//! never builds it.

#[path = "support/go_harness.rs"]
mod go_harness;
#[path = "support/go_written.rs"]
mod go_written;

use std::path::Path;

use go_harness::{GoHarness, skipped};
use serde_json::Value;
use sharing_affinity_host::engine::PluginRuntime;
use sharing_affinity_host::kswe::{KsweEngine, KsweModule};
use sharing_affinity_host::replay::{Cluster, replay, scenario_dirs};
use sharing_affinity_host::report;

fn rust_decisions(module: &KsweModule, dir: &Path) -> Value {
    let config = std::fs::read_to_string(dir.join("config.json")).unwrap_or_default();
    let mut engine = KsweEngine::from_module(module, &config).unwrap();
    let cluster = Cluster::from_file(&dir.join("cluster.json")).unwrap();
    let result = replay(&mut engine, &cluster, &mut || {}).unwrap();
    assert_eq!(engine.traps(), 0, "{}: no trapped call", dir.display());
    assert!(engine.take_logs().is_empty(), "{}: no guest log", dir.display());
    report::decisions(&result)
}

fn compare(what: &str, go: &Value, rust: &Value) {
    if go != rust {
        let (g, r) = (
            serde_json::to_string_pretty(go).unwrap(),
            serde_json::to_string_pretty(rust).unwrap(),
        );
        panic!(
            "{what}: the real KSWE plugin (wazero) and our host (wasmtime) decide differently:\n{}",
            similar::TextDiff::from_lines(&r, &g)
                .unified_diff()
                .context_radius(3)
                .header("wasmtime KsweEngine", "KSWE on wazero")
        );
    }
}

#[test]
fn real_kswe_plugin_decides_as_expected_and_as_our_host() {
    let harness = match GoHarness::get() {
        Ok(h) => h,
        Err(why) => {
            skipped(why);
            return;
        }
    };
    let tests = harness.run(harness.go().args(["test", "-count=1", "./..."]), "go test ./...");
    print!("{tests}");

    let module = KsweModule::new(&std::fs::read(&harness.guest).unwrap()).unwrap();
    let dirs = scenario_dirs();
    assert!(!dirs.is_empty(), "no scenarios under testdata/");
    for dir in dirs {
        let go = harness.replay(&dir, false).unwrap_or_else(|e| panic!("{e}"));
        let rust = rust_decisions(&module, &dir);
        compare(&dir.display().to_string(), &go, &rust);

        let rewritten = std::path::Path::new(env!("CARGO_TARGET_TMPDIR"))
            .join("kswe-harness-go-written")
            .join(dir.file_name().unwrap());
        std::fs::create_dir_all(&rewritten).unwrap();
        let cluster = std::fs::read_to_string(dir.join("cluster.json")).unwrap();
        std::fs::write(rewritten.join("cluster.json"), go_written::go_written(&cluster)).unwrap();
        match std::fs::read(dir.join("config.json")) {
            Ok(config) => std::fs::write(rewritten.join("config.json"), config).unwrap(),
            Err(_) => {
                let _ = std::fs::remove_file(rewritten.join("config.json"));
            }
        }
        let go = harness
            .replay(&rewritten, false)
            .unwrap_or_else(|e| panic!("{e}"));
        compare(&format!("{} written by Go", dir.display()), &go, &rust);
    }
}
