//! Per-device locks: the values a device is locked to, derived from the claims holding it
//! ([`lock_from`]), and the compact per-index table of those states ([`LockTable`]).

use std::sync::Arc;

use super::{Rejection, Values};
use crate::index::DevIdx;

/// The lock state of a device.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LockState {
    /// No allocation holds the device.
    Clean,
    /// Locked to these values (shared: the allocator compares and copies locks on every
    /// candidate device).
    Locked(Arc<Values>),
    /// Held by allocations whose values cannot be re-derived.
    Unreconstructable,
}

impl LockState {
    /// Whether a request wanting `wanted` may use the device.
    pub fn admits(&self, wanted: &Arc<Values>) -> Result<(), Rejection> {
        match self {
            LockState::Clean => Ok(()),
            LockState::Locked(lock) if same(lock, wanted) => Ok(()),
            LockState::Locked(lock) => Err(Rejection::Locked {
                lock: lock.clone(),
                wanted: wanted.clone(),
            }),
            LockState::Unreconstructable => Err(Rejection::Unreconstructable),
        }
    }
}

/// Derives a lock from the values of the allocations holding a device: all equal → locked; any
/// unknown or different → unreconstructable; none → clean.
pub fn lock_from<'a>(holders: impl IntoIterator<Item = Option<&'a Values>>) -> LockState {
    let mut lock: Option<&Values> = None;
    for h in holders {
        let Some(v) = h else {
            return LockState::Unreconstructable;
        };
        match lock {
            None => lock = Some(v),
            Some(l) if l == v => {}
            Some(_) => return LockState::Unreconstructable,
        }
    }
    match lock {
        None => LockState::Clean,
        Some(v) => LockState::Locked(Arc::new(v.clone())),
    }
}

/// The lock states of the devices of one index ([`DevIdx`]), each computed on first use: four
/// bytes per device, so that the eight devices of a node share a cache line. A Filter reads the
/// states of every candidate of its node; at 5,000 nodes the table is out of the cache, and an
/// `Option<LockState>` per device (16 bytes) put a node's states on two or three lines.
///
/// A slot holds the position of its state in `states`, where each distinct state is kept once:
/// position 0 means "not computed" (and holds `Unreconstructable`, what the allocator assumes of a
/// device without a state), then `Clean`, `Unreconstructable`, then every lock by its allocation
/// (locks are interned, [`super::Extractors::intern`]; equal locks that are not still compare equal).
/// Positions are never reused until [`LockTable::clear`]. [`LockTable::make_room`] starts the
/// table again (every state is computed anew on use) when the states to be set next might take it
/// past [`LockTable::MAX_STATES`]; [`LockTable::set`] itself never forgets another device's state,
/// so a caller that made room for a node's devices finds all of them set afterwards.
#[derive(Debug)]
pub struct LockTable {
    slots: Vec<u32>,
    states: Vec<LockState>,
    /// Position in `states` by the address of a lock's values (kept alive by `states`).
    positions: crate::hashing::FxHashMap<usize, u32>,
}

impl Default for LockTable {
    fn default() -> Self {
        LockTable {
            slots: Vec::new(),
            states: Self::FIXED.to_vec(),
            positions: Default::default(),
        }
    }
}

impl LockTable {
    /// Distinct states kept before the table starts again.
    pub const MAX_STATES: usize = 1 << 16;

    /// The first states of every table: not computed, clean, unreconstructable.
    const FIXED: [LockState; 3] = [
        LockState::Unreconstructable,
        LockState::Clean,
        LockState::Unreconstructable,
    ];

    /// The device's state, if it was computed since it last changed.
    pub fn get(&self, dev: DevIdx) -> Option<&LockState> {
        match *self.slots.get(dev as usize)? {
            0 => None,
            slot => self.states.get(slot as usize),
        }
    }

    /// The device's state, `Unreconstructable` (never shared) when it was not computed: what
    /// the allocator reads.
    pub fn get_or_unreconstructable(&self, dev: DevIdx) -> &LockState {
        let slot = self.slots.get(dev as usize).copied().unwrap_or(0);
        &self.states[slot as usize]
    }

    /// Whether the device's state was computed since it last changed.
    pub fn has(&self, dev: DevIdx) -> bool {
        self.slots.get(dev as usize).is_some_and(|&s| s > 0)
    }

    /// Records the device's state; `devices` is the size of the index.
    pub fn set(&mut self, dev: DevIdx, state: LockState, devices: usize) {
        let position = match state {
            LockState::Clean => 1,
            LockState::Unreconstructable => 2,
            LockState::Locked(values) => {
                let next = self.states.len() as u32;
                *self
                    .positions
                    .entry(Arc::as_ptr(&values) as usize)
                    .or_insert_with(|| {
                        self.states.push(LockState::Locked(values));
                        next
                    })
            }
        };
        if self.slots.len() < devices.max(dev as usize + 1) {
            self.slots.resize(devices.max(dev as usize + 1), 0);
        }
        self.slots[dev as usize] = position;
    }

    /// Starts the table again when `n` more states could take it past [`LockTable::MAX_STATES`]:
    /// called before setting the states of `n` devices, none of which is then forgotten.
    pub fn make_room(&mut self, n: usize) {
        if self.states.len().saturating_add(n) > Self::MAX_STATES {
            self.clear();
        }
    }

    /// Forgets the device's state (its holders changed).
    pub fn forget(&mut self, dev: DevIdx) {
        if let Some(s) = self.slots.get_mut(dev as usize) {
            *s = 0;
        }
    }

    /// Forgets every state (the index was rebuilt).
    pub fn clear(&mut self) {
        self.slots.clear();
        self.states.truncate(Self::FIXED.len());
        self.positions.clear();
    }
}

/// Whether two shared value sets are equal (pointer first: interned values are usually shared).
pub fn same(a: &Arc<Values>, b: &Arc<Values>) -> bool {
    Arc::ptr_eq(a, b) || a == b
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::affinity::test_values as vals;

    #[test]
    fn lock_derivation() {
        let a = vals(&[("subnet", "A")]);
        let b = vals(&[("subnet", "B")]);
        assert_eq!(lock_from([]), LockState::Clean, "no holders: clean");
        assert_eq!(
            lock_from([Some(&a), Some(&a)]),
            LockState::Locked(Arc::new(a.clone())),
            "agreeing holders"
        );
        assert_eq!(
            lock_from([Some(&a), Some(&b)]),
            LockState::Unreconstructable,
            "disagreeing holders"
        );
        assert_eq!(
            lock_from([Some(&a), None]),
            LockState::Unreconstructable,
            "legacy holder"
        );
    }

    #[test]
    fn lock_admits_only_equal_values() {
        let a = Arc::new(vals(&[("subnet", "A")]));
        let ab = Arc::new(vals(&[("subnet", "A"), ("pkey", "1")]));
        assert!(LockState::Clean.admits(&a).is_ok());
        assert!(LockState::Locked(a.clone()).admits(&a).is_ok());
        let err = LockState::Locked(ab.clone())
            .admits(&Arc::new(vals(&[("subnet", "A"), ("pkey", "2")])))
            .unwrap_err();
        assert_eq!(
            err.to_string(),
            "locked to pkey=1, subnet=A, claim wants pkey=2, subnet=A"
        );
        assert!(
            LockState::Locked(ab).admits(&a).is_err(),
            "all keys must be equal"
        );
        assert_eq!(
            LockState::Unreconstructable.admits(&a),
            Err(Rejection::Unreconstructable)
        );
    }

    /// The compact lock table gives back what was set, per device, keeps one copy of each
    /// distinct lock, forgets one device or all, and starts again past its limit.
    #[test]
    fn lock_table_keeps_each_device_state_and_each_lock_once() {
        let subnet = |v: &str| Arc::new(Values::from([("subnet".to_string(), v.to_string())]));
        let mut t = LockTable::default();
        assert_eq!(t.get(0), None, "nothing computed yet");
        let a = subnet("a");
        t.set(3, LockState::Locked(a.clone()), 8);
        t.set(4, LockState::Locked(a), 8);
        t.set(5, LockState::Locked(subnet("b")), 8);
        t.set(6, LockState::Clean, 8);
        t.set(7, LockState::Unreconstructable, 8);
        assert_eq!(t.get(2), None, "a device never set");
        assert!(!t.has(2) && t.has(3) && t.has(6) && !t.has(100));
        assert_eq!(t.get(3), Some(&LockState::Locked(subnet("a"))));
        assert_eq!(t.get(5), Some(&LockState::Locked(subnet("b"))));
        assert_eq!(t.get(6), Some(&LockState::Clean));
        assert_eq!(t.get(7), Some(&LockState::Unreconstructable));
        match (t.get(3), t.get(4)) {
            (Some(LockState::Locked(x)), Some(LockState::Locked(y))) => {
                assert!(Arc::ptr_eq(x, y), "the same lock: one stored copy")
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(t.states.len(), 5, "not computed, clean, unreconstructable, a, b");
        assert_eq!(
            t.get_or_unreconstructable(2),
            &LockState::Unreconstructable,
            "not computed"
        );
        assert_eq!(
            t.get_or_unreconstructable(100),
            &LockState::Unreconstructable,
            "past the end"
        );
        assert_eq!(t.get_or_unreconstructable(6), &LockState::Clean);
        assert_eq!(t.get_or_unreconstructable(5), &LockState::Locked(subnet("b")));
        t.set(3, LockState::Clean, 8);
        assert_eq!(t.get(3), Some(&LockState::Clean), "a device's state is replaced");
        assert_eq!(
            t.get(4),
            Some(&LockState::Locked(subnet("a"))),
            "its neighbour keeps its own"
        );
        t.forget(4);
        assert_eq!(t.get(4), None, "forgotten");
        assert!(!t.has(4));
        assert_eq!(t.get(5), Some(&LockState::Locked(subnet("b"))));
        t.set(20, LockState::Clean, 8);
        assert_eq!(t.get(20), Some(&LockState::Clean), "past the index size given");
        t.clear();
        assert!((0..21).all(|d| t.get(d).is_none()), "cleared");
        t.set(2, LockState::Clean, 8);
        let mut most = 0;
        for i in 0..LockTable::MAX_STATES {
            t.make_room(1);
            t.set(1, LockState::Locked(subnet(&i.to_string())), 8);
            most = most.max(t.states.len());
        }
        assert_eq!(most, LockTable::MAX_STATES, "bounded");
        assert_eq!(t.get(2), None, "the table started again");
        let last = (LockTable::MAX_STATES - 1).to_string();
        assert_eq!(
            t.get(1),
            Some(&LockState::Locked(subnet(&last))),
            "with the newest state"
        );
        // Room made for a node's devices: setting them forgets none of them.
        while t.states.len() < LockTable::MAX_STATES - 3 {
            let n = t.states.len().to_string();
            t.set(0, LockState::Locked(subnet(&n)), 8);
        }
        t.make_room(2);
        assert!(t.has(1), "room for two: nothing forgotten yet");
        t.make_room(8);
        assert!(!t.has(1), "room for eight: the table started again");
        for d in 0..8 {
            t.set(d, LockState::Locked(subnet(&format!("node-{d}"))), 8);
        }
        assert!((0..8).all(|d| t.has(d)), "every device of the node set");
    }
}
