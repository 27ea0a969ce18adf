//! # sharing-affinity-host
//!
//! A wasmtime host for the sharing-affinity plugin and the library behind the `sharing-affinity`
//! CLI: it loads the plugin (natively, as a WebAssembly component, or as a kube-scheduler-wasm-extension
//! core module), replays recorded scheduling cycles and reports decisions, allocations and latency.

pub mod engine;
pub mod kswe;
