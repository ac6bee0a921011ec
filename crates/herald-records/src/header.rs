//! The RecordBatch v2 header: its layout, a read-only view of its fields,
//! and the two fields the broker writes in place.
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
//! outside the CRC ([`stamp`]).

/// Size of the fixed RecordBatch v2 header.
pub const HEADER_BYTES: usize = 61;
/// Bytes before the `batchLength` payload starts (baseOffset + batchLength).
pub const LOG_OVERHEAD: usize = 12;
/// Smallest valid batch: the header plus one record of the smallest
/// encoding (length, attributes, timestamp delta, offset delta, null key,
/// empty value, no headers: seven one-byte fields).
pub const BATCH_BYTES_MIN: usize = HEADER_BYTES + 7;

// Field positions (the layout above); `builder` writes them too.
const BASE_OFFSET: usize = 0;
pub(crate) const BATCH_LENGTH: usize = 8;
pub(crate) const PARTITION_LEADER_EPOCH: usize = 12;
pub(crate) const MAGIC: usize = 16;
pub(crate) const CRC: usize = 17;
pub(crate) const ATTRIBUTES: usize = 21;
pub(crate) const LAST_OFFSET_DELTA: usize = 23;
pub(crate) const BASE_TIMESTAMP: usize = 27;
pub(crate) const MAX_TIMESTAMP: usize = 35;
pub(crate) const PRODUCER_ID: usize = 43;
pub(crate) const PRODUCER_EPOCH: usize = 51;
pub(crate) const BASE_SEQUENCE: usize = 53;
pub(crate) const RECORDS_COUNT: usize = 57;

pub(crate) const COMPRESSION_MASK: i16 = 0x07;
const TIMESTAMP_TYPE_BIT: i16 = 0x08;
const TRANSACTIONAL_BIT: i16 = 0x10;
pub(crate) const CONTROL_BIT: i16 = 0x20;

#[inline]
fn be_i16(b: &[u8], at: usize) -> i16 {
    i16::from_be_bytes([b[at], b[at + 1]])
}
#[inline]
fn be_i32(b: &[u8], at: usize) -> i32 {
    i32::from_be_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}
#[inline]
fn be_i64(b: &[u8], at: usize) -> i64 {
    let mut v = [0u8; 8];
    v.copy_from_slice(&b[at..at + 8]);
    i64::from_be_bytes(v)
}

/// Read-only view of a batch header. Construction checks only that the
/// header is present; use [`validate`](fn@crate::validate) for a client batch.
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
    #[inline]
    pub fn parse(bytes: &'a [u8]) -> Option<Self> {
        (bytes.len() >= HEADER_BYTES).then_some(Self { bytes })
    }
    /// First offset of the batch.
    #[inline]
    pub fn base_offset(&self) -> i64 {
        be_i64(self.bytes, BASE_OFFSET)
    }
    /// `batchLength`: bytes after the length field.
    #[inline]
    pub fn batch_length(&self) -> i32 {
        be_i32(self.bytes, BATCH_LENGTH)
    }
    /// Whole size of the batch in bytes (`batchLength` + 12), or `None` if
    /// `batchLength` is negative.
    #[inline]
    pub fn total_bytes(&self) -> Option<usize> {
        usize::try_from(self.batch_length())
            .ok()
            .map(|l| l + LOG_OVERHEAD)
    }
    /// The leader epoch the broker stamped.
    #[inline]
    pub fn partition_leader_epoch(&self) -> i32 {
        be_i32(self.bytes, PARTITION_LEADER_EPOCH)
    }
    /// Format version; 2 for every batch the log stores.
    #[inline]
    pub fn magic(&self) -> i8 {
        self.bytes[MAGIC] as i8
    }
    /// CRC-32C stored in the header.
    #[inline]
    pub fn crc(&self) -> u32 {
        be_i32(self.bytes, CRC) as u32
    }
    /// Raw attributes.
    #[inline]
    pub fn attributes(&self) -> i16 {
        be_i16(self.bytes, ATTRIBUTES)
    }
    /// Compression codec id (0 none, 1 gzip, 2 snappy, 3 lz4, 4 zstd).
    #[inline]
    pub fn compression(&self) -> u8 {
        (self.attributes() & COMPRESSION_MASK) as u8
    }
    /// True if timestamps are LogAppendTime.
    #[inline]
    pub fn is_log_append_time(&self) -> bool {
        self.attributes() & TIMESTAMP_TYPE_BIT != 0
    }
    /// True for a transactional batch.
    #[inline]
    pub fn is_transactional(&self) -> bool {
        self.attributes() & TRANSACTIONAL_BIT != 0
    }
    /// True for a control batch (transaction markers).
    #[inline]
    pub fn is_control(&self) -> bool {
        self.attributes() & CONTROL_BIT != 0
    }
    /// Offset of the last record relative to the base offset.
    #[inline]
    pub fn last_offset_delta(&self) -> i32 {
        be_i32(self.bytes, LAST_OFFSET_DELTA)
    }
    /// Number of offsets the batch occupies (`lastOffsetDelta + 1`).
    #[inline]
    pub fn offset_count(&self) -> u32 {
        (self.last_offset_delta().max(0) as u32).saturating_add(1)
    }
    /// Last offset of the batch. Saturates: an unvalidated header may hold
    /// any base offset and delta.
    #[inline]
    pub fn last_offset(&self) -> i64 {
        self.base_offset()
            .saturating_add(i64::from(self.last_offset_delta()))
    }
    /// Timestamp of the first record.
    #[inline]
    pub fn base_timestamp(&self) -> i64 {
        be_i64(self.bytes, BASE_TIMESTAMP)
    }
    /// Largest record timestamp in the batch.
    #[inline]
    pub fn max_timestamp(&self) -> i64 {
        be_i64(self.bytes, MAX_TIMESTAMP)
    }
    /// Idempotent producer id, or -1.
    #[inline]
    pub fn producer_id(&self) -> i64 {
        be_i64(self.bytes, PRODUCER_ID)
    }
    /// Producer epoch, or -1.
    #[inline]
    pub fn producer_epoch(&self) -> i16 {
        be_i16(self.bytes, PRODUCER_EPOCH)
    }
    /// Sequence number of the first record, or -1.
    #[inline]
    pub fn base_sequence(&self) -> i32 {
        be_i32(self.bytes, BASE_SEQUENCE)
    }
    /// `recordsCount` from the header.
    #[inline]
    pub fn records_count(&self) -> i32 {
        be_i32(self.bytes, RECORDS_COUNT)
    }
    /// CRC-32C computed over attributes..end of `batch` (which must be the
    /// whole batch).
    #[inline]
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

/// Writes the broker-assigned base offset and leader epoch into a batch in
/// place (`batch` at least a header long). Both fields are outside the CRC,
/// so the batch stays valid.
#[inline]
pub fn stamp(batch: &mut [u8], base_offset: u64, leader_epoch: i32) {
    batch[BASE_OFFSET..BASE_OFFSET + 8].copy_from_slice(&(base_offset as i64).to_be_bytes());
    batch[PARTITION_LEADER_EPOCH..PARTITION_LEADER_EPOCH + 4]
        .copy_from_slice(&leader_epoch.to_be_bytes());
}
