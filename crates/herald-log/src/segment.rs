//! One segment: a contiguous run of batches in one file, its reservation word,
//! completion tracker and index, and the link to the segment after it.

use std::path::{Path, PathBuf};
use std::time::SystemTime;

use arc_swap::ArcSwapOption;
use bytes::Bytes;

use crate::commit::{BatchSizes, CommitTracker};
use crate::extent::Extent;
use crate::history::SegmentHistory;
use crate::index::SegmentIndex;
use crate::key_copy::KeyCopySlot;
use crate::mapped_file::MappedFile;
use crate::provisioner::policy;
use crate::reserve::{Reservation, ReserveWord};
use crate::sync::{Arc, AtomicBool, AtomicI64, AtomicPtr, Ordering};
use herald_records::{BatchHeader, HEADER_BYTES};

/// File name of the segment starting at `base_offset`.
pub(crate) fn log_file_name(base_offset: u64) -> String {
    format!("{base_offset:020}.log")
}

/// File name of the prepared successor of the segment starting at
/// `base_offset`. A prepared file never holds data: it is renamed to its
/// segment name before anyone writes to it, so recovery deletes leftovers.
pub(crate) fn prepared_file_name(base_offset: u64) -> String {
    format!("{base_offset:020}.next")
}

/// A segment file made ready ahead of the roll: created, allocated and
/// pre-faulted in the background, waiting for its base offset.
pub(crate) struct PreparedSegment {
    file: Option<MappedFile>,
    capacity: u32,
    interval: u32,
}

impl PreparedSegment {
    /// Turns the prepared file into the segment starting at `base_offset`.
    /// Fails, leaving no trace, if a segment file of that name already
    /// exists (a writer that did not wait created it).
    fn into_segment(mut self, dir: &Path, base_offset: u64) -> std::io::Result<Segment> {
        let mut file = self
            .file
            .take()
            .expect("a prepared segment holds its file until used");
        if let Err(e) = file.rename_no_replace(&dir.join(log_file_name(base_offset))) {
            let _ = std::fs::remove_file(file.path());
            return Err(e);
        }
        Ok(Segment::assemble(
            base_offset,
            file,
            Extent::default(),
            self.capacity,
            self.interval,
        ))
    }
}

impl Drop for PreparedSegment {
    fn drop(&mut self) {
        if let Some(file) = self.file.take() {
            let _ = std::fs::remove_file(file.path());
        }
    }
}

/// File name of the index of the segment starting at `base_offset`.
pub(crate) fn index_file_name(base_offset: u64) -> String {
    format!("{base_offset:020}.index")
}

/// A segment of the log.
pub(crate) struct Segment {
    base_offset: u64,
    file: MappedFile,
    reserve: ReserveWord,
    commit: CommitTracker,
    index: SegmentIndex,
    /// Bucket minima and the key index, built after the fact.
    history: SegmentHistory,
    /// The key-sorted copy of the sealed segment, once built or found.
    key_copy: KeyCopySlot,
    next: AtomicPtr<Segment>,
    /// The successor, prepared by the provisioner once this segment is half
    /// full, so that the roll costs a rename instead of a file creation.
    successor: ArcSwapOption<PreparedSegment>,
    successor_requested: AtomicBool,
    /// Some writer has started to install the successor.
    rolling: AtomicBool,
    interval: u32,
    allocate_step: u32,
    created_at: SystemTime,
    max_timestamp: AtomicI64,
    /// Set once the sealed, complete segment has been trimmed, indexed on
    /// disk and synced.
    pub(crate) finalized: AtomicBool,
    /// The commit tracker found a completed batch with a damaged header and
    /// stopped there.
    damaged: AtomicBool,
}

impl BatchSizes for Segment {
    fn batch_at(&self, position: u32) -> Option<(u32, u32)> {
        let end = self.reserved().0.bytes.min(self.file.map_len() as u32);
        let Some((header, bytes)) = self.batch_within(position, end) else {
            if !self.damaged.swap(true, Ordering::AcqRel) {
                tracing::error!(
                    path = %self.path().display(),
                    position,
                    "a completed batch has a damaged header; the log stops committing"
                );
            }
            return None;
        };
        Some((bytes, header.offset_count()))
    }
}

impl Segment {
    /// Creates an empty segment file for appends.
    pub(crate) fn create(
        dir: &Path,
        base_offset: u64,
        capacity: u32,
        interval: u32,
        step: u32,
    ) -> std::io::Result<Self> {
        let path = dir.join(log_file_name(base_offset));
        let file = MappedFile::open_writable(&path, capacity, step)?;
        Ok(Self::assemble(
            base_offset,
            file,
            Extent::default(),
            capacity,
            interval,
        ))
    }

    /// Reopens the last segment of a recovered log for appends, holding `end`.
    pub(crate) fn reopen_active(
        path: &Path,
        base_offset: u64,
        end: Extent,
        capacity: u32,
        interval: u32,
        step: u32,
    ) -> std::io::Result<Self> {
        let capacity = capacity.max(end.bytes);
        let file = MappedFile::open_writable(path, capacity, step)?;
        Ok(Self::assemble(base_offset, file, end, capacity, interval))
    }

    fn assemble(
        base_offset: u64,
        file: MappedFile,
        start: Extent,
        capacity: u32,
        interval: u32,
    ) -> Self {
        let allocate_step = file.allocate_step();
        Self {
            base_offset,
            file,
            reserve: ReserveWord::new(start, capacity),
            commit: CommitTracker::new(capacity, start),
            index: SegmentIndex::new(capacity, interval),
            history: SegmentHistory::default(),
            key_copy: KeyCopySlot::default(),
            next: AtomicPtr::new(std::ptr::null_mut()),
            successor: ArcSwapOption::empty(),
            successor_requested: AtomicBool::new(false),
            rolling: AtomicBool::new(false),
            interval,
            allocate_step,
            created_at: SystemTime::now(),
            max_timestamp: AtomicI64::new(i64::MIN),
            finalized: AtomicBool::new(false),
            damaged: AtomicBool::new(false),
        }
    }

    /// Opens a sealed segment read-only; `end` is its verified extent.
    pub(crate) fn open_sealed(
        path: &Path,
        base_offset: u64,
        end: Extent,
        interval: u32,
    ) -> std::io::Result<Self> {
        let file = MappedFile::open_read_only(path)?;
        Ok(Self {
            base_offset,
            file,
            reserve: ReserveWord::new_sealed(end),
            commit: CommitTracker::new_complete(end),
            index: SegmentIndex::new(end.bytes, interval),
            history: SegmentHistory::default(),
            key_copy: KeyCopySlot::default(),
            next: AtomicPtr::new(std::ptr::null_mut()),
            successor: ArcSwapOption::empty(),
            successor_requested: AtomicBool::new(true),
            rolling: AtomicBool::new(false),
            interval,
            allocate_step: 0,
            created_at: SystemTime::now(),
            max_timestamp: AtomicI64::new(i64::MIN),
            finalized: AtomicBool::new(true),
            damaged: AtomicBool::new(false),
        })
    }

    /// First offset of the segment.
    pub(crate) fn base_offset(&self) -> u64 {
        self.base_offset
    }

    /// Path of the segment file.
    pub(crate) fn path(&self) -> &Path {
        self.file.path()
    }

    /// Path of the index file beside it.
    pub(crate) fn index_path(&self) -> PathBuf {
        self.file.path().with_extension("index")
    }

    /// Path of the history index (`.keys`) file beside it.
    pub(crate) fn keys_path(&self) -> PathBuf {
        crate::history::keys_path(self.file.path())
    }

    /// Path of the key-sorted copy (`.kcopy`) beside it.
    pub(crate) fn key_copy_path(&self) -> PathBuf {
        crate::key_copy::key_copy_path(self.file.path())
    }

    /// Path of the copy of its stretch of offsets `start..end` (`.kpart`)
    /// beside it.
    pub(crate) fn key_part_path(&self, start: u64, end: u64) -> PathBuf {
        crate::key_copy::key_part_path(self.file.path(), self.base_offset, start, end)
    }

    /// The files kept beside the segment file, deleted with it.
    pub(crate) fn side_files(&self) -> Vec<PathBuf> {
        let mut files = vec![self.index_path(), self.keys_path(), self.key_copy_path()];
        files.extend(self.key_copy.part_paths());
        files
    }

    /// Every file of the segment, its indexes first: deleted in this
    /// order, a crash part way leaves no index of a missing segment that a
    /// later segment of the same base could take for its own.
    pub(crate) fn files(&self) -> Vec<PathBuf> {
        let mut files = self.side_files();
        files.push(self.path().to_owned());
        files
    }

    /// Bucket minima and key index, as far as they are built.
    pub(crate) fn history(&self) -> &SegmentHistory {
        &self.history
    }

    /// The key-sorted copy, as far as it is known.
    pub(crate) fn key_copy(&self) -> &KeyCopySlot {
        &self.key_copy
    }

    /// Interval of the index buckets, in bytes.
    pub(crate) fn index_interval(&self) -> u32 {
        self.interval
    }

    /// When this process created or opened the segment.
    pub(crate) fn created_at(&self) -> SystemTime {
        self.created_at
    }

    pub(crate) fn index(&self) -> &SegmentIndex {
        &self.index
    }

    pub(crate) fn file(&self) -> &MappedFile {
        &self.file
    }

    /// Reserves room for a batch or learns that the segment is sealed.
    pub(crate) fn reserve(&self, bytes: u32, records: u32) -> Reservation {
        self.reserve.reserve(bytes, records)
    }

    /// Seals the segment where it stands.
    pub(crate) fn seal(&self) -> Extent {
        self.reserve.seal()
    }

    /// Reserved extent and whether sealed.
    pub(crate) fn reserved(&self) -> (Extent, bool) {
        self.reserve.load()
    }

    /// Committed tail.
    pub(crate) fn committed(&self) -> Extent {
        self.commit.committed()
    }

    /// True once sealed and every reserved batch is committed.
    pub(crate) fn is_complete(&self) -> bool {
        let committed = self.commit.committed();
        let (reserved, sealed) = self.reserve.load();
        sealed && committed == reserved
    }

    /// Writes a reserved batch, stamps its offset, indexes it and publishes
    /// it. The caller has allocated the range.
    pub(crate) fn write(
        &self,
        start: Extent,
        batch: &[u8],
        max_timestamp: i64,
        leader_epoch: i32,
    ) -> bool {
        let base = self.base_offset + u64::from(start.records);
        let mut header = [0u8; 16];
        header.copy_from_slice(&batch[..16]);
        herald_records::stamp(&mut header, base, leader_epoch);
        // SAFETY: the reservation gives this writer the range alone, and the
        // caller allocated it.
        unsafe { self.file.write_batch_at(start.bytes, &header, &batch[16..]) };
        self.index.record(
            start.bytes,
            batch.len() as u32,
            start.records,
            max_timestamp,
        );
        self.note_timestamp(max_timestamp);
        let records = BatchHeader::parse(batch).map_or(1, |h| h.offset_count());
        self.commit
            .publish(start, batch.len() as u32, records, self)
    }

    /// Background work for this segment: allocate ahead of its writers, and
    /// once it is half full, prepare its successor.
    pub(crate) fn provision_ahead(&self) {
        let (reserved, sealed) = self.reserve.load();
        // Once sealed, `provision` stops before allocating anything.
        self.file.provision(u64::from(reserved.bytes), &|| {
            let (reserved, sealed) = self.reserve.load();
            (!sealed).then_some(u64::from(reserved.bytes))
        });
        let capacity = self.file.map_len() as u32;
        // The writer that crossed the middle decided it (`maybe_provision`)
        // before its reservation landed: re-checking the reserved bytes here
        // could find them still short of the middle, and the request is made
        // only once.
        if !sealed
            && self.successor_requested.load(Ordering::Acquire)
            && self.successor.load().is_none()
            && self.next().is_none()
        {
            let dir = self.file.path().parent().unwrap_or(Path::new("."));
            let path = dir.join(prepared_file_name(self.base_offset));
            match MappedFile::open_writable(&path, capacity, self.allocate_step) {
                Ok(file) => {
                    // No writer uses it yet.
                    file.provision(0, &|| Some(0));
                    let prepared = PreparedSegment {
                        file: Some(file),
                        capacity,
                        interval: self.interval,
                    };
                    self.successor.store(Some(Arc::new(prepared)));
                    // A close (or roll) that sealed the segment after the
                    // check above may have discarded the successor before
                    // this stored it: then drop it here, with its file, or
                    // it would outlive the closed log until the segment
                    // goes. Either this sees the seal or the closer's
                    // discard comes after the store.
                    std::sync::atomic::fence(Ordering::SeqCst);
                    if self.reserve.load().1 {
                        self.discard_successor();
                    }
                }
                Err(e) => {
                    tracing::debug!(path = %path.display(), error = %e, "cannot prepare next segment")
                }
            }
        }
    }

    /// Queues background work if the writers are getting close to the
    /// allocated end, or past the middle of the segment with no successor
    /// prepared.
    pub(crate) fn maybe_provision(self: &Arc<Self>, reserved_end: u64) {
        let allocate = self.file.wants_provisioning(reserved_end);
        let prepare = policy::wants_successor(reserved_end, self.file.map_len() as u64)
            && !self.successor_requested.load(Ordering::Relaxed)
            && !self.successor_requested.swap(true, Ordering::AcqRel);
        if allocate || prepare {
            crate::provisioner::request(Arc::downgrade(self));
        }
    }

    /// Builds the successor from the prepared file, if there is one and no
    /// other writer took it; `None` means the caller must create it.
    pub(crate) fn take_successor(&self, dir: &Path, base_offset: u64) -> Option<Segment> {
        self.rolling.store(true, Ordering::Release);
        let prepared = Arc::try_unwrap(self.successor.swap(None)?).ok()?;
        prepared.into_segment(dir, base_offset).ok()
    }

    /// Waits briefly for a writer that started installing the successor, so
    /// that writers racing to the roll do not each create and map a file.
    /// Bounded: the protocol never depends on that writer finishing.
    pub(crate) fn await_successor(&self) -> Option<Arc<Segment>> {
        if !self.rolling.load(Ordering::Acquire) {
            return None;
        }
        for _ in 0..256 {
            if let Some(next) = self.next() {
                return Some(next);
            }
            std::thread::yield_now();
        }
        self.next()
    }

    /// Drops an unused prepared successor (and its file).
    pub(crate) fn discard_successor(&self) {
        // Pairs with the provisioner's fence: after a seal, either this
        // finds its successor or it finds the seal (`provision_ahead`).
        std::sync::atomic::fence(Ordering::SeqCst);
        self.successor.store(None);
    }

    /// Header of the committed (or completed) batch at `position`.
    pub(crate) fn header_at(&self, position: u32) -> BatchHeader<'_> {
        // SAFETY: callers pass positions of batches whose writers are done
        // (committed, or completed with their bit observed), whose header
        // lies within the file.
        let bytes = unsafe { self.file.slice(position, HEADER_BYTES) };
        BatchHeader::parse(bytes).expect("slice has header length")
    }

    /// Header and length of the batch at `position`, if a whole header fits
    /// before `end` and gives a length that ends at or before `end`.
    ///
    /// `None` at `end` itself is how every walk ends. Before it, only a
    /// fault in the write path can produce one (every batch was validated
    /// before it was written): walkers then stop at `position`, rather than
    /// spin on a zero length or read past the tail.
    pub(crate) fn batch_within(&self, position: u32, end: u32) -> Option<(BatchHeader<'_>, u32)> {
        if u64::from(position) + HEADER_BYTES as u64 > u64::from(end) {
            return None;
        }
        let header = self.header_at(position);
        let len = u32::try_from(header.total_bytes()?).ok()?;
        let fits =
            len as usize >= HEADER_BYTES && u64::from(position) + u64::from(len) <= u64::from(end);
        fits.then_some((header, len))
    }

    /// Position of the committed batch that holds `offset` (or the first
    /// batch after it), given the committed tail. A damaged header stops
    /// the walk at its position.
    pub(crate) fn position_of(&self, offset: u64, committed: Extent) -> u32 {
        let relative = (offset - self.base_offset) as u32;
        let mut position = self.index.floor_position(relative, committed.bytes);
        while position < committed.bytes {
            let Some((header, len)) = self.batch_within(position, committed.bytes) else {
                break;
            };
            if header.last_offset() >= offset as i64 {
                break;
            }
            position += len;
        }
        position
    }

    /// End of the last whole batch that fits in `start..start + max_bytes`,
    /// but always after the first batch, and never past the committed tail.
    pub(crate) fn end_within(&self, start: u32, max_bytes: usize, committed: Extent) -> u32 {
        let limit = (start as u64 + max_bytes as u64).min(u64::from(committed.bytes)) as u32;
        if limit == committed.bytes {
            return limit;
        }
        let Some((_, first_len)) = self.batch_within(start, committed.bytes) else {
            return start;
        };
        let first_end = start + first_len;
        if first_end >= limit {
            return first_end;
        }
        // Jump close to the limit through the index, then walk.
        let mut position = self.index.floor_batch_start(limit).max(start);
        loop {
            let Some((_, len)) = self.batch_within(position, committed.bytes) else {
                return position;
            };
            if position + len > limit {
                return position;
            }
            position += len;
        }
    }

    /// True once the commit tracker stopped at a damaged header: nothing
    /// after it will become visible.
    pub(crate) fn is_damaged(&self) -> bool {
        self.damaged.load(Ordering::Acquire)
    }

    /// The segment file.
    pub(crate) fn file_fd(&self) -> std::os::fd::BorrowedFd<'_> {
        self.file.fd()
    }

    /// The file range of committed bytes `start..end`, for `sendfile`.
    pub(crate) fn region(self: &Arc<Self>, start: u32, end: u32) -> crate::FileRegion {
        crate::FileRegion::new(Arc::clone(self), u64::from(start), (end - start) as usize)
    }

    /// A zero-copy view of committed bytes that keeps the segment alive.
    pub(crate) fn bytes(self: &Arc<Self>, start: u32, end: u32) -> Bytes {
        if start == end {
            return Bytes::new();
        }
        Bytes::from_owner(SegmentBytes {
            segment: Arc::clone(self),
            start,
            len: (end - start) as usize,
        })
    }

    /// The next segment, once installed.
    pub(crate) fn next(&self) -> Option<Arc<Segment>> {
        let raw = self.next.load(Ordering::Acquire);
        if raw.is_null() {
            return None;
        }
        // SAFETY: a non-null `next` owns one strong count for as long as
        // `self` lives, and the caller holds `self`; we add a count of our own.
        unsafe {
            Arc::increment_strong_count(raw);
            Some(Arc::from_raw(raw))
        }
    }

    /// Installs `candidate` as the next segment unless another thread did
    /// first; returns the installed one.
    pub(crate) fn install_next(&self, candidate: Arc<Segment>) -> Arc<Segment> {
        let raw = Arc::into_raw(Arc::clone(&candidate)) as *mut Segment;
        match self.next.compare_exchange(
            std::ptr::null_mut(),
            raw,
            Ordering::AcqRel,
            Ordering::Acquire,
        ) {
            Ok(_) => candidate,
            Err(_) => {
                // SAFETY: `raw` came from into_raw above and was not published.
                drop(unsafe { Arc::from_raw(raw) });
                self.next().expect("the CAS failed because next is set")
            }
        }
    }

    /// Raises the segment's largest timestamp to `timestamp`.
    pub(crate) fn note_timestamp(&self, timestamp: i64) {
        // Relaxed: only read for retention and timestamp lookups, which
        // tolerate a value a moment old.
        if self.max_timestamp.load(Ordering::Relaxed) < timestamp {
            self.max_timestamp.fetch_max(timestamp, Ordering::Relaxed);
        }
    }

    /// Largest record timestamp in the segment (`i64::MIN` when empty).
    pub(crate) fn max_timestamp(&self) -> i64 {
        self.max_timestamp.load(Ordering::Relaxed)
    }

    /// Offsets held (once complete, the segment's record count).
    pub(crate) fn end_offset(&self) -> u64 {
        self.base_offset + u64::from(self.committed().records)
    }
}

impl Drop for Segment {
    fn drop(&mut self) {
        let raw = self.next.swap(std::ptr::null_mut(), Ordering::AcqRel);
        if !raw.is_null() {
            // SAFETY: the pointer owns one strong count, taken at install.
            drop(unsafe { Arc::from_raw(raw) });
        }
    }
}

/// Owner of a committed byte range, behind a `Bytes` given to readers.
struct SegmentBytes {
    segment: Arc<Segment>,
    start: u32,
    len: usize,
}

impl AsRef<[u8]> for SegmentBytes {
    fn as_ref(&self) -> &[u8] {
        // SAFETY: the range was committed when this view was made, and the
        // Arc keeps the mapping alive (even after the file is deleted).
        unsafe { self.segment.file.slice(self.start, self.len) }
    }
}

#[cfg(test)]
mod tests {
    use std::fs::OpenOptions;
    use std::os::unix::fs::FileExt;

    use super::*;
    use crate::reserve::Reservation;
    use herald_records::testing;

    #[test]
    fn the_commit_tracker_stops_before_a_damaged_completed_batch() {
        let dir = tempfile::tempdir().expect("tempdir");
        let segment = Segment::create(dir.path(), 0, 1 << 20, 4096, 1 << 20).expect("segment");
        let batch = testing::batch(2, b"value", 0);
        let reserve = || match segment.reserve(batch.len() as u32, 2) {
            Reservation::Reserved { start } => start,
            Reservation::Sealed { .. } => panic!("an empty segment has room"),
        };
        let (first, second) = (reserve(), reserve());
        segment
            .file()
            .ensure_allocated(u64::from(second.bytes) + batch.len() as u64)
            .expect("allocate");
        // The second batch completes first: away from the tail, it only sets
        // its completion bit.
        assert!(!segment.write(second, &batch, 0, 0));
        // Its header is damaged (length 0) before the first batch completes
        // and the tracker reads it to move past it.
        let file = OpenOptions::new()
            .write(true)
            .open(segment.path())
            .expect("open");
        file.write_all_at(&0i32.to_be_bytes(), u64::from(second.bytes) + 8)
            .expect("damage");
        assert!(!segment.is_damaged());
        segment.write(first, &batch, 0, 0);
        assert_eq!(
            segment.committed(),
            Extent::new(2, batch.len() as u32),
            "the tail stops after the first batch"
        );
        assert!(segment.is_damaged());
    }
}
