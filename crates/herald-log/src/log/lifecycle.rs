//! The log over time: periodic maintenance (rolls by age, interval
//! flushes, finalizing sealed segments, retention), truncation of the
//! log start, and closing or retiring the log.

use super::*;

impl Log {
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
        let floor = self.retention_floor.load(Ordering::Acquire);
        if offset > floor {
            return Err(TruncateError::Pinned {
                requested: offset,
                floor,
            });
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
    pub(super) fn finalize_sealed(&self, closing: bool) -> Result<(), LogError> {
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

    /// Deletes the oldest sealed segments that are past the retention time
    /// or beyond the retention size.
    pub(super) fn apply_retention(
        &self,
        now: SystemTime,
        config: &LogConfig,
    ) -> Result<(), LogError> {
        let now_ms = millis_since_epoch(now);
        loop {
            let list = self.segments.load_full();
            let [oldest, _, ..] = list.as_slice() else {
                return Ok(());
            };
            if !oldest.is_complete() || !oldest.finalized.load(Ordering::Acquire) {
                return Ok(());
            }
            let total: u64 = list.iter().map(|s| u64::from(s.committed().bytes)).sum();
            let (expired, oversized) = beyond_retention(
                oldest,
                total,
                now_ms,
                config.retention_age,
                config.retention_bytes,
            );
            let truncated = oldest.end_offset() <= self.log_start_offset();
            if !expired && !oversized && !truncated {
                return Ok(());
            }
            if !truncated && oldest.end_offset() > self.retention_floor.load(Ordering::Acquire) {
                // Pinned: kept past its retention until the pin goes.
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
            for path in removed.files() {
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

    /// Pins the records from the log start on against retention and
    /// truncation (a snapshot about to be cut) and returns that start:
    /// every record from it stays readable until the floor is raised
    /// again with [`Log::set_retention_floor`]. Lowers the floor, never
    /// raises it, so earlier pins hold too.
    pub fn pin_log_start(&self) -> u64 {
        let _running = self.maintenance.lock().unwrap_or_else(|p| p.into_inner());
        let start = self.log_start_offset();
        self.retention_floor.fetch_min(start, Ordering::AcqRel);
        start
    }

    /// Sets the first offset retention and truncation must keep (`None`:
    /// nothing is pinned), as the lowest of the pins still held; used when
    /// a pin is released.
    pub fn set_retention_floor(&self, floor: Option<u64>) {
        let _running = self.maintenance.lock().unwrap_or_else(|p| p.into_inner());
        self.retention_floor
            .store(floor.unwrap_or(NO_FLOOR), Ordering::Release);
    }

    /// The first offset retention and truncation must keep, if any.
    pub fn retention_floor(&self) -> Option<u64> {
        Some(self.retention_floor.load(Ordering::Acquire)).filter(|&f| f != NO_FLOOR)
    }

    /// Where retention with `retention_age` and `retention_bytes` would
    /// move the log start now (the base offset of the oldest segment it
    /// would keep), without moving it: for a log whose owner must delete
    /// records itself, as a replicated partition does through Raft so
    /// that every replica agrees on what was deleted. `None` when
    /// retention would delete nothing. Only whole sealed, finalized
    /// segments count, as in maintenance.
    pub fn retention_cut(
        &self,
        now: SystemTime,
        retention_age: Option<Duration>,
        retention_bytes: Option<u64>,
    ) -> Option<u64> {
        let now_ms = millis_since_epoch(now);
        let list = self.segments.load_full();
        let mut total: u64 = list.iter().map(|s| u64::from(s.committed().bytes)).sum();
        let mut cut = None;
        let floor = self.retention_floor.load(Ordering::Acquire);
        // The active (last) segment is never past retention.
        for (oldest, next) in list.iter().zip(list.iter().skip(1)) {
            if !oldest.is_complete()
                || !oldest.finalized.load(Ordering::Acquire)
                || oldest.end_offset() > floor
            {
                break;
            }
            let (expired, oversized) =
                beyond_retention(oldest, total, now_ms, retention_age, retention_bytes);
            if !expired && !oversized {
                break;
            }
            total -= u64::from(oldest.committed().bytes);
            cut = Some(next.base_offset());
        }
        cut.filter(|&cut| cut > self.log_start_offset())
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
}

/// Whether `oldest`, the log's oldest segment, is past the retention time
/// (all its records older than `age`) and whether the log without it
/// still holds at least `bytes` (of `total`).
fn beyond_retention(
    oldest: &Segment,
    total: u64,
    now_ms: i64,
    age: Option<Duration>,
    bytes: Option<u64>,
) -> (bool, bool) {
    let expired = age.is_some_and(|age| {
        oldest.max_timestamp() > i64::MIN
            && oldest.max_timestamp() < now_ms - age.as_millis() as i64
    });
    let oversized = bytes.is_some_and(|limit| total - u64::from(oldest.committed().bytes) >= limit);
    (expired, oversized)
}
