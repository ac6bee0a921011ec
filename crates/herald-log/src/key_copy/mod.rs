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
//! is read through the key index as before.

mod build;
mod file;
mod rows;

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use parking_lot::Mutex;

pub(crate) use build::{BuildError, CopyBuilder, ARENA_BYTES};
pub(crate) use file::KeyCopy;
pub use rows::{CopiedRecord, CopiedRecords};

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

/// The key-sorted copy of one segment, as far as it is known.
#[derive(Default)]
pub(crate) struct KeyCopySlot {
    state: Mutex<CopyState>,
}

impl KeyCopySlot {
    /// The state now.
    pub(crate) fn state(&self) -> CopyState {
        self.state.lock().clone()
    }

    /// The copy to read, if there is one.
    pub(crate) fn copy(&self) -> Option<Arc<KeyCopy>> {
        match &*self.state.lock() {
            CopyState::Present(copy) => Some(Arc::clone(copy)),
            _ => None,
        }
    }

    /// Records what is known now.
    pub(crate) fn set(&self, state: CopyState) {
        *self.state.lock() = state;
    }

    /// Sets `copy` aside, found damaged: unless another took its place,
    /// the segment is read through its key index from now on and the file
    /// (at `path`) is deleted, so the next start builds it again.
    fn discard(&self, copy: &Arc<KeyCopy>, path: &Path) {
        let mut state = self.state.lock();
        if matches!(&*state, CopyState::Present(current) if Arc::ptr_eq(current, copy)) {
            *state = CopyState::Absent;
            if let Err(e) = std::fs::remove_file(path) {
                tracing::warn!(file = %path.display(), error = %e, "cannot delete a damaged key-sorted copy");
            }
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
                let path = self.segment.key_copy_path();
                tracing::warn!(file = %path.display(), block = damaged.block, "a key-sorted copy is damaged; reading its segment through the key index from now on");
                self.segment.key_copy().discard(&self.copy, &path);
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
