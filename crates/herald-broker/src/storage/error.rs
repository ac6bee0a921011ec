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
    /// The partition is closed (its topic deleted, or the broker stopping).
    #[error("partition is closed")]
    Closed,
}
