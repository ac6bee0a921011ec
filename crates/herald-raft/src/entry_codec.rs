//! How a Raft entry is stored in a partition's log: as one Kafka batch.
//!
//! A data entry is its record batch, verbatim. Raft's own entries (the
//! blank entry a new leader commits, and membership changes) become
//! control batches, as Kafka's KRaft stores its leader changes and voter
//! sets: Kafka consumers skip control batches, so a partition's readers
//! never see them, yet each takes one offset, keeping offsets dense and
//! identical on every replica. Their record key is Kafka's control key
//! (version, type) with types of herald's own, outside the range Kafka
//! uses; a membership's value is JSON. A DeleteRecords entry is a control
//! batch too, but a data entry to Raft: every replica applies it, moving
//! its log start.

use std::collections::{BTreeMap, BTreeSet};
use std::io;

use bytes::Bytes;
use herald_records::{BatchBuilder, BatchHeader, RecordFields};
use openraft::entry::RaftEntry;
use openraft::{BasicNode, EntryPayload};
use serde::{Deserialize, Serialize};

use crate::types::{log_id, Entry, Membership, RecordBatch};

/// Control key version herald writes.
const CONTROL_VERSION: i16 = 0;
/// Control type of a leader's blank entry.
pub const CONTROL_TYPE_RAFT_BLANK: i16 = 0x4801;
/// Control type of a membership entry.
pub const CONTROL_TYPE_RAFT_MEMBERSHIP: i16 = 0x4802;

/// Control type of a DeleteRecords entry: its value is the new log start
/// (8 bytes, big-endian), which every replica applies.
pub const CONTROL_TYPE_DELETE_RECORDS: i16 = 0x4803;

/// A membership as stored: its (joint) voter sets and every node's
/// address.
#[derive(Serialize, Deserialize)]
struct StoredMembership {
    configs: Vec<BTreeSet<u64>>,
    nodes: BTreeMap<u64, String>,
}

fn invalid(what: impl Into<String>) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, what.into())
}

/// Timestamp of Raft's own records: Kafka's "no timestamp".
const NO_TIMESTAMP: i64 = -1;

/// The batch that stores `entry` (its leader epoch not yet stamped). The
/// same entry gives the same bytes on every replica.
pub fn encode(entry: &Entry) -> io::Result<Bytes> {
    match &entry.payload {
        EntryPayload::Normal(batch) => Ok(batch.bytes().clone()),
        EntryPayload::Blank => control(CONTROL_TYPE_RAFT_BLANK, &[]),
        EntryPayload::Membership(membership) => control(
            CONTROL_TYPE_RAFT_MEMBERSHIP,
            &membership_to_json(membership)?,
        ),
    }
}

/// A control batch of herald's own `kind` holding `value`. Timestamps are
/// Kafka's "none": every replica encodes Raft's entries itself, so nothing
/// in them may differ between replicas, the clock included.
fn control(kind: i16, value: &[u8]) -> io::Result<Bytes> {
    let mut key = [0u8; 4];
    key[..2].copy_from_slice(&CONTROL_VERSION.to_be_bytes());
    key[2..].copy_from_slice(&kind.to_be_bytes());
    let mut builder = BatchBuilder::new(NO_TIMESTAMP);
    builder.push(RecordFields {
        timestamp_ms: NO_TIMESTAMP,
        key: Some(&key),
        value: Some(value),
        headers: &[],
    });
    builder
        .finish_control()
        .map(Bytes::from)
        .map_err(|e| invalid(e.to_string()))
}

/// The data entry that moves the partition's log start to `offset` on
/// every replica once committed (Kafka's DeleteRecords, replicated).
pub fn delete_records(offset: u64) -> io::Result<Bytes> {
    control(CONTROL_TYPE_DELETE_RECORDS, &offset.to_be_bytes())
}

/// The log start a DeleteRecords entry's `batch` asks for; `None` for any
/// other batch.
pub fn deleted_before(batch: &[u8]) -> Option<u64> {
    let header = BatchHeader::parse(batch)?;
    if !header.is_control() {
        return None;
    }
    match control_record(batch) {
        Ok((CONTROL_TYPE_DELETE_RECORDS, value)) => {
            Some(u64::from_be_bytes(value.get(..8)?.try_into().ok()?))
        }
        _ => None,
    }
}

/// The entry stored as `batch` at Raft index `index`; its term is the
/// batch's leader epoch.
pub fn decode(batch: Bytes, index: u64) -> io::Result<Entry> {
    let header = BatchHeader::parse(&batch).ok_or_else(|| invalid("stored batch too short"))?;
    let term = u64::try_from(header.partition_leader_epoch())
        .map_err(|_| invalid("stored batch carries no leader epoch"))?;
    let log_id = log_id(term, index);
    if !header.is_control() {
        return Ok(Entry::new_normal(log_id, RecordBatch::new(batch)));
    }
    let (kind, value) = control_record(&batch)?;
    match kind {
        CONTROL_TYPE_RAFT_BLANK => Ok(Entry::new_blank(log_id)),
        CONTROL_TYPE_RAFT_MEMBERSHIP => {
            Ok(Entry::new_membership(log_id, membership_from_json(&value)?))
        }
        // Another control batch (a transaction marker) is data to Raft.
        _ => Ok(Entry::new_normal(log_id, RecordBatch::new(batch))),
    }
}

/// `membership` in the JSON herald stores it as.
pub(crate) fn membership_to_json(membership: &Membership) -> io::Result<Vec<u8>> {
    let stored = StoredMembership {
        configs: membership.get_joint_config().clone(),
        nodes: membership
            .nodes()
            .map(|(id, node)| (*id, node.addr.clone()))
            .collect(),
    };
    serde_json::to_vec(&stored).map_err(|e| invalid(e.to_string()))
}

/// A membership from the JSON herald stores it as.
pub(crate) fn membership_from_json(json: &[u8]) -> io::Result<Membership> {
    let stored: StoredMembership =
        serde_json::from_slice(json).map_err(|e| invalid(e.to_string()))?;
    let nodes: BTreeMap<u64, BasicNode> = stored
        .nodes
        .into_iter()
        .map(|(id, addr)| (id, BasicNode { addr }))
        .collect();
    Membership::new(stored.configs, nodes).map_err(|e| invalid(e.to_string()))
}

/// The type and value of a control batch's first record.
fn control_record(batch: &[u8]) -> io::Result<(i16, Vec<u8>)> {
    let parsed = herald_records::RecordBatch::new(batch).map_err(|e| invalid(e.to_string()))?;
    let mut scratch = Vec::new();
    let mut records = parsed
        .records(&mut scratch)
        .map_err(|e| invalid(e.to_string()))?;
    let record = records
        .next()
        .ok_or_else(|| invalid("control batch without a record"))?
        .map_err(|e| invalid(e.to_string()))?;
    let key = record.key.unwrap_or_default();
    if key.len() < 4 {
        return Ok((-1, Vec::new()));
    }
    let kind = i16::from_be_bytes([key[2], key[3]]);
    Ok((kind, record.value.unwrap_or_default().to_vec()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use openraft::entry::RaftPayload;

    fn round_trip(entry: Entry) -> Entry {
        let mut bytes = encode(&entry).unwrap().to_vec();
        herald_records::stamp(&mut bytes, 0, entry.log_id.leader_id.term as i32);
        decode(Bytes::from(bytes), entry.log_id.index).unwrap()
    }

    #[test]
    fn blank_and_membership_entries_come_back_as_they_went_in() {
        let blank = Entry::new_blank(log_id(7, 3));
        assert_eq!(round_trip(blank.clone()), blank);
        let nodes: BTreeMap<u64, BasicNode> = [1, 2, 3]
            .into_iter()
            .map(|id| {
                (
                    id,
                    BasicNode {
                        addr: format!("127.0.0.{id}:9093"),
                    },
                )
            })
            .collect();
        let membership = Membership::new(
            vec![BTreeSet::from([1, 2]), BTreeSet::from([1, 2, 3])],
            nodes,
        )
        .unwrap();
        let entry = Entry::new_membership(log_id(9, 11), membership);
        let back = round_trip(entry.clone());
        assert_eq!(back, entry);
        assert!(back.payload.get_membership().is_some());
    }

    #[test]
    fn a_delete_records_entry_carries_its_offset_and_nothing_else_reads_as_one() {
        let batch = delete_records(1234).unwrap();
        assert_eq!(deleted_before(&batch), Some(1234));
        assert!(BatchHeader::parse(&batch).unwrap().is_control());
        herald_records::ValidBatch::broker_written(&batch).unwrap();
        let blank = encode(&Entry::new_blank(log_id(2, 9))).unwrap();
        assert_eq!(deleted_before(&blank), None);
        let data = herald_records::testing::batch(3, b"v", 5);
        assert_eq!(deleted_before(&data), None);
    }

    #[test]
    fn a_data_entry_is_its_batch_and_kafka_readers_skip_raft_entries() {
        let batch = herald_records::testing::batch(3, b"v", 5);
        let entry = Entry::new_normal(log_id(2, 8), RecordBatch::new(Bytes::from(batch.clone())));
        assert_eq!(encode(&entry).unwrap().as_ref(), &batch[..]);
        let blank = encode(&Entry::new_blank(log_id(2, 9))).unwrap();
        let header = BatchHeader::parse(&blank).unwrap();
        assert!(
            header.is_control(),
            "consumers must skip Raft's own entries"
        );
        herald_records::ValidBatch::broker_written(&blank).unwrap();
    }
}
