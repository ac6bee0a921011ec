//! Deadlines the coordinator waits for. Nothing here sleeps: the caller asks
//! for the earliest deadline, waits however it likes, and calls `tick`.

use std::collections::{BTreeMap, BTreeSet};

/// What a deadline is for.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum TimerKey {
    /// The join phase of a rebalance ends (rebalance timeout or initial
    /// delay).
    Join { group_id: String },
    /// Members that have not sent SyncGroup are removed.
    PendingSync { group_id: String },
    /// A member's session (or new-member join timeout) expires.
    Heartbeat { group_id: String, member_id: String },
    /// A member id handed out with MEMBER_ID_REQUIRED is forgotten.
    PendingMember { group_id: String, member_id: String },
    /// Offsets are checked for expiration.
    OffsetRetention,
}

/// Deadlines, each key at most once.
#[derive(Debug, Default)]
pub(crate) struct Timers {
    by_key: BTreeMap<TimerKey, i64>,
    by_deadline: BTreeSet<(i64, TimerKey)>,
}

impl Timers {
    /// Sets (or moves) the deadline of `key`.
    pub(crate) fn schedule(&mut self, key: TimerKey, deadline_ms: i64) {
        self.cancel(&key);
        self.by_deadline.insert((deadline_ms, key.clone()));
        self.by_key.insert(key, deadline_ms);
    }

    pub(crate) fn cancel(&mut self, key: &TimerKey) {
        if let Some(deadline_ms) = self.by_key.remove(key) {
            self.by_deadline.remove(&(deadline_ms, key.clone()));
        }
    }

    pub(crate) fn is_scheduled(&self, key: &TimerKey) -> bool {
        self.by_key.contains_key(key)
    }

    pub(crate) fn next_deadline(&self) -> Option<i64> {
        self.by_deadline
            .first()
            .map(|(deadline_ms, _)| *deadline_ms)
    }

    /// Removes and returns the earliest deadline at or before `now_ms`.
    pub(crate) fn pop_due(&mut self, now_ms: i64) -> Option<TimerKey> {
        let (deadline_ms, _) = self.by_deadline.first()?;
        if *deadline_ms > now_ms {
            return None;
        }
        let (_, key) = self.by_deadline.pop_first()?;
        self.by_key.remove(&key);
        Some(key)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rescheduling_moves_the_deadline() {
        let mut timers = Timers::default();
        timers.schedule(TimerKey::OffsetRetention, 10);
        timers.schedule(TimerKey::OffsetRetention, 20);
        assert_eq!(timers.next_deadline(), Some(20));
        assert_eq!(timers.pop_due(15), None);
        assert_eq!(timers.pop_due(20), Some(TimerKey::OffsetRetention));
        assert_eq!(timers.next_deadline(), None);
    }
}
