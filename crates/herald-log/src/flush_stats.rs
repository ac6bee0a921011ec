//! Counts and latencies of log flushes (the fsyncs that make appended data
//! durable), for metrics.
//!
//! Every flush that issues at least one fsync is recorded twice: into the
//! log's own [`FlushStats`] ([`crate::Log::flush_stats`]) and into the
//! process-wide one ([`FlushStats::global`]), which only ever grows, so a
//! histogram exported from it stays monotonic when logs are deleted.
//!
//! Recording costs two relaxed atomic additions per flush (the latency
//! bucket and the sum), next to an fsync that takes microseconds to
//! seconds; nothing is recorded on the append path itself. Reading takes a
//! [`FlushStatsSnapshot`], plain numbers that a metrics library can export
//! without this crate knowing about it.
//!
//! The atomics are `std`'s, not the [`crate::sync`] shim's: these counters
//! order nothing and are not part of the lock-free protocol that the loom
//! models check, and loom's atomics may only be used inside a model.

use crate::sync::counters::{AtomicU64, Ordering};
use std::time::Duration;

/// Upper bounds, in nanoseconds, of the flush latency buckets: 10 µs
/// doubling up to about 10.5 s. A flush slower than the last bound is
/// counted in a final, unbounded bucket.
pub const FLUSH_LATENCY_BOUNDS_NANOS: [u64; 21] = {
    let mut bounds = [0u64; 21];
    let mut i = 0;
    while i < bounds.len() {
        bounds[i] = 10_000 << i;
        i += 1;
    }
    bounds
};

/// Number of latency buckets: one per bound, plus the unbounded one.
pub const FLUSH_LATENCY_BUCKETS: usize = FLUSH_LATENCY_BOUNDS_NANOS.len() + 1;

/// Lock-free flush counters: how many flushes fell in each latency bucket,
/// and their total duration.
#[derive(Debug)]
pub struct FlushStats {
    /// Flushes per bucket (not cumulative); the count is their sum.
    buckets: [AtomicU64; FLUSH_LATENCY_BUCKETS],
    /// Total duration of the flushes, in nanoseconds.
    sum_nanos: AtomicU64,
}

static GLOBAL: FlushStats = FlushStats::new();

impl FlushStats {
    /// Counters at zero.
    pub const fn new() -> Self {
        Self {
            buckets: [const { AtomicU64::new(0) }; FLUSH_LATENCY_BUCKETS],
            sum_nanos: AtomicU64::new(0),
        }
    }

    /// The flushes of every log of this process since it started,
    /// including logs since closed or deleted.
    pub fn global() -> &'static FlushStats {
        &GLOBAL
    }

    /// Records one flush that took `elapsed`.
    pub fn record(&self, elapsed: Duration) {
        let nanos = u64::try_from(elapsed.as_nanos()).unwrap_or(u64::MAX);
        let bucket = FLUSH_LATENCY_BOUNDS_NANOS.partition_point(|&bound| bound < nanos);
        // Relaxed: independent counters, read only for reporting.
        self.buckets[bucket].fetch_add(1, Ordering::Relaxed);
        self.sum_nanos.fetch_add(nanos, Ordering::Relaxed);
    }

    /// The counters now. Taken while flushes are recorded, the sum may
    /// include a flush that the buckets do not yet (or the reverse); the
    /// count is always exactly the sum of the buckets.
    pub fn snapshot(&self) -> FlushStatsSnapshot {
        let mut snapshot = FlushStatsSnapshot::default();
        for (out, bucket) in snapshot.buckets.iter_mut().zip(&self.buckets) {
            *out = bucket.load(Ordering::Relaxed);
        }
        snapshot.sum = Duration::from_nanos(self.sum_nanos.load(Ordering::Relaxed));
        snapshot
    }
}

impl Default for FlushStats {
    fn default() -> Self {
        Self::new()
    }
}

/// Flush counters at one moment; see [`FlushStats::snapshot`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct FlushStatsSnapshot {
    /// Flushes per latency bucket, not cumulative: `buckets[i]` counts the
    /// flushes that took more than `FLUSH_LATENCY_BOUNDS_NANOS[i - 1]` and
    /// at most `FLUSH_LATENCY_BOUNDS_NANOS[i]`; the last counts the slower
    /// ones.
    pub buckets: [u64; FLUSH_LATENCY_BUCKETS],
    /// Total time spent flushing.
    pub sum: Duration,
}

impl FlushStatsSnapshot {
    /// Number of flushes.
    pub fn count(&self) -> u64 {
        self.buckets.iter().sum()
    }

    /// Adds `other`'s counts to these (to total several logs).
    pub fn merge(&mut self, other: &FlushStatsSnapshot) {
        for (mine, theirs) in self.buckets.iter_mut().zip(&other.buckets) {
            *mine += theirs;
        }
        self.sum += other.sum;
    }

    /// Each bucket's upper bound (`None` for the unbounded last one) with
    /// its count, not cumulative, fastest first.
    pub fn bucket_counts(&self) -> impl Iterator<Item = (Option<Duration>, u64)> + '_ {
        FLUSH_LATENCY_BOUNDS_NANOS
            .iter()
            .map(|&nanos| Some(Duration::from_nanos(nanos)))
            .chain(std::iter::once(None))
            .zip(self.buckets.iter().copied())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bounds_double_from_ten_microseconds() {
        assert_eq!(FLUSH_LATENCY_BOUNDS_NANOS[0], 10_000);
        assert_eq!(FLUSH_LATENCY_BOUNDS_NANOS[20], 10_000 << 20);
        assert!(FLUSH_LATENCY_BOUNDS_NANOS
            .windows(2)
            .all(|w| w[1] == 2 * w[0]));
    }

    #[test]
    fn each_flush_lands_in_the_first_bucket_that_bounds_it() {
        let stats = FlushStats::new();
        stats.record(Duration::from_nanos(1));
        stats.record(Duration::from_micros(10));
        stats.record(Duration::from_nanos(10_001));
        stats.record(Duration::from_secs(60));
        stats.record(Duration::MAX);
        let snapshot = stats.snapshot();
        assert_eq!(snapshot.buckets[0], 2, "bounds are inclusive");
        assert_eq!(snapshot.buckets[1], 1);
        assert_eq!(snapshot.buckets[FLUSH_LATENCY_BUCKETS - 1], 2);
        assert_eq!(snapshot.count(), 5);
        let (bound, count) = snapshot.bucket_counts().last().expect("buckets");
        assert_eq!((bound, count), (None, 2));
        assert_eq!(snapshot.bucket_counts().count(), FLUSH_LATENCY_BUCKETS);
    }

    #[test]
    fn the_sum_adds_every_duration_and_merge_adds_snapshots() {
        let stats = FlushStats::new();
        stats.record(Duration::from_millis(3));
        stats.record(Duration::from_micros(250));
        let mut total = stats.snapshot();
        assert_eq!(total.sum, Duration::from_micros(3_250));
        total.merge(&stats.snapshot());
        assert_eq!(total.count(), 4);
        assert_eq!(total.sum, Duration::from_micros(6_500));
    }
}
