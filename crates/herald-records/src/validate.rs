//! Validation of a batch a client sent: framing, magic, CRC-32C, record
//! count, and no control batch. A batch that passes becomes a
//! [`ValidBatch`], the only kind the log appends.

use crate::header::{BatchHeader, BATCH_BYTES_MIN, HEADER_BYTES};

/// Why a record batch was refused before anything was written.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BatchError {
    /// Fewer bytes than a batch header, or than the smallest valid batch.
    #[error("record batch of {len} bytes is shorter than the {min}-byte minimum")]
    TooShort {
        /// Bytes given.
        len: usize,
        /// Smallest acceptable size.
        min: usize,
    },
    /// The header's `batchLength` does not match the bytes given.
    #[error("record batch declares {declared} bytes but {actual} were given")]
    LengthMismatch {
        /// Total size implied by `batchLength`.
        declared: usize,
        /// Bytes actually present.
        actual: usize,
    },
    /// Only magic 2 (RecordBatch v2) is stored.
    #[error("record batch magic {found} is not supported (only 2)")]
    UnsupportedMagic {
        /// The magic byte found.
        found: i8,
    },
    /// CRC-32C over attributes..end does not match the header.
    #[error(
        "record batch CRC mismatch: header says {expected:#010x}, content gives {computed:#010x}"
    )]
    CrcMismatch {
        /// CRC stored in the header.
        expected: u32,
        /// CRC computed over the content.
        computed: u32,
    },
    /// `recordsCount` disagrees with `lastOffsetDelta`, or is not positive.
    #[error("record batch has {records_count} records but lastOffsetDelta {last_offset_delta}")]
    RecordCount {
        /// `recordsCount` from the header.
        records_count: i32,
        /// `lastOffsetDelta` from the header.
        last_offset_delta: i32,
    },
    /// Control batches are written by the broker only.
    #[error("control batches cannot be produced by clients")]
    ControlBatch,
}

/// Validates one client batch exactly filling `batch`: magic 2, length
/// consistent with the buffer, CRC-32C, record count, not a control batch.
/// Returns the header on success.
#[inline]
pub fn validate(batch: &[u8]) -> Result<BatchHeader<'_>, BatchError> {
    let header = validate_framing_and_crc(batch)?;
    if header.is_control() {
        return Err(BatchError::ControlBatch);
    }
    Ok(header)
}

/// [`validate`] for a batch the broker wrote itself, which may be a
/// control batch (Raft's entries in a replicated partition).
#[inline]
fn validate_framing_and_crc(batch: &[u8]) -> Result<BatchHeader<'_>, BatchError> {
    let header = check_frame(batch)?;
    if batch.len() < BATCH_BYTES_MIN {
        return Err(BatchError::TooShort {
            len: batch.len(),
            min: BATCH_BYTES_MIN,
        });
    }
    let computed = BatchHeader::compute_crc(batch);
    if computed != header.crc() {
        return Err(BatchError::CrcMismatch {
            expected: header.crc(),
            computed,
        });
    }
    let (count, delta) = (header.records_count(), header.last_offset_delta());
    if count <= 0 || delta < 0 || i64::from(count) != i64::from(delta) + 1 {
        return Err(BatchError::RecordCount {
            records_count: count,
            last_offset_delta: delta,
        });
    }
    Ok(header)
}

/// A batch that passed [`validate`]: what the log's and the partition
/// contract's appends take, so a caller that had to validate anyway
/// (to inspect the header first) does not pay for the CRC twice.
#[derive(Debug, Clone, Copy)]
pub struct ValidBatch<'a> {
    bytes: &'a [u8],
    header: BatchHeader<'a>,
}

impl<'a> ValidBatch<'a> {
    /// Validates `batch` as [`validate`] does.
    #[inline]
    pub fn new(batch: &'a [u8]) -> Result<Self, BatchError> {
        Ok(Self {
            bytes: batch,
            header: validate(batch)?,
        })
    }

    /// Validates a batch the broker wrote itself: as [`validate`], but a
    /// control batch is accepted. Never for a client's batch.
    #[inline]
    pub fn broker_written(batch: &'a [u8]) -> Result<Self, BatchError> {
        Ok(Self {
            bytes: batch,
            header: validate_framing_and_crc(batch)?,
        })
    }

    /// The batch's header.
    #[inline]
    pub fn header(&self) -> BatchHeader<'a> {
        self.header
    }

    /// The whole batch.
    #[inline]
    pub fn bytes(&self) -> &'a [u8] {
        self.bytes
    }
}

/// Checks the framing of a stored or received batch (header present, magic,
/// declared length equal to the slice) without the CRC.
#[inline]
pub(crate) fn check_frame(batch: &[u8]) -> Result<BatchHeader<'_>, BatchError> {
    let header = BatchHeader::parse(batch).ok_or(BatchError::TooShort {
        len: batch.len(),
        min: HEADER_BYTES,
    })?;
    if header.magic() != 2 {
        return Err(BatchError::UnsupportedMagic {
            found: header.magic(),
        });
    }
    match header.total_bytes() {
        Some(declared) if declared == batch.len() => Ok(header),
        declared => Err(BatchError::LengthMismatch {
            declared: declared.unwrap_or(0),
            actual: batch.len(),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::header::{stamp, ATTRIBUTES, CRC, MAGIC};
    use crate::testing::batch;
    use crate::{batches, first_at_or_after};

    #[test]
    fn valid_batch_passes_and_reports_its_fields() {
        let b = batch(3, b"hello", 1_000);
        let h = validate(&b).expect("valid");
        assert_eq!(h.offset_count(), 3);
        assert_eq!(h.max_timestamp(), 1_002);
        assert_eq!(h.total_bytes(), Some(b.len()));
    }

    #[test]
    fn flipped_byte_is_a_crc_mismatch() {
        let mut b = batch(2, b"x", 0);
        let last = b.len() - 1;
        b[last] ^= 0xff;
        assert!(matches!(validate(&b), Err(BatchError::CrcMismatch { .. })));
    }

    #[test]
    fn stamping_offset_keeps_crc_valid() {
        let mut b = batch(2, b"x", 0);
        stamp(&mut b, 42, 7);
        let h = validate(&b).expect("still valid");
        assert_eq!(h.base_offset(), 42);
        assert_eq!(h.partition_leader_epoch(), 7);
    }

    #[test]
    fn wrong_length_and_magic_are_refused() {
        let b = batch(1, b"x", 0);
        assert!(matches!(
            validate(&b[..b.len() - 1]),
            Err(BatchError::LengthMismatch { .. })
        ));
        let mut m = b.clone();
        m[MAGIC] = 1;
        assert!(matches!(
            validate(&m),
            Err(BatchError::UnsupportedMagic { found: 1 })
        ));
        assert!(matches!(
            validate(&b[..10]),
            Err(BatchError::TooShort { .. })
        ));
    }

    #[test]
    fn control_batches_are_refused() {
        let mut b = batch(1, b"x", 0);
        b[ATTRIBUTES + 1] |= 0x20; // the control bit
        let crc = BatchHeader::compute_crc(&b);
        b[CRC..CRC + 4].copy_from_slice(&crc.to_be_bytes());
        assert_eq!(validate(&b).err(), Some(BatchError::ControlBatch));
    }

    #[test]
    fn batches_splits_concatenation_and_flags_a_partial_tail() {
        let mut run = batch(1, b"a", 0);
        run.extend(batch(2, b"b", 0));
        assert_eq!(batches(&run).filter(|b| b.is_ok()).count(), 2);
        run.extend_from_slice(&[0, 0, 0]);
        assert!(batches(&run).last().expect("three items").is_err());
    }

    #[test]
    fn timestamp_search_finds_the_first_record_at_or_after() {
        let mut b = batch(5, b"v", 100);
        stamp(&mut b, 10, 0);
        assert_eq!(
            first_at_or_after(&b, 102, 0, &mut Vec::new()),
            Some((12, 102))
        );
        assert_eq!(
            first_at_or_after(&b, 0, 0, &mut Vec::new()),
            Some((10, 100))
        );
        assert_eq!(first_at_or_after(&b, 105, 0, &mut Vec::new()), None);
    }
}
