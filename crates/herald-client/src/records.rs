//! Records as the CLI handles them (owned, printable), encoded into and
//! decoded from RecordBatch v2 with `herald-records`.

use crate::error::{ClientError, Context as _};
use herald_records::{BatchBuilder, BatchHeader, RecordBatch, RecordFields};

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
pub fn encode_batch(records: &[Record]) -> Result<Vec<u8>, ClientError> {
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

/// Decodes the records of one whole batch v2 (as `herald_records::batches`
/// yields them), any codec. Control batches yield nothing.
pub fn decode_batch(batch: &[u8]) -> Result<Vec<FetchedRecord>, ClientError> {
    let header = BatchHeader::parse(batch).context("batch shorter than its header")?;
    if header.magic() != MAGIC_V2 {
        return Err(ClientError::refused(format!(
            "record batch format v{} is not supported",
            header.magic()
        )));
    };
    if header.is_control() {
        return Ok(Vec::new());
    }
    let batch = RecordBatch::new(batch).context("batch cut short")?;
    let mut scratch = Vec::new();
    let records = batch.records(&mut scratch).with_context(|| {
        format!(
            "cannot read the batch at offset {} (codec {})",
            header.base_offset(),
            header.compression()
        )
    })?;
    records
        .map(|record| {
            let record = record?;
            let headers = record
                .headers()
                .map(|header| {
                    header.map(|(key, value)| Header {
                        key: String::from_utf8_lossy(key).into_owned(),
                        value: value.map(<[u8]>::to_vec),
                    })
                })
                .collect::<Result<_, _>>()?;
            Ok(FetchedRecord {
                offset: record.offset,
                record: Record {
                    key: record.key.map(<[u8]>::to_vec),
                    value: record.value.map(<[u8]>::to_vec),
                    headers,
                    timestamp_ms: record.timestamp,
                },
            })
        })
        .collect()
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
        let header = herald_records::validate(&batch).expect("valid batch");
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
