//! Record batches v2: encoding a batch of records for Produce (uncompressed,
//! CRC-32C over everything after the CRC field) and decoding the records of
//! a fetched batch. The header layout is `herald_log::batch`'s.

use anyhow::{ensure, Context as _};
use herald_log::batch::{BatchHeader, HEADER_BYTES};
use herald_log::batch_builder::{BatchBuilder, RecordFields};
use herald_log::varint;

/// The record batch format version read.
const MAGIC_V2: i8 = 2;

/// A record header.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Header {
    /// Header key.
    pub key: String,
    /// Header value (`None` is Kafka's null).
    pub value: Option<Vec<u8>>,
}

/// A record to produce, or one read back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Record {
    /// Record key (`None` is Kafka's null).
    pub key: Option<Vec<u8>>,
    /// Record value (`None` is Kafka's null).
    pub value: Option<Vec<u8>>,
    /// Headers in order.
    pub headers: Vec<Header>,
    /// Timestamp in milliseconds since the epoch.
    pub timestamp_ms: i64,
}

/// A record read from a partition.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FetchedRecord {
    /// Its offset.
    pub offset: i64,
    /// The record.
    pub record: Record,
}

/// Encodes `records` (at least one) as one uncompressed batch v2 with base
/// offset 0 (the broker assigns offsets) and no producer id.
pub fn encode_batch(records: &[Record]) -> anyhow::Result<Vec<u8>> {
    let base_timestamp = records.iter().map(|r| r.timestamp_ms).min().unwrap_or(0);
    let mut builder = BatchBuilder::new(base_timestamp);
    let mut headers = Vec::new();
    for record in records {
        headers.clear();
        headers.extend(
            record
                .headers
                .iter()
                .map(|h| (h.key.as_bytes(), h.value.as_deref())),
        );
        builder.push(RecordFields {
            timestamp_ms: record.timestamp_ms,
            key: record.key.as_deref(),
            value: record.value.as_deref(),
            headers: &headers,
        });
    }
    Ok(builder.finish()?)
}

/// Decodes the records of one whole batch v2 (as `herald_log::batch::batches`
/// yields them). Control batches yield nothing.
pub fn decode_batch(batch: &[u8]) -> anyhow::Result<Vec<FetchedRecord>> {
    let header = BatchHeader::parse(batch).context("batch shorter than its header")?;
    ensure!(
        header.magic() == MAGIC_V2,
        "record batch format v{} is not supported",
        header.magic()
    );
    let total = header
        .total_bytes()
        .filter(|total| *total <= batch.len())
        .context("batch cut short")?;
    if header.is_control() {
        return Ok(Vec::new());
    }
    let codec = header.compression();
    let data = herald_broker::records::decompress(codec, &batch[HEADER_BYTES..total])
        .with_context(|| {
            format!(
                "cannot decompress the batch at offset {} (codec {codec})",
                header.base_offset()
            )
        })?;
    let count = usize::try_from(header.records_count()).context("negative record count")?;
    let mut input: &[u8] = &data;
    // Each record takes at least 7 bytes: bound the allocation by the input.
    let mut records = Vec::with_capacity(count.min(input.len() / 7));
    for _ in 0..count {
        let length = usize::try_from(get_varint(&mut input)?).context("negative record length")?;
        ensure!(length <= input.len(), "record longer than its batch");
        let (mut body, rest) = input.split_at(length);
        input = rest;
        records.push(decode_record(&mut body, &header)?);
    }
    Ok(records)
}

fn decode_record(input: &mut &[u8], batch: &BatchHeader<'_>) -> anyhow::Result<FetchedRecord> {
    let (_attributes, rest) = input.split_first().context("record cut short")?;
    *input = rest;
    let timestamp_delta = get_varint(input)?;
    let offset_delta = get_varint(input)?;
    let key = get_bytes(input)?;
    let value = get_bytes(input)?;
    let header_count = usize::try_from(get_varint(input)?).context("negative header count")?;
    let mut headers = Vec::with_capacity(header_count.min(input.len() / 2));
    for _ in 0..header_count {
        let key = get_bytes(input)?.context("null header key")?;
        headers.push(Header {
            key: String::from_utf8_lossy(&key).into_owned(),
            value: get_bytes(input)?,
        });
    }
    let timestamp_ms = if batch.is_log_append_time() {
        batch.max_timestamp()
    } else {
        batch.base_timestamp().saturating_add(timestamp_delta)
    };
    Ok(FetchedRecord {
        offset: batch.base_offset().saturating_add(offset_delta),
        record: Record {
            key,
            value,
            headers,
            timestamp_ms,
        },
    })
}

/// Takes a zig-zag varint off the front of `input`.
fn get_varint(input: &mut &[u8]) -> anyhow::Result<i64> {
    let (value, len) = varint::get(input).context("varint cut short or longer than 10 bytes")?;
    *input = &input[len..];
    Ok(value)
}

fn get_bytes(input: &mut &[u8]) -> anyhow::Result<Option<Vec<u8>>> {
    let length = get_varint(input)?;
    if length < 0 {
        return Ok(None);
    }
    let length = usize::try_from(length).context("length out of range")?;
    ensure!(length <= input.len(), "field longer than its record");
    let (bytes, rest) = input.split_at(length);
    *input = rest;
    Ok(Some(bytes.to_vec()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(key: Option<&str>, value: &str, timestamp_ms: i64) -> Record {
        Record {
            key: key.map(|k| k.as_bytes().to_vec()),
            value: Some(value.as_bytes().to_vec()),
            headers: vec![
                Header {
                    key: "trace".into(),
                    value: Some(b"abc".to_vec()),
                },
                Header {
                    key: "empty".into(),
                    value: None,
                },
            ],
            timestamp_ms,
        }
    }

    #[test]
    fn encoded_batch_decodes_to_the_same_records() {
        let records = vec![
            record(Some("k1"), "first", 1_700_000_000_000),
            record(None, "second", 1_700_000_000_005),
            Record {
                key: Some(Vec::new()),
                value: None,
                headers: Vec::new(),
                timestamp_ms: 1_700_000_000_001,
            },
        ];
        let batch = encode_batch(&records).expect("encode");
        let decoded = decode_batch(&batch).expect("decode");
        assert_eq!(decoded.len(), 3);
        for (index, fetched) in decoded.iter().enumerate() {
            assert_eq!(fetched.offset, index as i64);
            assert_eq!(fetched.record, records[index]);
        }
    }

    #[test]
    fn encoded_batch_passes_the_logs_validation() {
        let batch = encode_batch(&[record(Some("k"), "v", 42)]).expect("encode");
        let header = herald_log::batch::validate(&batch).expect("valid batch");
        assert_eq!(header.records_count(), 1);
        assert_eq!(header.max_timestamp(), 42);
        assert_eq!(BatchHeader::compute_crc(&batch), header.crc());
    }

    #[test]
    fn decoded_offsets_follow_the_base_offset_the_broker_wrote() {
        let mut batch =
            encode_batch(&[record(None, "a", 1), record(None, "b", 2)]).expect("encode");
        batch[..8].copy_from_slice(&100i64.to_be_bytes());
        let offsets: Vec<i64> = decode_batch(&batch)
            .expect("decode")
            .iter()
            .map(|r| r.offset)
            .collect();
        assert_eq!(offsets, [100, 101]);
    }

    #[test]
    fn truncated_batch_is_an_error_not_a_panic() {
        let batch = encode_batch(&[record(Some("k"), "value", 1)]).expect("encode");
        for cut in 0..batch.len() {
            assert!(decode_batch(&batch[..cut]).is_err(), "cut at {cut}");
        }
    }

    #[test]
    fn empty_batch_is_refused() {
        assert!(encode_batch(&[]).is_err());
    }
}
