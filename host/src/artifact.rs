//! Finding the plugin component: build the guest core module with cargo when needed, and encode it
//! as a component with `wit-component` (no `wasm-tools` install, no WASI adapter).
//!
//! From a fresh clone, [`default_component`] runs
//!
//! ```text
//! cargo build -p sharing-affinity-guest --target wasm32-unknown-unknown --profile wasm --features component
//! ```
//!
//! (cargo itself decides whether anything is stale; a fresh build is a no-op), then encodes
//! `target/wasm32-unknown-unknown/wasm/sharing_affinity_guest.wasm` into
//! `target/wasm32-unknown-unknown/wasm/sharing_affinity_guest.component.wasm` when the component is
//! missing or older than the module. `--plugin FILE.wasm` skips all of this and accepts either a
//! component or a core module (encoded in memory).

use std::path::{Path, PathBuf};
use std::process::Command;

use wasmtime::error::Context;
use wasmtime::{Result, bail, format_err};

/// The guest package that builds the plugin.
pub const GUEST_PACKAGE: &str = "sharing-affinity-guest";
/// The wasm target the guest is built for.
pub const GUEST_TARGET: &str = "wasm32-unknown-unknown";
/// The cargo profile the guest is built with (see `docs/RATIONALE.md`).
pub const GUEST_PROFILE: &str = "wasm";
/// The core module cargo produces, relative to the target directory.
pub const CORE_MODULE: &str = "wasm32-unknown-unknown/wasm/sharing_affinity_guest.wasm";
/// The cached component, relative to the target directory.
pub const COMPONENT: &str = "wasm32-unknown-unknown/wasm/sharing_affinity_guest.component.wasm";

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

/// The cargo command line that builds the guest core module (the same `cargo` that runs this
/// process, when there is one: `$CARGO`).
pub fn build_command() -> Command {
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let mut cmd = Command::new(cargo);
    // Run from the workspace root and name the target directory, so that the module lands where
    // [`target_dir`] looks for it whatever the caller's working directory (tests run in `host/`).
    cmd.current_dir(workspace_root())
        .arg("build")
        .arg("--manifest-path")
        .arg(workspace_root().join("Cargo.toml"))
        .arg("--target-dir")
        .arg(target_dir())
        .args([
            "-p",
            GUEST_PACKAGE,
            "--target",
            GUEST_TARGET,
            "--profile",
            GUEST_PROFILE,
            "--features",
            "component",
        ]);
    cmd
}

/// Builds the guest (cargo skips the work when nothing changed) and returns the path of the
/// component, encoding it first when it is missing or older than the core module.
pub fn default_component() -> Result<PathBuf> {
    let mut cmd = build_command();
    let status = cmd.status().with_context(|| {
        format!("could not run {cmd:?} to build the plugin; build it yourself or pass --plugin FILE.wasm")
    })?;
    if !status.success() {
        bail!(
            "building the plugin failed ({status}): {cmd:?}\n\
             (is the target installed? `rustup target add {GUEST_TARGET}`); or pass --plugin FILE.wasm"
        );
    }
    let target = target_dir();
    let module = target.join(CORE_MODULE);
    let component = target.join(COMPONENT);
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

/// Writes through a temporary file and a rename, so that concurrent readers never see half a file.
fn write_atomically(path: &Path, bytes: &[u8]) -> Result<()> {
    let tmp = path.with_extension(format!("tmp{}", std::process::id()));
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
}
