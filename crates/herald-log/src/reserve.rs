//! The reservation word: the one atomic that hands out offset and byte ranges
//! of a segment to concurrent writers, and seals the segment when full.
//!
//! A writer reserves by compare-and-swap from extent `e` to
//! `e + (records, bytes)`. If the batch does not fit, the same compare-and-swap
//! instead sets the SEALED bit on `e`, so the segment's final extent is exactly
//! the word's value from then on, readable by every thread. That is what makes
//! the roll part of the protocol rather than a lock around it: any writer that
//! sees SEALED knows where the next segment starts and can create it.

use crate::extent::{Extent, SEALED, SEGMENT_RECORDS_MAX};
use crate::sync::{AtomicU64, Ordering};

/// Outcome of one reservation attempt.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Reservation {
    /// The range starting at `start` is this writer's alone.
    Reserved { start: Extent },
    /// The segment is sealed at `end`; append to the next segment.
    Sealed { end: Extent },
}

/// Reservation state of one segment.
pub(crate) struct ReserveWord {
    word: AtomicU64,
    capacity_bytes: u32,
}

impl ReserveWord {
    /// A segment that already holds `start` and accepts up to `capacity_bytes`.
    pub(crate) fn new(start: Extent, capacity_bytes: u32) -> Self {
        Self {
            word: AtomicU64::new(start.pack()),
            capacity_bytes,
        }
    }

    /// A segment recovered from disk that takes no more appends.
    pub(crate) fn new_sealed(end: Extent) -> Self {
        Self {
            word: AtomicU64::new(end.pack() | SEALED),
            capacity_bytes: end.bytes,
        }
    }

    /// Reserves `bytes` and `records` together, or seals the segment if they do
    /// not fit. Lock-free: a failed compare-and-swap means another writer
    /// succeeded.
    pub(crate) fn reserve(&self, bytes: u32, records: u32) -> Reservation {
        // Relaxed suffices for the first look; the CAS below re-validates it.
        let mut current = self.word.load(Ordering::Relaxed);
        loop {
            let at = Extent::unpack(current);
            if current & SEALED != 0 {
                return Reservation::Sealed { end: at };
            }
            let end_bytes = u64::from(at.bytes) + u64::from(bytes);
            let end_records = u64::from(at.records) + u64::from(records);
            let fits = end_bytes <= u64::from(self.capacity_bytes)
                && end_records <= u64::from(SEGMENT_RECORDS_MAX);
            let next = if fits {
                Extent::new(end_records as u32, end_bytes as u32).pack()
            } else {
                current | SEALED
            };
            // AcqRel: the sealed extent is read by other writers to name the
            // next segment, and by readers deciding the segment is complete.
            match self.word.compare_exchange_weak(
                current,
                next,
                Ordering::AcqRel,
                Ordering::Relaxed,
            ) {
                Ok(_) if fits => return Reservation::Reserved { start: at },
                Ok(_) => return Reservation::Sealed { end: at },
                Err(actual) => current = actual,
            }
        }
    }

    /// Seals the segment where it stands (age roll, shutdown) and returns the
    /// final extent. Idempotent.
    pub(crate) fn seal(&self) -> Extent {
        Extent::unpack(self.word.fetch_or(SEALED, Ordering::AcqRel))
    }

    /// The reserved extent and whether the segment is sealed.
    pub(crate) fn load(&self) -> (Extent, bool) {
        let word = self.word.load(Ordering::Acquire);
        (Extent::unpack(word), word & SEALED != 0)
    }
}

#[cfg(all(test, not(herald_loom)))]
mod tests {
    use super::*;

    #[test]
    fn reservations_are_contiguous_in_offsets_and_bytes() {
        let word = ReserveWord::new(Extent::default(), 1000);
        assert_eq!(
            word.reserve(100, 3),
            Reservation::Reserved {
                start: Extent::new(0, 0)
            }
        );
        assert_eq!(
            word.reserve(200, 1),
            Reservation::Reserved {
                start: Extent::new(3, 100)
            }
        );
        assert_eq!(word.load(), (Extent::new(4, 300), false));
    }

    #[test]
    fn a_batch_that_does_not_fit_seals_at_the_previous_end() {
        let word = ReserveWord::new(Extent::default(), 1000);
        word.reserve(900, 9);
        assert_eq!(
            word.reserve(200, 1),
            Reservation::Sealed {
                end: Extent::new(9, 900)
            }
        );
        // Even a batch that would fit is refused once sealed: order is kept.
        assert_eq!(
            word.reserve(50, 1),
            Reservation::Sealed {
                end: Extent::new(9, 900)
            }
        );
    }

    #[test]
    fn seal_is_idempotent_and_reports_the_end() {
        let word = ReserveWord::new(Extent::new(5, 500), 1000);
        assert_eq!(word.seal(), Extent::new(5, 500));
        assert_eq!(word.seal(), Extent::new(5, 500));
        assert_eq!(word.load(), (Extent::new(5, 500), true));
    }
}
