//! A session's outbox: the events queued for its client, bounded in bytes
//! and by the client's credit.
//!
//! Tailers and catch-up readers push deliveries; the session's writer
//! drains everything queued in one go. A delivery that does not fit (the
//! queue holds `limit` bytes, or the client's credit is spent) is refused,
//! and its subscription continues from the log instead: the outbox never
//! grows past its bound, and nothing refused is lost.
//!
//! Two queues share the bound: high-priority deliveries (and the
//! `Subscribed` that must precede any delivery of its subscription) go in
//! the urgent one, and each take starts with it, then fills with normal
//! events. So that a steady stream of high-priority records cannot starve
//! the rest, after [`STARVATION_BOUND`] takes in a row that left normal
//! events waiting, the next take starts with the normal queue.

use std::collections::VecDeque;

use std::sync::Arc;

use herald_broker::snapshots::CutGate;
use parking_lot::{Mutex, MutexGuard};
use tokio::sync::Notify;

use crate::event::{Delivery, Event};
use crate::stats::PushStats;

/// How much the client lets the broker send; `None` is no limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Credit {
    /// Deliveries.
    pub messages: Option<u64>,
    /// Bytes of deliveries (as [`crate::SharedRecord::cost`] counts them).
    pub bytes: Option<u64>,
}

/// Why a delivery was not queued.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// The queue is full or the credit spent: continue from the log.
    Full,
    /// The session is gone.
    Closed,
}

/// Takes in a row that may leave normal events behind urgent ones before
/// one take starts with the normal queue.
pub const STARVATION_BOUND: u32 = 4;

struct Queue {
    /// Normal deliveries and every control event but `Subscribed`.
    events: VecDeque<Event>,
    /// High-priority deliveries and `Subscribed`.
    urgent: VecDeque<Event>,
    /// Takes in a row that left normal events waiting.
    starved: u32,
    bytes: usize,
    credit: Credit,
    closed: bool,
}

/// The bounded queue of one session: at most its limit of normal
/// deliveries, and a quarter more of high-priority ones.
pub struct Outbox {
    queue: Mutex<Queue>,
    limit: usize,
    /// Wakes the writer.
    ready: Notify,
    /// Wakes catch-up readers waiting for room.
    room: Notify,
    stats: Arc<PushStats>,
    /// Passed by every take, so that deliveries never overtake a
    /// snapshot's cut (see `herald_broker::snapshots::CutGate`).
    gate: Option<Arc<CutGate>>,
}

impl std::fmt::Debug for Outbox {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let queue = self.queue.lock();
        f.debug_struct("Outbox")
            .field("events", &queue.events.len())
            .field("urgent", &queue.urgent.len())
            .field("bytes", &queue.bytes)
            .field("limit", &self.limit)
            .finish()
    }
}

impl Outbox {
    /// An empty outbox holding at most `limit` bytes of deliveries, with
    /// `credit` to spend; its queued bytes count in `stats`.
    pub fn new(limit: usize, credit: Credit, stats: Arc<PushStats>) -> Self {
        Self {
            queue: Mutex::new(Queue {
                events: VecDeque::new(),
                urgent: VecDeque::new(),
                starved: 0,
                bytes: 0,
                credit,
                closed: false,
            }),
            limit,
            ready: Notify::new(),
            room: Notify::new(),
            stats,
            gate: None,
        }
    }

    /// This outbox, with every take passing `gate` before it returns.
    pub fn with_cut_gate(mut self, gate: Arc<CutGate>) -> Self {
        self.gate = Some(gate);
        self
    }

    /// Queues a delivery if it fits and the credit allows, spending the
    /// credit. `Ok(true)` when the queue was empty: the caller wakes the
    /// writer with [`Outbox::wake`] (once, after its whole batch).
    pub fn push_delivery(&self, delivery: Delivery) -> Result<bool, Refusal> {
        let mut pusher = self.pusher();
        pusher.push_delivery(delivery)?;
        Ok(pusher.needs_wake())
    }

    /// Holds the queue for several pushes in a row: one acquisition of its
    /// lock, and one change of the engine-wide gauge, for a run of
    /// deliveries instead of one each.
    pub(crate) fn pusher(&self) -> Pusher<'_> {
        let queue = self.queue.lock();
        let was_empty = queue.events.is_empty() && queue.urgent.is_empty();
        Pusher {
            outbox: self,
            queue: Some(queue),
            was_empty,
            delivered: false,
            evented: false,
            added: 0,
        }
    }

    /// Queues a control event (subscribed, gap, state, unsubscribed): never
    /// refused for room, since each is bounded by the session's
    /// subscriptions, and wakes the writer.
    pub fn push_event(&self, event: Event) {
        self.pusher().push_event(event);
    }

    /// Wakes the writer: something was queued.
    pub fn wake(&self) {
        self.ready.notify_one();
    }

    /// Adds to the client's credit and wakes readers waiting for it.
    pub fn grant(&self, messages: u64, bytes: u64) {
        let mut queue = self.queue.lock();
        if let Some(m) = queue.credit.messages.as_mut() {
            *m = m.saturating_add(messages);
        }
        if let Some(b) = queue.credit.bytes.as_mut() {
            *b = b.saturating_add(bytes);
        }
        drop(queue);
        self.room.notify_waiters();
    }

    /// Replaces the client's credit (its first grant, in a session's
    /// opening message) and wakes readers waiting for it.
    pub fn set_credit(&self, credit: Credit) {
        self.queue.lock().credit = credit;
        self.room.notify_waiters();
    }

    /// True when a catch-up reader may push again: the queue is at most
    /// half full and there is credit left. Half, so a reader that was
    /// refused does not wake for every delivery the writer takes out.
    pub fn has_room(&self) -> bool {
        let queue = self.queue.lock();
        queue.closed
            || (queue.bytes <= self.limit / 2
                && queue.credit.messages.is_none_or(|m| m > 0)
                && queue.credit.bytes.is_none_or(|b| b > 0))
    }

    /// Resolves once [`Outbox::has_room`] (or the session closed).
    pub async fn room(&self) {
        loop {
            let notified = self.room.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            if self.has_room() {
                return;
            }
            notified.await;
        }
    }

    /// Takes what is queued, at least one event and at most about
    /// `max_bytes`, waiting until there is something; `None` once the
    /// outbox is closed and empty.
    pub async fn take(&self, max_bytes: usize) -> Option<Vec<Event>> {
        loop {
            // The gate is passed before anything is taken, so a take
            // cancelled while it waits has lost nothing; once the lock is
            // held it is checked again, and the events handed out only if
            // it is still open (they were read from the log before that
            // check, so any cut starting later holds them).
            if let Some(gate) = &self.gate {
                gate.pass().await;
            }
            let notified = self.ready.notified();
            let taken = {
                let mut guard = self.queue.lock();
                if self.gate.as_ref().is_some_and(|gate| !gate.is_open()) {
                    continue;
                }
                let queue = &mut *guard;
                if !queue.events.is_empty() || !queue.urgent.is_empty() {
                    let normal_first = queue.starved >= STARVATION_BOUND;
                    let had_urgent = !queue.urgent.is_empty();
                    let (first, second) = if normal_first {
                        (&mut queue.events, &mut queue.urgent)
                    } else {
                        (&mut queue.urgent, &mut queue.events)
                    };
                    let (taken, bytes) = if queue.bytes <= max_bytes {
                        // Everything fits (the usual case): both queues are
                        // drained whole, with no event's cost summed again.
                        let mut taken = Vec::with_capacity(first.len() + second.len());
                        taken.extend(first.drain(..));
                        taken.extend(second.drain(..));
                        (taken, queue.bytes)
                    } else {
                        take_up_to(first, second, max_bytes)
                    };
                    // Counts takes where urgent events went first and normal
                    // ones were left waiting.
                    queue.starved = if normal_first || !had_urgent || queue.events.is_empty() {
                        0
                    } else {
                        queue.starved + 1
                    };
                    queue.bytes -= bytes;
                    drop(guard);
                    PushStats::sub(&self.stats.queued_bytes, bytes as u64);
                    self.room.notify_waiters();
                    Some(taken)
                } else if queue.closed {
                    return None;
                } else {
                    None
                }
            };
            if let Some(taken) = taken {
                return Some(taken);
            }
            notified.await;
        }
    }

    /// Bytes queued now.
    pub fn queued_bytes(&self) -> usize {
        self.queue.lock().bytes
    }

    /// Closes the outbox: nothing more is queued, what is queued is
    /// dropped, the writer and every waiting reader wake.
    pub fn close(&self) {
        let mut queue = self.queue.lock();
        queue.closed = true;
        queue.events.clear();
        queue.urgent.clear();
        let dropped = std::mem::take(&mut queue.bytes);
        drop(queue);
        PushStats::sub(&self.stats.queued_bytes, dropped as u64);
        self.ready.notify_one();
        self.room.notify_waiters();
    }
}

/// Events from the front of `first`, then of `second`, up to `max_bytes`
/// of their costs (at least one), and the bytes they cost. What stops
/// `first` short does not stop `second`: smaller events there may still
/// fit.
fn take_up_to(
    first: &mut VecDeque<Event>,
    second: &mut VecDeque<Event>,
    max_bytes: usize,
) -> (Vec<Event>, usize) {
    let mut taken = Vec::with_capacity((first.len() + second.len()).min(1024));
    let mut bytes = 0;
    for from in [first, second] {
        while let Some(event) = from.front() {
            let cost = event.cost();
            if !taken.is_empty() && bytes + cost > max_bytes {
                break;
            }
            bytes += cost;
            taken.extend(from.pop_front());
        }
    }
    (taken, bytes)
}

/// The queue of an [`Outbox`], held for a run of pushes. Dropping it lets
/// the writer take what was pushed, counts the bytes in the gauge, and
/// wakes the writer for a control event (for deliveries, the caller wakes
/// it once per batch when [`Pusher::needs_wake`] says so).
pub(crate) struct Pusher<'o> {
    outbox: &'o Outbox,
    queue: Option<MutexGuard<'o, Queue>>,
    /// The queue was empty when taken.
    was_empty: bool,
    /// A delivery was queued.
    delivered: bool,
    /// A control event was queued.
    evented: bool,
    /// Bytes queued.
    added: usize,
}

impl Pusher<'_> {
    fn queue(&mut self) -> &mut Queue {
        // Only `drop` takes it out.
        self.queue
            .as_mut()
            .expect("a pusher holds its queue until dropped")
    }

    /// Queues a delivery if it fits and the credit allows, spending the
    /// credit.
    pub(crate) fn push_delivery(&mut self, delivery: Delivery) -> Result<(), Refusal> {
        let cost = delivery.record.cost();
        let bound = self.outbox.limit;
        let queue = self.queue();
        if queue.closed {
            return Err(Refusal::Closed);
        }
        // One delivery larger than the whole bound still goes, alone. A
        // high-priority one may use a reserve a quarter of the bound that
        // normal ones leave free, so it still goes out ahead when a
        // subscriber is behind on normal records.
        let limit = if delivery.high_priority {
            bound + bound / 4
        } else {
            bound
        };
        let fits = queue.bytes == 0 || queue.bytes + cost <= limit;
        let credited =
            queue.credit.messages.is_none_or(|m| m > 0) && queue.credit.bytes.is_none_or(|b| b > 0);
        if !fits || !credited {
            return Err(Refusal::Full);
        }
        if let Some(m) = queue.credit.messages.as_mut() {
            *m -= 1;
        }
        if let Some(b) = queue.credit.bytes.as_mut() {
            *b = b.saturating_sub(cost as u64);
        }
        queue.bytes += cost;
        if delivery.high_priority {
            queue.urgent.push_back(Event::Delivery(delivery));
        } else {
            queue.events.push_back(Event::Delivery(delivery));
        }
        self.added += cost;
        self.delivered = true;
        Ok(())
    }

    /// Queues a control event (subscribed, gap, state, unsubscribed): never
    /// refused for room, since each is bounded by the session's
    /// subscriptions. The writer wakes when the pusher is dropped.
    pub(crate) fn push_event(&mut self, event: Event) {
        let queue = self.queue();
        if queue.closed {
            return;
        }
        let cost = event.cost();
        queue.bytes += cost;
        // A subscription's deliveries may be urgent: what announces it
        // must not be overtaken by them.
        if matches!(event, Event::Subscribed { .. }) {
            queue.urgent.push_back(event);
        } else {
            queue.events.push_back(event);
        }
        self.added += cost;
        self.evented = true;
    }

    /// True when deliveries went into a queue that was empty: the writer
    /// may be asleep, and the caller wakes it with [`Outbox::wake`].
    pub(crate) fn needs_wake(&self) -> bool {
        self.delivered && self.was_empty
    }
}

impl Drop for Pusher<'_> {
    fn drop(&mut self) {
        drop(self.queue.take());
        if self.added > 0 {
            PushStats::add(&self.outbox.stats.queued_bytes, self.added as u64);
        }
        if self.evented {
            self.outbox.ready.notify_one();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::SharedRecord;

    fn delivery(offset: u64, high_priority: bool) -> Delivery {
        Delivery {
            subscription_id: 1,
            partition: 0,
            record: Arc::new(SharedRecord::for_test(offset, b"v")),
            high_priority,
        }
    }

    fn outbox() -> Outbox {
        Outbox::new(1 << 20, Credit::default(), Arc::new(PushStats::default()))
    }

    /// What one take returns, as (offset, high) for deliveries and
    /// (u64::MAX, false) for any other event.
    async fn take(outbox: &Outbox, max_bytes: usize) -> Vec<(u64, bool)> {
        outbox
            .take(max_bytes)
            .await
            .expect("open")
            .into_iter()
            .map(|event| match event {
                Event::Delivery(d) => (d.record.offset, d.high_priority),
                _ => (u64::MAX, false),
            })
            .collect()
    }

    #[tokio::test]
    async fn high_priority_goes_ahead_of_queued_normal_deliveries() {
        let outbox = outbox();
        for offset in 0..3 {
            outbox.push_delivery(delivery(offset, false)).expect("room");
        }
        outbox.push_delivery(delivery(10, true)).expect("room");
        outbox.push_delivery(delivery(3, false)).expect("room");
        outbox.push_delivery(delivery(11, true)).expect("room");
        assert_eq!(
            take(&outbox, 1 << 20).await,
            [
                (10, true),
                (11, true),
                (0, false),
                (1, false),
                (2, false),
                (3, false)
            ]
        );
    }

    #[tokio::test]
    async fn a_stream_of_high_priority_lets_one_normal_take_through_every_few() {
        let outbox = outbox();
        // Each take holds one delivery: max_bytes below two deliveries.
        let one = SharedRecord::for_test(0, b"v").cost();
        outbox.push_delivery(delivery(0, false)).expect("room");
        outbox.push_delivery(delivery(1, false)).expect("room");
        for offset in 100..110 {
            outbox.push_delivery(delivery(offset, true)).expect("room");
        }
        let mut order = Vec::new();
        for _ in 0..12 {
            order.extend(take(&outbox, one).await);
        }
        let offsets: Vec<u64> = order.iter().map(|d| d.0).collect();
        assert_eq!(
            offsets,
            [100, 101, 102, 103, 0, 104, 105, 106, 107, 1, 108, 109],
            "one normal take after every {STARVATION_BOUND} urgent ones"
        );
    }

    #[tokio::test]
    async fn subscribed_is_never_overtaken_by_its_urgent_deliveries() {
        let outbox = outbox();
        outbox.push_delivery(delivery(0, false)).expect("room");
        outbox.push_event(Event::Subscribed {
            subscription_id: 1,
            start_offsets: Vec::new(),
        });
        outbox.push_delivery(delivery(5, true)).expect("room");
        assert_eq!(
            take(&outbox, 1 << 20).await,
            [(u64::MAX, false), (5, true), (0, false)]
        );
    }

    #[tokio::test]
    async fn a_starved_normal_queue_goes_first_in_a_take_that_fits_everything() {
        let outbox = outbox();
        let one = SharedRecord::for_test(0, b"v").cost();
        outbox.push_delivery(delivery(0, false)).expect("room");
        outbox.push_delivery(delivery(1, false)).expect("room");
        for offset in 100..104 {
            outbox.push_delivery(delivery(offset, true)).expect("room");
        }
        for _ in 0..STARVATION_BOUND {
            assert!(take(&outbox, one).await[0].1, "urgent first");
        }
        outbox.push_delivery(delivery(104, true)).expect("room");
        assert_eq!(
            take(&outbox, 1 << 20).await,
            [(0, false), (1, false), (104, true)],
            "the starved normal queue first, then the urgent one, all of both"
        );
        assert_eq!(outbox.queued_bytes(), 0);
        // Nothing left waiting: the next take starts with the urgent queue.
        outbox.push_delivery(delivery(2, false)).expect("room");
        outbox.push_delivery(delivery(105, true)).expect("room");
        assert_eq!(take(&outbox, 1 << 20).await, [(105, true), (2, false)]);
    }

    #[tokio::test]
    async fn a_take_that_cannot_hold_an_urgent_event_still_fills_with_normal_ones() {
        let outbox = outbox();
        let small = SharedRecord::for_test(0, b"v").cost();
        let big = Delivery {
            record: Arc::new(SharedRecord::for_test(9, &[0; 64])),
            ..delivery(9, true)
        };
        outbox.push_delivery(delivery(10, true)).expect("room");
        outbox.push_delivery(big).expect("room");
        outbox.push_delivery(delivery(0, false)).expect("room");
        assert_eq!(
            take(&outbox, 2 * small).await,
            [(10, true), (0, false)],
            "the large urgent delivery waits for the next take"
        );
        assert_eq!(take(&outbox, 2 * small).await, [(9, true)]);
    }
}
