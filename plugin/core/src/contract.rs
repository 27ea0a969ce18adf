//! The plugin contract: [`Scheduler`], the calls kube-scheduler makes into one plugin instance in
//! a scheduling cycle, whichever way the plugin runs. [`Plugin`] implements it natively; the
//! host's component and KSWE engines implement it over a wasm guest; the replay loop
//! (`sharing-affinity-replay`) drives any of them through `&mut dyn Scheduler`.
//!
//! Loading objects, logs and guest memory are not part of it: how objects reach a plugin differs
//! per runtime (the host adds them in its own trait over this one).

use crate::binding::BindingPoll;
use crate::plugin::{ClaimAllocation, Plugin};
use crate::status::Status;

/// The scheduling-cycle calls of one plugin instance, in kube-scheduler's order: PreFilter,
/// Filter per node, PreScore and Score on the feasible nodes (or PostFilter when none is), Reserve,
/// then Bind, or Unreserve after a failure; with asynchronous binding, Permit ends the scheduling
/// cycle and [`Scheduler::binding_cycle`] runs later.
///
/// An implementation that runs a wasm guest turns a trap or an exhausted budget into an `Error`
/// status carrying the trap message, and the next call works.
pub trait Scheduler {
    /// Sets the plugin's clock (Unix seconds), as the host's clock reads it.
    fn set_time(&mut self, unix_seconds: i64);
    /// PreFilter for the pod `namespace/name`: the start of its cycle.
    fn prefilter(&mut self, pod: &str) -> Status;
    /// Filter for one node.
    fn filter(&mut self, node: &str) -> Status;
    /// PreScore with the feasible nodes (those that passed Filter), before Score. An engine whose
    /// plugin learns the feasible nodes itself (KSWE: the engine runs PreScore as a batch at the
    /// first Score) keeps the default.
    fn prescore(&mut self, nodes: &[String]) -> Status {
        let _ = nodes;
        Status::success()
    }
    /// PostFilter for `pod` after no node passed Filter (or PreFilter rejected the pod); `nodes`
    /// are the nodes the cycle Filtered. Returns the status and the claim (`namespace/name`)
    /// whose allocation the plugin cleared, if any.
    fn postfilter(&mut self, pod: &str, nodes: &[String]) -> (Status, Option<String>);
    /// Score (0..=100) for a feasible node.
    fn score(&mut self, node: &str) -> Result<u32, Status>;
    /// Reserve on the chosen node; returns the allocation per claim.
    fn reserve(&mut self, node: &str) -> Result<Vec<ClaimAllocation>, Status>;
    /// Unreserve `pod` on `node` after a failure later in the cycle. An error (the pod holds no
    /// reservation, as after a failed Reserve, which kube-scheduler unreserves too) is only
    /// logged: the cycle has failed already.
    fn unreserve(&mut self, pod: &str, node: &str) -> Result<(), Status>;
    /// Bind (PreBind) `pod` on `node`: records the allocation in the plugin's state, then waits
    /// for the binding conditions of the pod's devices ([`crate::binding`]). A wait that fails
    /// leaves the pod out of its claims' `status.reservedFor` (the allocations stay) and returns
    /// the `Error`.
    fn bind(&mut self, pod: &str, node: &str) -> Result<Vec<ClaimAllocation>, Status>;
    /// Permit on the reserved node: the end of the scheduling cycle when binding is asynchronous.
    fn permit(&mut self, node: &str) -> Result<(), Status> {
        let _ = node;
        Ok(())
    }
    /// The binding cycle of `pod` (`namespace/name`) reserved on `node` (PreBind, Bind, PostBind;
    /// Unreserve when it fails), run while a later pod's scheduling cycle is in progress. The
    /// default binds synchronously only and says so.
    fn binding_cycle(&mut self, pod: &str, node: &str) -> Result<Vec<ClaimAllocation>, Status> {
        let _ = (pod, node);
        Err(Status::error("the engine binds synchronously only"))
    }
}

/// The core itself, with no wasm in between: each call is the [`Plugin`] method of the same name.
impl Scheduler for Plugin {
    fn set_time(&mut self, unix_seconds: i64) {
        Plugin::set_time(self, unix_seconds);
    }

    fn prefilter(&mut self, pod: &str) -> Status {
        Plugin::prefilter(self, pod)
    }

    fn filter(&mut self, node: &str) -> Status {
        Plugin::filter(self, node)
    }

    fn prescore(&mut self, nodes: &[String]) -> Status {
        Plugin::prescore(self, nodes)
    }

    fn postfilter(&mut self, pod: &str, _nodes: &[String]) -> (Status, Option<String>) {
        // The plugin clears the claim in its own state: nothing else holds it.
        let answer = Plugin::postfilter(self, pod);
        (answer.status, answer.deallocate.map(|(claim, _)| claim))
    }

    fn score(&mut self, node: &str) -> Result<u32, Status> {
        Plugin::score(self, node)
    }

    fn reserve(&mut self, node: &str) -> Result<Vec<ClaimAllocation>, Status> {
        Plugin::reserve(self, node)
    }

    fn unreserve(&mut self, pod: &str, node: &str) -> Result<(), Status> {
        Plugin::unreserve(self, pod, node)
    }

    /// Nothing changes the objects while the wait runs: each wait advances the plugin's clock.
    fn bind(&mut self, pod: &str, node: &str) -> Result<Vec<ClaimAllocation>, Status> {
        let bound = Plugin::bind(self, pod, node)?;
        let mut polls = 0;
        loop {
            match self.binding_poll(pod, polls) {
                BindingPoll::Ready => return Ok(bound),
                BindingPoll::Wait(seconds) => {
                    if let Some(now) = self.now() {
                        Plugin::set_time(self, now.saturating_add(i64::from(seconds)));
                    }
                    polls += 1;
                }
                BindingPoll::Failed(status) => {
                    self.unbind(pod);
                    return Err(status);
                }
            }
        }
    }
}
