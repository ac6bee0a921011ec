//! One subscription: its selector, and for each partition of its topic a
//! cursor that is either live (fed by the partition's tailer) or catching
//! up (fed by a catch-up reader from the log).
//!
//! The hand-over between the two is the one subtle part. A tailer
//! publishes its `frontier` (it will offer every record at or past it)
//! before it offers any record of a batch, and offers under the cursor's
//! lock. A catch-up reader turns its cursor live, under the same lock, only
//! once its position has reached the frontier. So a record the tailer
//! skipped because the cursor was catching up lies below a frontier the
//! reader saw, and the reader delivered it; a record past the reader's
//! position is offered by the tailer once live. Nothing is skipped and
//! nothing is sent twice.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use herald_broker::subject_index::SubjectProbe;
use herald_broker::{Partition, Topic};
use herald_subjects::Selector;
use parking_lot::Mutex;

use crate::event::{Delivery, Event};
use crate::outbox::{Outbox, Pusher, Refusal};
use crate::run::{RunContext, RunOffered, RunRecord};
use crate::selection::Selection;
use crate::tailer::Frontier;

/// How a subscriber acknowledges.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AckMode {
    /// What was sent counts as processed.
    None,
    /// The client acknowledges each partition's deliveries cumulatively.
    Cumulative,
}

/// Who feeds a cursor now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Feed {
    /// The partition's tailer, as records arrive.
    Live,
    /// A catch-up reader, from the log.
    CatchingUp,
}

/// A subscription's place in one partition.
#[derive(Debug)]
pub(crate) struct Cursor {
    pub(crate) feed: Feed,
    /// The next offset to consider: every matching record below it was
    /// queued for the client (or reported in a gap).
    pub(crate) next: u64,
    /// Ack mode cumulative: every delivery below this was acknowledged.
    pub(crate) acked: u64,
    /// Just past the last delivery queued (or gap told): once `acked`
    /// reaches it, every record below `next` was acknowledged or was not
    /// for this subscription, and the position is `next`.
    pub(crate) queued_end: u64,
    /// While catching up: offsets of high-priority records the tailer
    /// delivered ahead of the reader, ascending; the reader passes over
    /// them. At most [`AHEAD_MAX`].
    pub(crate) ahead: Vec<u64>,
}

/// A cursor in a cache line of its own: a subscription's cursors sit side
/// by side, each locked by its partition's tailer, which would otherwise
/// share lines across cores; and a tailer asks for one line ahead of
/// its offer (see `prefetch_cursor`), not two.
#[repr(align(64))]
#[derive(Debug)]
pub(crate) struct CursorSlot(Mutex<Cursor>);

// One line, not two: the lock and the cursor fit it exactly.
const _: () = assert!(std::mem::size_of::<CursorSlot>() == 64);

impl std::ops::Deref for CursorSlot {
    type Target = Mutex<Cursor>;

    fn deref(&self) -> &Mutex<Cursor> {
        &self.0
    }
}

/// The most high-priority records delivered ahead of a catch-up reader at
/// once; past it, the reader delivers the rest in their turn.
pub(crate) const AHEAD_MAX: usize = 1024;

/// What a new subscription is, before it has cursors.
pub(crate) struct Spec {
    pub(crate) id: u64,
    pub(crate) topic: Arc<Topic>,
    pub(crate) selector: Selector,
    pub(crate) ack_mode: AckMode,
    pub(crate) max_lag: u64,
    pub(crate) durable: Option<Arc<crate::durable::Durable>>,
    pub(crate) selection: Selection,
    pub(crate) report_expired: bool,
}

/// One subscription of one session.
pub struct Subscription {
    pub(crate) id: u64,
    pub(crate) topic: Arc<Topic>,
    pub(crate) partitions: Arc<Vec<Arc<Partition>>>,
    pub(crate) selector: Selector,
    /// A literal subject's probe of the partitions' subject filters, for
    /// catch-up readers to pass over blocks without it.
    pub(crate) subject_probe: Option<SubjectProbe>,
    pub(crate) ack_mode: AckMode,
    pub(crate) max_lag: u64,
    pub(crate) outbox: Arc<Outbox>,
    pub(crate) cursors: Box<[CursorSlot]>,
    /// Where a named subscription keeps its positions.
    pub(crate) durable: Option<Arc<crate::durable::Durable>>,
    /// Its filter and attributes.
    pub(crate) selection: Selection,
    /// Tell the client of expired records with a gap.
    pub(crate) report_expired: bool,
    closed: AtomicBool,
}

impl std::fmt::Debug for Subscription {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Subscription")
            .field("id", &self.id)
            .field("topic", &self.topic.name())
            .field("selector", &self.selector)
            .finish()
    }
}

/// A subscription as a routing-table entry: equal only to itself.
#[derive(Debug, Clone)]
pub(crate) struct Route(pub(crate) Arc<Subscription>);

impl PartialEq for Route {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}

impl Subscription {
    pub(crate) fn new(spec: Spec, outbox: Arc<Outbox>, starts: &[u64]) -> Self {
        let cursors = starts
            .iter()
            .map(|&start| {
                CursorSlot(Mutex::new(Cursor {
                    feed: Feed::CatchingUp,
                    next: start,
                    acked: start,
                    queued_end: start,
                    ahead: Vec::new(),
                }))
            })
            .collect();
        Self {
            id: spec.id,
            partitions: spec.topic.partitions(),
            topic: spec.topic,
            subject_probe: match &spec.selector {
                Selector::Literal(subject) => Some(SubjectProbe::of(subject)),
                Selector::Pattern(_) => None,
            },
            selector: spec.selector,
            ack_mode: spec.ack_mode,
            max_lag: spec.max_lag,
            outbox,
            cursors,
            durable: spec.durable,
            selection: spec.selection,
            report_expired: spec.report_expired,
            closed: AtomicBool::new(false),
        }
    }

    /// The client's id for this subscription.
    pub fn id(&self) -> u64 {
        self.id
    }

    /// Asks for the cache lines of this subscription, which
    /// [`Self::offer_run`] reads (and [`Self::prefetch_cursor`] needs):
    /// see the tailer's `offer_chunk`.
    pub(crate) fn prefetch(&self) {
        herald_subjects::prefetch_lines(self);
    }

    /// Asks for the cache line of the cursor in `partition`, which
    /// [`Self::offer_run`] locks first: see the tailer's `offer_chunk`.
    /// Reads this subscription's cursors, so best called a little after
    /// [`Self::prefetch`].
    pub(crate) fn prefetch_cursor(&self, partition: u32) {
        if let Some(cursor) = self.cursors.get(partition as usize) {
            herald_subjects::prefetch(cursor);
        }
    }

    /// A tailer offers a run of records (one subject's, in order) that
    /// this subscription's selector matched, under one acquisition of the
    /// cursor's lock and at most one of the session's. For each record:
    ///
    /// - one the selection does not admit moves a live cursor past it, so
    ///   that an acknowledgement of what came before covers it;
    /// - an expired one does too, with a one-record gap if the client
    ///   asked to be told;
    /// - the rest are queued while the cursor is live. A high-priority one
    ///   goes out even while the cursor catches up (ahead of the reader,
    ///   which then passes over it).
    ///
    /// A record is made shareable only if it is queued: a tailer behind a
    /// flood that its subscribers are catching up on builds nothing for
    /// them.
    pub(crate) fn offer_run(
        &self,
        partition: u32,
        run: &mut [RunRecord<'_>],
        context: &RunContext,
    ) -> RunOffered {
        let mut offered = RunOffered::default();
        let Some(cursor) = self.cursors.get(partition as usize) else {
            return offered;
        };
        let mut cursor = cursor.lock();
        // Checked once: `close` waits for this lock before it returns, so
        // nothing is queued after it has.
        if self.is_closed() {
            return offered;
        }
        let mut pusher: Option<Pusher<'_>> = None;
        for entry in run.iter_mut() {
            let offset = entry.offset();
            if !self.selection.admits(&entry.record) {
                if cursor.feed == Feed::Live && offset >= cursor.next {
                    cursor.next = offset + 1;
                }
                continue;
            }
            if entry.expired(context) {
                offered.expired += 1;
                if cursor.feed != Feed::Live || offset < cursor.next {
                    continue;
                }
                cursor.next = offset + 1;
                if self.report_expired {
                    cursor.queued_end = cursor.next;
                    pusher
                        .get_or_insert_with(|| self.outbox.pusher())
                        .push_event(Event::Gap {
                            subscription_id: self.id,
                            partition,
                            from_offset: offset,
                            to_offset: offset + 1,
                            reason: crate::GapReason::Expired,
                        });
                }
                continue;
            }
            if offset < cursor.next {
                continue;
            }
            let high_priority = entry.high_priority(context);
            if cursor.feed != Feed::Live && (!high_priority || cursor.ahead.len() >= AHEAD_MAX) {
                continue;
            }
            let delivery = Delivery {
                subscription_id: self.id,
                partition,
                record: entry.shared(),
                high_priority,
            };
            let pushed = pusher
                .get_or_insert_with(|| self.outbox.pusher())
                .push_delivery(delivery);
            match (cursor.feed, pushed) {
                (Feed::CatchingUp, Ok(())) => {
                    cursor.ahead.push(offset);
                    offered.queued += 1;
                }
                // Refused: the reader delivers it in its turn.
                (Feed::CatchingUp, Err(_)) | (Feed::Live, Err(Refusal::Closed)) => {}
                (Feed::Live, Ok(())) => {
                    cursor.next = offset + 1;
                    cursor.queued_end = cursor.next;
                    offered.queued += 1;
                }
                (Feed::Live, Err(Refusal::Full)) => {
                    // Every record between `next` and this one was offered
                    // and did not match, so the reader starts here.
                    cursor.next = offset;
                    cursor.feed = Feed::CatchingUp;
                    offered.overflowed = true;
                }
            }
        }
        offered.wake = pusher.as_ref().is_some_and(Pusher::needs_wake);
        offered
    }

    /// Turns the cursor of `partition` live if its position reached the
    /// tailer's frontier; otherwise answers where to read from.
    pub(crate) fn go_live_or_next(&self, partition: u32, frontier: &Frontier) -> Option<u64> {
        let mut cursor = self.cursors[partition as usize].lock();
        if cursor.next >= frontier.get() {
            cursor.feed = Feed::Live;
            // Whatever went ahead lies below the frontier, so below `next`:
            // the reader passed it.
            cursor.ahead.clear();
            None
        } else {
            Some(cursor.next)
        }
    }

    /// A catch-up reader queues a delivery and moves its cursor past it.
    pub(crate) fn deliver_caught_up(
        &self,
        partition: u32,
        delivery: Delivery,
    ) -> Result<bool, Refusal> {
        let mut cursor = self.cursors[partition as usize].lock();
        if self.is_closed() {
            return Err(Refusal::Closed);
        }
        let offset = delivery.record.offset;
        // Delivered ahead already (high priority, by the tailer).
        let passed = cursor.ahead.partition_point(|&o| o < offset);
        cursor.ahead.drain(..passed);
        if cursor.ahead.first() == Some(&offset) {
            cursor.ahead.remove(0);
            cursor.next = cursor.next.max(offset + 1);
            return Ok(false);
        }
        let was_empty = self.outbox.push_delivery(delivery)?;
        cursor.next = cursor.next.max(offset + 1);
        cursor.queued_end = cursor.next;
        Ok(was_empty)
    }

    /// Moves a catching-up cursor's position (the reader's progress).
    pub(crate) fn advance(&self, partition: u32, next: u64) {
        let mut cursor = self.cursors[partition as usize].lock();
        cursor.next = cursor.next.max(next);
        let passed = cursor.ahead.partition_point(|&o| o < cursor.next);
        cursor.ahead.drain(..passed);
    }

    /// Records that `[from, to)` of `partition` will not be delivered,
    /// tells the client, and moves the cursor to `to`.
    pub(crate) fn skip(&self, partition: u32, from: u64, to: u64, reason: crate::GapReason) {
        let mut cursor = self.cursors[partition as usize].lock();
        if to <= cursor.next {
            return;
        }
        // `acked` stays: a resume from before the gap meets it again and is
        // told again, rather than losing deliveries not yet acknowledged.
        // The gap counts as queued: only an ack past it covers it.
        cursor.next = to;
        cursor.queued_end = to;
        drop(cursor);
        self.outbox.push_event(Event::Gap {
            subscription_id: self.id,
            partition,
            from_offset: from,
            to_offset: to,
            reason,
        });
    }

    /// Acknowledges every delivery of `partition` up to `offset`. Refused
    /// (false) for an offset not yet delivered.
    pub(crate) fn ack(&self, partition: u32, offset: u64) -> bool {
        let Some(cursor) = self.cursors.get(partition as usize) else {
            return false;
        };
        let mut cursor = cursor.lock();
        if offset >= cursor.next {
            return false;
        }
        cursor.acked = cursor.acked.max(offset + 1);
        true
    }

    /// Each partition's resume position: what was acknowledged (ack mode
    /// cumulative) or sent (ack mode none), and once everything queued is
    /// acknowledged, the records passed over since as well.
    pub(crate) fn positions(&self) -> Vec<(u32, u64)> {
        self.cursors
            .iter()
            .enumerate()
            .map(|(partition, cursor)| {
                let cursor = cursor.lock();
                let position = match self.ack_mode {
                    AckMode::None => cursor.next,
                    AckMode::Cumulative if cursor.acked >= cursor.queued_end => cursor.next,
                    AckMode::Cumulative => cursor.acked,
                };
                (partition as u32, position)
            })
            .collect()
    }

    /// Stops every feed: after this returns, no tailer or reader queues
    /// anything more for it.
    pub(crate) fn close(&self) {
        self.closed.store(true, Ordering::SeqCst);
        // Taking each lock once waits out an offer in progress.
        for cursor in self.cursors.iter() {
            drop(cursor.lock());
        }
    }

    /// True once closed.
    pub(crate) fn is_closed(&self) -> bool {
        self.closed.load(Ordering::SeqCst)
    }
}
