//! The stored claims and ResourceSlices, with their repeated parts stored once.
//!
//! At 20,000 allocated claims much of a claim's memory is parts that other claims carry too:
//! claims generated from one template have equal specs and annotations, a claim's allocation
//! copies the opaque configuration of its spec, and the claims allocated on one node carry equal
//! node selectors. These parts sit behind an `Arc` in the model ([`ResourceClaim::spec`],
//! [`crate::model::DeviceClaimConfiguration::opaque`] and the allocation's copy,
//! [`crate::model::AllocationResult::node_selector`], [`crate::model::ObjectMeta::annotations`]);
//! [`Claims::insert`] replaces each with the copy already held, when there is one
//! ([`Pool::share`]).
//!
//! "Equal" here means *serialises to the same JSON text*, not `==`: `2Ki` and `2048` are equal
//! quantities that print differently, and a stored claim must write back what was read. Shared
//! parts are never changed in place; whoever changes one gets its own copy (`Arc::make_mut`).
//!
//! The pools hold their entries, so an entry no claim holds any more is kept until the next
//! sweep, which drops every entry nobody else holds. A sweep runs after as many claim stores and
//! removals as the pools had entries after the previous sweep (at least [`SWEEP_MIN`]): linear
//! work per as many changes, and the pools stay within a small multiple of what the stored
//! claims hold.
//!
//! Stored Nodes share their statuses ([`NodeStatuses`]: the nodes of one machine type report
//! equal ones). Stored ResourceSlices ([`Slices`]) share their devices' attribute names (a driver's devices
//! repeat the same few), capacity maps (equal when they serialise the same, as above) and
//! metadata slices' sharing-affinity extractors (a driver publishes the same ones per pool), with
//! the same sweeps.

use crate::hashing::FxHashSet as HashSet;
use std::collections::BTreeMap;
use std::hash::Hasher;
use std::sync::Arc;

use serde::Serialize;

use crate::model::{
    DeviceCapacity, Map, NodeSelector, NodeStatus, OpaqueDeviceConfiguration, ResourceClaim,
    ResourceClaimSpec, ResourceSlice, SharingAffinityExtractor,
};

/// Fewest claim changes between two sweeps.
pub(crate) const SWEEP_MIN: usize = 256;

/// When a store sweeps its pools: after as many changes as the pools had entries after the
/// previous sweep, and at least [`SWEEP_MIN`] (linear work per as many changes).
#[derive(Default)]
struct SweepSchedule {
    /// Stores and removals since the last sweep.
    changes: usize,
    /// Entries after the last sweep.
    swept: usize,
}

impl SweepSchedule {
    /// Counts a change; true when the pools are due for a sweep.
    fn change(&mut self) -> bool {
        self.changes += 1;
        self.changes >= self.swept.max(SWEEP_MIN)
    }

    /// Records a sweep that left `entries` entries.
    fn swept(&mut self, entries: usize) {
        self.changes = 0;
        self.swept = entries;
    }
}

/// The stored claims by `namespace/name`. Read through `Deref`; stored through
/// [`Claims::insert`], which shares the claim's repeated parts.
#[derive(Default)]
pub(crate) struct Claims {
    by_key: BTreeMap<String, Box<ResourceClaim>>,
    shared: Shared,
}

impl std::ops::Deref for Claims {
    type Target = BTreeMap<String, Box<ResourceClaim>>;

    fn deref(&self) -> &Self::Target {
        &self.by_key
    }
}

impl Claims {
    /// Stores a claim (its repeated parts replaced by the copies already held) and returns the
    /// one it replaces.
    pub(crate) fn insert(
        &mut self,
        key: String,
        mut claim: Box<ResourceClaim>,
    ) -> Option<Box<ResourceClaim>> {
        self.shared.claim(&mut claim);
        let old = self.by_key.insert(key, claim);
        self.shared.changed();
        old
    }

    /// Removes a claim.
    pub(crate) fn remove(&mut self, key: &str) -> Option<Box<ResourceClaim>> {
        let old = self.by_key.remove(key)?;
        self.shared.changed();
        Some(old)
    }

    /// Shares a template's spec with the claims (a claim generated from the template starts
    /// with the template's spec).
    pub(crate) fn share_spec(&mut self, spec: &mut Arc<ResourceClaimSpec>) {
        self.shared.spec(spec);
    }

    /// Entries in the pools (specs, opaque configurations, node selectors, annotations).
    #[cfg(test)]
    pub(crate) fn pooled(&self) -> usize {
        self.shared.len()
    }
}

/// The stored ResourceSlices by name. Read through `Deref`; stored through [`Slices::insert`],
/// which shares the devices' attribute names and capacities.
#[derive(Default)]
pub(crate) struct Slices {
    by_name: BTreeMap<String, Box<ResourceSlice>>,
    names: HashSet<Arc<str>>,
    capacities: Pool<Map<String, DeviceCapacity>>,
    /// Metadata slices' sharing-affinity extractors (a driver publishes the same ones for each
    /// of its pools).
    extractors: Pool<SharingAffinityExtractor>,
    /// Scratch buffer for the JSON text of the capacity or extractor being shared.
    text: Vec<u8>,
    sweeps: SweepSchedule,
}

impl std::ops::Deref for Slices {
    type Target = BTreeMap<String, Box<ResourceSlice>>;

    fn deref(&self) -> &Self::Target {
        &self.by_name
    }
}

impl Slices {
    /// Stores a slice (its devices' attribute names and capacities replaced by the copies
    /// already held) and returns the one it replaces. A device held elsewhere too is left as it
    /// is.
    pub(crate) fn insert(
        &mut self,
        name: String,
        mut slice: Box<ResourceSlice>,
    ) -> Option<Box<ResourceSlice>> {
        for device in slice.spec.devices.iter_mut().filter_map(Arc::get_mut) {
            let names = &mut self.names;
            device.attributes.share_keys(|k| match names.get(&**k) {
                Some(shared) => Some(Arc::clone(shared)),
                None => {
                    names.insert(Arc::clone(k));
                    None
                }
            });
            if !device.capacity.is_empty() {
                self.capacities.share(&mut device.capacity, &mut self.text);
            }
        }
        for extractor in &mut slice.spec.sharing_affinity {
            self.extractors.share(extractor, &mut self.text);
        }
        let old = self.by_name.insert(name, slice);
        self.changed();
        old
    }

    /// Removes a slice.
    pub(crate) fn remove(&mut self, name: &str) -> Option<Box<ResourceSlice>> {
        let old = self.by_name.remove(name)?;
        self.changed();
        Some(old)
    }

    /// Counts a slice change; sweeps when there were as many as the pools' entries.
    fn changed(&mut self) {
        if self.sweeps.change() {
            self.names.retain(|n| Arc::strong_count(n) > 1);
            self.capacities.sweep();
            self.extractors.sweep();
            self.sweeps.swept(self.pooled());
        }
    }

    /// Entries in the pools (attribute names, capacities, extractors).
    fn pooled(&self) -> usize {
        self.names.len() + self.capacities.entries.len() + self.extractors.entries.len()
    }
}

/// The Node statuses, one copy of each that serialises the same, swept like the claims' parts.
#[derive(Default)]
pub(crate) struct NodeStatuses {
    pool: Pool<NodeStatus>,
    /// Scratch buffer for the JSON text of the status being shared.
    text: Vec<u8>,
    sweeps: SweepSchedule,
}

impl NodeStatuses {
    /// Replaces a stored node's status with the copy already held, or pools it.
    pub(crate) fn share(&mut self, status: &mut Arc<NodeStatus>) {
        if !status.is_empty() {
            self.pool.share(status, &mut self.text);
        }
        if self.sweeps.change() {
            self.pool.sweep();
            self.sweeps.swept(self.pool.entries.len());
        }
    }

    /// Entries in the pool.
    #[cfg(test)]
    fn pooled(&self) -> usize {
        self.pool.entries.len()
    }
}

/// The pools of shared parts.
#[derive(Default)]
struct Shared {
    specs: Pool<ResourceClaimSpec>,
    opaque: Pool<OpaqueDeviceConfiguration>,
    selectors: Pool<NodeSelector>,
    annotations: Pool<Map<String, String>>,
    /// Scratch buffer for the JSON text of the part being shared.
    text: Vec<u8>,
    sweeps: SweepSchedule,
}

impl Shared {
    fn claim(&mut self, claim: &mut ResourceClaim) {
        if !claim.metadata.annotations.is_empty() {
            self.annotations
                .share(&mut claim.metadata.annotations, &mut self.text);
        }
        self.spec(&mut claim.spec);
        if let Some(a) = &mut claim.status.allocation {
            for o in a.devices.config.iter_mut().filter_map(|c| c.opaque.as_mut()) {
                self.opaque.share(o, &mut self.text);
            }
            if let Some(s) = &mut a.node_selector {
                self.selectors.share(s, &mut self.text);
            }
        }
    }

    /// Shares a spec, and first its opaque configurations when the spec is not shared yet (so
    /// that an allocation's copies find them).
    fn spec(&mut self, spec: &mut Arc<ResourceClaimSpec>) {
        if let Some(s) = Arc::get_mut(spec) {
            for o in s.devices.config.iter_mut().filter_map(|c| c.opaque.as_mut()) {
                self.opaque.share(o, &mut self.text);
            }
        }
        self.specs.share(spec, &mut self.text);
    }

    /// Counts a claim change; sweeps when there were as many as the pools' entries.
    fn changed(&mut self) {
        if self.sweeps.change() {
            // Specs first: a dropped spec releases its opaque configurations.
            self.specs.sweep();
            self.opaque.sweep();
            self.selectors.sweep();
            self.annotations.sweep();
            self.sweeps.swept(self.len());
        }
    }

    fn len(&self) -> usize {
        self.specs.entries.len()
            + self.opaque.entries.len()
            + self.selectors.entries.len()
            + self.annotations.entries.len()
    }
}

/// One kind of shared part: at most one `Arc` per JSON text, found by the text's hash.
struct Pool<T> {
    entries: crate::hashing::FxHashMap<u64, Arc<T>>,
}

impl<T> Default for Pool<T> {
    fn default() -> Self {
        Pool {
            entries: Default::default(),
        }
    }
}

impl<T: Serialize> Pool<T> {
    /// Replaces `value` with the pooled copy that serialises the same, or pools it. (Two texts
    /// with one hash: the later value keeps its own copy.)
    fn share(&mut self, value: &mut Arc<T>, text: &mut Vec<u8>) {
        text.clear();
        if serde_json::to_writer(&mut *text, &**value).is_err() {
            return;
        }
        let mut hasher = std::hash::DefaultHasher::new();
        hasher.write(text);
        match self.entries.entry(hasher.finish()) {
            std::collections::hash_map::Entry::Occupied(e) => {
                if !Arc::ptr_eq(e.get(), value) && writes(&**e.get(), text) {
                    *value = Arc::clone(e.get());
                }
            }
            std::collections::hash_map::Entry::Vacant(e) => {
                e.insert(Arc::clone(value));
            }
        }
    }

    /// Drops the entries nobody else holds.
    fn sweep(&mut self) {
        self.entries.retain(|_, v| Arc::strong_count(v) > 1);
    }
}

/// Whether `value` serialises to the text in `buf`. The value's text is appended for the
/// comparison and taken off again, so that every serialisation here goes through one writer type
/// (each writer type instantiates the model's serialisers once more in the guests).
fn writes<T: Serialize>(value: &T, buf: &mut Vec<u8>) -> bool {
    let n = buf.len();
    let same = serde_json::to_writer(&mut *buf, value).is_ok() && buf[..n] == buf[n..];
    buf.truncate(n);
    same
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use serde_json::json;

    use super::{Claims, NodeStatuses, SWEEP_MIN, Slices, writes};
    use crate::model::{NodeSelector, NodeStatus, OpaqueDeviceConfiguration, ResourceClaim, ResourceSlice};

    fn claim(name: &str, node: &str, subnet: &str) -> Box<ResourceClaim> {
        let opaque =
            json!({"driver": "net.example.com", "parameters": {"kind": "NICConfig", "subnet": subnet}});
        let request = json!({"name": "nic", "exactly": {"deviceClassName": "nic",
            "capacity": {"requests": {"net.example.com/slots": "1"}}}});
        let result = json!({"request": "nic", "driver": "net.example.com", "pool": node, "device": "eth0"});
        let selector = json!({"nodeSelectorTerms": [{"matchFields": [
            {"key": "metadata.name", "operator": "In", "values": [node]}]}]});
        Box::new(
            serde_json::from_value(json!({
                "metadata": {"name": name, "namespace": "ns",
                    "annotations": {"resource.kubernetes.io/pod-claim-name": "nic"}},
                "spec": {"devices": {"requests": [request], "config": [{"opaque": opaque}]}},
                "status": {"allocation": {
                    "devices": {"results": [result], "config": [{"source": "FromClaim", "opaque": opaque}]},
                    "nodeSelector": selector}}
            }))
            .unwrap(),
        )
    }

    /// The allocation's node selector.
    fn selector(c: &ResourceClaim) -> &Arc<NodeSelector> {
        let selector = c
            .status
            .allocation
            .as_ref()
            .and_then(|a| a.node_selector.as_ref());
        selector.unwrap()
    }

    /// The spec's and the allocation's opaque configuration.
    fn opaque(c: &ResourceClaim) -> [&Arc<OpaqueDeviceConfiguration>; 2] {
        let alloc = c.status.allocation.as_ref().unwrap();
        [
            c.spec.devices.config[0].opaque.as_ref().unwrap(),
            alloc.devices.config[0].opaque.as_ref().unwrap(),
        ]
    }

    /// Claims with equal parts hold one copy of each; a claim's allocation holds its spec's
    /// configuration; parts that differ are not shared; the claims write back what was read.
    #[test]
    fn equal_parts_of_stored_claims_are_one_copy() {
        let mut claims = Claims::default();
        let cases = [
            ("a", "node-1", "s1"),
            ("b", "node-1", "s1"),
            ("c", "node-2", "s2"),
        ];
        let texts: Vec<String> = cases
            .iter()
            .map(|(n, node, s)| serde_json::to_string(&claim(n, node, s)).unwrap())
            .collect();
        for (name, node, subnet) in cases {
            claims.insert(name.into(), claim(name, node, subnet));
        }
        let (a, b, c) = (&claims["a"], &claims["b"], &claims["c"]);
        assert!(Arc::ptr_eq(&a.spec, &b.spec), "same spec text");
        assert!(
            Arc::ptr_eq(&a.metadata.annotations, &c.metadata.annotations),
            "annotations"
        );
        assert!(!Arc::ptr_eq(&a.spec, &c.spec), "other subnet");
        assert!(
            Arc::ptr_eq(opaque(a)[0], opaque(a)[1]),
            "spec and allocation config"
        );
        assert!(
            Arc::ptr_eq(opaque(a)[1], opaque(b)[1]),
            "allocation configs of two claims"
        );
        assert!(!Arc::ptr_eq(opaque(a)[0], opaque(c)[0]), "other subnet");
        assert!(Arc::ptr_eq(selector(a), selector(b)), "same node");
        assert!(!Arc::ptr_eq(selector(a), selector(c)), "other node");
        for ((name, ..), text) in cases.iter().zip(&texts) {
            assert_eq!(&serde_json::to_string(&claims[*name]).unwrap(), text, "{name}");
        }
    }

    /// Equal values that print differently are not shared: a claim writes back its own text.
    #[test]
    fn equal_values_written_differently_are_not_shared() {
        let mut claims = Claims::default();
        let mut two_ki = claim("a", "node-1", "s1");
        let mut other = claim("b", "node-1", "s1");
        let slots = |c: &mut ResourceClaim, q: &str| {
            let mut spec = (*c.spec).clone();
            let exactly = spec.devices.requests[0].exactly.as_mut().unwrap();
            exactly.capacity = serde_json::from_str(&format!(r#"{{"requests":{{"s":"{q}"}}}}"#)).unwrap();
            c.spec = Arc::new(spec);
        };
        slots(&mut two_ki, "2Ki");
        slots(&mut other, "2048");
        assert_eq!(two_ki.spec, other.spec, "equal quantities");
        claims.insert("a".into(), two_ki);
        claims.insert("b".into(), other);
        assert!(!Arc::ptr_eq(&claims["a"].spec, &claims["b"].spec));
        assert!(
            serde_json::to_string(&claims["b"])
                .unwrap()
                .contains(r#""s":"2048""#)
        );
    }

    /// Parts of deleted claims leave the pools at the next sweep; the pools stay bounded under
    /// churn.
    #[test]
    fn pools_drop_parts_of_deleted_claims() {
        let mut claims = Claims::default();
        claims.insert("a".into(), claim("a", "gone-node", "gone-subnet"));
        claims.insert("b".into(), claim("b", "gone-node", "gone-subnet"));
        let spec = Arc::downgrade(&claims["a"].spec);
        let config = Arc::downgrade(opaque(&claims["a"])[1]);
        let selector = Arc::downgrade(selector(&claims["a"]));
        claims.remove("a");
        claims.remove("b");
        assert!(spec.upgrade().is_some(), "kept until the next sweep");
        for i in 0..2 * SWEEP_MIN {
            let name = format!("c{i}");
            claims.insert(name.clone(), claim(&name, &format!("node-{i}"), &format!("s{i}")));
            claims.remove(&name);
        }
        assert!(spec.upgrade().is_none(), "spec");
        assert!(config.upgrade().is_none(), "opaque configuration");
        assert!(selector.upgrade().is_none(), "node selector");
        assert!(claims.pooled() <= 3 * SWEEP_MIN, "{} entries", claims.pooled());
    }

    fn slice(name: &str, attribute: &str, slots: &str) -> Box<ResourceSlice> {
        let device = |dev: &str| {
            json!({"name": dev,
                "attributes": {attribute: {"string": "cx7"}, "net.example.com/ifName": {"string": dev}},
                "capacity": {"net.example.com/slots": {"value": slots,
                    "requestPolicy": {"default": "1", "validValues": ["1"]}}}})
        };
        Box::new(
            serde_json::from_value(json!({
                "metadata": {"name": name},
                "spec": {"driver": "net.example.com", "nodeName": name,
                    "pool": {"name": name, "generation": 1, "resourceSliceCount": 1},
                    "devices": [device("eth0"), device("eth1")]}
            }))
            .unwrap(),
        )
    }

    /// The attribute names of one device.
    fn names(s: &ResourceSlice, device: usize) -> Vec<Arc<str>> {
        s.spec.devices[device].attributes.keys().cloned().collect()
    }

    /// Slices share their devices' attribute names and the capacities that serialise the same;
    /// capacities written differently are not shared; the slices write back what was read.
    #[test]
    fn equal_parts_of_stored_slices_are_one_copy() {
        let mut slices = Slices::default();
        let cases = [
            ("a", "net.example.com/model", "2048"),
            ("b", "net.example.com/model", "2048"),
            ("c", "net.example.com/model", "2Ki"),
        ];
        let texts: Vec<String> = cases
            .iter()
            .map(|(n, attr, slots)| serde_json::to_string(&slice(n, attr, slots)).unwrap())
            .collect();
        for (name, attr, slots) in cases {
            slices.insert(name.into(), slice(name, attr, slots));
        }
        let (a, b, c) = (&slices["a"], &slices["b"], &slices["c"]);
        for (i, (x, y)) in names(a, 0).iter().zip(names(c, 1)).enumerate() {
            assert!(Arc::ptr_eq(x, &y), "attribute name {i}");
        }
        let capacity = |s: &ResourceSlice, d: usize| Arc::clone(&s.spec.devices[d].capacity);
        assert!(
            Arc::ptr_eq(&capacity(a, 0), &capacity(a, 1)),
            "devices of a slice"
        );
        assert!(Arc::ptr_eq(&capacity(a, 0), &capacity(b, 1)), "two slices");
        assert_eq!(capacity(a, 0), capacity(c, 0), "equal quantities");
        assert!(
            !Arc::ptr_eq(&capacity(a, 0), &capacity(c, 0)),
            "written differently"
        );
        for ((name, ..), text) in cases.iter().zip(&texts) {
            assert_eq!(&serde_json::to_string(&slices[*name]).unwrap(), text, "{name}");
        }
    }

    fn metadata_slice(name: &str, expression: &str) -> Box<ResourceSlice> {
        Box::new(
            serde_json::from_value(json!({
                "metadata": {"name": format!("{name}-meta")},
                "spec": {"driver": "net.example.com", "nodeName": name,
                    "pool": {"name": name, "generation": 1, "resourceSliceCount": 2},
                    "sharingAffinity": [{"cel": {"subnet": expression}}]}
            }))
            .unwrap(),
        )
    }

    /// Metadata slices of several pools share the extractors written the same, not others; an
    /// extractor no slice holds leaves the pool at the next sweep.
    #[test]
    fn equal_extractors_of_stored_slices_are_one_copy() {
        let mut slices = Slices::default();
        for (pool, expression) in [
            ("n1", "object.subnet"),
            ("n2", "object.subnet"),
            ("n3", "object.vlan"),
        ] {
            slices.insert(pool.into(), metadata_slice(pool, expression));
        }
        let extractor = |s: &str| Arc::clone(&slices[s].spec.sharing_affinity[0]);
        assert!(Arc::ptr_eq(&extractor("n1"), &extractor("n2")), "same extractor");
        assert!(
            !Arc::ptr_eq(&extractor("n1"), &extractor("n3")),
            "another expression"
        );
        assert_eq!(extractor("n3").cel["subnet"], "object.vlan");
        let gone = Arc::downgrade(&extractor("n3"));
        slices.remove("n3");
        for i in 0..2 * SWEEP_MIN {
            let name = format!("s{i}");
            slices.insert(name.clone(), metadata_slice(&name, &format!("object.x{i}")));
            slices.remove(&name);
        }
        assert!(gone.upgrade().is_none(), "extractor of a deleted slice");
        assert!(slices.pooled() <= 3 * SWEEP_MIN, "{} entries", slices.pooled());
    }

    /// Parts of deleted slices leave the pools at the next sweep; the pools stay bounded under
    /// churn.
    #[test]
    fn pools_drop_parts_of_deleted_slices() {
        let mut slices = Slices::default();
        slices.insert("a".into(), slice("a", "gone.example.com/model", "7"));
        let name = Arc::downgrade(&names(&slices["a"], 0)[0]);
        let capacity = Arc::downgrade(&slices["a"].spec.devices[0].capacity);
        slices.remove("a");
        for i in 0..2 * SWEEP_MIN {
            let name = format!("s{i}");
            slices.insert(
                name.clone(),
                slice(&name, &format!("x.example.com/a{i}"), &i.to_string()),
            );
            slices.remove(&name);
        }
        assert!(name.upgrade().is_none(), "attribute name");
        assert!(capacity.upgrade().is_none(), "capacity");
        assert!(slices.pooled() <= 3 * SWEEP_MIN, "{} entries", slices.pooled());
    }

    fn status(memory: &str) -> Arc<NodeStatus> {
        Arc::new(serde_json::from_value(json!({"capacity": {"cpu": "32", "memory": memory}})).unwrap())
    }

    /// Nodes share the statuses that serialise the same, not those written differently; statuses
    /// no node holds leave the pool at the next sweep.
    #[test]
    fn equal_node_statuses_are_one_copy() {
        let mut statuses = NodeStatuses::default();
        let (mut a, mut b, mut c) = (status("2048"), status("2048"), status("2Ki"));
        for s in [&mut a, &mut b, &mut c] {
            statuses.share(s);
        }
        assert!(Arc::ptr_eq(&a, &b), "same text");
        assert_eq!(a, c, "equal quantities");
        assert!(!Arc::ptr_eq(&a, &c), "written differently");
        assert_eq!(
            serde_json::to_string(&c).unwrap(),
            r#"{"capacity":{"cpu":"32","memory":"2Ki"}}"#
        );
        let gone = Arc::downgrade(&a);
        drop((a, b));
        for i in 0..2 * SWEEP_MIN {
            statuses.share(&mut status(&i.to_string()));
        }
        assert!(gone.upgrade().is_none(), "swept");
        assert!(
            statuses.pooled() <= 3 * SWEEP_MIN,
            "{} entries",
            statuses.pooled()
        );
    }

    #[test]
    fn writes_compares_the_whole_text() {
        let cases = [
            (r#"{"a":1}"#, true, "same"),
            (r#"{"a":1"#, false, "text shorter"),
            (r#"{"a":1}}"#, false, "text longer"),
            (r#"{"a":2}"#, false, "differs"),
        ];
        let value = serde_json::json!({"a": 1});
        for (text, want, msg) in cases {
            let mut buf = text.as_bytes().to_vec();
            assert_eq!(writes(&value, &mut buf), want, "{msg}");
            assert_eq!(buf, text.as_bytes(), "{msg}: the text is left as it was");
        }
    }
}
