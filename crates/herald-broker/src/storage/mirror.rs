//! The backend of a relay's mirrored partition (see `relay`): the relay's
//! own copy of an upstream partition, read like the embedded log, written
//! only by the relay's copier. A client's append is forwarded to the
//! upstream's leader and answered with where the upstream placed it; the
//! batch then reaches this copy through the copier, at that same offset.
//!
//! Forwards leave in the order the appends were placed, one at a time per
//! partition, from one task: a connection's produce requests (and every
//! client's, interleaved as they arrived) land upstream in that order, as
//! they would in a partition of the relay's own. What waits in the queue
//! is bounded by the front ends' limits on requests in flight.

use std::future::Future;
use std::sync::Arc;

use bytes::Bytes;
use herald_log::Log;
use tokio::sync::{mpsc, oneshot};

use super::local::LocalStorage;
use super::{
    Acks, Appended, PartitionStorage, PendingAppend, StorageError, StorageStats, StoredBatches,
    TimestampOffset, ValidBatch, Watermarks,
};
use crate::relay::Upstream;

/// A relay's copy of an upstream partition.
#[derive(Debug)]
pub struct MirrorStorage {
    copy: LocalStorage,
    upstream: Arc<Upstream>,
    topic: Arc<str>,
    partition: i32,
    /// The queue of the task forwarding appends in order, started by the
    /// first append (which runs on the runtime).
    forwards: std::sync::OnceLock<mpsc::UnboundedSender<Forward>>,
}

/// One append waiting to be forwarded: the batch, its acks, and where the
/// upstream's base offset goes.
type Forward = (Bytes, Acks, oneshot::Sender<Result<i64, StorageError>>);

/// Completes an append forwarded upstream.
pub type MirrorCompletion = super::RemoteCompletion;

impl MirrorStorage {
    /// The copy `copy` of `topic`/`partition` of `upstream`.
    pub fn new(copy: LocalStorage, upstream: Arc<Upstream>, topic: &str, partition: u32) -> Self {
        Self {
            copy,
            upstream,
            topic: topic.into(),
            partition: partition as i32,
            forwards: std::sync::OnceLock::new(),
        }
    }

    /// The forwarding task's queue, starting the task on first use.
    fn forwards(&self) -> &mpsc::UnboundedSender<Forward> {
        self.forwards.get_or_init(|| {
            let (queue, mut next) = mpsc::unbounded_channel::<Forward>();
            let (upstream, topic, partition) = (
                Arc::clone(&self.upstream),
                Arc::clone(&self.topic),
                self.partition,
            );
            tokio::spawn(async move {
                while let Some((batch, acks, reply)) = next.recv().await {
                    let answer = upstream.produce(&topic, partition, batch, acks).await;
                    // A client that went away no longer waits for it.
                    let _ = reply.send(answer);
                }
            });
            queue
        })
    }

    /// The copy's log, for the copier.
    pub(crate) fn log(&self) -> Arc<Log> {
        self.copy.shared_log()
    }

    /// The local copy, for upkeep and closing.
    pub(crate) fn copy(&self) -> &LocalStorage {
        &self.copy
    }
}

impl PartitionStorage for MirrorStorage {
    type Completion = MirrorCompletion;

    fn places_synchronously(&self) -> bool {
        false
    }

    fn max_batch_bytes(&self) -> usize {
        self.copy.max_batch_bytes()
    }

    fn append(
        &self,
        batch: ValidBatch<'_>,
        acks: Acks,
    ) -> Result<PendingAppend<MirrorCompletion>, StorageError> {
        let max = self.max_batch_bytes();
        if batch.bytes().len() > max {
            return Err(StorageError::TooLarge {
                size: batch.bytes().len(),
                max,
            });
        }
        let header = batch.header();
        let (max_timestamp, last_delta) = (header.max_timestamp(), header.last_offset_delta());
        // The request's buffer is borrowed; the forward outlives it.
        let bytes = Bytes::copy_from_slice(batch.bytes());
        let (reply, answer) = oneshot::channel();
        self.forwards()
            .send((bytes, acks, reply))
            .map_err(|_| StorageError::Closed)?;
        let completion = MirrorCompletion::new(async move {
            let base = answer.await.map_err(|_| StorageError::Closed)??;
            let base_offset = u64::try_from(base).map_err(|_| {
                StorageError::Unavailable("the upstream answered a negative offset".into())
            })?;
            Ok(Appended {
                base_offset,
                last_offset: base_offset + u64::try_from(last_delta).unwrap_or(0),
                max_timestamp,
            })
        });
        Ok(PendingAppend {
            appended: None,
            completion,
        })
    }

    fn read(
        &self,
        from_offset: u64,
        max_bytes: usize,
    ) -> impl Future<Output = Result<StoredBatches, StorageError>> + Send {
        self.copy.read(from_offset, max_bytes)
    }

    fn offset_for_timestamp(
        &self,
        timestamp: i64,
    ) -> impl Future<Output = Result<Option<TimestampOffset>, StorageError>> + Send {
        self.copy.offset_for_timestamp(timestamp)
    }

    fn max_timestamp(
        &self,
    ) -> impl Future<Output = Result<Option<TimestampOffset>, StorageError>> + Send {
        self.copy.max_timestamp()
    }

    fn wait_for_data(&self, offset: u64) -> impl Future<Output = ()> + Send {
        self.copy.wait_for_data(offset)
    }

    async fn truncate_before(&self, _offset: u64) -> Result<u64, StorageError> {
        Err(StorageError::Unavailable(
            "a relay's mirrored partition follows its upstream's log start; delete records upstream"
                .into(),
        ))
    }

    fn watermarks(&self) -> Watermarks {
        self.copy.watermarks()
    }

    fn log_start_offset(&self) -> u64 {
        self.copy.log_start_offset()
    }

    fn stats(&self) -> StorageStats {
        self.copy.stats()
    }

    fn failure(&self) -> Option<Arc<str>> {
        self.copy.failure()
    }
}
