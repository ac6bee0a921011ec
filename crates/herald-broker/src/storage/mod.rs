//! The partition contract: the one door through which the broker reaches a
//! partition's records, whatever stores them.
//!
//! Three backends stand behind it over time: the embedded lock-free log
//! ([`LocalStorage`], the fast path), a Raft-replicated partition, and a
//! partition kept in an existing Kafka cluster. The later two answer over a
//! network, so the contract is shaped for them: reads and lookups are
//! futures, an append says how durable it must be ([`Acks`]) and completes
//! in two steps, and errors are typed ([`StorageError`]).
//!
//! An append takes its place in the partition's order before
//! [`PartitionStorage::append`] returns, so a caller that orders appends
//! under a lock (the idempotent producer check) never holds it across an
//! await. The returned [`PendingAppend`] then completes, with the batch's
//! offsets, once the batch is as durable as asked. A backend that assigns
//! offsets at once says so ([`PartitionStorage::places_synchronously`]) and
//! gives them in [`PendingAppend::appended`]: the embedded log, where
//! placing is the lock-free write and completing is either immediate or,
//! under the every-append flush policy, a group-commit fsync on a blocking
//! thread. A replicated backend queues the batch for its leader's log
//! (whose consensus core decides the offsets) and completes once the
//! leader appended it (acks=1) or the quorum committed it (acks=all).
//!
//! Every backend runs the same conformance suite (`conformance`, behind the
//! `conformance` feature), which checks this contract and nothing of any
//! one backend.

mod backend;
#[cfg(any(test, feature = "conformance"))]
pub mod conformance;
mod elsewhere;
mod error;
mod failed;
mod local;
mod mirror;
#[cfg(feature = "cluster")]
mod raft;
mod remote_completion;

use std::future::Future;

use bytes::Bytes;

pub use backend::{Backend, BackendCompletion};
pub use elsewhere::ElsewhereStorage;
pub use error::{ProducerRefusal, StorageError};
pub use failed::FailedStorage;
pub use herald_log::{FileRegion, FlushStats, FlushStatsSnapshot, FLUSH_LATENCY_BUCKETS};
pub use herald_records::ValidBatch;
pub(crate) use local::{read_error, stored};
pub use local::{LocalCompletion, LocalStorage};
pub use mirror::{MirrorCompletion, MirrorStorage};
#[cfg(feature = "cluster")]
pub use raft::{without_retention, RaftCompletion, RaftStorage};
pub use remote_completion::RemoteCompletion;

/// How durable an append must be before it completes: Kafka's `acks`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Acks {
    /// The producer waits for nothing (acks=0); the batch is still placed.
    None,
    /// Stored by the partition's leader (acks=1).
    Leader,
    /// Stored by every in-sync replica (acks=all). On a single node this is
    /// the same as [`Acks::Leader`]; the flush policy decides fsyncs.
    All,
}

/// The offsets that bound what a partition serves.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Watermarks {
    /// First offset a reader may read.
    pub log_start_offset: u64,
    /// Next offset to become visible: every offset below it is readable,
    /// none at or above it is.
    pub high_watermark: u64,
}

/// Where an appended batch landed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Appended {
    /// Offset of the batch's first record.
    pub base_offset: u64,
    /// Offset of the batch's last record.
    pub last_offset: u64,
    /// Largest record timestamp in the batch.
    pub max_timestamp: i64,
}

/// An append in the partition's order: `completion` resolves, with where
/// the batch landed, once it is as durable as the append asked (or fails).
#[derive(Debug)]
pub struct PendingAppend<C> {
    /// Where the batch landed, when the backend places synchronously
    /// ([`PartitionStorage::places_synchronously`]); `None` otherwise.
    pub appended: Option<Appended>,
    /// Resolves once the batch is durable as asked.
    pub completion: C,
}

/// Whole batches read from a partition, with the watermarks of that read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredBatches {
    /// Whole batches as stored, none past `watermarks.high_watermark`;
    /// empty when nothing is available.
    pub bytes: Bytes,
    /// Where `bytes` lie in a local file, for `sendfile(2)`; `None` when
    /// empty or when the backend holds the bytes elsewhere.
    pub region: Option<FileRegion>,
    /// Offset following the last batch returned.
    pub next_offset: u64,
    /// The watermarks when the read was made: a response built from this
    /// read states these, so it never carries records past the high
    /// watermark it states.
    pub watermarks: Watermarks,
}

/// An offset found by timestamp, with the timestamp of its record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TimestampOffset {
    /// Offset of the record.
    pub offset: u64,
    /// Its timestamp (ms since the epoch).
    pub timestamp: i64,
}

/// What a backend reports about itself for metrics.
#[derive(Debug, Clone, Default)]
pub struct StorageStats {
    /// Bytes of records stored.
    pub size_bytes: u64,
    /// Number of segment files (or the backend's unit of storage).
    pub segment_count: usize,
    /// Flush counts and latencies, for a backend that flushes files itself.
    pub flushes: Option<FlushStatsSnapshot>,
    /// Committed records the history index has not reached yet (an
    /// embedded log; 0 for other backends, which have none).
    pub history_lag_records: u64,
    /// Bytes of key-sorted copies of sealed segments (an embedded log of a
    /// topic keeping them).
    pub key_copy_bytes: u64,
    /// Sealed segments whose key-sorted copy is not built yet.
    pub key_copy_pending_segments: u64,
}

/// The contract every partition backend honours. See the module docs for
/// the two-step append.
pub trait PartitionStorage: Send + Sync {
    /// Resolves once an append is as durable as it asked, with where it
    /// landed.
    type Completion: Future<Output = Result<Appended, StorageError>> + Send + 'static;

    /// Whether [`PartitionStorage::append`] assigns the batch's offsets
    /// before it returns ([`PendingAppend::appended`] is then set): what
    /// the idempotent producer's bookkeeping needs.
    fn places_synchronously(&self) -> bool {
        true
    }

    /// The largest batch, in bytes, that [`PartitionStorage::append`]
    /// accepts (the topic's `max.message.bytes`), so a caller can refuse a
    /// larger one before paying for its validation.
    fn max_batch_bytes(&self) -> usize;

    /// Places a validated batch in the partition's order (with its offsets
    /// when the backend places synchronously), or refuses it with nothing
    /// placed.
    fn append(
        &self,
        batch: ValidBatch<'_>,
        acks: Acks,
    ) -> Result<PendingAppend<Self::Completion>, StorageError>;

    /// Whole batches from the one holding `from_offset`, up to `max_bytes`
    /// (at least one batch, however large, if any is there). Reading at the
    /// high watermark returns nothing, or [`StorageError::Closed`] once the
    /// partition is closed (so a reader woken by
    /// [`PartitionStorage::wait_for_data`] can tell the end from new data);
    /// outside `[log start, high watermark]` is
    /// [`StorageError::OffsetOutOfRange`].
    fn read(
        &self,
        from_offset: u64,
        max_bytes: usize,
    ) -> impl Future<Output = Result<StoredBatches, StorageError>> + Send;

    /// The first record at or after the log start whose timestamp is at
    /// least `timestamp`; for a compressed batch the answer may be the
    /// batch's first offset (the caller narrows it). `None` if none.
    fn offset_for_timestamp(
        &self,
        timestamp: i64,
    ) -> impl Future<Output = Result<Option<TimestampOffset>, StorageError>> + Send;

    /// The record with the largest timestamp (the first such); `None` if
    /// the partition holds no record.
    fn max_timestamp(
        &self,
    ) -> impl Future<Output = Result<Option<TimestampOffset>, StorageError>> + Send;

    /// Resolves once the high watermark is above `offset`, or the backend
    /// stops serving (closed or failed); the caller re-checks.
    fn wait_for_data(&self, offset: u64) -> impl Future<Output = ()> + Send;

    /// Moves the log start offset up to `offset` (never down), durably
    /// before it resolves; returns the log start offset after the call.
    /// Past the high watermark is [`StorageError::OffsetOutOfRange`].
    fn truncate_before(
        &self,
        offset: u64,
    ) -> impl Future<Output = Result<u64, StorageError>> + Send;

    /// The watermarks now.
    fn watermarks(&self) -> Watermarks;

    /// The log start offset now; cheaper than [`PartitionStorage::watermarks`]
    /// where the high watermark is not needed (every produce answer states
    /// the log start).
    fn log_start_offset(&self) -> u64;

    /// Size and flush figures, for metrics.
    fn stats(&self) -> StorageStats;

    /// Why the backend refuses to serve, if it does (a failed fsync, a
    /// damaged log): requests to it fail with [`StorageError::Failed`]
    /// until an operator repairs it.
    fn failure(&self) -> Option<std::sync::Arc<str>>;
}
