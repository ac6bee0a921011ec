//! Where a read's bytes lie in their segment file, so that a server can hand
//! them to the kernel with `sendfile(2)` instead of copying them out of the
//! mapping: the copy from user memory into socket buffers is most of the
//! CPU a fetch costs.

use std::os::fd::{AsFd, BorrowedFd};
use std::sync::Arc;

use crate::segment::Segment;

/// A committed byte range of one segment file. It keeps the segment (and so
/// its open file) alive, and its bytes never change: they were committed
/// before the region was made.
#[derive(Clone)]
pub struct FileRegion {
    segment: Arc<Segment>,
    offset: u64,
    len: usize,
}

impl FileRegion {
    pub(crate) fn new(segment: Arc<Segment>, offset: u64, len: usize) -> Self {
        Self {
            segment,
            offset,
            len,
        }
    }

    /// The segment file, open for as long as this region lives.
    pub fn fd(&self) -> BorrowedFd<'_> {
        self.segment.file_fd()
    }

    /// Position of the first byte in the file.
    pub fn offset(&self) -> u64 {
        self.offset
    }

    /// Length in bytes.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Its first `len` bytes (all of it if shorter).
    pub(crate) fn prefix(self, len: usize) -> Self {
        Self {
            len: self.len.min(len),
            ..self
        }
    }

    /// True for an empty region.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

impl AsFd for FileRegion {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.fd()
    }
}

impl std::fmt::Debug for FileRegion {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FileRegion")
            .field("offset", &self.offset)
            .field("len", &self.len)
            .finish_non_exhaustive()
    }
}

impl PartialEq for FileRegion {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.segment, &other.segment)
            && self.offset == other.offset
            && self.len == other.len
    }
}

impl Eq for FileRegion {}
