//! The consumer protocol's embedded formats: the subscription a member sends
//! in its JoinGroup metadata and the assignment the leader hands out in
//! SyncGroup (`ConsumerProtocolSubscription` and
//! `ConsumerProtocolAssignment`, protocol type "consumer").
//!
//! The coordinator only needs the subscribed topics (to refuse OffsetDelete
//! on a topic the group consumes and to keep those offsets from expiring);
//! the rest is parsed so that describe commands can show it.
//!
//! Versions newer than 3 are read as version 3 and any bytes after the known
//! fields are ignored, as the Java client does, so a newer client's metadata
//! still yields its topics.

use crate::wire::{DecodeError, Reader, Writer};

/// The newest subscription version this parser knows field by field.
pub const SUBSCRIPTION_VERSION_MAX: i16 = 3;

/// The partitions of one topic, as listed in owned or assigned partitions.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TopicPartitions {
    /// The topic name.
    pub topic: String,
    /// Partition indexes.
    pub partitions: Vec<i32>,
}

/// A decoded `ConsumerProtocolSubscription`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Subscription {
    /// The version field as sent (may exceed [`SUBSCRIPTION_VERSION_MAX`]).
    pub version: i16,
    /// Subscribed topic names.
    pub topics: Vec<String>,
    /// Assignor-specific bytes; `None` when sent as null.
    pub user_data: Option<Vec<u8>>,
    /// Partitions the member owns now (v1+; empty before).
    pub owned_partitions: Vec<TopicPartitions>,
    /// The generation the member last took part in (v2+; -1 before).
    pub generation_id: i32,
    /// The member's rack (v3+).
    pub rack_id: Option<String>,
}

/// A decoded `ConsumerProtocolAssignment`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Assignment {
    /// The version field as sent.
    pub version: i16,
    /// Partitions assigned to the member.
    pub assigned_partitions: Vec<TopicPartitions>,
    /// Assignor-specific bytes.
    pub user_data: Option<Vec<u8>>,
}

/// Smallest encoded topic name: the int16 length of an empty string.
const STRING_BYTES_MIN: usize = 2;
/// Smallest encoded topic-partitions entry: a name and an empty array.
const TOPIC_PARTITIONS_BYTES_MIN: usize = STRING_BYTES_MIN + 4;

fn read_version(reader: &mut Reader<'_>) -> Result<i16, DecodeError> {
    let version = reader.i16()?;
    if version < 0 {
        return Err(DecodeError::UnsupportedVersion { found: version });
    }
    Ok(version)
}

fn read_topic_partitions(reader: &mut Reader<'_>) -> Result<Vec<TopicPartitions>, DecodeError> {
    let count = reader.array_len(TOPIC_PARTITIONS_BYTES_MIN)?;
    let mut out = Vec::with_capacity(count);
    for _ in 0..count {
        let topic = reader.string()?;
        let partition_count = reader.array_len(4)?;
        let mut partitions = Vec::with_capacity(partition_count);
        for _ in 0..partition_count {
            partitions.push(reader.i32()?);
        }
        out.push(TopicPartitions { topic, partitions });
    }
    Ok(out)
}

fn write_topic_partitions(writer: &mut Writer, entries: &[TopicPartitions]) {
    writer.i32(len_i32(entries.len()));
    for entry in entries {
        writer.string(&entry.topic);
        writer.i32(len_i32(entry.partitions.len()));
        for partition in &entry.partitions {
            writer.i32(*partition);
        }
    }
}

fn len_i32(len: usize) -> i32 {
    i32::try_from(len).unwrap_or(i32::MAX)
}

impl Subscription {
    /// Decodes a subscription; never panics, whatever the input.
    pub fn decode(input: &[u8]) -> Result<Subscription, DecodeError> {
        let mut reader = Reader::new(input);
        let version = read_version(&mut reader)?;
        let topic_count = reader.array_len(STRING_BYTES_MIN)?;
        let mut topics = Vec::with_capacity(topic_count);
        for _ in 0..topic_count {
            topics.push(reader.string()?);
        }
        let user_data = reader.nullable_bytes()?.map(<[u8]>::to_vec);
        let owned_partitions = if version >= 1 {
            read_topic_partitions(&mut reader)?
        } else {
            Vec::new()
        };
        let generation_id = if version >= 2 { reader.i32()? } else { -1 };
        let rack_id = if version >= 3 {
            reader.nullable_string()?
        } else {
            None
        };
        Ok(Subscription {
            version,
            topics,
            user_data,
            owned_partitions,
            generation_id,
            rack_id,
        })
    }

    /// Encodes the subscription at `self.version` (capped at
    /// [`SUBSCRIPTION_VERSION_MAX`]); used by tests and tools.
    pub fn encode(&self) -> Vec<u8> {
        let version = self.version.clamp(0, SUBSCRIPTION_VERSION_MAX);
        let mut writer = Writer::new();
        writer.i16(version);
        writer.i32(len_i32(self.topics.len()));
        for topic in &self.topics {
            writer.string(topic);
        }
        writer.nullable_bytes(self.user_data.as_deref());
        if version >= 1 {
            write_topic_partitions(&mut writer, &self.owned_partitions);
        }
        if version >= 2 {
            writer.i32(self.generation_id);
        }
        if version >= 3 {
            writer.nullable_string(self.rack_id.as_deref());
        }
        writer.out
    }
}

impl Assignment {
    /// Decodes an assignment; never panics, whatever the input.
    pub fn decode(input: &[u8]) -> Result<Assignment, DecodeError> {
        let mut reader = Reader::new(input);
        let version = read_version(&mut reader)?;
        let assigned_partitions = read_topic_partitions(&mut reader)?;
        let user_data = reader.nullable_bytes()?.map(<[u8]>::to_vec);
        Ok(Assignment {
            version,
            assigned_partitions,
            user_data,
        })
    }

    /// Encodes the assignment; used by tests and tools.
    pub fn encode(&self) -> Vec<u8> {
        let mut writer = Writer::new();
        writer.i16(self.version.max(0));
        write_topic_partitions(&mut writer, &self.assigned_partitions);
        writer.nullable_bytes(self.user_data.as_deref());
        writer.out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn sample(version: i16) -> Subscription {
        Subscription {
            version,
            topics: vec!["orders".into(), "payments".into()],
            user_data: Some(vec![1, 2, 3]),
            owned_partitions: if version >= 1 {
                vec![TopicPartitions {
                    topic: "orders".into(),
                    partitions: vec![0, 2],
                }]
            } else {
                Vec::new()
            },
            generation_id: if version >= 2 { 7 } else { -1 },
            rack_id: if version >= 3 {
                Some("rack-a".into())
            } else {
                None
            },
        }
    }

    #[test]
    fn decodes_every_known_version() {
        for version in 0..=SUBSCRIPTION_VERSION_MAX {
            let subscription = sample(version);
            assert_eq!(
                Subscription::decode(&subscription.encode()),
                Ok(subscription)
            );
        }
    }

    #[test]
    fn decodes_version_0_bytes_written_by_hand() {
        // version 0, one topic "t", null user data
        let bytes = [0, 0, 0, 0, 0, 1, 0, 1, b't', 0xff, 0xff, 0xff, 0xff];
        let subscription = Subscription::decode(&bytes).expect("valid");
        assert_eq!(subscription.topics, vec!["t".to_string()]);
        assert_eq!(subscription.user_data, None);
        assert_eq!(subscription.generation_id, -1);
    }

    #[test]
    fn reads_a_newer_version_as_the_newest_known_and_ignores_extra_bytes() {
        let mut bytes = sample(3).encode();
        bytes[1] = 9; // version 9
        bytes.extend_from_slice(&[0xde, 0xad]);
        let subscription = Subscription::decode(&bytes).expect("valid");
        assert_eq!(subscription.version, 9);
        assert_eq!(subscription.rack_id.as_deref(), Some("rack-a"));
    }

    #[test]
    fn refuses_a_negative_version() {
        assert_eq!(
            Subscription::decode(&[0xff, 0xff]),
            Err(DecodeError::UnsupportedVersion { found: -1 })
        );
    }

    #[test]
    fn refuses_a_topic_count_larger_than_the_input() {
        // version 0, topic count 2^31-1 with nothing behind it
        let bytes = [0, 0, 0x7f, 0xff, 0xff, 0xff];
        assert!(matches!(
            Subscription::decode(&bytes),
            Err(DecodeError::Truncated { offset: 6, .. })
        ));
    }

    #[test]
    fn refuses_a_truncated_owned_partitions_array() {
        let bytes = sample(1).encode();
        let cut = &bytes[..bytes.len() - 2];
        assert!(matches!(
            Subscription::decode(cut),
            Err(DecodeError::Truncated { .. })
        ));
    }

    #[test]
    fn refuses_invalid_utf8_in_a_topic() {
        let bytes = [0, 0, 0, 0, 0, 1, 0, 1, 0xff, 0xff, 0xff, 0xff, 0xff];
        assert_eq!(
            Subscription::decode(&bytes),
            Err(DecodeError::InvalidUtf8 { offset: 8 })
        );
    }

    #[test]
    fn assignment_round_trips() {
        let assignment = Assignment {
            version: 1,
            assigned_partitions: vec![TopicPartitions {
                topic: "orders".into(),
                partitions: vec![1, 3, 5],
            }],
            user_data: None,
        };
        assert_eq!(Assignment::decode(&assignment.encode()), Ok(assignment));
    }

    proptest! {
        #[test]
        fn decoding_arbitrary_bytes_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..256)) {
            let _ = Subscription::decode(&bytes);
            let _ = Assignment::decode(&bytes);
        }

        #[test]
        fn decoding_mutated_valid_input_never_panics(
            version in 0i16..=3,
            flips in proptest::collection::vec((any::<usize>(), any::<u8>()), 1..8),
        ) {
            let mut bytes = sample(version).encode();
            for (position, value) in flips {
                let index = position % bytes.len();
                bytes[index] = value;
            }
            let _ = Subscription::decode(&bytes);
        }
    }
}
