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

use std::path::{Path, PathBuf};
use std::sync::Arc;

use parking_lot::Mutex;

pub(crate) use build::{CopyBuilder, ARENA_BYTES};
pub(crate) use file::KeyCopy;
pub use rows::{CopiedRecord, CopiedRecords};

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
}
