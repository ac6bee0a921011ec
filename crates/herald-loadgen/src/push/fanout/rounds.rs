//! Seed 003's rounds, client by client. A round is one burst of the
//! publisher's schedule (`--rate 1 --burst 20`: 20 messages a second), and
//! every message of it carries the round's tick as its intended send time
//! ([`super::stamp`]). A client's *round latency* runs from the tick until
//! it has every message of that round it is owed; it *times out* when that
//! takes longer than the deadline (seed 003: 1 s) or never happens.
//!
//! Pure bookkeeping, no I/O: a generator keeps a [`ClientRounds`] per
//! subscriber, learns what each round owed from [`RoundsOwed`] once
//! publishing is over, and sums its clients into a [`RoundCounter`] per
//! node; the parent merges the generators' [`RoundTally`]s and reads
//! [`RoundStats`] off the result.

use std::collections::HashMap;

use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};

use super::super::PushBenchError;
use super::layout::Layout;
use crate::histogram;

/// When round 0's tick was and how far apart the ticks are.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct RoundClock {
    /// Round 0's tick, ns since the Unix epoch.
    pub start_ns: u64,
    /// Between two ticks, ns.
    pub interval_ns: u64,
}

impl RoundClock {
    /// The round whose tick is nearest `intended_ns` (the publisher works
    /// its ticks out in floating point, so they may be a nanosecond off a
    /// multiple of the interval).
    pub fn round_of(&self, intended_ns: u64) -> u64 {
        let since = intended_ns.saturating_sub(self.start_ns);
        let interval = self.interval_ns.max(1);
        (since + interval / 2) / interval
    }
}

/// One round as one client saw it.
#[derive(Debug, Clone, Copy)]
struct Seen {
    /// The round's tick, as stamped.
    intended_ns: u64,
    /// New messages of the round received.
    got: u32,
    /// When the latest of them arrived, ns since the epoch.
    last_ns: u64,
}

/// One client's progress through the rounds: for each round it has heard
/// of, how many of its messages arrived and when the last one did.
#[derive(Debug, Clone, Default)]
pub struct ClientRounds {
    /// In the order first heard of; brokers deliver a subject in order,
    /// so that is nearly always the rounds' order, and a lookup starts
    /// from the end.
    seen: Vec<Seen>,
}

impl ClientRounds {
    /// Takes one new (not duplicated) message stamped `intended_ns`,
    /// received at `now_ns`.
    pub fn see(&mut self, intended_ns: u64, now_ns: u64) {
        match self
            .seen
            .iter_mut()
            .rev()
            .find(|s| s.intended_ns == intended_ns)
        {
            Some(seen) => {
                seen.got += 1;
                seen.last_ns = seen.last_ns.max(now_ns);
            }
            None => self.seen.push(Seen {
                intended_ns,
                got: 1,
                last_ns: now_ns,
            }),
        }
    }

    /// The round `round` as seen, by `clock`.
    fn round(&self, clock: &RoundClock, round: u64) -> Option<Seen> {
        self.seen
            .iter()
            .rev()
            .find(|s| clock.round_of(s.intended_ns) == round)
            .copied()
    }
}

/// What each round carried to each subject: replayed from the layout's
/// draws, message `i` being in round `i / burst`.
#[derive(Debug, Clone, Default)]
pub struct RoundsOwed {
    /// By round: subject → messages.
    rounds: Vec<HashMap<u32, u32>>,
}

impl RoundsOwed {
    /// The rounds of the first `messages` published, `burst` to a round.
    pub fn replay(layout: &Layout, messages: u64, burst: u32) -> Result<Self, PushBenchError> {
        let burst = u64::from(burst.max(1));
        let mut rounds = vec![HashMap::new(); messages.div_ceil(burst) as usize];
        for (i, subject) in layout.draws()?.take(messages as usize).enumerate() {
            if let Some(round) = rounds.get_mut(i / burst as usize) {
                *round.entry(subject).or_insert(0) += 1;
            }
        }
        Ok(Self { rounds })
    }

    /// Rounds published.
    pub fn rounds(&self) -> u64 {
        self.rounds.len() as u64
    }

    /// Messages of round `round` on the subjects of `covered` (ascending).
    pub fn owed(&self, round: u64, covered: &[u32]) -> u32 {
        self.rounds.get(round as usize).map_or(0, |subjects| {
            subjects
                .iter()
                .filter(|(subject, _)| covered.binary_search(subject).is_ok())
                .map(|(_, n)| *n)
                .sum()
        })
    }
}

/// A slowest latency standing for "some client never completed the round".
pub const NEVER_US: u64 = u64::MAX;

/// Sums clients' rounds: how many (client, round) pairs there were, how
/// many timed out, their latencies, and each round's slowest client.
#[derive(Debug, Clone)]
pub struct RoundCounter {
    /// A client times out past this, µs.
    deadline_us: u64,
    clients: u64,
    client_rounds: u64,
    late: u64,
    incomplete: u64,
    latencies: Histogram<u64>,
    /// By round, the slowest client's latency, µs ([`NEVER_US`] when one
    /// never completed it).
    slowest_us: Vec<u64>,
}

/// A [`RoundCounter`] as a generator hands it to its parent.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct RoundTally {
    /// Clients counted.
    pub clients: u64,
    /// (client, round) pairs that owed the client at least one message.
    pub client_rounds: u64,
    /// Of those, complete but past the deadline.
    pub late: u64,
    /// Of those, never complete.
    pub incomplete: u64,
    /// Round latency of the complete pairs, µs: (value, count) pairs.
    pub latencies_us: Vec<(u64, u64)>,
    /// By round, the slowest client's latency, µs ([`NEVER_US`]: a client
    /// never completed it).
    pub slowest_us: Vec<u64>,
}

/// The rounds' figures a row carries.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct RoundStats {
    /// Clients.
    pub clients: u64,
    /// Rounds published.
    pub rounds: u64,
    /// (client, round) pairs owed at least one message.
    pub client_rounds: u64,
    /// Mean round latency of the pairs that completed, ms.
    pub mean_ms: f64,
    /// Median of the same, ms.
    pub p50_ms: f64,
    /// 99th percentile, ms.
    pub p99_ms: f64,
    /// The largest, ms.
    pub max_ms: f64,
    /// Pairs not complete within the deadline: late or never.
    pub timed_out: u64,
    /// Of those, never complete.
    pub incomplete: u64,
    /// `timed_out` over `client_rounds`: seed 003's time-out rate.
    pub timed_out_share: f64,
    /// Rounds in which no client timed out.
    pub rounds_on_time: u64,
    /// The median round's slowest client, ms (`None`: in half the rounds
    /// or more some client never completed).
    pub slowest_p50_ms: Option<f64>,
}

impl RoundCounter {
    /// An empty counter; clients time out past `deadline_us`.
    pub fn new(deadline_us: u64) -> Self {
        Self {
            deadline_us,
            clients: 0,
            client_rounds: 0,
            late: 0,
            incomplete: 0,
            latencies: histogram::new(),
            slowest_us: Vec::new(),
        }
    }

    /// Counts one client through `rounds` rounds by `clock`, `owed(round)`
    /// being its messages in each (rounds that owed it none are skipped).
    pub fn add_client(
        &mut self,
        client: &ClientRounds,
        clock: &RoundClock,
        rounds: u64,
        owed: impl Fn(u64) -> u32,
    ) {
        self.clients += 1;
        if self.slowest_us.len() < rounds as usize {
            self.slowest_us.resize(rounds as usize, 0);
        }
        for (round, slowest) in (0..rounds).zip(self.slowest_us.iter_mut()) {
            let owed = owed(round);
            if owed == 0 {
                continue;
            }
            self.client_rounds += 1;
            let latency_us = client
                .round(clock, round)
                .filter(|seen| seen.got >= owed)
                .map(|seen| seen.last_ns.saturating_sub(seen.intended_ns) / 1000);
            match latency_us {
                Some(us) => {
                    let _ = self.latencies.record(us.max(1));
                    if us > self.deadline_us {
                        self.late += 1;
                    }
                    *slowest = (*slowest).max(us);
                }
                None => {
                    self.incomplete += 1;
                    *slowest = NEVER_US;
                }
            }
        }
    }

    /// What a generator reports.
    pub fn tally(&self) -> RoundTally {
        RoundTally {
            clients: self.clients,
            client_rounds: self.client_rounds,
            late: self.late,
            incomplete: self.incomplete,
            latencies_us: self
                .latencies
                .iter_recorded()
                .map(|v| (v.value_iterated_to(), v.count_at_value()))
                .collect(),
            slowest_us: self.slowest_us.clone(),
        }
    }

    /// Adds another counter's tally (a generator's, or a node's).
    pub fn merge(&mut self, tally: &RoundTally) {
        self.clients += tally.clients;
        self.client_rounds += tally.client_rounds;
        self.late += tally.late;
        self.incomplete += tally.incomplete;
        for &(value, count) in &tally.latencies_us {
            let _ = self.latencies.record_n(value, count);
        }
        if self.slowest_us.len() < tally.slowest_us.len() {
            self.slowest_us.resize(tally.slowest_us.len(), 0);
        }
        for (mine, theirs) in self.slowest_us.iter_mut().zip(&tally.slowest_us) {
            *mine = (*mine).max(*theirs);
        }
    }

    /// The figures.
    pub fn stats(&self) -> RoundStats {
        let h = &self.latencies;
        let ms = |us: f64| us / 1000.0;
        let quantile_ms = |q: f64| {
            if h.is_empty() {
                0.0
            } else {
                ms(h.value_at_quantile(q) as f64)
            }
        };
        let timed_out = self.late + self.incomplete;
        let mut slowest = self.slowest_us.clone();
        slowest.sort_unstable();
        RoundStats {
            clients: self.clients,
            rounds: self.slowest_us.len() as u64,
            client_rounds: self.client_rounds,
            mean_ms: if h.is_empty() { 0.0 } else { ms(h.mean()) },
            p50_ms: quantile_ms(0.5),
            p99_ms: quantile_ms(0.99),
            max_ms: quantile_ms(1.0),
            timed_out,
            incomplete: self.incomplete,
            timed_out_share: if self.client_rounds == 0 {
                0.0
            } else {
                timed_out as f64 / self.client_rounds as f64
            },
            rounds_on_time: slowest.iter().filter(|&&us| us <= self.deadline_us).count() as u64,
            slowest_p50_ms: slowest
                .get(slowest.len() / 2)
                .filter(|&&us| us != NEVER_US)
                .map(|&us| ms(us as f64)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::layout::Choice;
    use super::*;

    const SECOND_NS: u64 = 1_000_000_000;
    const START_NS: u64 = 1_700_000_000 * SECOND_NS;

    fn clock() -> RoundClock {
        RoundClock {
            start_ns: START_NS,
            interval_ns: SECOND_NS,
        }
    }

    /// A client that received `got` messages of `round`, the last `after_ms`
    /// past its tick.
    fn receive(client: &mut ClientRounds, round: u64, got: u32, after_ms: u64) {
        let tick = START_NS + round * SECOND_NS;
        for k in 0..got {
            let at = tick + (after_ms * 1_000_000) * u64::from(k + 1) / u64::from(got);
            client.see(tick, at);
        }
    }

    #[test]
    fn a_tick_a_nanosecond_off_is_still_its_round() {
        let clock = clock();
        assert_eq!(clock.round_of(START_NS), 0);
        assert_eq!(clock.round_of(START_NS + 3 * SECOND_NS - 1), 3);
        assert_eq!(clock.round_of(START_NS + 3 * SECOND_NS + 1), 3);
        assert_eq!(clock.round_of(START_NS - 5), 0, "never before round 0");
    }

    #[test]
    fn seed_003s_rounds_owe_every_client_of_one_subject_the_whole_burst() {
        let layout = Layout::in_turn(1, 2_000);
        let owed = RoundsOwed::replay(&layout, 20 * 3, 20).unwrap();
        assert_eq!(owed.rounds(), 3);
        assert_eq!(owed.owed(0, &[0]), 20);
        assert_eq!(owed.owed(2, &[0]), 20);
        assert_eq!(owed.owed(3, &[0]), 0, "no fourth round");
    }

    #[test]
    fn subjects_in_turn_split_a_round_and_a_cut_round_owes_less() {
        // 4 subjects in turn, 6 to a round, 15 published: round 0 carries
        // messages 0-5 (subjects 0,1,2,3,0,1), round 2 only 12-14 (0,1,2).
        let layout = Layout::in_turn(4, 8);
        assert_eq!(layout.choice, Choice::InTurn);
        let owed = RoundsOwed::replay(&layout, 15, 6).unwrap();
        assert_eq!(owed.rounds(), 3);
        assert_eq!(owed.owed(0, &[0]), 2);
        assert_eq!(owed.owed(0, &[3]), 1);
        assert_eq!(owed.owed(0, &[0, 1]), 4);
        assert_eq!(owed.owed(2, &[3]), 0);
        assert_eq!(owed.owed(2, &[0, 1, 2, 3]), 3);
    }

    #[test]
    fn a_client_times_out_when_late_or_short_and_rounds_owing_nothing_do_not_count() {
        let clock = clock();
        let mut on_time = ClientRounds::default();
        let mut slow = ClientRounds::default();
        for round in 0..3 {
            receive(&mut on_time, round, 20, 40);
        }
        receive(&mut slow, 0, 20, 60);
        receive(&mut slow, 1, 20, 1_500); // complete, but past 1 s
        receive(&mut slow, 2, 19, 30); // one message never came
        let mut counter = RoundCounter::new(1_000_000);
        counter.add_client(&on_time, &clock, 4, |round| if round < 3 { 20 } else { 0 });
        counter.add_client(&slow, &clock, 4, |round| if round < 3 { 20 } else { 0 });
        let stats = counter.stats();
        assert_eq!(stats.clients, 2);
        assert_eq!(stats.rounds, 4);
        assert_eq!(stats.client_rounds, 6, "round 3 owed nobody anything");
        assert_eq!(stats.timed_out, 2);
        assert_eq!(stats.incomplete, 1);
        assert!((stats.timed_out_share - 2.0 / 6.0).abs() < 1e-9);
        // Complete pairs: 40, 40, 40, 60 and 1,500 ms.
        assert!((stats.mean_ms - 336.0).abs() < 1.0, "{}", stats.mean_ms);
        assert!((stats.max_ms - 1_500.0).abs() < 1.0, "{}", stats.max_ms);
        // Slowest by round: 60 ms, 1.5 s, never, and 0 for the empty round.
        assert_eq!(stats.rounds_on_time, 2);
        assert!((stats.slowest_p50_ms.unwrap() - 1_500.0).abs() < 1.0);
    }

    #[test]
    fn merged_tallies_equal_one_counter_over_every_client() {
        let clock = clock();
        let clients: Vec<ClientRounds> = (0..6u64)
            .map(|n| {
                let mut client = ClientRounds::default();
                for round in 0..5 {
                    // Client 5 misses round 4 entirely.
                    if !(n == 5 && round == 4) {
                        receive(&mut client, round, 20, 10 + 300 * n + round);
                    }
                }
                client
            })
            .collect();
        let mut whole = RoundCounter::new(1_000_000);
        let mut parts = [RoundCounter::new(1_000_000), RoundCounter::new(1_000_000)];
        for (n, client) in clients.iter().enumerate() {
            whole.add_client(client, &clock, 5, |_| 20);
            parts[n % 2].add_client(client, &clock, 5, |_| 20);
        }
        let mut merged = RoundCounter::new(1_000_000);
        for part in &parts {
            merged.merge(&part.tally());
        }
        assert_eq!(merged.stats(), whole.stats());
        let stats = whole.stats();
        // Clients 4 and 5 (1,210 ms and more) are late in every round.
        assert_eq!(stats.timed_out, 10);
        assert_eq!(stats.incomplete, 1);
        assert_eq!(stats.rounds_on_time, 0);
    }

    #[test]
    fn rounds_heard_of_out_of_order_are_kept_apart() {
        let clock = clock();
        let mut client = ClientRounds::default();
        // Two subjects: round 1 of one arrives before round 0 of the other.
        client.see(START_NS, START_NS + 5_000_000);
        client.see(START_NS + SECOND_NS, START_NS + SECOND_NS + 1_000_000);
        client.see(START_NS, START_NS + 9_000_000);
        client.see(START_NS + SECOND_NS, START_NS + SECOND_NS + 2_000_000);
        let mut counter = RoundCounter::new(1_000_000);
        counter.add_client(&client, &clock, 2, |_| 2);
        let stats = counter.stats();
        assert_eq!(stats.timed_out, 0);
        assert!((stats.max_ms - 9.0).abs() < 0.01, "{}", stats.max_ms);
        assert!((stats.p50_ms - 2.0).abs() < 0.01, "{}", stats.p50_ms);
    }
}
