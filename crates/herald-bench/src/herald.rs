//! How the benchmark opens herald's log: a fresh on-disk log in its own
//! temporary directory, configured for a throughput measurement.

use std::ops::Deref;
use std::path::Path;

use herald_log::{FlushPolicy, Log, LogConfig};
use tempfile::TempDir;

use crate::{BenchError, Settings};

/// Largest batch the benchmark appends: 65,536 records of 64-byte values
/// take about 5 MB.
const BATCH_BYTES_MAX: u32 = 8 << 20;

/// A herald log living in a temporary directory that goes away with it.
pub struct ScratchLog {
    // Field order matters: the log is dropped before its directory.
    log: Log,
    dir: TempDir,
}

impl ScratchLog {
    /// Opens an empty log in a new directory under `parent`.
    pub fn open(parent: &Path, settings: &Settings) -> Result<Self, BenchError> {
        let dir = tempfile::Builder::new()
            .prefix("herald-log-bench-")
            .tempdir_in(parent)
            .map_err(|e| BenchError::io("create a directory in", parent, e))?;
        let log = Log::open(dir.path(), config(settings))?;
        Ok(Self { log, dir })
    }

    /// Closes the log and deletes its files.
    pub fn close(self) -> Result<(), BenchError> {
        self.log.close()?;
        let Self { log, dir } = self;
        drop(log);
        let path = dir.path().to_owned();
        dir.close().map_err(|e| BenchError::io("remove", path, e))
    }
}

impl Deref for ScratchLog {
    type Target = Log;

    fn deref(&self) -> &Log {
        &self.log
    }
}

/// The configuration measured: no fsync (the seed ran Kafka on a RAM disk
/// and compares in-memory throughput), no age roll or retention that could
/// fire mid-run, and batches up to the largest the plan builds.
pub fn config(settings: &Settings) -> LogConfig {
    let defaults = LogConfig::default();
    LogConfig {
        segment_bytes: settings.segment_bytes,
        segment_age: None,
        max_batch_bytes: BATCH_BYTES_MAX.min(settings.segment_bytes),
        preallocate_bytes: settings
            .preallocate_bytes
            .unwrap_or(defaults.preallocate_bytes),
        flush: FlushPolicy::Never,
        retention_age: None,
        retention_bytes: None,
        ..defaults
    }
}
