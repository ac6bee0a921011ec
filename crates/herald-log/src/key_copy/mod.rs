//! The key-sorted copy of a sealed segment (a topic's `key.sorted.copy`):
//! its records with keys, sorted by key hash and then offset, in lz4
//! blocks, in a `.kcopy` file beside the segment. The key index
//! (`crate::history`) names, per key, each batch holding it: a key with
//! hundreds of records means hundreds of batches to read (and inflate),
//! from the disk once the log outgrows memory. In the copy a key's
//! records of one segment lie together, a block or two: a lookup reads
//! that many per segment.
//!
//! Built by [`crate::Log::build_key_copy`] from a sealed segment once its
//! history index is complete, off the append path; a segment without one
//! (not built yet, the topic does not keep them, or its copy is damaged)
//! is read through the key index as before. The active segment gets
//! copies of its stretches as the index passes them (`.kpart` files, from
//! a sixty-fourth of the segment each, merged four of a size at a time),
//! so only the stretch after the last one is read batch by batch; once the
//! segment is sealed its whole copy replaces them. Parts are not kept
//! across a restart (the active segment's index is rebuilt, and its parts
//! with it).

mod build;
mod file;
mod rows;

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use parking_lot::Mutex;

pub(crate) use build::{merge_copies, BuildError, CopyBuilder, ARENA_BYTES};
pub(crate) use file::{Durability, KeyCopy};
pub use rows::{CopiedRecord, CopiedRecords};

use crate::extent::Extent;
use crate::segment::Segment;

/// File name of the key-sorted copy of the segment starting at
/// `base_offset`.
pub(crate) fn key_copy_file_name(base_offset: u64) -> String {
    format!("{base_offset:020}.kcopy")
}

/// Path of the key-sorted copy beside the segment file at `segment_path`.
pub(crate) fn key_copy_path(segment_path: &Path) -> PathBuf {
    segment_path.with_extension("kcopy")
}

/// Extension of the copies of an active segment's stretches.
pub(crate) const PART_EXTENSION: &str = "kpart";

/// Path of the copy of the stretch of offsets `start..end` of the segment
/// at `segment_path` (base offset `base`).
pub(crate) fn key_part_path(segment_path: &Path, base: u64, start: u64, end: u64) -> PathBuf {
    segment_path.with_file_name(format!("{base:020}-{start:020}-{end:020}.{PART_EXTENSION}"))
}

/// Parts merged into one at a time.
pub(crate) const PART_MERGE_FANIN: usize = 4;

/// The size class of a part spanning `span` bytes of its segment, parts
/// being made once `unit` bytes are indexed: `FANIN` parts of one class
/// merge into one of the next.
fn part_level(span: u32, unit: u32) -> u32 {
    let mut units = span / unit.max(1);
    let mut level = 0;
    while units >= PART_MERGE_FANIN as u32 {
        units /= PART_MERGE_FANIN as u32;
        level += 1;
    }
    level
}

fn remove_copy_file(path: &Path) {
    match std::fs::remove_file(path) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => {
            tracing::warn!(file = %path.display(), error = %e, "cannot delete a key-sorted copy")
        }
    }
}

/// Where a segment stands with its key-sorted copy.
#[derive(Clone, Default)]
pub(crate) enum CopyState {
    /// Not looked for yet.
    #[default]
    Unknown,
    /// None to use: not kept, not buildable (records that cannot be
    /// read), or found damaged. Not built again while the log is open.
    Absent,
    /// Built or found, and read from.
    Present(Arc<KeyCopy>),
}

#[derive(Default)]
struct SlotState {
    /// The copy of the whole sealed segment.
    whole: CopyState,
    /// Until the whole copy is present: copies of consecutive stretches
    /// from the segment's start, oldest first, made while it was active.
    parts: Vec<Arc<KeyCopy>>,
    /// No more parts are made: one could not be made (those made are
    /// read), or they were found damaged (and set aside).
    parts_failed: bool,
}

/// The key-sorted copies of one segment, as far as they are known.
#[derive(Default)]
pub(crate) struct KeyCopySlot {
    state: Mutex<SlotState>,
}

impl KeyCopySlot {
    /// Where the whole copy stands.
    pub(crate) fn state(&self) -> CopyState {
        self.state.lock().whole.clone()
    }

    /// The copies to read, covering consecutive stretches from the
    /// segment's start: the whole copy, or the parts made so far.
    pub(crate) fn copies(&self) -> Vec<Arc<KeyCopy>> {
        let state = self.state.lock();
        match &state.whole {
            CopyState::Present(copy) => vec![Arc::clone(copy)],
            _ => state.parts.clone(),
        }
    }

    /// Records where the whole copy stands. Once it is present, the parts
    /// are deleted (a lookup holding one reads on from its mapping).
    pub(crate) fn set(&self, whole: CopyState) {
        let mut state = self.state.lock();
        if matches!(whole, CopyState::Present(_)) {
            for part in state.parts.drain(..) {
                remove_copy_file(&part.path);
            }
        }
        state.whole = whole;
    }

    /// Forgets every copy and deletes the parts' files (the caller deletes
    /// the whole copy's file).
    pub(crate) fn clear(&self) {
        let mut state = self.state.lock();
        for part in state.parts.drain(..) {
            remove_copy_file(&part.path);
        }
        *state = SlotState::default();
    }

    /// Where the next part starts (the end of the last one, the segment's
    /// start before the first); `None` when no more parts are made (the
    /// whole copy is present or a part was damaged).
    pub(crate) fn parts_end(&self) -> Option<Extent> {
        let state = self.state.lock();
        if state.parts_failed || matches!(state.whole, CopyState::Present(_)) {
            return None;
        }
        Some(state.parts.last().map_or(Extent::default(), |p| p.end))
    }

    /// Adds `part` after the others if it starts where they end; answers
    /// whether it did.
    pub(crate) fn add_part(&self, part: Arc<KeyCopy>) -> bool {
        let mut state = self.state.lock();
        let end = state.parts.last().map_or(Extent::default(), |p| p.end);
        if state.parts_failed || matches!(state.whole, CopyState::Present(_)) || part.start != end {
            return false;
        }
        state.parts.push(part);
        true
    }

    /// Makes no more parts (one could not be made): those made are kept
    /// and read.
    pub(crate) fn give_up_parts(&self) {
        self.state.lock().parts_failed = true;
    }

    /// The parts to merge into one next, if any (parts made once `unit`
    /// bytes are indexed). Size classes do not grow from the first part to
    /// the last, with fewer than [`PART_MERGE_FANIN`] parts of a class, so a
    /// segment has few parts: a last part of a larger class than the one
    /// before it (made late, or just merged) is merged with the smaller
    /// ones before it; else the last `FANIN` parts, if of one class. Each
    /// call of the builder merges before it makes a part, so only the last
    /// part can break the order.
    pub(crate) fn parts_to_merge(&self, unit: u32) -> Option<Vec<Arc<KeyCopy>>> {
        let state = self.state.lock();
        if state.parts_failed || matches!(state.whole, CopyState::Present(_)) {
            return None;
        }
        let levels: Vec<u32> = state
            .parts
            .iter()
            .map(|p| part_level(p.span(), unit))
            .collect();
        let (&last_level, before) = levels.split_last()?;
        let smaller = before.iter().rev().take_while(|&&l| l < last_level).count();
        if smaller > 0 {
            return Some(state.parts[before.len() - smaller..].to_vec());
        }
        let from = levels.len().checked_sub(PART_MERGE_FANIN)?;
        levels[from..]
            .iter()
            .all(|&l| l == last_level)
            .then(|| state.parts[from..].to_vec())
    }

    /// Puts `merged` in the place of the consecutive parts `old` and
    /// deletes their files, if they are all still there; answers whether
    /// it did.
    pub(crate) fn replace_parts(&self, old: &[Arc<KeyCopy>], merged: Arc<KeyCopy>) -> bool {
        let mut state = self.state.lock();
        let Some(first) = old.first() else {
            return false;
        };
        let Some(at) = state.parts.iter().position(|p| Arc::ptr_eq(p, first)) else {
            return false;
        };
        let still = state.parts[at..]
            .iter()
            .take(old.len())
            .zip(old)
            .filter(|(a, b)| Arc::ptr_eq(a, b))
            .count();
        if still != old.len() || merged.start != first.start {
            return false;
        }
        for part in state.parts.splice(at..at + old.len(), [merged]) {
            remove_copy_file(&part.path);
        }
        true
    }

    /// Paths of the parts' files.
    pub(crate) fn part_paths(&self) -> Vec<PathBuf> {
        self.state
            .lock()
            .parts
            .iter()
            .map(|p| p.path.clone())
            .collect()
    }

    /// Bytes of the files in use.
    pub(crate) fn bytes(&self) -> u64 {
        self.copies().iter().map(|c| c.file_bytes()).sum()
    }

    /// Sets `copy` aside, found damaged: the segment is read through its
    /// key index from now on and the file is deleted, so the next start
    /// builds it again. A damaged part takes the other parts with it (the
    /// parts must cover the segment from its start).
    pub(crate) fn discard(&self, copy: &Arc<KeyCopy>) {
        let mut state = self.state.lock();
        if matches!(&state.whole, CopyState::Present(current) if Arc::ptr_eq(current, copy)) {
            state.whole = CopyState::Absent;
            remove_copy_file(&copy.path);
        } else if state.parts.iter().any(|p| Arc::ptr_eq(p, copy)) {
            for part in state.parts.drain(..) {
                remove_copy_file(&part.path);
            }
            state.parts_failed = true;
        }
    }
}

/// A key-sorted copy found damaged while a lookup read it. The copy is set
/// aside (the segment is read through its key index from now on, and the
/// copy rebuilt at the next start): a lookup asked again answers in full.
#[derive(Debug, Clone, thiserror::Error)]
#[error("the key-sorted copy {path} is damaged (block {block}); it is set aside, ask again")]
pub struct KeyCopyDamaged {
    /// The copy's file.
    pub path: PathBuf,
    /// The damaged block.
    pub block: usize,
}

/// The records of one key hash in one segment's key-sorted copy, within a
/// range, read a block at a time (a key may have many: a reader holds one
/// block's worth at a time and can stop early).
#[derive(Clone)]
pub struct CopiedRun {
    segment: Arc<Segment>,
    copy: Arc<KeyCopy>,
    hash: u32,
    range: std::ops::Range<u64>,
    /// The next block to read; `None` once no block is left.
    next: Option<usize>,
}

impl CopiedRun {
    pub(crate) fn new(
        segment: Arc<Segment>,
        copy: Arc<KeyCopy>,
        hash: u32,
        range: std::ops::Range<u64>,
    ) -> Self {
        let first = copy.first_block(hash);
        Self {
            segment,
            copy,
            hash,
            range,
            next: Some(first),
        }
    }

    /// Base offset of the segment copied.
    pub fn segment_base(&self) -> u64 {
        self.segment.base_offset()
    }

    /// Stops the run at offset `end` (a bulk read answers from there).
    pub(crate) fn end_at(&mut self, end: u64) {
        self.range.end = self.range.end.min(end);
        if self.range.start >= self.range.end {
            self.next = None;
        }
    }

    /// True once every block is read.
    pub fn is_done(&self) -> bool {
        self.next.is_none()
    }

    /// Reads the next block, adding the run's records in it to `found`;
    /// `scratch` holds the inflated block. Answers the bytes inflated.
    pub fn read_block(
        &mut self,
        found: &mut CopiedRecords,
        scratch: &mut Vec<u8>,
    ) -> Result<usize, KeyCopyDamaged> {
        let Some(block) = self.next else {
            return Ok(0);
        };
        match self
            .copy
            .read_block(block, self.hash, self.range.clone(), found, scratch)
        {
            Ok((inflated, more)) => {
                self.next = more.then_some(block + 1);
                Ok(inflated)
            }
            Err(damaged) => {
                self.next = None;
                let path = self.copy.path.clone();
                tracing::warn!(file = %path.display(), block = damaged.block, "a key-sorted copy is damaged; reading its segment through the key index from now on");
                self.segment.key_copy().discard(&self.copy);
                Err(KeyCopyDamaged {
                    path,
                    block: damaged.block,
                })
            }
        }
    }
}

impl fmt::Debug for CopiedRun {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CopiedRun")
            .field("segment", &self.segment.base_offset())
            .field("hash", &self.hash)
            .field("range", &self.range)
            .field("next", &self.next)
            .finish()
    }
}

impl PartialEq for CopiedRun {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.copy, &other.copy)
            && self.hash == other.hash
            && self.range == other.range
            && self.next == other.next
    }
}

impl Eq for CopiedRun {}
