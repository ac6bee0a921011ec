//! Receive buffers for large request frames, recycled across requests.
//!
//! A produce request of 16384 records is over a megabyte. Read into a growing
//! connection buffer, such a frame was copied each time the buffer grew, and
//! the allocator handed its pages back to the kernel on free, so the next
//! frame faulted and zeroed every page again: a fifth of the broker's CPU at
//! that batch size. A large frame is instead read straight into a buffer of
//! its exact size taken from this pool, and the buffer comes back when the
//! last reference to the frame (the handler's, after the append) is dropped.
//!
//! The pool is server-wide and bounded in bytes, so idle connections hold
//! nothing and the memory kept is the same however many clients there are.

use std::sync::{Arc, Mutex};

use bytes::Bytes;

/// Recycled frame buffers, shared by every connection of a server.
#[derive(Debug)]
pub(crate) struct FrameBuffers {
    free: Mutex<Free>,
    /// Buffers larger than this are neither pooled nor kept.
    buffer_max: usize,
    /// Bytes of capacity the pool keeps while nobody uses them.
    retained_max: usize,
}

#[derive(Debug, Default)]
struct Free {
    buffers: Vec<Vec<u8>>,
    bytes: usize,
}

impl FrameBuffers {
    /// A pool that keeps buffers of up to `buffer_max` bytes, `retained_max`
    /// bytes of them in all.
    pub(crate) fn new(buffer_max: usize, retained_max: usize) -> Self {
        Self {
            free: Mutex::new(Free::default()),
            buffer_max,
            retained_max,
        }
    }

    /// True if a frame of `size` bytes is read through the pool.
    pub(crate) fn serves(&self, size: usize) -> bool {
        size <= self.buffer_max
    }

    /// An empty buffer with room for `size` bytes: the smallest free one
    /// that is large enough, or a new one.
    pub(crate) fn take(&self, size: usize) -> Vec<u8> {
        let mut free = self.free.lock().unwrap_or_else(|p| p.into_inner());
        let best = free
            .buffers
            .iter()
            .enumerate()
            .filter(|(_, b)| b.capacity() >= size)
            .min_by_key(|(_, b)| b.capacity())
            .map(|(i, _)| i);
        if let Some(i) = best {
            let buffer = free.buffers.swap_remove(i);
            free.bytes -= buffer.capacity();
            return buffer;
        }
        drop(free);
        Vec::with_capacity(size)
    }

    /// Freezes a filled buffer into a frame that returns the buffer to the
    /// pool when its last reference is dropped.
    pub(crate) fn frame(self: &Arc<Self>, buffer: Vec<u8>) -> Bytes {
        Bytes::from_owner(Pooled {
            buffer,
            home: Arc::clone(self),
        })
    }

    fn give_back(&self, mut buffer: Vec<u8>) {
        let capacity = buffer.capacity();
        if capacity == 0 || capacity > self.buffer_max {
            return;
        }
        buffer.clear();
        let mut free = self.free.lock().unwrap_or_else(|p| p.into_inner());
        // Over the bound, smaller buffers make room for this one: the larger
        // ones are the costly ones to fault in again.
        while free.bytes + capacity > self.retained_max {
            let smallest = free
                .buffers
                .iter()
                .enumerate()
                .min_by_key(|(_, b)| b.capacity())
                .map(|(i, b)| (i, b.capacity()));
            match smallest {
                Some((i, small)) if small < capacity => {
                    free.buffers.swap_remove(i);
                    free.bytes -= small;
                }
                _ => return,
            }
        }
        free.bytes += capacity;
        free.buffers.push(buffer);
    }

    /// Bytes of capacity held for reuse.
    #[cfg(test)]
    pub(crate) fn retained_bytes(&self) -> usize {
        self.free.lock().unwrap_or_else(|p| p.into_inner()).bytes
    }
}

/// A frame's buffer on loan from the pool.
struct Pooled {
    buffer: Vec<u8>,
    home: Arc<FrameBuffers>,
}

impl AsRef<[u8]> for Pooled {
    fn as_ref(&self) -> &[u8] {
        &self.buffer
    }
}

impl Drop for Pooled {
    fn drop(&mut self) {
        self.home.give_back(std::mem::take(&mut self.buffer));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_dropped_frame_returns_its_buffer_for_the_next_one() {
        let pool = Arc::new(FrameBuffers::new(1 << 20, 4 << 20));
        let mut buffer = pool.take(100_000);
        buffer.extend_from_slice(&[7u8; 100_000]);
        let address = buffer.as_ptr();
        let frame = pool.frame(buffer);
        let slice = frame.slice(10..20);
        drop(frame);
        // A slice still refers to the buffer: nothing is returned yet.
        assert_eq!(pool.retained_bytes(), 0);
        assert_eq!(&slice[..], &[7u8; 10]);
        drop(slice);
        assert!(pool.retained_bytes() >= 100_000);
        let again = pool.take(90_000);
        assert_eq!(again.as_ptr(), address, "the same memory is reused");
        assert!(again.is_empty());
        assert_eq!(pool.retained_bytes(), 0);
    }

    #[test]
    fn the_pool_stays_within_its_byte_bound_and_keeps_larger_buffers() {
        let pool = Arc::new(FrameBuffers::new(1 << 20, 300_000));
        let frames: Vec<Bytes> = [100_000, 100_000, 150_000, 2 << 20]
            .into_iter()
            .map(|size| {
                let mut b = Vec::with_capacity(size);
                b.resize(size, 1);
                pool.frame(b)
            })
            .collect();
        drop(frames);
        // The 100 kB buffer made room for the 150 kB one; the 2 MiB one is
        // over the per-buffer bound and was not kept.
        assert_eq!(pool.retained_bytes(), 250_000);
        assert_eq!(pool.take(150_000).capacity(), 150_000);
        assert_eq!(pool.take(100_000).capacity(), 100_000);
        assert_eq!(pool.retained_bytes(), 0);
    }
}
