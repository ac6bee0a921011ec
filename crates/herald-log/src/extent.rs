//! A position inside a segment: how many offsets and how many bytes precede it.

/// Relative offset and byte position inside one segment, packed in a `u64`
/// (offsets in the high 32 bits, bytes in the low 32) so that both move in a
/// single atomic operation and can never disagree.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct Extent {
    /// Offsets (records) before this point, relative to the segment base.
    pub records: u32,
    /// Bytes before this point.
    pub bytes: u32,
}

/// Bit 63 of a reservation word: the segment is sealed at the extent held in
/// the other bits. Offsets are limited to 31 bits so it never collides.
pub(crate) const SEALED: u64 = 1 << 63;

/// Largest relative offset count a segment may hold.
pub(crate) const SEGMENT_RECORDS_MAX: u32 = (1 << 31) - 1;

// The offset count shifted into the high half must leave the SEALED bit
// free, and every byte position of the largest segment must fit the low
// half, or a reservation could corrupt the word it advances.
const _: () = assert!(((SEGMENT_RECORDS_MAX as u64) << 32) & SEALED == 0);
const _: () = assert!(crate::config::SEGMENT_BYTES_MAX as u64 <= u32::MAX as u64);

impl Extent {
    pub(crate) const fn new(records: u32, bytes: u32) -> Self {
        Self { records, bytes }
    }

    pub(crate) const fn pack(self) -> u64 {
        ((self.records as u64) << 32) | self.bytes as u64
    }

    pub(crate) const fn unpack(word: u64) -> Self {
        Self {
            records: ((word & !SEALED) >> 32) as u32,
            bytes: word as u32,
        }
    }
}
