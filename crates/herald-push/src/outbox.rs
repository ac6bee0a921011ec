//! A session's outbox: the events queued for its client, bounded in bytes
//! and by the client's credit.
//!
//! Tailers and catch-up readers push deliveries; the session's writer
//! drains everything queued in one go. A delivery that does not fit (the
//! queue holds `limit` bytes, or the client's credit is spent) is refused,
//! and its subscription continues from the log instead: the outbox never
//! grows past its bound, and nothing refused is lost.

use std::collections::VecDeque;

use std::sync::Arc;

use parking_lot::Mutex;
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

struct Queue {
    events: VecDeque<Event>,
    bytes: usize,
    credit: Credit,
    closed: bool,
}

/// The bounded queue of one session.
pub struct Outbox {
    queue: Mutex<Queue>,
    limit: usize,
    /// Wakes the writer.
    ready: Notify,
    /// Wakes catch-up readers waiting for room.
    room: Notify,
    stats: Arc<PushStats>,
}

impl std::fmt::Debug for Outbox {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let queue = self.queue.lock();
        f.debug_struct("Outbox")
            .field("events", &queue.events.len())
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
                bytes: 0,
                credit,
                closed: false,
            }),
            limit,
            ready: Notify::new(),
            room: Notify::new(),
            stats,
        }
    }

    /// Queues a delivery if it fits and the credit allows, spending the
    /// credit. `Ok(true)` when the queue was empty: the caller wakes the
    /// writer with [`Outbox::wake`] (once, after its whole batch).
    pub fn push_delivery(&self, delivery: Delivery) -> Result<bool, Refusal> {
        let cost = delivery.record.cost();
        let mut queue = self.queue.lock();
        if queue.closed {
            return Err(Refusal::Closed);
        }
        // One delivery larger than the whole bound still goes, alone.
        let fits = queue.bytes == 0 || queue.bytes + cost <= self.limit;
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
        let was_empty = queue.events.is_empty();
        queue.bytes += cost;
        queue.events.push_back(Event::Delivery(delivery));
        PushStats::add(&self.stats.queued_bytes, cost as u64);
        Ok(was_empty)
    }

    /// Queues a control event (subscribed, gap, state, unsubscribed): never
    /// refused for room, since each is bounded by the session's
    /// subscriptions, and wakes the writer.
    pub fn push_event(&self, event: Event) {
        let mut queue = self.queue.lock();
        if queue.closed {
            return;
        }
        let cost = event.cost();
        queue.bytes += cost;
        queue.events.push_back(event);
        drop(queue);
        PushStats::add(&self.stats.queued_bytes, cost as u64);
        self.ready.notify_one();
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
            let notified = self.ready.notified();
            {
                let mut queue = self.queue.lock();
                if !queue.events.is_empty() {
                    let mut taken = Vec::with_capacity(queue.events.len().min(1024));
                    let mut bytes = 0;
                    while let Some(event) = queue.events.front() {
                        let cost = event.cost();
                        if !taken.is_empty() && bytes + cost > max_bytes {
                            break;
                        }
                        bytes += cost;
                        taken.extend(queue.events.pop_front());
                    }
                    queue.bytes -= bytes;
                    drop(queue);
                    PushStats::sub(&self.stats.queued_bytes, bytes as u64);
                    self.room.notify_waiters();
                    return Some(taken);
                }
                if queue.closed {
                    return None;
                }
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
        let dropped = std::mem::take(&mut queue.bytes);
        drop(queue);
        PushStats::sub(&self.stats.queued_bytes, dropped as u64);
        self.ready.notify_one();
        self.room.notify_waiters();
    }
}
