//! Building the key-sorted copies (`crate::key_copy`) of sealed segments
//! and of the active segment's indexed stretches, and dropping them when
//! the log stops keeping them.

use herald_records::RecordBatch;

use super::*;
use crate::history::key_hash;
use crate::key_copy::{
    merge_copies, BuildError, CopyBuilder, CopyState, Durability, KeyCopy, ARENA_BYTES,
};

/// The active segment gets a copy of each stretch of about this fraction
/// of `segment.bytes` once indexed (a lookup reads at most this much of it
/// batch by batch); merged as they accumulate
/// (`KeyCopySlot::parts_to_merge`), they are at most about 3 per size
/// class, 9 in all.
const PART_UNITS_PER_SEGMENT: u32 = 64;

/// How one sealed segment's copy could not be made.
enum Unbuilt {
    /// The build stopped (the log or the caller did): try again later.
    Stopped,
    /// A batch's records cannot be read: the copy could not hold them.
    Unreadable,
    /// Writing the files failed.
    Io(std::io::Error),
}

impl From<std::io::Error> for Unbuilt {
    fn from(e: std::io::Error) -> Self {
        Unbuilt::Io(e)
    }
}

impl From<BuildError> for Unbuilt {
    fn from(e: BuildError) -> Self {
        match e {
            BuildError::Stopped => Unbuilt::Stopped,
            BuildError::Io(e) => Unbuilt::Io(e),
        }
    }
}

/// The key-sorted copies of a log, from [`Log::key_copy_stats`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct KeyCopyStats {
    /// Bytes of the copies in use (the active segment's parts included).
    pub bytes: u64,
    /// Sealed segments not copied yet, while the log keeps copies.
    pub pending_segments: u64,
}

impl Log {
    /// Bytes of the key-sorted copies and the sealed segments waiting for
    /// one (a segment whose copy could not be made is not waiting).
    pub fn key_copy_stats(&self) -> KeyCopyStats {
        let keeps = self.config.load().key_copy;
        let mut stats = KeyCopyStats::default();
        for segment in self.segments.load().iter() {
            stats.bytes += segment.key_copy().bytes();
            if keeps
                && segment.is_complete()
                && matches!(segment.key_copy().state(), CopyState::Unknown)
            {
                stats.pending_segments += 1;
            }
        }
        stats
    }

    /// When the log keeps key-sorted copies (`LogConfig::key_copy`), makes
    /// the copy of the oldest sealed, wholly indexed segment without one:
    /// adopts its `.kcopy` file if one describes it, or builds it (seconds
    /// for a full segment, in about `ARENA_BYTES` of memory, spilling
    /// sorted runs beside the segment). With every sealed segment copied,
    /// works on the active segment's parts (`build_key_part`). Answers
    /// whether it did anything: a background task calls it until it
    /// answers false. `stop`
    /// ends a build early (it is taken up again by a later call). Segments
    /// known to be settled are passed over without a lock.
    pub fn build_key_copy(&self, stop: &AtomicBool) -> bool {
        if !self.config.load().key_copy {
            return false;
        }
        // One builder at a time (staged files have fixed names); another
        // caller finds nothing to do.
        let Ok(_building) = self.key_copy_builder.try_lock() else {
            return false;
        };
        let list = self.segments.load_full();
        let settled = self.key_copies_through.load(Ordering::Acquire);
        for (n, segment) in list.iter().enumerate() {
            if segment.end_offset() <= settled && segment.is_complete() {
                continue;
            }
            if !segment.is_complete() {
                return n + 1 == list.len() && self.build_key_part(segment, stop);
            }
            if !segment.history().is_complete() {
                return false;
            }
            if !matches!(segment.key_copy().state(), CopyState::Unknown) {
                self.key_copies_through
                    .fetch_max(segment.end_offset(), Ordering::AcqRel);
                continue;
            }
            let path = segment.key_copy_path();
            let end = segment.committed();
            let adopted = self.install(segment, || {
                KeyCopy::open(&path).filter(|found| {
                    found.base_offset == segment.base_offset()
                        && found.start == Extent::default()
                        && found.end == end
                })
            });
            if adopted {
                return true;
            }
            let staged = staged_path(&path);
            let why = match self.copy_stretch(
                segment,
                Extent::default(),
                end,
                &staged,
                Durability::Synced,
                stop,
            ) {
                Ok(()) => {
                    let mut failed = None;
                    let installed = self.install(segment, || {
                        let moved = std::fs::rename(&staged, &path)
                            .and_then(|()| sync_dir(&self.dir))
                            .map_err(|e| failed = Some(e));
                        moved.ok().and_then(|()| {
                            let copy = KeyCopy::open(&path);
                            if copy.is_none() {
                                failed = Some(std::io::Error::other(
                                    "the copy just written cannot be read",
                                ));
                            }
                            copy
                        })
                    });
                    if installed {
                        return true;
                    }
                    match failed {
                        Some(e) => Unbuilt::Io(e),
                        // Stopped, left the log, or turned off meanwhile.
                        None => Unbuilt::Stopped,
                    }
                }
                Err(why) => why,
            };
            let _ = std::fs::remove_file(&staged);
            match why {
                Unbuilt::Stopped => return false,
                Unbuilt::Unreadable => {
                    tracing::warn!(segment = %segment.path().display(), "a batch's records cannot be read; the segment keeps no key-sorted copy");
                }
                Unbuilt::Io(e) => {
                    let _ = std::fs::remove_file(&path);
                    tracing::warn!(file = %path.display(), error = %e, "cannot write the key-sorted copy; the segment is read through its key index");
                }
            }
            segment.key_copy().set(CopyState::Absent);
            return true;
        }
        false
    }

    /// For the active `segment`: merges the parts its slot names
    /// (`KeyCopySlot::parts_to_merge`: few parts, of size classes not
    /// growing towards the last), or else copies its indexed stretch after
    /// the last part (a `.kpart` file) once it spans a
    /// [`PART_UNITS_PER_SEGMENT`]th of `segment.bytes`. Answers
    /// whether it did anything. A part that cannot be made ends the parts
    /// of the segment: those made stay in use, the rest is read through
    /// its key index until the whole copy.
    fn build_key_part(&self, segment: &Arc<Segment>, stop: &AtomicBool) -> bool {
        let slot = segment.key_copy();
        let unit = (self.config.load().segment_bytes / PART_UNITS_PER_SEGMENT).max(1);
        let base = segment.base_offset();
        let merging = slot.parts_to_merge(unit);
        let (path, staged, built) = match &merging {
            Some(parts) => {
                let (Some(first), Some(last)) = (parts.first(), parts.last()) else {
                    return false;
                };
                let path = segment.key_part_path(first.offsets().start, last.offsets().end);
                let staged = staged_path(&path);
                let stopped = || stop.load(Ordering::Relaxed) || self.stopped();
                let built = merge_copies(parts, &staged, &stopped).map_err(Unbuilt::from);
                (path, staged, built)
            }
            None => {
                let Some(start) = slot.parts_end() else {
                    return false;
                };
                let end = segment.history().indexed();
                if end.bytes.saturating_sub(start.bytes) < unit {
                    return false;
                }
                let path = segment.key_part_path(
                    base + u64::from(start.records),
                    base + u64::from(end.records),
                );
                let staged = staged_path(&path);
                // Parts are deleted at every start: neither the file nor
                // its name is synced.
                let built =
                    self.copy_stretch(segment, start, end, &staged, Durability::Scratch, stop);
                (path, staged, built)
            }
        };
        let why = match built {
            Ok(()) => {
                let mut failed = None;
                let placed = self.maintaining(segment, || {
                    if let Err(e) = std::fs::rename(&staged, &path) {
                        failed = Some(e);
                        return false;
                    }
                    let Some(part) = KeyCopy::open(&path).map(Arc::new) else {
                        let _ = std::fs::remove_file(&path);
                        failed = Some(std::io::Error::other(
                            "the part just written cannot be read",
                        ));
                        return false;
                    };
                    let placed = match &merging {
                        Some(parts) => slot.replace_parts(parts, part),
                        None => slot.add_part(part),
                    };
                    if !placed {
                        let _ = std::fs::remove_file(&path);
                    }
                    placed
                });
                match (placed, failed) {
                    (Some(true), _) => return true,
                    (_, Some(e)) => Unbuilt::Io(e),
                    // Left the log, turned off, sealed and copied whole,
                    // or the parts set aside meanwhile.
                    _ => Unbuilt::Stopped,
                }
            }
            Err(why) => why,
        };
        let _ = std::fs::remove_file(&staged);
        match &why {
            Unbuilt::Stopped => return false,
            Unbuilt::Unreadable => {
                tracing::warn!(segment = %segment.path().display(), "a batch's records cannot be read; the active segment's stretches get no key-sorted copies");
            }
            Unbuilt::Io(e) => {
                tracing::warn!(file = %path.display(), error = %e, "cannot write the key-sorted copy of a stretch; the active segment is read through its key index");
            }
        }
        // Under the lock: copies turned off and on meanwhile start afresh.
        self.maintaining(segment, || match (&merging, &why) {
            // Only a part read for the merge is found damaged: set aside
            // now, not by the next lookup reaching it.
            (Some(parts), Unbuilt::Io(e)) if e.kind() == std::io::ErrorKind::InvalidData => {
                if let Some(part) = parts.first() {
                    slot.discard(part);
                }
            }
            _ => slot.give_up_parts(),
        });
        true
    }

    /// Runs `f` under the maintenance lock (which retention, rewrites and
    /// `drop_key_copies` hold), and only while the log is open, keeps
    /// copies and still holds `segment`; `None` when it did not run.
    fn maintaining<R>(&self, segment: &Arc<Segment>, f: impl FnOnce() -> R) -> Option<R> {
        let _running = self.maintenance.lock().unwrap_or_else(|p| p.into_inner());
        let current = self.segments.load();
        if self.stopped()
            || !self.config.load().key_copy
            || !current.iter().any(|s| Arc::ptr_eq(s, segment))
        {
            return None;
        }
        Some(f())
    }

    /// Under [`Log::maintaining`]: runs `open` and makes what it answers
    /// the segment's whole copy. Answers whether it did. A file `open`
    /// placed and could not read is deleted.
    fn install(&self, segment: &Arc<Segment>, open: impl FnOnce() -> Option<KeyCopy>) -> bool {
        self.maintaining(segment, || match open() {
            Some(copy) => {
                segment.key_copy().set(CopyState::Present(Arc::new(copy)));
                true
            }
            None => false,
        })
        .unwrap_or(false)
    }

    /// Writes the key-sorted copy of the stretch `start..end` of `segment`
    /// (committed, beginning and ending at batch boundaries) to `staged`.
    fn copy_stretch(
        &self,
        segment: &Arc<Segment>,
        start: Extent,
        end: Extent,
        staged: &Path,
        durability: Durability,
        stop: &AtomicBool,
    ) -> Result<(), Unbuilt> {
        let mut runs = segment.path().with_extension("").into_os_string();
        runs.push(".kcopy-run-");
        let mut builder = CopyBuilder::new(PathBuf::from(runs), ARENA_BYTES);
        let mut scratch = Vec::new();
        let mut at = start.bytes;
        while at < end.bytes {
            if stop.load(Ordering::Relaxed) || self.stopped() {
                return Err(Unbuilt::Stopped);
            }
            let Some((header, len)) = segment.batch_within(at, end.bytes) else {
                return Err(Unbuilt::Unreadable);
            };
            let control = header.is_control();
            let bytes = segment.bytes(at, at + len);
            at += len;
            if control {
                continue;
            }
            let batch = RecordBatch::new(&bytes).map_err(|_| Unbuilt::Unreadable)?;
            let records = batch
                .records(&mut scratch)
                .map_err(|_| Unbuilt::Unreadable)?;
            for record in records {
                let record = record.map_err(|_| Unbuilt::Unreadable)?;
                if let Some(key) = record.key {
                    builder.add(key_hash(key), &record, key)?;
                }
            }
        }
        let stopped = || stop.load(Ordering::Relaxed) || self.stopped();
        builder
            .finish(
                staged,
                segment.base_offset(),
                start,
                end,
                durability,
                &stopped,
            )
            .map_err(Unbuilt::from)
    }

    /// Forgets and deletes every key-sorted copy (the log no longer keeps
    /// them). A lookup holding one reads on from its mapping.
    pub(crate) fn drop_key_copies(&self) {
        let _running = self.maintenance.lock().unwrap_or_else(|p| p.into_inner());
        self.key_copies_through.store(0, Ordering::Release);
        for segment in self.segments.load().iter() {
            segment.key_copy().clear();
            let path = segment.key_copy_path();
            match std::fs::remove_file(&path) {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => {
                    tracing::warn!(file = %path.display(), error = %e, "cannot delete a key-sorted copy")
                }
            }
        }
    }
}

/// Where a copy bound for `path` is written before it is renamed there.
fn staged_path(path: &Path) -> PathBuf {
    let mut staged = path.to_owned().into_os_string();
    staged.push(".new.tmp");
    PathBuf::from(staged)
}
