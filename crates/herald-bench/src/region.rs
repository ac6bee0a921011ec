//! A pre-faulted byte buffer that several threads may write at disjoint
//! places: the storage of the mutex baseline and of the memcpy bound.
//!
//! Pre-faulting matters: a fresh allocation of this size is mapped lazily by
//! the kernel, and the first touch of each page would be measured as part of
//! the baseline's copy. The baselines are meant to show the cost of the copy
//! and of the lock alone.

use std::cell::UnsafeCell;

const PAGE_BYTES: usize = 4096;

/// A fixed-size, pre-faulted buffer with interior mutability.
pub struct Region {
    cells: Box<[UnsafeCell<u8>]>,
}

// SAFETY: `Region` hands out writes only through `write`, whose contract makes
// the caller guarantee that no two threads touch the same bytes concurrently
// (the mutex baseline writes under its lock, the memcpy bound uses `&mut`),
// and reads only of bytes whose writes happen-before the read.
unsafe impl Sync for Region {}

impl Region {
    /// Allocates `len` bytes and touches every page so that none faults later.
    pub fn prefaulted(len: usize) -> Self {
        let mut bytes = vec![0u8; len].into_boxed_slice();
        // A non-zero store forces the kernel to back the page with real memory
        // (a read of a zero page would map the shared zero page instead).
        for page in bytes.chunks_mut(PAGE_BYTES) {
            page[0] = 1;
        }
        let raw = Box::into_raw(bytes) as *mut [UnsafeCell<u8>];
        // SAFETY: `UnsafeCell<u8>` is `repr(transparent)` over `u8`, so the
        // slice has the same layout; the box is rebuilt from the pointer it
        // came from, so ownership passes over intact.
        let cells = unsafe { Box::from_raw(raw) };
        Self { cells }
    }

    /// Allocates `len` zeroed bytes without touching them: the kernel maps
    /// each page on its first write, inside whatever is being timed.
    pub fn fresh(len: usize) -> Self {
        let bytes = vec![0u8; len].into_boxed_slice();
        let raw = Box::into_raw(bytes) as *mut [UnsafeCell<u8>];
        // SAFETY: as in `prefaulted`.
        let cells = unsafe { Box::from_raw(raw) };
        Self { cells }
    }

    /// Size in bytes.
    pub fn len(&self) -> usize {
        self.cells.len()
    }

    /// Whether the region has no bytes.
    pub fn is_empty(&self) -> bool {
        self.cells.is_empty()
    }

    /// The whole region, exclusively (for the memcpy bound, which splits it
    /// into one slice per thread).
    pub fn as_mut_slice(&mut self) -> &mut [u8] {
        let len = self.cells.len();
        let start = UnsafeCell::raw_get(self.cells.as_mut_ptr());
        // SAFETY: `&mut self` excludes every other access for the borrow's
        // life, and the pointer and length describe the whole allocation.
        unsafe { std::slice::from_raw_parts_mut(start, len) }
    }

    /// Copies `src` to `at` through a shared reference.
    ///
    /// # Safety
    ///
    /// No other thread may read or write `at..at + src.len()` during the call,
    /// and `at + src.len()` must not exceed [`Region::len`].
    pub unsafe fn write(&self, at: usize, src: &[u8]) {
        debug_assert!(at + src.len() <= self.len());
        // SAFETY: in bounds per the contract, and nobody else touches these
        // bytes now; `src` cannot overlap them, since the caller's shared
        // borrow of `src` would then alias bytes the contract says are ours.
        unsafe {
            let dst = UnsafeCell::raw_get(self.cells.as_ptr().add(at));
            std::ptr::copy_nonoverlapping(src.as_ptr(), dst, src.len());
        }
    }

    /// Views `start..end` as bytes.
    ///
    /// # Safety
    ///
    /// Every write to the range must happen-before this call, and no write to
    /// it may happen while the returned slice lives.
    pub unsafe fn slice(&self, start: usize, end: usize) -> &[u8] {
        let cells = &self.cells[start..end];
        // SAFETY: the range is in bounds (checked by the indexing above) and,
        // per the contract, not written while the slice lives.
        unsafe { std::slice::from_raw_parts(UnsafeCell::raw_get(cells.as_ptr()), cells.len()) }
    }
}
