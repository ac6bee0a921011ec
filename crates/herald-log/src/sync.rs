//! One place for the synchronisation primitives of the lock-free protocol, so
//! that `--cfg loom` swaps them for loom's model-checked versions (as tokio's
//! `loom` shim does). Production code imports atomics only from here.

// Only the protocol (reservation, completion, index) is model-checked; the
// segment chain and files are not compiled under loom.
#[cfg(herald_loom)]
pub(crate) use loom::sync::atomic::{AtomicU64, Ordering};

#[cfg(not(herald_loom))]
pub(crate) use std::sync::atomic::{
    AtomicBool, AtomicI64, AtomicPtr, AtomicU32, AtomicU64, AtomicU8, Ordering,
};
#[cfg(not(herald_loom))]
pub(crate) use std::sync::Arc;

/// Statistics counters (flush counts and latencies): never part of a
/// protocol the models check, and built in `const` context for the
/// process-wide figures, so they stay std atomics under loom as well.
pub(crate) mod counters {
    pub(crate) use std::sync::atomic::{AtomicU64, Ordering};
}

/// The store-buffering (Dekker) point of the commit protocol: a SeqCst
/// read-modify-write by this thread (setting a completion bit, or moving the
/// tail) followed by a SeqCst load of the other side. Under the C++/Rust
/// model, SeqCst accesses alone forbid both threads missing each other's
/// write. loom models SeqCst accesses only as AcqRel (a documented
/// limitation) but models `fence(SeqCst)` exactly, so under loom the point
/// gets an explicit fence and the model checks the same guarantee.
#[inline(always)]
pub(crate) fn dekker_point() {
    #[cfg(herald_loom)]
    loom::sync::atomic::fence(Ordering::SeqCst);
}

/// `n` atomics initialised to zero.
///
/// Outside loom the memory comes from the zeroing allocator, so a large index
/// for a segment that is only partly used costs address space, not touched
/// pages.
#[cfg(not(herald_loom))]
pub(crate) fn zeroed_atomics(n: usize) -> Box<[AtomicU64]> {
    let zeros: Box<[u64]> = vec![0u64; n].into_boxed_slice();
    let raw = Box::into_raw(zeros) as *mut [AtomicU64];
    // SAFETY: AtomicU64 has the same size, alignment and bit validity as u64
    // (documented by std), and the box owns the allocation we reinterpret.
    unsafe { Box::from_raw(raw) }
}

/// `n` atomics initialised to zero (loom version).
#[cfg(herald_loom)]
pub(crate) fn zeroed_atomics(n: usize) -> Box<[AtomicU64]> {
    (0..n).map(|_| AtomicU64::new(0)).collect()
}
