//! The host's versioned object store: the cluster state behind `k8s.io/api.node`, `currentPod` and
//! the `sharing-affinity.dra/v1` change feed.
//!
//! Every change takes the next revision from one counter, as an API server's resourceVersion does,
//! and is indexed by that revision, so [`ObjectStore::changes`] costs time in proportion to the
//! changes since the caller's cursor, not to the cluster size. Deleted objects leave tombstones so
//! a feed can report `DELETED`. Pending allocations (signalled at Reserve) overlay their claim's
//! `status.allocation` in the feed, as upstream's assume cache does for other scheduling cycles.

use std::collections::{BTreeMap, HashMap};
use std::fmt::Write as _;
use std::sync::atomic::{AtomicU64, Ordering};

use serde_json::Value;
use sharing_affinity_core::extended;
use sharing_affinity_core::model::{
    AllocationResult, DeviceClass, OwnerReference, Pod, PodExtendedResourceClaimStatus,
    PodResourceClaimStatus, ResourceClaim, ResourceClaimConsumerReference,
};
use sharing_affinity_core::object::{Kind, Object, object_key};
use sharing_affinity_kswe_proto as proto;

/// Distinguishes stores within one process, so a cursor from another store forces a resync.
static NEXT_EPOCH: AtomicU64 = AtomicU64::new(1);

/// How an object changes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Change {
    /// Create, or replace an existing object.
    Add,
    /// Replace, or create a missing object.
    Update,
    /// Remove.
    Delete,
}

/// Why the DRA extension refused a write. The discriminant is the `i32` the import returns.
#[repr(i32)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DraError {
    /// No ResourceClaim with that `namespace/name`.
    NotFound = 1,
    /// The allocation JSON does not decode as a `resource.k8s.io/v1` AllocationResult.
    Invalid = 2,
    /// The claim is already allocated, with a different allocation.
    Conflict = 3,
    /// Called outside an extension point that has a current pod.
    NoPod = 4,
    /// `wait`: the wait ended early (a replay host never answers it).
    Cancelled = 5,
}

#[derive(Clone, Debug)]
struct Entry {
    object: Object,
    created: u64,
    modified: u64,
    /// The object as the feed shows it (with a pending allocation overlaid), rendered once.
    json: String,
}

#[derive(Clone, Debug)]
struct Tombstone {
    created: u64,
    deleted: u64,
    json: String,
}

#[derive(Clone, Debug)]
enum Slot {
    Live((Kind, String)),
    Deleted((Kind, String)),
    /// An object the plugin rejects, as its JSON text: the feed carries it as `ADDED`, as an
    /// informer would.
    Refused(String),
}

/// A pending allocation: reserved by a pod, not yet written.
#[derive(Clone, Debug, PartialEq)]
pub struct Pending {
    /// UID of the pod whose Reserve signalled it.
    pub pod_uid: String,
    /// The allocation.
    pub allocation: AllocationResult,
}

/// The versioned store. See the module docs.
#[derive(Debug)]
pub struct ObjectStore {
    epoch: u64,
    revision: u64,
    entries: BTreeMap<(Kind, String), Entry>,
    tombstones: BTreeMap<(Kind, String), Tombstone>,
    by_revision: BTreeMap<u64, Slot>,
    pending: BTreeMap<String, Pending>,
    /// Names of the Nodes among the refused objects ([`ObjectStore::add_refused`]).
    refused_nodes: std::collections::BTreeSet<String>,
}

impl Default for ObjectStore {
    fn default() -> Self {
        ObjectStore {
            epoch: NEXT_EPOCH.fetch_add(1, Ordering::Relaxed),
            revision: 0,
            entries: BTreeMap::new(),
            tombstones: BTreeMap::new(),
            by_revision: BTreeMap::new(),
            pending: BTreeMap::new(),
            refused_nodes: Default::default(),
        }
    }
}

fn meta_mut(object: &mut Object) -> &mut sharing_affinity_core::model::ObjectMeta {
    match object {
        Object::Node(o) => &mut o.metadata,
        Object::Pod(o) => &mut o.metadata,
        Object::ResourceSlice(o) => &mut o.metadata,
        Object::DeviceClass(o) => &mut o.metadata,
        Object::ResourceClaim(o) => &mut o.metadata,
        Object::ResourceClaimTemplate(o) => &mut o.metadata,
        Object::DeviceTaintRule(o) => &mut o.metadata,
    }
}

impl ObjectStore {
    /// An empty store with a fresh epoch.
    pub fn new() -> Self {
        Self::default()
    }

    /// The current revision (0 for an empty store).
    pub fn revision(&self) -> u64 {
        self.revision
    }

    /// Applies one change. The store sets `metadata.resourceVersion` to the change's revision.
    /// Pods and Nodes must convert to protobuf (the reader has checked their timestamps); a Delete
    /// of a missing object is an error. Errors name the object.
    pub fn apply(&mut self, change: Change, mut object: Object) -> Result<u64, String> {
        let id = (object.kind(), object.key());
        let label = format!("{} {}", id.0.as_str(), id.1);
        if change == Change::Delete {
            let Some(entry) = self.entries.remove(&id) else {
                return Err(format!("{label}: delete of an object that does not exist"));
            };
            self.by_revision.remove(&entry.modified);
            let rev = self.bump();
            self.by_revision.insert(rev, Slot::Deleted(id.clone()));
            self.tombstones.insert(
                id,
                Tombstone {
                    created: entry.created,
                    deleted: rev,
                    json: entry.json,
                },
            );
            return Ok(rev);
        }
        match &object {
            Object::Pod(p) => proto::pod_to_proto(p).map(drop).map_err(|e| e.to_string())?,
            Object::Node(n) => proto::node_to_proto(n).map(drop).map_err(|e| e.to_string())?,
            _ => {}
        }
        let rev = self.bump();
        meta_mut(&mut object).resource_version = rev.to_string().into();
        let created = match self.entries.get(&id) {
            Some(old) => {
                self.by_revision.remove(&old.modified);
                old.created
            }
            None => {
                if let Some(t) = self.tombstones.remove(&id) {
                    self.by_revision.remove(&t.deleted);
                }
                rev
            }
        };
        let json = self.render(&object);
        self.by_revision.insert(rev, Slot::Live(id.clone()));
        self.entries.insert(
            id,
            Entry {
                object,
                created,
                modified: rev,
                json,
            },
        );
        Ok(rev)
    }

    fn bump(&mut self) -> u64 {
        self.revision += 1;
        self.revision
    }

    fn render(&self, object: &Object) -> String {
        let pending = match object {
            Object::ResourceClaim(claim) if claim.status.allocation.is_none() => {
                self.pending.get(&object.key())
            }
            _ => None,
        };
        let Some(p) = pending else {
            return object.to_json_string();
        };
        let mut value = object.to_json();
        if let Ok(alloc) = serde_json::to_value(&p.allocation)
            && let Some(map) = value.as_object_mut()
        {
            let status = map
                .entry("status")
                .or_insert_with(|| Value::Object(Default::default()));
            if let Some(s) = status.as_object_mut() {
                s.insert("allocation".into(), alloc);
            }
        }
        value.to_string()
    }

    /// Re-renders an object after its view changed (pending set or cleared) and moves it to a new
    /// revision, so feeds report it as `MODIFIED`.
    fn touch(&mut self, id: &(Kind, String)) {
        let Some(object) = self.entries.get(id).map(|e| e.object.clone()) else {
            return;
        };
        let json = self.render(&object);
        let rev = self.bump();
        if let Some(entry) = self.entries.get_mut(id) {
            self.by_revision.remove(&entry.modified);
            entry.modified = rev;
            entry.json = json;
        }
        self.by_revision.insert(rev, Slot::Live(id.clone()));
    }

    /// Adds an object that does not decode (its JSON text) to the feed, for the guest to reject
    /// and record. Nodes among them are known by name ([`ObjectStore::is_refused_node`]).
    pub fn add_refused(&mut self, json: &str) {
        let rev = self.bump();
        if let Some((Kind::Node, name)) = sharing_affinity_core::object::identify(json) {
            self.refused_nodes.insert(name);
        }
        self.by_revision.insert(rev, Slot::Refused(json.to_string()));
    }

    /// Whether `name` is a Node that was added by [`ObjectStore::add_refused`] and not since as
    /// an object: the scheduler's framework knows it, by name only.
    pub fn is_refused_node(&self, name: &str) -> bool {
        self.refused_nodes.contains(name) && !self.entries.contains_key(&(Kind::Node, name.to_string()))
    }

    /// The object with that kind and key.
    pub fn get(&self, kind: Kind, key: &str) -> Option<&Object> {
        self.entries.get(&(kind, key.to_string())).map(|e| &e.object)
    }

    /// The pod `namespace/name`.
    pub fn pod(&self, key: &str) -> Option<&Pod> {
        match self.get(Kind::Pod, key) {
            Some(Object::Pod(p)) => Some(p),
            _ => None,
        }
    }

    /// The pod with that UID.
    pub fn pod_by_uid(&self, uid: &str) -> Option<&Pod> {
        self.objects(Kind::Pod).find_map(|o| match o {
            Object::Pod(p) if p.metadata.uid == uid => Some(&**p),
            _ => None,
        })
    }

    /// All objects of a kind, ordered by key.
    pub fn objects(&self, kind: Kind) -> impl Iterator<Item = &Object> {
        self.entries
            .range((kind, String::new())..)
            .take_while(move |(k, _)| k.0 == kind)
            .map(|(_, e)| &e.object)
    }

    /// Revision of the last change of an object.
    pub fn modified(&self, kind: Kind, key: &str) -> Option<u64> {
        self.entries.get(&(kind, key.to_string())).map(|e| e.modified)
    }

    /// Sets `spec.nodeName` of a pod (what the default binder's API call does).
    pub fn bind_pod(&mut self, key: &str, node: &str) -> Result<u64, String> {
        let Some(Object::Pod(pod)) = self.get(Kind::Pod, key).cloned() else {
            return Err(format!("Pod {key}: not found"));
        };
        let mut pod = pod;
        pod.spec.node_name = node.to_string();
        self.apply(Change::Update, Object::Pod(pod))
    }

    /// The claim a pod's `spec.resourceClaims` entry generates from its template when the claim
    /// does not exist yet: named `<pod>-<entry>` (the convention the core uses), with the
    /// template's metadata and spec and the pod as controlling owner. Returns the entry name and
    /// the claim; `None` when `claim` is no such claim of the pod or the template is missing.
    pub fn generated_claim(&self, claim: &str, pod: &Pod) -> Option<(String, ResourceClaim)> {
        let ns = &pod.metadata.namespace;
        pod.spec.resource_claims.iter().find_map(|entry| {
            let template = entry.resource_claim_template_name.as_ref()?;
            let name = format!("{}-{}", pod.metadata.name, entry.name);
            let done = pod
                .status
                .resource_claim_statuses
                .iter()
                .any(|s| s.name == entry.name);
            if object_key(ns, &name) != claim || done {
                return None;
            }
            let Some(Object::ResourceClaimTemplate(t)) =
                self.get(Kind::ResourceClaimTemplate, &object_key(ns, template))
            else {
                return None;
            };
            let mut c = ResourceClaim {
                metadata: t.spec.metadata.clone(),
                ..ResourceClaim::default()
            };
            c.metadata.name = name.into();
            c.metadata.namespace = ns.clone();
            c.metadata.owner_references = vec![OwnerReference {
                api_version: "v1".into(),
                kind: "Pod".into(),
                name: pod.metadata.name.clone(),
                uid: pod.metadata.uid.clone(),
                controller: Some(true),
            }];
            c.spec = t.spec.spec.clone();
            Some((entry.name.clone(), c))
        })
    }

    /// Records a pending allocation for a claim (Reserve). Replaces an earlier pending allocation.
    /// A claim the pod will generate from a template is accepted before it exists.
    pub fn set_pending(
        &mut self,
        claim: &str,
        pod: &Pod,
        allocation: AllocationResult,
    ) -> Result<(), DraError> {
        let id = (Kind::ResourceClaim, claim.to_string());
        if !self.entries.contains_key(&id) {
            // Other instances must see the devices as taken while the pod binds, so a claim the
            // pod generates is created now (what the resourceclaim controller does before the
            // pod is scheduled), and shown with the pending allocation.
            self.create_generated(claim, pod, &allocation)?;
        }
        match self.entries.get(&id).map(|e| &e.object) {
            Some(Object::ResourceClaim(c)) => {
                if c.status.allocation.as_ref().is_some_and(|a| *a != allocation) {
                    return Err(DraError::Conflict);
                }
            }
            _ => return Err(DraError::NotFound),
        }
        let pending = Pending {
            pod_uid: pod.metadata.uid.clone(),
            allocation,
        };
        self.pending.insert(claim.to_string(), pending);
        self.touch(&id);
        Ok(())
    }

    /// The pending allocations, by claim key.
    pub fn pending(&self) -> &BTreeMap<String, Pending> {
        &self.pending
    }

    /// Drops the pending allocations of a pod (Unreserve); returns the claims affected. A KEP-5004
    /// special claim created at Reserve and still unallocated is deleted and the pod's
    /// `status.extendedResourceClaimStatus` cleared, as upstream's Unreserve deletes the claim it
    /// created (a claim generated from a template stays: the resourceclaim controller keeps it).
    pub fn clear_pending_for_pod(&mut self, pod_uid: &str) -> Vec<String> {
        let claims: Vec<String> = self
            .pending
            .iter()
            .filter(|(_, p)| p.pod_uid == pod_uid)
            .map(|(k, _)| k.clone())
            .collect();
        for claim in &claims {
            self.pending.remove(claim);
            let id = (Kind::ResourceClaim, claim.clone());
            let special = match self.entries.get(&id).map(|e| &e.object) {
                Some(Object::ResourceClaim(c)) => (c.status.allocation.is_none()
                    && c.metadata
                        .annotations
                        .get(extended::CLAIM_ANNOTATION)
                        .map(String::as_str)
                        == Some("true")
                    && c.metadata
                        .owner_references
                        .iter()
                        .any(|o| o.controller == Some(true) && o.uid == pod_uid))
                .then(|| (**c).clone()),
                _ => None,
            };
            match special {
                Some(c) => {
                    self.apply(Change::Delete, Object::ResourceClaim(Box::new(c)))
                        .expect("deleting a claim that was just found");
                    if let Some(mut pod) = self.pod_by_uid(pod_uid).cloned()
                        && pod
                            .status
                            .extended_resource_claim_status
                            .as_ref()
                            .is_some_and(|s| {
                                object_key(&pod.metadata.namespace, &s.resource_claim_name) == *claim
                            })
                    {
                        pod.status.extended_resource_claim_status = None;
                        self.apply(Change::Update, Object::Pod(Box::new(pod)))
                            .expect("a stored pod converts to protobuf");
                    }
                }
                None => self.touch(&id),
            }
        }
        claims
    }

    /// Unreserve's write (`docs/kswe-dra-extension.md` §2.2): removes the pod `pod_uid` from
    /// `status.reservedFor` of every allocated claim that names it, as upstream's Unreserve
    /// does; the allocations stay. Returns the claims it changed.
    pub fn unreserve_pod(&mut self, pod_uid: &str) -> Vec<String> {
        if pod_uid.is_empty() {
            return Vec::new();
        }
        let claims: Vec<Box<ResourceClaim>> = self
            .entries
            .values()
            .filter_map(|e| match &e.object {
                Object::ResourceClaim(c)
                    if c.status.allocation.is_some()
                        && c.status.reserved_for.iter().any(|r| r.uid == pod_uid) =>
                {
                    Some(c.clone())
                }
                _ => None,
            })
            .collect();
        let mut changed = Vec::new();
        for mut c in claims {
            c.status.reserved_for.retain(|r| r.uid != pod_uid);
            let key = object_key(&c.metadata.namespace, &c.metadata.name);
            self.apply(Change::Update, Object::ResourceClaim(c))
                .expect("a stored claim converts back");
            changed.push(key);
        }
        changed
    }

    /// KEP-5004: the claim the scheduler creates for the pod's extended resources backed by DRA,
    /// when `claim` is its name (`<pod>-extended-resources-<5 chars>`, the suffix derived from the
    /// pod's UID as the core derives it) and the pod has none yet, with the pod's
    /// `status.extendedResourceClaimStatus`. The requests and mappings follow the core's rules
    /// ([`sharing_affinity_core::extended`]) for the pod and the stored DeviceClasses,
    /// keeping the requests the allocation has results for: on a node that serves a resource
    /// through a device plugin the guest allocates none for it, and upstream's claim for that node
    /// has no request for it either. `NotFound` when `claim` is not the pod's special claim,
    /// `Invalid` when a result names a request the pod does not make.
    pub fn extended_claim(
        &self,
        claim: &str,
        pod: &Pod,
        allocation: &AllocationResult,
    ) -> Result<(ResourceClaim, PodExtendedResourceClaimStatus), DraError> {
        let ns = &pod.metadata.namespace;
        if pod.status.extended_resource_claim_status.is_some()
            || object_key(ns, &extended::claim_name(pod)) != claim
        {
            return Err(DraError::NotFound);
        }
        let classes: HashMap<String, DeviceClass> = self
            .objects(Kind::DeviceClass)
            .filter_map(|o| match o {
                Object::DeviceClass(c) => Some((c.metadata.name.to_string(), (**c).clone())),
                _ => None,
            })
            .collect();
        match extended::claim_for_allocation(pod, &classes, allocation) {
            Ok(Some(created)) => Ok(created),
            Ok(None) => Err(DraError::NotFound),
            // A class conflict would have failed the guest's PreFilter; what is left is a result
            // for a request the pod does not make.
            Err(_) => Err(DraError::Invalid),
        }
    }

    /// Creates the claim `pod` generates from a template (`<pod>-<entry>`) and names it in the
    /// pod's `status.resourceClaimStatuses`, what the resourceclaim controller does; or the
    /// pod's KEP-5004 special claim ([`ObjectStore::extended_claim`]) and the pod's
    /// `status.extendedResourceClaimStatus`, what upstream's DRA plugin does.
    fn create_generated(
        &mut self,
        claim: &str,
        pod: &Pod,
        allocation: &AllocationResult,
    ) -> Result<(), DraError> {
        let stored = self.pod(&pod_key(pod)).cloned();
        let source = stored.clone().unwrap_or_else(|| pod.clone());
        /// What the pod's status records about the new claim.
        enum Record {
            Template(PodResourceClaimStatus),
            Extended(PodExtendedResourceClaimStatus),
        }
        let (generated, record) = match self.generated_claim(claim, &source) {
            Some((entry, generated)) => {
                let status = PodResourceClaimStatus {
                    name: entry,
                    resource_claim_name: Some(generated.metadata.name.to_string()),
                };
                (generated, Record::Template(status))
            }
            None => {
                let (generated, status) = self.extended_claim(claim, &source, allocation)?;
                (generated, Record::Extended(status))
            }
        };
        self.apply(Change::Add, Object::ResourceClaim(Box::new(generated)))
            .map_err(|_| DraError::Invalid)?;
        if let Some(mut updated) = stored {
            match record {
                Record::Template(entry) => updated.status.resource_claim_statuses.push(entry),
                Record::Extended(status) => updated.status.extended_resource_claim_status = Some(status),
            }
            self.apply(Change::Update, Object::Pod(Box::new(updated)))
                .map_err(|_| DraError::Invalid)?;
        }
        Ok(())
    }

    /// Writes `status.allocation` of a claim and adds the pod to `status.reservedFor` (PreBind).
    /// Writing the same allocation again is a no-op apart from `reservedFor`. A claim the pod
    /// generates from a template is created first (what the resourceclaim controller does), and
    /// the pod's `status.resourceClaimStatuses` then names it.
    pub fn write_allocation(
        &mut self,
        claim: &str,
        pod: &Pod,
        allocation: AllocationResult,
    ) -> Result<u64, DraError> {
        let id = (Kind::ResourceClaim, claim.to_string());
        if !self.entries.contains_key(&id) {
            self.create_generated(claim, pod, &allocation)?;
        }
        let Some(Object::ResourceClaim(c)) = self.entries.get(&id).map(|e| e.object.clone()) else {
            return Err(DraError::NotFound);
        };
        let mut c = c;
        match &c.status.allocation {
            Some(held) if *held != allocation => return Err(DraError::Conflict),
            // The same allocation stays as stored: the write only adds the pod.
            Some(_) => {}
            None => c.status.allocation = Some(allocation),
        }
        if !c
            .status
            .reserved_for
            .iter()
            .any(|r| r.uid == pod.metadata.uid && r.resource == "pods")
        {
            c.status.reserved_for.push(ResourceClaimConsumerReference {
                api_group: Default::default(),
                resource: "pods".into(),
                name: pod.metadata.name.clone(),
                uid: pod.metadata.uid.clone(),
            });
        }
        self.pending.remove(claim);
        self.apply(Change::Update, Object::ResourceClaim(c))
            .map_err(|_| DraError::Invalid)
    }

    /// Clears `status.allocation`, `status.reservedFor` and `status.devices` of a claim
    /// (PostFilter), only while its `metadata.resourceVersion` is still `version`, no pod other
    /// than `pod` is in `status.reservedFor` and no allocation of it is pending (otherwise
    /// [`DraError::Conflict`]).
    pub fn deallocate(&mut self, claim: &str, version: &str, pod: &Pod) -> Result<u64, DraError> {
        let id = (Kind::ResourceClaim, claim.to_string());
        let Some(Object::ResourceClaim(mut c)) = self.entries.get(&id).map(|e| e.object.clone()) else {
            return Err(DraError::NotFound);
        };
        let others = c
            .status
            .reserved_for
            .iter()
            .any(|r| r.uid != pod.metadata.uid || pod.metadata.uid.is_empty());
        // A pending allocation is another pod's cycle in flight: not this PostFilter's to undo.
        if c.metadata.resource_version.as_str() != version || others || self.pending.contains_key(claim) {
            return Err(DraError::Conflict);
        }
        c.status.allocation = None;
        c.status.reserved_for.clear();
        c.status.devices.clear();
        self.apply(Change::Update, Object::ResourceClaim(c))
            .map_err(|_| DraError::Invalid)
    }

    /// The change feed document for a cursor (see `docs/kswe-dra-extension.md`): every object
    /// changed after the cursor, in revision order. An empty, foreign or future cursor gets a
    /// resync: all live objects as `ADDED`, with `"resync":true`. In one page (tests; the
    /// `changes` import pages, [`ObjectStore::changes_page`]).
    pub fn changes(&self, cursor: &str) -> String {
        self.changes_page(cursor, usize::MAX)
    }

    /// One page of the change feed since `cursor`: the events in revision order until their JSON
    /// reaches `max_bytes` (at least one event per page). A page that stops short says
    /// `"more":true` and its cursor is the revision of its last event, so the guest's next call
    /// continues there; the guest keeps calling until a page has no `more`. Pages keep the guest's
    /// buffer and its decoded document small: a whole 5,000-node cluster is 83 MB of JSON.
    /// A page's cursor is an ordinary cursor: the next page is the feed since that revision (an
    /// object created before it and changed after is `MODIFIED`, as for any cursor).
    pub fn changes_page(&self, cursor: &str, max_bytes: usize) -> String {
        let since = self.parse_cursor(cursor);
        let mut events = String::with_capacity(256);
        let mut last = self.revision;
        let mut more = false;
        for (&rev, slot) in self.by_revision.range(since.unwrap_or(0) + 1..) {
            let event = match slot {
                Slot::Live(id) => {
                    let e = &self.entries[id];
                    let kind = match since {
                        Some(c) if e.created <= c => "MODIFIED",
                        _ => "ADDED",
                    };
                    Some((kind, &e.json))
                }
                Slot::Deleted(id) => {
                    let t = &self.tombstones[id];
                    since
                        .is_some_and(|c| t.created <= c)
                        .then_some(("DELETED", &t.json))
                }
                Slot::Refused(json) => Some(("ADDED", json)),
            };
            let Some((kind, json)) = event else {
                continue;
            };
            if !events.is_empty() && events.len() >= max_bytes {
                more = true;
                break;
            }
            if !events.is_empty() {
                events.push(',');
            }
            let _ = write!(events, "{{\"type\":\"{kind}\",\"object\":{json}}}");
            last = rev;
        }
        let mut doc = String::with_capacity(events.len() + 64);
        let _ = write!(
            doc,
            "{{\"cursor\":\"{}.{}\",\"resync\":{},",
            self.epoch,
            if more { last } else { self.revision },
            since.is_none()
        );
        if more {
            doc.push_str("\"more\":true,");
        }
        doc.push_str("\"events\":[");
        doc.push_str(&events);
        doc.push_str("]}");
        doc
    }

    fn parse_cursor(&self, cursor: &str) -> Option<u64> {
        let (epoch, rev) = cursor.split_once('.')?;
        let rev: u64 = rev.parse().ok()?;
        (epoch.parse::<u64>().ok()? == self.epoch && rev <= self.revision).then_some(rev)
    }
}

/// `namespace/name` of a pod.
pub fn pod_key(pod: &Pod) -> String {
    object_key(&pod.metadata.namespace, &pod.metadata.name)
}

#[cfg(test)]
mod tests {
    use super::*;
    use sharing_affinity_core::object::parse_objects;

    fn obj(json: &str) -> Object {
        parse_objects(json).unwrap().objects.remove(0)
    }

    fn claim(name: &str) -> Object {
        obj(&format!(
            r#"{{"apiVersion":"resource.k8s.io/v1","kind":"ResourceClaim","metadata":{{"name":"{name}","namespace":"ns"}}}}"#
        ))
    }

    fn events(doc: &str) -> Vec<(String, String)> {
        let v: Value = serde_json::from_str(doc).unwrap();
        v["events"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| {
                (
                    e["type"].as_str().unwrap().to_string(),
                    e["object"]["metadata"]["name"].as_str().unwrap().to_string(),
                )
            })
            .collect()
    }

    fn cursor(doc: &str) -> String {
        serde_json::from_str::<Value>(doc).unwrap()["cursor"]
            .as_str()
            .unwrap()
            .to_string()
    }

    #[test]
    fn feed_reports_added_modified_deleted_since_cursor() {
        let mut s = ObjectStore::new();
        s.apply(Change::Add, claim("a")).unwrap();
        s.apply(Change::Add, claim("b")).unwrap();
        let first = s.changes("");
        assert_eq!(
            events(&first),
            [("ADDED".into(), "a".into()), ("ADDED".into(), "b".into())]
        );
        assert!(first.contains("\"resync\":true"), "empty cursor is a resync");
        let c1 = cursor(&first);
        assert_eq!(events(&s.changes(&c1)), []);
        s.apply(Change::Update, claim("a")).unwrap();
        s.apply(Change::Add, claim("c")).unwrap();
        s.apply(Change::Delete, claim("b")).unwrap();
        let second = s.changes(&c1);
        assert!(second.contains("\"resync\":false"));
        assert_eq!(
            events(&second),
            [
                ("MODIFIED".into(), "a".into()),
                ("ADDED".into(), "c".into()),
                ("DELETED".into(), "b".into())
            ]
        );
        // An object created and deleted after the cursor is not reported at all.
        let c2 = cursor(&second);
        s.apply(Change::Add, claim("tmp")).unwrap();
        s.apply(Change::Delete, claim("tmp")).unwrap();
        assert_eq!(events(&s.changes(&c2)), []);
    }

    #[test]
    fn pages_stop_at_the_size_and_continue_from_their_cursor() {
        let mut s = ObjectStore::new();
        for name in ["a", "b", "c"] {
            s.apply(Change::Add, claim(name)).unwrap();
        }
        let whole = s.changes("");
        assert!(!whole.contains("\"more\""), "{whole}");
        // A limit of one byte: one event per page, the first page a resync.
        let mut pages = Vec::new();
        let mut c = String::new();
        loop {
            let page = s.changes_page(&c, 1);
            let value: Value = serde_json::from_str(&page).unwrap();
            assert_eq!(value["resync"], pages.is_empty(), "{page}");
            pages.push(events(&page));
            c = cursor(&page);
            if value.get("more").is_none() {
                break;
            }
            assert_eq!(value["more"], true, "{page}");
        }
        let got: Vec<(String, String)> = pages.concat();
        assert_eq!(got, events(&whole));
        assert_eq!(pages.len(), 3, "{pages:?}");
        assert_eq!(c, cursor(&whole), "the last page's cursor is the whole feed's");
        // A page limit larger than the feed gives the whole feed.
        assert_eq!(s.changes_page("", 1 << 20), whole);
    }

    #[test]
    fn foreign_or_garbage_cursor_forces_resync() {
        let mut s = ObjectStore::new();
        s.apply(Change::Add, claim("a")).unwrap();
        let other = ObjectStore::new();
        for (c, msg) in [
            ("garbage", "garbage"),
            ("999.1", "foreign epoch"),
            (&format!("{}.99", s.epoch)[..], "future"),
        ] {
            let doc = s.changes(c);
            assert!(doc.contains("\"resync\":true"), "{msg}");
            assert_eq!(events(&doc).len(), 1, "{msg}");
        }
        drop(other);
    }

    #[test]
    fn resource_version_is_the_revision_and_delete_of_missing_fails() {
        let mut s = ObjectStore::new();
        let rev = s.apply(Change::Add, claim("a")).unwrap();
        match s.get(Kind::ResourceClaim, "ns/a").unwrap() {
            Object::ResourceClaim(c) => assert_eq!(c.metadata.resource_version, rev.to_string()),
            other => panic!("unexpected {other:?}"),
        }
        let err = s.apply(Change::Delete, claim("zz")).unwrap_err();
        assert!(err.contains("ResourceClaim ns/zz"), "{err}");
    }

    #[test]
    fn pending_overlays_the_feed_and_unreserve_reverts_it() {
        let mut s = ObjectStore::new();
        s.apply(Change::Add, claim("a")).unwrap();
        let c = cursor(&s.changes(""));
        let alloc: AllocationResult = serde_json::from_str(r#"{"devices":{"results":[]}}"#).unwrap();
        let pod: Pod =
            serde_json::from_str(r#"{"metadata":{"name":"p","namespace":"ns","uid":"u1"}}"#).unwrap();
        assert_eq!(
            s.set_pending("ns/zz", &pod, alloc.clone()),
            Err(DraError::NotFound)
        );
        s.set_pending("ns/a", &pod, alloc.clone()).unwrap();
        let doc = s.changes(&c);
        assert_eq!(events(&doc), [("MODIFIED".into(), "a".into())]);
        assert!(doc.contains("\"allocation\""), "{doc}");
        let c = cursor(&doc);
        assert_eq!(s.clear_pending_for_pod("u1"), ["ns/a"]);
        let doc = s.changes(&c);
        assert_eq!(events(&doc), [("MODIFIED".into(), "a".into())]);
        assert!(!doc.contains("\"allocation\""), "{doc}");
    }

    #[test]
    fn unreserve_drops_the_pod_from_reserved_for_and_keeps_the_allocation() {
        // docs/kswe-dra-extension.md §2.2: Unreserve removes the pod from `status.reservedFor`
        // of every allocated claim that names it, as upstream's Unreserve; nothing else changes.
        let mut s = ObjectStore::new();
        for name in ["a", "b", "c"] {
            s.apply(Change::Add, claim(name)).unwrap();
        }
        let alloc: AllocationResult = serde_json::from_str(r#"{"devices":{"results":[]}}"#).unwrap();
        let pod = |name: &str| -> Pod {
            serde_json::from_str(&format!(
                r#"{{"metadata":{{"name":"{name}","namespace":"ns","uid":"uid-{name}"}}}}"#
            ))
            .unwrap()
        };
        s.write_allocation("ns/a", &pod("p"), alloc.clone()).unwrap();
        s.write_allocation("ns/a", &pod("q"), alloc.clone()).unwrap();
        s.write_allocation("ns/b", &pod("q"), alloc.clone()).unwrap();
        let c = cursor(&s.changes(""));
        assert_eq!(s.unreserve_pod("uid-p"), ["ns/a"]);
        assert_eq!(events(&s.changes(&c)), [("MODIFIED".into(), "a".into())]);
        let Some(Object::ResourceClaim(a)) = s.get(Kind::ResourceClaim, "ns/a") else {
            panic!("claim ns/a")
        };
        assert!(a.status.allocation.is_some(), "the allocation stays");
        let uids: Vec<&str> = a.status.reserved_for.iter().map(|r| r.uid.as_str()).collect();
        assert_eq!(uids, ["uid-q"], "only the pod leaves");
        assert!(s.unreserve_pod("uid-p").is_empty(), "nothing left to drop");
        assert!(s.unreserve_pod("").is_empty());
    }

    #[test]
    fn deallocate_clears_the_allocation_only_at_the_version_seen_and_for_no_other_pod() {
        let mut s = ObjectStore::new();
        s.apply(Change::Add, claim("a")).unwrap();
        let alloc: AllocationResult = serde_json::from_str(r#"{"devices":{"results":[]}}"#).unwrap();
        let pod = |name: &str| -> Pod {
            serde_json::from_str(&format!(
                r#"{{"metadata":{{"name":"{name}","namespace":"ns","uid":"uid-{name}"}}}}"#
            ))
            .unwrap()
        };
        let version = |s: &ObjectStore| match s.get(Kind::ResourceClaim, "ns/a") {
            Some(Object::ResourceClaim(c)) => c.metadata.resource_version.to_string(),
            _ => panic!("claim ns/a"),
        };
        assert_eq!(s.deallocate("ns/zz", "1", &pod("p")), Err(DraError::NotFound));
        // Pending (another pod's cycle in flight): not PostFilter's to undo.
        s.set_pending("ns/a", &pod("q"), alloc.clone()).unwrap();
        let v = version(&s);
        assert_eq!(s.deallocate("ns/a", &v, &pod("p")), Err(DraError::Conflict));
        s.write_allocation("ns/a", &pod("q"), alloc.clone()).unwrap();
        let v = version(&s);
        assert_eq!(
            s.deallocate("ns/a", &v, &pod("p")),
            Err(DraError::Conflict),
            "another pod is in reservedFor"
        );
        assert_eq!(
            s.deallocate("ns/a", "1", &pod("q")),
            Err(DraError::Conflict),
            "an old version"
        );
        let c = cursor(&s.changes(""));
        s.deallocate("ns/a", &v, &pod("q")).unwrap();
        let doc = s.changes(&c);
        assert_eq!(events(&doc), [("MODIFIED".into(), "a".into())]);
        assert!(
            !doc.contains("\"allocation\"") && !doc.contains("reservedFor"),
            "{doc}"
        );
    }

    #[test]
    fn write_allocation_sets_status_and_reserved_for_and_detects_conflicts() {
        let mut s = ObjectStore::new();
        s.apply(Change::Add, claim("a")).unwrap();
        let pod: Pod =
            serde_json::from_str(r#"{"metadata":{"name":"p","namespace":"ns","uid":"u1"}}"#).unwrap();
        let a1: AllocationResult = serde_json::from_str(
            r#"{"devices":{"results":[{"request":"r","driver":"d","pool":"p","device":"x"}]}}"#,
        )
        .unwrap();
        let a2: AllocationResult = serde_json::from_str(r#"{"devices":{"results":[]}}"#).unwrap();
        s.write_allocation("ns/a", &pod, a1.clone()).unwrap();
        s.write_allocation("ns/a", &pod, a1.clone()).unwrap();
        match s.get(Kind::ResourceClaim, "ns/a").unwrap() {
            Object::ResourceClaim(c) => {
                assert_eq!(c.status.allocation.as_ref(), Some(&a1));
                assert_eq!(c.status.reserved_for.len(), 1, "the pod is added once");
                assert_eq!(c.status.reserved_for[0].uid, "u1");
            }
            other => panic!("unexpected {other:?}"),
        }
        assert_eq!(s.write_allocation("ns/a", &pod, a2), Err(DraError::Conflict));
        assert_eq!(s.write_allocation("ns/b", &pod, a1), Err(DraError::NotFound));
    }

    #[test]
    fn pods_with_bad_timestamps_are_rejected_naming_the_field() {
        // The reader refuses them (core::time), so no such pod reaches the store.
        let parsed = parse_objects(
            r#"{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p","namespace":"ns","creationTimestamp":"soon"}}"#,
        )
        .unwrap();
        assert!(parsed.objects.is_empty());
        let err = parsed.errors[0].to_string();
        assert!(
            err.contains("Pod ns/p") && err.contains("metadata.creationTimestamp"),
            "{err}"
        );
    }

    #[test]
    fn template_claims_are_created_on_write_and_named_in_the_pod_status() {
        let mut s = ObjectStore::new();
        s.apply(
            Change::Add,
            obj(r#"{"apiVersion":"resource.k8s.io/v1","kind":"ResourceClaimTemplate","metadata":{"name":"t","namespace":"ns"},
                "spec":{"metadata":{"labels":{"l":"v"}},"spec":{"devices":{"requests":[{"name":"r","exactly":{"deviceClassName":"c"}}]}}}}"#),
        )
        .unwrap();
        s.apply(
            Change::Add,
            obj(
                r#"{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p","namespace":"ns","uid":"u1"},
                "spec":{"resourceClaims":[{"name":"gpu","resourceClaimTemplateName":"t"}]}}"#,
            ),
        )
        .unwrap();
        let pod = s.pod("ns/p").cloned().unwrap();
        let alloc: AllocationResult = serde_json::from_str(r#"{"devices":{"results":[]}}"#).unwrap();
        assert_eq!(
            s.set_pending("ns/other", &pod, alloc.clone()),
            Err(DraError::NotFound)
        );
        s.set_pending("ns/p-gpu", &pod, alloc.clone()).unwrap();
        // Created at Reserve, so that other instances see its devices as taken.
        let feed = s.changes("");
        let shown = feed
            .split("\"type\":")
            .find(|e| e.contains("\"name\":\"p-gpu\""))
            .unwrap_or_else(|| panic!("the generated claim is in the feed: {feed}"));
        assert!(
            shown.contains("\"allocation\""),
            "with its pending allocation: {shown}"
        );
        s.write_allocation("ns/p-gpu", &pod, alloc.clone()).unwrap();
        match s.get(Kind::ResourceClaim, "ns/p-gpu") {
            Some(Object::ResourceClaim(c)) => {
                assert_eq!(
                    c.metadata.labels.get("l").map(String::as_str),
                    Some("v"),
                    "template metadata"
                );
                assert_eq!(c.metadata.owner_references[0].uid, "u1");
                assert_eq!(c.spec.devices.requests[0].name, "r");
                assert_eq!(c.status.allocation.as_ref(), Some(&alloc));
            }
            other => panic!("unexpected {other:?}"),
        }
        let pod = s.pod("ns/p").unwrap();
        assert_eq!(
            pod.status.resource_claim_statuses[0]
                .resource_claim_name
                .as_deref(),
            Some("p-gpu")
        );
        assert!(s.pending().is_empty());
    }
}

#[cfg(test)]
mod extended_tests {
    use super::*;
    use sharing_affinity_core::object::parse_objects;

    fn obj(json: &str) -> Object {
        parse_objects(json).unwrap().objects.remove(0)
    }

    fn alloc(requests: &[&str]) -> AllocationResult {
        let results: Vec<String> = requests
            .iter()
            .map(|r| format!(r#"{{"request":"{r}","driver":"d","pool":"p","device":"x"}}"#))
            .collect();
        serde_json::from_str(&format!(r#"{{"devices":{{"results":[{}]}}}}"#, results.join(","))).unwrap()
    }

    /// KEP-5004 through the DRA module: the special claim is created at Reserve with the requests
    /// the allocation covers (a resource the node serves through a device plugin has none), the
    /// pod's status names it, and Unreserve deletes it and clears the status.
    #[test]
    fn special_claim_is_created_with_the_allocated_requests_and_deleted_on_unreserve() {
        let mut s = ObjectStore::new();
        for class in ["gpu", "fpga"] {
            s.apply(
                Change::Add,
                obj(&format!(
                    r#"{{"apiVersion":"resource.k8s.io/v1","kind":"DeviceClass","metadata":{{"name":"{class}"}},
                        "spec":{{"extendedResourceName":"example.com/{class}"}}}}"#
                )),
            )
            .unwrap();
        }
        s.apply(
            Change::Add,
            obj(
                r#"{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p","namespace":"ns","uid":"u1"},
                "spec":{"containers":[{"name":"main","image":"i",
                  "resources":{"requests":{"example.com/fpga":"1","example.com/gpu":"2"}}}]}}"#,
            ),
        )
        .unwrap();
        let pod = s.pod("ns/p").unwrap().clone();
        let key = format!("ns/{}", extended::claim_name(&pod));
        assert_eq!(
            s.set_pending(
                "ns/p-extended-resources-zzzzz",
                &pod,
                alloc(&["container-0-request-0"])
            ),
            Err(DraError::NotFound),
            "another name is not the pod's claim"
        );
        assert_eq!(
            s.set_pending(&key, &pod, alloc(&["container-0-request-7"])),
            Err(DraError::Invalid),
            "a result for a request the pod does not make"
        );
        // Only the FPGA request (index 0 of the sorted names) is allocated: GPUs by device plugin.
        s.set_pending(&key, &pod, alloc(&["container-0-request-0"]))
            .unwrap();
        let Some(Object::ResourceClaim(c)) = s.get(Kind::ResourceClaim, &key) else {
            panic!("the special claim exists");
        };
        let names: Vec<&str> = c.spec.devices.requests.iter().map(|r| r.name.as_str()).collect();
        assert_eq!(names, ["container-0-request-0"]);
        assert_eq!(c.metadata.annotations[extended::CLAIM_ANNOTATION], "true");
        let status = s
            .pod("ns/p")
            .unwrap()
            .status
            .extended_resource_claim_status
            .clone()
            .unwrap();
        assert_eq!(status.request_mappings.len(), 1);
        assert_eq!(status.request_mappings[0].resource_name, "example.com/fpga");
        assert_eq!(format!("ns/{}", status.resource_claim_name), key);

        assert_eq!(s.clear_pending_for_pod("u1"), std::slice::from_ref(&key));
        assert!(
            s.get(Kind::ResourceClaim, &key).is_none(),
            "Unreserve deletes the claim"
        );
        assert_eq!(s.pod("ns/p").unwrap().status.extended_resource_claim_status, None);

        // PreBind: written with the allocation; a second special claim is not created.
        s.write_allocation(
            &key,
            &pod,
            alloc(&["container-0-request-0", "container-0-request-1"]),
        )
        .unwrap();
        let Some(Object::ResourceClaim(c)) = s.get(Kind::ResourceClaim, &key) else {
            panic!("the special claim exists");
        };
        assert!(c.status.allocation.is_some());
        assert_eq!(c.spec.devices.requests.len(), 2);
        assert_eq!(c.status.reserved_for[0].uid, "u1");
    }
}
