//! A hint to the CPU to bring a value into the cache ahead of its use.
//!
//! The delivery path looks up many keys in a table far larger than the
//! cache, and each lookup is a chain of dependent loads. Done one key at a
//! time, every miss waits for the one before; asking for the lines of
//! several keys first lets their misses overlap (see
//! [`crate::TableReader::matches_of`]).

/// Bytes of a cache line on the targets herald runs on.
const LINE: usize = 64;

/// Asks for the cache line holding the start of `value`. Only a hint: it
/// changes no memory and no result, and does nothing where the target has
/// no prefetch instruction.
#[inline(always)]
pub fn prefetch<T>(value: &T) {
    prefetch_address((value as *const T).cast());
}

/// Asks for every cache line `value` spans, for a value read across
/// several of them (a struct larger than a line, or one straddling two).
#[inline(always)]
pub fn prefetch_lines<T>(value: &T) {
    let start = (value as *const T).cast::<u8>();
    for offset in line_offsets(start as usize, std::mem::size_of::<T>()) {
        prefetch_address(start.wrapping_offset(offset));
    }
}

/// The offsets from `address` of the start of each cache line that the
/// `size` bytes from `address` touch, first to last (none for no bytes).
#[inline(always)]
fn line_offsets(address: usize, size: usize) -> impl Iterator<Item = isize> {
    let first = address & !(LINE - 1);
    let lines = if size == 0 {
        0
    } else {
        (address.wrapping_add(size - 1) & !(LINE - 1)).wrapping_sub(first) / LINE + 1
    };
    (0..lines).map(move |i| (first.wrapping_add(i * LINE)).wrapping_sub(address) as isize)
}

#[inline(always)]
fn prefetch_address(address: *const u8) {
    // SAFETY: SSE, which the instruction needs, is part of every x86_64
    // target; a prefetch reads and writes no memory and cannot fault, so
    // any address is sound.
    #[cfg(target_arch = "x86_64")]
    unsafe {
        core::arch::x86_64::_mm_prefetch::<{ core::arch::x86_64::_MM_HINT_T0 }>(address.cast());
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = address;
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every line a value touches is asked for, once, from its start, and
    /// no other.
    #[test]
    fn the_lines_asked_for_are_exactly_those_the_bytes_touch() {
        for address in 0..200usize {
            for size in 0..300usize {
                let touched: Vec<usize> = (address..address + size)
                    .map(|byte| byte / LINE)
                    .collect::<std::collections::BTreeSet<_>>()
                    .into_iter()
                    .collect();
                let asked: Vec<usize> = line_offsets(address, size)
                    .map(|offset| {
                        let line_start = (address as isize + offset) as usize;
                        assert_eq!(line_start % LINE, 0, "{address} {size}");
                        line_start / LINE
                    })
                    .collect();
                assert_eq!(asked, touched, "address {address}, size {size}");
            }
        }
    }
}
