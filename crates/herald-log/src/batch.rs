//! The Kafka RecordBatch v2 format, as far as the log needs it: the header
//! fields, validation of a client's batch, and walking a run of batches.
//!
//! Layout (all big-endian):
//!
//! ```text
//!  0 baseOffset i64 | 8 batchLength i32 | 12 partitionLeaderEpoch i32 | 16 magic i8
//! 17 crc u32 (CRC-32C of bytes 21..end) | 21 attributes i16 | 23 lastOffsetDelta i32
//! 27 baseTimestamp i64 | 35 maxTimestamp i64 | 43 producerId i64 | 51 producerEpoch i16
//! 53 baseSequence i32 | 57 recordsCount i32 | 61 records...
//! ```
//!
//! The log never decodes records on the append or fetch path: it only reads
//! header fields, and writes `baseOffset` and `partitionLeaderEpoch`, both
//! outside the CRC.

/// Size of the fixed RecordBatch v2 header.
pub const HEADER_BYTES: usize = 61;
/// Bytes before the `batchLength` payload starts (baseOffset + batchLength).
pub const LOG_OVERHEAD: usize = 12;
/// Smallest valid batch: the header plus one record of the smallest
/// encoding (length, attributes, timestamp delta, offset delta, null key,
/// empty value, no headers: seven one-byte fields).
pub const BATCH_BYTES_MIN: usize = HEADER_BYTES + 7;

// Field positions (the layout above); `batch_builder` writes them too.
const BASE_OFFSET: usize = 0;
pub(crate) const BATCH_LENGTH: usize = 8;
pub(crate) const PARTITION_LEADER_EPOCH: usize = 12;
pub(crate) const MAGIC: usize = 16;
const CRC: usize = 17;
const ATTRIBUTES: usize = 21;
pub(crate) const LAST_OFFSET_DELTA: usize = 23;
pub(crate) const BASE_TIMESTAMP: usize = 27;
pub(crate) const MAX_TIMESTAMP: usize = 35;
pub(crate) const PRODUCER_ID: usize = 43;
pub(crate) const PRODUCER_EPOCH: usize = 51;
pub(crate) const BASE_SEQUENCE: usize = 53;
pub(crate) const RECORDS_COUNT: usize = 57;

const COMPRESSION_MASK: i16 = 0x07;
const TIMESTAMP_TYPE_BIT: i16 = 0x08;
const TRANSACTIONAL_BIT: i16 = 0x10;
const CONTROL_BIT: i16 = 0x20;

use crate::error::BatchError;

fn be_i16(b: &[u8], at: usize) -> i16 {
    i16::from_be_bytes([b[at], b[at + 1]])
}
fn be_i32(b: &[u8], at: usize) -> i32 {
    i32::from_be_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}
fn be_i64(b: &[u8], at: usize) -> i64 {
    let mut v = [0u8; 8];
    v.copy_from_slice(&b[at..at + 8]);
    i64::from_be_bytes(v)
}

/// Read-only view of a batch header. Construction checks only that the
/// header is present; use [`validate`] for a client batch.
#[derive(Clone, Copy)]
pub struct BatchHeader<'a> {
    bytes: &'a [u8],
}

impl std::fmt::Debug for BatchHeader<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BatchHeader")
            .field("base_offset", &self.base_offset())
            .field("batch_bytes", &self.total_bytes())
            .field("records", &self.records_count())
            .field("producer_id", &self.producer_id())
            .finish()
    }
}

impl<'a> BatchHeader<'a> {
    /// Views the header at the start of `bytes`, or `None` if it is truncated.
    pub fn parse(bytes: &'a [u8]) -> Option<Self> {
        (bytes.len() >= HEADER_BYTES).then_some(Self { bytes })
    }
    /// First offset of the batch.
    pub fn base_offset(&self) -> i64 {
        be_i64(self.bytes, BASE_OFFSET)
    }
    /// `batchLength`: bytes after the length field.
    pub fn batch_length(&self) -> i32 {
        be_i32(self.bytes, BATCH_LENGTH)
    }
    /// Whole size of the batch in bytes (`batchLength` + 12), or `None` if
    /// `batchLength` is negative.
    pub fn total_bytes(&self) -> Option<usize> {
        usize::try_from(self.batch_length())
            .ok()
            .map(|l| l + LOG_OVERHEAD)
    }
    /// The leader epoch the broker stamped.
    pub fn partition_leader_epoch(&self) -> i32 {
        be_i32(self.bytes, PARTITION_LEADER_EPOCH)
    }
    /// Format version; 2 for every batch the log stores.
    pub fn magic(&self) -> i8 {
        self.bytes[MAGIC] as i8
    }
    /// CRC-32C stored in the header.
    pub fn crc(&self) -> u32 {
        be_i32(self.bytes, CRC) as u32
    }
    /// Raw attributes.
    pub fn attributes(&self) -> i16 {
        be_i16(self.bytes, ATTRIBUTES)
    }
    /// Compression codec id (0 none, 1 gzip, 2 snappy, 3 lz4, 4 zstd).
    pub fn compression(&self) -> u8 {
        (self.attributes() & COMPRESSION_MASK) as u8
    }
    /// True if timestamps are LogAppendTime.
    pub fn is_log_append_time(&self) -> bool {
        self.attributes() & TIMESTAMP_TYPE_BIT != 0
    }
    /// True for a transactional batch.
    pub fn is_transactional(&self) -> bool {
        self.attributes() & TRANSACTIONAL_BIT != 0
    }
    /// True for a control batch (transaction markers).
    pub fn is_control(&self) -> bool {
        self.attributes() & CONTROL_BIT != 0
    }
    /// Offset of the last record relative to the base offset.
    pub fn last_offset_delta(&self) -> i32 {
        be_i32(self.bytes, LAST_OFFSET_DELTA)
    }
    /// Number of offsets the batch occupies (`lastOffsetDelta + 1`).
    pub fn offset_count(&self) -> u32 {
        (self.last_offset_delta().max(0) as u32).saturating_add(1)
    }
    /// Last offset of the batch.
    pub fn last_offset(&self) -> i64 {
        self.base_offset() + i64::from(self.last_offset_delta())
    }
    /// Timestamp of the first record.
    pub fn base_timestamp(&self) -> i64 {
        be_i64(self.bytes, BASE_TIMESTAMP)
    }
    /// Largest record timestamp in the batch.
    pub fn max_timestamp(&self) -> i64 {
        be_i64(self.bytes, MAX_TIMESTAMP)
    }
    /// Idempotent producer id, or -1.
    pub fn producer_id(&self) -> i64 {
        be_i64(self.bytes, PRODUCER_ID)
    }
    /// Producer epoch, or -1.
    pub fn producer_epoch(&self) -> i16 {
        be_i16(self.bytes, PRODUCER_EPOCH)
    }
    /// Sequence number of the first record, or -1.
    pub fn base_sequence(&self) -> i32 {
        be_i32(self.bytes, BASE_SEQUENCE)
    }
    /// `recordsCount` from the header.
    pub fn records_count(&self) -> i32 {
        be_i32(self.bytes, RECORDS_COUNT)
    }
    /// CRC-32C computed over attributes..end of `batch` (which must be the
    /// whole batch).
    pub fn compute_crc(batch: &[u8]) -> u32 {
        crc32c::crc32c(&batch[ATTRIBUTES..])
    }
}

/// Recomputes and stores the CRC of `batch` (a whole batch, at least a
/// header long) after bytes it covers changed.
pub fn refresh_crc(batch: &mut [u8]) {
    let crc = BatchHeader::compute_crc(batch);
    batch[CRC..CRC + 4].copy_from_slice(&crc.to_be_bytes());
}

/// Validates one client batch exactly filling `batch`: magic 2, length
/// consistent with the buffer, CRC-32C, record count, not a control batch.
/// Returns the header on success.
pub fn validate(batch: &[u8]) -> Result<BatchHeader<'_>, BatchError> {
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
    if header.is_control() {
        return Err(BatchError::ControlBatch);
    }
    Ok(header)
}

/// A batch that passed [`validate`]: the only way to hand a batch to
/// [`crate::Log::append_valid`], so a caller that had to validate anyway
/// (to inspect the header first) does not pay for the CRC twice.
#[derive(Debug, Clone, Copy)]
pub struct ValidBatch<'a> {
    bytes: &'a [u8],
    header: BatchHeader<'a>,
}

impl<'a> ValidBatch<'a> {
    /// Validates `batch` as [`validate`] does.
    pub fn new(batch: &'a [u8]) -> Result<Self, BatchError> {
        Ok(Self {
            bytes: batch,
            header: validate(batch)?,
        })
    }

    /// The batch's header.
    pub fn header(&self) -> BatchHeader<'a> {
        self.header
    }

    /// The whole batch.
    pub fn bytes(&self) -> &'a [u8] {
        self.bytes
    }
}

/// Checks the framing of a stored or received batch (header present, magic,
/// declared length equal to the slice) without the CRC.
fn check_frame(batch: &[u8]) -> Result<BatchHeader<'_>, BatchError> {
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

/// Writes the broker-assigned base offset and leader epoch into a batch in
/// place. Both fields are outside the CRC, so the batch stays valid.
pub(crate) fn stamp(batch: &mut [u8], base_offset: u64, leader_epoch: i32) {
    batch[BASE_OFFSET..BASE_OFFSET + 8].copy_from_slice(&(base_offset as i64).to_be_bytes());
    batch[PARTITION_LEADER_EPOCH..PARTITION_LEADER_EPOCH + 4]
        .copy_from_slice(&leader_epoch.to_be_bytes());
}

/// Splits a run of concatenated batches (a produce request's `records`) into
/// single batches. Stops with an error at the first batch whose framing is
/// wrong; a trailing partial batch is an error too, since a producer never
/// sends one.
pub struct Batches<'a> {
    rest: &'a [u8],
}

/// Iterates the batches in `bytes`.
pub fn batches(bytes: &[u8]) -> Batches<'_> {
    Batches { rest: bytes }
}

impl<'a> Iterator for Batches<'a> {
    type Item = Result<&'a [u8], BatchError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.rest.is_empty() {
            return None;
        }
        let Some(header) = BatchHeader::parse(self.rest) else {
            let len = self.rest.len();
            self.rest = &[];
            return Some(Err(BatchError::TooShort {
                len,
                min: HEADER_BYTES,
            }));
        };
        match header.total_bytes() {
            Some(total) if total >= HEADER_BYTES && total <= self.rest.len() => {
                let (batch, rest) = self.rest.split_at(total);
                self.rest = rest;
                Some(Ok(batch))
            }
            declared => {
                let actual = self.rest.len();
                self.rest = &[];
                Some(Err(BatchError::LengthMismatch {
                    declared: declared.unwrap_or(0),
                    actual,
                }))
            }
        }
    }
}

/// Reasons a stored batch fails the recovery scan.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum StoredBatchError {
    /// Fewer bytes remain than the batch needs: a torn write.
    Truncated,
    /// The header or the content does not check out.
    Invalid(BatchError),
    /// The base offset is not the one expected at this position.
    OffsetGap { expected: u64, found: i64 },
}

/// Validates a stored batch at the start of `bytes` (which may run on past
/// it): framing, CRC, and the expected base offset. Returns its size.
pub(crate) fn validate_stored(
    bytes: &[u8],
    expected_offset: u64,
) -> Result<(usize, BatchHeader<'_>), StoredBatchError> {
    let header = BatchHeader::parse(bytes).ok_or(StoredBatchError::Truncated)?;
    let total = match header.total_bytes() {
        Some(t) if t >= BATCH_BYTES_MIN => t,
        declared => {
            return Err(StoredBatchError::Invalid(BatchError::LengthMismatch {
                declared: declared.unwrap_or(0),
                actual: bytes.len(),
            }))
        }
    };
    if total > bytes.len() {
        return Err(StoredBatchError::Truncated);
    }
    let batch = &bytes[..total];
    if header.magic() != 2 {
        return Err(StoredBatchError::Invalid(BatchError::UnsupportedMagic {
            found: header.magic(),
        }));
    }
    let computed = BatchHeader::compute_crc(batch);
    if computed != header.crc() {
        return Err(StoredBatchError::Invalid(BatchError::CrcMismatch {
            expected: header.crc(),
            computed,
        }));
    }
    if header.last_offset_delta() < 0 {
        return Err(StoredBatchError::Invalid(BatchError::RecordCount {
            records_count: header.records_count(),
            last_offset_delta: header.last_offset_delta(),
        }));
    }
    if header.base_offset() != expected_offset as i64 {
        return Err(StoredBatchError::OffsetGap {
            expected: expected_offset,
            found: header.base_offset(),
        });
    }
    Ok((total, header))
}

/// For an uncompressed batch, the offset and timestamp of the first record
/// whose timestamp is at least `target`; `None` if no record qualifies or the
/// records cannot be walked (compressed, or malformed).
pub fn first_record_at_or_after(batch: &[u8], target: i64) -> Option<(i64, i64)> {
    let header = BatchHeader::parse(batch)?;
    if header.compression() != 0 {
        return None;
    }
    first_record_in_records(&header, batch.get(HEADER_BYTES..)?, target)
}

/// The offset and timestamp of the first record at or after `target` in
/// `records`, the batch's records section as plain bytes (as stored for an
/// uncompressed batch, or decompressed by the caller), with offsets and
/// timestamps taken relative to `header`. `None` if no record qualifies or the
/// records are malformed.
pub fn first_record_in_records(
    header: &BatchHeader<'_>,
    records: &[u8],
    target: i64,
) -> Option<(i64, i64)> {
    let mut walker = RecordWalker { rest: records };
    for _ in 0..header.records_count() {
        let (timestamp_delta, offset_delta) = walker.next_record()?;
        let timestamp = header.base_timestamp().checked_add(timestamp_delta)?;
        if timestamp >= target {
            return Some((header.base_offset().checked_add(offset_delta)?, timestamp));
        }
    }
    None
}

/// Walks uncompressed records, yielding (timestampDelta, offsetDelta).
struct RecordWalker<'a> {
    rest: &'a [u8],
}

impl RecordWalker<'_> {
    fn next_record(&mut self) -> Option<(i64, i64)> {
        let length = usize::try_from(self.varint()?).ok()?;
        let record = self.rest.get(..length)?;
        let after = &self.rest[length..];
        self.rest = record.get(1..)?; // attributes (int8)
        let timestamp_delta = self.varint()?;
        let offset_delta = self.varint()?;
        self.rest = after;
        Some((timestamp_delta, offset_delta))
    }

    /// Zig-zag varint, as Kafka encodes record fields.
    fn varint(&mut self) -> Option<i64> {
        let (value, len) = crate::varint::get(self.rest)?;
        self.rest = &self.rest[len..];
        Some(value)
    }
}

/// Builds valid batches, for tests and benchmarks of code that stores them.
pub mod testing {
    use crate::batch_builder::{BatchBuilder, RecordFields};

    /// One uncompressed batch of `count` records, each with `value`
    /// (and no key), timestamps starting at `timestamp` one ms apart.
    pub fn batch(count: u32, value: &[u8], timestamp: i64) -> Vec<u8> {
        let mut builder =
            BatchBuilder::with_capacity(timestamp, count as usize * (value.len() + 16));
        for delta in 0..count {
            builder.push(RecordFields {
                timestamp_ms: timestamp + i64::from(delta),
                value: Some(value),
                ..RecordFields::default()
            });
        }
        builder
            .finish()
            .expect("a test batch has a record and fits")
    }
}

#[cfg(test)]
mod tests {
    use super::testing::batch;
    use super::*;

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
        b[ATTRIBUTES + 1] |= CONTROL_BIT as u8;
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
        assert_eq!(first_record_at_or_after(&b, 102), Some((12, 102)));
        assert_eq!(first_record_at_or_after(&b, 0), Some((10, 100)));
        assert_eq!(first_record_at_or_after(&b, 105), None);
    }
}
