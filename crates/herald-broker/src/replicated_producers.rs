//! Idempotent producers on a replicated partition (feature `cluster`).
//!
//! A Raft leader decides a batch's offsets only when its log appends it,
//! after the produce call queued it, so the embedded log's bookkeeping
//! (record the batch's offsets as it is placed) does not fit. Instead every
//! replica records each idempotent batch when it applies it (the apply
//! hook), in log order: the state is a function of the committed log, the
//! same on every replica, and a new leader has it without a handover. On
//! the leader, a batch is checked against that state and against the
//! batches it has queued and not yet applied (`InFlight`), so that a
//! producer's next batch, or its retry, is judged with everything it sent
//! before:
//!
//! - the next batch after what is applied or queued is appended;
//! - a retry of an applied batch is answered with its original offsets;
//! - a retry of a batch still queued is answered DUPLICATE_SEQUENCE_NUMBER,
//!   which Kafka's clients take as success (the original's answer carries
//!   the offsets);
//! - anything else is refused as on a single node.
//!
//! A new leader takes idempotent batches only once it has applied an entry
//! of its own term (its blank entry, which follows everything earlier
//! leaders wrote; before that its state may miss entries it holds); until
//! then it answers NOT_LEADER_OR_FOLLOWER and the client retries.

use std::collections::HashMap;
use std::sync::Arc;

use herald_raft::state_machine::ApplyHook;
use herald_records::BatchHeader;
use parking_lot::Mutex;

use crate::producer_state::{last_sequence, BatchMetadata, ProducerStates, SequenceCheck};

/// The last batch each producer has queued on this leader and not yet
/// applied: `(epoch, last sequence)`.
#[derive(Debug, Default)]
pub(crate) struct InFlight(Mutex<HashMap<i64, (i16, i32)>>);

impl InFlight {
    /// The batch `producer_id` last queued, if not yet applied.
    pub(crate) fn last(&self, producer_id: i64) -> Option<(i16, i32)> {
        self.0.lock().get(&producer_id).copied()
    }

    /// Notes a queued batch.
    pub(crate) fn queued(&self, producer_id: i64, epoch: i16, last: i32) {
        self.0.lock().insert(producer_id, (epoch, last));
    }

    /// Forgets a queued batch that will not be applied (its proposal
    /// failed), unless a later one was queued since.
    pub(crate) fn abandoned(&self, producer_id: i64, epoch: i16, last: i32) {
        let mut queued = self.0.lock();
        if queued.get(&producer_id) == Some(&(epoch, last)) {
            queued.remove(&producer_id);
        }
    }

    /// Forgets what an applied batch covers.
    fn applied(&self, producer_id: i64, epoch: i16, last: i32) {
        let mut queued = self.0.lock();
        if let Some(&(e, l)) = queued.get(&producer_id) {
            if e < epoch || (e == epoch && l <= last) {
                queued.remove(&producer_id);
            }
        }
    }
}

/// What a leader does with an idempotent batch, given what it queued.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum QueuedCheck {
    /// Nothing queued for this producer: check against the applied state.
    Nothing,
    /// The batch follows the queued one: append it.
    Next,
    /// The batch is a retry of one still queued.
    Duplicate,
    /// The batch neither follows nor repeats what is queued.
    OutOfOrder {
        /// The sequence that would follow.
        expected: i32,
    },
}

/// Judges a batch (`epoch`, `first`..`last`) against the producer's queued
/// batch.
pub(crate) fn check_queued(
    queued: Option<(i16, i32)>,
    epoch: i16,
    first: i32,
    last: i32,
) -> QueuedCheck {
    match queued {
        None => QueuedCheck::Nothing,
        Some((e, _)) if epoch > e && first == 0 => QueuedCheck::Next,
        Some((e, _)) if epoch != e => QueuedCheck::Nothing,
        Some((_, queued_last)) => {
            let expected = queued_last.wrapping_add(1).max(0);
            if first == expected {
                QueuedCheck::Next
            } else if last <= queued_last && first <= last {
                QueuedCheck::Duplicate
            } else {
                QueuedCheck::OutOfOrder { expected }
            }
        }
    }
}

/// The apply hook of a replicated partition: records every applied
/// idempotent batch in `producers` (as the log orders them; a duplicate
/// the leader let through is not recorded twice) and clears what it
/// covers from `in_flight`.
pub(crate) fn apply_hook(producers: Arc<ProducerStates>, in_flight: Arc<InFlight>) -> ApplyHook {
    Arc::new(move |_, batch, placed| {
        let Some(placed) = placed else {
            return;
        };
        let Some(header) = BatchHeader::parse(batch.bytes()) else {
            return;
        };
        let producer_id = header.producer_id();
        if producer_id < 0 {
            return;
        }
        let (epoch, first, count) = (
            header.producer_epoch(),
            header.base_sequence(),
            header.records_count(),
        );
        let last = last_sequence(first, count);
        let (entry, created) = producers.entry(producer_id);
        {
            let mut entry = entry.lock();
            let duplicate = matches!(
                entry.check(producer_id, epoch, first, count),
                Ok(SequenceCheck::Duplicate(_))
            );
            if !duplicate {
                entry.record(
                    epoch,
                    BatchMetadata {
                        first_sequence: first,
                        last_sequence: last,
                        base_offset: placed.base_offset,
                        last_offset: placed.last_offset,
                    },
                    header.max_timestamp(),
                );
            }
        }
        if created {
            producers.admit();
        }
        in_flight.applied(producer_id, epoch, last);
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_leader_judges_a_batch_against_what_it_queued() {
        assert_eq!(check_queued(None, 0, 5, 9), QueuedCheck::Nothing);
        // Queued 0..=9 in epoch 2.
        let queued = Some((2, 9));
        assert_eq!(check_queued(queued, 2, 10, 14), QueuedCheck::Next);
        assert_eq!(check_queued(queued, 2, 5, 9), QueuedCheck::Duplicate);
        assert_eq!(check_queued(queued, 2, 0, 4), QueuedCheck::Duplicate);
        assert_eq!(
            check_queued(queued, 2, 12, 14),
            QueuedCheck::OutOfOrder { expected: 10 }
        );
        // A bumped epoch starts over at 0; an older one is left to the
        // applied state, which refuses it.
        assert_eq!(check_queued(queued, 3, 0, 4), QueuedCheck::Next);
        assert_eq!(check_queued(queued, 1, 0, 4), QueuedCheck::Nothing);
    }

    #[test]
    fn applying_a_batch_clears_what_it_covers_only() {
        let in_flight = InFlight::default();
        in_flight.queued(7, 1, 20);
        in_flight.applied(7, 1, 10);
        assert_eq!(in_flight.last(7), Some((1, 20)));
        in_flight.applied(7, 1, 20);
        assert_eq!(in_flight.last(7), None);
        in_flight.queued(7, 1, 30);
        in_flight.abandoned(7, 1, 25);
        assert_eq!(in_flight.last(7), Some((1, 30)));
        in_flight.abandoned(7, 1, 30);
        assert_eq!(in_flight.last(7), None);
    }
}
