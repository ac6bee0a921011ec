//! The one error type of the harness.

use std::path::PathBuf;

/// Why a benchmark run failed. Timings never fail a run; these are the
/// conditions that make a measurement meaningless or impossible.
#[derive(Debug, thiserror::Error)]
pub enum BenchError {
    /// A file-system call failed (scratch directory, output files).
    #[error("{op} {path}: {source}")]
    Io {
        /// What was being done.
        op: &'static str,
        /// The path concerned.
        path: PathBuf,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// herald's log refused to open or close.
    #[error("herald log: {0}")]
    Log(#[from] herald_log::LogError),
    /// herald's log refused an append.
    #[error("herald append: {0}")]
    Append(#[from] herald_log::AppendError),
    /// herald's log refused a read.
    #[error("herald read: {0}")]
    Read(#[from] herald_log::ReadError),
    /// A pre-built batch did not validate (a harness bug).
    #[error("invalid batch: {0}")]
    Batch(#[from] herald_log::BatchError),
    /// The mutex baseline's preallocated buffer is full (sizes are planned so
    /// this cannot happen; it means a planning bug).
    #[error("mutex log buffer full: {needed} bytes needed, {capacity} capacity")]
    BaselineFull {
        /// Bytes the append needed in total.
        needed: usize,
        /// Capacity of the buffer.
        capacity: usize,
    },
    /// A read returned more bytes than the subscriber's buffer holds.
    #[error("fetch of {len} bytes exceeds the {capacity}-byte subscriber buffer")]
    FetchTooLarge {
        /// Bytes returned.
        len: usize,
        /// Buffer size.
        capacity: usize,
    },
    /// A read returned no bytes below the end of the partition.
    #[error("read at offset {offset} returned nothing below the end {end}")]
    ReadStalled {
        /// Offset asked for.
        offset: u64,
        /// End of the partition.
        end: u64,
    },
    /// A setting is out of its bounds.
    #[error("invalid setting {name}: {reason}")]
    Setting {
        /// The option.
        name: &'static str,
        /// What is wrong.
        reason: String,
    },
    /// A worker thread could not be started.
    #[error("cannot start a benchmark thread: {0}")]
    Spawn(#[source] std::io::Error),
    /// A worker thread panicked.
    #[error("a benchmark thread panicked")]
    WorkerPanicked,
    /// The chart could not be drawn.
    #[error("chart: {0}")]
    Chart(#[from] crate::figure::FigureError),
}

impl BenchError {
    /// An I/O error on `path` while doing `op`.
    pub fn io(op: &'static str, path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        BenchError::Io {
            op,
            path: path.into(),
            source,
        }
    }
}
