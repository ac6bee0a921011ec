//! The baseline the lock-free log is compared with: a log whose append takes
//! a mutex, as Kafka's `Log.append` does.
//!
//! It does what herald's append must do and nothing else, so the difference
//! is the lock: validate the batch (CRC-32C included) outside the lock, then
//! under one `std::sync::Mutex` assign the offset, copy the bytes into a
//! preallocated, pre-faulted buffer, write the base offset into the copy and
//! publish the new end. A reader takes the same lock to learn the end, then
//! copies whole batches below it without the lock.

use std::sync::{Mutex, MutexGuard, PoisonError};

use herald_records as batch;

use crate::region::Region;
use crate::BenchError;

/// A position in the baseline log: the next offset and its byte position.
/// Subscribers keep one as their fetch position; the baseline has no offset
/// index, which only makes it cheaper than a real log.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Cursor {
    /// Offset of the next record.
    pub offset: u64,
    /// Byte position of the batch holding it.
    pub position: usize,
}

/// An append-only log whose append takes a mutex.
pub struct MutexLog<'r> {
    region: &'r Region,
    /// The end of the log. Bytes below `end.position` are complete and never
    /// written again; bytes at or past it are written only under this lock.
    end: Mutex<Cursor>,
}

impl<'r> MutexLog<'r> {
    /// An empty log storing its batches in `region`.
    pub fn new(region: &'r Region) -> Self {
        Self {
            region,
            end: Mutex::new(Cursor::default()),
        }
    }

    /// Appends one batch and returns its base offset.
    pub fn append(&self, batch: &[u8]) -> Result<u64, BenchError> {
        let offsets = u64::from(batch::validate(batch)?.offset_count());
        let mut end = self.lock();
        let position = end.position;
        let needed = position + batch.len();
        if needed > self.region.len() {
            return Err(BenchError::BaselineFull {
                needed,
                capacity: self.region.len(),
            });
        }
        let base_offset = end.offset;
        // SAFETY: bytes at or past `end.position` are touched only by the
        // holder of the lock (readers stop below the end they read under it),
        // and `needed` is within the region.
        unsafe {
            self.region.write(position, batch);
            self.region
                .write(position, &(base_offset as i64).to_be_bytes());
        }
        *end = Cursor {
            offset: base_offset + offsets,
            position: needed,
        };
        Ok(base_offset)
    }

    /// The end of the log, read under the lock.
    pub fn end(&self) -> Cursor {
        *self.lock()
    }

    /// Whole batches from `from` (which must be a batch boundary) up to
    /// `max_bytes`, at least one if any; returns them and the cursor after.
    pub fn read(&self, from: Cursor, max_bytes: usize) -> Result<(&[u8], Cursor), BenchError> {
        let end = self.end();
        let committed = self.committed_to(end);
        let mut next = from;
        for item in batch::batches(&committed[from.position..]) {
            let bytes = item?;
            let taken = next.position - from.position;
            if taken > 0 && taken + bytes.len() > max_bytes {
                break;
            }
            let header =
                batch::BatchHeader::parse(bytes).ok_or(herald_log::BatchError::TooShort {
                    len: bytes.len(),
                    min: batch::HEADER_BYTES,
                })?;
            next.position += bytes.len();
            next.offset += u64::from(header.offset_count());
        }
        Ok((&committed[from.position..next.position], next))
    }

    /// Every byte appended so far (the memcpy bound reads these same bytes).
    pub fn committed(&self) -> &[u8] {
        self.committed_to(self.end())
    }

    fn committed_to(&self, end: Cursor) -> &[u8] {
        // SAFETY: `end` was read under the lock, after every write below it;
        // bytes below the end are never written again.
        unsafe { self.region.slice(0, end.position) }
    }

    fn lock(&self) -> MutexGuard<'_, Cursor> {
        // Nothing panics while holding the lock, and a `Cursor` is always
        // consistent, so a poisoned lock still holds a valid end.
        self.end.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use herald_records::testing;

    #[test]
    fn appends_assign_dense_offsets_and_reads_return_whole_batches() {
        let region = Region::prefaulted(1 << 16);
        let log = MutexLog::new(&region);
        let b = testing::batch(3, &[7; 64], 0);
        for expected in [0, 3, 6] {
            assert_eq!(log.append(&b).expect("fits"), expected);
        }
        let (bytes, next) = log.read(Cursor::default(), b.len() * 2).expect("valid");
        assert_eq!(bytes.len(), b.len() * 2);
        assert_eq!(
            next,
            Cursor {
                offset: 6,
                position: b.len() * 2
            }
        );
        let header = batch::validate(&bytes[b.len()..]).expect("stored batch stays valid");
        assert_eq!(header.base_offset(), 3);
        let (rest, end) = log.read(next, 1).expect("valid");
        assert_eq!((rest.len(), end), (b.len(), log.end()));
    }

    #[test]
    fn full_buffer_is_an_error_not_an_overrun() {
        let b = testing::batch(1, &[7; 64], 0);
        let region = Region::prefaulted(b.len() + 1);
        let log = MutexLog::new(&region);
        log.append(&b).expect("fits");
        assert!(matches!(
            log.append(&b),
            Err(BenchError::BaselineFull { .. })
        ));
    }
}
