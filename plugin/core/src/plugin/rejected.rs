//! The objects the plugin rejected, so that a decision that misses one says why.
//!
//! kube-scheduler knows a Node (or a pod's claim) whatever the plugin made of it: when the
//! plugin could not decode the object, Filter and PreFilter still meet its name. They then say
//! `node worker-1 was rejected: <the decoding error>`, never a bare "not found" that hides the
//! cause. An entry is dropped when an object of the same kind and name decodes, or is deleted.

use crate::FxHashMap as HashMap;
use crate::object::Kind;

/// Longest reason kept per object, in bytes: a rejected object's error can quote a long field (a
/// 10 KiB selector), and every node's Filter status may carry it.
const MAX_REASON: usize = 1024;

/// The rejected objects by kind and `namespace/name`, each with its error.
#[derive(Debug, Default)]
pub(super) struct Rejected(HashMap<(Kind, String), String>);

impl Rejected {
    /// Records that the object `id` was rejected for `reason`.
    pub(super) fn record(&mut self, id: (Kind, String), reason: String) {
        let mut reason = reason;
        if reason.len() > MAX_REASON {
            let mut end = MAX_REASON;
            while !reason.is_char_boundary(end) {
                end -= 1;
            }
            reason.truncate(end);
            reason.push_str("...");
        }
        self.0.insert(id, reason);
    }

    /// Forgets the object: it decoded, or was deleted.
    pub(super) fn forget(&mut self, kind: Kind, key: &str) {
        if !self.0.is_empty() {
            self.0.remove(&(kind, key.to_string()));
        }
    }

    /// What to say of `what` (`node worker-1`, `resource claim ns/c`) that the plugin does not
    /// have: `<what> was rejected: <reason>` when it rejected the object, else `otherwise`.
    pub(super) fn missing(
        &self,
        kind: Kind,
        key: &str,
        what: &str,
        otherwise: impl FnOnce() -> String,
    ) -> String {
        match self.0.get(&(kind, key.to_string())) {
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
