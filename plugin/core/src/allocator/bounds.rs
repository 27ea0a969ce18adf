//! Counting bounds: what the pod's claims need of the node against what its devices can give,
//! whatever devices the search would pick. A search that cannot succeed can take exponential
//! time (a count of 28 over 27 devices tries every 27-subset); these bounds prove such cases
//! impossible in one pass over the candidates.
//!
//! Each bound is a necessary condition of any allocation, computed from the devices' state
//! outside the call (the call's tentative allocations may all be undone):
//! - a request of count `n` needs `n` distinct devices that it may take (selected, with the
//!   capacity it names and room for one share, not allocated to a claim without a share);
//! - the requests whose every such device is shared consume at least the least share of a
//!   capacity any of them would consume, `n` times, from the capacity left on their devices.
//!
//! Requests with subrequests (`firstAvailable`), `All` mode or admin access are left out: a
//! bound only ever leaves things out, so it never rejects what the search would allocate.

use super::need::{Need, with_need};
use super::{AllocError, Mode, Search};
use crate::index::DevIdx;
use crate::quantity::Quantity;
use std::collections::BTreeMap;

/// What the requests whose devices are all shared need of one capacity, and their devices.
struct CapacityNeed {
    need: Quantity,
    devices: Vec<DevIdx>,
}

impl<'a> Search<'a> {
    /// Why the claims cannot all be allocated on the node, by counting; `None` when counting
    /// cannot tell. An error is a selector that does not evaluate.
    pub(super) fn shortfall(&self) -> Result<Option<String>, AllocError> {
        let index = self.alloc.index;
        let mut capacities: BTreeMap<&'a str, CapacityNeed> = BTreeMap::new();
        for claim in self.reqs.iter() {
            for subs in claim.iter() {
                let [rd] = subs.as_slice() else { continue };
                let Mode::Exact(n) = rd.mode else { continue };
                if rd.sub.is_some() || rd.admin {
                    continue;
                }
                let mut matching = Vec::new();
                // The least consumption per capacity name over the matching devices; `None` once
                // a matching device lacks the name.
                let mut least: Vec<(&'a str, Option<Quantity>)> = Vec::new();
                let mut all_shared = true;
                for &d in self.cands.iter() {
                    let entry = index.device(d);
                    if self.device_use(d).dedicated || !self.selectable(rd, d)? {
                        continue;
                    }
                    let shared = index.flags(d).allow_multiple();
                    let consumes = with_need(self.alloc, rd, &entry.capacity, |need| match need {
                        Need::Consumes(c) => Some(c.clone()),
                        Need::Lacks | Need::BreaksPolicy => None,
                    });
                    let Some(consumes) = consumes else { continue };
                    if shared && !self.room_for(d, &consumes) {
                        continue;
                    }
                    all_shared &= shared;
                    if matching.is_empty() {
                        least = entry.capacity.keys().map(|k| (k.as_str(), None)).collect();
                        for ((_, slot), c) in least.iter_mut().zip(&consumes) {
                            *slot = Some(c.clone());
                        }
                    } else {
                        for (name, slot) in least.iter_mut() {
                            let here = entry
                                .capacity
                                .keys()
                                .position(|k| k == name)
                                .map(|i| &consumes[i]);
                            *slot = match (slot.take(), here) {
                                (Some(q), Some(h)) => Some(if *h < q { h.clone() } else { q }),
                                _ => None,
                            };
                        }
                    }
                    matching.push(d);
                }
                if n > matching.len() {
                    let fields = self.fields(rd);
                    return Ok(Some(format!(
                        "claim {}, request {}: {n} devices requested, {} on the node can take it",
                        self.alloc.claims[rd.claim].key,
                        fields.request,
                        matching.len()
                    )));
                }
                if !all_shared {
                    continue;
                }
                for (name, q) in least {
                    let Some(per_device) = q.and_then(|q| q.checked_mul(n as i64)) else {
                        continue;
                    };
                    let entry = capacities.entry(name).or_insert_with(|| CapacityNeed {
                        need: Quantity::from_i64(0),
                        devices: Vec::new(),
                    });
                    match entry.need.checked_add(&per_device) {
                        Some(total) => entry.need = total,
                        None => continue,
                    }
                    entry.devices.extend_from_slice(&matching);
                }
            }
        }
        for (name, mut c) in capacities {
            c.devices.sort_unstable();
            c.devices.dedup();
            let mut left = Quantity::from_i64(0);
            for &d in &c.devices {
                if let Some(l) = self.left_of(d, name).and_then(|l| left.checked_add(&l)) {
                    left = l;
                }
            }
            if c.need > left {
                return Ok(Some(format!(
                    "the pod's claims need {} of {name}, the node's devices that can take them have {} left",
                    c.need, left
                )));
            }
        }
        Ok(None)
    }

    /// Whether shared device `d` has room, outside this call, for one share consuming `consumes`
    /// (aligned with its capacity map).
    fn room_for(&self, d: DevIdx, consumes: &[Quantity]) -> bool {
        let caps = &self.alloc.index.device(d).capacity;
        let used = &self.device_use(d).consumed;
        caps.values().zip(consumes).enumerate().all(|(i, (cap, c))| {
            let total = match used.get(i) {
                Some(u) => c.checked_add(u),
                None => Some(c.clone()),
            };
            total.is_some_and(|t| t <= cap.value)
        })
    }

    /// The capacity `name` of device `d` left outside this call.
    fn left_of(&self, d: DevIdx, name: &str) -> Option<Quantity> {
        let caps = &self.alloc.index.device(d).capacity;
        let i = caps.keys().position(|k| k == name)?;
        let cap = &caps.values().nth(i)?.value;
        match self.device_use(d).consumed.get(i) {
            Some(used) => cap.checked_sub(used),
            None => Some(cap.clone()),
        }
    }
}
