//! Finding the plugin binaries: build the guest core module with cargo when needed, and encode it
//! as a component with `wit-component` (no `wasm-tools` install, no WASI adapter).
//!
//! The guest crate has two adapters, each built into its own cargo target directory: both produce
//! `sharing_affinity_guest.wasm`, and sharing a directory would make each build overwrite (and
//! invalidate) the other.
//!
//! - The component ([`default_component`]): from a fresh clone it runs
//!
//!   ```text
//!   cargo build -p sharing-affinity-guest --target wasm32-unknown-unknown --profile wasm --features component
//!   ```
//!
//!   (cargo itself decides whether anything is stale; a fresh build is a no-op), then encodes
//!   `target/wasm32-unknown-unknown/wasm/sharing_affinity_guest.wasm` into
//!   `target/wasm32-unknown-unknown/wasm/sharing_affinity_guest.component.wasm` when the component is
//!   missing or older than the module. `--plugin FILE.wasm` skips all of this and accepts either a
//!   component or a core module (encoded in memory).
//! - The KSWE core module ([`default_kswe_module`]): the same build with `--features scheduler-abi`
//!   and `--target-dir target/kswe-guest`, giving
//!   `target/kswe-guest/wasm32-unknown-unknown/wasm/sharing_affinity_guest.wasm`.
//!   `--plugin FILE.wasm` with `--engine kswe` takes any KSWE guest core module instead.
//!
//! Between the build and its use, each core module goes through binaryen's `wasm-opt` ([`optimize`]:
//! `-Oz` with the features rustc enabled), which leaves `sharing_affinity_guest.opt.wasm` beside it
//! (the component is encoded from that): 12 % smaller, and faster to load and to run (see binaryen's
//! `wasm-opt` in `docs/PERFORMANCE.md`). The tool is `$SA_WASM_OPT`, or `wasm-opt` on
//! the `PATH`; without one the guest runs as rustc built it, and the host says so once on stderr
//! (`SA_WASM_OPT=off` turns the step off without the warning). A `wasm-opt` that fails is an error.

use std::ffi::{OsStr, OsString};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Mutex, Once};

use wasmtime::error::Context;
use wasmtime::{Result, bail, format_err};

/// The guest package that builds the plugin.
pub const GUEST_PACKAGE: &str = "sharing-affinity-guest";
/// The wasm target the guest is built for.
pub const GUEST_TARGET: &str = "wasm32-unknown-unknown";
/// The cargo profile the guest is built with (see `docs/RATIONALE.md`).
pub const GUEST_PROFILE: &str = "wasm";
/// The core module cargo produces, relative to the guest's target directory.
pub const CORE_MODULE: &str = "wasm32-unknown-unknown/wasm/sharing_affinity_guest.wasm";
/// The cached component encoded from [`CORE_MODULE`], relative to the target directory.
pub const COMPONENT: &str = "wasm32-unknown-unknown/wasm/sharing_affinity_guest.component.wasm";
/// The cached component encoded from [`OPTIMIZED_MODULE`], relative to the target directory.
pub const OPTIMIZED_COMPONENT: &str = "wasm32-unknown-unknown/wasm/sharing_affinity_guest.opt.component.wasm";
/// The KSWE guest's own target directory, relative to the workspace's target directory.
pub const KSWE_TARGET_DIR: &str = "kswe-guest";
/// The core module after `wasm-opt` ([`optimize`]), relative to the guest's target directory.
pub const OPTIMIZED_MODULE: &str = "wasm32-unknown-unknown/wasm/sharing_affinity_guest.opt.wasm";
/// The environment variable that names binaryen's `wasm-opt` (a path, or `off`).
pub const WASM_OPT_ENV: &str = "SA_WASM_OPT";
/// What `wasm-opt` is asked for: the optimisation level, then the WebAssembly features rustc's
/// default CPU for `wasm32-unknown-unknown` enables. The guests are stripped of the
/// `target_features` section that would tell binaryen (`strip = "symbols"`), and binaryen must not
/// emit a feature the input does not use (`--all-features` lets `-Oz` write types wasmtime
/// refuses), so they are named.
pub const WASM_OPT_ARGS: [&str; 7] = [
    "-Oz",
    "--enable-bulk-memory",
    "--enable-sign-ext",
    "--enable-mutable-globals",
    "--enable-nontrapping-float-to-int",
    "--enable-reference-types",
    "--enable-multivalue",
];

/// The two builds of the guest crate.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Guest {
    /// The WIT component adapter (`--features component`), encoded as a component afterwards.
    Component,
    /// The kube-scheduler-wasm-extension core module (`--features scheduler-abi`).
    Kswe,
}

impl Guest {
    /// The cargo feature that selects the adapter.
    pub fn feature(self) -> &'static str {
        match self {
            Guest::Component => "component",
            Guest::Kswe => "scheduler-abi",
        }
    }

    /// The cargo target directory the build uses: [`target_dir`] for the component,
    /// `<target>/kswe-guest` for the KSWE module.
    pub fn target_dir(self) -> PathBuf {
        match self {
            Guest::Component => target_dir(),
            Guest::Kswe => target_dir().join(KSWE_TARGET_DIR),
        }
    }

    /// Where the build leaves the core module.
    pub fn core_module(self) -> PathBuf {
        self.target_dir().join(CORE_MODULE)
    }

    /// Where [`optimize`] leaves the core module after `wasm-opt`.
    pub fn optimized_module(self) -> PathBuf {
        self.target_dir().join(OPTIMIZED_MODULE)
    }
}

/// The workspace root this host was built from.
pub fn workspace_root() -> PathBuf {
    let host = Path::new(env!("CARGO_MANIFEST_DIR"));
    host.parent().unwrap_or(host).to_path_buf()
}

/// The cargo target directory: `$CARGO_TARGET_DIR` (relative to the workspace root) or `target/`.
pub fn target_dir() -> PathBuf {
    match std::env::var_os("CARGO_TARGET_DIR") {
        Some(dir) => workspace_root().join(dir),
        None => workspace_root().join("target"),
    }
}

/// The cargo command line that builds one guest (the same `cargo` that runs this process, when
/// there is one: `$CARGO`).
pub fn build_command(guest: Guest) -> Command {
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let mut cmd = Command::new(cargo);
    // Run from the workspace root and name the target directory, so that the module lands where
    // [`Guest::core_module`] looks for it whatever the caller's working directory (tests run in `host/`).
    cmd.current_dir(workspace_root())
        .arg("build")
        .arg("--manifest-path")
        .arg(workspace_root().join("Cargo.toml"))
        .arg("--target-dir")
        .arg(guest.target_dir())
        .args([
            "-p",
            GUEST_PACKAGE,
            "--target",
            GUEST_TARGET,
            "--profile",
            GUEST_PROFILE,
            "--features",
            guest.feature(),
        ]);
    cmd
}

/// Makes sure the wasm target's standard library is installed, adding it with rustup when it is
/// not (a fresh machine has only the host target). Without rustup, the build below reports it.
pub fn ensure_guest_target() {
    let installed = Command::new("rustup")
        .args(["target", "list", "--installed"])
        .output();
    let Ok(out) = installed else { return };
    if String::from_utf8_lossy(&out.stdout)
        .lines()
        .any(|l| l.trim() == GUEST_TARGET)
    {
        return;
    }
    eprintln!(
        "sharing-affinity: installing the {GUEST_TARGET} target for the plugin (rustup target add {GUEST_TARGET})"
    );
    let added = Command::new("rustup")
        .args(["target", "add", GUEST_TARGET])
        .status();
    if !matches!(added, Ok(s) if s.success()) {
        eprintln!("sharing-affinity: `rustup target add {GUEST_TARGET}` failed; the build will say why");
    }
}

/// Builds one guest (cargo skips the work when nothing changed) and returns its core module.
pub fn build_guest(guest: Guest) -> Result<PathBuf> {
    ensure_guest_target();
    let mut cmd = build_command(guest);
    let status = cmd.status().with_context(|| {
        format!("could not run {cmd:?} to build the plugin; build it yourself or pass --plugin FILE.wasm")
    })?;
    if !status.success() {
        bail!(
            "building the plugin failed ({status}): {cmd:?}\n\
             (is the target installed? `rustup target add {GUEST_TARGET}`); or pass --plugin FILE.wasm"
        );
    }
    let module = guest.core_module();
    if !module.is_file() {
        bail!(
            "the guest build succeeded but did not produce {}",
            module.display()
        );
    }
    Ok(module)
}

/// Where binaryen's optimizer comes from, for [`optimize`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Optimizer {
    /// Run this `wasm-opt`.
    WasmOpt(OsString),
    /// `SA_WASM_OPT=off`: the guest runs as rustc built it.
    Off,
    /// No `SA_WASM_OPT` and no `wasm-opt` on the `PATH`: the guest runs as rustc built it, and
    /// the host says so.
    NotFound,
}

impl Optimizer {
    /// The optimizer `SA_WASM_OPT` names (`setting`), else `wasm-opt` when `runs` says it runs.
    pub fn choose(setting: Option<OsString>, runs: impl FnOnce(&OsStr) -> bool) -> Optimizer {
        match setting {
            Some(s) if s == "off" => Optimizer::Off,
            Some(tool) => Optimizer::WasmOpt(tool),
            None if runs(OsStr::new("wasm-opt")) => Optimizer::WasmOpt("wasm-opt".into()),
            None => Optimizer::NotFound,
        }
    }

    /// This process's optimizer: `$SA_WASM_OPT`, else `wasm-opt` if `wasm-opt --version` runs.
    pub fn from_env() -> Optimizer {
        Optimizer::choose(std::env::var_os(WASM_OPT_ENV), |tool| {
            Command::new(tool)
                .arg("--version")
                .output()
                .is_ok_and(|out| out.status.success())
        })
    }
}

/// Runs `tool` ([`WASM_OPT_ARGS`]) on `module`, writing `out` (through a temporary file and a
/// rename). A tool that does not start or fails is an error naming it, the module and its stderr.
pub fn run_wasm_opt(tool: &OsStr, module: &Path, out: &Path) -> Result<()> {
    let tmp = temporary(out);
    let result = Command::new(tool)
        .args(WASM_OPT_ARGS)
        .arg(module)
        .arg("-o")
        .arg(&tmp)
        .output();
    let failed = |why: String| {
        let _ = std::fs::remove_file(&tmp);
        format_err!(
            "optimizing {} with {} (binaryen; ${WASM_OPT_ENV}, or `wasm-opt` on the PATH): {why}; \
             set {WASM_OPT_ENV}=off to run the guest as rustc built it",
            module.display(),
            tool.to_string_lossy()
        )
    };
    match result {
        Err(e) => Err(failed(e.to_string())),
        Ok(out) if !out.status.success() => Err(failed(format!(
            "{}: {}",
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        ))),
        Ok(_) => std::fs::rename(&tmp, out)
            .with_context(|| format!("renaming {} to {}", tmp.display(), out.display())),
    }
}

/// The module the host runs for `guest`: `module` (the build's) after `wasm-opt`, kept as
/// [`Guest::optimized_module`] and made again when it is missing or older than `module`; or
/// `module` itself when there is no optimizer (see the [module docs](self)).
pub fn optimize(guest: Guest, module: PathBuf) -> Result<PathBuf> {
    match Optimizer::from_env() {
        Optimizer::WasmOpt(tool) => {
            let out = guest.optimized_module();
            if !is_fresh(&out, &module)? {
                run_wasm_opt(&tool, &module, &out)?;
            }
            Ok(out)
        }
        Optimizer::Off => Ok(module),
        Optimizer::NotFound => {
            static WARNING: Once = Once::new();
            WARNING.call_once(|| {
                eprintln!(
                    "sharing-affinity: binaryen's wasm-opt is not on the PATH: the plugin runs as rustc \
                     built it (14 % larger, slower to load); install binaryen, set \
                     {WASM_OPT_ENV}=/path/to/wasm-opt, or {WASM_OPT_ENV}=off to silence this"
                );
            });
            Ok(module)
        }
    }
}

/// One guest prepared at a time in this process: tests ask for the same guest from several
/// threads, and each would otherwise run `wasm-opt` (seconds) and the component encoding again.
static PREPARING: Mutex<()> = Mutex::new(());

/// Builds the guest (cargo skips the work when nothing changed), optimizes it ([`optimize`]) and
/// returns the path of the component, encoding it first when it is missing or older than the core
/// module it comes from.
pub fn default_component() -> Result<PathBuf> {
    let _one = PREPARING.lock().unwrap_or_else(|e| e.into_inner());
    let module = optimize(Guest::Component, build_guest(Guest::Component)?)?;
    // `x.wasm` → `x.component.wasm`: one cache per module, so that switching the optimizer off
    // and on never runs a component encoded from the other module.
    let component = module.with_extension("component.wasm");
    if is_fresh(&component, &module)? {
        return Ok(component);
    }
    let core =
        std::fs::read(&module).with_context(|| format!("reading the guest module {}", module.display()))?;
    let bytes =
        encode_component(&core).with_context(|| format!("encoding {} as a component", module.display()))?;
    write_atomically(&component, &bytes)?;
    Ok(component)
}

/// The component [`default_component`] prepared last (the newer of [`OPTIMIZED_COMPONENT`] and
/// [`COMPONENT`]), without building anything: for callers that cannot run cargo (the fuzz targets).
pub fn prepared_component() -> Option<PathBuf> {
    let dir = Guest::Component.target_dir();
    [dir.join(OPTIMIZED_COMPONENT), dir.join(COMPONENT)]
        .into_iter()
        .filter_map(|p| Some((std::fs::metadata(&p).and_then(|m| m.modified()).ok()?, p)))
        .max_by_key(|(time, _)| *time)
        .map(|(_, p)| p)
}

/// Builds the KSWE guest in its own target directory (cargo skips the work when nothing changed),
/// optimizes it ([`optimize`]) and returns the path of the core module to run.
pub fn default_kswe_module() -> Result<PathBuf> {
    let _one = PREPARING.lock().unwrap_or_else(|e| e.into_inner());
    optimize(Guest::Kswe, build_guest(Guest::Kswe)?)
}

/// Reads a KSWE guest: a core module. A component, or bytes that are not WebAssembly, are errors
/// naming the file.
pub fn read_kswe_module(path: &Path) -> Result<Vec<u8>> {
    let bytes = std::fs::read(path).with_context(|| format!("reading plugin {}", path.display()))?;
    match wasm_kind(&bytes) {
        Some(WasmKind::CoreModule) => Ok(bytes),
        Some(WasmKind::Component) => bail!(
            "plugin {}: a WebAssembly component; --engine kswe runs kube-scheduler-wasm-extension \
             core modules (use --engine component for components)",
            path.display()
        ),
        None => bail!(
            "plugin {}: not a WebAssembly binary (bad magic number or version)",
            path.display()
        ),
    }
}

/// Reads a plugin file: a component is returned as is, a core module is encoded as a component.
pub fn read_plugin(path: &Path) -> Result<Vec<u8>> {
    let bytes = std::fs::read(path).with_context(|| format!("reading plugin {}", path.display()))?;
    match wasm_kind(&bytes) {
        Some(WasmKind::Component) => Ok(bytes),
        Some(WasmKind::CoreModule) => encode_component(&bytes)
            .with_context(|| format!("encoding plugin {} as a component", path.display())),
        None => bail!(
            "plugin {}: not a WebAssembly binary (bad magic number or version)",
            path.display()
        ),
    }
}

/// The two kinds of WebAssembly binary, told apart by their preamble.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WasmKind {
    /// A core module (`\0asm`, version 1, layer 0).
    CoreModule,
    /// A component (`\0asm`, layer 1).
    Component,
}

/// The kind of a WebAssembly binary, or `None` when the bytes are not one.
pub fn wasm_kind(bytes: &[u8]) -> Option<WasmKind> {
    match bytes.get(..8)? {
        [0, b'a', b's', b'm', 1, 0, 0, 0] => Some(WasmKind::CoreModule),
        [0, b'a', b's', b'm', _, _, 1, 0] => Some(WasmKind::Component),
        _ => None,
    }
}

/// Encodes a core module built by `wit-bindgen` (it embeds the world as a custom section) as a
/// validated component.
pub fn encode_component(core: &[u8]) -> Result<Vec<u8>> {
    let mut encoder = wit_component::ComponentEncoder::default();
    encoder
        .validate(true)
        .module(core)
        .map_err(|e| format_err!("{e:#}"))?;
    encoder.encode().map_err(|e| format_err!("{e:#}"))
}

fn is_fresh(component: &Path, module: &Path) -> Result<bool> {
    let modified = |p: &Path| std::fs::metadata(p).and_then(|m| m.modified());
    let module_time =
        modified(module).with_context(|| format!("the guest build did not produce {}", module.display()))?;
    Ok(modified(component).is_ok_and(|t| t >= module_time))
}

/// A temporary name beside `path`, for this process.
fn temporary(path: &Path) -> PathBuf {
    path.with_extension(format!("tmp{}", std::process::id()))
}

/// Writes through a temporary file and a rename, so that concurrent readers never see half a file.
fn write_atomically(path: &Path, bytes: &[u8]) -> Result<()> {
    let tmp = temporary(path);
    std::fs::write(&tmp, bytes).with_context(|| format!("writing {}", tmp.display()))?;
    std::fs::rename(&tmp, path)
        .with_context(|| format!("renaming {} to {}", tmp.display(), path.display()))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tells_modules_from_components() {
        let cases: &[(&[u8], Option<WasmKind>, &str)] = &[
            (
                b"\0asm\x01\0\0\0",
                Some(WasmKind::CoreModule),
                "core module preamble",
            ),
            (
                b"\0asm\x0d\0\x01\0",
                Some(WasmKind::Component),
                "component preamble",
            ),
            (b"\0asm\x01\0", None, "truncated"),
            (b"\x7fELF\x02\x01\x01\0", None, "not wasm"),
        ];
        for (bytes, expected, msg) in cases {
            assert_eq!(wasm_kind(bytes), *expected, "{msg}");
        }
    }

    #[test]
    fn rejects_files_that_are_not_wasm() {
        let path =
            std::env::temp_dir().join(format!("sharing-affinity-not-wasm-{}.wasm", std::process::id()));
        std::fs::write(&path, b"hello").unwrap();
        let err = read_plugin(&path).unwrap_err().to_string();
        std::fs::remove_file(&path).unwrap();
        assert!(err.contains("not a WebAssembly binary"), "{err}");
    }

    fn temp_file(tag: &str, bytes: &[u8]) -> PathBuf {
        let path = std::env::temp_dir().join(format!("sharing-affinity-{tag}-{}.wasm", std::process::id()));
        std::fs::write(&path, bytes).unwrap();
        path
    }

    #[test]
    fn kswe_plugins_must_be_core_modules() {
        let cases: &[(&str, &[u8], Option<&str>)] = &[
            ("core", b"\0asm\x01\0\0\0", None),
            ("component", b"\0asm\x0d\0\x01\0", Some("a WebAssembly component")),
            ("text", b"hello", Some("not a WebAssembly binary")),
        ];
        for (tag, bytes, error) in cases {
            let path = temp_file(&format!("kswe-{tag}"), bytes);
            let result = read_kswe_module(&path);
            std::fs::remove_file(&path).unwrap();
            match (result, error) {
                (Ok(read), None) => assert_eq!(read, *bytes, "{tag}"),
                (Err(e), Some(expected)) => {
                    let e = e.to_string();
                    assert!(
                        e.contains(expected) && e.contains(&*path.to_string_lossy()),
                        "{tag}: {e}"
                    );
                }
                (result, _) => panic!("{tag}: unexpected {:?}", result.map(|b| b.len())),
            }
        }
        let missing = read_kswe_module(Path::new("/nonexistent/guest.wasm")).unwrap_err();
        assert!(
            format!("{missing:#}").contains("/nonexistent/guest.wasm"),
            "{missing:#}"
        );
    }

    #[test]
    fn the_two_guests_build_into_separate_target_dirs() {
        // Both builds produce `sharing_affinity_guest.wasm`; one directory would make them overwrite
        // each other and rebuild every time the other engine ran.
        assert_ne!(Guest::Component.core_module(), Guest::Kswe.core_module());
        assert_eq!(Guest::Kswe.target_dir(), target_dir().join(KSWE_TARGET_DIR));
        for (guest, feature) in [(Guest::Component, "component"), (Guest::Kswe, "scheduler-abi")] {
            let cmd = build_command(guest);
            let args: Vec<_> = cmd.get_args().map(|a| a.to_string_lossy().into_owned()).collect();
            let after = |flag: &str| {
                args.iter()
                    .position(|a| a == flag)
                    .and_then(|i| args.get(i + 1))
                    .cloned()
            };
            assert_eq!(
                after("--features").as_deref(),
                Some(feature),
                "{guest:?}: {args:?}"
            );
            assert_eq!(after("--target").as_deref(), Some(GUEST_TARGET), "{guest:?}");
            assert_eq!(after("--profile").as_deref(), Some(GUEST_PROFILE), "{guest:?}");
            assert_eq!(
                after("--target-dir").map(PathBuf::from),
                Some(guest.target_dir()),
                "{guest:?}"
            );
        }
    }

    #[test]
    fn the_optimizer_is_the_setting_then_wasm_opt_on_the_path() {
        let found = |tool: &OsStr| tool == "wasm-opt";
        let missing = |_: &OsStr| false;
        let wasm_opt = Optimizer::WasmOpt("wasm-opt".into());
        assert_eq!(Optimizer::choose(None, found), wasm_opt);
        assert_eq!(Optimizer::choose(None, missing), Optimizer::NotFound);
        assert_eq!(Optimizer::choose(Some("off".into()), found), Optimizer::Off);
        // A named tool is used as named: whether it runs is found out when it is run.
        let named = Optimizer::WasmOpt("/opt/binaryen/bin/wasm-opt".into());
        assert_eq!(
            Optimizer::choose(Some("/opt/binaryen/bin/wasm-opt".into()), missing),
            named
        );
        // The optimized module and its component have names of their own beside the build's.
        for guest in [Guest::Component, Guest::Kswe] {
            assert_ne!(guest.optimized_module(), guest.core_module());
            assert_eq!(guest.optimized_module().parent(), guest.core_module().parent());
        }
        let dir = Guest::Component.target_dir();
        assert_eq!(
            dir.join(CORE_MODULE).with_extension("component.wasm"),
            dir.join(COMPONENT)
        );
        assert_eq!(
            dir.join(OPTIMIZED_MODULE).with_extension("component.wasm"),
            dir.join(OPTIMIZED_COMPONENT)
        );
    }

    #[cfg(unix)]
    #[test]
    fn a_wasm_opt_that_fails_is_an_error_naming_it_and_the_module() {
        use std::os::unix::fs::PermissionsExt as _;
        let module = temp_file("opt-in", b"\0asm\x01\0\0\0");
        let out = module.with_extension("out.wasm");
        // A tool that runs and fails: its status and its stderr are in the error.
        let failing = temp_file("opt-tool", b"#!/bin/sh\necho 'bad input' >&2\nexit 3\n");
        std::fs::set_permissions(&failing, std::fs::Permissions::from_mode(0o755)).unwrap();
        let cases: [(&OsStr, &[&str]); 2] = [
            (failing.as_os_str(), &["exit status: 3", "bad input"]),
            // A tool that does not start.
            (OsStr::new("/nonexistent/wasm-opt"), &["/nonexistent/wasm-opt"]),
        ];
        for (tool, expected) in cases {
            let e = format!("{:#}", run_wasm_opt(tool, &module, &out).unwrap_err());
            for part in expected
                .iter()
                .chain(&[&*module.to_string_lossy(), "SA_WASM_OPT=off"])
            {
                assert!(e.contains(part), "{tool:?}: {part:?} not in {e}");
            }
            assert!(!out.exists(), "{tool:?}: no output is left behind");
            assert!(
                !temporary(&out).exists(),
                "{tool:?}: no temporary file is left behind"
            );
        }
        std::fs::remove_file(&failing).unwrap();
        std::fs::remove_file(&module).unwrap();
    }
}
