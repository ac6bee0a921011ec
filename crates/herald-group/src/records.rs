//! Durable records: every change of coordinator state that must survive a
//! restart, in a small versioned binary encoding.
//!
//! The broker appends each [`Record`] as one record value of an internal
//! partition of herald's log (the role `__consumer_offsets` plays in Kafka),
//! fsyncs, and only then reports the append back to the coordinator; at start
//! the partition is read from the beginning and every record is handed to
//! [`crate::GroupCoordinator::replay`].
//!
//! # Encoding
//!
//! ```text
//! u8  format version (1)
//! u8  record type: 1 OffsetCommitted, 2 OffsetDeleted, 3 GroupDeleted
//! fields, big-endian; strings as int16 length + UTF-8 (Kafka STRING)
//!   OffsetCommitted: group, topic, i32 partition, i64 offset,
//!                    i32 leader epoch (-1 for none), string metadata,
//!                    i64 commit timestamp (Unix ms)
//!   OffsetDeleted:   group, topic, i32 partition
//!   GroupDeleted:    group
//! ```
//!
//! There is no checksum here on purpose: the records live inside Kafka
//! RecordBatch v2 batches, whose CRC32C the log checks on every recovery and
//! which cut off a torn tail, so a second checksum would only repeat that
//! check. Decoding is still strict (bounds, UTF-8, no trailing bytes) so a bug
//! that writes garbage is reported, not replayed.
//!
//! Group membership is not recorded: after a restart every group comes back
//! Empty with its offsets, and members rejoin (their heartbeats answer
//! UNKNOWN_MEMBER_ID), which is what a Kafka coordinator fail-over looks like
//! to clients too.

use crate::wire::{DecodeError, Reader, Writer};

/// The format version written by [`Record::encode`].
pub const RECORD_FORMAT_VERSION: u8 = 1;

const TYPE_OFFSET_COMMITTED: u8 = 1;
const TYPE_OFFSET_DELETED: u8 = 2;
const TYPE_GROUP_DELETED: u8 = 3;

/// One durable change of coordinator state.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Record {
    /// An offset was committed for a partition.
    OffsetCommitted {
        /// The group.
        group_id: String,
        /// The topic.
        topic: String,
        /// The partition index.
        partition: i32,
        /// The committed offset (the next record the group will read).
        offset: i64,
        /// The leader epoch the client saw, if it sent one.
        leader_epoch: Option<i32>,
        /// The client's metadata string ("" when it sent null).
        metadata: String,
        /// When the coordinator accepted the commit, Unix milliseconds.
        commit_timestamp_ms: i64,
    },
    /// The committed offset of a partition was deleted (OffsetDelete or
    /// expiration).
    OffsetDeleted {
        /// The group.
        group_id: String,
        /// The topic.
        topic: String,
        /// The partition index.
        partition: i32,
    },
    /// The group and all its offsets were deleted (DeleteGroups).
    GroupDeleted {
        /// The group.
        group_id: String,
    },
}

impl Record {
    /// The group this record belongs to.
    pub fn group_id(&self) -> &str {
        match self {
            Record::OffsetCommitted { group_id, .. }
            | Record::OffsetDeleted { group_id, .. }
            | Record::GroupDeleted { group_id } => group_id,
        }
    }

    /// Encodes the record (see the module documentation for the layout).
    pub fn encode(&self) -> Vec<u8> {
        let mut writer = Writer::new();
        writer.u8(RECORD_FORMAT_VERSION);
        match self {
            Record::OffsetCommitted {
                group_id,
                topic,
                partition,
                offset,
                leader_epoch,
                metadata,
                commit_timestamp_ms,
            } => {
                writer.u8(TYPE_OFFSET_COMMITTED);
                writer.string(group_id);
                writer.string(topic);
                writer.i32(*partition);
                writer.i64(*offset);
                writer.i32(leader_epoch.unwrap_or(-1));
                writer.string(metadata);
                writer.i64(*commit_timestamp_ms);
            }
            Record::OffsetDeleted {
                group_id,
                topic,
                partition,
            } => {
                writer.u8(TYPE_OFFSET_DELETED);
                writer.string(group_id);
                writer.string(topic);
                writer.i32(*partition);
            }
            Record::GroupDeleted { group_id } => {
                writer.u8(TYPE_GROUP_DELETED);
                writer.string(group_id);
            }
        }
        writer.out
    }

    /// Decodes a record written by [`Record::encode`]; never panics.
    pub fn decode(input: &[u8]) -> Result<Record, DecodeError> {
        let mut reader = Reader::new(input);
        let version = reader.u8()?;
        if version != RECORD_FORMAT_VERSION {
            return Err(DecodeError::UnsupportedVersion {
                found: i16::from(version),
            });
        }
        let record = match reader.u8()? {
            TYPE_OFFSET_COMMITTED => {
                let group_id = reader.string()?;
                let topic = reader.string()?;
                let partition = reader.i32()?;
                let offset = reader.i64()?;
                let leader_epoch = Some(reader.i32()?).filter(|epoch| *epoch >= 0);
                let metadata = reader.string()?;
                let commit_timestamp_ms = reader.i64()?;
                Record::OffsetCommitted {
                    group_id,
                    topic,
                    partition,
                    offset,
                    leader_epoch,
                    metadata,
                    commit_timestamp_ms,
                }
            }
            TYPE_OFFSET_DELETED => Record::OffsetDeleted {
                group_id: reader.string()?,
                topic: reader.string()?,
                partition: reader.i32()?,
            },
            TYPE_GROUP_DELETED => Record::GroupDeleted {
                group_id: reader.string()?,
            },
            found => return Err(DecodeError::UnknownRecordType { found }),
        };
        reader.finish()?;
        Ok(record)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn committed() -> Record {
        Record::OffsetCommitted {
            group_id: "g".into(),
            topic: "orders".into(),
            partition: 3,
            offset: 42,
            leader_epoch: Some(5),
            metadata: "meta".into(),
            commit_timestamp_ms: 1_700_000_000_000,
        }
    }

    #[test]
    fn every_record_type_round_trips() {
        let records = [
            committed(),
            Record::OffsetCommitted {
                group_id: "g".into(),
                topic: "t".into(),
                partition: 0,
                offset: 0,
                leader_epoch: None,
                metadata: String::new(),
                commit_timestamp_ms: 0,
            },
            Record::OffsetDeleted {
                group_id: "g".into(),
                topic: "t".into(),
                partition: 1,
            },
            Record::GroupDeleted {
                group_id: "g".into(),
            },
        ];
        for record in records {
            assert_eq!(Record::decode(&record.encode()), Ok(record));
        }
    }

    #[test]
    fn encoding_is_stable() {
        let bytes = Record::GroupDeleted {
            group_id: "ab".into(),
        }
        .encode();
        assert_eq!(bytes, vec![1, 3, 0, 2, b'a', b'b']);
    }

    #[test]
    fn refuses_an_unknown_format_version() {
        let mut bytes = committed().encode();
        bytes[0] = 2;
        assert_eq!(
            Record::decode(&bytes),
            Err(DecodeError::UnsupportedVersion { found: 2 })
        );
    }

    #[test]
    fn refuses_an_unknown_record_type() {
        assert_eq!(
            Record::decode(&[1, 9]),
            Err(DecodeError::UnknownRecordType { found: 9 })
        );
    }

    #[test]
    fn refuses_trailing_bytes() {
        let mut bytes = committed().encode();
        bytes.push(0);
        assert_eq!(
            Record::decode(&bytes),
            Err(DecodeError::TrailingBytes { extra: 1 })
        );
    }

    #[test]
    fn refuses_every_truncation() {
        let bytes = committed().encode();
        for cut in 0..bytes.len() {
            assert!(Record::decode(&bytes[..cut]).is_err(), "cut at {cut}");
        }
    }

    proptest! {
        #[test]
        fn decoding_arbitrary_bytes_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..128)) {
            let _ = Record::decode(&bytes);
        }
    }
}
