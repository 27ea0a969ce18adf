//! [`Map`]: the API model's small keyed maps (labels, attributes, capacities, quantities), stored
//! as one exactly sized slice sorted by key.
//!
//! A `BTreeMap` allocates a whole B-tree leaf (room for 11 entries) for a map of one to four
//! entries, which is most of what a stored ResourceSlice or ResourceClaim costs; at 40,000
//! devices that is hundreds of MiB of guest memory. These maps are written once, when an object
//! is decoded, and read by key or in key order afterwards: a sorted boxed slice costs the
//! entries and nothing more, and looks up by binary search. (`litemap` keeps a `Vec`, whose
//! growth leaves unused room for up to as many entries again.)
//!
//! Semantics follow `BTreeMap`: iteration in key order, and when decoding or collecting the same
//! key twice, the last value wins (as serde_json's map decoding does).
//!
//! The module also holds the one sort that these maps and the rest of the core use
//! (`stable_order`, `sort_stable_by`, `sort_by_str`, `sort_unique`): a sort is generic code, compiled again for
//! every element type it sorts, and each copy costs the guests 3 to 8 KB.

use std::borrow::Borrow;
use std::cmp::Ordering;
use std::fmt;
use std::marker::PhantomData;

use serde::de::{Deserialize, Deserializer, MapAccess, Visitor};
use serde::ser::{Serialize, SerializeMap, Serializer};

/// A map sorted by key in one exactly sized allocation; see the [module docs](self).
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct Map<K, V>(Box<[(K, V)]>);

/// Iterator over a [`Map`]'s entries in key order.
pub type Iter<'a, K, V> = std::iter::Map<std::slice::Iter<'a, (K, V)>, fn(&'a (K, V)) -> (&'a K, &'a V)>;

impl<K, V> Map<K, V> {
    /// An empty map (no allocation).
    pub fn new() -> Self {
        Map(Box::new([]))
    }

    /// Number of entries.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// Whether the map has no entry.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Entries in key order.
    pub fn iter(&self) -> Iter<'_, K, V> {
        self.0.iter().map(|(k, v)| (k, v))
    }

    /// Keys in order.
    pub fn keys(&self) -> impl DoubleEndedIterator<Item = &K> + ExactSizeIterator {
        self.0.iter().map(|(k, _)| k)
    }

    /// Values in key order.
    pub fn values(&self) -> impl DoubleEndedIterator<Item = &V> + ExactSizeIterator {
        self.0.iter().map(|(_, v)| v)
    }

    /// Values in key order, mutable.
    pub fn values_mut(&mut self) -> impl DoubleEndedIterator<Item = &mut V> + ExactSizeIterator {
        self.0.iter_mut().map(|(_, v)| v)
    }
}

impl<K: Ord, V> Map<K, V> {
    fn position<Q>(&self, key: &Q) -> Result<usize, usize>
    where
        K: Borrow<Q>,
        Q: Ord + ?Sized,
    {
        self.0.binary_search_by(|(k, _)| k.borrow().cmp(key))
    }

    /// The value for `key`.
    pub fn get<Q>(&self, key: &Q) -> Option<&V>
    where
        K: Borrow<Q>,
        Q: Ord + ?Sized,
    {
        self.position(key).ok().map(|i| &self.0[i].1)
    }

    /// The value for `key`, mutable.
    pub fn get_mut<Q>(&mut self, key: &Q) -> Option<&mut V>
    where
        K: Borrow<Q>,
        Q: Ord + ?Sized,
    {
        self.position(key).ok().map(|i| &mut self.0[i].1)
    }

    /// The value for `key`, inserted with `make` when missing (see [`Map::insert`] for the cost).
    pub fn get_or_insert_with(&mut self, key: K, make: impl FnOnce() -> V) -> &mut V {
        let i = match self.position(&key) {
            Ok(i) => i,
            Err(i) => {
                self.insert_at(i, key, make());
                i
            }
        };
        &mut self.0[i].1
    }

    /// Whether `key` has a value.
    pub fn contains_key<Q>(&self, key: &Q) -> bool
    where
        K: Borrow<Q>,
        Q: Ord + ?Sized,
    {
        self.position(key).is_ok()
    }

    /// Sets `key` to `value`, returning the value it replaces. Reallocates the entries when the
    /// key is new: for building maps in tests and generators, not for hot paths.
    pub fn insert(&mut self, key: K, value: V) -> Option<V> {
        match self.position(&key) {
            Ok(i) => Some(std::mem::replace(&mut self.0[i].1, value)),
            Err(i) => {
                self.insert_at(i, key, value);
                None
            }
        }
    }

    /// Inserts a new entry at position `i` (where the key sorts), reallocating the entries.
    fn insert_at(&mut self, i: usize, key: K, value: V) {
        let mut entries = std::mem::take(&mut self.0).into_vec();
        entries.insert(i, (key, value));
        self.0 = entries.into_boxed_slice();
    }

    /// Removes `key`, returning its value.
    pub fn remove<Q>(&mut self, key: &Q) -> Option<V>
    where
        K: Borrow<Q>,
        Q: Ord + ?Sized,
    {
        let i = self.position(key).ok()?;
        let mut entries = std::mem::take(&mut self.0).into_vec();
        let (_, v) = entries.remove(i);
        self.0 = entries.into_boxed_slice();
        Some(v)
    }

    /// Replaces keys with equal ones that `share` gives (such as a copy shared with other maps);
    /// a key `share` gives that is not equal is ignored, so the order stays as it was.
    pub fn share_keys(&mut self, mut share: impl FnMut(&K) -> Option<K>) {
        for (k, _) in self.0.iter_mut() {
            if let Some(shared) = share(k)
                && shared == *k
            {
                *k = shared;
            }
        }
    }

    /// Keeps the entries for which `keep` is true.
    pub fn retain(&mut self, mut keep: impl FnMut(&K, &mut V) -> bool) {
        // A boxed slice converts to a `Vec` and back without copying when nothing is removed.
        let mut entries = std::mem::take(&mut self.0).into_vec();
        entries.retain_mut(|(k, v)| keep(k, v));
        self.0 = entries.into_boxed_slice();
    }

    /// Sorts entries by key, the last of equal keys winning, into an exactly sized map.
    fn from_vec(mut entries: Vec<(K, V)>) -> Self {
        if !entries.is_sorted_by(|a, b| a.0 < b.0) {
            // Stable: equal keys keep their order, and `dedup_by` keeps the last one's value.
            sort_stable_by(&mut entries, |a, b| a.0.cmp(&b.0));
            entries.dedup_by(|later, kept| {
                let same = later.0 == kept.0;
                if same {
                    std::mem::swap(later, kept);
                }
                same
            });
        }
        Map(entries.into_boxed_slice())
    }
}

/// The stable sorting permutation of `n` items that `cmp` compares by position: item `order[i]`
/// goes to position `i`. Not generic, so that one sort serves every entry type: a stable sort
/// instantiated for each map's entry type costs 3 to 8 KB of guest code each.
fn stable_order(n: usize, cmp: &dyn Fn(usize, usize) -> Ordering) -> Vec<usize> {
    let mut order: Vec<usize> = (0..n).collect();
    order.sort_by(|&i, &j| cmp(i, j));
    order
}

/// Puts `items` in the order of `order` ([`stable_order`]: item `order[i]` to position `i`), in
/// place, one cycle of the permutation at a time.
fn permute<T>(items: &mut [T], mut order: Vec<usize>) {
    const DONE: usize = usize::MAX;
    for start in 0..items.len().min(order.len()) {
        let mut at = start;
        while order[at] != DONE {
            let from = order[at];
            order[at] = DONE;
            if from == start {
                break;
            }
            items.swap(at, from);
            at = from;
        }
    }
}

/// Sorts `items` stably by `cmp`, with the one shared sort ([`stable_order`]); sorted input is
/// only checked.
pub(crate) fn sort_stable_by<T>(items: &mut [T], cmp: impl Fn(&T, &T) -> Ordering) {
    if items.is_sorted_by(|a, b| cmp(a, b) != Ordering::Greater) {
        return;
    }
    let order = stable_order(items.len(), &|i, j| cmp(&items[i], &items[j]));
    permute(items, order);
}

/// Sorts `items` stably by the text `key` gives ([`sort_stable_by`]).
pub(crate) fn sort_by_str<T>(items: &mut [T], key: impl Fn(&T) -> &str) {
    sort_stable_by(items, |a, b| key(a).cmp(key(b)));
}

/// Sorts `items` and drops repeats: the elements of a `BTreeSet<&str>` in its order, without a
/// B-tree and its sort instantiated for one more element type.
pub(crate) fn sort_unique(items: &mut Vec<&str>) {
    sort_by_str(items, |s| s);
    items.dedup();
}

impl<K, V> Default for Map<K, V> {
    fn default() -> Self {
        Map::new()
    }
}

impl<K: Ord + Borrow<Q>, Q: Ord + ?Sized, V> std::ops::Index<&Q> for Map<K, V> {
    type Output = V;
    /// The value for `key`; panics when there is none, as `BTreeMap` does.
    fn index(&self, key: &Q) -> &V {
        self.get(key).expect("no entry found for key")
    }
}

impl<K: fmt::Debug, V: fmt::Debug> fmt::Debug for Map<K, V> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_map().entries(self.iter()).finish()
    }
}

impl<K: Ord, V> FromIterator<(K, V)> for Map<K, V> {
    fn from_iter<I: IntoIterator<Item = (K, V)>>(iter: I) -> Self {
        Map::from_vec(iter.into_iter().collect())
    }
}

impl<K: Ord, V, const N: usize> From<[(K, V); N]> for Map<K, V> {
    fn from(entries: [(K, V); N]) -> Self {
        Map::from_vec(Vec::from(entries))
    }
}

impl<K, V> IntoIterator for Map<K, V> {
    type Item = (K, V);
    type IntoIter = std::vec::IntoIter<(K, V)>;
    fn into_iter(self) -> Self::IntoIter {
        self.0.into_vec().into_iter()
    }
}

impl<'a, K, V> IntoIterator for &'a Map<K, V> {
    type Item = (&'a K, &'a V);
    type IntoIter = Iter<'a, K, V>;
    fn into_iter(self) -> Self::IntoIter {
        self.iter()
    }
}

impl<K: Serialize, V: Serialize> Serialize for Map<K, V> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(Some(self.len()))?;
        for (k, v) in self.iter() {
            map.serialize_entry(k, v)?;
        }
        map.end()
    }
}

impl<'de, K: Deserialize<'de> + Ord, V: Deserialize<'de>> Deserialize<'de> for Map<K, V> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct MapVisitor<K, V>(PhantomData<(K, V)>);
        impl<'de, K: Deserialize<'de> + Ord, V: Deserialize<'de>> Visitor<'de> for MapVisitor<K, V> {
            type Value = Map<K, V>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a map")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut access: A) -> Result<Self::Value, A::Error> {
                let mut entries = Vec::with_capacity(access.size_hint().unwrap_or(0).min(64));
                while let Some(entry) = access.next_entry()? {
                    entries.push(entry);
                }
                Ok(Map::from_vec(entries))
            }
        }
        deserializer.deserialize_map(MapVisitor(PhantomData))
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::Map;

    /// A shared key replaces an equal one; one that is not equal is ignored (the order holds).
    #[test]
    fn share_keys_replaces_only_equal_keys() {
        let shared: Arc<str> = Arc::from("b");
        let mut map: Map<Arc<str>, i32> = [(Arc::from("a"), 1), (Arc::from("b"), 2)].into_iter().collect();
        map.share_keys(|k| {
            Some(if &**k == "b" {
                Arc::clone(&shared)
            } else {
                Arc::from("z")
            })
        });
        let keys: Vec<&Arc<str>> = map.keys().collect();
        assert!(Arc::ptr_eq(keys[1], &shared), "equal key shared");
        assert_eq!(&**keys[0], "a", "unequal replacement ignored");
        assert_eq!(map.get("a"), Some(&1));
        assert_eq!(map.get("b"), Some(&2));
    }

    #[test]
    fn decodes_sorted_with_the_last_duplicate_winning_like_btreemap() {
        let text = r#"{"b": 1, "a": 2, "c": 3, "a": 4}"#;
        let map: Map<String, i32> = serde_json::from_str(text).unwrap();
        let tree: std::collections::BTreeMap<String, i32> = serde_json::from_str(text).unwrap();
        assert_eq!(map.iter().collect::<Vec<_>>(), tree.iter().collect::<Vec<_>>());
        assert_eq!(map.get("a"), Some(&4));
        assert_eq!(map.get("z"), None);
        assert_eq!(serde_json::to_string(&map).unwrap(), r#"{"a":4,"b":1,"c":3}"#);
        // Exactly sized: no room beyond the entries.
        assert_eq!(map.0.len(), 3);
    }

    /// The permutation puts every item where the stable sort would, for all orders of up to six
    /// items with repeated keys (the position breaks ties, as in a stable sort).
    #[test]
    fn permute_sorts_as_the_stable_sort_does() {
        fn orders(n: usize, prefix: &mut Vec<u8>, out: &mut Vec<Vec<u8>>) {
            if prefix.len() == n {
                out.push(prefix.clone());
                return;
            }
            for key in 0..3 {
                prefix.push(key);
                orders(n, prefix, out);
                prefix.pop();
            }
        }
        for n in 0..=6 {
            let mut all = Vec::new();
            orders(n, &mut Vec::new(), &mut all);
            for keys in all {
                let items: Vec<(u8, usize)> = keys.iter().copied().zip(0..).collect();
                let mut want = items.clone();
                want.sort_by_key(|&(k, _)| k);
                let mut got = items.clone();
                let order = super::stable_order(got.len(), &|i, j| items[i].0.cmp(&items[j].0));
                super::permute(&mut got, order);
                assert_eq!(got, want, "{keys:?}");
            }
        }
    }

    /// `sort_by_str` keeps equal keys in their order; `sort_unique` gives a `BTreeSet`'s order.
    #[test]
    fn sorts_by_text_stably_and_as_a_set() {
        let mut items = vec![("b", 1), ("a", 2), ("b", 3), ("", 4), ("a", 5)];
        super::sort_by_str(&mut items, |i| i.0);
        assert_eq!(items, [("", 4), ("a", 2), ("a", 5), ("b", 1), ("b", 3)]);
        let words = ["pear", "apple", "pear", "fig", "apple", "Fig"];
        let mut unique = words.to_vec();
        super::sort_unique(&mut unique);
        let set: std::collections::BTreeSet<&str> = words.into_iter().collect();
        assert_eq!(unique, set.into_iter().collect::<Vec<_>>());
    }

    #[test]
    fn insert_and_remove_keep_the_order() {
        let mut map = Map::from([("b", 1), ("a", 2)]);
        assert_eq!(map.insert("c", 3), None);
        assert_eq!(map.insert("a", 5), Some(2));
        assert_eq!(map.keys().copied().collect::<Vec<_>>(), ["a", "b", "c"]);
        assert_eq!(map.remove("b"), Some(1));
        assert_eq!(map.remove("b"), None);
        assert!(map.contains_key("c") && !map.contains_key("b"));
        assert_eq!(*map.get_or_insert_with("a", || 9), 5);
        *map.get_or_insert_with("d", || 9) -= 9;
        assert_eq!(map.get("d"), Some(&0));
        map.retain(|_, v| *v != 0);
        assert_eq!(map.into_iter().collect::<Vec<_>>(), [("a", 5), ("c", 3)]);
        let collected: Map<_, _> = [(2, "x"), (1, "y"), (2, "z")].into_iter().collect();
        assert_eq!(format!("{collected:?}"), r#"{1: "y", 2: "z"}"#);
    }
}
