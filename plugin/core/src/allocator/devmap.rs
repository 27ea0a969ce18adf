//! [`DevMap`]: the per-call maps keyed by device. One allocation call touches a handful of
//! devices, so a vector searched linearly beats a hash table (no hashing, no table allocation
//! or rehash on every call).

use crate::index::DevIdx;

/// A small map from device to `V`, in insertion order.
#[derive(Debug)]
pub(super) struct DevMap<V>(Vec<(DevIdx, V)>);

impl<V> Default for DevMap<V> {
    fn default() -> Self {
        DevMap(Vec::new())
    }
}

impl<V> DevMap<V> {
    pub(super) fn get(&self, d: &DevIdx) -> Option<&V> {
        self.0.iter().find(|(k, _)| k == d).map(|(_, v)| v)
    }

    pub(super) fn get_mut(&mut self, d: &DevIdx) -> Option<&mut V> {
        self.0.iter_mut().find(|(k, _)| k == d).map(|(_, v)| v)
    }

    pub(super) fn contains_key(&self, d: &DevIdx) -> bool {
        self.0.iter().any(|(k, _)| k == d)
    }

    /// Removes every entry; the capacity stays for the next call.
    pub(super) fn clear(&mut self) {
        self.0.clear();
    }

    pub(super) fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    pub(super) fn remove(&mut self, d: &DevIdx) {
        if let Some(i) = self.0.iter().position(|(k, _)| k == d) {
            self.0.swap_remove(i);
        }
    }

    /// The value of `d`, inserted with `make` when missing.
    pub(super) fn or_insert_with(&mut self, d: DevIdx, make: impl FnOnce() -> V) -> &mut V {
        let i = match self.0.iter().position(|(k, _)| *k == d) {
            Some(i) => i,
            None => {
                self.0.push((d, make()));
                self.0.len() - 1
            }
        };
        &mut self.0[i].1
    }

    pub(super) fn iter(&self) -> impl Iterator<Item = (&DevIdx, &V)> {
        self.0.iter().map(|(k, v)| (k, v))
    }
}

#[cfg(test)]
mod tests {
    use super::DevMap;

    #[test]
    fn behaves_as_a_map() {
        let mut m: DevMap<u32> = DevMap::default();
        assert!(m.is_empty());
        *m.or_insert_with(3, || 10) += 1;
        *m.or_insert_with(5, || 20) += 1;
        *m.or_insert_with(3, || 99) += 1;
        assert_eq!(m.get(&3), Some(&12), "existing entry kept, not replaced");
        assert_eq!(m.get(&5), Some(&21));
        assert!(m.contains_key(&5) && !m.contains_key(&4));
        m.remove(&3);
        assert_eq!(m.get(&3), None);
        *m.get_mut(&5).unwrap() = 1;
        assert_eq!(m.iter().collect::<Vec<_>>(), vec![(&5, &1)]);
        m.remove(&5);
        assert!(m.is_empty());
        m.or_insert_with(7, || 1);
        m.clear();
        assert!(m.is_empty() && m.get(&7).is_none());
    }
}
