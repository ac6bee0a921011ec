//! A segment's file, mapped into memory, with disk space allocated ahead of
//! the writers.
//!
//! Writers copy into the mapping. A store into a mapped page the filesystem
//! cannot back (disk full) would kill the process with SIGBUS, so space is
//! allocated with `posix_fallocate` before any writer touches it, and a full
//! disk comes back as an ordinary error. The newly allocated range is also
//! pre-faulted (`MADV_POPULATE_WRITE`) so that writers do not take a page
//! fault per 4 KiB on the hot path.

use std::fs::{File, OpenOptions};
use std::io;
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use memmap2::{MmapOptions, MmapRaw};

/// `MADV_POPULATE_WRITE` (Linux 5.14); older kernels answer EINVAL and the
/// pages are simply faulted in by the writers.
const MADV_POPULATE_WRITE: libc::c_int = 23;

/// The page size `madvise` ranges are aligned to (the smallest Linux uses;
/// aligning to it is also aligned for larger pages' callers here, since
/// allocation steps are whole MiB).
const PAGE_BYTES: u64 = 4096;

/// A memory-mapped segment file.
pub(crate) struct MappedFile {
    path: PathBuf,
    file: File,
    map: MmapRaw,
    map_len: usize,
    /// Bytes of the file known to be allocated on disk.
    allocated: AtomicU64,
    allocate_step: u64,
    /// A provisioning request is queued or running.
    provisioning: AtomicBool,
}

impl MappedFile {
    /// Opens (creating if needed, never truncating) a file for appends and maps
    /// `capacity` bytes of it.
    pub(crate) fn open_writable(
        path: &Path,
        capacity: u32,
        allocate_step: u32,
    ) -> io::Result<Self> {
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(path)?;
        let existing = file.metadata()?.len();
        let map_len = (capacity as usize).max(existing as usize).max(1);
        let map = MmapOptions::new().len(map_len).map_raw(&file)?;
        Ok(Self {
            path: path.to_owned(),
            file,
            map,
            map_len,
            allocated: AtomicU64::new(existing),
            allocate_step: u64::from(allocate_step),
            provisioning: AtomicBool::new(false),
        })
    }

    /// Opens an existing file and maps all of it read-only (the file stays
    /// writable so that a sealed segment's preallocated tail can be trimmed).
    pub(crate) fn open_read_only(path: &Path) -> io::Result<Self> {
        let file = OpenOptions::new().read(true).write(true).open(path)?;
        let len = file.metadata()?.len();
        let map_len = (len as usize).max(1);
        let map = MmapOptions::new().len(map_len).map_raw_read_only(&file)?;
        Ok(Self {
            path: path.to_owned(),
            file,
            map,
            map_len,
            allocated: AtomicU64::new(len),
            allocate_step: 0,
            provisioning: AtomicBool::new(false),
        })
    }

    /// Path of the file.
    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    /// Renames the file to `to`, failing with `AlreadyExists` rather than
    /// replacing a file that is there (another writer's segment).
    pub(crate) fn rename_no_replace(&mut self, to: &Path) -> io::Result<()> {
        use std::ffi::CString;
        use std::os::unix::ffi::OsStrExt;
        let c_path = |p: &Path| {
            CString::new(p.as_os_str().as_bytes())
                .map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))
        };
        let (from_c, to_c) = (c_path(&self.path)?, c_path(to)?);
        // SAFETY: both are valid NUL-terminated paths; AT_FDCWD resolves
        // them as given (they are absolute or relative to the process's
        // directory, like every other path here).
        let rc = unsafe {
            libc::renameat2(
                libc::AT_FDCWD,
                from_c.as_ptr(),
                libc::AT_FDCWD,
                to_c.as_ptr(),
                libc::RENAME_NOREPLACE,
            )
        };
        if rc != 0 {
            return Err(io::Error::last_os_error());
        }
        self.path = to.to_owned();
        Ok(())
    }

    /// Length of the file on disk.
    pub(crate) fn file_len(&self) -> io::Result<u64> {
        Ok(self.file.metadata()?.len())
    }

    /// Makes sure bytes `..end` are backed by allocated disk space and
    /// mapped pages, allocating up to the next step boundary if they are not.
    pub(crate) fn ensure_allocated(&self, end: u64) -> io::Result<()> {
        if end <= self.allocated.load(Ordering::Acquire) {
            return Ok(());
        }
        self.allocate_to(end.div_ceil(self.allocate_step.max(1)) * self.allocate_step.max(1))
    }

    /// True if the allocation runs less than `lookahead_steps` steps ahead of
    /// `reserved_end` and nobody is provisioning yet; the caller then queues
    /// a provisioning request (and this returns false until it has run).
    pub(crate) fn wants_provisioning(&self, reserved_end: u64, lookahead_steps: u64) -> bool {
        // Never past the mapping: once the whole segment is allocated there
        // is nothing left to provision.
        let ahead =
            (reserved_end + self.allocate_step * lookahead_steps / 2).min(self.map_len as u64);
        ahead > self.allocated.load(Ordering::Relaxed)
            && !self.provisioning.swap(true, Ordering::AcqRel)
    }

    /// Allocates `lookahead_steps` steps past `reserved_end` (background
    /// work), then accepts new provisioning requests.
    pub(crate) fn provision(&self, reserved_end: u64, lookahead_steps: u64) {
        // Whole steps, so that allocations (and the page ranges populated
        // after them) stay aligned.
        let step = self.allocate_step.max(1);
        let target = (reserved_end + step * lookahead_steps).div_ceil(step) * step;
        if let Err(e) = self.allocate_to(target) {
            // A writer reaching this range will allocate it itself and report
            // the error to its caller.
            tracing::debug!(path = %self.path.display(), error = %e, "background provisioning failed");
        }
        self.provisioning.store(false, Ordering::Release);
    }

    fn allocate_to(&self, target: u64) -> io::Result<()> {
        let target = target.min(self.map_len as u64);
        let have = self.allocated.load(Ordering::Acquire);
        if target <= have {
            return Ok(());
        }
        // posix_fallocate is idempotent and safe to call concurrently: two
        // threads allocating overlapping ranges both succeed.
        // SAFETY: plain syscall on a file descriptor we own.
        let rc = unsafe {
            libc::posix_fallocate(self.file.as_raw_fd(), have as i64, (target - have) as i64)
        };
        if rc != 0 {
            return Err(io::Error::from_raw_os_error(rc));
        }
        // madvise wants a page-aligned start: begin at the page holding
        // `have` (re-populating a present page is harmless).
        let first_page = have / PAGE_BYTES * PAGE_BYTES;
        // SAFETY: the range lies inside our mapping (target <= map_len), and
        // populating only pre-faults pages, it changes no contents.
        let rc = unsafe {
            libc::madvise(
                self.map.as_mut_ptr().add(first_page as usize).cast(),
                (target - first_page) as usize,
                MADV_POPULATE_WRITE,
            )
        };
        if rc != 0 {
            // Not fatal (writers fault the pages in themselves), only slower.
            tracing::debug!(
                path = %self.path.display(),
                error = %io::Error::last_os_error(),
                "pre-faulting segment pages failed"
            );
        }
        self.allocated.fetch_max(target, Ordering::AcqRel);
        Ok(())
    }

    /// Copies `bytes` to `position`.
    ///
    /// # Safety
    /// The caller must own the range exclusively (a reservation) and have
    /// allocated it with [`Self::ensure_allocated`].
    pub(crate) unsafe fn write_at(&self, position: u32, bytes: &[u8]) {
        debug_assert!(position as usize + bytes.len() <= self.map_len);
        // SAFETY: per the contract the range is in bounds, backed, and written
        // by no one else; readers do not look at it until it is committed.
        unsafe {
            std::ptr::copy_nonoverlapping(
                bytes.as_ptr(),
                self.map.as_mut_ptr().add(position as usize),
                bytes.len(),
            );
        }
    }

    /// The bytes at `position..position + len`.
    ///
    /// # Safety
    /// The range must be committed (fully written and published), so that no
    /// writer touches it any more, and lie within the file.
    pub(crate) unsafe fn slice(&self, position: u32, len: usize) -> &[u8] {
        debug_assert!(position as usize + len <= self.map_len);
        // SAFETY: per the contract the range is immutable from now on.
        unsafe { std::slice::from_raw_parts(self.map.as_ptr().add(position as usize), len) }
    }

    /// The open file.
    pub(crate) fn fd(&self) -> std::os::fd::BorrowedFd<'_> {
        std::os::fd::AsFd::as_fd(&self.file)
    }

    /// Allocation step in bytes.
    pub(crate) fn allocate_step(&self) -> u32 {
        self.allocate_step as u32
    }

    /// Bytes mapped.
    pub(crate) fn map_len(&self) -> usize {
        self.map_len
    }

    /// Forces written data (and the file size) to stable storage.
    pub(crate) fn sync(&self) -> io::Result<()> {
        self.file.sync_data()
    }

    /// Cuts the file to `len` bytes and syncs it. Only for a segment no
    /// writer can touch any more.
    pub(crate) fn truncate(&self, len: u64) -> io::Result<()> {
        self.file.set_len(len)?;
        self.allocated.store(len, Ordering::Release);
        self.file.sync_all()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn background_provisioning_keeps_allocations_step_aligned() {
        let dir = tempfile::tempdir().expect("tempdir");
        let step = 1024 * 1024;
        let file =
            MappedFile::open_writable(&dir.path().join("s.log"), 64 * step, step).expect("open");
        // A reserved end in the middle of a page, as appends leave it.
        for reserved_end in [
            12_345u64,
            3 * u64::from(step) + 77,
            9 * u64::from(step) + 4_097,
        ] {
            file.provision(reserved_end, 2);
            let allocated = file.allocated.load(Ordering::Acquire);
            assert_eq!(allocated % u64::from(step), 0, "after {reserved_end}");
            assert!(allocated >= reserved_end + 2 * u64::from(step));
        }
    }
}
