//! The sharing-affinity rank of a node: how much an allocation there consolidates claims onto
//! devices already locked to their values.

use super::Extractors;
use crate::index::{DevIdx, Index};

/// What the rank reads of one allocated device.
#[derive(Clone, Copy, Debug)]
pub struct Pick {
    /// The request (a subrequest counts as its request) that chose the device.
    pub request: usize,
    /// The device.
    pub dev: DevIdx,
    /// Allocated with admin access.
    pub admin: bool,
    /// `Some(joined)` when the request locks the device to affinity values: whether the device
    /// was already locked to them (persistently, or tentatively by another request or claim of
    /// the same call); `None` when affinity does not apply.
    pub affinity: Option<bool>,
}

/// The node's sharing-affinity rank: per allocated device 2 when it joins a device locked to
/// compatible values, 1 when it takes a clean affinity-gated device, 0 when it shares a device of
/// an affinity pool that no extractor gates. A device affinity cannot apply to is neutral (a pool
/// without extractors, a dedicated device, admin access). Per request: `50 · Σ / non-neutral
/// devices`; the rank is the sum over requests, so neutral requests never dilute the others.
///
/// `claims` are the devices chosen per claim, read through `pick`.
pub fn rank<'c, C: 'c>(
    index: &Index,
    extractors: &Extractors,
    claims: impl IntoIterator<Item = &'c [C]>,
    pick: impl Fn(&C) -> Pick,
) -> u32 {
    // A device's points, `None` when it is neutral.
    let points = |c: &C| -> Option<u32> {
        let p = pick(c);
        let neutral =
            p.admin || !index.flags(p.dev).allow_multiple() || !extractors.pool_has_affinity(index, p.dev);
        (!neutral).then_some(match p.affinity {
            Some(true) => 2,
            Some(false) => 1,
            None => 0,
        })
    };
    let request = |c: &C| pick(c).request;
    let mut total = 0u32;
    for chosen in claims {
        // A claim has at most 32 devices: each request is summed where it first appears.
        for (i, first) in chosen.iter().enumerate() {
            let req = request(first);
            if chosen[..i].iter().any(|c| request(c) == req) {
                continue;
            }
            let (mut sum, mut n) = (0u32, 0u32);
            for p in chosen[i..]
                .iter()
                .filter(|c| request(c) == req)
                .filter_map(points)
            {
                sum += p;
                n += 1;
            }
            // A request with only neutral devices (n = 0) adds nothing.
            if let Some(rank) = (sum * 50).checked_div(n) {
                total = total.saturating_add(rank);
            }
        }
    }
    total
}
