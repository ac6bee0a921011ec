//! A filter in front of the literal subjects: "certainly not subscribed"
//! for most keys that no one listens to, from one cache line.
//!
//! Why: with a million subjects and a tenth of them subscribed, nine
//! records in ten carry a key that is not in the routing table, and asking
//! the hash map costs a probe into a table far larger than the cache (and,
//! for the keys that are there, a pointer chase to compare the key). This
//! filter holds 16 bits per subscribed subject, so a table of 100,000
//! subjects filters from 256 KiB, and answers a miss from one word.
//!
//! It is a blocked Bloom filter: a key's hash picks one 64-bit word and
//! two bits in it. Bits are only ever set while the filter is in use, so a
//! reader can never be told "no" for a subject inserted before its read;
//! removing a subject leaves its bits, and the table rebuilds the filter
//! from its current subjects (swapping it in whole) when it has grown past
//! its sizing or when removed subjects would make it mostly stale.

use std::sync::atomic::{AtomicU64, Ordering};

/// Bits per subject the filter is sized for: about 1.5% false positives
/// with two bits per key in one word.
const BITS_PER_SUBJECT: usize = 16;
/// The smallest filter, 512 bytes for 256 subjects: every topic with a
/// subscriber has one.
const MIN_WORDS: usize = 64;

/// The filter itself, sized once; the table swaps in a new one to resize.
pub(crate) struct SubjectFilter {
    words: Box<[AtomicU64]>,
    /// `64 - log2(words.len())`: the hash's top bits pick the word.
    shift: u32,
    /// Subjects it was sized for: past this, false positives rise.
    capacity: usize,
}

impl SubjectFilter {
    /// An empty filter sized for `subjects` subjects (at least the
    /// minimum).
    pub(crate) fn with_capacity(subjects: usize) -> Self {
        let words = (subjects.saturating_mul(BITS_PER_SUBJECT) / 64)
            .max(MIN_WORDS)
            .next_power_of_two();
        Self {
            words: (0..words).map(|_| AtomicU64::new(0)).collect(),
            shift: 64 - words.trailing_zeros(),
            capacity: words * 64 / BITS_PER_SUBJECT,
        }
    }

    /// The subjects it holds before false positives rise past its sizing.
    pub(crate) fn capacity(&self) -> usize {
        self.capacity
    }

    /// Bytes of its words.
    pub(crate) fn bytes(&self) -> usize {
        self.words.len() * std::mem::size_of::<AtomicU64>()
    }

    /// Records the subject with hash `hash`. Sequentially consistent, as is
    /// [`Self::may_contain`]: a subscription's position is read after its
    /// route is inserted, and a tailer looks records up after it has
    /// published how far it read, so one of the two sees the other.
    pub(crate) fn insert(&self, hash: u64) {
        let (word, mask) = self.locate(hash);
        self.words[word].fetch_or(mask, Ordering::SeqCst);
    }

    /// False only if no subject with hash `hash` was inserted.
    #[inline]
    pub(crate) fn may_contain(&self, hash: u64) -> bool {
        let (word, mask) = self.locate(hash);
        self.words[word].load(Ordering::SeqCst) & mask == mask
    }

    /// Asks for the word [`Self::may_contain`] will read for `hash`.
    #[inline]
    pub(crate) fn prefetch(&self, hash: u64) {
        let (word, _) = self.locate(hash);
        crate::prefetch(&self.words[word]);
    }

    #[inline]
    fn locate(&self, hash: u64) -> (usize, u64) {
        // The top bits pick the word (the shift is below 64: the filter has
        // at least MIN_WORDS words); two 6-bit fields from the bottom pick
        // the bits, independent of the top ones.
        let word = (hash >> self.shift) as usize;
        let mask = (1u64 << (hash & 63)) | (1u64 << ((hash >> 6) & 63));
        (word, mask)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hash(i: u64) -> u64 {
        // A fixed mixing function keeps the test's false-positive count
        // reproducible.
        let mut x = i.wrapping_add(0x9e37_79b9_7f4a_7c15);
        x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        x ^ (x >> 31)
    }

    #[test]
    fn every_inserted_subject_may_be_contained() {
        let filter = SubjectFilter::with_capacity(10_000);
        for i in 0..10_000 {
            filter.insert(hash(i));
        }
        assert!((0..10_000).all(|i| filter.may_contain(hash(i))));
    }

    #[test]
    fn most_absent_subjects_are_rejected_at_capacity() {
        let filter = SubjectFilter::with_capacity(100_000);
        for i in 0..filter.capacity() as u64 {
            filter.insert(hash(i));
        }
        let probes = 100_000u64;
        let false_positives = (0..probes)
            .filter(|i| filter.may_contain(hash(1 << 40 | i)))
            .count();
        // Two bits of a word at 16 bits per subject: about 1.5%; 3% would
        // mean the bits are not independent.
        assert!(
            false_positives < 3_000,
            "{false_positives} of {probes} absent subjects passed"
        );
    }

    #[test]
    fn sizing_rounds_up_to_a_power_of_two_words() {
        let small = SubjectFilter::with_capacity(0);
        assert_eq!(small.bytes(), MIN_WORDS * 8);
        assert_eq!(small.capacity(), MIN_WORDS * 64 / BITS_PER_SUBJECT);
        let large = SubjectFilter::with_capacity(1_000_000);
        assert_eq!(large.bytes(), (1 << 18) * 8);
        assert!(large.capacity() >= 1_000_000);
    }
}
