//! Counters of the push engine, read by the metrics scrape.

use std::sync::atomic::{AtomicU64, Ordering};

/// Counts since the broker started (and gauges, where named so). Relaxed
/// atomics: each is read on its own by a scrape.
#[derive(Debug, Default)]
pub struct PushStats {
    /// Gauge: open sessions.
    pub sessions: AtomicU64,
    /// Sessions refused at the session limit.
    pub sessions_refused: AtomicU64,
    /// Gauge: subscriptions held.
    pub subscriptions: AtomicU64,
    /// Gauge: (subscription, partition) cursors catching up from the log.
    pub catching_up: AtomicU64,
    /// Records a tailer routed to at least one subscription.
    pub live_records: AtomicU64,
    /// Deliveries queued by tailers.
    pub live_deliveries: AtomicU64,
    /// Deliveries queued by catch-up readers.
    pub catch_up_deliveries: AtomicU64,
    /// Live cursors that found their session full and left for the log.
    pub overflows: AtomicU64,
    /// Gaps reported because of retention.
    pub gaps_retention: AtomicU64,
    /// Gaps reported because of a lag limit.
    pub gaps_lag_limit: AtomicU64,
    /// Bytes of catch-up reads.
    pub catch_up_read_bytes: AtomicU64,
}

impl PushStats {
    pub(crate) fn add(counter: &AtomicU64, n: u64) {
        counter.fetch_add(n, Ordering::Relaxed);
    }

    pub(crate) fn sub(counter: &AtomicU64, n: u64) {
        counter.fetch_sub(n, Ordering::Relaxed);
    }

    /// Reads one counter.
    pub fn get(counter: &AtomicU64) -> u64 {
        counter.load(Ordering::Relaxed)
    }
}
