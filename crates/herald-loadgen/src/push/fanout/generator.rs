//! A subscriber generator: one process, one thread, one event loop holding
//! a share of the fan-out's subscribers. The parent starts as many as the
//! open-file limit requires, each from its own loopback source address,
//! and speaks to them over stdin and stdout:
//!
//! 1. the generator opens and subscribes its connections, then prints
//!    `ready`;
//! 2. the parent publishes, then writes `done MESSAGES GIVE_UP_MS`;
//! 3. the generator waits until every subscriber has what it is owed, has
//!    lost its connection, or `GIVE_UP_MS` pass, and prints its
//!    [`GeneratorReport`] as one JSON line.
//!
//! One thread, so that a generator's cost per socket is an event loop's,
//! not a scheduler's; its subscribers share one latency histogram.

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::io::{BufRead as _, Write as _};
use std::net::IpAddr;
use std::rc::Rc;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use super::super::{anon_rss_bytes, now_ns, PushBenchError};
use super::broker::{Broker, Subscriber};
use super::publisher::published_on;
use super::stamp::{SequenceCheck, Stamp};
use crate::histogram;

/// One generator's share of the subscribers.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct GeneratorPlan {
    /// The broker.
    pub broker: Broker,
    /// The first subscriber's number; they are numbered across generators.
    pub first: u64,
    /// Subscribers this generator holds.
    pub subscribers: usize,
    /// Subscriber `n` listens to subject `n % subjects`.
    pub subjects: u32,
    /// The loopback address its connections come from.
    pub source: Option<IpAddr>,
    /// Connections opened at once while setting up.
    pub open_parallel: usize,
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
    /// The first and last delivery, ns since the Unix epoch.
    pub first_ns: u64,
    /// See `first_ns`.
    pub last_ns: u64,
    /// Publish-to-deliver latency in µs: (value, count) pairs.
    pub latencies_us: Vec<(u64, u64)>,
    /// This process's anonymous memory with every subscriber open.
    pub memory_bytes: u64,
}

/// One subscriber's tally.
#[derive(Debug, Default)]
struct Tally {
    subject: u32,
    got: u64,
    check: SequenceCheck,
    ended: Option<String>,
}

/// How long opening every subscriber may take.
const SETUP: Duration = Duration::from_secs(600);

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

async fn run(plan: &GeneratorPlan) -> Result<GeneratorReport, PushBenchError> {
    let subjects = plan.subjects.max(1);
    let mut subscribers = Vec::with_capacity(plan.subscribers);
    let opening = async {
        let ids: Vec<u64> = (0..plan.subscribers as u64)
            .map(|j| plan.first + j)
            .collect();
        for chunk in ids.chunks(plan.open_parallel.max(1)) {
            let opened = futures_util::future::join_all(chunk.iter().map(|&id| {
                let subject = (id % u64::from(subjects)) as u32;
                async move {
                    Subscriber::open(&plan.broker, subject, id, plan.source)
                        .await
                        .map(|s| (subject, s))
                }
            }))
            .await;
            for subscriber in opened {
                subscribers.push(subscriber?);
            }
        }
        Ok::<_, PushBenchError>(())
    };
    tokio::time::timeout(SETUP, opening)
        .await
        .map_err(|_| PushBenchError::Refused("opening the subscribers took too long".into()))??;
    let memory_bytes = anon_rss_bytes(std::process::id()).unwrap_or(0);

    let tallies: Rc<RefCell<Vec<Tally>>> = Rc::new(RefCell::new(
        subscribers
            .iter()
            .map(|(subject, _)| Tally {
                subject: *subject,
                ..Tally::default()
            })
            .collect(),
    ));
    let latencies = Rc::new(RefCell::new(histogram::new()));
    let span = Rc::new(RefCell::new((u64::MAX, 0u64)));
    let readers: Vec<_> = subscribers
        .into_iter()
        .enumerate()
        .map(|(index, (_, mut subscriber))| {
            let tallies = Rc::clone(&tallies);
            let latencies = Rc::clone(&latencies);
            let span = Rc::clone(&span);
            tokio::task::spawn_local(async move {
                loop {
                    let received = subscriber
                        .receive(|payload| {
                            let now = now_ns();
                            let mut tallies = tallies.borrow_mut();
                            let Some(tally) = tallies.get_mut(index) else {
                                return;
                            };
                            tally.got += 1;
                            let Some(stamp) = Stamp::read(payload) else {
                                return;
                            };
                            if stamp.subject == tally.subject {
                                tally.check.see(stamp.sequence);
                            }
                            let _ = latencies
                                .borrow_mut()
                                .record(now.saturating_sub(stamp.intended_ns) / 1000);
                            let mut span = span.borrow_mut();
                            span.0 = span.0.min(now);
                            span.1 = span.1.max(now);
                        })
                        .await;
                    if let Err(e) = received {
                        if let Some(tally) = tallies.borrow_mut().get_mut(index) {
                            tally.ended = Some(reason(&e));
                        }
                        return;
                    }
                }
            })
        })
        .collect();
    say("ready")?;

    let (messages, give_up) = tokio::task::spawn_blocking(read_done)
        .await
        .map_err(|e| PushBenchError::Refused(format!("reading the parent: {e}")))??;
    let deadline = Instant::now() + give_up;
    loop {
        let settled = tallies
            .borrow()
            .iter()
            .all(|t| t.ended.is_some() || t.got >= published_on(t.subject, messages, subjects));
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
        ..GeneratorReport::default()
    };
    for tally in tallies.borrow().iter() {
        let owed = published_on(tally.subject, messages, subjects);
        let lost = tally.check.lost_of(owed);
        report.delivered += tally.got;
        report.lost += lost;
        report.duplicated += tally.check.duplicated;
        if lost > 0 || tally.ended.is_some() {
            report.dropped += 1;
        }
        if let Some(why) = &tally.ended {
            *report.disconnected.entry(why.clone()).or_default() += 1;
        }
    }
    let (first, last) = *span.borrow();
    report.first_ns = if first == u64::MAX { 0 } else { first };
    report.last_ns = last;
    report.latencies_us = latencies
        .borrow()
        .iter_recorded()
        .map(|v| (v.value_iterated_to(), v.count_at_value()))
        .collect();
    Ok(report)
}

/// A short, stable reason for a lost connection: the first words of the
/// error, so that rows can count them.
fn reason(error: &PushBenchError) -> String {
    let text = error.to_string();
    text.chars().take(80).collect()
}

fn say(line: &str) -> Result<(), PushBenchError> {
    let mut out = std::io::stdout().lock();
    writeln!(out, "{line}")
        .and_then(|()| out.flush())
        .map_err(|e| PushBenchError::Refused(format!("writing to the parent: {e}")))
}

/// Reads `done MESSAGES GIVE_UP_MS` from stdin: the messages
/// published and how long to wait for them.
fn read_done() -> Result<(u64, Duration), PushBenchError> {
    let mut line = String::new();
    std::io::stdin()
        .lock()
        .read_line(&mut line)
        .map_err(|e| PushBenchError::Refused(format!("reading the parent: {e}")))?;
    let words: Vec<&str> = line.split_whitespace().collect();
    match words.as_slice() {
        ["done", messages, give_up_ms] => {
            let messages = messages.parse::<u64>().ok();
            let give_up_ms = give_up_ms.parse::<u64>().ok();
            messages
                .zip(give_up_ms)
                .map(|(m, g)| (m, Duration::from_millis(g)))
                .ok_or_else(|| PushBenchError::Refused(format!("bad done line {line:?}")))
        }
        _ => Err(PushBenchError::Refused(format!(
            "expected a done line, got {line:?}"
        ))),
    }
}
