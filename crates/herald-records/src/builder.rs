//! Encoding of RecordBatch v2 batches, for everything in herald that
//! produces records itself: the command-line producer, the group
//! coordinator's offsets log, the load generator and tests.

use crate::compression::{compress_into, Compression, CompressionError};
use crate::header::{
    refresh_crc, ATTRIBUTES, BASE_SEQUENCE, BASE_TIMESTAMP, BATCH_LENGTH, CONTROL_BIT,
    HEADER_BYTES, LAST_OFFSET_DELTA, LOG_OVERHEAD, MAGIC, MAX_TIMESTAMP, PARTITION_LEADER_EPOCH,
    PRODUCER_EPOCH, PRODUCER_ID, RECORDS_COUNT,
};
use crate::varint;

/// Why a batch could not be encoded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EncodeError {
    /// A batch holds at least one record.
    #[error("a batch needs at least one record")]
    Empty,
    /// The batch's length or record count does not fit its i32 field.
    #[error("the batch is too large for one record batch")]
    TooLarge,
    /// The records could not be compressed.
    #[error(transparent)]
    Compression(#[from] CompressionError),
}

/// One record to encode.
#[derive(Debug, Clone, Copy, Default)]
pub struct RecordFields<'a> {
    /// Timestamp in milliseconds since the epoch.
    pub timestamp_ms: i64,
    /// Key (`None` is Kafka's null).
    pub key: Option<&'a [u8]>,
    /// Value (`None` is Kafka's null).
    pub value: Option<&'a [u8]>,
    /// Headers in order, as (key, value).
    pub headers: &'a [(&'a [u8], Option<&'a [u8]>)],
}

/// Builds one batch: records are appended in order, offset deltas counting
/// from 0; [`BatchBuilder::finish`] fills in the header and the CRC. The
/// base offset is 0 and there is no producer id: the broker assigns offsets.
#[derive(Debug)]
pub struct BatchBuilder {
    out: Vec<u8>,
    record: Vec<u8>,
    base_timestamp: i64,
    max_timestamp: i64,
    count: u64,
}

impl BatchBuilder {
    /// An empty batch whose record timestamps are stored relative to
    /// `base_timestamp` (the smallest of them, by Kafka's convention).
    pub fn new(base_timestamp: i64) -> Self {
        Self::with_capacity(base_timestamp, 0)
    }

    /// As [`Self::new`], with room for `records_bytes` of records.
    pub fn with_capacity(base_timestamp: i64, records_bytes: usize) -> Self {
        let mut out = Vec::with_capacity(HEADER_BYTES + records_bytes);
        out.resize(HEADER_BYTES, 0);
        Self {
            out,
            record: Vec::new(),
            base_timestamp,
            max_timestamp: i64::MIN,
            count: 0,
        }
    }

    /// Appends one record.
    pub fn push(&mut self, fields: RecordFields<'_>) {
        let record = &mut self.record;
        record.clear();
        record.push(0); // attributes
        varint::put(record, fields.timestamp_ms - self.base_timestamp);
        varint::put(record, self.count as i64);
        put_nullable(record, fields.key);
        put_nullable(record, fields.value);
        varint::put(record, fields.headers.len() as i64);
        for (key, value) in fields.headers {
            put_nullable(record, Some(key));
            put_nullable(record, *value);
        }
        varint::put(&mut self.out, record.len() as i64);
        self.out.extend_from_slice(record);
        self.max_timestamp = self.max_timestamp.max(fields.timestamp_ms);
        self.count += 1;
    }

    /// The finished batch, uncompressed.
    pub fn finish(self) -> Result<Vec<u8>, EncodeError> {
        self.finish_with(Compression::None)
    }

    /// The finished batch marked as a control batch (the attribute bit
    /// Kafka's transaction markers carry): consumers skip its records, so
    /// herald can keep its own bookkeeping in a partition's log.
    pub fn finish_control(self) -> Result<Vec<u8>, EncodeError> {
        let mut out = self.finish()?;
        let attributes = i16::from_be_bytes([out[ATTRIBUTES], out[ATTRIBUTES + 1]]) | CONTROL_BIT;
        out[ATTRIBUTES..ATTRIBUTES + 2].copy_from_slice(&attributes.to_be_bytes());
        refresh_crc(&mut out);
        Ok(out)
    }

    /// The finished batch, its records section compressed with `codec`.
    pub fn finish_with(self, codec: Compression) -> Result<Vec<u8>, EncodeError> {
        if self.count == 0 {
            return Err(EncodeError::Empty);
        }
        let mut out = match codec {
            Compression::None => self.out,
            codec => {
                let mut compressed = Vec::with_capacity(self.out.len() / 2 + HEADER_BYTES);
                compressed.extend_from_slice(&self.out[..HEADER_BYTES]);
                compress_into(codec, &self.out[HEADER_BYTES..], &mut compressed)?;
                compressed
            }
        };
        let count = i32::try_from(self.count).map_err(|_| EncodeError::TooLarge)?;
        let batch_length =
            i32::try_from(out.len() - LOG_OVERHEAD).map_err(|_| EncodeError::TooLarge)?;
        let mut put = |at: usize, bytes: &[u8]| out[at..at + bytes.len()].copy_from_slice(bytes);
        put(BATCH_LENGTH, &batch_length.to_be_bytes());
        put(PARTITION_LEADER_EPOCH, &(-1i32).to_be_bytes());
        put(MAGIC, &[2]);
        put(ATTRIBUTES, &i16::from(codec.id()).to_be_bytes());
        put(LAST_OFFSET_DELTA, &(count - 1).to_be_bytes());
        put(BASE_TIMESTAMP, &self.base_timestamp.to_be_bytes());
        put(MAX_TIMESTAMP, &self.max_timestamp.to_be_bytes());
        put(PRODUCER_ID, &(-1i64).to_be_bytes());
        put(PRODUCER_EPOCH, &(-1i16).to_be_bytes());
        put(BASE_SEQUENCE, &(-1i32).to_be_bytes());
        put(RECORDS_COUNT, &count.to_be_bytes());
        refresh_crc(&mut out);
        Ok(out)
    }
}

fn put_nullable(out: &mut Vec<u8>, bytes: Option<&[u8]>) {
    match bytes {
        Some(bytes) => {
            varint::put(out, bytes.len() as i64);
            out.extend_from_slice(bytes);
        }
        None => varint::put(out, -1),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::records::first_at_or_after;
    use crate::validate::validate;

    #[test]
    fn a_built_batch_validates_and_reports_its_records() {
        let mut builder = BatchBuilder::new(1_000);
        for delta in 0..3 {
            builder.push(RecordFields {
                timestamp_ms: 1_000 + delta,
                key: Some(b"k"),
                value: Some(b"value"),
                headers: &[(b"h", None)],
            });
        }
        let batch = builder.finish().expect("three records");
        let header = validate(&batch).expect("valid");
        assert_eq!(header.offset_count(), 3);
        assert_eq!(header.max_timestamp(), 1_002);
        assert_eq!(header.total_bytes(), Some(batch.len()));
        assert_eq!(
            first_at_or_after(&batch, 1_001, 0, &mut Vec::new()),
            Some((1, 1_001))
        );
    }

    #[test]
    fn an_empty_batch_is_refused() {
        assert_eq!(
            BatchBuilder::new(0).finish().err(),
            Some(EncodeError::Empty)
        );
    }
}
