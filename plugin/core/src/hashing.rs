//! The core's hash maps and sets (Fx-hashed: the keys are small integers and short names), and
//! the byte comparison that hashed name lookups use.

/// A `HashMap` with the Fx hasher: the allocator's maps are keyed by small integers, which
/// SipHash would dominate (`rustc-hash` without its `std` feature, as cranelift uses it).
pub type FxHashMap<K, V> = std::collections::HashMap<K, V, rustc_hash::FxBuildHasher>;

/// A `HashSet` with the Fx hasher ([`FxHashMap`]).
pub type FxHashSet<T> = std::collections::HashSet<T, rustc_hash::FxBuildHasher>;

/// Byte-slice equality, eight bytes at a time. On `wasm32`, `==` on slices calls the
/// compiler's `memcmp`, which compares one byte per iteration (about eight instructions per
/// byte): the KSWE guest compared a pod's protobuf bytes in every hook that way (5,100
/// instructions of a 19,400-instruction Filter call), and every node-name lookup paid it too.
/// Natively this is as fast as `==`.
pub fn bytes_eq(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    let (words_a, rest_a) = a.as_chunks::<8>();
    let (words_b, rest_b) = b.as_chunks::<8>();
    words_a
        .iter()
        .zip(words_b)
        .all(|(x, y)| u64::from_ne_bytes(*x) == u64::from_ne_bytes(*y))
        && rest_a.iter().zip(rest_b).all(|(x, y)| x == y)
}

#[cfg(test)]
mod tests {
    use super::bytes_eq;

    /// Equal to `==` for every length around the word size, with a difference at every
    /// position (in the words and in the rest).
    #[test]
    fn bytes_eq_is_slice_equality() {
        for len in 0..40usize {
            let a: Vec<u8> = (0..len).map(|i| (i * 7 + 1) as u8).collect();
            assert!(bytes_eq(&a, &a.clone()), "len {len}");
            for pos in 0..len {
                let mut b = a.clone();
                b[pos] ^= 0x80;
                assert!(!bytes_eq(&a, &b), "len {len}, difference at {pos}");
            }
            assert!(!bytes_eq(&a, &a[..len.saturating_sub(1)]) || len == 0);
            let mut longer = a.clone();
            longer.push(0);
            assert!(!bytes_eq(&a, &longer), "len {len}, one byte more");
        }
    }
}
