//! The read side: the high watermark (computed, never stored), the log
//! start, zero-copy reads of whole batches, waiting for data, and lookups
//! by timestamp. Readers never block writers.

use super::*;

impl Log {
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

    /// The end of every offset range reserved so far: the high watermark
    /// plus the batches being written now. Every append already
    /// acknowledged lies below it, and every append that reserves its
    /// range after this call returns lies at or above it. Once the
    /// appends in flight complete, the high watermark reaches it.
    pub fn reserved_end(&self) -> u64 {
        let mut segment = self.active.load_full();
        loop {
            let (reserved, sealed) = segment.reserved();
            if sealed {
                if let Some(next) = segment.next() {
                    segment = next;
                    continue;
                }
            }
            return segment.base_offset() + u64::from(reserved.records);
        }
    }

    /// Bytes the batches holding offsets `from..to` take, both clamped to
    /// what is stored and visible; `to` must fall between two batches (a
    /// high watermark or a cut taken with [`Log::reserved_end`]).
    pub fn bytes_between(&self, from: u64, to: u64) -> u64 {
        let to = to.min(self.high_watermark());
        let list = self.segments.load();
        let from = from.max(self.start_of(&list));
        let mut bytes = 0;
        for segment in list.iter() {
            let committed = segment.committed();
            let base = segment.base_offset();
            let end = base + u64::from(committed.records);
            if end <= from || base >= to {
                continue;
            }
            let first = segment.position_of(from.max(base), committed);
            let last = if to >= end {
                committed.bytes
            } else {
                segment.position_of(to, committed)
            };
            bytes += u64::from(last.saturating_sub(first));
        }
        bytes
    }

    /// First offset readers may read: the first segment's base offset, or
    /// a later offset set by [`Log::truncate_before`].
    pub fn log_start_offset(&self) -> u64 {
        self.log_start.load(Ordering::Acquire)
    }

    /// The log start as seen with `list`, a segment list loaded by the
    /// caller: retention may have dropped a segment that `log_start` does
    /// not reflect yet.
    pub(super) fn start_of(&self, list: &[Arc<Segment>]) -> u64 {
        let first = list.first().map_or(0, |s| s.base_offset());
        self.log_start_offset().max(first)
    }

    /// Reads whole committed batches starting with the one that holds
    /// `from_offset`, up to `max_bytes` (but always one batch, however large).
    /// Reading at the high watermark returns an empty slice.
    pub fn read(&self, from_offset: u64, max_bytes: usize) -> Result<ReadSlice, ReadError> {
        self.read_to(from_offset, max_bytes, u64::MAX)
    }

    /// [`Log::read`] with the log's end taken as `visible_end` if that is
    /// lower: what a replicated partition serves, whose readers must not
    /// see past its quorum's commit point. `visible_end` must fall between
    /// two batches (as a commit point does).
    pub fn read_visible(
        &self,
        from_offset: u64,
        max_bytes: usize,
        visible_end: u64,
    ) -> Result<ReadSlice, ReadError> {
        self.read_to(from_offset, max_bytes, visible_end)
    }

    /// [`Log::read`] that stops after the batch holding `end - 1`: for a
    /// reader that needs nothing from `end` on, where `end` may fall
    /// inside a batch. The slice's high watermark is the log's.
    pub fn read_until(
        &self,
        from_offset: u64,
        max_bytes: usize,
        end: u64,
    ) -> Result<ReadSlice, ReadError> {
        let mut slice = self.read_to(from_offset, max_bytes, u64::MAX)?;
        // Whole batches past `end` are cut off the answer.
        let keep: usize = herald_records::batches(&slice.bytes)
            .map_while(Result::ok)
            .take_while(|b| BatchHeader::parse(b).is_some_and(|h| (h.base_offset() as u64) < end))
            .map(<[u8]>::len)
            .sum();
        if keep < slice.bytes.len() {
            let rest = slice.bytes.slice(keep..);
            slice.next_offset = BatchHeader::parse(&rest).map_or(end, |h| h.base_offset() as u64);
            slice.bytes.truncate(keep);
            slice.region = slice.region.map(|r| r.prefix(keep));
        }
        Ok(slice)
    }

    fn read_to(
        &self,
        from_offset: u64,
        max_bytes: usize,
        visible_end: u64,
    ) -> Result<ReadSlice, ReadError> {
        let high_watermark = self.high_watermark().min(visible_end);
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
        let mut committed = segment.committed();
        let segment_end = segment.base_offset() + u64::from(committed.records);
        if segment_end > high_watermark {
            // The visible end lies inside this segment: read as if the
            // segment ended there.
            let position = segment.position_of(high_watermark, committed);
            committed = Extent::new((high_watermark - segment.base_offset()) as u32, position);
        }
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
            herald_records::batches(&bytes)
                .map_while(Result::ok)
                .filter_map(BatchHeader::parse)
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

    pub(super) fn stopped(&self) -> bool {
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
        self.offset_for_timestamp_from(timestamp, 0)
    }

    /// [`Log::offset_for_timestamp`] among the records at `from` and
    /// after (and past the log start): for an owner whose readers start
    /// further than the log does (a replicated partition's DeleteRecords
    /// not yet purged).
    pub fn offset_for_timestamp_from(&self, timestamp: i64, from: u64) -> Option<TimestampOffset> {
        let high_watermark = self.high_watermark();
        let list = self.segments.load();
        let start = self.start_of(&list).max(from);
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
                    if header.compression() != 0 {
                        // The log does not decompress: it answers with the
                        // batch, and the broker narrows it to the record.
                        return Some(TimestampOffset {
                            offset: (header.base_offset() as u64).max(start),
                            timestamp: header.max_timestamp(),
                        });
                    }
                    // A batch that straddles the log start may hold its
                    // matches below it: only records from the start count,
                    // and without one the walk goes on.
                    let bytes = segment.bytes(position, position + len);
                    if let Some((offset, ts)) = exact_record(&bytes, timestamp, start) {
                        return Some(TimestampOffset {
                            offset: offset as u64,
                            timestamp: ts,
                        });
                    }
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
                let offset =
                    exact_record(&bytes, max, 0).map_or(header.last_offset(), |(offset, _)| offset);
                return Some(TimestampOffset {
                    offset: offset as u64,
                    timestamp: max,
                });
            }
            position += len;
        }
        None
    }
}

/// The first record of an uncompressed `batch` at or after `timestamp` and
/// `from_offset`; `None` for a compressed batch (the log does not
/// decompress) or when no record qualifies.
fn exact_record(batch: &[u8], timestamp: i64, from_offset: u64) -> Option<(i64, i64)> {
    let uncompressed = BatchHeader::parse(batch).is_some_and(|h| h.compression() == 0);
    // An uncompressed batch is read in place: the scratch buffer stays empty.
    let mut no_scratch = Vec::new();
    uncompressed
        .then(|| {
            herald_records::first_at_or_after(batch, timestamp, from_offset as i64, &mut no_scratch)
        })
        .flatten()
}
