//! The backends a partition can have, as one enum: calls dispatch by a
//! `match`, so the embedded log's path has no virtual call and no boxed
//! future. A new backend is one variant here and one module beside
//! `local.rs`.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::SystemTime;

use herald_log::{ConfigError, LogConfig, LogError};

use super::failed::FailedStorage;
use super::local::{LocalCompletion, LocalStorage};
use super::{
    Acks, Appended, PartitionStorage, PendingAppend, StorageError, StorageStats, StoredBatches,
    TimestampOffset, ValidBatch, Watermarks,
};

/// The storage behind one partition.
#[derive(Debug)]
pub enum Backend {
    /// The embedded lock-free log on this node.
    Local(LocalStorage),
    /// Storage that failed to open; refuses every call with the reason.
    Failed(FailedStorage),
    /// One replica of a partition replicated by Raft.
    #[cfg(feature = "cluster")]
    Raft(super::raft::RaftStorage),
    /// A replicated partition with no replica on this node.
    Elsewhere(super::elsewhere::ElsewhereStorage),
    /// A relay's copy of an upstream partition.
    Mirror(super::mirror::MirrorStorage),
}

/// The completion of an append to any [`Backend`].
#[derive(Debug)]
pub enum BackendCompletion {
    /// Of the embedded log.
    Local(LocalCompletion),
    /// Of a failed partition (never placed, so never polled).
    Failed(std::future::Ready<Result<Appended, StorageError>>),
    /// Of a replicated partition.
    #[cfg(feature = "cluster")]
    Raft(super::raft::RaftCompletion),
    /// Of a partition held elsewhere (never placed, so never polled).
    Elsewhere(std::future::Ready<Result<Appended, StorageError>>),
    /// Of an append forwarded to a relay's upstream.
    Mirror(super::mirror::MirrorCompletion),
}

impl Future for BackendCompletion {
    type Output = Result<Appended, StorageError>;

    #[inline]
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        match self.get_mut() {
            BackendCompletion::Local(c) => Pin::new(c).poll(cx),
            BackendCompletion::Failed(c) => Pin::new(c).poll(cx),
            #[cfg(feature = "cluster")]
            BackendCompletion::Raft(c) => Pin::new(c).poll(cx),
            BackendCompletion::Elsewhere(c) => Pin::new(c).poll(cx),
            BackendCompletion::Mirror(c) => Pin::new(c).poll(cx),
        }
    }
}

impl Backend {
    /// Periodic upkeep (rolls, interval flushes, retention).
    pub(crate) fn maintain(&self, now: SystemTime) -> Result<(), LogError> {
        match self {
            Backend::Local(s) => s.maintain(now),
            Backend::Failed(_) => Ok(()),
            #[cfg(feature = "cluster")]
            Backend::Raft(s) => s.maintain(now),
            Backend::Elsewhere(_) => Ok(()),
            Backend::Mirror(s) => s.copy().maintain(now),
        }
    }

    /// Applies a topic's changed settings.
    pub(crate) fn update_config(&self, config: LogConfig) -> Result<(), ConfigError> {
        match self {
            Backend::Local(s) => s.update_config(config),
            Backend::Failed(_) => Ok(()),
            #[cfg(feature = "cluster")]
            Backend::Raft(s) => s.update_config(config),
            Backend::Elsewhere(_) => Ok(()),
            Backend::Mirror(s) => s.copy().update_config(config),
        }
    }

    /// Write caching for a replicated partition (the topic's
    /// `write.caching`); nothing for the others, whose acks=all is the
    /// leader's append under the log's flush policy.
    pub(crate) fn set_write_caching(&self, on: bool) {
        #[cfg(feature = "cluster")]
        if let Backend::Raft(s) = self {
            s.replica().set_write_caching(on);
        }
        let _ = on;
    }

    /// Flushes and closes cleanly; calls fail with [`StorageError::Closed`]
    /// afterwards.
    pub(crate) fn close(&self) -> Result<(), LogError> {
        match self {
            Backend::Local(s) => s.close(),
            Backend::Failed(_) => Ok(()),
            #[cfg(feature = "cluster")]
            Backend::Raft(s) => s.close(),
            Backend::Elsewhere(_) => Ok(()),
            Backend::Mirror(s) => s.copy().close(),
        }
    }

    /// Stops serving without a flush: the partition is being deleted.
    pub(crate) fn retire(&self) {
        match self {
            Backend::Local(s) => s.retire(),
            Backend::Failed(_) => {}
            #[cfg(feature = "cluster")]
            Backend::Raft(s) => s.replica().log().retire(),
            Backend::Elsewhere(_) => {}
            Backend::Mirror(s) => s.copy().retire(),
        }
    }
}

impl PartitionStorage for Backend {
    type Completion = BackendCompletion;

    #[inline]
    fn places_synchronously(&self) -> bool {
        match self {
            Backend::Local(s) => s.places_synchronously(),
            Backend::Failed(s) => s.places_synchronously(),
            Backend::Elsewhere(s) => s.places_synchronously(),
            Backend::Mirror(s) => s.places_synchronously(),
            #[cfg(feature = "cluster")]
            Backend::Raft(s) => s.places_synchronously(),
        }
    }

    #[inline]
    fn max_batch_bytes(&self) -> usize {
        match self {
            Backend::Local(s) => s.max_batch_bytes(),
            Backend::Failed(s) => s.max_batch_bytes(),
            Backend::Elsewhere(s) => s.max_batch_bytes(),
            Backend::Mirror(s) => s.max_batch_bytes(),
            #[cfg(feature = "cluster")]
            Backend::Raft(s) => s.max_batch_bytes(),
        }
    }

    #[inline]
    fn append(
        &self,
        batch: ValidBatch<'_>,
        acks: Acks,
    ) -> Result<PendingAppend<BackendCompletion>, StorageError> {
        match self {
            Backend::Local(s) => s.append(batch, acks).map(|p| PendingAppend {
                appended: p.appended,
                completion: BackendCompletion::Local(p.completion),
            }),
            Backend::Failed(s) => s.append(batch, acks).map(|p| PendingAppend {
                appended: p.appended,
                completion: BackendCompletion::Failed(p.completion),
            }),
            #[cfg(feature = "cluster")]
            Backend::Raft(s) => s.append(batch, acks).map(|p| PendingAppend {
                appended: p.appended,
                completion: BackendCompletion::Raft(p.completion),
            }),
            Backend::Elsewhere(s) => s.append(batch, acks).map(|p| PendingAppend {
                appended: p.appended,
                completion: BackendCompletion::Elsewhere(p.completion),
            }),
            Backend::Mirror(s) => s.append(batch, acks).map(|p| PendingAppend {
                appended: p.appended,
                completion: BackendCompletion::Mirror(p.completion),
            }),
        }
    }

    async fn read(
        &self,
        from_offset: u64,
        max_bytes: usize,
    ) -> Result<StoredBatches, StorageError> {
        match self {
            Backend::Local(s) => s.read(from_offset, max_bytes).await,
            Backend::Failed(s) => s.read(from_offset, max_bytes).await,
            Backend::Elsewhere(s) => s.read(from_offset, max_bytes).await,
            Backend::Mirror(s) => s.read(from_offset, max_bytes).await,
            #[cfg(feature = "cluster")]
            Backend::Raft(s) => s.read(from_offset, max_bytes).await,
        }
    }

    async fn offset_for_timestamp(
        &self,
        timestamp: i64,
    ) -> Result<Option<TimestampOffset>, StorageError> {
        match self {
            Backend::Local(s) => s.offset_for_timestamp(timestamp).await,
            Backend::Failed(s) => s.offset_for_timestamp(timestamp).await,
            Backend::Elsewhere(s) => s.offset_for_timestamp(timestamp).await,
            Backend::Mirror(s) => s.offset_for_timestamp(timestamp).await,
            #[cfg(feature = "cluster")]
            Backend::Raft(s) => s.offset_for_timestamp(timestamp).await,
        }
    }

    async fn max_timestamp(&self) -> Result<Option<TimestampOffset>, StorageError> {
        match self {
            Backend::Local(s) => s.max_timestamp().await,
            Backend::Failed(s) => s.max_timestamp().await,
            Backend::Elsewhere(s) => s.max_timestamp().await,
            Backend::Mirror(s) => s.max_timestamp().await,
            #[cfg(feature = "cluster")]
            Backend::Raft(s) => s.max_timestamp().await,
        }
    }

    async fn wait_for_data(&self, offset: u64) {
        match self {
            Backend::Local(s) => s.wait_for_data(offset).await,
            Backend::Failed(s) => s.wait_for_data(offset).await,
            Backend::Elsewhere(s) => s.wait_for_data(offset).await,
            Backend::Mirror(s) => s.wait_for_data(offset).await,
            #[cfg(feature = "cluster")]
            Backend::Raft(s) => s.wait_for_data(offset).await,
        }
    }

    async fn truncate_before(&self, offset: u64) -> Result<u64, StorageError> {
        match self {
            Backend::Local(s) => s.truncate_before(offset).await,
            Backend::Failed(s) => s.truncate_before(offset).await,
            Backend::Elsewhere(s) => s.truncate_before(offset).await,
            Backend::Mirror(s) => s.truncate_before(offset).await,
            #[cfg(feature = "cluster")]
            Backend::Raft(s) => s.truncate_before(offset).await,
        }
    }

    fn watermarks(&self) -> Watermarks {
        match self {
            Backend::Local(s) => s.watermarks(),
            Backend::Failed(s) => s.watermarks(),
            Backend::Elsewhere(s) => s.watermarks(),
            Backend::Mirror(s) => s.watermarks(),
            #[cfg(feature = "cluster")]
            Backend::Raft(s) => s.watermarks(),
        }
    }

    #[inline]
    fn log_start_offset(&self) -> u64 {
        match self {
            Backend::Local(s) => s.log_start_offset(),
            Backend::Failed(s) => s.log_start_offset(),
            Backend::Elsewhere(s) => s.log_start_offset(),
            Backend::Mirror(s) => s.log_start_offset(),
            #[cfg(feature = "cluster")]
            Backend::Raft(s) => s.log_start_offset(),
        }
    }

    fn stats(&self) -> StorageStats {
        match self {
            Backend::Local(s) => s.stats(),
            Backend::Failed(s) => s.stats(),
            Backend::Elsewhere(s) => s.stats(),
            Backend::Mirror(s) => s.stats(),
            #[cfg(feature = "cluster")]
            Backend::Raft(s) => s.stats(),
        }
    }

    fn failure(&self) -> Option<Arc<str>> {
        match self {
            Backend::Local(s) => s.failure(),
            Backend::Failed(s) => s.failure(),
            Backend::Elsewhere(s) => s.failure(),
            Backend::Mirror(s) => s.failure(),
            #[cfg(feature = "cluster")]
            Backend::Raft(s) => s.failure(),
        }
    }
}
