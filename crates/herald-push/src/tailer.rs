//! One tailer per partition that has subscribers: it waits for new
//! records, reads each committed batch once (decompressing it once), looks
//! each record's key up in the topic's routing table, and queues a shared
//! reference to the record for every live subscription it matches. Each
//! session it queued for is woken once per batch, not once per record.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use herald_broker::{Partition, StorageError, Topic};
use herald_subjects::RoutingTable;
use tokio_util::sync::CancellationToken;

use crate::batches::decode;
use crate::catch_up::CatchUpPool;
use crate::event::SharedRecord;
use crate::outbox::Outbox;
use crate::stats::PushStats;
use crate::subscription::{Offered, Route};

/// The offset from which a tailer offers every record: it may be offering
/// (or have offered) records below it, and offers every one at or past it.
/// Raised before a batch's records are offered; see `subscription`.
#[derive(Debug)]
pub(crate) struct Frontier(AtomicU64);

impl Frontier {
    pub(crate) fn new(offset: u64) -> Self {
        Self(AtomicU64::new(offset))
    }

    pub(crate) fn get(&self) -> u64 {
        self.0.load(Ordering::SeqCst)
    }

    fn raise(&self, offset: u64) {
        self.0.fetch_max(offset, Ordering::SeqCst);
    }
}

/// What a tailer needs to run.
pub(crate) struct Tailer {
    /// Its topic, for `message.ttl.ms`.
    pub(crate) topic: Arc<Topic>,
    pub(crate) partition: Arc<Partition>,
    pub(crate) table: Arc<RoutingTable<Route>>,
    pub(crate) frontier: Arc<Frontier>,
    pub(crate) pool: Arc<CatchUpPool>,
    pub(crate) stats: Arc<PushStats>,
    pub(crate) read_bytes: usize,
}

/// Why a tailer stopped.
#[derive(Debug)]
pub(crate) enum TailerEnd {
    /// Its topic has no subscribers left.
    Stopped,
    /// The partition closed (its topic was deleted).
    Closed,
}

impl Tailer {
    /// Runs until `stop` or until the partition closes.
    pub(crate) async fn run(self, stop: CancellationToken) -> TailerEnd {
        let index = self.partition.index();
        let mut position = self.frontier.get();
        let mut woken: Vec<Arc<Outbox>> = Vec::new();
        loop {
            tokio::select! {
                _ = stop.cancelled() => return TailerEnd::Stopped,
                _ = self.partition.wait_for_data(position) => {}
            }
            let stored = match self.partition.read(position, self.read_bytes).await {
                Ok(stored) => stored,
                Err(StorageError::Closed) => return TailerEnd::Closed,
                Err(StorageError::OffsetOutOfRange {
                    log_start_offset, ..
                }) if position < log_start_offset => {
                    // Records were removed at the tail before this tailer
                    // read them (a DeleteRecords up to the end); live
                    // subscribers' cursors lie below the new start, and
                    // their next catch-up reports the gap.
                    tracing::warn!(
                        partition = index,
                        position,
                        log_start_offset,
                        "tailer fell behind the log start"
                    );
                    position = log_start_offset;
                    self.frontier.raise(position);
                    continue;
                }
                Err(e) => {
                    // A failed or unavailable partition: wait, then retry,
                    // unless stopped meanwhile.
                    tracing::warn!(partition = index, error = %e, "tailer read failed");
                    tokio::select! {
                        _ = stop.cancelled() => return TailerEnd::Stopped,
                        _ = tokio::time::sleep(Duration::from_secs(1)) => continue,
                    }
                }
            };
            if stored.bytes.is_empty() {
                if self.partition.failure().is_some() {
                    tokio::select! {
                        _ = stop.cancelled() => return TailerEnd::Stopped,
                        _ = tokio::time::sleep(Duration::from_secs(1)) => {}
                    }
                }
                continue;
            }
            for batch in decode(&stored.bytes) {
                let batch = match batch {
                    Ok(batch) => batch,
                    Err(e) => {
                        tracing::error!(partition = index, position, error = %e, "stored batch unreadable; skipping the rest of this read");
                        break;
                    }
                };
                // Before any record of the batch is offered: see Frontier.
                self.frontier.raise(batch.end_offset());
                // After the raise, so that a route added before a
                // subscription read the frontier is seen (see Frontier).
                let table = self.table.reader();
                let (ttl_ms, now_ms) = (self.topic.message_ttl_ms(), crate::expiry::now_ms());
                let topic_high = self.topic.message_priority_high();
                for record in batch.records() {
                    let Ok(record) = record else { break };
                    if record.offset < 0 || (record.offset as u64) < position {
                        continue;
                    }
                    let Some(key) = record.key else { continue };
                    let mut shared: Option<Arc<SharedRecord>> = None;
                    // Read once per record, and only for a routed one.
                    let mut expired: Option<bool> = None;
                    let mut high: Option<bool> = None;
                    table.for_each_match(key, |route| {
                        if !route.0.selection.admits(&record) {
                            route.0.pass(index, record.offset as u64);
                            return;
                        }
                        if *expired
                            .get_or_insert_with(|| crate::expiry::expired(&record, ttl_ms, now_ms))
                        {
                            // A gap, if any, wakes the session itself.
                            route.0.expire(index, record.offset as u64);
                            self.stats.expired_records.fetch_add(1, Ordering::Relaxed);
                            return;
                        }
                        let high = *high
                            .get_or_insert_with(|| crate::priority::is_high(&record, topic_high));
                        let make = || {
                            Arc::clone(shared.get_or_insert_with(|| {
                                Arc::new(SharedRecord::slice_of(batch.section(), &record))
                            }))
                        };
                        match route.0.offer(index, record.offset as u64, high, make) {
                            Offered::Queued(was_empty) => {
                                self.stats.live_deliveries.fetch_add(1, Ordering::Relaxed);
                                if was_empty {
                                    woken.push(Arc::clone(&route.0.outbox));
                                }
                            }
                            Offered::Skipped => {}
                            Offered::Overflowed => {
                                self.stats.overflows.fetch_add(1, Ordering::Relaxed);
                                self.pool.start(
                                    Arc::clone(&route.0),
                                    index,
                                    Arc::clone(&self.frontier),
                                );
                            }
                        }
                    });
                    if shared.is_some() {
                        self.stats.live_records.fetch_add(1, Ordering::Relaxed);
                    }
                }
                for outbox in woken.drain(..) {
                    outbox.wake();
                }
            }
            position = stored.next_offset;
            self.frontier.raise(position);
        }
    }
}
