//! One tailer per partition that has subscribers: it waits for new
//! records, reads each committed batch once (decompressing it once), looks
//! each run of records with one key up in the topic's routing table, and
//! queues a shared reference to each record for every live subscription
//! it matches (see `run`). Each session it queued for is woken once per
//! chunk of a read (about [`CHUNK_RECORDS`] records), not once per record.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use herald_broker::{Partition, StorageError, Topic};
use herald_subjects::RoutingTable;
use tokio_util::sync::CancellationToken;

use crate::batches::decode;
use crate::catch_up::CatchUpPool;
use crate::outbox::Outbox;
use crate::run::{RunContext, RunRecord};
use crate::stats::PushStats;
use crate::subscription::Route;

/// Records a tailer offers before it wakes the sessions it queued for: a
/// read holds up to `read_bytes` of them, and offering all before the
/// first wake-up would hold back the first subscriber's delivery until
/// the last one's was queued. Whole batches are offered, so a chunk may
/// hold more.
const CHUNK_RECORDS: usize = 64;

/// How many offers ahead of the current one a tailer asks for a
/// subscription's cursor; its subscription is asked for twice as far
/// ahead, since finding the cursor reads it. A few offers' work covers a
/// miss to memory; much further and a fan-out's lines would be evicted
/// again before their turn.
const PREFETCH_AHEAD: usize = 4;

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
            let mut batches = Vec::new();
            for batch in decode(&stored.bytes) {
                match batch {
                    Ok(batch) => batches.push(batch),
                    Err(e) => {
                        tracing::error!(partition = index, position, error = %e, "stored batch unreadable; skipping the rest of this read");
                        break;
                    }
                }
            }
            let context = RunContext {
                ttl_ms: self.topic.message_ttl_ms(),
                now_ms: crate::expiry::now_ms(),
                topic_high: self.topic.message_priority_high(),
            };
            let mut records: Vec<RunRecord<'_>> = Vec::new();
            let mut batches = batches.iter().peekable();
            while let Some(batch) = batches.next() {
                // Before any record of the batch is offered: see Frontier.
                self.frontier.raise(batch.end_offset());
                // Records without a key have no subject: nobody's.
                records.extend(
                    batch
                        .records()
                        .map_while(Result::ok)
                        .filter(|r| r.offset >= 0 && r.offset as u64 >= position && r.key.is_some())
                        .map(|r| RunRecord::new(r, batch.section())),
                );
                if records.len() >= CHUNK_RECORDS || batches.peek().is_none() {
                    self.offer_chunk(&mut records, &context, &mut woken);
                }
            }
            position = stored.next_offset;
            self.frontier.raise(position);
        }
    }

    /// Offers `records` (whole batches, the frontier raised past them) to
    /// their subscriptions, a run of one key at a time, then wakes the
    /// sessions that were idle, and empties `records`.
    ///
    /// The runs' keys are looked up together, and the subscriptions found
    /// are asked into the cache a few offers before their turn (see
    /// [`Lookahead`]): with many subjects each is a miss, and these
    /// overlap instead of queueing.
    fn offer_chunk(
        &self,
        records: &mut Vec<RunRecord<'_>>,
        context: &RunContext,
        woken: &mut Vec<Arc<Outbox>>,
    ) {
        let index = self.partition.index();
        let mut runs: Vec<(usize, usize)> = Vec::new();
        let mut keys: Vec<&[u8]> = Vec::new();
        let mut start = 0;
        while start < records.len() {
            let key = records[start].record.key;
            let end = records[start..]
                .iter()
                .position(|r| r.record.key != key)
                .map_or(records.len(), |n| start + n);
            runs.push((start, end));
            keys.push(key.unwrap_or_default());
            start = end;
        }
        // After the raise, so that a route added before a subscription read
        // the frontier is seen (see Frontier).
        let table = self.table.reader();
        let mut matches = Vec::new();
        table.matches_of(&keys, &mut matches);
        let mut ahead = lookahead(&matches, index);
        let mut tally = Tally::default();
        let mut matched = matches.iter().peekable();
        for (at, &(start, end)) in runs.iter().enumerate() {
            let run = &mut records[start..end];
            while let Some((_, routes)) = matched.next_if(|(of, _)| *of == at) {
                for route in routes.iter() {
                    ahead.step();
                    let offered = route.0.offer_run(index, run, context);
                    tally.deliveries += offered.queued;
                    tally.expired += offered.expired;
                    if offered.wake {
                        woken.push(Arc::clone(&route.0.outbox));
                    }
                    if offered.overflowed {
                        tally.overflows += 1;
                        self.pool
                            .start(Arc::clone(&route.0), index, Arc::clone(&self.frontier));
                    }
                }
            }
            tally.records += run.iter().filter(|r| r.was_delivered()).count() as u64;
        }
        records.clear();
        tally.add_to(&self.stats);
        for outbox in woken.drain(..) {
            outbox.wake();
        }
    }
}

/// The subscriptions a chunk will offer to next, asked into the cache a
/// few offers before their turn.
///
/// Why: with many subjects each offer goes to a different subscription,
/// and its lines and its cursor are misses to memory, the cursor's only
/// found by reading the subscription. Asked for on the offer itself, the
/// two misses queue behind each other for every delivery; asked for
/// [`PREFETCH_AHEAD`] offers early they overlap the offers between. A
/// sliding window, not the whole chunk at once: a chunk may find
/// hundreds (a 4,096-record batch over many subjects) or thousands (a
/// fan-out subject), which would evict each other before their turn.
struct Lookahead<I> {
    /// Subscriptions whose lines are asked for next.
    subscriptions: I,
    /// Subscriptions whose cursors are asked for next, `PREFETCH_AHEAD`
    /// behind `subscriptions`.
    cursors: I,
    partition: u32,
}

/// A window over `matches` in the order they are offered, its first
/// offers asked for already.
fn lookahead<'m>(
    matches: &'m [(usize, &'m [Route])],
    partition: u32,
) -> Lookahead<impl Iterator<Item = &'m Route>> {
    let routes = matches.iter().flat_map(|(_, routes)| routes.iter());
    let mut window = Lookahead {
        subscriptions: routes.clone(),
        cursors: routes,
        partition,
    };
    for route in window.subscriptions.by_ref().take(2 * PREFETCH_AHEAD) {
        route.0.prefetch();
    }
    for route in window.cursors.by_ref().take(PREFETCH_AHEAD) {
        route.0.prefetch_cursor(partition);
    }
    window
}

impl<'m, I: Iterator<Item = &'m Route>> Lookahead<I> {
    /// Moves the window one offer on: called once before each offer.
    fn step(&mut self) {
        if let Some(route) = self.subscriptions.next() {
            route.0.prefetch();
        }
        if let Some(route) = self.cursors.next() {
            route.0.prefetch_cursor(self.partition);
        }
    }
}

/// What a chunk's offers came to, counted into the engine's stats once per
/// chunk rather than once per delivery: the counters are shared by every
/// tailer and writer, and a change to one is a cache line crossing cores.
#[derive(Default)]
struct Tally {
    records: u64,
    deliveries: u64,
    expired: u64,
    overflows: u64,
}

impl Tally {
    fn add_to(&self, stats: &PushStats) {
        for (counter, n) in [
            (&stats.live_records, self.records),
            (&stats.live_deliveries, self.deliveries),
            (&stats.expired_records, self.expired),
            (&stats.overflows, self.overflows),
        ] {
            if n > 0 {
                PushStats::add(counter, n);
            }
        }
    }
}
