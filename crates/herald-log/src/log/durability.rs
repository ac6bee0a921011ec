//! What makes appends durable: flushes shared by concurrent callers (group
//! commit), the checkpoint, and poisoning, which refuses appends after a
//! write or fsync failed rather than retrying silently.

use super::*;

impl Log {
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

    pub(super) fn flush_to(&self, end: u64) -> Result<(), LogError> {
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

    pub(super) fn write_checkpoint(&self, clean: bool) -> Result<(), LogError> {
        let checkpoint = Checkpoint {
            recovery_point: self.durable.load(Ordering::Acquire),
            clean,
        };
        checkpoint
            .write(&self.dir)
            .map_err(|e| LogError::io("write checkpoint", &self.dir, e))
    }

    /// Why the log refuses appends, if it does.
    pub fn poisoned(&self) -> Option<Arc<str>> {
        self.poison.get().cloned()
    }

    pub(super) fn check_open(&self) -> Result<(), AppendError> {
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

    pub(super) fn poison(&self, reason: String) -> Arc<str> {
        let reason = Arc::clone(self.poison.get_or_init(|| reason.into()));
        if !self.poisoned.swap(true, Ordering::AcqRel) {
            tracing::error!(dir = %self.dir.display(), %reason, "log poisoned; appends refused until reopened");
        }
        self.data_ready.notify(usize::MAX);
        reason
    }
}
