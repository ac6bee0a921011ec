//! Completion tracking and the committed tail (the segment's high watermark).
//!
//! A writer that has copied its batch sets one bit for the 64-byte block its
//! batch starts in. Every valid batch is longer than 64 bytes
//! ([`herald_records::BATCH_BYTES_MIN`]), so no two batches start in the same
//! block and the bit identifies the batch. The committed tail is then moved
//! past every contiguous completed batch by whichever writer finds it
//! completable: it reads the length and offset count of the batch at the tail
//! from the batch's own header, and compare-and-swaps the tail forward. No
//! writer waits for another; a slow writer only holds back the tail.

use crate::extent::Extent;
use crate::sync::{dekker_point, zeroed_atomics, AtomicU64, Ordering};

/// Where the tracker learns the size of a completed batch.
pub(crate) trait BatchSizes {
    /// Total bytes and offset count of the batch starting at `position`, or
    /// `None` if its header gives no length that fits the reserved bytes
    /// (only a fault in the write path can leave such a header).
    ///
    /// Called only for a batch whose completion bit has been observed, so its
    /// header is fully written and visible.
    fn batch_at(&self, position: u32) -> Option<(u32, u32)>;
}

const BLOCK_SHIFT: u32 = 6;

// A completion bit names the batch that starts in its block only if no two
// batches can start in one block.
const _: () = assert!(
    herald_records::BATCH_BYTES_MIN >= 1 << BLOCK_SHIFT,
    "a completion block must be no larger than the smallest batch"
);

/// Completion bits and committed tail of one segment.
pub(crate) struct CommitTracker {
    committed: AtomicU64,
    done: Box<[AtomicU64]>,
}

impl CommitTracker {
    /// A tracker for a segment of `capacity_bytes` whose first `start` are
    /// already committed.
    pub(crate) fn new(capacity_bytes: u32, start: Extent) -> Self {
        let blocks = (capacity_bytes as usize >> BLOCK_SHIFT) + 1;
        Self {
            committed: AtomicU64::new(start.pack()),
            done: zeroed_atomics(blocks.div_ceil(64)),
        }
    }

    /// A tracker for a segment that is complete and takes no appends.
    pub(crate) fn new_complete(end: Extent) -> Self {
        Self {
            committed: AtomicU64::new(end.pack()),
            done: Box::new([]),
        }
    }

    /// The committed tail: every batch before it is complete and visible.
    pub(crate) fn committed(&self) -> Extent {
        // Acquire pairs with the Release of the advancing CAS, so the batches
        // (and their index entries) before the tail are visible to the caller.
        Extent::unpack(self.committed.load(Ordering::Acquire))
    }

    /// Marks the batch starting at `position` as completely written.
    pub(crate) fn complete(&self, position: u32) {
        let block = (position >> BLOCK_SHIFT) as usize;
        // SeqCst: this store and the later SeqCst load of the tail in
        // `advance` form a Dekker pair with the writer of the batch at the
        // tail, which sets its own bit and then loads ours. At least one of
        // the two sees the other's bit, so a completed batch is never left
        // behind with nobody advancing past it. It also releases the batch
        // bytes to whoever reads the bit.
        self.done[block / 64].fetch_or(1 << (block % 64), Ordering::SeqCst);
    }

    fn is_complete(&self, position: u32) -> bool {
        let block = (position >> BLOCK_SHIFT) as usize;
        match self.done.get(block / 64) {
            Some(word) => word.load(Ordering::SeqCst) & (1 << (block % 64)) != 0,
            None => false,
        }
    }

    /// Publishes the completely written batch at `start` (occupying
    /// `bytes` and `records`) and moves the tail as far as it can go.
    /// Returns true if this call moved the tail.
    pub(crate) fn publish(
        &self,
        start: Extent,
        bytes: u32,
        records: u32,
        sizes: &impl BatchSizes,
    ) -> bool {
        let tail = self.committed.load(Ordering::SeqCst);
        if tail == start.pack() {
            // The batch sits at the tail, so no other thread can move the tail
            // past it (that needs its completion bit): move it directly and
            // skip the bit. Any later batch whose writer found this one
            // incomplete set its own bit before loading the tail, which was
            // before this CAS; `advance` below then sees that bit.
            let end = Extent::new(start.records + records, start.bytes + bytes).pack();
            let moved =
                self.committed
                    .compare_exchange(tail, end, Ordering::SeqCst, Ordering::SeqCst);
            debug_assert!(
                moved.is_ok(),
                "only the owner of the batch at the tail moves it"
            );
            self.advance(sizes);
            return true;
        }
        self.complete(start.bytes);
        self.advance(sizes)
    }

    /// Moves the committed tail past every contiguous completed batch.
    /// Returns true if this call moved it.
    pub(crate) fn advance(&self, sizes: &impl BatchSizes) -> bool {
        let mut moved = false;
        // Every caller arrives here right after a SeqCst read-modify-write
        // (its completion bit, or its own move of the tail).
        dekker_point();
        let mut current = self.committed.load(Ordering::SeqCst);
        loop {
            let tail = Extent::unpack(current);
            if !self.is_complete(tail.bytes) {
                return moved;
            }
            let Some((bytes, records)) = sizes.batch_at(tail.bytes) else {
                // Moving past a damaged header would publish garbage (and a
                // zero length would spin here): the tail stays where it is,
                // and the log refuses the appends behind it (`Log::fill`).
                return moved;
            };
            let next = Extent::new(tail.records + records, tail.bytes + bytes).pack();
            // Release publishes the batch to readers that Acquire the tail.
            match self
                .committed
                .compare_exchange(current, next, Ordering::SeqCst, Ordering::SeqCst)
            {
                Ok(_) => {
                    moved = true;
                    current = next;
                    dekker_point();
                }
                Err(actual) => current = actual,
            }
        }
    }
}
