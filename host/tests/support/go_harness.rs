//! The Go harness (`kswe-harness/`: our KSWE guest in the unmodified kube-scheduler-wasm-extension
//! plugin on wazero) as a test engine: finding the KSWE source, building the harness once per test
//! process, and replaying a cluster with it.
//!
//! The binary and its `go.work` are written under `CARGO_TARGET_TMPDIR/kswe-harness/<test crate>/`:
//! one build per test binary, and two test binaries running at once never overwrite each other's.
//!
//! Needs `go` on the PATH and the source of KSWE's `scheduler` module, which the Go module proxy
//! does not serve: `$KSWE_SRC`, or `../shared/kswe-src/scheduler` beside the repository. Without
//! them [`GoHarness::get`] says why, and the caller prints `SKIPPED: ...` (a `KSWE_SRC` that is not
//! a directory with a `go.mod` fails).

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use serde_json::Value;
use sharing_affinity_host::artifact;

/// Written to stderr directly, not with eprintln!, so libtest does not capture it.
pub fn skipped(why: &str) {
    let _ = writeln!(std::io::stderr(), "SKIPPED: {why}");
}

/// The repository root (this test's, not the one the host library was first built from).
pub fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// The built harness, the KSWE guest it runs, and the `go.work` that builds it.
pub struct GoHarness {
    /// The directory of the Go module.
    pub dir: PathBuf,
    /// The `go.work` pointing the module at the KSWE source.
    pub work: PathBuf,
    /// The KSWE guest core module the workspace's artifact code built.
    pub guest: PathBuf,
    /// The `kswe-harness` binary.
    pub binary: PathBuf,
}

impl GoHarness {
    /// The harness, built on first use; `Err` says why it is not available.
    pub fn get() -> Result<&'static GoHarness, &'static str> {
        static HARNESS: OnceLock<Result<GoHarness, String>> = OnceLock::new();
        HARNESS
            .get_or_init(GoHarness::build)
            .as_ref()
            .map_err(String::as_str)
    }

    fn build() -> Result<GoHarness, String> {
        if Command::new("go").arg("version").output().is_err() {
            return Err("go not found".into());
        }
        let source = kswe_source().ok_or(
            "kube-scheduler-wasm-extension source not found (set KSWE_SRC to its scheduler/ module, or provide \
             ../shared/kswe-src/scheduler; the Go module proxy does not serve it)",
        )?;
        let dir = root()
            .join("kswe-harness")
            .canonicalize()
            .map_err(|e| e.to_string())?;
        let guest = artifact::default_kswe_module().map_err(|e| format!("building the KSWE guest: {e:#}"))?;
        let work = write_go_work(&dir, &source);
        let binary = build_dir().join("kswe-harness");
        let harness = GoHarness {
            dir,
            work,
            guest,
            binary,
        };
        harness.run(
            harness.go().arg("build").arg("-o").arg(&harness.binary).arg("."),
            "go build",
        );
        Ok(harness)
    }

    /// `go` in the module's directory, with the `go.work` and the guest.
    pub fn go(&self) -> Command {
        let mut cmd = Command::new("go");
        cmd.current_dir(&self.dir)
            .env("GOWORK", &self.work)
            .env("KSWE_GUEST", &self.guest);
        cmd
    }

    /// Runs `cmd`, panicking with its output when it fails; returns its stdout.
    pub fn run(&self, cmd: &mut Command, what: &str) -> String {
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

    /// The decisions `kswe-harness replay --timing=false` reports for a scenario directory or
    /// cluster file, with kube-scheduler's asynchronous binding when `asynchronous`.
    ///
    /// `Err` when the harness fails, its report does not parse, or the guest logged anything but
    /// an object it rejected (those are the report's `rejected`), as the Rust engines' tests
    /// require no guest log.
    pub fn replay(&self, path: &Path, asynchronous: bool) -> Result<Value, String> {
        let mut cmd = Command::new(&self.binary);
        cmd.args(["replay", "--timing=false", "--guest"]).arg(&self.guest);
        if asynchronous {
            cmd.arg("--async");
        }
        cmd.arg(path);
        let out = cmd
            .output()
            .map_err(|e| format!("kswe-harness replay: could not run {cmd:?}: {e}"))?;
        let stderr = String::from_utf8_lossy(&out.stderr).trim().to_string();
        if !out.status.success() {
            return Err(format!(
                "{}: kswe-harness replay failed ({}):\n{stderr}",
                path.display(),
                out.status
            ));
        }
        let logged: Vec<&str> = stderr
            .lines()
            .filter(|line| {
                !line.starts_with("warning: rejected ")
                    && !line.starts_with(&format!("plugin log: error: {REJECTED}"))
            })
            .collect();
        if !logged.is_empty() {
            return Err(format!(
                "{}: the guest logged on wazero:\n{}",
                path.display(),
                logged.join("\n")
            ));
        }
        let text = String::from_utf8_lossy(&out.stdout);
        serde_json::from_str(&text).map_err(|e| format!("{}: {e}\n{text}", path.display()))
    }
}

/// What the guest logs for an object it refuses (`kswe-harness/guestlog.go`); the harness prints
/// each such log line and a `warning: rejected` line, and reports the object in `rejected`.
const REJECTED: &str = "sharing-affinity: object rejected";

/// Where this test binary's harness and `go.work` live.
fn build_dir() -> PathBuf {
    Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join("kswe-harness")
        .join(env!("CARGO_CRATE_NAME"))
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

/// A `go.work` in the target directory that points the harness at the KSWE source (absolute
/// paths, so `KSWE_SRC` may live anywhere).
fn write_go_work(harness: &Path, source: &Path) -> PathBuf {
    let dir = build_dir();
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
