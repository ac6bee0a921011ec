//! Which replicas of a partition are in sync with its leader (Kafka's ISR),
//! decided on the leader from what Raft reports of its followers.
//!
//! Raft commits on a majority and needs no in-sync set; Kafka clients and
//! operators read one all the same (`kafka-topics --describe`, "under-
//! replicated partitions"), so the leader keeps Kafka's: a follower is in
//! sync while, within the last `lag_max`, it has held everything the leader
//! held at some earlier observation (Kafka's lastCaughtUpTime rule, which
//! a steady stream of appends cannot defeat), and it has answered the
//! leader at all (so that a dead follower of an idle partition leaves the
//! set too, which Kafka's rule alone would not do).
//!
//! Sans-I/O: the leader's task feeds observations with the time, and
//! proposes the set through the metadata log when it changes.

use std::collections::BTreeMap;

/// What the leader's Raft says of one follower at an observation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct FollowerProgress {
    /// The last log index the follower is known to hold (`None`: none).
    pub matched: Option<u64>,
    /// Ms since the follower last answered the leader (`None`: never).
    pub answered_ms_ago: Option<u64>,
}

/// The in-sync set of one partition while this node leads it.
#[derive(Debug)]
pub struct InSyncTracker {
    leader: u64,
    lag_max_ms: u64,
    elected_at_ms: u64,
    /// Follower -> when it last held what the leader held (ms).
    caught_up_at: BTreeMap<u64, u64>,
    /// The previous observation: when, and the leader's last index then.
    previous: Option<(u64, Option<u64>)>,
    current: Option<Vec<u64>>,
}

impl InSyncTracker {
    /// A tracker for `leader`, newly elected at `now_ms`, with `followers`.
    /// Every follower starts in sync, as Kafka keeps the in-sync set
    /// through an election: a Raft leader cannot tell yet.
    pub fn new(leader: u64, followers: &[u64], now_ms: u64, lag_max_ms: u64) -> Self {
        Self {
            leader,
            lag_max_ms,
            elected_at_ms: now_ms,
            caught_up_at: followers
                .iter()
                .filter(|&&f| f != leader)
                .map(|&f| (f, now_ms))
                .collect(),
            previous: None,
            current: None,
        }
    }

    /// Takes one observation: the leader's last log index and each
    /// follower's progress at `now_ms`. Returns the in-sync set (sorted,
    /// the leader included) when it differs from the last one returned,
    /// the first time included.
    pub fn observe(
        &mut self,
        now_ms: u64,
        leader_last: Option<u64>,
        progress: &BTreeMap<u64, FollowerProgress>,
    ) -> Option<Vec<u64>> {
        let mut in_sync = vec![self.leader];
        for (&follower, caught_up_at) in &mut self.caught_up_at {
            let seen = progress.get(&follower).copied().unwrap_or_default();
            if seen.matched >= leader_last {
                *caught_up_at = now_ms;
            } else if let Some((then, last_then)) = self.previous {
                if seen.matched >= last_then {
                    *caught_up_at = (*caught_up_at).max(then);
                }
            }
            let caught_up = now_ms.saturating_sub(*caught_up_at) <= self.lag_max_ms;
            // Not heard from yet: in sync for one lag after the election,
            // as every follower starts.
            let answering = match seen.answered_ms_ago {
                Some(ago) => ago <= self.lag_max_ms,
                None => now_ms.saturating_sub(self.elected_at_ms) <= self.lag_max_ms,
            };
            if caught_up && answering {
                in_sync.push(follower);
            }
        }
        self.previous = Some((now_ms, leader_last));
        in_sync.sort_unstable();
        if self.current.as_ref() == Some(&in_sync) {
            return None;
        }
        self.current = Some(in_sync.clone());
        Some(in_sync)
    }

    /// Forgets the last set returned, so that the next observation
    /// returns the set again (its proposal failed and must be retried).
    pub fn retry(&mut self) {
        self.current = None;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const LAG: u64 = 10_000;

    fn progress(entries: &[(u64, Option<u64>, Option<u64>)]) -> BTreeMap<u64, FollowerProgress> {
        entries
            .iter()
            .map(|&(node, matched, answered_ms_ago)| {
                (
                    node,
                    FollowerProgress {
                        matched,
                        answered_ms_ago,
                    },
                )
            })
            .collect()
    }

    #[test]
    fn every_follower_starts_in_sync_and_the_set_is_told_once() {
        let mut t = InSyncTracker::new(2, &[1, 2, 3], 0, LAG);
        let p = progress(&[(1, Some(5), Some(10)), (3, Some(5), Some(10))]);
        assert_eq!(t.observe(100, Some(5), &p), Some(vec![1, 2, 3]));
        assert_eq!(
            t.observe(200, Some(5), &p),
            None,
            "unchanged: nothing to tell"
        );
    }

    #[test]
    fn a_follower_always_one_step_behind_a_busy_leader_stays_in_sync() {
        let mut t = InSyncTracker::new(1, &[1, 2], 0, LAG);
        // The leader appends 100 entries between observations; the
        // follower always holds what the leader held at the previous one.
        assert_eq!(
            t.observe(0, Some(100), &progress(&[(2, Some(50), Some(1))])),
            Some(vec![1, 2])
        );
        for step in 1..100u64 {
            let now = step * 1_000;
            let p = progress(&[(2, Some(step * 100), Some(1))]);
            assert_eq!(
                t.observe(now, Some(step * 100 + 100), &p),
                None,
                "at {now} ms"
            );
        }
    }

    #[test]
    fn a_follower_that_falls_behind_leaves_after_the_lag_and_comes_back_once_caught_up() {
        let mut t = InSyncTracker::new(1, &[1, 2, 3], 0, LAG);
        let both = |m2, m3| progress(&[(2, Some(m2), Some(5)), (3, Some(m3), Some(5))]);
        assert_eq!(t.observe(0, Some(10), &both(10, 10)), Some(vec![1, 2, 3]));
        // Node 3 stops at 10 while the leader goes on.
        assert_eq!(t.observe(5_000, Some(20), &both(20, 10)), None);
        assert_eq!(
            t.observe(10_000, Some(30), &both(30, 10)),
            None,
            "within the lag"
        );
        assert_eq!(t.observe(10_001, Some(31), &both(31, 10)), Some(vec![1, 2]));
        assert_eq!(
            t.observe(20_000, Some(40), &both(40, 30)),
            None,
            "still behind"
        );
        // It holds what the leader held at the previous observation.
        assert_eq!(
            t.observe(21_000, Some(45), &both(45, 40)),
            Some(vec![1, 2, 3])
        );
    }

    #[test]
    fn a_silent_follower_of_an_idle_partition_leaves_too() {
        let mut t = InSyncTracker::new(1, &[1, 2, 3], 0, LAG);
        let p = |ago3| progress(&[(2, Some(7), Some(3)), (3, Some(7), ago3)]);
        assert_eq!(t.observe(0, Some(7), &p(Some(3))), Some(vec![1, 2, 3]));
        assert_eq!(t.observe(9_000, Some(7), &p(Some(9_000))), None);
        assert_eq!(
            t.observe(11_000, Some(7), &p(Some(11_000))),
            Some(vec![1, 2])
        );
        assert_eq!(
            t.observe(12_000, Some(7), &p(Some(20))),
            Some(vec![1, 2, 3])
        );
    }

    #[test]
    fn a_follower_never_heard_from_leaves_one_lag_after_the_election() {
        let mut t = InSyncTracker::new(1, &[1, 2], 1_000, LAG);
        let empty = BTreeMap::new();
        assert_eq!(t.observe(1_000, Some(3), &empty), Some(vec![1, 2]));
        assert_eq!(t.observe(11_000, Some(3), &empty), None);
        assert_eq!(t.observe(11_001, Some(3), &empty), Some(vec![1]));
        t.retry();
        assert_eq!(
            t.observe(11_002, Some(3), &empty),
            Some(vec![1]),
            "told again"
        );
    }
}
