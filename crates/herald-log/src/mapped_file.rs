//! A segment's file, mapped into memory, with disk space allocated ahead of
//! the writers.
//!
//! Space is allocated with `posix_fallocate` before any writer touches it:
//! a store into a mapped page the filesystem cannot back (disk full) would
//! kill the process with SIGBUS, and this way a full disk comes back as an
//! ordinary error.
//!
//! Small batches are copied into the mapping. For them the newly allocated
//! range is pre-faulted (`MADV_POPULATE_WRITE`), so that writers do not take
//! a page fault per 4 KiB on the hot path. Large batches are written with
//! `pwritev(2)` instead: a page that a write fills is never zeroed first,
//! while a mapped page must be (by the fault or by pre-faulting) before the
//! copy overwrites it, and on tmpfs that zeroing and mapping cost more than
//! the copy itself. The file system lets one write into a file at a time, so
//! a large batch that finds another writer in `pwritev` is copied through
//! the mapping instead: no writer waits for another's copy. (A `pwritev`
//! does wait for an `fallocate` call in progress on the file, at most one
//! 1 MiB piece.) The file pre-faults
//! only while the recent writes go through the mapping. Both paths put the
//! bytes in the same page cache, which the mapping reads, so readers see no
//! difference.

use crate::provisioner::policy;
use crate::sync::{AtomicBool, AtomicU64, Ordering};
use parking_lot::{Mutex, MutexGuard};
use std::fs::{File, OpenOptions};
use std::io;
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};

use memmap2::{MmapOptions, MmapRaw};

/// `MADV_POPULATE_WRITE` (Linux 5.14); older kernels answer EINVAL and the
/// pages are simply faulted in by the writers.
const MADV_POPULATE_WRITE: libc::c_int = 23;

/// The page size `madvise` ranges are aligned to (the smallest Linux uses;
/// aligning to it is also aligned for larger pages' callers here, since
/// allocation steps are whole MiB).
const PAGE_BYTES: u64 = 4096;

/// Bytes allocated per `posix_fallocate` call.
const ALLOCATE_CALL_BYTES: u64 = 1024 * 1024;

/// Batches at least this large are written with `pwritev(2)` rather than
/// copied into the mapping (see the module comment). Below it, the mapping
/// wins although it costs more CPU in all: the provisioner zeroes the pages
/// on another core ahead of time, while a `pwritev` prepares them inline and
/// may wait for the provisioner's `fallocate`. Measured with one publisher
/// at 75 kB batches (1024 records), `pwritev` cut CPU per message by 8% but
/// throughput by a quarter, and nearly doubled the p99 latency.
const WRITE_SYSCALL_BYTES_MIN: usize = 512 * 1024;

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
    /// The latest write went through the mapping, so pre-faulting the pages
    /// ahead pays off.
    mapped_writes: AtomicBool,
    /// A writer is in `pwritev` on this file.
    syscall_busy: AtomicBool,
    /// Held around each `pwritev` and each `fallocate` call. The kernel
    /// lets only one of them into the file at a time anyway, and the one
    /// that waits spins on a core for as long as the other runs (13.5% of
    /// herald's CPU at 16384-record batches, one publisher); waiting here
    /// sleeps instead.
    file_calls: Mutex<()>,
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
            mapped_writes: AtomicBool::new(true),
            syscall_busy: AtomicBool::new(false),
            file_calls: Mutex::new(()),
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
            mapped_writes: AtomicBool::new(true),
            syscall_busy: AtomicBool::new(false),
            file_calls: Mutex::new(()),
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

    /// Makes sure bytes `..end` are backed by allocated disk space,
    /// allocating up to the next step boundary if they are not.
    pub(crate) fn ensure_allocated(&self, end: u64) -> io::Result<()> {
        if end <= self.allocated.load(Ordering::Acquire) {
            return Ok(());
        }
        self.allocate_to(
            end.div_ceil(self.allocate_step.max(1)) * self.allocate_step.max(1),
            None,
        )
    }

    /// True if the writers at `reserved_end` want space allocated ahead of
    /// them ([`policy::wants_allocation`]) and nobody is provisioning yet;
    /// the caller then queues a provisioning request (and this returns
    /// false until it has run).
    pub(crate) fn wants_provisioning(&self, reserved_end: u64) -> bool {
        policy::wants_allocation(
            reserved_end,
            self.allocated.load(Ordering::Relaxed),
            self.allocate_step,
            self.map_len as u64,
        ) && !self.provisioning.swap(true, Ordering::AcqRel)
    }

    /// Allocates up to [`policy::target`] past `reserved_end` (background
    /// work), then accepts new provisioning requests. `writers_at` reads
    /// where the writers have reserved up to by now, or `None` once the
    /// segment is sealed: then nothing more will be written, the file may be
    /// trimmed to its data, and provisioning stops.
    pub(crate) fn provision(&self, reserved_end: u64, writers_at: &dyn Fn() -> Option<u64>) {
        let target = policy::target(reserved_end, self.allocate_step);
        if let Err(e) = self.allocate_to(target, Some(writers_at)) {
            // A writer reaching this range will allocate it itself and report
            // the error to its caller.
            tracing::debug!(path = %self.path.display(), error = %e, "background provisioning failed");
        }
        self.provisioning.store(false, Ordering::Release);
    }

    /// Allocates (and, for mapped writes, pre-faults) up to `target`.
    /// `background` is the provisioner's view of the writers (see
    /// [`Self::provision`]); a writer allocating for itself passes `None`.
    fn allocate_to(
        &self,
        target: u64,
        background: Option<&dyn Fn() -> Option<u64>>,
    ) -> io::Result<()> {
        let target = target.min(self.map_len as u64);
        let have = self.allocated.load(Ordering::Acquire);
        if target <= have {
            return Ok(());
        }
        let populate = self.mapped_writes.load(Ordering::Relaxed);
        // In pieces: the file system holds the file's lock for a whole call,
        // and a writer's `pwritev` waits for it. Each piece is published at
        // once, so that a writer arriving meanwhile does not allocate it
        // again.
        let mut from = have;
        let mut populated = have;
        while from < target {
            let to = (from + ALLOCATE_CALL_BYTES).min(target);
            let turn = self.file_call_turn();
            // Read under the turn, which `truncate` takes too: a sealed
            // segment's file is trimmed to its data and must not grow back.
            let writers = match background.map(|writers_at| writers_at()) {
                Some(None) => return Ok(()),
                writers => writers.flatten(),
            };
            // Another allocator may have covered this piece meanwhile.
            if to > self.allocated.load(Ordering::Acquire) {
                // posix_fallocate is idempotent: a range allocated twice is
                // still allocated once.
                // SAFETY: plain syscall on a file descriptor we own.
                let rc = unsafe {
                    libc::posix_fallocate(self.file.as_raw_fd(), from as i64, (to - from) as i64)
                };
                if rc != 0 {
                    return Err(io::Error::from_raw_os_error(rc));
                }
                self.allocated.fetch_max(to, Ordering::AcqRel);
            }
            // Handed straight to a writer waiting for `pwritev`: released
            // the usual way, the turn could go back to this loop's next
            // piece before the woken writer runs, again and again.
            MutexGuard::unlock_fair(turn);
            from = to;
            // Far ahead of the writers, the page work can wait: the request
            // threads sharing the cores get them first, which is what keeps
            // the latency tail short at light load. Close to the writers it
            // must not wait, or they overtake it and fault pages in
            // themselves, at a higher cost.
            if policy::unhurried(to, writers, self.allocate_step) {
                if populate {
                    self.populate(populated, to);
                    populated = to;
                }
                std::thread::yield_now();
            }
        }
        if populate && populated < target {
            self.populate(populated, target);
        }
        Ok(())
    }

    fn populate(&self, from: u64, to: u64) {
        // madvise wants a page-aligned start: begin at the page holding
        // `from` (re-populating a present page is harmless).
        let first_page = from / PAGE_BYTES * PAGE_BYTES;
        // SAFETY: the range lies inside our mapping (to <= map_len), and
        // populating only pre-faults pages, it changes no contents.
        let rc = unsafe {
            libc::madvise(
                self.map.as_mut_ptr().add(first_page as usize).cast(),
                (to - first_page) as usize,
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
    }

    /// Writes a batch whose first bytes are `header` (its stamped copy) and
    /// the rest `body`, at `position`.
    ///
    /// # Safety
    /// The caller must own the range exclusively (a reservation) and have
    /// allocated it with [`Self::ensure_allocated`].
    pub(crate) unsafe fn write_batch_at(&self, position: u32, header: &[u8], body: &[u8]) {
        let len = header.len() + body.len();
        debug_assert!(position as usize + len <= self.map_len);
        let mapped = len < WRITE_SYSCALL_BYTES_MIN;
        if self.mapped_writes.load(Ordering::Relaxed) != mapped {
            self.mapped_writes.store(mapped, Ordering::Relaxed);
        }
        // The file system serializes writes to a file, and a writer waiting
        // for another spins in the kernel. A writer that finds the system
        // call path taken copies through the mapping instead: it pays for
        // zeroing the pages, but never waits for another writer's copy.
        if !mapped && !self.syscall_busy.swap(true, Ordering::Acquire) {
            let written = {
                let _turn = self.file_call_turn();
                self.write_with_syscalls(u64::from(position), header, body)
            };
            self.syscall_busy.store(false, Ordering::Release);
            match written {
                Ok(()) => return,
                // Copying the whole batch again through the mapping is
                // always valid: the range is allocated and ours.
                Err(error) => tracing::debug!(
                    path = %self.path.display(),
                    %error,
                    "write failed; copying through the mapping"
                ),
            }
        }
        let copy = |at: usize, bytes: &[u8]| {
            // SAFETY: per the contract the range is in bounds, backed, and
            // written by no one else; readers do not look at it until it is
            // committed.
            unsafe {
                std::ptr::copy_nonoverlapping(
                    bytes.as_ptr(),
                    self.map.as_mut_ptr().add(position as usize + at),
                    bytes.len(),
                );
            }
        };
        copy(0, header);
        copy(header.len(), body);
    }

    /// The turn to make a `pwritev` or `fallocate` call on the file.
    fn file_call_turn(&self) -> MutexGuard<'_, ()> {
        self.file_calls.lock()
    }

    /// Writes `header` then `body` at `offset` in one `pwritev(2)`. A short
    /// write counts as a failure: the caller then copies the whole batch.
    fn write_with_syscalls(&self, offset: u64, header: &[u8], body: &[u8]) -> io::Result<()> {
        let iov = [
            libc::iovec {
                iov_base: header.as_ptr() as *mut libc::c_void,
                iov_len: header.len(),
            },
            libc::iovec {
                iov_base: body.as_ptr() as *mut libc::c_void,
                iov_len: body.len(),
            },
        ];
        // SAFETY: both buffers are valid for their lengths for the whole
        // call, and the kernel only reads them; the descriptor is ours.
        let rc = unsafe {
            libc::pwritev(
                self.file.as_raw_fd(),
                iov.as_ptr(),
                2,
                offset as libc::off_t,
            )
        };
        if rc < 0 {
            return Err(io::Error::last_os_error());
        }
        if rc as usize != header.len() + body.len() {
            return Err(io::Error::new(
                io::ErrorKind::WriteZero,
                format!("short write of {rc} bytes"),
            ));
        }
        Ok(())
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
        {
            // Not between a background allocation's check and its call.
            let _turn = self.file_call_turn();
            self.file.set_len(len)?;
            self.allocated.store(len, Ordering::Release);
        }
        self.file.sync_all()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The allocation step of the test files.
    const STEP: u32 = 1024 * 1024;

    /// A fresh writable file of 64 steps (the directory lives as long as
    /// the returned guard).
    fn segment_file() -> (tempfile::TempDir, MappedFile) {
        let dir = tempfile::tempdir().expect("tempdir");
        let file =
            MappedFile::open_writable(&dir.path().join("s.log"), 64 * STEP, STEP).expect("open");
        (dir, file)
    }

    #[test]
    fn background_provisioning_keeps_allocations_step_aligned() {
        let (_dir, file) = segment_file();
        let step = u64::from(STEP);
        // A reserved end in the middle of a page, as appends leave it.
        for reserved_end in [12_345u64, 3 * step + 77, 9 * step + 4_097] {
            file.provision(reserved_end, &|| Some(reserved_end));
            let allocated = file.allocated.load(Ordering::Acquire);
            assert_eq!(allocated % step, 0, "after {reserved_end}");
            assert!(allocated >= reserved_end + 2 * step);
        }
    }

    #[test]
    fn provisioning_far_ahead_of_the_writers_still_reaches_its_target() {
        let (_dir, file) = segment_file();
        let step = u64::from(STEP);
        // Writers still at 0: every piece past the second step yields.
        file.provision(5 * step + 123, &|| Some(0));
        assert_eq!(file.allocated.load(Ordering::Acquire), 10 * step);
        assert_eq!(file.file_len().expect("len"), 10 * step);
    }

    #[test]
    fn provisioning_stops_once_the_segment_is_sealed() {
        let (_dir, file) = segment_file();
        file.provision(0, &|| Some(0));
        // Sealed and trimmed to its data, as `finalize_sealed` leaves it; a
        // provisioning run that was already queued must not grow it back.
        file.truncate(5000).expect("trim");
        file.provision(5000, &|| None);
        assert_eq!(file.file_len().expect("len"), 5000);
        assert_eq!(file.allocated.load(Ordering::Acquire), 5000);
    }
}
