//! Idempotent-producer state of one partition, as a pure state machine: for
//! each producer id, its current epoch and the metadata of its last
//! [`BATCHES_KEPT`] batches. It decides whether a batch is next in sequence,
//! a retried duplicate (answered with its original offsets), or an error; the
//! caller appends and then records. No I/O here, so every rule is unit-tested.
//!
//! The state is bounded ([`ProducerStates`]): a producer id unused for
//! `producer.id.expiration.ms` (by its batches' timestamps, as Kafka counts)
//! is dropped by maintenance, and past a per-partition cap the producer
//! unused the longest makes room for a new one.

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;

use parking_lot::Mutex;

use crate::error::ProduceError;

/// How many recent batches per producer are remembered for duplicate
/// detection: Kafka clients keep at most five requests in flight per
/// partition, so a retry is always one of the last five.
pub const BATCHES_KEPT: usize = 5;

/// Offsets and sequences of one appended batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BatchMetadata {
    /// Sequence of the first record.
    pub first_sequence: i32,
    /// Sequence of the last record.
    pub last_sequence: i32,
    /// Offset of the first record.
    pub base_offset: u64,
    /// Offset of the last record.
    pub last_offset: u64,
}

/// What to do with a batch from an idempotent producer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SequenceCheck {
    /// The batch is next in sequence: append it, then [`ProducerEntry::record`].
    Append,
    /// The batch was appended before: answer with these offsets, append nothing.
    Duplicate(BatchMetadata),
}

/// State of one producer id on one partition.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ProducerEntry {
    epoch: Option<i16>,
    batches: VecDeque<BatchMetadata>,
    /// Largest record timestamp of the producer's latest batch: when it
    /// was last used, for expiration.
    last_timestamp: i64,
}

/// Sequence of the last record of a batch of `count` records starting at
/// `first`; sequences wrap from `i32::MAX` to 0, as in Kafka.
pub fn last_sequence(first: i32, count: i32) -> i32 {
    let span = i64::from(count.max(1)) - 1;
    ((i64::from(first) + span) % (i64::from(i32::MAX) + 1)) as i32
}

fn next_sequence(last: i32) -> i32 {
    if last == i32::MAX {
        0
    } else {
        last + 1
    }
}

impl ProducerEntry {
    /// The producer's current epoch, if any batch was recorded.
    pub fn epoch(&self) -> Option<i16> {
        self.epoch
    }

    /// Largest record timestamp of the producer's latest batch (ms).
    pub fn last_timestamp(&self) -> i64 {
        self.last_timestamp
    }

    /// The remembered batches, oldest first.
    pub fn batches(&self) -> impl Iterator<Item = &BatchMetadata> {
        self.batches.iter()
    }

    /// Decides about a batch of `count` records with `epoch` and `first_sequence`.
    pub fn check(
        &self,
        producer_id: i64,
        epoch: i16,
        first_sequence: i32,
        count: i32,
    ) -> Result<SequenceCheck, ProduceError> {
        let Some(current) = self.epoch else {
            // Nothing known of this producer: its first batch starts at 0.
            return if first_sequence == 0 {
                Ok(SequenceCheck::Append)
            } else {
                Err(ProduceError::UnknownProducerId { producer_id })
            };
        };
        if epoch < current {
            return Err(ProduceError::InvalidProducerEpoch {
                producer_id,
                current,
                found: epoch,
            });
        }
        if epoch > current {
            // A bumped epoch restarts the sequence.
            return if first_sequence == 0 {
                Ok(SequenceCheck::Append)
            } else {
                Err(ProduceError::OutOfOrderSequence {
                    producer_id,
                    expected: 0,
                    found: first_sequence,
                })
            };
        }
        let last = last_sequence(first_sequence, count);
        if let Some(dup) = self
            .batches
            .iter()
            .find(|b| b.first_sequence == first_sequence && b.last_sequence == last)
        {
            return Ok(SequenceCheck::Duplicate(*dup));
        }
        let expected = self
            .batches
            .back()
            .map_or(0, |b| next_sequence(b.last_sequence));
        if first_sequence != expected {
            return Err(ProduceError::OutOfOrderSequence {
                producer_id,
                expected,
                found: first_sequence,
            });
        }
        Ok(SequenceCheck::Append)
    }

    /// Records an appended batch whose largest record timestamp is
    /// `timestamp` (after a successful [`Self::check`], or while rebuilding
    /// from the log). A newer epoch forgets older batches.
    pub fn record(&mut self, epoch: i16, batch: BatchMetadata, timestamp: i64) {
        self.last_timestamp = self.last_timestamp.max(timestamp);
        match self.epoch {
            Some(current) if current > epoch => return,
            Some(current) if current == epoch => {}
            _ => {
                self.epoch = Some(epoch);
                self.batches.clear();
            }
        }
        if self.batches.len() == BATCHES_KEPT {
            self.batches.pop_front();
        }
        self.batches.push_back(batch);
    }
}

/// Default cap on the producer ids one partition keeps state for. At a few
/// hundred bytes each, 10,000 producers take a few MB per partition.
pub const PRODUCERS_PER_PARTITION_MAX: usize = 10_000;

/// The idempotent-producer state of one partition, bounded.
#[derive(Debug)]
pub struct ProducerStates {
    entries: Mutex<HashMap<i64, Arc<Mutex<ProducerEntry>>>>,
    max: usize,
}

impl ProducerStates {
    /// State rebuilt from a snapshot and the log, keeping at most `max`
    /// producers (the most recently used).
    pub fn new(entries: HashMap<i64, ProducerEntry>, max: usize) -> Self {
        let states = Self {
            entries: Mutex::new(HashMap::new()),
            max: max.max(1),
        };
        let mut by_age: Vec<_> = entries.into_iter().collect();
        by_age.sort_by_key(|(_, e)| std::cmp::Reverse(e.last_timestamp));
        by_age.truncate(states.max);
        *states.entries.lock() = by_age
            .into_iter()
            .map(|(id, e)| (id, Arc::new(Mutex::new(e))))
            .collect();
        states
    }

    /// The state of `producer_id`, created empty if there is none; the
    /// flag says it was created. A created entry must be either recorded
    /// into and then [`Self::admit`]ted, or [`Self::forget_unused`], so that
    /// refused batches of unknown producers never take room.
    pub fn entry(&self, producer_id: i64) -> (Arc<Mutex<ProducerEntry>>, bool) {
        let mut entries = self.entries.lock();
        if let Some(entry) = entries.get(&producer_id) {
            return (Arc::clone(entry), false);
        }
        (Arc::clone(entries.entry(producer_id).or_default()), true)
    }

    /// Drops `producer_id`'s entry if nothing was ever recorded in it (its
    /// first batch was refused).
    pub fn forget_unused(&self, producer_id: i64) {
        let mut entries = self.entries.lock();
        if entries
            .get(&producer_id)
            .is_some_and(|e| e.lock().epoch().is_none())
        {
            entries.remove(&producer_id);
        }
    }

    /// Keeps the table within its cap after a new producer's first batch
    /// was recorded: the producer unused the longest goes (a retry of its
    /// old batches is then checked as a new producer's would be).
    pub fn admit(&self) {
        let mut entries = self.entries.lock();
        while entries.len() > self.max {
            // Only past the cap, so the scan costs nothing on the usual path.
            let oldest = entries
                .iter()
                .filter(|(_, e)| e.lock().epoch().is_some())
                .min_by_key(|(_, e)| e.lock().last_timestamp)
                .map(|(id, _)| *id);
            let Some(oldest) = oldest else { break };
            entries.remove(&oldest);
            tracing::debug!(producer_id = oldest, "producer state evicted at the cap");
        }
    }

    /// Drops every producer whose latest batch is older than
    /// `expiration_ms` at `now_ms`; returns how many were dropped.
    pub fn expire(&self, now_ms: i64, expiration_ms: i64) -> usize {
        let cutoff = now_ms.saturating_sub(expiration_ms);
        let mut entries = self.entries.lock();
        let before = entries.len();
        entries.retain(|_, e| e.lock().last_timestamp > cutoff);
        before - entries.len()
    }

    /// A copy of every producer's state.
    pub fn snapshot(&self) -> Vec<(i64, ProducerEntry)> {
        self.entries
            .lock()
            .iter()
            .map(|(id, entry)| (*id, entry.lock().clone()))
            .collect()
    }

    /// Number of producers with state.
    pub fn len(&self) -> usize {
        self.entries.lock().len()
    }

    /// True if no producer has state.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn meta(first: i32, count: i32, base: u64) -> BatchMetadata {
        BatchMetadata {
            first_sequence: first,
            last_sequence: last_sequence(first, count),
            base_offset: base,
            last_offset: base + count as u64 - 1,
        }
    }

    fn entry_with(batches: &[(i32, i32, u64)]) -> ProducerEntry {
        let mut e = ProducerEntry::default();
        for &(first, count, base) in batches {
            e.record(0, meta(first, count, base), 0);
        }
        e
    }

    #[test]
    fn first_batch_of_new_producer_must_start_at_zero() {
        let e = ProducerEntry::default();
        assert_eq!(e.check(7, 0, 0, 3).expect("ok"), SequenceCheck::Append);
        assert!(matches!(
            e.check(7, 0, 5, 3),
            Err(ProduceError::UnknownProducerId { producer_id: 7 })
        ));
    }

    #[test]
    fn next_batch_in_sequence_is_appended() {
        let e = entry_with(&[(0, 3, 0)]);
        assert_eq!(e.check(7, 0, 3, 2).expect("ok"), SequenceCheck::Append);
    }

    #[test]
    fn gap_in_sequence_is_out_of_order() {
        let e = entry_with(&[(0, 3, 0)]);
        let err = e.check(7, 0, 5, 1).expect_err("gap");
        assert!(matches!(
            err,
            ProduceError::OutOfOrderSequence {
                expected: 3,
                found: 5,
                ..
            }
        ));
    }

    #[test]
    fn retried_batch_gets_its_original_offsets() {
        let e = entry_with(&[(0, 3, 10), (3, 2, 13), (5, 1, 15)]);
        assert_eq!(
            e.check(7, 0, 3, 2).expect("dup"),
            SequenceCheck::Duplicate(meta(3, 2, 13))
        );
    }

    #[test]
    fn only_the_last_five_batches_are_remembered() {
        let e = entry_with(&[
            (0, 1, 0),
            (1, 1, 1),
            (2, 1, 2),
            (3, 1, 3),
            (4, 1, 4),
            (5, 1, 5),
        ]);
        assert_eq!(e.batches().count(), BATCHES_KEPT);
        assert!(matches!(
            e.check(7, 0, 0, 1),
            Err(ProduceError::OutOfOrderSequence { .. })
        ));
        assert!(matches!(
            e.check(7, 0, 1, 1),
            Ok(SequenceCheck::Duplicate(_))
        ));
    }

    #[test]
    fn older_epoch_is_fenced() {
        let mut e = ProducerEntry::default();
        e.record(3, meta(0, 1, 0), 0);
        assert!(matches!(
            e.check(7, 2, 1, 1),
            Err(ProduceError::InvalidProducerEpoch {
                current: 3,
                found: 2,
                ..
            })
        ));
    }

    #[test]
    fn bumped_epoch_restarts_sequence_at_zero() {
        let e = entry_with(&[(0, 3, 0)]);
        assert_eq!(e.check(7, 1, 0, 1).expect("ok"), SequenceCheck::Append);
        assert!(matches!(
            e.check(7, 1, 3, 1),
            Err(ProduceError::OutOfOrderSequence { expected: 0, .. })
        ));
        let mut e = e;
        e.record(1, meta(0, 1, 3), 0);
        assert_eq!(e.epoch(), Some(1));
        assert_eq!(e.batches().count(), 1);
    }

    #[test]
    fn sequence_wraps_after_i32_max() {
        assert_eq!(last_sequence(i32::MAX - 1, 4), 1);
        let mut e = ProducerEntry::default();
        e.record(0, meta(i32::MAX - 1, 2, 0), 0);
        assert_eq!(e.check(7, 0, 0, 1).expect("wrapped"), SequenceCheck::Append);
    }

    fn used_at(timestamp: i64) -> ProducerEntry {
        let mut e = ProducerEntry::default();
        e.record(0, meta(0, 1, 0), timestamp);
        e
    }

    #[test]
    fn producers_unused_past_the_expiration_are_dropped() {
        let states = ProducerStates::new(
            HashMap::from([(1, used_at(1_000)), (2, used_at(5_000))]),
            PRODUCERS_PER_PARTITION_MAX,
        );
        // At 6_000 with a 2_000 ms expiration: 1 (used at 1_000) goes.
        assert_eq!(states.expire(6_000, 2_000), 1);
        assert_eq!(states.len(), 1);
        assert_eq!(states.entry(2).0.lock().last_timestamp(), 5_000);
        // Exactly at the expiration it goes too.
        assert_eq!(states.expire(7_000, 2_000), 1);
        assert!(states.is_empty());
    }

    #[test]
    fn at_the_cap_the_producer_unused_longest_makes_room() {
        let states = ProducerStates::new(
            HashMap::from([
                (1, used_at(3_000)),
                (2, used_at(1_000)),
                (3, used_at(2_000)),
            ]),
            3,
        );
        let (entry, created) = states.entry(4);
        assert!(created);
        entry.lock().record(0, meta(0, 1, 9), 4_000);
        states.admit();
        let mut kept: Vec<i64> = states.snapshot().into_iter().map(|(id, _)| id).collect();
        kept.sort_unstable();
        assert_eq!(
            kept,
            [1, 3, 4],
            "producer 2, unused the longest, was dropped"
        );
    }

    #[test]
    fn rebuilt_state_keeps_the_most_recently_used_within_the_cap() {
        let states = ProducerStates::new(
            HashMap::from([(1, used_at(1)), (2, used_at(3)), (3, used_at(2))]),
            2,
        );
        let mut kept: Vec<i64> = states.snapshot().into_iter().map(|(id, _)| id).collect();
        kept.sort_unstable();
        assert_eq!(kept, [2, 3]);
    }

    #[test]
    fn a_refused_first_batch_leaves_no_entry_and_takes_no_room() {
        let states = ProducerStates::new(HashMap::from([(1, used_at(1_000))]), 1);
        let (entry, created) = states.entry(99);
        assert!(created && entry.lock().epoch().is_none());
        drop(entry);
        states.forget_unused(99);
        assert_eq!(states.len(), 1);
        assert_eq!(
            states.entry(1).0.lock().last_timestamp(),
            1_000,
            "the known producer stays"
        );
    }
}
