//! The partition log: a chain of segments with one lock-free append path,
//! zero-copy reads, durability and retention. This file holds the `Log`
//! itself, opening and its small accessors; each concern has a file of its
//! own: [`append`], [`read`], [`durability`], [`lifecycle`], [`rewrite`],
//! [`history`].

mod append;
mod durability;
mod history;
mod key_copy;
mod lifecycle;
mod read;
mod rewrite;

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use arc_swap::ArcSwap;
use bytes::Bytes;
use event_listener::{Event, Listener};

use herald_records::{BatchHeader, ValidBatch};

use crate::config::{FlushPolicy, LogConfig};
use crate::error::{AppendError, ConfigError, LogError, ReadError, RewriteError, TruncateError};
use crate::extent::Extent;
use crate::file_region::FileRegion;
use crate::flush_stats::{FlushStats, FlushStatsSnapshot};
use crate::persist::{sync_dir, Checkpoint, IndexFile, LogStartFile};
use crate::recovery::{recover, RecoveryReport};
use crate::reserve::Reservation;
use crate::segment::Segment;
use crate::sync::{AtomicBool, AtomicU32, AtomicU64, AtomicU8, Ordering};

pub use history::{HistoryProgress, KeyBatches};
pub use key_copy::KeyCopyStats;

/// Result of a successful append.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Appended {
    /// Offset given to the first record of the batch.
    pub base_offset: u64,
    /// Offset of the last record of the batch.
    pub last_offset: u64,
    /// Largest record timestamp in the batch.
    pub max_timestamp: i64,
}

/// Committed batches returned by [`Log::read`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReadSlice {
    /// Whole batches, as stored; empty when nothing is available. Shares the
    /// segment's memory, which stays valid while this handle lives.
    pub bytes: Bytes,
    /// Where `bytes` lie in their segment file (`None` when empty), for
    /// sending them with `sendfile(2)`.
    pub region: Option<FileRegion>,
    /// Offset following the last batch returned.
    pub next_offset: u64,
    /// The high watermark when the read was made.
    pub high_watermark: u64,
    /// First offset still stored.
    pub log_start_offset: u64,
}

/// An offset found by timestamp.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TimestampOffset {
    /// Offset of the record.
    pub offset: u64,
    /// Its timestamp.
    pub timestamp: i64,
}

const POLICY_NEVER: u8 = 0;
const POLICY_INTERVAL: u8 = 1;
const POLICY_EVERY_APPEND: u8 = 2;

fn policy_code(policy: FlushPolicy) -> u8 {
    match policy {
        FlushPolicy::Never => POLICY_NEVER,
        FlushPolicy::Interval(_) => POLICY_INTERVAL,
        FlushPolicy::EveryAppend => POLICY_EVERY_APPEND,
    }
}

/// The storage of one partition. Shared between threads as `Arc<Log>`:
/// appends from many threads proceed without a lock, and reads never block
/// them.
pub struct Log {
    dir: PathBuf,
    config: ArcSwap<LogConfig>,
    /// Hot copies of config values, read on every append.
    max_batch_bytes: AtomicU32,
    flush_policy: AtomicU8,
    /// Every live segment, oldest first: readers' map of the log.
    segments: ArcSwap<Vec<Arc<Segment>>>,
    /// Where writers append (a hint: the chain of `next` links is the truth).
    active: ArcSwap<Segment>,
    /// The oldest segment not yet complete: where the high watermark lives.
    visible: ArcSwap<Segment>,
    data_ready: Event,
    durable: AtomicU64,
    dir_dirty: AtomicBool,
    flush_lock: Mutex<Instant>,
    /// Held by `maintain` for its whole run, and taken by `close` and
    /// `retire` after they stop the log: once they return, no maintenance
    /// touches the directory (which a deleted topic's successor of the same
    /// name may already own).
    maintenance: Mutex<()>,
    /// Held while key-sorted copies are built (`build_key_copy`).
    key_copy_builder: Mutex<()>,
    /// Flush counts and latencies; boxed, so the flush path's writes stay
    /// off the cache lines appenders read.
    flush_stats: Box<FlushStats>,
    poison: OnceLock<Arc<str>>,
    poisoned: AtomicBool,
    closed: AtomicBool,
    recovery: RecoveryReport,
    /// First offset readers may read: the first segment's base offset, or
    /// the later offset a truncation asked for. Kept current by retention
    /// and truncation so that reading it (every produce answer states it)
    /// is one load, not a walk of the segment list.
    log_start: AtomicU64,
    /// The first offset retention and truncation must keep ([`NO_FLOOR`]:
    /// none): records from it on are pinned by someone reading them later
    /// (a snapshot). Changed only under `maintenance`, which retention and
    /// truncation hold, so a pin taken at the log start is never raced by
    /// a deletion already decided.
    retention_floor: AtomicU64,
    /// Every record below this offset is in the history index, as the
    /// last [`Log::index_history`] call left it.
    history_indexed_to: AtomicU64,
    /// Every complete segment ending at or below this offset has its
    /// key-sorted copy settled (made, or known not to be): the builder
    /// passes over them without a lock. Reset when segments are replaced
    /// or copies dropped.
    key_copies_through: AtomicU64,
}

/// `retention_floor` when nothing is pinned.
const NO_FLOOR: u64 = u64::MAX;

impl std::fmt::Debug for Log {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Log")
            .field("dir", &self.dir)
            .field("log_start_offset", &self.log_start_offset())
            .field("high_watermark", &self.high_watermark())
            .finish()
    }
}

fn millis_since_epoch(time: SystemTime) -> i64 {
    time.duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

impl Log {
    /// Opens the log stored in `dir` (creating it if needed), recovering from
    /// a crash: torn tails are cut, damaged indexes rebuilt, and corruption of
    /// data known durable is refused with [`LogError::Corrupt`].
    pub fn open(dir: impl AsRef<Path>, config: LogConfig) -> Result<Log, LogError> {
        config.validate()?;
        let dir = dir.as_ref().to_owned();
        let recovered = recover(&dir, &config)?;
        let segments = recovered.segments;
        let last = Arc::clone(segments.last().expect("recovery leaves an active segment"));
        let start_floor = LogStartFile::read(&dir)
            .map_err(|e| LogError::io("read", dir.join(LogStartFile::FILE), e))?;
        let first_base = segments.first().map_or(0, |s| s.base_offset());
        // The first segment that is not complete; only the last can be
        // incomplete after recovery.
        let log = Log {
            max_batch_bytes: AtomicU32::new(config.max_batch_bytes),
            flush_policy: AtomicU8::new(policy_code(config.flush)),
            config: ArcSwap::from_pointee(config),
            segments: ArcSwap::from_pointee(segments),
            active: ArcSwap::new(Arc::clone(&last)),
            visible: ArcSwap::new(Arc::clone(&last)),
            data_ready: Event::new(),
            durable: AtomicU64::new(0),
            dir_dirty: AtomicBool::new(true),
            flush_lock: Mutex::new(Instant::now()),
            maintenance: Mutex::new(()),
            key_copy_builder: Mutex::new(()),
            flush_stats: Box::new(FlushStats::new()),
            poison: OnceLock::new(),
            poisoned: AtomicBool::new(false),
            closed: AtomicBool::new(false),
            recovery: recovered.report,
            log_start: AtomicU64::new(first_base),
            retention_floor: AtomicU64::new(NO_FLOOR),
            history_indexed_to: AtomicU64::new(0),
            key_copies_through: AtomicU64::new(0),
            dir,
        };
        // Never past the high watermark: a start recovered from disk may lie
        // beyond a torn tail that recovery cut off.
        log.log_start
            .fetch_max(start_floor.min(log.high_watermark()), Ordering::AcqRel);
        // Everything recovered is on disk now; record that before appending.
        log.flush()?;
        log.write_checkpoint(false)?;
        Ok(log)
    }

    /// The directory holding this log's files.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// What opening the log found.
    pub fn recovery_report(&self) -> &RecoveryReport {
        &self.recovery
    }

    /// The configuration in force.
    pub fn config(&self) -> LogConfig {
        LogConfig::clone(&self.config.load())
    }

    /// Replaces the configuration. Size limits apply to segments created from
    /// now on; retention and flushing apply at the next maintenance.
    pub fn update_config(&self, config: LogConfig) -> Result<(), ConfigError> {
        config.validate()?;
        self.max_batch_bytes
            .store(config.max_batch_bytes, Ordering::Relaxed);
        self.flush_policy
            .store(policy_code(config.flush), Ordering::Relaxed);
        let dropped_copies = self.config.load().key_copy && !config.key_copy;
        self.config.store(Arc::new(config));
        if dropped_copies {
            self.drop_key_copies();
        }
        Ok(())
    }

    /// Bytes stored.
    pub fn size_bytes(&self) -> u64 {
        self.segments
            .load()
            .iter()
            .map(|s| u64::from(s.committed().bytes))
            .sum()
    }

    /// Number of segments.
    pub fn segment_count(&self) -> usize {
        self.segments.load().len()
    }

    /// Counts and latencies of this log's flushes since it was opened: one
    /// per flush that issued fsyncs (of the segment files it covered, and
    /// of the directory after segments were created), whatever asked for
    /// it ([`FlushPolicy::EveryAppend`], where concurrent appenders share
    /// one flush, the interval of [`Log::maintain`], a sealed segment being
    /// finalized, [`Log::flush`], opening and closing). Failed flushes,
    /// which poison the log, are not counted.
    pub fn flush_stats(&self) -> FlushStatsSnapshot {
        self.flush_stats.snapshot()
    }
}
