//! Typed errors at the log's boundary.

use std::path::PathBuf;
use std::sync::Arc;

use herald_records::BatchError;

/// Why an append failed.
#[derive(Debug, Clone, thiserror::Error)]
pub enum AppendError {
    /// The batch is malformed; nothing was written.
    #[error("invalid record batch: {0}")]
    InvalidBatch(#[from] BatchError),
    /// The batch is larger than `max_batch_bytes`; nothing was written.
    #[error("record batch of {size} bytes exceeds the {max}-byte limit")]
    TooLarge {
        /// Size of the batch.
        size: usize,
        /// Configured limit.
        max: usize,
    },
    /// A write or flush failed earlier; the log refuses appends until it is
    /// reopened (which recovers it from disk).
    #[error("log is poisoned and refuses appends: {0}")]
    Poisoned(Arc<str>),
    /// Storage could not be prepared for the batch (for example, the disk is
    /// full); nothing was written and the log stays usable.
    #[error("cannot store record batch: {0}")]
    Storage(Arc<str>),
    /// The log was closed.
    #[error("log is closed")]
    Closed,
}

/// Why a read failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum ReadError {
    /// The offset is below the log start or above the high watermark.
    #[error("offset {requested} is out of range [{log_start_offset}, {high_watermark}]")]
    OffsetOutOfRange {
        /// Offset asked for.
        requested: u64,
        /// First offset still stored.
        log_start_offset: u64,
        /// Next offset to be made visible.
        high_watermark: u64,
    },
}

/// Why moving the log start offset failed.
#[derive(Debug, Clone, thiserror::Error)]
pub enum TruncateError {
    /// The offset is past the high watermark.
    #[error("offset {requested} is past the high watermark {high_watermark}")]
    OffsetOutOfRange {
        /// Offset asked for.
        requested: u64,
        /// Next offset to be made visible.
        high_watermark: u64,
    },
    /// The offset is past the retention floor: records from the floor on
    /// are pinned (by a snapshot) and must stay readable.
    #[error("offset {requested} is past {floor}, from which records are pinned")]
    Pinned {
        /// Offset asked for.
        requested: u64,
        /// First pinned offset.
        floor: u64,
    },
    /// The new start could not be made durable; the start is unchanged.
    #[error("cannot store the log start offset: {0}")]
    Storage(Arc<str>),
    /// The log is poisoned by an earlier I/O failure.
    #[error("log is poisoned: {0}")]
    Poisoned(Arc<str>),
    /// The log was closed.
    #[error("log is closed")]
    Closed,
}

/// Why cutting the log's tail or resetting it failed; the log is unchanged
/// unless the error is [`RewriteError::Storage`], after which reopening
/// the log recovers either the old tail or the new one.
#[derive(Debug, Clone, thiserror::Error)]
pub enum RewriteError {
    /// A tail cut below the log start (those records are gone already).
    #[error("offset {requested} is below the log start {log_start_offset}")]
    BelowLogStart {
        /// Offset asked for.
        requested: u64,
        /// First offset still stored.
        log_start_offset: u64,
    },
    /// A tail cut must fall between two batches.
    #[error("offset {requested} is not the first offset of a stored batch")]
    NotBatchStart {
        /// Offset asked for.
        requested: u64,
    },
    /// A rewrite of the tail found an append still being written: the
    /// caller must serialize its appends with rewrites.
    #[error("an append is in flight; the log's tail cannot be rewritten now")]
    AppendsInFlight,
    /// A file could not be changed.
    #[error("cannot rewrite the log: {0}")]
    Storage(Arc<str>),
    /// The log is poisoned by an earlier I/O failure.
    #[error("log is poisoned: {0}")]
    Poisoned(Arc<str>),
    /// The log was closed.
    #[error("log is closed")]
    Closed,
}

/// A configuration value the log cannot work with.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid log configuration: {key} = {value} {reason}")]
pub struct ConfigError {
    /// Name of the setting.
    pub key: &'static str,
    /// The refused value.
    pub value: u64,
    /// Why it is refused.
    pub reason: &'static str,
}

/// Why opening, flushing or maintaining a log failed.
#[derive(Debug, thiserror::Error)]
pub enum LogError {
    /// An operating-system call on a log file failed.
    #[error("{op} {path}: {source}")]
    Io {
        /// What was being done (`open`, `fsync`, ...).
        op: &'static str,
        /// File or directory concerned.
        path: PathBuf,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// Data that was known durable (before the recovery point) is damaged.
    /// Unlike a torn tail, this is never repaired silently.
    #[error("corrupt segment {path} at byte {position}: {reason}")]
    Corrupt {
        /// Segment file.
        path: PathBuf,
        /// Byte position of the damaged batch.
        position: u64,
        /// What is wrong.
        reason: String,
    },
    /// The configuration was refused.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// The log is poisoned by an earlier I/O failure.
    #[error("log is poisoned: {0}")]
    Poisoned(Arc<str>),
}

impl LogError {
    pub(crate) fn io(op: &'static str, path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        LogError::Io {
            op,
            path: path.into(),
            source,
        }
    }
}
