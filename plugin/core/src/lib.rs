//! # sharing-affinity-core
//!
//! The Kubernetes DRA structured allocator with consumable capacity (KEP-5075) and KEP-5981 sharing
//! affinity, as a pure Rust library: no wasm, no bindings, no `unsafe`. The wasm adapters in
//! `plugin/guest` and the engines in `host/` call [`Plugin`], whose scheduling-cycle calls are the
//! [`contract::Scheduler`] trait. `plugin/ARCHITECTURE.md` maps every file.
//!
//! Layers, from the API objects to the scheduler contract:
//! - [`quantity`], [`model`], [`object`], [`json`]: Kubernetes JSON in, exact quantities, named
//!   errors.
//! - [`cel`]: device selectors and affinity extractors with the Kubernetes CEL functions.
//! - [`index`]: the compact internal representation (interned names, device indexes).
//! - [`affinity`]: KEP-5981 sharing affinity, the rule deciding whether two claims may share a
//!   device (extractors, locks, the allocator-facing constraint, the rank).
//! - [`allocator`] with [`capacity`], [`constraints`], [`counters`]: the backtracking allocator
//!   for one node and all claims of one pod, with tentative state and rollback.
//! - [`config`]: the plugin configuration.
//! - [`plugin`]: [`Plugin`], the façade over the cluster state (objects, index, allocated state,
//!   lock holders; updated by events), the current cycle (PreFilter builds it, Filter reads it)
//!   and the reservations (Reserve, Unreserve, Bind); [`extended`] for KEP-5004.
//! - [`contract`]: the scheduling-cycle calls as one trait, which every engine implements.
#![forbid(unsafe_code)]

pub mod affinity;
pub mod allocator;
pub mod audit;
pub mod binding;
pub mod capacity;
pub mod cel;
pub mod config;
pub mod constraints;
pub mod contract;
pub mod counters;
pub mod error;
pub mod hashing;
pub mod index;
pub mod json;
pub mod map;
pub mod model;
pub mod node_selector;
pub mod object;
pub mod quantity;
pub mod status;
pub mod taints;
pub mod time;

pub use binding::BindingPoll;
pub use error::Error;
pub use hashing::{FxHashMap, FxHashSet, bytes_eq};
pub use plugin::{ClaimAllocation, EventKind, Plugin, PostFilter};
pub use state::{AsNode, NodeName, NodeRef};
pub use status::{Code, Status};

mod cycle;
pub mod extended;
pub mod plugin;
mod reservations;
mod state;
