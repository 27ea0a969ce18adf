//! # sharing-affinity-guest
//!
//! Thin adapters that compile `sharing-affinity-core` to WebAssembly:
//! - feature `component`: a WIT component (`src/component.rs`, world `plugin` in `wit/plugin.wit`);
//! - feature `scheduler-abi`: a kube-scheduler-wasm-extension core module (`src/scheduler_abi/`).
//!
//! The features are mutually exclusive. The adapters are compiled only for `wasm32` targets, so
//! without a wasm target (as in `cargo test --workspace`) the crate builds empty and links natively.
//!
//! Building the component (the host's `artifact` module runs this for you when the CLI needs it):
//!
//! ```text
//! cargo build -p sharing-affinity-guest --target wasm32-unknown-unknown --profile wasm --features component
//! ```
//!
//! produces the core module `target/wasm32-unknown-unknown/wasm/sharing_affinity_guest.wasm`, which
//! `wit_component::ComponentEncoder` turns into a component (no WASI adapter: the world imports nothing).

#[cfg(all(feature = "component", feature = "scheduler-abi"))]
compile_error!(
    "features `component` and `scheduler-abi` are mutually exclusive: build one artefact at a time"
);

#[cfg(all(feature = "component", target_arch = "wasm32"))]
mod component;

#[cfg(feature = "scheduler-abi")]
pub mod scheduler_abi;
