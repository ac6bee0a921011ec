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
    /// Records a tailer queued for at least one subscription.
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
    /// Records a subscription would have received but were past their
    /// expiry, live or on catch-up.
    pub expired_records: AtomicU64,
    /// Bytes of catch-up reads.
    pub catch_up_read_bytes: AtomicU64,
    /// Bytes of the deliveries catch-up readers queued (as queues count
    /// them): with `catch_up_read_bytes`, what a catch-up reads per byte
    /// it delivers.
    pub catch_up_delivered_bytes: AtomicU64,
    /// Offsets catch-up readers passed over without reading, because the
    /// subject filters showed none of their subscription's records there.
    pub catch_up_skipped_offsets: AtomicU64,
    /// Bytes of the log the subject indexer has read.
    pub indexed_bytes: AtomicU64,
    /// Gauge: offsets written but not yet in the subject filters, summed
    /// over partitions whose topic keeps them.
    pub subject_index_lag: AtomicU64,
    /// Gauge: (subscription, partition) cursors, live or catching up.
    pub cursors: AtomicU64,
    /// Gauge: bytes queued in every session's outbox.
    pub queued_bytes: AtomicU64,
    /// Deliveries written to clients.
    pub written_deliveries: AtomicU64,
    /// Bytes of deliveries written to clients (key, value, headers and a
    /// fixed overhead, as queues count them).
    pub written_bytes: AtomicU64,
    /// Sessions that ended because the client closed them.
    pub disconnects_client: AtomicU64,
    /// Sessions ended with a go-away for a protocol error.
    pub disconnects_protocol_error: AtomicU64,
    /// Sessions ended with a go-away for an oversized message.
    pub disconnects_message_too_large: AtomicU64,
    /// Sessions ended with a go-away because the broker shut down.
    pub disconnects_shutdown: AtomicU64,
}

impl PushStats {
    /// Adds to a counter.
    pub fn add(counter: &AtomicU64, n: u64) {
        counter.fetch_add(n, Ordering::Relaxed);
    }

    /// Subtracts from a gauge.
    pub fn sub(counter: &AtomicU64, n: u64) {
        counter.fetch_sub(n, Ordering::Relaxed);
    }

    /// Counts what a transport wrote of `events`.
    pub fn record_written(&self, events: &[crate::Event]) {
        let (mut count, mut bytes) = (0, 0);
        for event in events {
            if let crate::Event::Delivery(delivery) = event {
                count += 1;
                bytes += delivery.record.cost() as u64;
            }
        }
        Self::add(&self.written_deliveries, count);
        Self::add(&self.written_bytes, bytes);
    }

    /// Reads one counter.
    pub fn get(counter: &AtomicU64) -> u64 {
        counter.load(Ordering::Relaxed)
    }
}
