//! The kube-scheduler-wasm-extension (KSWE) core module: our plugin as a KSWE guest.
//!
//! Built with `cargo build -p sharing-affinity-guest --target wasm32-unknown-unknown --profile wasm
//! --features scheduler-abi`, the module exports `memory`, `_start`, `prefilter`, `filter`,
//! `prescore`, `score`, `reserve`, `unreserve`, `permit`, `prebind`, `bind` (always Skip) and
//! `postbind` with the signatures of `reference/kswe-abi.md` §2.1 (no `normalizescore`: Score
//! normalises over PreScore's `filteredNodeList` itself, because upstream's host copies
//! NormalizeScore's result back by index from a randomly ordered Go map), and imports
//! `k8s.io/scheduler` (`get_config`, `currentPod`, `currentNodeName`, `filteredNodeList`,
//! `result.status_reason`), `k8s.io/klog`
//! (`severity`, `logs`) and the DRA extension `sharing-affinity.dra/v1` (`changes`, `allocation`,
//! `pending_allocation`; see `docs/kswe-dra-extension.md`). No WASI.
//!
//! `bind` and `postbind` are exported although the plugin does not bind: upstream's
//! `maskInterfaces` gives a plugin PreBind only together with Bind (a guest exporting `prebind`
//! without `bind` never has it called), and a plugin with Bind but no `postbind` leaks one instance
//! per bound pod. `bind` returns Skip, so the default binder binds. `permit` is exported so that
//! upstream hands the scheduling instance to the pod's binding cycle at the end of Permit, inside
//! the scheduling cycle; without it the handover happens at PreBind, in kube-scheduler's binding
//! goroutine, after the next pod's PreFilter may already have used the instance.
//!
//! Layout, with every arrow one way (exports → adapter → feed, mem, imports): [`imports`]
//! declares the host's functions and wraps each in a safe function (every `unsafe` block is there;
//! natively, `imports_stub` stands in with the same wrappers over a fake host); [`mem`] the read
//! buffer and retry protocol; [`feed`] the change feed document; [`adapter`] the decode → core →
//! encode logic (the protobuf messages are the `sharing-affinity-kswe-proto` crate, shared with the
//! host); [`exports`] the exported functions, which call the adapter.

#[cfg(target_arch = "wasm32")]
pub mod imports;
#[cfg(not(target_arch = "wasm32"))]
pub mod imports_stub;
#[cfg(not(target_arch = "wasm32"))]
pub use imports_stub as imports;

pub mod adapter;
pub mod exports;
pub mod feed;
pub mod mem;

#[cfg(test)]
mod tests;
