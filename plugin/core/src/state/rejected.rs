//! The objects the plugin rejected, so that a decision that misses one says why.
//!
//! kube-scheduler knows a Node (or a pod's claim) whatever the plugin made of it: when the
//! plugin could not decode the object, Filter and PreFilter still meet its name. They then say
//! `node worker-1 was rejected: <the decoding error>`, never a bare "not found" that hides the
//! cause. An entry is dropped when an object of the same kind and name decodes, or is deleted.
//!
//! A rejected ResourceClaim may hold devices: its `status.allocation` is read on its own
//! ([`salvage_claim`]), in whatever API version the claim came in, and keeps holding them
//! (KEP-5981's fail-safe: with its config unread, a shared device it holds is Unreconstructable,
//! neither free nor shareable) until the claim decodes or is deleted.

use crate::hashing::FxHashMap as HashMap;
use crate::model::ResourceClaim;
use crate::object::Kind;

/// Longest reason kept per object, in bytes: a rejected object's error can quote a long field (a
/// 10 KiB selector), and every node's Filter status may carry it.
const MAX_REASON: usize = 1024;

/// The rejected objects by kind and `namespace/name`, each with its error, and the allocations
/// of rejected claims, which still hold their devices.
#[derive(Debug, Default)]
pub(crate) struct Rejected {
    reasons: HashMap<(Kind, String), String>,
    held: HashMap<String, Box<ResourceClaim>>,
}

/// What can be read of a rejected claim's JSON text that holds devices: its metadata and its
/// `status.allocation` (and `reservedFor`), with no spec. The allocation's shape is the same in
/// every served version (`v1`, `v1beta2`, `v1beta1`). When the allocation does not read as a
/// whole (a bad quantity in `consumedCapacity`, a bad node selector), each result is read for the
/// device it names alone (`request`, `driver`, `pool`, `device`, `shareID`): the device stays held,
/// and with no readable configuration a shared one is Unreconstructable, so what it consumed no
/// longer matters. `None` when no device can be read from the text.
pub(crate) fn salvage_claim(json: &str) -> Option<ResourceClaim> {
    let value: serde_json::Value = serde_json::from_str(json).ok()?;
    let status = value.get("status")?;
    let allocation = status.get("allocation").filter(|a| !a.is_null())?;
    let metadata = value.get("metadata")?;
    let held = |allocation: serde_json::Value| {
        let mut claim = serde_json::json!({"metadata": metadata, "status": {"allocation": allocation}});
        if let Some(reserved) = status.get("reservedFor") {
            claim["status"]["reservedFor"] = reserved.clone();
        }
        crate::json::from_text::<ResourceClaim>(&claim.to_string())
            .ok()
            .filter(|c| {
                c.status
                    .allocation
                    .as_ref()
                    .is_some_and(|a| !a.devices.results.is_empty())
            })
    };
    held(allocation.clone()).or_else(|| {
        let results = allocation.pointer("/devices/results")?.as_array()?;
        let identities: Vec<serde_json::Value> = results
            .iter()
            .filter_map(|result| {
                let mut identity = serde_json::Map::new();
                for field in ["request", "driver", "pool", "device", "shareID"] {
                    if let Some(text) = result.get(field).filter(|v| v.is_string()) {
                        identity.insert(field.into(), text.clone());
                    }
                }
                ["driver", "pool", "device"]
                    .iter()
                    .all(|f| identity.contains_key(*f))
                    .then_some(serde_json::Value::Object(identity))
            })
            .collect();
        held(serde_json::json!({"devices": {"results": identities}}))
    })
}

impl Rejected {
    /// Records that the object `id` was rejected for `reason`.
    pub(crate) fn record(&mut self, id: (Kind, String), reason: String) {
        let mut reason = reason;
        if reason.len() > MAX_REASON {
            let mut end = MAX_REASON;
            while !reason.is_char_boundary(end) {
                end -= 1;
            }
            reason.truncate(end);
            reason.push_str("...");
        }
        self.reasons.insert(id, reason);
    }

    /// Forgets the object: it decoded, or was deleted.
    pub(crate) fn forget(&mut self, kind: Kind, key: &str) {
        if !self.reasons.is_empty() {
            self.reasons.remove(&(kind, key.to_string()));
        }
    }

    /// Keeps what a rejected claim still holds; returns what it held before.
    pub(crate) fn hold(&mut self, key: &str, claim: ResourceClaim) -> Option<Box<ResourceClaim>> {
        self.held.insert(key.to_string(), Box::new(claim))
    }

    /// Takes back what a rejected claim held: the claim decoded, or is gone.
    pub(crate) fn release(&mut self, key: &str) -> Option<Box<ResourceClaim>> {
        if self.held.is_empty() {
            return None;
        }
        self.held.remove(key)
    }

    /// What to say of `what` (`node worker-1`, `resource claim ns/c`) that the plugin does not
    /// have: `<what> was rejected: <reason>` when it rejected the object, else `otherwise`.
    pub(crate) fn missing(
        &self,
        kind: Kind,
        key: &str,
        what: &str,
        otherwise: impl FnOnce() -> String,
    ) -> String {
        match self.reasons.get(&(kind, key.to_string())) {
            Some(reason) => format!("{what} was rejected: {reason}"),
            None => otherwise(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_rejected_object_is_named_with_its_reason_until_it_decodes() {
        let mut r = Rejected::default();
        let otherwise = || "node n not found".to_string();
        assert_eq!(
            r.missing(Kind::Node, "n", "node n", otherwise),
            "node n not found"
        );
        r.record((Kind::Node, "n".into()), "Node n: field x: bad".into());
        assert_eq!(
            r.missing(Kind::Node, "n", "node n", otherwise),
            "node n was rejected: Node n: field x: bad"
        );
        assert_eq!(
            r.missing(Kind::ResourceClaim, "n", "claim n", || "other".into()),
            "other",
            "by kind"
        );
        r.forget(Kind::Node, "n");
        assert_eq!(
            r.missing(Kind::Node, "n", "node n", otherwise),
            "node n not found"
        );
    }

    #[test]
    fn a_rejected_claims_allocation_is_read_in_any_version() {
        let claim = r#"{"apiVersion":"resource.k8s.io/v1beta2","kind":"ResourceClaim",
            "metadata":{"name":"c","namespace":"ns","uid":"u"},
            "spec":{"devices":{"requests":[{"name":"nic","exactly":{"deviceClassName":"nic","count":"x"}}]}},
            "status":{"allocation":{"devices":{"results":[{"request":"nic","driver":"d","pool":"p",
                "device":"eth1","shareID":"s","consumedCapacity":{"d/slots":"1"}}]}},
                "reservedFor":[{"resource":"pods","name":"p","uid":"pu"}]}}"#;
        let held = salvage_claim(claim).expect("the allocation reads");
        assert_eq!(held.metadata.name, "c");
        assert!(held.spec.devices.requests.is_empty(), "the spec is not read");
        let results = &held.status.allocation.as_ref().unwrap().devices.results;
        assert_eq!(
            (results[0].device.as_str(), held.status.reserved_for.len()),
            ("eth1", 1)
        );
        for none in [
            r#"{"kind":"ResourceClaim","metadata":{"name":"c"},"status":{}}"#,
            r#"{"kind":"ResourceClaim","metadata":{"name":"c"},"status":{"allocation":null}}"#,
            r#"{"kind":"ResourceClaim","metadata":{"name":"c"},"status":{"allocation":{"devices":{"results":[{"device":7}]}}}}"#,
            r#"{"kind":"ResourceClaim","metadata":{"name":"c"},"status":{"allocation":{"devices":{"results":[]}}}}"#,
            "not json",
        ] {
            assert!(salvage_claim(none).is_none(), "{none}");
        }
    }

    /// An allocation that does not read as a whole still holds each device whose identity
    /// reads: a device is never freed because a field beside its name is unreadable.
    #[test]
    fn a_device_named_in_an_unreadable_allocation_stays_held() {
        let claim = r#"{"apiVersion":"resource.k8s.io/v1","kind":"ResourceClaim",
            "metadata":{"name":"c","namespace":"ns"},
            "status":{"allocation":{"nodeSelector":"bad","devices":{"results":[
                {"request":"nic","driver":"d","pool":"p","device":"eth1","shareID":"s","consumedCapacity":{"d/slots":"lots"}},
                {"request":"nic","driver":"d","pool":"p","device":7},
                {"request":"nic","driver":"d","pool":"p","device":"eth2","consumedCapacity":{"d/slots":"1"}}]}}}}"#;
        let held = salvage_claim(claim).expect("the devices are held");
        let results = &held.status.allocation.as_ref().unwrap().devices.results;
        let devices: Vec<(&str, Option<&str>)> = results
            .iter()
            .map(|r| (r.device.as_str(), r.share_id.as_deref()))
            .collect();
        assert_eq!(devices, [("eth1", Some("s")), ("eth2", None)]);
        assert!(results.iter().all(|r| r.consumed_capacity.is_none()));
    }

    #[test]
    fn long_reasons_are_cut_at_a_character() {
        let mut r = Rejected::default();
        r.record((Kind::Node, "n".into()), "é".repeat(MAX_REASON));
        let said = r.missing(Kind::Node, "n", "node n", String::new);
        assert!(
            said.len() < MAX_REASON + 40 && said.ends_with("..."),
            "{}",
            said.len()
        );
    }
}
