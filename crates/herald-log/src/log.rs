//! The partition log: a chain of segments with one lock-free append path,
//! zero-copy reads, durability and retention.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use arc_swap::ArcSwap;
use bytes::Bytes;
use event_listener::{Event, Listener};

use crate::batch;
use crate::config::{FlushPolicy, LogConfig};
use crate::error::{AppendError, ConfigError, LogError, ReadError, TruncateError};
use crate::extent::Extent;
use crate::file_region::FileRegion;
use crate::flush_stats::{FlushStats, FlushStatsSnapshot};
use crate::persist::{sync_dir, Checkpoint, IndexFile, LogStartFile};
use crate::recovery::{recover, RecoveryReport};
use crate::reserve::Reservation;
use crate::segment::Segment;
use crate::sync::{AtomicBool, AtomicU32, AtomicU64, AtomicU8, Ordering};

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
}

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
            flush_stats: Box::new(FlushStats::new()),
            poison: OnceLock::new(),
            poisoned: AtomicBool::new(false),
            closed: AtomicBool::new(false),
            recovery: recovered.report,
            log_start: AtomicU64::new(first_base),
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

    /// Appends one record batch (RecordBatch v2, exactly filling `batch`).
    ///
    /// The batch is validated, given the next offsets, copied once into the
    /// segment and published; no lock is taken. Returns once the batch is
    /// written, or with [`FlushPolicy::EveryAppend`] once it and everything
    /// before it is on stable storage.
    pub fn append(&self, batch: &[u8]) -> Result<Appended, AppendError> {
        // The size limit first, so an oversized batch costs no CRC.
        self.check_size(batch.len())?;
        self.append_valid(batch::ValidBatch::new(batch)?)
    }

    /// The largest batch accepted, in bytes (`max_batch_bytes` of the
    /// config in force).
    pub fn max_batch_bytes(&self) -> usize {
        self.max_batch_bytes.load(Ordering::Relaxed) as usize
    }

    fn check_size(&self, size: usize) -> Result<(), AppendError> {
        let max = self.max_batch_bytes.load(Ordering::Relaxed) as usize;
        if size > max {
            return Err(AppendError::TooLarge { size, max });
        }
        Ok(())
    }

    /// Appends a batch the caller has already validated; otherwise the same
    /// as [`Log::append`].
    pub fn append_valid(&self, valid: batch::ValidBatch<'_>) -> Result<Appended, AppendError> {
        let appended = self.append_unflushed(valid)?;
        if self.flushes_every_append() {
            self.flush_through(appended.last_offset + 1)?;
        }
        Ok(appended)
    }

    /// True if the flush policy asks that every append be on stable storage
    /// before it is acknowledged ([`FlushPolicy::EveryAppend`]).
    pub fn flushes_every_append(&self) -> bool {
        self.flush_policy.load(Ordering::Relaxed) == POLICY_EVERY_APPEND
    }

    /// Appends a validated batch and returns once it is written, whatever
    /// the flush policy: the caller that must wait for durability calls
    /// [`Log::flush_through`] afterwards (on a thread that may block), so
    /// the write itself never waits for an fsync.
    pub fn append_unflushed(&self, valid: batch::ValidBatch<'_>) -> Result<Appended, AppendError> {
        self.check_open()?;
        let (batch, header) = (valid.bytes(), valid.header());
        self.check_size(batch.len())?;
        let (len, records, max_timestamp) = (
            batch.len() as u32,
            header.offset_count(),
            header.max_timestamp(),
        );
        let guard = self.active.load();
        let mut rolled: Option<Arc<Segment>> = None;
        loop {
            let next = {
                let segment = rolled.as_ref().unwrap_or(&guard);
                // Allocate before reserving where possible: a full disk then
                // fails this append cleanly instead of leaving a hole.
                let (reserved, _) = segment.reserved();
                let end_guess = u64::from(reserved.bytes) + u64::from(len);
                if end_guess <= segment.file().map_len() as u64 {
                    segment.file().ensure_allocated(end_guess).map_err(|e| {
                        AppendError::Storage(format!("{}: {e}", segment.path().display()).into())
                    })?;
                }
                segment.maybe_provision(end_guess);
                match segment.reserve(len, records) {
                    Reservation::Reserved { start } => {
                        return self.fill(segment, start, batch, max_timestamp)
                    }
                    Reservation::Sealed { end } => self.roll(segment, end)?,
                }
            };
            rolled = Some(next);
        }
    }

    /// Writes a reserved batch and completes the append.
    fn fill(
        &self,
        segment: &Segment,
        start: Extent,
        batch: &[u8],
        max_timestamp: i64,
    ) -> Result<Appended, AppendError> {
        let end = u64::from(start.bytes) + batch.len() as u64;
        if let Err(e) = segment.file().ensure_allocated(end) {
            // The range is reserved and cannot be given back: every later
            // batch would sit behind a hole. Refuse appends until reopened.
            let reason = format!("allocating {}: {e}", segment.path().display());
            return Err(AppendError::Poisoned(self.poison(reason)));
        }
        if segment.write(start, batch, max_timestamp, 0) {
            // The SeqCst compare-and-swap that moved the tail orders this
            // notification after the data, so the extra fence of `notify` is
            // not needed (event-listener documents this use).
            self.data_ready.notify_relaxed(usize::MAX);
        }
        if segment.is_damaged() {
            // The committed tail stopped at a damaged header, so this batch
            // may never become visible: refuse it, and every later append,
            // until a reopen recovers the log from disk.
            let reason = format!(
                "{}: a completed batch has a damaged header",
                segment.path().display()
            );
            return Err(AppendError::Poisoned(self.poison(reason)));
        }
        let base_offset = segment.base_offset() + u64::from(start.records);
        let header = batch::BatchHeader::parse(batch).expect("validated");
        Ok(Appended {
            base_offset,
            last_offset: base_offset + u64::from(header.offset_count()) - 1,
            max_timestamp,
        })
    }

    /// Moves past a sealed segment: returns its successor, creating and
    /// installing it if no other writer has yet.
    fn roll(&self, sealed: &Arc<Segment>, end: Extent) -> Result<Arc<Segment>, AppendError> {
        let next = match sealed.next().or_else(|| sealed.await_successor()) {
            Some(next) => next,
            None => {
                self.check_open()?;
                let base = sealed.base_offset() + u64::from(end.records);
                let candidate = match sealed.take_successor(&self.dir, base) {
                    Some(prepared) => prepared,
                    None => {
                        let config = self.config.load();
                        // Writers may race to here; they open the same file
                        // (never truncating it) and only one candidate is
                        // installed.
                        Segment::create(
                            &self.dir,
                            base,
                            config.segment_bytes,
                            config.index_interval_bytes,
                            config.preallocate_bytes,
                        )
                        .map_err(|e| {
                            AppendError::Storage(format!("creating segment {base}: {e}").into())
                        })?
                    }
                };
                self.dir_dirty.store(true, Ordering::Release);
                sealed.install_next(Arc::new(candidate))
            }
        };
        self.publish_segment(&next);
        self.active.compare_and_swap(sealed, Arc::clone(&next));
        Ok(next)
    }

    /// Adds a new segment to the readers' list, once.
    fn publish_segment(&self, segment: &Arc<Segment>) {
        let listed = |list: &Vec<Arc<Segment>>| {
            list.last()
                .is_some_and(|s| s.base_offset() >= segment.base_offset())
        };
        if listed(&self.segments.load()) {
            return;
        }
        self.segments.rcu(|list| {
            let mut list = Vec::clone(list);
            if !listed(&list) {
                list.push(Arc::clone(segment));
            }
            list
        });
    }

    /// The next offset to become visible: every offset below it is readable,
    /// and no batch at or above it is.
    pub fn high_watermark(&self) -> u64 {
        let mut guard = self.visible.load();
        loop {
            let segment = &*guard;
            let committed = segment.committed();
            let (reserved, sealed) = segment.reserved();
            if sealed && committed == reserved {
                if let Some(next) = segment.next() {
                    self.visible.compare_and_swap(segment, next);
                    guard = self.visible.load();
                    continue;
                }
            }
            return segment.base_offset() + u64::from(committed.records);
        }
    }

    /// First offset readers may read: the first segment's base offset, or
    /// a later offset set by [`Log::truncate_before`].
    pub fn log_start_offset(&self) -> u64 {
        self.log_start.load(Ordering::Acquire)
    }

    /// The log start as seen with `list`, a segment list loaded by the
    /// caller: retention may have dropped a segment that `log_start` does
    /// not reflect yet.
    fn start_of(&self, list: &[Arc<Segment>]) -> u64 {
        let first = list.first().map_or(0, |s| s.base_offset());
        self.log_start_offset().max(first)
    }

    /// Moves the log start offset up to `offset` (Kafka's DeleteRecords):
    /// records below it are no longer served, and segments wholly below it
    /// are deleted by the next maintenance. The new start is on stable
    /// storage before this returns. Returns the log start offset after the
    /// call, which is never lowered; an offset past the high watermark is
    /// refused.
    pub fn truncate_before(&self, offset: u64) -> Result<u64, TruncateError> {
        let _running = self.maintenance.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(reason) = self.poison.get() {
            return Err(TruncateError::Poisoned(Arc::clone(reason)));
        }
        if self.closed.load(Ordering::Acquire) {
            return Err(TruncateError::Closed);
        }
        let high_watermark = self.high_watermark();
        if offset > high_watermark {
            return Err(TruncateError::OffsetOutOfRange {
                requested: offset,
                high_watermark,
            });
        }
        let current = self.log_start_offset();
        if offset <= current {
            return Ok(current);
        }
        LogStartFile::write(&self.dir, offset).map_err(|e| {
            TruncateError::Storage(
                format!(
                    "writing {}: {e}",
                    self.dir.join(LogStartFile::FILE).display()
                )
                .into(),
            )
        })?;
        self.log_start.fetch_max(offset, Ordering::AcqRel);
        Ok(self.log_start_offset())
    }

    /// Reads whole committed batches starting with the one that holds
    /// `from_offset`, up to `max_bytes` (but always one batch, however large).
    /// Reading at the high watermark returns an empty slice.
    pub fn read(&self, from_offset: u64, max_bytes: usize) -> Result<ReadSlice, ReadError> {
        let high_watermark = self.high_watermark();
        let list = self.segments.load();
        let log_start_offset = self.start_of(&list);
        let empty = |next_offset| ReadSlice {
            bytes: Bytes::new(),
            region: None,
            next_offset,
            high_watermark,
            log_start_offset,
        };
        if from_offset < log_start_offset || from_offset > high_watermark {
            return Err(ReadError::OffsetOutOfRange {
                requested: from_offset,
                log_start_offset,
                high_watermark,
            });
        }
        if from_offset == high_watermark {
            return Ok(empty(from_offset));
        }
        let index = list.partition_point(|s| s.base_offset() <= from_offset) - 1;
        let segment = &list[index];
        let committed = segment.committed();
        let start = segment.position_of(from_offset, committed);
        if start >= committed.bytes {
            return Ok(empty(from_offset));
        }
        let end = segment.end_within(start, max_bytes, committed);
        if end == start {
            // Only a damaged header stops a walk before its first batch.
            return Ok(empty(from_offset));
        }
        let bytes = segment.bytes(start, end);
        let next_offset = if end >= committed.bytes {
            segment.base_offset() + u64::from(committed.records)
        } else if let Some((header, _)) = segment.batch_within(end, committed.bytes) {
            header.base_offset() as u64
        } else {
            // The walk stopped at a damaged header: what follows is the
            // offset after the last whole batch returned.
            batch::batches(&bytes)
                .map_while(Result::ok)
                .filter_map(batch::BatchHeader::parse)
                .last()
                .map_or(from_offset, |h| h.last_offset() as u64 + 1)
        };
        Ok(ReadSlice {
            bytes,
            region: Some(segment.region(start, end)),
            next_offset,
            high_watermark,
            log_start_offset,
        })
    }

    fn stopped(&self) -> bool {
        self.closed.load(Ordering::Acquire) || self.poisoned.load(Ordering::Acquire)
    }

    /// Resolves once the high watermark is above `offset`, or the log is
    /// closed or poisoned. Runtime-agnostic: wrap it in a timeout for a
    /// long-poll.
    pub async fn wait_for_data(&self, offset: u64) {
        loop {
            if self.high_watermark() > offset || self.stopped() {
                return;
            }
            let listener = self.data_ready.listen();
            // Re-check after registering, so a notification between the first
            // check and `listen` is not missed.
            if self.high_watermark() > offset || self.stopped() {
                return;
            }
            listener.await;
        }
    }

    /// Blocks until the high watermark is above `offset` or `timeout`
    /// passes; returns whether data arrived.
    pub fn wait_for_data_blocking(&self, offset: u64, timeout: Duration) -> bool {
        let deadline = Instant::now() + timeout;
        loop {
            if self.high_watermark() > offset {
                return true;
            }
            if self.stopped() {
                return false;
            }
            let listener = self.data_ready.listen();
            if self.high_watermark() > offset {
                return true;
            }
            if listener.wait_deadline(deadline).is_none() {
                return self.high_watermark() > offset;
            }
        }
    }

    /// Offset and timestamp of the first record whose timestamp is at least
    /// `timestamp`; `None` if there is none. For a compressed batch the
    /// batch's first offset is returned.
    pub fn offset_for_timestamp(&self, timestamp: i64) -> Option<TimestampOffset> {
        let high_watermark = self.high_watermark();
        let list = self.segments.load();
        let start = self.start_of(&list);
        for segment in list.iter() {
            if segment.base_offset() >= high_watermark {
                break;
            }
            if segment.max_timestamp() < timestamp || segment.end_offset() <= start {
                continue;
            }
            let committed = segment.committed();
            let Some(bucket) = segment
                .index()
                .first_bucket_reaching(timestamp, committed.bytes)
            else {
                continue;
            };
            let mut position = segment.index().entry(bucket).bytes;
            while let Some((header, len)) = segment.batch_within(position, committed.bytes) {
                let above_start = header.last_offset() >= start as i64;
                if above_start && header.max_timestamp() >= timestamp {
                    let bytes = segment.bytes(position, position + len);
                    let (offset, ts) = batch::first_record_at_or_after(&bytes, timestamp)
                        .unwrap_or((header.base_offset(), header.max_timestamp()));
                    // A batch that straddles the log start may hold the
                    // match below it; the first readable offset answers.
                    return Some(TimestampOffset {
                        offset: (offset as u64).max(start),
                        timestamp: ts,
                    });
                }
                position += len;
            }
            if position < committed.bytes {
                // The walk stopped at a damaged header: a later segment's
                // answer could skip the records behind it.
                return None;
            }
        }
        None
    }

    /// The record with the largest timestamp (the first such, if several).
    pub fn max_timestamp(&self) -> Option<TimestampOffset> {
        let high_watermark = self.high_watermark();
        let list = self.segments.load();
        let segment = list
            .iter()
            .filter(|s| s.base_offset() < high_watermark && s.max_timestamp() > i64::MIN)
            .max_by_key(|s| (s.max_timestamp(), std::cmp::Reverse(s.base_offset())))?;
        let committed = segment.committed();
        let (bucket, max) = segment.index().max_timestamp_within(committed.bytes)?;
        let mut position = segment.index().entry(bucket).bytes;
        while let Some((header, len)) = segment.batch_within(position, committed.bytes) {
            if header.max_timestamp() == max {
                let bytes = segment.bytes(position, position + len);
                let offset = batch::first_record_at_or_after(&bytes, max)
                    .map_or(header.last_offset(), |(offset, _)| offset);
                return Some(TimestampOffset {
                    offset: offset as u64,
                    timestamp: max,
                });
            }
            position += len;
        }
        None
    }

    /// Forces everything visible to stable storage.
    pub fn flush(&self) -> Result<(), LogError> {
        self.flush_to(self.high_watermark())
    }

    /// Blocks until every offset below `end` is visible and on stable
    /// storage, sharing one fsync with every concurrent caller (group
    /// commit). An append that cannot become durable poisons the log.
    pub fn flush_through(&self, end: u64) -> Result<(), AppendError> {
        while self.high_watermark() < end {
            if let Some(reason) = self.poison.get() {
                return Err(AppendError::Poisoned(Arc::clone(reason)));
            }
            self.wait_for_data_blocking(end - 1, Duration::from_millis(100));
        }
        if self.durable.load(Ordering::Acquire) >= end {
            return Ok(());
        }
        self.flush_to(end).map_err(|e| match e {
            LogError::Poisoned(reason) => AppendError::Poisoned(reason),
            other => AppendError::Poisoned(self.poison(other.to_string())),
        })
    }

    fn flush_to(&self, end: u64) -> Result<(), LogError> {
        let mut last_flush = self.flush_lock.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(reason) = self.poison.get() {
            return Err(LogError::Poisoned(Arc::clone(reason)));
        }
        let from = self.durable.load(Ordering::Acquire);
        if from >= end && from > 0 {
            return Ok(());
        }
        // Everyone who arrived while the previous fsync ran is covered by
        // this one: flush as far as is visible now, not just to `end`.
        let target = self.high_watermark().max(end);
        // Timed here, under the flush lock: only flushes pay for the clock.
        let started = Instant::now();
        let mut synced = false;
        for segment in self.segments.load().iter() {
            let covers = segment.base_offset() <= target && segment.end_offset() >= from;
            if covers {
                if let Err(e) = segment.file().sync() {
                    let reason = format!("fsync {}: {e}", segment.path().display());
                    return Err(LogError::Poisoned(self.poison(reason)));
                }
                synced = true;
            }
        }
        if self.dir_dirty.swap(false, Ordering::AcqRel) {
            if let Err(e) = sync_dir(&self.dir) {
                let reason = format!("fsync {}: {e}", self.dir.display());
                return Err(LogError::Poisoned(self.poison(reason)));
            }
            synced = true;
        }
        if synced {
            let elapsed = started.elapsed();
            self.flush_stats.record(elapsed);
            FlushStats::global().record(elapsed);
        }
        self.durable.fetch_max(target, Ordering::AcqRel);
        *last_flush = Instant::now();
        Ok(())
    }

    /// Periodic housekeeping; call about once a second. Rolls an old active
    /// segment, flushes on the configured interval, finalizes sealed
    /// segments (trimmed, indexed on disk, checkpointed) and applies
    /// retention.
    pub fn maintain(&self, now: SystemTime) -> Result<(), LogError> {
        let _running = self.maintenance.lock().unwrap_or_else(|p| p.into_inner());
        if self.stopped() {
            return match self.poison.get() {
                Some(reason) => Err(LogError::Poisoned(Arc::clone(reason))),
                None => Ok(()),
            };
        }
        let config = self.config.load_full();
        if let Some(age) = config.segment_age {
            let active = self.active.load_full();
            let old = active
                .created_at()
                .checked_add(age)
                .is_some_and(|due| due <= now);
            if old && active.committed().bytes > 0 && active.next().is_none() {
                let end = active.seal();
                if let Err(e) = self.roll(&active, end) {
                    tracing::warn!(dir = %self.dir.display(), error = %e, "segment roll by age failed");
                }
            }
        }
        if let FlushPolicy::Interval(every) = config.flush {
            let due = self
                .flush_lock
                .lock()
                .map(|last| last.elapsed() >= every)
                .unwrap_or(true);
            if due {
                self.flush()?;
            }
        }
        self.finalize_sealed(false)?;
        self.apply_retention(now, &config)
    }

    /// Trims, indexes on disk and syncs every complete sealed segment (all of
    /// them, the active one too, when `closing`), then checkpoints.
    fn finalize_sealed(&self, closing: bool) -> Result<(), LogError> {
        let list = self.segments.load_full();
        let last = list.len().saturating_sub(1);
        let mut finalized_any = false;
        for (i, segment) in list.iter().enumerate() {
            if (i == last && !closing)
                || segment.finalized.load(Ordering::Acquire)
                || !segment.is_complete()
            {
                continue;
            }
            self.flush_to(segment.end_offset())?;
            let end = segment.committed();
            let io = |op| {
                let path = segment.path().to_owned();
                move |source| LogError::io(op, path, source)
            };
            if segment.file().file_len().map_err(io("stat"))? > u64::from(end.bytes) {
                segment
                    .file()
                    .truncate(u64::from(end.bytes))
                    .map_err(io("truncate"))?;
            }
            let (entries, max_timestamps) = segment.index().export(end.bytes);
            IndexFile {
                base_offset: segment.base_offset(),
                end,
                interval_bytes: segment.index().interval_bytes(),
                entries,
                max_timestamps,
            }
            .write(&segment.index_path())
            .map_err(io("write index"))?;
            segment.finalized.store(true, Ordering::Release);
            finalized_any = true;
        }
        if finalized_any && !closing {
            self.write_checkpoint(false)?;
        }
        Ok(())
    }

    fn write_checkpoint(&self, clean: bool) -> Result<(), LogError> {
        let checkpoint = Checkpoint {
            recovery_point: self.durable.load(Ordering::Acquire),
            clean,
        };
        checkpoint
            .write(&self.dir)
            .map_err(|e| LogError::io("write checkpoint", &self.dir, e))
    }

    /// Deletes the oldest sealed segments that are past the retention time
    /// or beyond the retention size.
    fn apply_retention(&self, now: SystemTime, config: &LogConfig) -> Result<(), LogError> {
        let now_ms = millis_since_epoch(now);
        loop {
            let list = self.segments.load_full();
            let [oldest, _, ..] = list.as_slice() else {
                return Ok(());
            };
            if !oldest.is_complete() || !oldest.finalized.load(Ordering::Acquire) {
                return Ok(());
            }
            let expired = config.retention_age.is_some_and(|age| {
                oldest.max_timestamp() > i64::MIN
                    && oldest.max_timestamp() < now_ms - age.as_millis() as i64
            });
            let total: u64 = list.iter().map(|s| u64::from(s.committed().bytes)).sum();
            let oversized = config
                .retention_bytes
                .is_some_and(|limit| total - u64::from(oldest.committed().bytes) >= limit);
            let truncated = oldest.end_offset() <= self.log_start_offset();
            if !expired && !oversized && !truncated {
                return Ok(());
            }
            let removed = Arc::clone(oldest);
            self.segments.rcu(|list| {
                let mut list = Vec::clone(list);
                if list.first().is_some_and(|s| Arc::ptr_eq(s, &removed)) {
                    list.remove(0);
                }
                list
            });
            if let Some(first) = self.segments.load().first() {
                self.log_start
                    .fetch_max(first.base_offset(), Ordering::AcqRel);
            }
            // Readers still holding bytes of the segment keep its mapping;
            // unlinking only frees the disk space once they let go.
            for path in [removed.path().to_owned(), removed.index_path()] {
                if let Err(e) = std::fs::remove_file(&path) {
                    if e.kind() != std::io::ErrorKind::NotFound {
                        return Err(LogError::io("delete", path, e));
                    }
                }
            }
            sync_dir(&self.dir).map_err(|e| LogError::io("fsync", &self.dir, e))?;
            tracing::info!(segment = %removed.path().display(), expired, oversized, truncated, "deleted segment by retention");
        }
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
        self.config.store(Arc::new(config));
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

    /// Closes the log cleanly: no more appends, everything flushed, indexes
    /// written, and the checkpoint marked clean so the next open need not
    /// scan. Appends in progress are given a moment to finish.
    pub fn close(&self) -> Result<(), LogError> {
        if self.closed.swap(true, Ordering::AcqRel) {
            return Ok(());
        }
        // No maintenance runs alongside the final flush and checkpoint.
        let _maintenance = self.maintenance.lock().unwrap_or_else(|p| p.into_inner());
        self.data_ready.notify(usize::MAX);
        let active = self.active.load_full();
        active.seal();
        active.discard_successor();
        let deadline = Instant::now() + Duration::from_secs(5);
        while !active.is_complete() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(1));
        }
        if let Some(reason) = self.poison.get() {
            return Err(LogError::Poisoned(Arc::clone(reason)));
        }
        self.flush()?;
        self.finalize_sealed(true)?;
        self.write_checkpoint(active.is_complete())
    }

    /// Stops appends and wakes waiting readers, without flushing or writing
    /// a checkpoint: for a log whose files are about to be removed, where a
    /// flush would only spend time (an `fsync` of all its data on a disk)
    /// on bytes nobody will read. In-flight appends end with an error or
    /// land in the removed files; either way nothing waits for them. Returns
    /// once no maintenance run is in progress, so the caller may move or
    /// reuse the directory.
    pub fn retire(&self) {
        if self.closed.swap(true, Ordering::AcqRel) {
            return;
        }
        self.data_ready.notify(usize::MAX);
        let active = self.active.load_full();
        active.seal();
        active.discard_successor();
        // Waits out a maintenance run already past its `stopped` check.
        drop(self.maintenance.lock());
    }

    /// True once closed.
    pub fn is_closed(&self) -> bool {
        self.closed.load(Ordering::Acquire)
    }

    /// Why the log refuses appends, if it does.
    pub fn poisoned(&self) -> Option<Arc<str>> {
        self.poison.get().cloned()
    }

    fn check_open(&self) -> Result<(), AppendError> {
        if self.poisoned.load(Ordering::Acquire) {
            if let Some(reason) = self.poison.get() {
                return Err(AppendError::Poisoned(Arc::clone(reason)));
            }
        }
        if self.closed.load(Ordering::Acquire) {
            return Err(AppendError::Closed);
        }
        Ok(())
    }

    fn poison(&self, reason: String) -> Arc<str> {
        let reason = Arc::clone(self.poison.get_or_init(|| reason.into()));
        if !self.poisoned.swap(true, Ordering::AcqRel) {
            tracing::error!(dir = %self.dir.display(), %reason, "log poisoned; appends refused until reopened");
        }
        self.data_ready.notify(usize::MAX);
        reason
    }
}
