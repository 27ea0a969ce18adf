//! # sharing-affinity-core
//!
//! The Kubernetes DRA structured allocator with consumable capacity (KEP-5075) and KEP-5981 sharing
//! affinity, as a pure Rust library: no wasm, no bindings, no `unsafe`. The wasm adapters in
//! `plugin/guest` and the native engine in `host/` call the cycle API in [`plugin`].
//!
//! Layers, from the API objects to the scheduler contract:
//! - [`quantity`], [`model`], [`object`]: Kubernetes JSON in, exact quantities, named errors.
//! - [`cel`]: device selectors and affinity extractors with the Kubernetes CEL functions.
//! - [`index`]: the compact internal representation (interned names, device indexes).
//! - [`allocator`] with [`capacity`], [`constraints`], [`counters`], [`affinity`]: the backtracking
//!   allocator for one node and all claims of one pod, with tentative state and rollback.
//! - [`plugin`]: the per-cycle API (prefilter, filter, score, reserve, unreserve, bind) over an
//!   incrementally updated [`plugin::Plugin`] state.
#![forbid(unsafe_code)]

pub mod affinity;
pub mod allocator;
pub mod audit;
pub mod capacity;
pub mod cel;
pub mod constraints;
pub mod counters;
pub mod error;
pub mod index;
pub mod map;
pub mod model;
pub mod node_selector;
pub mod object;
pub mod quantity;
pub mod status;
pub mod taints;

pub use error::Error;
pub use status::{Code, Status};
pub mod plugin;

/// A `HashMap` with the Fx hasher: the allocator's maps are keyed by small integers, which
/// SipHash would dominate (`rustc-hash` without its `std` feature, as cranelift uses it).
pub type FxHashMap<K, V> = std::collections::HashMap<K, V, rustc_hash::FxBuildHasher>;
