//! A kube-scheduler-wasm-extension (KSWE) host on wasmtime core modules.
//!
//! It runs any KSWE guest the way the upstream Go host (`kubernetes-sigs/kube-scheduler-wasm-extension`
//! at `9b2791f`, wazero v1.7.2) does: the four import modules `k8s.io/api`, `k8s.io/scheduler`,
//! `k8s.io/klog` and `wasi_snapshot_preview1` with their exact names, signatures and semantics,
//! the load-time checks with upstream's error texts, `_start` once per instance, the instance pool
//! (one scheduling instance reused across cycles, handed to binding at Permit or PreBind), and
//! failed calls turned into `Error` statuses with upstream's `wasm: <fn> error: ...` text. The
//! reference is `reference/kswe-abi.md`; where this host knowingly differs from upstream, or keeps
//! an upstream bug, `docs/kswe-dra-extension.md` ("Upstream host bugs") says so.
//!
//! On top, it offers the additive import module `sharing-affinity.dra/v1` (a change feed of the
//! cluster's DRA objects and an allocation write-back), backed by a versioned object store
//! ([`store::ObjectStore`]), so a DRA plugin can run as a KSWE guest.
//!
//! Layers: [`abi`] (names, codes, packing) → [`load`] (checks) → [`table`], [`imports`], [`wasi`],
//! [`dra`] (host functions) → [`guest`] (instances) → [`host::KsweHost`] (pool and hooks) →
//! [`cycle`] (a scheduling-cycle driver) → [`engine::KsweEngine`] (a [`crate::engine::PluginRuntime`]).

pub mod abi;
pub mod context;
pub mod cycle;
pub mod dra;
pub mod engine;
pub mod guest;
pub mod host;
pub mod imports;
pub mod load;
pub mod store;
pub mod table;
pub mod trap;
pub mod wasi;

pub use abi::KsweStatus;
pub use engine::KsweEngine;
pub use host::{KsweConfig, KsweHost, KsweModule, PreparedPod, RegisteredEvents, TrapPolicy};
