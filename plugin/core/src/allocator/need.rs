//! What a request needs of a device's capacities (upstream `CmpRequestOverCapacity`), worked
//! out once per capacity shape, and whether a device has room for it.

use std::sync::Arc;

use smallvec::SmallVec;

use super::{Allocator, ReqData, Search};
use crate::capacity;
use crate::index::DevIdx;
use crate::model::{DeviceCapacity, Map};
use crate::quantity::Quantity;

impl Search<'_> {
    /// Upstream `CmpRequestOverCapacity` for request `rd`: `None` when it names a capacity the
    /// device lacks (the device is skipped), else whether every capacity stays within its value.
    pub(super) fn capacity_fits(&self, rd: &ReqData, d: DevIdx) -> Option<bool> {
        let caps = &self.alloc.index.device(d).capacity;
        let allocated = &self.device_use(d).consumed;
        let allocating = self.scratch.tentative.consumed(d);
        with_need(self.alloc, rd, caps, |need| {
            let consumes = match need {
                Need::Lacks => return None,
                Need::BreaksPolicy => return Some(false),
                Need::Consumes(c) => c,
            };
            for (i, (consumed, cap)) in consumes.iter().zip(caps.values()).enumerate() {
                let mut total = consumed.clone();
                for extra in [allocated.get(i), allocating.and_then(|v| v.get(i))]
                    .into_iter()
                    .flatten()
                {
                    match total.checked_add(extra) {
                        Some(t) => total = t,
                        None => return Some(false),
                    }
                }
                if total > cap.value {
                    return Some(false);
                }
            }
            Some(true)
        })
    }
}

/// What a request needs of a device's capacities, before the device's use is added (upstream
/// `CmpRequestOverCapacity`'s per-capacity part). It depends only on the request and the
/// device's capacity map, so a request computes it once per capacity shape ([`with_need`]).
#[derive(Debug)]
pub(super) enum Need {
    /// The request names a capacity the device lacks: the device is skipped.
    Lacks,
    /// What the request consumes of some capacity breaks that capacity's request policy.
    BreaksPolicy,
    /// What the request consumes of each capacity, aligned with the device's capacity map.
    Consumes(SmallVec<[Quantity; 2]>),
}

impl Need {
    fn of(requested: Option<&Map<String, Quantity>>, caps: &Map<String, DeviceCapacity>) -> Need {
        if let Some(req) = requested
            && req.keys().any(|k| !caps.contains_key(k))
        {
            return Need::Lacks;
        }
        let consumes: SmallVec<[Quantity; 2]> = consumption(requested, caps).collect();
        let breaks = consumes
            .iter()
            .zip(caps.values())
            .any(|(q, cap)| capacity::violates_policy(q, cap.request_policy.as_deref()));
        if breaks {
            Need::BreaksPolicy
        } else {
            Need::Consumes(consumes)
        }
    }
}

/// Calls `f` with what request `rd` needs of a device whose capacity map is `caps`: from the
/// request's memo when `caps` is the first shape the request met ([`ReqData::need_first`]), else
/// computed (the request's capacities are looked up only then).
pub(super) fn with_need<R>(
    alloc: &Allocator<'_>,
    rd: &ReqData,
    caps: &Arc<Map<String, DeviceCapacity>>,
    f: impl FnOnce(&Need) -> R,
) -> R {
    let need = || Need::of(super::request_fields(alloc, rd).capacity, caps);
    let (shape, first) = rd.need_first.get_or_init(|| (Arc::clone(caps), need()));
    if Arc::ptr_eq(shape, caps) {
        f(first)
    } else {
        f(&need())
    }
}

/// The capacity a request consumes on a device, aligned with the device's capacity map `caps`
/// (what a shared allocation adds to the device's consumed capacity).
pub(super) fn consumption<'x>(
    requested: Option<&'x Map<String, Quantity>>,
    caps: &'x Map<String, DeviceCapacity>,
) -> impl Iterator<Item = Quantity> + 'x {
    caps.iter()
        .map(move |(n, cap)| capacity::consumed_capacity(requested.and_then(|q| q.get(n)), cap))
}

impl Need {
    /// What the request consumes of each capacity, when it consumes.
    #[inline]
    pub(super) fn consumes(&self) -> Option<&[Quantity]> {
        match self {
            Need::Consumes(c) => Some(c),
            Need::Lacks | Need::BreaksPolicy => None,
        }
    }
}
