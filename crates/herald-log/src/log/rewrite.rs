//! Rewriting the log's tail, for a replicated partition whose consensus
//! decides what the log holds: dropping a suffix that a new leader does not
//! have ([`Log::truncate_after`]), and starting over, empty, at a given
//! offset ([`Log::reset`], when a follower installs a snapshot).
//!
//! Neither is on a hot path, and both need the log to have no append in
//! flight (the caller serializes them with its appends, as a Raft log's
//! single writer does). Both change the files on disk, in an order that a
//! crash at any point leaves either the old log or the new one, and then
//! reopen the directory through recovery, which already brings a
//! directory to a consistent, indexed state. Readers keep whatever they
//! hold (the old mappings live until they let go); the caller must not let
//! them read past `end_offset` meanwhile, which a replicated partition
//! guarantees by serving only what its quorum committed.

use super::*;

impl Log {
    /// Removes every batch at or after `end_offset`, which must be the
    /// start of a batch (or the high watermark: then nothing changes). The
    /// cut is on stable storage before this returns, and the next append
    /// takes `end_offset`. Offsets below the log start cannot be cut.
    pub fn truncate_after(&self, end_offset: u64) -> Result<(), RewriteError> {
        let _running = self.maintenance.lock().unwrap_or_else(|p| p.into_inner());
        self.check_rewritable()?;
        // Everything kept must be durable before the cut: the recovery
        // point written below then describes what is on disk.
        self.flush().map_err(|e| storage_error(&e))?;
        let _flushing = self.flush_lock.lock().unwrap_or_else(|p| p.into_inner());
        let high_watermark = self.high_watermark();
        if end_offset >= high_watermark {
            return Ok(());
        }
        let log_start = self.log_start_offset();
        if end_offset < log_start {
            return Err(RewriteError::BelowLogStart {
                requested: end_offset,
                log_start_offset: log_start,
            });
        }
        let list = self.segments.load_full();
        // The segment holding the cut, and where in it the cut falls.
        let Some((holder, position)) = list.iter().find_map(|segment| {
            let holds = segment.base_offset() <= end_offset && end_offset < segment.end_offset();
            holds.then(|| {
                let position = segment.position_of(end_offset, segment.committed());
                (segment, position)
            })
        }) else {
            return Err(RewriteError::NotBatchStart {
                requested: end_offset,
            });
        };
        let at_batch_start = position < holder.committed().bytes
            && holder.header_at(position).base_offset() == end_offset as i64;
        if !at_batch_start {
            return Err(RewriteError::NotBatchStart {
                requested: end_offset,
            });
        }
        let io = |op: &str, path: &Path, e: std::io::Error| {
            RewriteError::Storage(format!("{op} {}: {e}", path.display()).into())
        };
        // First the recovery point, so that a crash part-way through reads
        // what follows the cut as a torn tail, never as damaged durable
        // data.
        Checkpoint {
            recovery_point: end_offset,
            clean: false,
        }
        .write(&self.dir)
        .map_err(|e| io("write checkpoint in", &self.dir, e))?;
        // Newest first, so that a crash leaves a log that ends somewhere
        // between the cut and the old end, never one with a hole.
        for segment in list.iter().rev() {
            segment.discard_successor();
            if segment.base_offset() > end_offset {
                for path in segment.files() {
                    remove_if_present(&path).map_err(|e| io("remove", &path, e))?;
                }
            }
        }
        holder.seal();
        holder
            .file()
            .truncate(u64::from(position))
            .map_err(|e| io("truncate", holder.path(), e))?;
        // The cut segment's indexes describe bytes that are gone.
        for path in holder.side_files() {
            remove_if_present(&path).map_err(|e| io("remove", &path, e))?;
        }
        sync_dir(&self.dir).map_err(|e| io("fsync", &self.dir, e))?;
        self.reopen_files(end_offset)?;
        tracing::info!(dir = %self.dir.display(), end_offset, high_watermark, "truncated the log's tail");
        Ok(())
    }

    /// Empties the log and restarts it at `start_offset`: the next append
    /// takes that offset, and nothing below it is served. On stable storage
    /// before this returns.
    pub fn reset(&self, start_offset: u64) -> Result<(), RewriteError> {
        let _running = self.maintenance.lock().unwrap_or_else(|p| p.into_inner());
        self.check_rewritable()?;
        let _flushing = self.flush_lock.lock().unwrap_or_else(|p| p.into_inner());
        let io = |op: &str, path: &Path, e: std::io::Error| {
            RewriteError::Storage(format!("{op} {}: {e}", path.display()).into())
        };
        // Nothing is known durable while the files change: recovery after
        // a crash in between keeps whatever prefix is left, and never
        // reads a missing segment as damage.
        Checkpoint::default()
            .write(&self.dir)
            .map_err(|e| io("write checkpoint in", &self.dir, e))?;
        let list = self.segments.load_full();
        for segment in list.iter().rev() {
            segment.seal();
            segment.discard_successor();
            for path in segment.files() {
                remove_if_present(&path).map_err(|e| io("remove", &path, e))?;
            }
        }
        let config = self.config.load();
        Segment::create(
            &self.dir,
            start_offset,
            config.segment_bytes,
            config.index_interval_bytes,
            config.preallocate_bytes,
        )
        .map_err(|e| io("create segment in", &self.dir, e))?;
        LogStartFile::write(&self.dir, start_offset)
            .map_err(|e| io("write", &self.dir.join(LogStartFile::FILE), e))?;
        sync_dir(&self.dir).map_err(|e| io("fsync", &self.dir, e))?;
        self.reopen_files(start_offset)?;
        tracing::info!(dir = %self.dir.display(), start_offset, "reset the log");
        Ok(())
    }

    /// A rewrite needs an open, healthy log with no append in flight.
    fn check_rewritable(&self) -> Result<(), RewriteError> {
        if let Some(reason) = self.poison.get() {
            return Err(RewriteError::Poisoned(Arc::clone(reason)));
        }
        if self.closed.load(Ordering::Acquire) {
            return Err(RewriteError::Closed);
        }
        let active = self.active.load();
        let (reserved, _) = active.reserved();
        if active.committed() != reserved {
            return Err(RewriteError::AppendsInFlight);
        }
        Ok(())
    }

    /// Replaces the segments with what recovery finds in the directory now,
    /// and records the new end as durable (every caller synced it). Holds
    /// the maintenance and flush locks, taken by the caller.
    fn reopen_files(&self, durable_end: u64) -> Result<(), RewriteError> {
        let config = self.config.load_full();
        let storage = |e: LogError| storage_error(&e);
        let recovered = recover(&self.dir, &config).map_err(storage)?;
        let Some(last) = recovered.segments.last().cloned() else {
            return Err(RewriteError::Storage(
                "recovery left no active segment".into(),
            ));
        };
        let first_base = recovered.segments.first().map_or(0, |s| s.base_offset());
        self.segments.store(Arc::new(recovered.segments));
        self.active.store(Arc::clone(&last));
        self.visible.store(last);
        // New segments, with histories not built yet.
        self.history_indexed_to.store(0, Ordering::Relaxed);
        self.key_copies_through.store(0, Ordering::Release);
        let floor = LogStartFile::read(&self.dir).map_err(|e| {
            RewriteError::Storage(format!("reading the log start offset: {e}").into())
        })?;
        let high_watermark = self.high_watermark();
        self.log_start
            .store(first_base.max(floor.min(high_watermark)), Ordering::Release);
        self.durable
            .store(durable_end.min(high_watermark), Ordering::Release);
        self.dir_dirty.store(true, Ordering::Release);
        let checkpoint = Checkpoint {
            recovery_point: self.durable.load(Ordering::Acquire),
            clean: false,
        };
        checkpoint
            .write(&self.dir)
            .map_err(|e| RewriteError::Storage(format!("writing the checkpoint: {e}").into()))?;
        // Readers waiting past the old end re-check against the new one.
        self.data_ready.notify(usize::MAX);
        Ok(())
    }
}

fn storage_error(e: &LogError) -> RewriteError {
    match e {
        LogError::Poisoned(reason) => RewriteError::Poisoned(Arc::clone(reason)),
        other => RewriteError::Storage(other.to_string().into()),
    }
}

fn remove_if_present(path: &Path) -> std::io::Result<()> {
    match std::fs::remove_file(path) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(e),
        _ => Ok(()),
    }
}
