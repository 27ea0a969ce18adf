//! The plugin: the scheduling-cycle API the component, the KSWE module and the native host
//! call, as a thin façade over the three parts of its state, shaped like the framework's:
//! - `ClusterState` (`crate::state`): the objects, the slice index, the allocated state and the
//!   sharing-affinity locks, updated by object events ([`Plugin::apply`]);
//! - the current cycle (`crate::cycle`), which PreFilter builds from the state and Filter only
//!   reads;
//! - the reservations (`crate::reservations`): the in-flight pods between Reserve and Bind.
//!
//! Per pod the scheduler calls [`Plugin::prefilter`] once, then [`Plugin::filter`] per node,
//! [`Plugin::score`] per feasible node, [`Plugin::reserve`] on the chosen node, and
//! [`Plugin::bind`] (what PreBind writing `status.allocation` does) or [`Plugin::unreserve`];
//! [`Plugin::postfilter`] when no node fits. As in kube-scheduler, pod A's binding cycle (Bind
//! or Unreserve) may run while pod B's scheduling cycle is in progress: Bind and Unreserve name
//! the pod they are for.

use crate::affinity::LockState;
use crate::binding::BindingPoll;
pub use crate::cycle::PostFilter;
pub use crate::reservations::ClaimAllocation;
pub use crate::state::EventKind;

use crate::cycle::Cycle;
use crate::cycle::results::NodeResults;
use crate::error::Error;
use crate::index::DeviceKey;
use crate::model::{Pod, ResourceClaim};
use crate::object::Object;
use crate::reservations::Reservations;
use crate::state::{AsNode, ClusterState};
use crate::status::Status;

/// The DRA scheduler plugin with sharing affinity.
pub struct Plugin {
    state: ClusterState,
    cycle: Option<Cycle>,
    /// The results of the last cycle after Bind ended it, for the next cycle to write over
    /// ([`NodeResults`]).
    spare_results: NodeResults,
    reservations: Reservations,
}

impl Plugin {
    /// A plugin with the given JSON configuration (`{"sharingAffinity": [...]}`; empty = none).
    pub fn new(config_json: &str) -> Result<Plugin, Error> {
        Ok(Plugin {
            state: ClusterState::new(config_json)?,
            cycle: None,
            spare_results: NodeResults::default(),
            reservations: Reservations::default(),
        })
    }

    /// Sets the current time (Unix seconds), as the host's clock reads it. Hosts set it before
    /// each PreFilter and Bind. Until it is set no binding times out and Bind stamps no
    /// `allocationTimestamp`.
    pub fn set_time(&mut self, unix_seconds: i64) {
        self.state.now = Some(unix_seconds);
    }

    /// The time the host last gave ([`Plugin::set_time`]), in Unix seconds.
    pub fn now(&self) -> Option<i64> {
        self.state.now
    }

    /// Applies one object event. The object is Kubernetes JSON.
    pub fn apply(&mut self, kind: EventKind, object_json: &str) -> Result<(), Error> {
        let result = self.state.apply(kind, object_json);
        self.sync_cycle();
        result
    }

    /// Loads a document (single object, `List`, or stream) as `Add` events; returns one error per
    /// object that failed (the others load).
    pub fn load(&mut self, json: &str) -> Result<Vec<Error>, Error> {
        let result = self.state.load(json);
        self.sync_cycle();
        result
    }

    /// Inserts or replaces a decoded object.
    pub fn upsert(&mut self, object: Object) {
        self.state.upsert(object);
        self.sync_cycle();
    }

    /// Applies to the current cycle what events changed that it derived from: results of deleted
    /// nodes go (their ids are handed out again), caches of changed classes or extractors go, and
    /// a cycle whose slice index was replaced must run PreFilter again (unless its pod is already
    /// reserved).
    fn sync_cycle(&mut self) {
        let changed = self.state.take_invalidated();
        let Some(c) = &mut self.cycle else {
            return;
        };
        for id in changed.nodes {
            c.nodes.remove(id);
        }
        if changed.classes || changed.index {
            c.cache = Default::default();
        }
        if changed.index_replaced && !self.reservations.contains(&c.pod) {
            c.status =
                Status::error("ResourceSlices changed during the scheduling cycle; run PreFilter again");
            c.nodes.clear();
        }
    }

    /// PreFilter for the pod `namespace/name`: resolves its claims and starts a cycle.
    ///
    /// Reservations of other pods (in their binding cycle) are left alone. A reservation the same
    /// pod still holds is dropped first, as the scheduler's Unreserve would: a pod is scheduled
    /// again only after its previous attempt ended.
    pub fn prefilter(&mut self, pod: &str) -> Status {
        if self.reservations.contains(pod) {
            self.reservations.release(&mut self.state, pod);
        }
        // The previous cycle's result slots, written over by this cycle's Filter.
        let mut results = match self.cycle.take() {
            Some(c) => c.nodes,
            None => std::mem::take(&mut self.spare_results),
        };
        results.next_cycle(self.state.nodes.id_bound());
        // The index is brought up to date first: the cycle is prepared from the state as it is.
        self.state.derived();
        // A new cycle starts from what the state is now.
        self.state.take_invalidated();
        let (status, mut cycle) = match Cycle::prepare(&self.state, pod) {
            Ok(c) => (Status::success(), c),
            Err(s) => (s.clone(), Cycle::failed(pod, s)),
        };
        cycle.nodes = results;
        self.cycle = Some(cycle);
        status
    }

    /// The current cycle, or an error naming the call made before PreFilter.
    fn cycle(&self, what: &str) -> Result<&Cycle, Status> {
        self.cycle
            .as_ref()
            .ok_or_else(|| Status::error(format!("{what} called before prefilter")))
    }

    /// Filter for one node of the current cycle: by name (`&str`, `&String`) or by a
    /// [`crate::state::NodeName`], which remembers where the plugin found it.
    pub fn filter<N: AsNode + ?Sized>(&mut self, node: &N) -> Status {
        let node = node.as_node();
        let id = self.state.nodes.find(node);
        let result = match &self.cycle {
            Some(c) => c.filter(
                &self.state,
                id.and_then(|id| self.state.nodes.by_id(id)),
                node.name(),
            ),
            None => return Status::error("filter called before prefilter"),
        };
        // A success has no reason: nothing to copy.
        let status = if result.status.reason.is_empty() {
            Status::new(result.status.code, String::new())
        } else {
            result.status.clone()
        };
        // A node the plugin does not know is not recorded: Score and Reserve name it themselves.
        if let Some(id) = id
            && let Some(c) = &mut self.cycle
        {
            // A node Filtered again keeps its place among the nodes PreScore named.
            c.nodes.insert(id, result);
            if c.scoring.as_ref().is_some_and(|s| !s.named) {
                c.scoring = None;
            }
        }
        status
    }

    /// PostFilter for the cycle's pod after no node passed Filter: picks an allocated claim of
    /// the pod that was unavailable on at least one node Filtered in this cycle (its
    /// `status.allocation.nodeSelector` did not match, or a binding failure condition of one of
    /// its devices holds) and that no other pod uses (`status.reservedFor` is empty or holds
    /// only this pod), and asks for its deallocation. Upstream picks one such claim at random;
    /// this plugin takes the first in the pod's order, so that replays repeat.
    ///
    /// The plugin clears the claim's allocation in its own state at once (as [`Plugin::bind`]
    /// records an allocation), and the host writes the same to the API server.
    pub fn postfilter(&mut self, pod: &str) -> PostFilter {
        let answer = match self.cycle("postfilter") {
            Ok(c) => c.postfilter(&self.state, pod),
            Err(status) => PostFilter {
                status,
                deallocate: None,
            },
        };
        if let Some((key, _)) = &answer.deallocate
            && let Some(stored) = self.state.claims.get(key)
        {
            let mut claim = stored.clone();
            claim.status.allocation = None;
            claim.status.reserved_for.clear();
            claim.status.devices.clear();
            self.upsert(Object::ResourceClaim(claim));
        }
        answer
    }

    /// PreScore: the feasible nodes of the cycle (those that passed every Filter plugin), over
    /// which [`Plugin::score`] normalises. Every node named must have passed this plugin's Filter.
    pub fn prescore<N: AsNode>(&mut self, nodes: &[N]) -> Status {
        match self.prescore_ranks(nodes) {
            Ok(..) => Status::success(),
            Err(s) => s,
        }
    }

    /// [`Plugin::prescore`] with `nodes`, then [`Plugin::score`] for each of them, in one pass:
    /// the scores in the order of `nodes`, or PreScore's status when it fails (after a PreScore
    /// that succeeded, Score succeeds on every node it named).
    pub fn prescore_scores<N: AsNode>(&mut self, nodes: &[N]) -> Result<Vec<u32>, Status> {
        let (ranks, min, max) = self.prescore_ranks(nodes)?;
        Ok(ranks
            .into_iter()
            .map(|r| crate::cycle::normalize(r, min, max))
            .collect())
    }

    /// PreScore's ranks of `nodes`, with their lowest and highest.
    fn prescore_ranks<N: AsNode>(&mut self, nodes: &[N]) -> Result<(Vec<u32>, u32, u32), Status> {
        let Some(cycle) = self.cycle.as_mut() else {
            return Err(Status::error("prescore called before prefilter"));
        };
        let ids = nodes.iter().map(|n| self.state.nodes.find(n.as_node())).collect();
        cycle.prescore(ids, |i| nodes[i].as_node().name())
    }

    /// The raw sharing-affinity rank of a node that passed Filter in the current cycle (before
    /// normalisation; see [`Plugin::score`]).
    ///
    /// Per allocated device: 2 when it joins a device locked to compatible values (by an
    /// allocated claim, or tentatively by another request or claim of this pod earlier in the
    /// same allocation), 1 when it takes a clean affinity-gated device, 0 when it shares a device
    /// of an affinity pool that no extractor gates (unknown affinity). A device affinity cannot
    /// apply to is neutral: one of a pool without extractors, a dedicated (not
    /// multi-allocatable) device, or one allocated with admin access. Per request (KEP-4816's
    /// per-request pattern): `50 · Σ ranks / non-neutral devices`, so 100 = every device joins a
    /// lock, 50 = clean, 0 = unknown affinity; a request with only neutral devices adds 0. The
    /// node's rank is the sum over requests, so neutral requests never dilute the others.
    pub fn affinity_rank(&self, node: &str) -> Result<u32, Status> {
        self.cycle("affinity rank")?
            .affinity_rank(self.state.nodes.id(node), node)
    }

    /// The prioritized-list rank of a node that passed Filter in the current cycle: per
    /// `firstAvailable` request allocated there, `8 - i` for its `i`th subrequest, as upstream's
    /// DynamicResources Score ranks it.
    pub fn prioritized_rank(&self, node: &str) -> Result<u32, Status> {
        self.cycle("prioritized rank")?
            .prioritized_rank(self.state.nodes.id(node), node)
    }

    /// Score (0..=100) for a node that passed Filter in the current cycle: its rank normalised
    /// over the feasible nodes as `(rank - min) · 100 / (max - min)` (KEP-4816's reference
    /// normalisation). The rank orders nodes first by [`Plugin::prioritized_rank`] (the claims'
    /// own order of preference, which upstream's DynamicResources scores: a node that gives a
    /// `firstAvailable` request an earlier subrequest wins, whatever the packing), then by
    /// [`Plugin::affinity_rank`] (sharing-affinity packing; not with `consolidate: false`). The
    /// feasible nodes are those named at [`Plugin::prescore`]; when PreScore was not called in
    /// this cycle, every node that passed this plugin's Filter (the same set when no other
    /// plugin filters). When all ranks are equal every node scores 0: the plugin then has no
    /// preference, and the choice is left to other plugins (and the replay's node-name
    /// tie-break).
    ///
    /// The plugin normalises inside Score rather than in a NormalizeScore step, so the KSWE guest
    /// needs no `normalizescore` export (whose upstream host reassigns scores by map order; see
    /// `docs/kswe-dra-extension.md`).
    pub fn score<N: AsNode + ?Sized>(&mut self, node: &N) -> Result<u32, Status> {
        let node = node.as_node();
        let id = self.state.nodes.find(node);
        match self.cycle.as_mut() {
            Some(c) => c.score(id, node.name()),
            None => Err(Status::error("score called before prefilter")),
        }
    }

    /// Reserve: commits the allocation Filter computed for `node` as in-flight.
    pub fn reserve(&mut self, node: &str) -> Result<Vec<ClaimAllocation>, Status> {
        let cycle = self
            .cycle
            .as_ref()
            .ok_or_else(|| Status::error("reserve called before prefilter"))?;
        let id = self.state.nodes.id(node);
        self.reservations.reserve(&mut self.state, cycle, id, node)
    }

    /// Unreserve: drops the in-flight allocation of `pod` (`namespace/name`) reserved on `node`
    /// (empty = whichever node). Other pods' reservations are untouched.
    ///
    /// A pod without a reservation is a no-op that is reported as an `Error` status naming the pod;
    /// so is a node other than the reserved one (the reservation is then kept).
    pub fn unreserve(&mut self, pod: &str, node: &str) -> Result<(), Status> {
        self.reservations.unreserve(&mut self.state, pod, node)
    }

    /// Bind (PreBind) for `pod` (`namespace/name`) on `node`: records its reserved allocation in
    /// the claims' status and the pod's node. Works while another pod's cycle is in progress; a
    /// pod without a reservation (or recreated since Reserve) gets an `Error` status naming it.
    pub fn bind(&mut self, pod: &str, node: &str) -> Result<Vec<ClaimAllocation>, Status> {
        let bound = self.reservations.bind(&mut self.state, pod, node)?;
        if self.cycle.as_ref().is_some_and(|c| c.pod == pod)
            && let Some(c) = self.cycle.take()
        {
            self.spare_results = c.nodes;
        }
        Ok(bound)
    }

    /// Check number `polls` (0 for the first, at once after [`Plugin::bind`]) of PreBind's wait
    /// for the binding conditions of `pod`'s claims ([`crate::binding`]). On
    /// [`BindingPoll::Wait`] the caller waits that many seconds, gives the plugin the changes
    /// and the time, and checks again with `polls + 1`; on [`BindingPoll::Failed`] it calls
    /// [`Plugin::unbind`] and fails PreBind with the status.
    pub fn binding_poll(&self, pod: &str, polls: u32) -> BindingPoll {
        crate::binding::poll(&self.state, pod, polls)
    }

    /// Takes back what [`Plugin::bind`] recorded for `pod` after its PreBind failed, as the
    /// framework's Unreserve does: the pod leaves `status.reservedFor` of its claims (their
    /// allocations stay) and is no longer bound. Returns the claims (`namespace/name`) it left.
    pub fn unbind(&mut self, pod: &str) -> Vec<String> {
        crate::binding::unbind(&mut self.state, pod)
    }

    /// The lock state of a device, from the claims holding it.
    pub fn lock_state(&mut self, device: &DeviceKey) -> LockState {
        let state = self.state.lock_state(device);
        self.sync_cycle();
        state
    }

    /// Names of all known nodes, sorted.
    pub fn node_names(&self) -> Vec<String> {
        self.state.node_names()
    }

    /// A claim as currently stored (allocated claims include our bound allocations).
    pub fn claim(&self, key: &str) -> Option<&ResourceClaim> {
        self.state.claim(key)
    }

    /// Warnings about the cluster's sharing-affinity set-up since the last call (each given once),
    /// for the plugin log: for example configuration extractors ignored for a pool whose driver
    /// publishes its own.
    pub fn take_warnings(&mut self) -> Vec<String> {
        self.state.take_warnings()
    }

    /// The node a pod is reserved on (Reserve done, Bind or Unreserve not yet).
    pub fn reserved_node(&self, pod: &str) -> Option<&str> {
        self.reservations.node(pod)
    }

    /// A pod as currently stored: one not bound to a node, or one our Bind bound (until its
    /// next event).
    pub fn pod(&self, key: &str) -> Option<&Pod> {
        self.state.pod(key)
    }
}

#[cfg(test)]
mod tests {
    use super::{EventKind, Plugin};

    /// Objects as Go writes them (`"creationTimestamp": null`, `null` lists) load; an object the
    /// plugin rejects is named, with its error, by the Filter of its node and the PreFilter of a
    /// pod that needs it, until an event for it decodes.
    #[test]
    fn rejected_objects_are_named_where_a_decision_misses_them() {
        let mut p = Plugin::new("").unwrap();
        let go_node = r#"{"apiVersion":"v1","kind":"Node","metadata":{"name":"ok","creationTimestamp":null,"labels":null},"spec":{},"status":{"images":null}}"#;
        p.apply(EventKind::Add, go_node).unwrap();
        let bad_node = r#"{"apiVersion":"v1","kind":"Node","metadata":{"name":"worker-1","labels":{"a":7}}}"#;
        let err = p.apply(EventKind::Add, bad_node).unwrap_err().to_string();
        assert!(
            err.contains("worker-1") && err.contains("metadata.labels.a"),
            "{err}"
        );
        let bad_claim = r#"{"apiVersion":"resource.k8s.io/v1","kind":"ResourceClaim","metadata":{"name":"c","namespace":"ns"},"spec":{"devices":{"requests":[{"name":null}]}}}"#;
        assert!(p.apply(EventKind::Add, bad_claim).is_err());
        let pod = r#"{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p","namespace":"ns","uid":"u","creationTimestamp":null},
            "spec":{"containers":null,"resourceClaims":[{"name":"r","resourceClaimName":"c"}]},"status":{}}"#;
        p.apply(EventKind::Add, pod).unwrap();
        let pre = p.prefilter("ns/p");
        assert_eq!(
            pre.reason,
            "resource claim ns/c was rejected: ResourceClaim ns/c: field spec.devices.requests[0].name: invalid type: null, expected a string"
        );
        let plain = r#"{"apiVersion":"v1","kind":"Pod","metadata":{"name":"q","namespace":"ns","uid":"v"},"spec":{}}"#;
        p.apply(EventKind::Add, plain).unwrap();
        assert!(p.prefilter("ns/q").is_success());
        let filtered = p.filter("worker-1");
        assert!(
            filtered
                .reason
                .starts_with("node worker-1 was rejected: Node worker-1: field metadata.labels.a"),
            "{}",
            filtered.reason
        );
        assert!(p.filter("ok").is_success());
        assert_eq!(p.filter("gone").reason, "node gone not found");
        // The node's next event decodes: it is a node like any other.
        p.apply(
            EventKind::Add,
            r#"{"apiVersion":"v1","kind":"Node","metadata":{"name":"worker-1"}}"#,
        )
        .unwrap();
        assert!(p.prefilter("ns/q").is_success());
        assert!(p.filter("worker-1").is_success());
    }
}
