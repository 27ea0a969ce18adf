//! The engine abstraction: one plugin instance driven through the scheduling cycle, whether it runs
//! natively, as a component, or as a KSWE core module.

use sharing_affinity_core::Status;
use sharing_affinity_core::object::Object;
use sharing_affinity_core::plugin::ClaimAllocation;

/// A plugin instance the replay drives. Engines handle guest traps themselves: a trap or an
/// exhausted budget becomes an `Error` status carrying the trap message, the instance is replaced
/// (with its state restored), and the next call works.
pub trait Engine {
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
    /// Sets the plugin's clock (Unix seconds): the replay's time, before each PreFilter and
    /// Bind.
    fn set_clock(&mut self, unix_seconds: i64);
    /// PreFilter for the pod `namespace/name`.
    fn prefilter(&mut self, pod: &str) -> Status;
    /// Filter for one node.
    fn filter(&mut self, node: &str) -> Status;
    /// PreScore with the feasible nodes (those that passed Filter), before Score. Engines whose
    /// plugin learns the feasible nodes itself (KSWE: the engine runs PreScore as a batch at the
    /// first Score) keep the default.
    fn prescore(&mut self, nodes: &[String]) -> Status {
        let _ = nodes;
        Status::success()
    }
    /// PostFilter after no node passed Filter (or PreFilter rejected the pod); `nodes` are the
    /// nodes the cycle Filtered. Returns the status and the claim (`namespace/name`) whose
    /// allocation the plugin cleared, if any.
    fn postfilter(&mut self, nodes: &[String]) -> (Status, Option<String>);
    /// Score (0..=100) for a feasible node.
    fn score(&mut self, node: &str) -> Result<u32, Status>;
    /// Reserve on the chosen node; returns the allocation per claim.
    fn reserve(&mut self, node: &str) -> Result<Vec<ClaimAllocation>, Status>;
    /// Unreserve after a failure later in the cycle.
    fn unreserve(&mut self, node: &str);
    /// Bind: records the allocation in the plugin's state.
    fn bind(&mut self, node: &str) -> Result<Vec<ClaimAllocation>, Status>;
    /// Whether the engine runs binding cycles apart from scheduling cycles
    /// ([`Engine::permit`] and [`Engine::binding_cycle`]; `--binding async`).
    fn async_binding(&self) -> bool {
        false
    }
    /// Permit on the reserved node: the end of the scheduling cycle when binding is asynchronous.
    fn permit(&mut self, _node: &str) -> Result<(), Status> {
        Ok(())
    }
    /// The binding cycle of `pod` (`namespace/name`) reserved on `node` (PreBind, Bind, PostBind;
    /// Unreserve when it fails), run while a later pod's scheduling cycle is in progress.
    fn binding_cycle(&mut self, pod: &str, node: &str) -> Result<Vec<ClaimAllocation>, Status> {
        let _ = (pod, node);
        Err(Status::error(format!(
            "the {} engine binds synchronously only",
            self.name()
        )))
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
