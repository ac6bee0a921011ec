//! The append path: validate, reserve, copy, publish, and the roll to the
//! next segment, which is part of the reservation protocol. No lock is
//! taken; the only wait is the optional flush of `EveryAppend`.

use super::*;

impl Log {
    /// Appends one record batch (RecordBatch v2, exactly filling `batch`).
    ///
    /// The batch is validated, given the next offsets, copied once into the
    /// segment and published; no lock is taken. Returns once the batch is
    /// written, or with [`FlushPolicy::EveryAppend`] once it and everything
    /// before it is on stable storage.
    pub fn append(&self, batch: &[u8]) -> Result<Appended, AppendError> {
        // The size limit first, so an oversized batch costs no CRC.
        self.check_size(batch.len())?;
        self.append_valid(ValidBatch::new(batch)?)
    }

    /// The largest batch accepted, in bytes (`max_batch_bytes` of the
    /// config in force).
    pub fn max_batch_bytes(&self) -> usize {
        self.max_batch_bytes.load(Ordering::Relaxed) as usize
    }

    pub(super) fn check_size(&self, size: usize) -> Result<(), AppendError> {
        let max = self.max_batch_bytes.load(Ordering::Relaxed) as usize;
        if size > max {
            return Err(AppendError::TooLarge { size, max });
        }
        Ok(())
    }

    /// Appends a batch the caller has already validated; otherwise the same
    /// as [`Log::append`].
    pub fn append_valid(&self, valid: ValidBatch<'_>) -> Result<Appended, AppendError> {
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
    pub fn append_unflushed(&self, valid: ValidBatch<'_>) -> Result<Appended, AppendError> {
        self.append_in_epoch(valid, 0)
    }

    /// Appends a validated batch stamped with `leader_epoch` (the batch's
    /// partitionLeaderEpoch, outside its CRC): a replicated partition
    /// records there the term of the leader that appended it. Otherwise
    /// the same as [`Log::append_unflushed`].
    pub fn append_in_epoch(
        &self,
        valid: ValidBatch<'_>,
        leader_epoch: i32,
    ) -> Result<Appended, AppendError> {
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
                        return self.fill(segment, start, batch, max_timestamp, leader_epoch)
                    }
                    Reservation::Sealed { end } => self.roll(segment, end)?,
                }
            };
            rolled = Some(next);
        }
    }

    /// Writes a reserved batch and completes the append.
    pub(super) fn fill(
        &self,
        segment: &Segment,
        start: Extent,
        batch: &[u8],
        max_timestamp: i64,
        leader_epoch: i32,
    ) -> Result<Appended, AppendError> {
        let end = u64::from(start.bytes) + batch.len() as u64;
        if let Err(e) = segment.file().ensure_allocated(end) {
            // The range is reserved and cannot be given back: every later
            // batch would sit behind a hole. Refuse appends until reopened.
            let reason = format!("allocating {}: {e}", segment.path().display());
            return Err(AppendError::Poisoned(self.poison(reason)));
        }
        if segment.write(start, batch, max_timestamp, leader_epoch) {
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
        let header = BatchHeader::parse(batch).expect("validated");
        Ok(Appended {
            base_offset,
            last_offset: base_offset + u64::from(header.offset_count()) - 1,
            max_timestamp,
        })
    }

    /// Moves past a sealed segment: returns its successor, creating and
    /// installing it if no other writer has yet.
    pub(super) fn roll(
        &self,
        sealed: &Arc<Segment>,
        end: Extent,
    ) -> Result<Arc<Segment>, AppendError> {
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
    pub(super) fn publish_segment(&self, segment: &Arc<Segment>) {
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
}
