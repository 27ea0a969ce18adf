//! [`DevMap`]: the per-call maps keyed by device. One allocation call touches a handful of
//! devices, so a vector searched linearly beats a hash table (no hashing, no table allocation
//! or rehash on every call).

use crate::index::DevIdx;

/// A small map from device to `V`, in insertion order.
///
/// Values taken out by [`DevMap::recycle`] and [`DevMap::clear_recycling`] are kept as spares
/// that [`DevMap::or_insert_reused`] resets and reuses: a map of vectors then allocates only
/// until its spares cover the call's largest need, and not again in later calls.
#[derive(Debug)]
pub(super) struct DevMap<V> {
    entries: Vec<(DevIdx, V)>,
    spare: Vec<V>,
}

impl<V> Default for DevMap<V> {
    fn default() -> Self {
        DevMap {
            entries: Vec::new(),
            spare: Vec::new(),
        }
    }
}

impl<V> DevMap<V> {
    fn position(&self, d: &DevIdx) -> Option<usize> {
        self.entries.iter().position(|(k, _)| k == d)
    }

    pub(super) fn get(&self, d: &DevIdx) -> Option<&V> {
        self.position(d).map(|i| &self.entries[i].1)
    }

    pub(super) fn get_mut(&mut self, d: &DevIdx) -> Option<&mut V> {
        self.position(d).map(|i| &mut self.entries[i].1)
    }

    pub(super) fn contains_key(&self, d: &DevIdx) -> bool {
        self.position(d).is_some()
    }

    /// Removes the entry of `d`, keeping its value as a spare for [`DevMap::or_insert_reused`].
    pub(super) fn recycle(&mut self, d: &DevIdx) {
        if let Some(i) = self.position(d) {
            let (_, v) = self.entries.swap_remove(i);
            self.spare.push(v);
        }
    }

    /// Removes every entry, keeping the values as spares.
    pub(super) fn clear_recycling(&mut self) {
        if self.entries.is_empty() {
            return;
        }
        self.spare.extend(self.entries.drain(..).map(|(_, v)| v));
    }

    /// The value of `d`; when missing, a spare passed through `reset` (or `make`'s value when
    /// there is no spare) is inserted.
    pub(super) fn or_insert_reused(
        &mut self,
        d: DevIdx,
        reset: impl FnOnce(&mut V),
        make: impl FnOnce() -> V,
    ) -> &mut V {
        let i = match self.position(&d) {
            Some(i) => i,
            None => {
                let v = match self.spare.pop() {
                    Some(mut v) => {
                        reset(&mut v);
                        v
                    }
                    None => make(),
                };
                self.entries.push((d, v));
                self.entries.len() - 1
            }
        };
        &mut self.entries[i].1
    }
}

#[cfg(test)]
mod tests {
    use super::DevMap;

    #[test]
    fn behaves_as_a_map() {
        let mut m: DevMap<u32> = DevMap::default();
        *m.or_insert_reused(3, |_| {}, || 10) += 1;
        *m.or_insert_reused(5, |_| {}, || 20) += 1;
        *m.or_insert_reused(3, |_| {}, || 99) += 1;
        assert_eq!(m.get(&3), Some(&12), "existing entry kept, not replaced");
        assert_eq!(m.get(&5), Some(&21));
        assert!(m.contains_key(&5) && !m.contains_key(&4));
        m.recycle(&3);
        assert_eq!(m.get(&3), None);
        *m.get_mut(&5).unwrap() = 1;
        assert_eq!(m.get(&5), Some(&1));
        m.recycle(&5);
        assert!(!m.contains_key(&5));
        m.or_insert_reused(7, |_| {}, || 1);
        m.clear_recycling();
        assert!(m.get(&7).is_none());
    }

    /// Recycled values come back reset, are reused before anything new is made, and a map
    /// with spares still behaves as a map.
    #[test]
    fn recycled_values_are_reset_and_reused() {
        let mut m: DevMap<Vec<u32>> = DevMap::default();
        let make = || vec![0; 2];
        let reset = |v: &mut Vec<u32>| {
            v.clear();
            v.resize(2, 0);
        };
        m.or_insert_reused(1, reset, make)[0] = 5;
        m.or_insert_reused(2, reset, make)[1] = 6;
        assert_eq!(m.or_insert_reused(1, reset, || unreachable!("present"))[0], 5);
        let ptr = m.get(&1).unwrap().as_ptr();
        m.recycle(&1);
        assert!(m.get(&1).is_none() && m.contains_key(&2));
        let v = m.or_insert_reused(3, reset, || unreachable!("a spare exists"));
        assert_eq!((v.as_slice(), v.as_ptr()), (&[0, 0][..], ptr), "the spare, reset");
        m.clear_recycling();
        assert!(!m.contains_key(&2) && !m.contains_key(&3));
        for d in [4, 5] {
            m.or_insert_reused(d, reset, || unreachable!("two spares"));
        }
        assert_eq!(m.get(&4), Some(&vec![0, 0]));
        assert_eq!(m.get(&5), Some(&vec![0, 0]));
    }
}
