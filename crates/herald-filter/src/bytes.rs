//! Equality and prefix tests on the short byte strings filters compare
//! (header names and values, keys, prefixes), done in registers: a slice
//! comparison calls the C library's `memcmp`, whose call costs more than
//! comparing a dozen bytes, and a filter makes several per record.

/// Whether `a` and `b` hold the same bytes.
#[inline]
pub(crate) fn same(a: &[u8], b: &[u8]) -> bool {
    let n = a.len();
    if n != b.len() {
        return false;
    }
    match n {
        0 => true,
        1..=3 => a.iter().zip(b).all(|(x, y)| x == y),
        // Two loads that overlap cover every byte of the middle lengths.
        4..=7 => word4(a, 0) == word4(b, 0) && word4(a, n - 4) == word4(b, n - 4),
        8..=16 => word8(a, 0) == word8(b, 0) && word8(a, n - 8) == word8(b, n - 8),
        _ => a == b,
    }
}

/// Whether `bytes` begins with `prefix`.
#[inline]
pub(crate) fn starts_with(bytes: &[u8], prefix: &[u8]) -> bool {
    bytes
        .get(..prefix.len())
        .is_some_and(|head| same(head, prefix))
}

/// The four bytes of `bytes` at `at`, little-endian (what a comparison
/// reads, and `bytes_column`'s heads are made of).
#[inline]
pub(crate) fn word4(bytes: &[u8], at: usize) -> u32 {
    let mut word = [0u8; 4];
    word.copy_from_slice(&bytes[at..at + 4]);
    u32::from_le_bytes(word)
}

/// The eight bytes of `bytes` at `at`, little-endian.
#[inline]
pub(crate) fn word8(bytes: &[u8], at: usize) -> u64 {
    let mut word = [0u8; 8];
    word.copy_from_slice(&bytes[at..at + 8]);
    u64::from_le_bytes(word)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        /// Every length and every position of a difference answers what a
        /// slice comparison answers.
        #[test]
        fn answers_what_slices_answer(
            a in prop::collection::vec(0u8..4, 0..40),
            flip in any::<prop::sample::Index>(),
            cut in any::<prop::sample::Index>(),
        ) {
            let mut b = a.clone();
            prop_assert!(same(&a, &b));
            if !b.is_empty() {
                let at = flip.index(b.len());
                b[at] ^= 1;
                prop_assert_eq!(same(&a, &b), a == b);
                prop_assert_eq!(same(&b, &a), a == b);
            }
            let prefix = &a[..cut.index(a.len() + 1)];
            prop_assert!(starts_with(&a, prefix));
            prop_assert_eq!(starts_with(&b, prefix), b.starts_with(prefix));
            prop_assert_eq!(starts_with(prefix, &a), prefix.starts_with(&a));
        }
    }
}
