//! A partition of a replicated topic that this node holds no replica of:
//! it keeps its place in its topic (so metadata names it, with its leader
//! elsewhere), and every data call is refused with
//! [`StorageError::NotLeader`], which sends a Kafka client to look the
//! leader up again. It knows the topic's batch size limit, which a write
//! forwarded to the leader (a push publish) is checked against here: the
//! leader's Raft log takes a forwarded batch without checking it again.

use std::future::{ready, Future};
use std::sync::Arc;

use super::{
    Acks, Appended, PartitionStorage, PendingAppend, StorageError, StorageStats, StoredBatches,
    TimestampOffset, ValidBatch, Watermarks,
};

/// No replica here; refuses every call with [`StorageError::NotLeader`].
#[derive(Debug, Clone, Copy)]
pub struct ElsewhereStorage {
    max_batch_bytes: usize,
}

impl ElsewhereStorage {
    /// A partition held elsewhere whose replicas take batches of at most
    /// `max_batch_bytes` (its topic's `max.message.bytes`).
    pub fn new(max_batch_bytes: usize) -> Self {
        Self { max_batch_bytes }
    }
}

impl PartitionStorage for ElsewhereStorage {
    type Completion = std::future::Ready<Result<Appended, StorageError>>;

    fn max_batch_bytes(&self) -> usize {
        self.max_batch_bytes
    }

    fn append(
        &self,
        _batch: ValidBatch<'_>,
        _acks: Acks,
    ) -> Result<PendingAppend<Self::Completion>, StorageError> {
        Err(StorageError::NotLeader)
    }

    async fn read(&self, _from: u64, _max_bytes: usize) -> Result<StoredBatches, StorageError> {
        Err(StorageError::NotLeader)
    }

    async fn offset_for_timestamp(
        &self,
        _timestamp: i64,
    ) -> Result<Option<TimestampOffset>, StorageError> {
        Err(StorageError::NotLeader)
    }

    async fn max_timestamp(&self) -> Result<Option<TimestampOffset>, StorageError> {
        Err(StorageError::NotLeader)
    }

    fn wait_for_data(&self, _offset: u64) -> impl Future<Output = ()> + Send {
        ready(())
    }

    async fn truncate_before(&self, _offset: u64) -> Result<u64, StorageError> {
        Err(StorageError::NotLeader)
    }

    fn watermarks(&self) -> Watermarks {
        Watermarks::default()
    }

    fn log_start_offset(&self) -> u64 {
        0
    }

    fn stats(&self) -> StorageStats {
        StorageStats::default()
    }

    fn failure(&self) -> Option<Arc<str>> {
        None
    }
}
