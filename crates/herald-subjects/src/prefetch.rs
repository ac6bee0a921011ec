//! A hint to the CPU to bring a value into the cache ahead of its use.
//!
//! The delivery path looks up many keys in a table far larger than the
//! cache, and each lookup is a chain of dependent loads. Done one key at a
//! time, every miss waits for the one before; asking for the lines of
//! several keys first lets their misses overlap (see
//! [`crate::TableReader::matches_of`]).

/// Asks for the cache line holding the start of `value`. Only a hint: it
/// changes no memory and no result, and does nothing where the target has
/// no prefetch instruction.
#[inline(always)]
pub fn prefetch<T>(value: &T) {
    // SAFETY: SSE, which the instruction needs, is part of every x86_64
    // target; a prefetch reads and writes no memory, so any address is
    // sound, and this one is a live reference's.
    #[cfg(target_arch = "x86_64")]
    unsafe {
        core::arch::x86_64::_mm_prefetch::<{ core::arch::x86_64::_MM_HINT_T0 }>(
            (value as *const T).cast(),
        );
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = value;
}
