//! # sharing-affinity-guest
//!
//! Thin adapters that compile `sharing-affinity-core` to WebAssembly:
//! - feature `component`: a WIT component (`src/component.rs`, world in `wit/`);
//! - feature `scheduler-abi`: a kube-scheduler-wasm-extension core module (`src/scheduler_abi/`).
//!
//! The features are mutually exclusive. Without either, the crate builds empty so that
//! `cargo test --workspace` links natively.

#[cfg(all(feature = "component", feature = "scheduler-abi"))]
compile_error!(
    "features `component` and `scheduler-abi` are mutually exclusive: build one artefact at a time"
);

#[cfg(feature = "scheduler-abi")]
pub mod scheduler_abi;
