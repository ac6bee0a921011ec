//! A partition whose storage could not be opened (a damaged log, an
//! unreadable file): it stays in its topic, so the rest of the broker
//! starts and serves, and every call to it fails with
//! [`StorageError::Failed`] and the reason, until an operator repairs the
//! files (or deletes the topic) and restarts the broker.

use std::future::{ready, Future};
use std::sync::Arc;

use super::{
    Acks, PartitionStorage, PendingAppend, StorageError, StorageStats, StoredBatches,
    TimestampOffset, ValidBatch, Watermarks,
};

/// Storage that failed to open; refuses every call.
#[derive(Debug, Clone)]
pub struct FailedStorage {
    reason: Arc<str>,
}

impl FailedStorage {
    /// A failed partition and why.
    pub fn new(reason: impl Into<Arc<str>>) -> Self {
        Self {
            reason: reason.into(),
        }
    }

    fn refuse<T>(&self) -> Result<T, StorageError> {
        Err(StorageError::Failed(Arc::clone(&self.reason)))
    }
}

impl PartitionStorage for FailedStorage {
    type Completion = std::future::Ready<Result<super::Appended, StorageError>>;

    fn max_batch_bytes(&self) -> usize {
        // Any size: the append is refused for its storage, not its size.
        usize::MAX
    }

    fn append(
        &self,
        _batch: ValidBatch<'_>,
        _acks: Acks,
    ) -> Result<PendingAppend<Self::Completion>, StorageError> {
        self.refuse()
    }

    async fn read(&self, _from: u64, _max_bytes: usize) -> Result<StoredBatches, StorageError> {
        self.refuse()
    }

    async fn offset_for_timestamp(
        &self,
        _timestamp: i64,
    ) -> Result<Option<TimestampOffset>, StorageError> {
        self.refuse()
    }

    async fn max_timestamp(&self) -> Result<Option<TimestampOffset>, StorageError> {
        self.refuse()
    }

    fn wait_for_data(&self, _offset: u64) -> impl Future<Output = ()> + Send {
        // It stopped serving: a waiter returns at once and re-checks.
        ready(())
    }

    async fn truncate_before(&self, _offset: u64) -> Result<u64, StorageError> {
        self.refuse()
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
        Some(Arc::clone(&self.reason))
    }
}
