//! Partitionable-device counters: devices consume counters from their pool's shared counter sets.
//!
//! Available counters of a pool are its counter sets minus what allocated devices consume
//! (computed once per allocation call). Devices tentatively allocated in the call add to a
//! per-call tally, undone on backtracking. A multi-allocatable device consumes its counters once,
//! on its first allocation.

use crate::hashing::FxHashMap as HashMap;
use std::collections::BTreeMap;

use crate::model::DeviceCounterConsumption;
use crate::quantity::Quantity;

/// Counter set → counter → amount.
pub type CounterSets = BTreeMap<String, BTreeMap<String, Quantity>>;

/// Per-call counter accounting for all pools.
#[derive(Default)]
pub struct CounterState {
    available: HashMap<usize, CounterSets>,
    consumed: HashMap<usize, CounterSets>,
}

impl CounterState {
    /// Whether the pool's available counters are known.
    pub fn has_pool(&self, pool: usize) -> bool {
        self.available.contains_key(&pool)
    }

    /// Sets the pool's available counters: `sets` minus the consumption of allocated devices.
    pub fn init_pool<'a>(
        &mut self,
        pool: usize,
        sets: &CounterSets,
        allocated: impl IntoIterator<Item = &'a [DeviceCounterConsumption]>,
    ) {
        let mut avail = sets.clone();
        for consumption in allocated {
            for c in consumption {
                if let Some(set) = avail.get_mut(&c.counter_set) {
                    for (name, amount) in &c.counters {
                        if let Some(v) = set.get_mut(name) {
                            // May go negative: then nothing is available.
                            *v = v.checked_sub(&amount.value).unwrap_or_else(|| v.clone());
                        }
                    }
                }
            }
        }
        self.available.insert(pool, avail);
    }

    /// Adds the device's consumption to the call's tally if it fits; returns false (and records
    /// nothing) when some counter would be exceeded. The pool must have been initialised.
    pub fn try_consume(&mut self, pool: usize, consumption: &[DeviceCounterConsumption]) -> bool {
        self.add(pool, consumption, true);
        let avail = &self.available[&pool];
        let consumed = &self.consumed[&pool];
        let exceeded = consumed.iter().any(|(set, counters)| {
            counters.iter().any(|(name, used)| {
                let limit = avail.get(set).and_then(|s| s.get(name));
                limit.is_none_or(|l| used > l)
            })
        });
        if exceeded {
            self.add(pool, consumption, false);
            return false;
        }
        true
    }

    /// Undoes one successful [`CounterState::try_consume`].
    pub fn release(&mut self, pool: usize, consumption: &[DeviceCounterConsumption]) {
        self.add(pool, consumption, false);
    }

    fn add(&mut self, pool: usize, consumption: &[DeviceCounterConsumption], plus: bool) {
        let tally = self.consumed.entry(pool).or_default();
        for c in consumption {
            let set = tally.entry(c.counter_set.clone()).or_default();
            for (name, amount) in &c.counters {
                let v = set.entry(name.clone()).or_insert_with(|| Quantity::from_i64(0));
                let next = if plus {
                    v.checked_add(&amount.value)
                } else {
                    v.checked_sub(&amount.value)
                };
                if let Some(n) = next {
                    *v = n;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::Counter;

    fn q(s: &str) -> Quantity {
        s.parse().unwrap()
    }

    fn consume(set: &str, name: &str, v: &str) -> Vec<DeviceCounterConsumption> {
        vec![DeviceCounterConsumption {
            counter_set: set.into(),
            counters: [(name.to_string(), Counter { value: q(v) })].into(),
            compatibility_groups: Vec::new(),
        }]
    }

    fn sets() -> CounterSets {
        [("cs".to_string(), [("mem".to_string(), q("8Gi"))].into())].into()
    }

    #[test]
    fn consumption_is_bounded_and_rolls_back() {
        let mut s = CounterState::default();
        s.init_pool(0, &sets(), std::iter::empty());
        let d4 = consume("cs", "mem", "4Gi");
        let d6 = consume("cs", "mem", "6Gi");
        assert!(s.try_consume(0, &d4));
        assert!(!s.try_consume(0, &d6), "4Gi + 6Gi > 8Gi");
        assert!(
            s.try_consume(0, &d4),
            "4Gi + 4Gi fits; the failed try left no trace"
        );
        s.release(0, &d4);
        s.release(0, &d4);
        assert!(s.try_consume(0, &d6));
    }

    #[test]
    fn allocated_devices_reduce_availability() {
        let mut s = CounterState::default();
        let used = consume("cs", "mem", "6Gi");
        s.init_pool(0, &sets(), [used.as_slice()]);
        assert!(!s.try_consume(0, &consume("cs", "mem", "4Gi")), "only 2Gi left");
        assert!(s.try_consume(0, &consume("cs", "mem", "2Gi")));
    }
}
