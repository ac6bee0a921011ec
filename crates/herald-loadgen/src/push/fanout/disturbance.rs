//! What goes wrong during a run, and to whom: subscribers that stop
//! reading for a while (S5), or every subscriber's connection dropped and
//! reopened in a storm (S6). Times count from the moment the generator
//! tells its parent it is ready, which is when publishing starts.

use std::time::Duration;

use serde::{Deserialize, Serialize};

/// A disturbance.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
pub enum Disturbance {
    /// Nothing goes wrong.
    #[default]
    None,
    /// Every `every`-th subscriber (by number) stops reading its socket
    /// `after_ms` into the run, for `for_ms`, then reads on.
    Stall {
        /// One subscriber in this many stalls (100: 1%).
        every: u64,
        /// When, from the start of publishing.
        after_ms: u64,
        /// For how long.
        for_ms: u64,
    },
    /// Every subscriber's connection is closed `after_ms` into the run,
    /// and each reopens at its own moment within the next `within_ms`,
    /// resuming where it was (or, where the broker cannot resume, from
    /// now).
    Reconnect {
        /// When, from the start of publishing.
        after_ms: u64,
        /// Over how long the reconnections spread.
        within_ms: u64,
    },
}

/// What the disturbance does to one subscriber.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fate {
    /// Nothing.
    Spared,
    /// It stops reading at `at` for `pause`.
    Stalls {
        /// When, from the start.
        at: Duration,
        /// For how long.
        pause: Duration,
    },
    /// Its connection closes at `at` and reopens at `reopen`.
    Reconnects {
        /// When it closes, from the start.
        at: Duration,
        /// When it reopens, from the start.
        reopen: Duration,
    },
}

impl Fate {
    /// Whether anything happens to it.
    pub fn disturbed(self) -> bool {
        self != Fate::Spared
    }
}

impl Disturbance {
    /// What happens to subscriber number `subscriber` of `subscribers`.
    /// Reconnections are spread evenly over the window by number, so that
    /// every moment of it sees the same share of the storm.
    pub fn fate(self, subscriber: u64, subscribers: u64) -> Fate {
        match self {
            Disturbance::None => Fate::Spared,
            Disturbance::Stall {
                every,
                after_ms,
                for_ms,
            } => {
                if every > 0 && subscriber.is_multiple_of(every) {
                    Fate::Stalls {
                        at: Duration::from_millis(after_ms),
                        pause: Duration::from_millis(for_ms),
                    }
                } else {
                    Fate::Spared
                }
            }
            Disturbance::Reconnect {
                after_ms,
                within_ms,
            } => {
                // The spread interleaves generators' subscribers rather
                // than giving the first generator the first half second.
                let share = within_ms * subscriber / subscribers.max(1);
                Fate::Reconnects {
                    at: Duration::from_millis(after_ms),
                    reopen: Duration::from_millis(after_ms + share),
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_in_every_stalls_and_a_storm_spreads_over_its_window() {
        let stall = Disturbance::Stall {
            every: 100,
            after_ms: 2_000,
            for_ms: 10_000,
        };
        let stalled = (0..10_000).filter(|&n| stall.fate(n, 10_000).disturbed());
        assert_eq!(stalled.count(), 100);
        assert_eq!(
            stall.fate(200, 10_000),
            Fate::Stalls {
                at: Duration::from_secs(2),
                pause: Duration::from_secs(10)
            }
        );
        let storm = Disturbance::Reconnect {
            after_ms: 3_000,
            within_ms: 1_000,
        };
        assert_eq!(
            storm.fate(0, 10_000),
            Fate::Reconnects {
                at: Duration::from_secs(3),
                reopen: Duration::from_secs(3)
            }
        );
        assert_eq!(
            storm.fate(5_000, 10_000),
            Fate::Reconnects {
                at: Duration::from_secs(3),
                reopen: Duration::from_millis(3_500)
            }
        );
        assert!(!Disturbance::None.fate(0, 1).disturbed());
    }
}
