//! # sharing-affinity-host
//!
//! A wasmtime host for the sharing-affinity plugin and the library behind the `sharing-affinity`
//! CLI: it loads the plugin (natively, as a WebAssembly component, or as a kube-scheduler-wasm-extension
//! core module), replays recorded scheduling cycles and reports decisions, allocations and latency.
//!
//! - [`engine`]: the [`engine::PluginRuntime`] trait every way of running the plugin implements,
//!   over the core's plugin contract
//!   ([`Scheduler`](sharing_affinity_core::contract::Scheduler)).
//! - [`native`]: the core's `Plugin` called directly as an engine (the baseline).
//! - [`component`]: [`component::ComponentEngine`], the WIT component in wasmtime, with time and
//!   memory limits and instance replacement after a trap; [`bindings`] holds the generated code.
//! - [`limits`]: the guests' resource limits (time per call, memory, wasm stack, status reason),
//!   shared by both wasm hosts.
//! - [`kswe`]: a kube-scheduler-wasm-extension host for core modules; [`kswe::KsweEngine`] runs a
//!   KSWE guest (ours, built with `--features scheduler-abi`, or any other) in the replay.
//! - [`artifact`]: finds (or builds with cargo) the guest core modules, each in its own target
//!   directory, and encodes the component one as a component.
//! - [`audit`]: `sharing-affinity audit` and the per-Bind audit trail of `replay --audit`.
//! - [`replay`]: drives a recorded cluster through an engine pod by pod; [`report`] prints the result;
//!   [`html`] writes the explainer's view of it as one file (`replay --output html`).
//! - [`generate`]: a deterministic generator of clusters of any size in the recorded format.
//! - [`simulate`]: native sharing affinity against the driver workaround on one generated workload.

pub mod artifact;
pub mod audit;
pub mod bindings;
pub mod component;
pub mod engine;
pub mod generate;
pub mod html;
pub mod kswe;
pub mod limits;
pub mod native;
pub mod replay;
pub mod report;
pub mod simulate;
