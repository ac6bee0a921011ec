//! The Raft type configuration of a partition: what an entry carries, who
//! the nodes are, and what applying an entry answers.

use std::fmt;

use bytes::Bytes;

/// One Kafka RecordBatch v2, whole: the application data of a Raft entry.
/// Stored in the partition's log exactly as produced, with the term of the
/// leader that appended it in its `partitionLeaderEpoch` field.
#[derive(Clone)]
pub struct RecordBatch {
    bytes: Bytes,
    /// On the leader that proposed it: told where the batch landed once
    /// the leader's log holds it (what acks=1 waits for). Never sent.
    placement: Option<PlacementTicket>,
}

impl RecordBatch {
    /// The batch `bytes`.
    pub fn new(bytes: Bytes) -> Self {
        Self {
            bytes,
            placement: None,
        }
    }

    /// The batch `bytes`, whose proposer learns through `ticket` where the
    /// leader's log placed it.
    pub fn with_ticket(bytes: Bytes, ticket: PlacementTicket) -> Self {
        Self {
            bytes,
            placement: Some(ticket),
        }
    }

    /// The batch as stored.
    pub fn bytes(&self) -> &Bytes {
        &self.bytes
    }

    /// Tells the proposer, once, where the batch landed.
    pub(crate) fn placed(&self, placed: Placed) {
        if let Some(ticket) = &self.placement {
            if let Some(tell) = ticket.0.lock().take() {
                let _ = tell.send(placed);
            }
        }
    }
}

impl PartialEq for RecordBatch {
    fn eq(&self, other: &Self) -> bool {
        self.bytes == other.bytes
    }
}

impl Eq for RecordBatch {}

/// The sending end of a placement notice: shared by the entry's copies,
/// used by the first that is appended.
#[derive(Clone)]
pub struct PlacementTicket(
    std::sync::Arc<parking_lot::Mutex<Option<tokio::sync::oneshot::Sender<Placed>>>>,
);

impl PlacementTicket {
    /// A ticket, and where its notice arrives.
    pub fn new() -> (Self, tokio::sync::oneshot::Receiver<Placed>) {
        let (tell, told) = tokio::sync::oneshot::channel();
        (
            Self(std::sync::Arc::new(parking_lot::Mutex::new(Some(tell)))),
            told,
        )
    }
}

impl fmt::Debug for RecordBatch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "RecordBatch({} bytes)", self.bytes.len())
    }
}

impl fmt::Display for RecordBatch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self, f)
    }
}

impl serde::Serialize for RecordBatch {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_bytes(&self.bytes)
    }
}

impl<'de> serde::Deserialize<'de> for RecordBatch {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct BatchBytes;
        impl serde::de::Visitor<'_> for BatchBytes {
            type Value = RecordBatch;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("the bytes of a record batch")
            }
            fn visit_bytes<E: serde::de::Error>(self, bytes: &[u8]) -> Result<RecordBatch, E> {
                Ok(RecordBatch::new(Bytes::copy_from_slice(bytes)))
            }
            fn visit_byte_buf<E: serde::de::Error>(self, bytes: Vec<u8>) -> Result<RecordBatch, E> {
                Ok(RecordBatch::new(Bytes::from(bytes)))
            }
        }
        deserializer.deserialize_bytes(BatchBytes)
    }
}

/// Where a committed data entry's records are: what an acks=all produce
/// answers once its entry is applied.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Placed {
    /// Offset of the batch's first record.
    pub base_offset: u64,
    /// Offset of its last record.
    pub last_offset: u64,
}

openraft::declare_raft_types!(
    /// A partition's Raft group: entries are record batches, node ids are
    /// herald's broker ids, and a log id names its leader by term alone
    /// (standard Raft's one leader per term), which is what the batch's
    /// 32-bit leader epoch field stores.
    pub PartitionRaft:
        D = RecordBatch,
        R = Option<Placed>,
        NodeId = u64,
        Node = openraft::BasicNode,
        Term = u64,
        LeaderId = openraft::impls::leader_id_std::LeaderId<u64, u64>,
        AsyncRuntime = crate::runtime::HeraldRuntime,
);

/// A Raft entry of a partition.
pub type Entry = openraft::alias::EntryOf<PartitionRaft>;
/// A Raft log id of a partition (term and index).
pub type LogId = openraft::alias::LogIdOf<PartitionRaft>;
/// A vote of a partition's group.
pub type Vote = openraft::alias::VoteOf<PartitionRaft>;
/// A membership of a partition's group.
pub type Membership = openraft::Membership<u64, openraft::BasicNode>;

/// The log id of `term` and `index`.
pub fn log_id(term: u64, index: u64) -> LogId {
    LogId::new(
        openraft::vote::leader_id_std::CommittedLeaderId::new(term),
        index,
    )
}
