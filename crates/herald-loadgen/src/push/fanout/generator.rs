//! A subscriber generator: one process, one thread, one event loop holding
//! a share of the fan-out's subscribers. The parent starts as many as the
//! open-file limit requires, each from its own loopback source address,
//! and speaks to them over stdin and stdout:
//!
//! 1. the generator opens and subscribes its connections, then prints
//!    `ready`;
//! 2. the parent publishes, then writes `done MESSAGES GIVE_UP_MS` (and,
//!    when the plan counts rounds, `START_NS INTERVAL_NS`: the
//!    [`RoundClock`]);
//! 3. the generator waits until every subscriber has what it is owed, has
//!    lost its connection, or `GIVE_UP_MS` pass, and prints its
//!    [`GeneratorReport`] as one JSON line.
//!
//! One thread, so that a generator's cost per socket is an event loop's,
//! not a scheduler's; its subscribers share one latency histogram.
//! Subscriber `n` connects to node `n % nodes` of the plan, so that every
//! generator spreads its share evenly over a cluster's nodes.

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::io::{BufRead as _, Write as _};
use std::net::IpAddr;
use std::rc::Rc;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use super::super::{anon_rss_bytes, now_ns, PushBenchError};
use super::broker::{Broker, Subscriber};
use super::disturbance::{Disturbance, Fate};
use super::layout::{Interest, Layout};
use super::rounds::{ClientRounds, RoundClock, RoundCounter, RoundTally, RoundsOwed};
use super::stamp::{SequenceCheck, Stamp};
use crate::histogram;
use hdrhistogram::Histogram;

/// One generator's share of the subscribers.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct GeneratorPlan {
    /// The nodes subscribers connect to: subscriber `n` to
    /// `nodes[n % nodes.len()]` (one for a single broker).
    pub nodes: Vec<Broker>,
    /// Count seed 003's rounds client by client (see [`super::rounds`]).
    pub rounds: Option<RoundsPlan>,
    /// The first subscriber's number; they are numbered across generators.
    pub first: u64,
    /// Subscribers this generator holds.
    pub subscribers: usize,
    /// Who listens to what, and where messages go.
    pub layout: Layout,
    /// What goes wrong, and to whom.
    pub disturbance: Disturbance,
    /// The loopback address its connections come from.
    pub source: Option<IpAddr>,
    /// Connections opened at once while setting up.
    pub open_parallel: usize,
}

/// How the publisher's bursts make rounds.
#[derive(Debug, Clone, Copy, Serialize, Deserialize)]
pub struct RoundsPlan {
    /// Messages in a round (the publisher's burst).
    pub burst: u32,
    /// A client times out when a round takes it longer than this, ms.
    pub deadline_ms: u64,
}

impl GeneratorPlan {
    /// The index of the node subscriber `id` connects to.
    fn node_index(&self, id: u64) -> usize {
        (id % self.nodes.len().max(1) as u64) as usize
    }

    /// The node subscriber `id` connects to.
    fn node_of(&self, id: u64) -> Result<&Broker, PushBenchError> {
        self.nodes
            .get(self.node_index(id))
            .ok_or_else(|| PushBenchError::Refused("a generator plan without nodes".into()))
    }
}

/// What one generator's subscribers got.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct GeneratorReport {
    /// Messages received, duplicates included.
    pub delivered: u64,
    /// Messages owed and never received, over all subscribers.
    pub lost: u64,
    /// Messages received more than once.
    pub duplicated: u64,
    /// Subscribers that lost any message or their connection.
    pub dropped: usize,
    /// Subscribers whose connection ended, by the error that ended it.
    pub disconnected: BTreeMap<String, usize>,
    /// Subscribers the disturbance touched.
    pub disturbed: usize,
    /// Of `lost`, what the disturbed subscribers lost.
    pub disturbed_lost: u64,
    /// The first and last delivery, ns since the Unix epoch.
    pub first_ns: u64,
    /// See `first_ns`.
    pub last_ns: u64,
    /// Publish-to-deliver latency in µs of the subscribers the disturbance
    /// spared: (value, count) pairs.
    pub latencies_us: Vec<(u64, u64)>,
    /// The same for the disturbed subscribers.
    pub disturbed_latencies_us: Vec<(u64, u64)>,
    /// For each reconnected subscriber, µs from reopening until it had
    /// every message published before that moment: (value, count) pairs.
    pub catch_up_us: Vec<(u64, u64)>,
    /// This process's anonymous memory with every subscriber open.
    pub memory_bytes: u64,
    /// Connections that failed while opening and were opened again.
    pub setup_retries: u64,
    /// Seed 003's rounds, by node (empty unless the plan counts rounds).
    pub rounds: Vec<RoundTally>,
}

/// One subscriber's tally.
#[derive(Debug, Default)]
struct Tally {
    /// Every subject it receives, ascending, with its check.
    checks: Vec<(u32, SequenceCheck)>,
    /// Messages received.
    got: u64,
    /// How far it has come: the sum of its checks' expected numbers.
    reached: u64,
    ended: Option<String>,
    disturbed: bool,
    /// When it began reopening its connection, ns since the epoch (0: it
    /// never did).
    reopened_ns: u64,
    /// When it had subscribed again.
    resubscribed_ns: u64,
    /// When it last received, after reopening, a message published before.
    backlog_ns: u64,
    /// Its rounds, when they are counted.
    rounds: Option<ClientRounds>,
    /// The node it is connected to.
    node: usize,
}

impl Tally {
    /// Takes one delivery received at `now`.
    fn see(&mut self, stamp: &Stamp, now: u64) {
        self.got += 1;
        let Ok(at) = self
            .checks
            .binary_search_by_key(&stamp.subject, |(s, _)| *s)
        else {
            return;
        };
        if let Some((_, check)) = self.checks.get_mut(at) {
            let before = check.expected();
            let new = check.see(stamp.sequence);
            self.reached += check.expected() - before;
            if let (true, Some(rounds)) = (new, &mut self.rounds) {
                rounds.see(stamp.intended_ns, now);
            }
        }
        if self.reopened_ns > 0 && stamp.intended_ns < self.reopened_ns {
            self.backlog_ns = now;
        }
    }

    /// Messages it was owed, given what each subject got.
    fn owed(&self, counts: &[u64]) -> u64 {
        self.checks
            .iter()
            .map(|(s, _)| counts.get(*s as usize).copied().unwrap_or(0))
            .sum()
    }

    /// Messages it lost, given what each subject got.
    fn lost(&self, counts: &[u64]) -> u64 {
        self.checks
            .iter()
            .map(|(s, check)| check.lost_of(counts.get(*s as usize).copied().unwrap_or(0)))
            .sum()
    }
}

/// How long opening every subscriber may take.
const SETUP: Duration = Duration::from_secs(600);

/// Pauses before each new attempt at opening a subscriber whose first
/// failed: a burst of thousands of connections can meet a full accept
/// queue or a reset, which a client rides out by connecting again.
const RETRY_PAUSES: [Duration; 3] = [
    Duration::from_millis(100),
    Duration::from_millis(500),
    Duration::from_secs(2),
];

/// Opens one subscriber, again after a pause when an attempt fails (see
/// [`RETRY_PAUSES`]); answers it and the attempts that failed.
async fn open_retrying(
    plan: &GeneratorPlan,
    interest: &Interest,
    id: u64,
    resumable: bool,
) -> Result<(Subscriber, u64), PushBenchError> {
    let mut retries = 0;
    let node = plan.node_of(id)?;
    loop {
        match Subscriber::open(node, interest, id, plan.source, resumable).await {
            Ok(subscriber) => return Ok((subscriber, retries)),
            Err(e) => match RETRY_PAUSES.get(retries as usize) {
                Some(pause) => {
                    tokio::time::sleep(*pause).await;
                    retries += 1;
                }
                None => return Err(e),
            },
        }
    }
}

/// Runs a generator: the child's side of the protocol above, on a
/// single-threaded runtime.
pub fn serve(plan: &GeneratorPlan) -> Result<(), PushBenchError> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| PushBenchError::Refused(format!("starting the runtime: {e}")))?;
    let local = tokio::task::LocalSet::new();
    let report = local.block_on(&runtime, run(plan))?;
    let line = serde_json::to_string(&report)
        .map_err(|e| PushBenchError::Refused(format!("encoding the report: {e}")))?;
    let mut out = std::io::stdout().lock();
    writeln!(out, "{line}")
        .and_then(|()| out.flush())
        .map_err(|e| PushBenchError::Refused(format!("writing the report: {e}")))
}

/// What the subscribers' tasks share: one event loop, no locks.
struct Shared {
    tallies: RefCell<Vec<Tally>>,
    /// Latencies of the spared subscribers, and of the disturbed ones.
    latencies: RefCell<[Histogram<u64>; 2]>,
    catch_up: RefCell<Histogram<u64>>,
    /// First and last delivery, ns.
    span: RefCell<(u64, u64)>,
}

impl Shared {
    fn delivered(&self, index: usize, payload: &[u8]) {
        let now = now_ns();
        let Some(stamp) = Stamp::read(payload) else {
            return;
        };
        let mut tallies = self.tallies.borrow_mut();
        let Some(tally) = tallies.get_mut(index) else {
            return;
        };
        tally.see(&stamp, now);
        let which = usize::from(tally.disturbed);
        if let Some(latencies) = self.latencies.borrow_mut().get_mut(which) {
            let _ = latencies.record(now.saturating_sub(stamp.intended_ns) / 1000);
        }
        let mut span = self.span.borrow_mut();
        span.0 = span.0.min(now);
        span.1 = span.1.max(now);
    }

    fn ended(&self, index: usize, error: &PushBenchError) {
        if let Some(tally) = self.tallies.borrow_mut().get_mut(index) {
            tally.ended = Some(reason(error));
        }
    }
}

/// One subscriber's life: receive until the end, living through its fate.
async fn follow(
    shared: Rc<Shared>,
    plan: Rc<GeneratorPlan>,
    index: usize,
    mut subscriber: Subscriber,
    mut fate: Fate,
    started: Instant,
) {
    let id = plan.first + index as u64;
    let mut on_message = |payload: &[u8]| shared.delivered(index, payload);
    loop {
        match fate {
            Fate::Stalls { at, pause } if started.elapsed() >= at => {
                tokio::time::sleep(pause).await;
                fate = Fate::Spared;
            }
            Fate::Reconnects { at, reopen } => {
                let close = tokio::select! {
                    received = subscriber.receive(&mut on_message) => {
                        if let Err(e) = received {
                            shared.ended(index, &e);
                            return;
                        }
                        false
                    }
                    () = tokio::time::sleep_until((started + at).into()) => true,
                };
                if close {
                    let closed = subscriber.close();
                    tokio::time::sleep_until((started + reopen).into()).await;
                    if let Some(tally) = shared.tallies.borrow_mut().get_mut(index) {
                        tally.reopened_ns = now_ns();
                    }
                    let interest = plan.layout.interest(id);
                    let reopened = match plan.node_of(id) {
                        Ok(node) => {
                            Subscriber::reopen(node, &interest, id, plan.source, closed).await
                        }
                        Err(e) => Err(e),
                    };
                    subscriber = match reopened {
                        Ok(subscriber) => subscriber,
                        Err(e) => {
                            shared.ended(index, &e);
                            return;
                        }
                    };
                    if let Some(tally) = shared.tallies.borrow_mut().get_mut(index) {
                        tally.resubscribed_ns = now_ns();
                    }
                    fate = Fate::Spared;
                }
                continue;
            }
            _ => {}
        }
        if let Err(e) = subscriber.receive(&mut on_message).await {
            shared.ended(index, &e);
            return;
        }
    }
}

async fn run(plan: &GeneratorPlan) -> Result<GeneratorReport, PushBenchError> {
    let plan = Rc::new(plan.clone());
    let everyone = plan.layout.subscribers;
    let resumable = matches!(plan.disturbance, Disturbance::Reconnect { .. });
    let mut subscribers = Vec::with_capacity(plan.subscribers);
    let mut setup_retries = 0u64;
    let opening = async {
        let ids: Vec<u64> = (0..plan.subscribers as u64)
            .map(|j| plan.first + j)
            .collect();
        for chunk in ids.chunks(plan.open_parallel.max(1)) {
            let opened = futures_util::future::join_all(chunk.iter().map(|&id| {
                let interest = plan.layout.interest(id);
                let plan = &plan;
                async move {
                    open_retrying(plan, &interest, id, resumable)
                        .await
                        .map(|(s, retries)| (id, interest, s, retries))
                }
            }))
            .await;
            for subscriber in opened {
                let (id, interest, subscriber, retries) = subscriber?;
                setup_retries += retries;
                subscribers.push((id, interest, subscriber));
            }
        }
        Ok::<_, PushBenchError>(())
    };
    tokio::time::timeout(SETUP, opening)
        .await
        .map_err(|_| PushBenchError::Refused("opening the subscribers took too long".into()))??;
    let memory_bytes = anon_rss_bytes(std::process::id()).unwrap_or(0);

    let shared = Rc::new(Shared {
        tallies: RefCell::new(
            subscribers
                .iter()
                .map(|(id, interest, _)| Tally {
                    checks: interest
                        .covered(plan.layout.subjects)
                        .into_iter()
                        .map(|s| (s, SequenceCheck::default()))
                        .collect(),
                    disturbed: plan.disturbance.fate(*id, everyone).disturbed(),
                    rounds: plan.rounds.map(|_| ClientRounds::default()),
                    node: plan.node_index(*id),
                    ..Tally::default()
                })
                .collect(),
        ),
        latencies: RefCell::new([histogram::new(), histogram::new()]),
        catch_up: RefCell::new(histogram::new()),
        span: RefCell::new((u64::MAX, 0u64)),
    });
    say("ready")?;
    let started = Instant::now();
    let readers: Vec<_> = subscribers
        .into_iter()
        .enumerate()
        .map(|(index, (id, _, subscriber))| {
            let fate = plan.disturbance.fate(id, everyone);
            tokio::task::spawn_local(follow(
                Rc::clone(&shared),
                Rc::clone(&plan),
                index,
                subscriber,
                fate,
                started,
            ))
        })
        .collect();

    let (messages, give_up, clock) = tokio::task::spawn_blocking(read_done)
        .await
        .map_err(|e| PushBenchError::Refused(format!("reading the parent: {e}")))??;
    let counts = plan.layout.published_counts(messages)?;
    let owed: Vec<u64> = shared
        .tallies
        .borrow()
        .iter()
        .map(|t| t.owed(&counts))
        .collect();
    let deadline = Instant::now() + give_up;
    loop {
        let settled = shared
            .tallies
            .borrow()
            .iter()
            .zip(&owed)
            .all(|(t, &owed)| t.ended.is_some() || t.reached >= owed);
        if settled || Instant::now() >= deadline {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    for reader in &readers {
        reader.abort();
    }

    let mut report = GeneratorReport {
        memory_bytes,
        setup_retries,
        ..GeneratorReport::default()
    };
    let mut catch_up = shared.catch_up.borrow_mut();
    for tally in shared.tallies.borrow().iter() {
        let lost = tally.lost(&counts);
        report.delivered += tally.got;
        report.lost += lost;
        report.duplicated += tally.checks.iter().map(|(_, c)| c.duplicated).sum::<u64>();
        if lost > 0 || tally.ended.is_some() {
            report.dropped += 1;
        }
        if tally.disturbed {
            report.disturbed += 1;
            report.disturbed_lost += lost;
        }
        if let Some(why) = &tally.ended {
            *report.disconnected.entry(why.clone()).or_default() += 1;
        }
        if tally.reopened_ns > 0 && tally.resubscribed_ns > 0 {
            let caught_up = tally.backlog_ns.max(tally.resubscribed_ns);
            let _ = catch_up.record(caught_up.saturating_sub(tally.reopened_ns) / 1000);
        }
    }
    if let (Some(rounds), Some(clock)) = (plan.rounds, clock) {
        report.rounds = count_rounds(&plan, rounds, &clock, messages, &shared.tallies.borrow())?;
    }
    let (first, last) = *shared.span.borrow();
    report.first_ns = if first == u64::MAX { 0 } else { first };
    report.last_ns = last;
    let pairs = |h: &Histogram<u64>| {
        h.iter_recorded()
            .map(|v| (v.value_iterated_to(), v.count_at_value()))
            .collect()
    };
    let latencies = shared.latencies.borrow();
    report.latencies_us = pairs(&latencies[0]);
    report.disturbed_latencies_us = pairs(&latencies[1]);
    report.catch_up_us = pairs(&catch_up);
    Ok(report)
}

/// Sums the subscribers' rounds, node by node.
fn count_rounds(
    plan: &GeneratorPlan,
    rounds: RoundsPlan,
    clock: &RoundClock,
    messages: u64,
    tallies: &[Tally],
) -> Result<Vec<RoundTally>, PushBenchError> {
    let owed = RoundsOwed::replay(&plan.layout, messages, rounds.burst)?;
    let deadline_us = rounds.deadline_ms.saturating_mul(1000);
    let mut counters = vec![RoundCounter::new(deadline_us); plan.nodes.len().max(1)];
    for tally in tallies {
        let (Some(client), Some(counter)) = (&tally.rounds, counters.get_mut(tally.node)) else {
            continue;
        };
        let covered: Vec<u32> = tally.checks.iter().map(|(s, _)| *s).collect();
        counter.add_client(client, clock, owed.rounds(), |round| {
            owed.owed(round, &covered)
        });
    }
    Ok(counters.iter().map(RoundCounter::tally).collect())
}

/// A short, stable reason for a lost connection: the first words of the
/// error, so that rows can count them.
fn reason(error: &PushBenchError) -> String {
    let text = error.to_string();
    text.chars().take(200).collect()
}

fn say(line: &str) -> Result<(), PushBenchError> {
    let mut out = std::io::stdout().lock();
    writeln!(out, "{line}")
        .and_then(|()| out.flush())
        .map_err(|e| PushBenchError::Refused(format!("writing to the parent: {e}")))
}

/// Reads the done line from stdin ([`parse_done`]).
fn read_done() -> Result<(u64, Duration, Option<RoundClock>), PushBenchError> {
    let mut line = String::new();
    std::io::stdin()
        .lock()
        .read_line(&mut line)
        .map_err(|e| PushBenchError::Refused(format!("reading the parent: {e}")))?;
    parse_done(&line)
}

/// The line a parent writes once publishing is over.
pub fn done_line(messages: u64, give_up_ms: u64, clock: Option<RoundClock>) -> String {
    match clock {
        Some(clock) => format!(
            "done {messages} {give_up_ms} {} {}\n",
            clock.start_ns, clock.interval_ns
        ),
        None => format!("done {messages} {give_up_ms}\n"),
    }
}

/// Reads `done MESSAGES GIVE_UP_MS [START_NS INTERVAL_NS]`: the messages
/// published, how long to wait for them, and the rounds' clock.
fn parse_done(line: &str) -> Result<(u64, Duration, Option<RoundClock>), PushBenchError> {
    let bad = || PushBenchError::Refused(format!("bad done line {line:?}"));
    let words: Vec<&str> = line.split_whitespace().collect();
    let number = |word: &str| word.parse::<u64>().map_err(|_| bad());
    let (messages, give_up_ms, clock) = match words.as_slice() {
        ["done", messages, give_up_ms] => (messages, give_up_ms, None),
        ["done", messages, give_up_ms, start_ns, interval_ns] => (
            messages,
            give_up_ms,
            Some(RoundClock {
                start_ns: number(start_ns)?,
                interval_ns: number(interval_ns)?,
            }),
        ),
        _ => {
            return Err(PushBenchError::Refused(format!(
                "expected a done line, got {line:?}"
            )))
        }
    };
    Ok((
        number(messages)?,
        Duration::from_millis(number(give_up_ms)?),
        clock,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_done_line_reads_back_with_and_without_the_rounds_clock() {
        let clock = RoundClock {
            start_ns: 1_700_000_000_000_000_000,
            interval_ns: 1_000_000_000,
        };
        let (messages, give_up, read) = parse_done(&done_line(1_200, 70_000, Some(clock))).unwrap();
        assert_eq!(
            (messages, give_up, read),
            (1_200, Duration::from_secs(70), Some(clock))
        );
        let (_, _, read) = parse_done(&done_line(5, 10, None)).unwrap();
        assert_eq!(read, None);
        assert!(parse_done("done 5").is_err());
        assert!(parse_done("done 5 x").is_err());
    }

    #[test]
    fn subscribers_spread_over_the_nodes_in_turn() {
        let node = |push: &str| Broker::Floor {
            addr: push.to_owned(),
            payload_bytes: 64,
        };
        let plan = GeneratorPlan {
            nodes: vec![node("a"), node("b"), node("c")],
            rounds: None,
            first: 0,
            subscribers: 0,
            layout: Layout::in_turn(1, 7),
            disturbance: Disturbance::None,
            source: None,
            open_parallel: 1,
        };
        let indices: Vec<usize> = (0..7).map(|id| plan.node_index(id)).collect();
        assert_eq!(indices, [0, 1, 2, 0, 1, 2, 0]);
        assert!(matches!(plan.node_of(4), Ok(Broker::Floor { addr, .. }) if addr == "b"));
        let empty = GeneratorPlan {
            nodes: Vec::new(),
            ..plan
        };
        assert!(empty.node_of(0).is_err());
    }
}
