//! The KSWE guest in the real, unmodified kube-scheduler-wasm-extension plugin (Go, wazero):
//! runs `go test ./...` in `kswe-harness/` (every scenario against `expected.json`, async binding,
//! the Go `sharing-affinity.dra/v1` module), then replays every scenario with the harness binary
//! and requires the same decisions as our wasmtime KSWE host ([`KsweEngine`]) on the same guest.
//!
//! Needs `go` on the PATH (otherwise it prints `SKIPPED: go not found` and passes) and the source
//! of KSWE's `scheduler` module, which the Go module proxy does not serve: `$KSWE_SRC`, or
//! `../shared/kswe-src/scheduler` beside the repository (otherwise `SKIPPED: ...`; a `KSWE_SRC` that
//! is not a directory fails). The guest is built by the artifact code and handed to Go as
//! `KSWE_GUEST`; the harness never builds it.

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;
use sharing_affinity_host::artifact;
use sharing_affinity_host::engine::Engine;
use sharing_affinity_host::kswe::{KsweEngine, KsweModule};
use sharing_affinity_host::replay::{Cluster, replay, scenario_dirs};
use sharing_affinity_host::report;

/// The exit status of `kswe-harness replay` for a cluster that needs what the Go module does not
/// implement yet.
const NOT_IMPLEMENTED: i32 = 3;

/// Written to stderr directly, not with eprintln!, so libtest does not capture it.
fn skipped(why: &str) {
    let _ = writeln!(std::io::stderr(), "SKIPPED: {why}");
}

fn kswe_source() -> Option<PathBuf> {
    if let Ok(dir) = std::env::var("KSWE_SRC") {
        let dir = PathBuf::from(dir);
        assert!(
            dir.join("go.mod").is_file(),
            "KSWE_SRC={} has no go.mod",
            dir.display()
        );
        return Some(dir);
    }
    let dir = root().join("../shared/kswe-src/scheduler");
    dir.join("go.mod").is_file().then_some(dir)
}

/// The repository root (this test's, not the one the host library was first built from).
fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn go(harness: &Path, work: &Path, guest: &Path) -> Command {
    let mut cmd = Command::new("go");
    cmd.current_dir(harness)
        .env("GOWORK", work)
        .env("KSWE_GUEST", guest);
    cmd
}

/// A `go.work` in the target directory that points the harness at the KSWE source (absolute
/// paths, so `KSWE_SRC` may live anywhere).
fn write_go_work(harness: &Path, source: &Path) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("kswe-harness");
    std::fs::create_dir_all(&dir).unwrap();
    let work = dir.join("go.work");
    let source = source.canonicalize().unwrap();
    std::fs::write(
        &work,
        format!(
            "go 1.25.0\n\nuse {}\n\nreplace sigs.k8s.io/kube-scheduler-wasm-extension/scheduler => {}\n",
            harness.display(),
            source.display()
        ),
    )
    .unwrap();
    work
}

fn run(cmd: &mut Command, what: &str) -> String {
    let out = cmd
        .output()
        .unwrap_or_else(|e| panic!("{what}: could not run {cmd:?}: {e}"));
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "{what} failed ({}):\n{stdout}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
}

fn rust_decisions(module: &KsweModule, dir: &Path) -> Value {
    let config = std::fs::read_to_string(dir.join("config.json")).unwrap_or_default();
    let mut engine = KsweEngine::from_module(module, &config).unwrap();
    let cluster = Cluster::from_file(&dir.join("cluster.json")).unwrap();
    let result = replay(&mut engine, &cluster, &mut || {}).unwrap();
    assert_eq!(engine.traps(), 0, "{}: no trapped call", dir.display());
    assert!(engine.take_logs().is_empty(), "{}: no guest log", dir.display());
    report::decisions(&result)
}

#[test]
fn real_kswe_plugin_decides_as_expected_and_as_our_host() {
    if Command::new("go").arg("version").output().is_err() {
        skipped("go not found");
        return;
    }
    let Some(source) = kswe_source() else {
        skipped(
            "kube-scheduler-wasm-extension source not found (set KSWE_SRC to its scheduler/ module, \
             or provide ../shared/kswe-src/scheduler; the Go module proxy does not serve it)",
        );
        return;
    };
    let harness = root().join("kswe-harness").canonicalize().unwrap();
    let guest = artifact::default_kswe_module().unwrap_or_else(|e| panic!("building the KSWE guest: {e:#}"));
    let work = write_go_work(&harness, &source);

    let tests = run(
        go(&harness, &work, &guest).args(["test", "./..."]),
        "go test ./...",
    );
    print!("{tests}");

    let binary = Path::new(env!("CARGO_TARGET_TMPDIR")).join("kswe-harness/kswe-harness");
    run(
        go(&harness, &work, &guest)
            .arg("build")
            .arg("-o")
            .arg(&binary)
            .arg("."),
        "go build",
    );
    let module = KsweModule::new(&std::fs::read(&guest).unwrap()).unwrap();
    let dirs = scenario_dirs();
    assert!(!dirs.is_empty(), "no scenarios under testdata/");
    for dir in dirs {
        let mut replay = Command::new(&binary);
        replay
            .args(["replay", "--timing=false", "--guest"])
            .arg(&guest)
            .arg(&dir);
        let out = replay
            .output()
            .unwrap_or_else(|e| panic!("kswe-harness replay: could not run {replay:?}: {e}"));
        if out.status.code() == Some(NOT_IMPLEMENTED) {
            // The Go module says what it lacks (KEP-5004's special claims); the scenario is
            // checked against our host by the golden replays.
            skipped(&format!(
                "{}: {}",
                dir.display(),
                String::from_utf8_lossy(&out.stderr).trim()
            ));
            continue;
        }
        assert!(
            out.status.success(),
            "{}: kswe-harness replay failed ({}):\n{}",
            dir.display(),
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
        let out = String::from_utf8_lossy(&out.stdout).into_owned();
        let go: Value =
            serde_json::from_str(&out).unwrap_or_else(|e| panic!("{}: {e}\n{out}", dir.display()));
        let rust = rust_decisions(&module, &dir);
        if go != rust {
            let (g, r) = (
                serde_json::to_string_pretty(&go).unwrap(),
                serde_json::to_string_pretty(&rust).unwrap(),
            );
            panic!(
                "{}: the real KSWE plugin (wazero) and our host (wasmtime) decide differently:\n{}",
                dir.display(),
                similar::TextDiff::from_lines(&r, &g)
                    .unified_diff()
                    .context_radius(3)
                    .header("wasmtime KsweEngine", "KSWE on wazero")
            );
        }
    }
}
