//! # sharing-affinity-replay
//!
//! The replay of recorded scheduling cycles without a wasm runtime: what the `sharing-affinity`
//! CLI (host/) and the browser's explainer (plugin/web) share, so that both schedule a recording
//! with the same loop and show the same decisions.
//!
//! - [`cluster`]: a recorded cluster (the README's `kubectl get ... -o json`), parsed, with the
//!   pending pods in scheduling order and positions in the input.
//! - [`cycle`]: the scheduling loop over any
//!   [`Scheduler`](sharing_affinity_core::contract::Scheduler), the core's plugin contract: the
//!   core's `Plugin` itself, or a wasm guest in the host.
//! - [`explain`]: the explainer's data: decisions, Filter reasons per node, the lock state of
//!   every shareable device and a node × device grid per pod.
//!
//! No rule of the plugin is implemented here: every decision, lock and device outcome comes from
//! `sharing-affinity-core`.

pub mod cluster;
pub mod cycle;
pub mod explain;
