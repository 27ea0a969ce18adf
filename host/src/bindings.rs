//! Generated bindings for the `sharing-affinity:plugin/plugin` world (`wit/plugin.wit`).
//!
//! This module holds the host's only `wasmtime::component::bindgen!`. The world imports nothing, so
//! there is no `Host` trait to implement and nothing to add to the `Linker`; the generated
//! [`Plugin`] struct calls the exports (`call_configure`, `call_update`, `call_filter`, ...) and
//! [`PluginPre`] holds the pre-linked component that [`crate::component`] instantiates from.
//!
//! Types named in the world's `use` (`Status`, `Event`, `EventError`, `ClaimAllocation`, and the
//! `Code` they contain) are generated at this module's root; `EventKind` and `DeviceResult` live in
//! [`sharing_affinity::plugin::types`].

#![allow(missing_docs, reason = "generated code: the WIT file documents every item")]

wasmtime::component::bindgen!({
    path: "../wit",
    world: "plugin",
});
