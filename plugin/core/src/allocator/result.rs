//! Building the API results of a successful call: device results, configs, node selector,
//! and share IDs.

use crate::hashing::FxHashMap as HashMap;

use super::need::consumption;
use super::{AllocError, Chosen, ClaimResult, DeviceChoice, Search};
use crate::index::{DeviceKey, Index};
use crate::model::{
    AllocationResult, DeviceAllocationConfiguration, DeviceAllocationResult, DeviceRequestAllocationResult,
    NodeSelector, NodeSelectorRequirement, NodeSelectorTerm, ResourceClaim,
};
use crate::node_selector;

impl<'a> Search<'a> {
    pub(super) fn build_results(&self) -> Result<Vec<ClaimResult>, AllocError> {
        let index = self.alloc.index;
        let mut out = Vec::with_capacity(self.results.len());
        for (ci, chosen) in self.results.iter().enumerate() {
            let claim = self.alloc.claims[ci].claim;
            let mut results = Vec::with_capacity(chosen.len());
            let mut choices = Vec::with_capacity(chosen.len());
            for ch in chosen {
                let entry = index.device(ch.dev);
                let pool = &index.pools[entry.pool];
                let fields = self.fields(&self.reqs[ci][ch.req.0][ch.req.1]);
                results.push(DeviceRequestAllocationResult {
                    request: fields.full_name().into(),
                    driver: pool.driver.as_str().into(),
                    pool: pool.name.as_str().into(),
                    device: entry.device.name.clone(),
                    admin_access: ch.admin.then_some(true),
                    tolerations: fields.tolerations.to_vec(),
                    binding_conditions: entry.device.binding_conditions.clone(),
                    binding_failure_conditions: entry.device.binding_failure_conditions.clone(),
                    share_id: None,
                    consumed_capacity: (ch.shared && !entry.capacity.is_empty()).then(|| {
                        entry
                            .capacity
                            .keys()
                            .cloned()
                            .zip(consumption(fields.capacity, &entry.capacity))
                            .collect()
                    }),
                });
                choices.push(DeviceChoice {
                    dev: ch.dev,
                    affinity: ch.affinity.clone(),
                    joined_lock: ch.joined_lock,
                    shared: ch.shared,
                });
            }
            let config = self.configs(ci, claim)?;
            let node_selector = self.node_selector(chosen)?.map(std::sync::Arc::new);
            out.push(ClaimResult {
                allocation: AllocationResult {
                    devices: DeviceAllocationResult { results, config },
                    node_selector,
                    allocation_timestamp: None,
                },
                choices,
            });
        }
        Ok(out)
    }

    /// Class configs (each class once, with the requests using it), then claim configs for the
    /// allocated requests; a config covering every request gets an empty `requests` list.
    pub(super) fn configs(
        &self,
        ci: usize,
        claim: &ResourceClaim,
    ) -> Result<Vec<DeviceAllocationConfiguration>, AllocError> {
        let mut out: Vec<DeviceAllocationConfiguration> = Vec::new();
        let mut class_ranges: HashMap<&str, (usize, usize)> = HashMap::default();
        let mut names = Vec::new();
        for (ri, per_req) in self.reqs[ci].iter().enumerate() {
            let si = if per_req.len() > 1 || claim.spec.devices.requests[ri].exactly.is_none() {
                self.selected_sub.get(&(ci, ri)).copied().unwrap_or(0)
            } else {
                0
            };
            let fields = self.fields(&per_req[si]);
            let name = fields.full_name();
            names.push((fields.request.to_string(), name.clone()));
            let class = self
                .alloc
                .classes
                .get(fields.class_name)
                .ok_or_else(|| AllocError::PreparedClassMissing(fields.class_name.to_string()))?;
            if let Some(&(start, end)) = class_ranges.get(class.metadata.name.as_str()) {
                for c in &mut out[start..end] {
                    c.requests.push(name.clone());
                }
                continue;
            }
            let start = out.len();
            for c in &class.spec.config {
                out.push(DeviceAllocationConfiguration {
                    source: "FromClass".into(),
                    requests: vec![name.clone()],
                    opaque: c.opaque.clone(),
                    structured: None,
                });
            }
            class_ranges.insert(&class.metadata.name, (start, out.len()));
        }
        for c in &claim.spec.devices.config {
            let applies = c.requests.is_empty()
                || names
                    .iter()
                    .any(|(req, full)| c.requests.contains(req) || c.requests.contains(full));
            if applies {
                out.push(DeviceAllocationConfiguration {
                    source: "FromClaim".into(),
                    requests: c.requests.clone(),
                    opaque: c.opaque.clone(),
                    structured: c.structured.clone(),
                });
            }
        }
        for c in &mut out {
            if !c.requests.is_empty()
                && names
                    .iter()
                    .all(|(req, full)| c.requests.contains(req) || c.requests.contains(full))
            {
                c.requests.clear();
            }
        }
        Ok(out)
    }

    /// Where a device is available: pinned to its node (a node name), or the node selector of
    /// its slice (or of the device, for per-device placement).
    fn placement(&self, dev: crate::index::DevIdx) -> (bool, Option<&NodeSelector>) {
        let index = self.alloc.index;
        let entry = index.device(dev);
        index.pools[entry.pool].slices[entry.slice].placement(&entry.device)
    }

    /// The error [`Search::node_selector`] gives for `chosen`, without building the selector
    /// (Filter checks this; Reserve builds the selector): a slice selector of more than one term
    /// before any node-local device.
    pub(super) fn check_node_selector(&self, chosen: &[Chosen]) -> Result<(), AllocError> {
        // The device flags answer without the slice (a pool and a slice entry per node: two
        // likely cache misses per Filter call at 5,000 nodes); the slice is read for the message.
        for ch in chosen {
            let flags = self.alloc.index.flags(ch.dev);
            if flags.node_local() {
                return Ok(());
            }
            if flags.multi_term_selector() {
                let n = self
                    .placement(ch.dev)
                    .1
                    .map_or(0, |s| s.node_selector_terms.len());
                return Err(AllocError::NodeSelectorTerms(n));
            }
        }
        Ok(())
    }

    /// Upstream `createNodeSelector`: node-local devices pin the claim to the node; otherwise the
    /// single-term selectors of the slices are merged; none means available everywhere.
    pub(super) fn node_selector(&self, chosen: &[Chosen]) -> Result<Option<NodeSelector>, AllocError> {
        self.check_node_selector(chosen)?;
        let mut term = NodeSelectorTerm::default();
        for ch in chosen {
            let (named, sel) = self.placement(ch.dev);
            if named {
                return Ok(Some(node_selector::node_name_selector(
                    &self.node.node.metadata.name,
                )));
            }
            // At most one term (checked above).
            if let Some(t) = sel.and_then(|s| s.node_selector_terms.first()) {
                add_new(&t.match_fields, &mut term.match_fields);
                add_new(&t.match_expressions, &mut term.match_expressions);
            }
        }
        if term.match_fields.is_empty() && term.match_expressions.is_empty() {
            return Ok(None);
        }
        Ok(Some(NodeSelector {
            node_selector_terms: vec![term],
        }))
    }
}

fn add_new(from: &[NodeSelectorRequirement], to: &mut Vec<NodeSelectorRequirement>) {
    for r in from {
        if !to.contains(r) {
            to.push(r.clone());
        }
    }
}

impl ClaimResult {
    /// Gives every shared result its share ID (Filter leaves them unset: only the allocation that
    /// Reserve commits needs them).
    pub fn assign_share_ids(&mut self, claim: &str, index: &Index) {
        for (position, (res, ch)) in self
            .allocation
            .devices
            .results
            .iter_mut()
            .zip(&self.choices)
            .enumerate()
        {
            if ch.shared {
                res.share_id = Some(share_id_for(
                    claim,
                    &res.request,
                    &index.device(ch.dev).key,
                    position,
                ));
            }
        }
    }
}

/// A deterministic share ID in UUID format: FNV-1a over the claim, request, device and position.
///
/// Upstream generates a random UUID; a deterministic one makes replays reproducible. Uniqueness
/// per device holds because one claim's request takes a device at most once per position.
pub fn share_id_for(claim: &str, request: &str, device: &DeviceKey, position: usize) -> String {
    fn fnv(seed: u64, parts: &[&[u8]]) -> u64 {
        let mut h = seed;
        for p in parts {
            for b in p.iter().chain(&[0xff]) {
                h ^= u64::from(*b);
                h = h.wrapping_mul(0x0000_0100_0000_01b3);
            }
        }
        h
    }
    let pos = (position as u64).to_le_bytes();
    let parts: [&[u8]; 4] = [
        claim.as_bytes(),
        request.as_bytes(),
        device.as_str().as_bytes(),
        &pos,
    ];
    let hi = fnv(0xcbf2_9ce4_8422_2325, &parts);
    let lo = fnv(0x8422_2325_cbf2_9ce4, &parts);
    // Version 8 (custom) and RFC 4122 variant bits.
    let hi = (hi & 0xffff_ffff_ffff_0fff) | 0x0000_0000_0000_8000;
    let lo = (lo & 0x3fff_ffff_ffff_ffff) | 0x8000_0000_0000_0000;
    format!(
        "{:08x}-{:04x}-{:04x}-{:04x}-{:012x}",
        hi >> 32,
        (hi >> 16) & 0xffff,
        hi & 0xffff,
        lo >> 48,
        lo & 0xffff_ffff_ffff
    )
}
