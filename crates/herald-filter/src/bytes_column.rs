//! One byte-string field (a key, a header) of a chunk of records, laid
//! out for tests over all of them: beside each record's bytes, their
//! first sixteen zero-padded into two numbers and their length, so an
//! equality, a prefix or an `in` against a short string (the strings
//! filters name mostly are) compares three numbers per record in a loop
//! without branches, instead of calling a byte comparison per record.

use std::cell::OnceCell;

use crate::bytes::{word4, word8};
use crate::parser::{Predicate, Value};

/// Most records a column holds.
const RECORDS: usize = crate::columns::COLUMN_RECORDS;

/// `lens` of a record without the field.
const ABSENT: u32 = u32::MAX;
/// `lens` of a record whose field is null.
const NULL: u32 = u32::MAX - 1;
/// Bytes a head holds.
const HEAD_BYTES: usize = 16;

/// Fewest records a column makes heads for: a shorter chunk (a batch of
/// a few records) is tested record by record.
const HEADS_FROM: usize = 8;

/// What each record of a chunk holds in one field.
pub(crate) struct BytesColumn<'c> {
    /// Shaped as [`crate::Fields::header`] answers; at most [`RECORDS`].
    found: Vec<Option<Option<&'c [u8]>>>,
    /// The heads and lengths of `found`, made by the first test that
    /// reads them (a field only tested against long strings or numbers,
    /// or not at all, costs none).
    heads: OnceCell<Box<Heads>>,
}

/// The records' heads and lengths, for all [`RECORDS`] places (those past
/// the records held are absent): a test runs a loop of a fixed count,
/// which the compiler unrolls.
struct Heads {
    /// The first [`HEAD_BYTES`] bytes, zero-padded, little-endian: the
    /// first eight and the next eight.
    low: [u64; RECORDS],
    high: [u64; RECORDS],
    /// The length ([`ABSENT`], [`NULL`]; lengths past them are capped
    /// below them, which no short string equals).
    lens: [u32; RECORDS],
}

impl<'c> BytesColumn<'c> {
    /// A column holding nothing yet.
    pub(crate) fn new() -> Self {
        Self {
            found: Vec::new(),
            heads: OnceCell::new(),
        }
    }

    /// Forgets the records held.
    pub(crate) fn clear(&mut self) {
        self.found.clear();
        self.heads.take();
    }

    /// Keeps what the next record holds (past [`RECORDS`], nothing).
    #[inline]
    pub(crate) fn push(&mut self, found: Option<Option<&'c [u8]>>) {
        if self.found.len() < RECORDS {
            self.found.push(found);
        }
    }

    fn heads(&self) -> &Heads {
        self.heads.get_or_init(|| {
            let mut made = Box::new(Heads {
                low: [0; RECORDS],
                high: [0; RECORDS],
                lens: [ABSENT; RECORDS],
            });
            for (at, found) in self.found.iter().enumerate() {
                let (head, len) = match found {
                    None => (0, ABSENT),
                    Some(None) => (0, NULL),
                    Some(Some(bytes)) => (head(bytes), bytes.len().min(NULL as usize - 1) as u32),
                };
                made.low[at] = head as u64;
                made.high[at] = (head >> 64) as u64;
                made.lens[at] = len;
            }
            made
        })
    }

    /// The records of `candidates` whose field passes `predicate`.
    pub(crate) fn select(&self, predicate: &Predicate, candidates: u64) -> u64 {
        if self.found.len() >= HEADS_FROM {
            if let Some(passed) = self.by_heads(predicate) {
                return passed & candidates;
            }
        }
        // Record by record, and only the candidates: a number parsed or a
        // long string compared costs more than skipping a record.
        predicate.select(&self.found, candidates, |found| *found)
    }

    /// The places whose field passes `predicate`, through the heads;
    /// `None` for a test they cannot answer (a number, a string longer
    /// than a head).
    fn by_heads(&self, predicate: &Predicate) -> Option<u64> {
        let short = |bytes: &[u8]| bytes.len() <= HEAD_BYTES;
        let passed = match predicate {
            Predicate::Exists => self.heads().each(|_, _, len| len != ABSENT),
            Predicate::Eq(Value::Bytes(expected)) if short(expected) => {
                self.heads().equal(expected)
            }
            Predicate::Ne(Value::Bytes(expected)) if short(expected) => {
                !self.heads().equal(expected)
            }
            Predicate::StartsWith(prefix) if short(prefix) => {
                let (want, at_least) = (head(prefix), prefix.len() as u32);
                let mask = match prefix.len() {
                    HEAD_BYTES => u128::MAX,
                    n => (1u128 << (8 * n)) - 1,
                };
                let (want_low, want_high) = (want as u64, (want >> 64) as u64);
                let (mask_low, mask_high) = (mask as u64, (mask >> 64) as u64);
                self.heads().each(|low, high, len| {
                    (len >= at_least)
                        & (len < NULL)
                        & (low & mask_low == want_low)
                        & (high & mask_high == want_high)
                })
            }
            Predicate::In(values)
                if values
                    .iter()
                    .all(|v| matches!(v, Value::Bytes(b) if short(b))) =>
            {
                let heads = self.heads();
                let mut any = 0;
                for value in values.iter() {
                    if let Value::Bytes(expected) = value {
                        any |= heads.equal(expected);
                    }
                }
                any
            }
            _ => return None,
        };
        Some(passed)
    }
}

impl Heads {
    /// The places (bit `i` for place `i`) where `test` holds of the head's
    /// two halves and the length, all [`RECORDS`] of them tested.
    #[inline]
    fn each(&self, test: impl Fn(u64, u64, u32) -> bool) -> u64 {
        let mut mask = 0;
        for at in 0..RECORDS {
            mask |= u64::from(test(self.low[at], self.high[at], self.lens[at])) << at;
        }
        mask
    }

    /// The places holding exactly `expected` (at most [`HEAD_BYTES`]).
    #[inline]
    fn equal(&self, expected: &[u8]) -> u64 {
        let want = head(expected);
        let (want_low, want_high) = (want as u64, (want >> 64) as u64);
        let want_len = expected.len() as u32;
        self.each(|low, high, len| (len == want_len) & (low == want_low) & (high == want_high))
    }
}

/// The first [`HEAD_BYTES`] of `bytes`, zero-padded, as a little-endian
/// number: loads that overlap cover the lengths between powers of two,
/// their overlap shifted out, rather than a copy of a length known only
/// now.
#[inline]
pub(crate) fn head(bytes: &[u8]) -> u128 {
    let n = bytes.len();
    match n {
        0 => 0,
        1..=3 => {
            u128::from(bytes[0])
                | u128::from(bytes[n / 2]) << (8 * (n / 2))
                | u128::from(bytes[n - 1]) << (8 * (n - 1))
        }
        4 => u128::from(word4(bytes, 0)),
        5..=7 => {
            u128::from(word4(bytes, 0)) | u128::from(word4(bytes, n - 4) >> (8 * (8 - n))) << 32
        }
        8 => u128::from(word8(bytes, 0)),
        9..=15 => {
            u128::from(word8(bytes, 0)) | u128::from(word8(bytes, n - 8) >> (8 * (16 - n))) << 64
        }
        _ => u128::from(word8(bytes, 0)) | u128::from(word8(bytes, 8)) << 64,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        /// A head is the first sixteen bytes, zero-padded, whatever the
        /// length.
        #[test]
        fn head_is_the_padded_first_bytes(bytes in prop::collection::vec(any::<u8>(), 0..40)) {
            let mut padded = [0u8; HEAD_BYTES];
            let n = bytes.len().min(HEAD_BYTES);
            padded[..n].copy_from_slice(&bytes[..n]);
            prop_assert_eq!(head(&bytes), u128::from_le_bytes(padded));
        }
    }
}
