//! The typed errors of the partition contract.

use std::sync::Arc;

/// Why a partition backend refused or failed a call. Front ends map these
/// to their protocol's codes in one place.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StorageError {
    /// The offset is outside what the partition serves.
    #[error("offset {requested} is out of range [{log_start_offset}, {high_watermark}]")]
    OffsetOutOfRange {
        /// Offset asked for.
        requested: u64,
        /// First offset served.
        log_start_offset: u64,
        /// Next offset to become visible.
        high_watermark: u64,
    },
    /// The batch is larger than the partition accepts; nothing was placed.
    #[error("record batch of {size} bytes exceeds max.message.bytes {max}")]
    TooLarge {
        /// Batch size.
        size: usize,
        /// The limit.
        max: usize,
    },
    /// This node does not lead the partition (a replicated backend); the
    /// client looks the leader up again and retries.
    #[error("this node is not the partition's leader")]
    NotLeader,
    /// The backend did not answer in time (a remote backend); the outcome
    /// of an append is unknown.
    #[error("the partition's storage did not answer in time")]
    TimedOut,
    /// Storage could not be prepared for the call (for example, a full
    /// disk); nothing was changed and the partition stays usable.
    #[error("cannot store: {0}")]
    Unavailable(Arc<str>),
    /// The backend failed (a failed fsync, a damaged log) and refuses every
    /// call until it is repaired; the reason says why.
    #[error("partition storage failed: {0}")]
    Failed(Arc<str>),
    /// A truncation would delete records a snapshot pins; nothing moved.
    #[error("offset {requested} is past {floor}, from which records are pinned by a snapshot")]
    Pinned {
        /// Offset asked for.
        requested: u64,
        /// First pinned offset.
        floor: u64,
    },
    /// The partition is closed (its topic deleted, or the broker stopping).
    #[error("partition is closed")]
    Closed,
    /// The node that judges an idempotent producer's batches for this
    /// partition (a relay's upstream leader) refused the batch for its
    /// producer id, epoch or sequence; the client acts on it as on the
    /// same refusal from its own broker.
    #[error("the upstream refused the producer's batch: {0}")]
    ProducerRefused(ProducerRefusal),
}

/// Why a producer's batch was refused where its producer state is kept.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum ProducerRefusal {
    /// The batch's sequence does not follow the producer's last one.
    #[error("out of order sequence")]
    OutOfOrderSequence,
    /// A retry of a batch still being stored (taken as success by Kafka's
    /// clients).
    #[error("duplicate sequence")]
    DuplicateSequence,
    /// The batch carries an epoch older than the producer's current one.
    #[error("stale producer epoch")]
    InvalidProducerEpoch,
    /// No state for this producer, and the batch does not start it.
    #[error("unknown producer id")]
    UnknownProducerId,
}
