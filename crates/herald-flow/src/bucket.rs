//! A token bucket in its GCRA form (the generic cell rate algorithm): one
//! number instead of a token count refilled by a timer. `paid_ns` is the
//! instant up to which the rate has paid for every unit taken: the bucket
//! holds `(now - paid) × rate` units, at most `burst`, and taking `n` units
//! moves `paid` forward by `n / rate`. A request fits while `paid` stays at
//! or before now. The result is exact at every instant (no window edges,
//! so no burst at the start of a window as Kafka's windowed rate admits),
//! and costs a few integer operations per request.
//!
//! Units are what the caller counts: bytes for a byte-rate quota, records
//! for a message-rate SLA, requests for a request quota.

/// Nanoseconds per second.
const NANOS: u128 = 1_000_000_000;

/// What a bucket says of a request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Admission {
    /// Within the rate: go on.
    Admitted,
    /// Admitted (throttle mode) but over the rate: the caller pauses the
    /// client this long (Kafka's `throttle_time_ms`, and no reading from
    /// its connection meanwhile).
    Throttled {
        /// How long, in nanoseconds.
        pause_ns: u64,
    },
    /// Refused (reject mode): nothing was taken; the client may retry after
    /// this long.
    Rejected {
        /// In nanoseconds.
        retry_after_ns: u64,
    },
}

/// A rate with a burst.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TokenBucket {
    /// Units per second (at least 1).
    rate: u64,
    /// Units that may go at once above the rate (at least 1).
    burst: u64,
    /// Up to when the rate has paid for what was taken (ns); the bucket
    /// holds the units of `now - max(paid, now - burst time)`.
    paid_ns: i128,
}

impl TokenBucket {
    /// A full bucket of `rate` units per second with room for `burst`
    /// units at once, at `now_ns`.
    pub fn new(rate: u64, burst: u64, now_ns: u64) -> Self {
        let mut bucket = Self {
            rate: rate.max(1),
            burst: burst.max(1),
            paid_ns: 0,
        };
        bucket.paid_ns = i128::from(now_ns) - i128::from(bucket.burst_ns());
        bucket
    }

    /// Units per second.
    pub fn rate(&self) -> u64 {
        self.rate
    }

    /// The burst, in units.
    pub fn burst(&self) -> u64 {
        self.burst
    }

    /// How long `units` take at the rate, rounded up so that rounding never
    /// lets more through than the rate.
    fn cost_ns(&self, units: u64) -> u64 {
        let ns = (u128::from(units) * NANOS).div_ceil(u128::from(self.rate));
        u64::try_from(ns).unwrap_or(u64::MAX)
    }

    fn burst_ns(&self) -> u64 {
        self.cost_ns(self.burst)
    }

    /// Where `paid` stands at `now_ns`: a full bucket holds no more than
    /// its burst, however long it sat idle.
    fn start(&self, now_ns: u64) -> i128 {
        self.paid_ns
            .max(i128::from(now_ns) - i128::from(self.burst_ns()))
    }

    /// Units that could go now without waiting.
    pub fn available(&self, now_ns: u64) -> u64 {
        let room_ns = (i128::from(now_ns) - self.start(now_ns)).max(0);
        let units = room_ns * i128::from(self.rate) / NANOS as i128;
        u64::try_from(units).unwrap_or(u64::MAX).min(self.burst)
    }

    /// Reject mode: takes `units` if they fit, else takes nothing and says
    /// when they would. A request larger than the burst could never fit,
    /// so it goes once the bucket is full and leaves a debt the next
    /// requests wait out: any window then admits at most rate × window +
    /// max(burst, largest request).
    pub fn try_take(&mut self, units: u64, now_ns: u64) -> Admission {
        match self.wait_ns(units, now_ns) {
            0 => {
                self.paid_ns = self.start(now_ns) + i128::from(self.cost_ns(units));
                Admission::Admitted
            }
            retry_after_ns => Admission::Rejected { retry_after_ns },
        }
    }

    /// How long until [`TokenBucket::try_take`] would admit `units`: 0 if
    /// it would now. Takes nothing, so a caller holding several buckets
    /// can ask all of them before taking from any.
    pub fn wait_ns(&self, units: u64, now_ns: u64) -> u64 {
        let needed = self.cost_ns(units).min(self.burst_ns());
        let late = self.start(now_ns) + i128::from(needed) - i128::from(now_ns);
        u64::try_from(late.max(0)).unwrap_or(u64::MAX)
    }

    /// Throttle mode: takes `units` whatever the rate (the request was
    /// already read), and says how long to pause the client so that its
    /// average comes back to the rate.
    pub fn take(&mut self, units: u64, now_ns: u64) -> Admission {
        self.paid_ns = self.start(now_ns) + i128::from(self.cost_ns(units));
        let late = self.paid_ns - i128::from(now_ns);
        if late <= 0 {
            Admission::Admitted
        } else {
            Admission::Throttled {
                pause_ns: u64::try_from(late).unwrap_or(u64::MAX),
            }
        }
    }

    /// Changes the rate and burst from `now_ns` on, keeping what was owed
    /// (or held) in units: a debt of 300 units at the old rate is still 300
    /// units to pay at the new one.
    pub fn set_rate(&mut self, rate: u64, burst: u64, now_ns: u64) {
        let held_ns = i128::from(now_ns) - self.start(now_ns);
        let units = held_ns * i128::from(self.rate) / NANOS as i128;
        self.rate = rate.max(1);
        self.burst = burst.max(1);
        let units = units.min(i128::from(self.burst));
        self.paid_ns = i128::from(now_ns) - units * NANOS as i128 / i128::from(self.rate);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const S: u64 = 1_000_000_000;
    const MS: u64 = 1_000_000;

    #[test]
    fn a_full_bucket_admits_its_burst_then_the_rate() {
        let mut bucket = TokenBucket::new(1000, 100, 10 * S);
        assert_eq!(bucket.available(10 * S), 100);
        assert_eq!(bucket.try_take(100, 10 * S), Admission::Admitted);
        assert_eq!(
            bucket.try_take(1, 10 * S),
            Admission::Rejected { retry_after_ns: MS }
        );
        // One unit per millisecond comes back.
        assert_eq!(bucket.try_take(1, 10 * S + MS), Admission::Admitted);
        assert_eq!(bucket.available(10 * S + MS), 0);
        assert_eq!(bucket.available(10 * S + 50 * MS), 49);
    }

    #[test]
    fn a_rejected_request_takes_nothing() {
        let mut bucket = TokenBucket::new(1000, 10, S);
        assert_eq!(bucket.try_take(4, S), Admission::Admitted);
        assert_eq!(
            bucket.try_take(8, S),
            Admission::Rejected {
                retry_after_ns: 2 * MS
            }
        );
        assert_eq!(bucket.try_take(6, S), Admission::Admitted);
    }

    #[test]
    fn a_request_larger_than_the_burst_goes_from_a_full_bucket_into_debt() {
        let mut bucket = TokenBucket::new(1000, 10, S);
        assert_eq!(bucket.try_take(1, S), Admission::Admitted);
        // 25 units never fit in 10: they wait for a full bucket (1 ms)...
        assert_eq!(
            bucket.try_take(25, S),
            Admission::Rejected { retry_after_ns: MS }
        );
        assert_eq!(bucket.try_take(25, S + MS), Admission::Admitted);
        // ...and leave 15 units owed: the next unit waits 16 ms.
        assert_eq!(
            bucket.try_take(1, S + MS),
            Admission::Rejected {
                retry_after_ns: 16 * MS
            }
        );
    }

    #[test]
    fn throttle_mode_takes_everything_and_runs_a_debt() {
        let mut bucket = TokenBucket::new(1000, 100, S);
        // 600 units at once: 100 of burst, 500 owed, paid in 500 ms.
        assert_eq!(
            bucket.take(600, S),
            Admission::Throttled { pause_ns: 500 * MS }
        );
        // Half-way through the pause the debt is half paid.
        assert_eq!(
            bucket.take(0, S + 250 * MS),
            Admission::Throttled { pause_ns: 250 * MS }
        );
        // Once paid, the rate applies again; the burst refills with time.
        assert_eq!(bucket.take(0, S + 500 * MS), Admission::Admitted);
        assert_eq!(bucket.available(S + 600 * MS), 100);
    }

    #[test]
    fn idle_time_refills_no_more_than_the_burst() {
        let mut bucket = TokenBucket::new(10, 5, 0);
        assert_eq!(bucket.try_take(5, 0), Admission::Admitted);
        // A long idle period refills the burst, not an hour of rate.
        assert_eq!(bucket.available(3600 * S), 5);
        assert_eq!(bucket.try_take(5, 3600 * S), Admission::Admitted);
        assert!(matches!(
            bucket.try_take(1, 3600 * S),
            Admission::Rejected { .. }
        ));
    }

    #[test]
    fn a_rate_change_keeps_the_debt_owed() {
        let mut bucket = TokenBucket::new(1000, 100, S);
        // 300 units owed at 1000/s: 300 ms.
        bucket.take(400, S);
        // At 100/s the same 300 units take 3 s.
        bucket.set_rate(100, 10, S);
        assert_eq!(bucket.take(0, S), Admission::Throttled { pause_ns: 3 * S });
    }

    proptest! {
        /// Over any window, what is admitted is at most the rate times the
        /// window plus the burst (or the largest request, if larger than
        /// the burst), whatever the request sizes and times.
        #[test]
        fn no_window_admits_more_than_rate_times_window_plus_burst(
            rate in 1u64..100_000,
            burst in 1u64..10_000,
            requests in proptest::collection::vec((0u64..20 * MS, 1u64..5_000), 1..300),
            window_ms in 1u64..3_000,
        ) {
            let mut bucket = TokenBucket::new(rate, burst, 0);
            let mut now = 0;
            let mut admitted: Vec<(u64, u64)> = Vec::new();
            let largest = requests.iter().map(|(_, units)| *units).max().unwrap_or(0);
            for (gap, units) in requests {
                now += gap;
                if bucket.try_take(units, now) == Admission::Admitted {
                    admitted.push((now, units));
                }
            }
            let window = window_ms * MS;
            for (i, &(start, _)) in admitted.iter().enumerate() {
                let total: u64 = admitted[i..]
                    .iter()
                    .take_while(|(t, _)| *t < start + window)
                    .map(|(_, u)| u)
                    .sum();
                let allowed =
                    u128::from(rate) * u128::from(window) / NANOS + u128::from(burst.max(largest));
                prop_assert!(u128::from(total) <= allowed, "{total} admitted in {window_ms} ms, allowed {allowed}");
            }
        }
    }
}
