//! The sparse offset index and time index of one segment.
//!
//! The segment is cut into buckets of `index_interval_bytes`. Bucket `k`
//! holds:
//! - the (relative offset, position) of the batch that contains byte
//!   `k * interval`: written by that batch's writer with a plain store, so
//!   there is exactly one writer per entry and entries are monotone;
//! - the largest timestamp of any batch overlapping the bucket, kept with
//!   `fetch_max` by every such writer.
//!
//! Entries are written before the batch completes, so everything a reader
//! finds below the committed tail is in place. An entry never written reads
//! as (0, 0), the segment start: a lookup through it is slower, never wrong.

use crate::extent::Extent;
use crate::sync::{zeroed_atomics, AtomicU64, Ordering};

/// Timestamps are stored with the sign bit flipped, so that unsigned order is
/// signed order and an untouched (zero) entry means `i64::MIN`.
fn encode_timestamp(timestamp: i64) -> u64 {
    (timestamp as u64) ^ (1 << 63)
}

fn decode_timestamp(stored: u64) -> i64 {
    (stored ^ (1 << 63)) as i64
}

/// Offset and time index buckets of one segment.
pub(crate) struct SegmentIndex {
    interval_shift: u32,
    entries: Box<[AtomicU64]>,
    max_timestamps: Box<[AtomicU64]>,
}

impl SegmentIndex {
    /// An empty index for a segment of `capacity_bytes`.
    pub(crate) fn new(capacity_bytes: u32, interval_bytes: u32) -> Self {
        let interval_shift = interval_bytes.trailing_zeros();
        let buckets = (capacity_bytes >> interval_shift) as usize + 1;
        Self {
            interval_shift,
            entries: zeroed_atomics(buckets),
            max_timestamps: zeroed_atomics(buckets),
        }
    }

    /// Bytes per bucket.
    pub(crate) fn interval_bytes(&self) -> u32 {
        1 << self.interval_shift
    }

    /// Number of buckets that cover `bytes` of data.
    pub(crate) fn buckets_for(&self, bytes: u32) -> usize {
        if bytes == 0 {
            0
        } else {
            ((bytes - 1) >> self.interval_shift) as usize + 1
        }
    }

    /// Records a batch at `position` of `length` bytes whose first offset is
    /// `relative_offset` and whose records reach `max_timestamp`.
    pub(crate) fn record(
        &self,
        position: u32,
        length: u32,
        relative_offset: u32,
        max_timestamp: i64,
    ) {
        let shift = self.interval_shift;
        let last_byte = position + length - 1;
        let first_bucket = (position >> shift) as usize;
        let last_bucket = (last_byte >> shift) as usize;
        // Buckets whose first byte lies inside this batch point at it.
        let first_owned = ((position + (1 << shift) - 1) >> shift) as usize;
        let entry = Extent::new(relative_offset, position).pack();
        for slot in &self.entries[first_owned.min(last_bucket + 1)..=last_bucket] {
            // Relaxed: published by the Release that completes the batch.
            slot.store(entry, Ordering::Relaxed);
        }
        let stamp = encode_timestamp(max_timestamp);
        for slot in &self.max_timestamps[first_bucket..=last_bucket] {
            // Load first: batches in one bucket mostly share a millisecond, and
            // a read is cheaper than a contended read-modify-write.
            if slot.load(Ordering::Relaxed) < stamp {
                slot.fetch_max(stamp, Ordering::Relaxed);
            }
        }
    }

    /// The batch containing byte `bucket * interval`, as (relative offset,
    /// position). Only meaningful for buckets below the committed tail.
    pub(crate) fn entry(&self, bucket: usize) -> Extent {
        Extent::unpack(self.entries[bucket].load(Ordering::Relaxed))
    }

    /// Largest timestamp of the batches overlapping `bucket`.
    pub(crate) fn max_timestamp(&self, bucket: usize) -> i64 {
        decode_timestamp(self.max_timestamps[bucket].load(Ordering::Relaxed))
    }

    /// Position of the last indexed batch at or before `relative_offset`,
    /// among the buckets covering the first `committed_bytes`. The batch
    /// holding the offset is at or after it, within about one interval.
    pub(crate) fn floor_position(&self, relative_offset: u32, committed_bytes: u32) -> u32 {
        let buckets = self.buckets_for(committed_bytes);
        // Entries are monotone in both offset and position: binary search.
        let (mut low, mut high) = (0usize, buckets);
        while low < high {
            let mid = (low + high) / 2;
            if self.entry(mid).records <= relative_offset {
                low = mid + 1;
            } else {
                high = mid;
            }
        }
        if low == 0 {
            0
        } else {
            self.entry(low - 1).bytes
        }
    }

    /// Position of the batch containing byte `position` or an earlier batch,
    /// for finding batch boundaries near a byte limit.
    pub(crate) fn floor_batch_start(&self, position: u32) -> u32 {
        self.entry((position >> self.interval_shift) as usize).bytes
    }

    /// First bucket whose batches reach `timestamp`, among those covering the
    /// first `committed_bytes`.
    pub(crate) fn first_bucket_reaching(
        &self,
        timestamp: i64,
        committed_bytes: u32,
    ) -> Option<usize> {
        (0..self.buckets_for(committed_bytes)).find(|&k| self.max_timestamp(k) >= timestamp)
    }

    /// Largest timestamp in the first `committed_bytes`.
    pub(crate) fn max_timestamp_within(&self, committed_bytes: u32) -> Option<(usize, i64)> {
        (0..self.buckets_for(committed_bytes))
            .map(|k| (k, self.max_timestamp(k)))
            .filter(|&(_, ts)| ts > i64::MIN)
            .max_by_key(|&(k, ts)| (ts, std::cmp::Reverse(k)))
    }

    /// Serialises the buckets covering `bytes`, for the index file.
    pub(crate) fn export(&self, bytes: u32) -> (Vec<u64>, Vec<i64>) {
        let n = self.buckets_for(bytes);
        let entries = (0..n)
            .map(|k| self.entries[k].load(Ordering::Relaxed))
            .collect();
        let times = (0..n).map(|k| self.max_timestamp(k)).collect();
        (entries, times)
    }

    /// Loads buckets read back from an index file.
    pub(crate) fn import(&self, entries: &[u64], times: &[i64]) {
        for (slot, &value) in self.entries.iter().zip(entries) {
            slot.store(value, Ordering::Relaxed);
        }
        for (slot, &ts) in self.max_timestamps.iter().zip(times) {
            slot.store(encode_timestamp(ts), Ordering::Relaxed);
        }
    }
}

#[cfg(all(test, not(herald_loom)))]
mod tests {
    use super::*;

    #[test]
    fn buckets_point_at_the_batch_containing_their_first_byte() {
        let index = SegmentIndex::new(1 << 16, 256);
        // Batches of 100 bytes, one offset each.
        for i in 0..20u32 {
            index.record(i * 100, 100, i, 1000 + i64::from(i));
        }
        // Byte 256 lies in the batch at 200 (offset 2).
        assert_eq!(index.entry(1), Extent::new(2, 200));
        assert_eq!(index.floor_position(7, 2000), 700);
        assert_eq!(index.floor_position(6, 2000), 500);
        assert_eq!(index.floor_position(0, 2000), 0);
    }

    #[test]
    fn time_buckets_keep_the_largest_timestamp_overlapping_them() {
        let index = SegmentIndex::new(1 << 16, 256);
        index.record(0, 300, 0, 50);
        index.record(300, 100, 1, 40);
        assert_eq!(index.max_timestamp(0), 50);
        assert_eq!(index.max_timestamp(1), 50);
        assert_eq!(index.first_bucket_reaching(45, 400), Some(0));
        assert_eq!(index.first_bucket_reaching(51, 400), None);
    }
}
