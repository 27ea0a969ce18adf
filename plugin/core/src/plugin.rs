//! The scheduling-cycle API: the contract the component, the KSWE module and the native host call.
//!
//! SKELETON (signatures are the contract; bodies are being written).

use crate::error::Error;
use crate::model::AllocationResult;
use crate::status::Status;

/// Kind of an object event.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EventKind {
    /// Object created (an existing object is replaced).
    Add,
    /// Object updated (a missing object is created).
    Update,
    /// Object deleted (only kind, namespace and name are read).
    Delete,
}

/// The allocation chosen for one claim of the pod.
#[derive(Clone, Debug, PartialEq)]
pub struct ClaimAllocation {
    /// `namespace/name` of the claim.
    pub claim: String,
    /// What PreBind writes to `status.allocation`.
    pub allocation: AllocationResult,
}

/// Plugin state: the cluster's DRA objects, indexed, plus the current scheduling cycle.
pub struct Plugin {
    _private: (),
}

impl Plugin {
    /// A plugin with the given JSON configuration (`{"sharingAffinity": [...]}`; empty = none).
    pub fn new(config_json: &str) -> Result<Plugin, Error> {
        let _ = config_json;
        todo!()
    }
    /// Applies one object event. The object is Kubernetes JSON.
    pub fn apply(&mut self, kind: EventKind, object_json: &str) -> Result<(), Error> {
        let _ = (kind, object_json);
        todo!()
    }
    /// Loads a document (single object, `List`, or stream) as `Add` events; returns one error per
    /// object that failed (the others load).
    pub fn load(&mut self, json: &str) -> Result<Vec<Error>, Error> {
        let _ = json;
        todo!()
    }
    /// PreFilter for the pod `namespace/name`: resolves its claims and starts a cycle.
    pub fn prefilter(&mut self, pod: &str) -> Status {
        let _ = pod;
        todo!()
    }
    /// Filter for one node of the current cycle.
    pub fn filter(&mut self, node: &str) -> Status {
        let _ = node;
        todo!()
    }
    /// Score (0..=100) for a node that passed Filter in the current cycle.
    pub fn score(&mut self, node: &str) -> Result<u32, Status> {
        let _ = node;
        todo!()
    }
    /// Reserve: commits the allocation Filter computed for `node` as in-flight.
    pub fn reserve(&mut self, node: &str) -> Result<Vec<ClaimAllocation>, Status> {
        let _ = node;
        todo!()
    }
    /// Unreserve: drops the in-flight allocation of the current cycle.
    pub fn unreserve(&mut self, node: &str) {
        let _ = node;
        todo!()
    }
    /// Bind (PreBind): records the reserved allocation in the claims' status and the pod's node.
    pub fn bind(&mut self, node: &str) -> Result<Vec<ClaimAllocation>, Status> {
        let _ = node;
        todo!()
    }
}
