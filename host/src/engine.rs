//! What the host needs of an engine beyond the plugin contract: one plugin instance, whether it
//! runs natively, as a component, or as a KSWE core module.
//!
//! The scheduling-cycle calls are the core's [`Scheduler`] trait, which every engine implements
//! (the core's `Plugin` natively, `host/src/native.rs`); [`PluginRuntime`] adds loading objects,
//! logs and guest memory, which differ per way of running the plugin.

use sharing_affinity_core::contract::Scheduler;
use sharing_affinity_core::object::Object;

/// A plugin instance the replay drives: the core's [`Scheduler`] calls, plus what the host does
/// around them. Engines handle guest traps themselves: a trap or an exhausted budget becomes an
/// `Error` status carrying the trap message, the instance is replaced (with its state restored),
/// and the next call works.
pub trait PluginRuntime: Scheduler {
    /// Short engine name for reports (`native`, `component`, `kswe`).
    fn name(&self) -> &'static str;
    /// Loads objects as `Add` events; returns one message per object the plugin rejected.
    fn load(&mut self, objects: &[Object]) -> wasmtime::Result<Vec<String>>;
    /// Hands the plugin, as `Add` events, objects (JSON text) that it rejects: it records them,
    /// and names them where a decision misses them ("node worker-1 was rejected: ...").
    /// The default takes none: an engine that has no way to hand them over says so.
    fn load_refused(&mut self, objects: &[String]) -> wasmtime::Result<()> {
        match objects.len() {
            0 => Ok(()),
            n => Err(wasmtime::format_err!(
                "the {} engine cannot hand the plugin the {n} objects it rejects",
                self.name()
            )),
        }
    }
    /// Whether the engine runs binding cycles apart from scheduling cycles
    /// ([`Scheduler::permit`] and [`Scheduler::binding_cycle`]; `--binding async`).
    fn async_binding(&self) -> bool {
        false
    }
    /// Messages the plugin logged since the last call, one line each (a KSWE guest logs through
    /// `k8s.io/klog`, for example the objects it refused); engines without a log return none.
    fn take_logs(&mut self) -> Vec<String> {
        Vec::new()
    }
    /// The size of the guest's linear memory in bytes (it only grows, so this is its peak; for
    /// several instances, the largest); `None` for engines without a guest.
    fn guest_memory_bytes(&mut self) -> Option<u64> {
        None
    }
}
