//! Catch-up readers: a subscription's partition that is not live reads
//! from the log by offset, at the pace its session takes deliveries,
//! until it reaches its tailer's frontier and goes live.
//!
//! Readers are bounded by a pool of permits held only while reading: a
//! reader waiting for its session to make room holds none, so a stalled
//! client never keeps others from catching up.

use std::sync::Arc;
use std::time::Duration;

use herald_broker::StorageError;
use tokio::sync::Semaphore;

use crate::batches::decode;
use crate::event::{Delivery, Event, GapReason, SharedRecord};
use crate::outbox::Refusal;
use crate::stats::PushStats;
use crate::subscription::Subscription;
use crate::tailer::Frontier;

/// The bounded set of catch-up readers.
pub(crate) struct CatchUpPool {
    permits: Semaphore,
    read_bytes: usize,
    stats: Arc<PushStats>,
}

impl CatchUpPool {
    pub(crate) fn new(readers: usize, read_bytes: usize, stats: Arc<PushStats>) -> Self {
        Self {
            permits: Semaphore::new(readers.max(1)),
            read_bytes,
            stats,
        }
    }

    /// Starts the reader of a cursor that is catching up.
    pub(crate) fn start(
        self: &Arc<Self>,
        subscription: Arc<Subscription>,
        partition: u32,
        frontier: Arc<Frontier>,
    ) {
        PushStats::add(&self.stats.catching_up, 1);
        let pool = Arc::clone(self);
        tokio::spawn(async move {
            pool.read(&subscription, partition, &frontier).await;
            PushStats::sub(&pool.stats.catching_up, 1);
        });
    }

    async fn read(&self, sub: &Arc<Subscription>, partition: u32, frontier: &Frontier) {
        let log = Arc::clone(&sub.partitions[partition as usize]);
        let mut told_catching_up = false;
        loop {
            if sub.is_closed() {
                return;
            }
            sub.outbox.room().await;
            if sub.is_closed() {
                return;
            }
            let Ok(_permit) = self.permits.acquire().await else {
                return;
            };
            let Some(next) = sub.go_live_or_next(partition, frontier) else {
                if told_catching_up {
                    sub.outbox.push_event(Event::State {
                        subscription_id: sub.id,
                        partition,
                        live: true,
                        lag: 0,
                    });
                }
                return;
            };
            let watermarks = log.watermarks();
            if !told_catching_up {
                told_catching_up = true;
                sub.outbox.push_event(Event::State {
                    subscription_id: sub.id,
                    partition,
                    live: false,
                    lag: watermarks.high_watermark.saturating_sub(next),
                });
            }
            if next < watermarks.log_start_offset {
                PushStats::add(&self.stats.gaps_retention, 1);
                sub.skip(
                    partition,
                    next,
                    watermarks.log_start_offset,
                    GapReason::Retention,
                );
                continue;
            }
            let lag = watermarks.high_watermark.saturating_sub(next);
            if sub.max_lag > 0 && lag > sub.max_lag {
                PushStats::add(&self.stats.gaps_lag_limit, 1);
                let to = watermarks.high_watermark - sub.max_lag;
                sub.skip(partition, next, to, GapReason::LagLimit);
                continue;
            }
            let mut read_bytes = self.read_bytes;
            if let (Some(probe), Some(index)) = (sub.subject_probe, log.subject_index()) {
                let candidate = index.next_candidate(next, frontier.get(), &[probe]);
                if candidate.offset > next {
                    PushStats::add(
                        &self.stats.catch_up_skipped_offsets,
                        candidate.offset - next,
                    );
                    sub.advance(partition, candidate.offset);
                    continue;
                }
                // A block that may hold the subject: read about that
                // block, not a whole read's worth past it.
                if let Some(bytes) = candidate.block_bytes {
                    read_bytes = (bytes as usize).clamp(1, self.read_bytes);
                }
            }
            match log.read(next, read_bytes).await {
                Ok(stored) => {
                    PushStats::add(&self.stats.catch_up_read_bytes, stored.bytes.len() as u64);
                    self.deliver(sub, partition, next, &stored);
                }
                Err(StorageError::OffsetOutOfRange {
                    log_start_offset, ..
                }) if next < log_start_offset => {
                    PushStats::add(&self.stats.gaps_retention, 1);
                    sub.skip(partition, next, log_start_offset, GapReason::Retention);
                }
                Err(StorageError::Closed) => return,
                Err(e) => {
                    tracing::warn!(partition, next, error = %e, "catch-up read failed; retrying");
                    drop(_permit);
                    tokio::time::sleep(Duration::from_secs(1)).await;
                }
            }
        }
    }

    /// Queues the matching records of one read from `next` on, until the
    /// session is full; moves the cursor past what it covered.
    fn deliver(
        &self,
        sub: &Subscription,
        partition: u32,
        next: u64,
        stored: &herald_broker::StoredBatches,
    ) {
        let mut wake = false;
        let mut covered = stored.next_offset;
        let (ttl_ms, now_ms) = (sub.topic.message_ttl_ms(), crate::expiry::now_ms());
        let topic_high = sub.topic.message_priority_high();
        // A run of expired records not told yet: [from, to).
        let mut expired: Option<(u64, u64)> = None;
        let tell = |expired: &mut Option<(u64, u64)>| {
            if let Some((from, to)) = expired.take() {
                if sub.report_expired {
                    sub.skip(partition, from, to, GapReason::Expired);
                }
            }
        };
        'batches: for batch in decode(&stored.bytes) {
            let Ok(batch) = batch else {
                tracing::error!(partition, next, "stored batch unreadable during catch-up");
                break;
            };
            for record in batch.records() {
                let Ok(record) = record else { break 'batches };
                let offset = u64::try_from(record.offset).unwrap_or(0);
                if offset < next {
                    continue;
                }
                let Some(key) = record.key else { continue };
                if !sub.selector.matches(key) || !sub.selection.admits(&record) {
                    continue;
                }
                if crate::expiry::expired(&record, ttl_ms, now_ms) {
                    PushStats::add(&self.stats.expired_records, 1);
                    let from = expired.map_or(offset, |(from, _)| from);
                    expired = Some((from, offset + 1));
                    continue;
                }
                tell(&mut expired);
                let delivery = Delivery {
                    subscription_id: sub.id,
                    partition,
                    record: Arc::new(SharedRecord::slice_of(batch.section(), &record)),
                    high_priority: crate::priority::is_high(&record, topic_high),
                };
                let cost = delivery.record.cost() as u64;
                match sub.deliver_caught_up(partition, delivery) {
                    Ok(was_empty) => {
                        wake |= was_empty;
                        PushStats::add(&self.stats.catch_up_deliveries, 1);
                        PushStats::add(&self.stats.catch_up_delivered_bytes, cost);
                    }
                    Err(Refusal::Full) => {
                        covered = offset;
                        break 'batches;
                    }
                    Err(Refusal::Closed) => return,
                }
            }
        }
        tell(&mut expired);
        sub.advance(partition, covered);
        if wake {
            sub.outbox.wake();
        }
    }
}
