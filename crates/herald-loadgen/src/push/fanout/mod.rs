//! Seed 002's experiment, against any broker: N subscribers of one
//! subject (or of several, in turn), a publisher at a fixed rate or at
//! saturation, the publish-to-deliver latency of every delivery, what was
//! lost or duplicated, and the subscribers that did not get everything
//! ("dropped").
//!
//! Every broker faces the same client code ([`broker`]): subscribers held
//! by single-threaded [`generator`] processes, each from its own loopback
//! source address, and one open-loop, window-limited [`publisher`] whose
//! messages carry a [`stamp`]. The floor ([`floor`]) is a relay with
//! nothing but the socket writes, driven by the same clients.
//!
//! Subscribers may be spread over several nodes of one system (a cluster,
//! a relay tree), the publisher on one of them; and when the publisher
//! sends in bursts, [`rounds`] counts seed 003's rounds client by client
//! (round latency and time-outs, overall and by node).

pub mod broker;
pub mod disturbance;
pub mod floor;
pub mod generator;
pub mod layout;
pub mod publisher;
pub mod rounds;
pub mod stamp;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use serde::Serialize;
use tokio::io::{AsyncBufReadExt as _, AsyncWriteExt as _, BufReader, Lines};
use tokio::process::{Child, ChildStdin, ChildStdout};

use self::broker::{Broker, Publisher};
use self::disturbance::Disturbance;
use self::generator::{GeneratorPlan, GeneratorReport, RoundsPlan};
use self::layout::Layout;
use self::publisher::Schedule;
use self::rounds::{RoundClock, RoundCounter, RoundStats};
use super::socket::loopback_source;
use super::PushBenchError;
use crate::histogram;

/// What to run.
#[derive(Debug, Clone)]
pub struct Fanout {
    /// What the rows call it (`s1`, `s3-zipf`, ...).
    pub scenario: String,
    /// The broker the publisher publishes to.
    pub broker: Broker,
    /// The nodes subscribers are spread over, subscriber `n` on
    /// `nodes[n % nodes.len()]`; empty: all on `broker`.
    pub nodes: Vec<Broker>,
    /// Count seed 003's rounds client by client (with `burst` over 1 and
    /// a `rate`: each burst is a round).
    pub rounds: Option<RoundsPlan>,
    /// Subscribers, each on a connection of its own.
    pub subscribers: usize,
    /// The subjects, who listens to which, and where messages go (its
    /// `subscribers` is set from the field above).
    pub layout: Layout,
    /// Messages published per second (bursts per second when `burst` is
    /// over 1); 0 for saturation (as fast as the window allows, for
    /// `secs`).
    pub rate: u32,
    /// Messages meant to leave together at each tick of `rate`.
    pub burst: u32,
    /// What goes wrong during the run.
    pub disturbance: Disturbance,
    /// Seconds of publishing.
    pub secs: f64,
    /// Bytes per message.
    pub payload_bytes: usize,
    /// The publisher's window (see [`publisher::Schedule::window`]).
    pub window: usize,
    /// Subscribers per generator process at most (each holds one file per
    /// subscriber, under the open-file limit).
    pub per_generator: usize,
    /// Connections each generator opens at once while setting up.
    pub open_parallel: usize,
    /// Give every generator its own loopback source address.
    pub spread_sources: bool,
    /// The program to start generators with (this load generator).
    pub generator: PathBuf,
    /// The broker's pid, for its CPU and memory.
    pub broker_pid: Option<u32>,
    /// herald's admin listener, whose `herald_process_heap_bytes` gauge
    /// says what the subscribers cost its allocator (resident memory also
    /// holds what the allocator keeps for reuse, so on a broker that has
    /// run before it understates).
    pub heap_metrics: Option<String>,
}

/// One run's figures.
#[derive(Debug, Clone, Serialize)]
pub struct FanoutRow {
    /// The scenario's name (`s1`, `s3-zipf`, ...).
    pub scenario: String,
    /// The system: `herald`, `nats`, `mqtt`, `floor`.
    pub system: &'static str,
    /// How its clients speak to it: `websocket`, `grpc`, `nats`,
    /// `mqtt-qos0`, `mqtt-qos1`, `kernel`.
    pub transport: String,
    /// Subscribers.
    pub subscribers: usize,
    /// Nodes the subscribers were spread over.
    pub nodes: usize,
    /// Subjects.
    pub subjects: u32,
    /// Subscriptions over all subscribers (patterns included).
    pub subscriptions: u64,
    /// Pattern subscriptions among them.
    pub patterns: u64,
    /// How the publisher chose each message's subject.
    pub choice: &'static str,
    /// Messages per tick of `rate`.
    pub burst: u32,
    /// Generator processes holding the subscribers.
    pub generators: usize,
    /// Messages per second asked for; 0 for saturation.
    pub rate: u32,
    /// Bytes per message.
    pub payload_bytes: usize,
    /// The publisher's window.
    pub window: usize,
    /// Messages published.
    pub published: u64,
    /// Messages the schedule planned (0 at saturation); fewer were
    /// published when the broker held the publisher back past twice its
    /// schedule.
    pub planned: u64,
    /// Seconds from the first publish to the last answer.
    pub publish_secs: f64,
    /// Deliveries received, over all subscribers.
    pub delivered: u64,
    /// Deliveries per second, from the first publish to the last delivery.
    pub deliveries_per_sec: f64,
    /// Messages owed to a subscriber and never received, summed.
    pub lost: u64,
    /// Messages received twice, summed.
    pub duplicated: u64,
    /// Subscribers that lost a message or their connection.
    pub dropped_subscribers: usize,
    /// Subscribers whose connection ended, by why.
    pub disconnected: BTreeMap<String, usize>,
    /// Mean publish-to-deliver latency, µs.
    pub mean_us: f64,
    /// Median, µs.
    pub p50_us: f64,
    /// 99th percentile, µs.
    pub p99_us: f64,
    /// 99.9th percentile, µs.
    pub p999_us: f64,
    /// Largest, µs.
    pub max_us: f64,
    /// Share of deliveries later than one second (seed 003's time-outs).
    pub late_share: f64,
    /// Subscribers the disturbance touched (stalled or reconnected).
    pub disturbed_subscribers: usize,
    /// 99th percentile of the subscribers it spared, µs.
    pub spared_p99_us: Option<f64>,
    /// 99th percentile of the subscribers it touched, µs.
    pub disturbed_p99_us: Option<f64>,
    /// Messages the touched subscribers lost (part of `lost`).
    pub disturbed_lost: u64,
    /// Reconnected subscribers: from reopening until each had every
    /// message published before it reopened, median, ms.
    pub catch_up_p50_ms: Option<f64>,
    /// 99th percentile of the same, ms.
    pub catch_up_p99_ms: Option<f64>,
    /// The slowest, ms.
    pub catch_up_max_ms: Option<f64>,
    /// Cores the broker kept busy while publishing.
    pub broker_cores: Option<f64>,
    /// Broker CPU per delivery, ns, from the first publish to the last
    /// delivery.
    pub broker_ns_per_delivery: Option<f64>,
    /// Broker CPU per message published, ns.
    pub broker_ns_per_message: Option<f64>,
    /// Broker anonymous memory per subscriber connection (after opening
    /// them, against before), bytes.
    pub broker_bytes_per_connection: Option<f64>,
    /// The same per subscription.
    pub broker_bytes_per_subscription: Option<f64>,
    /// herald: its heap in use per subscriber connection (after opening
    /// them, against before), bytes.
    pub broker_heap_bytes_per_connection: Option<f64>,
    /// The same per subscription.
    pub broker_heap_bytes_per_subscription: Option<f64>,
    /// The generators' anonymous memory per subscriber, bytes.
    pub generator_bytes_per_connection: f64,
    /// Subscriber connections that failed while opening and were opened
    /// again (a full accept queue or a reset during the setup burst).
    pub setup_retries: u64,
    /// Seed 003's rounds over every client, when counted: round latency
    /// (from a round's tick until a client has all of its messages) and
    /// the share of clients not complete within the deadline.
    pub rounds: Option<RoundStats>,
    /// The same for each node's clients, in the nodes' order (empty with
    /// one node).
    pub rounds_by_node: Vec<RoundStats>,
}

/// How long setting up may take before the run fails instead of hanging.
const SETUP: Duration = Duration::from_secs(900);

/// A running generator process.
struct Generator {
    child: Child,
    stdin: ChildStdin,
    said: Lines<BufReader<ChildStdout>>,
}

impl Generator {
    async fn start(program: &PathBuf, plan: &GeneratorPlan) -> Result<Self, PushBenchError> {
        let failed = |e: String| PushBenchError::Refused(format!("a generator: {e}"));
        let plan = serde_json::to_string(plan).map_err(|e| failed(e.to_string()))?;
        let mut child = tokio::process::Command::new(program)
            .args(["push", "fanout-generator", "--plan", &plan])
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .map_err(|e| failed(e.to_string()))?;
        let stdin = child
            .stdin
            .take()
            .ok_or_else(|| failed("no stdin".into()))?;
        let stdout = child
            .stdout
            .take()
            .ok_or_else(|| failed("no stdout".into()))?;
        Ok(Self {
            child,
            stdin,
            said: BufReader::new(stdout).lines(),
        })
    }

    async fn line(&mut self) -> Result<String, PushBenchError> {
        let failed = |e: String| PushBenchError::Refused(format!("a generator: {e}"));
        match tokio::time::timeout(SETUP, self.said.next_line()).await {
            Ok(Ok(Some(line))) => Ok(line),
            Ok(Ok(None)) => {
                let status = self.child.wait().await.map_err(|e| failed(e.to_string()))?;
                Err(failed(format!("ended ({status}); see its stderr")))
            }
            Ok(Err(e)) => Err(failed(e.to_string())),
            Err(_) => Err(failed("said nothing in time".into())),
        }
    }
}

/// Runs one fan-out measurement.
pub async fn run(plan: &Fanout) -> Result<FanoutRow, PushBenchError> {
    let memory = |pid: Option<u32>| pid.and_then(|pid| super::anon_rss_bytes(pid).ok());
    let memory_before = memory(plan.broker_pid);
    let heap = || {
        plan.heap_metrics
            .as_deref()
            .and_then(|admin| super::metric(admin, "herald_process_heap_bytes").ok())
    };
    let heap_before = heap();
    let per = plan.per_generator.max(1);
    let count = plan.subscribers.div_ceil(per).max(1);
    // Each run from addresses of its own (by this process's id), so that
    // the previous run's closing connections hold none of its ports.
    let sources = (std::process::id() as usize % 4096) * 16;
    let layout = Layout {
        subscribers: plan.subscribers as u64,
        ..plan.layout.clone()
    };
    let nodes = if plan.nodes.is_empty() {
        vec![plan.broker.clone()]
    } else {
        plan.nodes.clone()
    };
    // Rounds need bursts on a clock.
    let rounds = plan.rounds.filter(|_| plan.rate > 0 && plan.burst > 1);
    let mut generators = Vec::with_capacity(count);
    for k in 0..count {
        let first = k * per;
        let share = GeneratorPlan {
            nodes: nodes.clone(),
            rounds,
            first: first as u64,
            subscribers: per.min(plan.subscribers.saturating_sub(first)),
            layout: layout.clone(),
            disturbance: plan.disturbance,
            source: plan.spread_sources.then(|| loopback_source(sources + k)),
            open_parallel: plan.open_parallel,
        };
        generators.push(Generator::start(&plan.generator, &share).await?);
    }
    for generator in &mut generators {
        let line = generator.line().await?;
        if line.trim() != "ready" {
            return Err(PushBenchError::Refused(format!(
                "a generator said {line:?}, not ready"
            )));
        }
    }
    let memory_after = memory(plan.broker_pid);
    let heap_after = heap();

    let mut publisher = Publisher::open(
        &plan.broker,
        plan.spread_sources
            .then(|| loopback_source(sources + count)),
    )
    .await?;
    warm_up(&mut publisher).await?;
    if let Some(pid) = plan.broker_pid {
        super::settle_broker(pid).await;
    }
    let sample = || plan.broker_pid.and_then(crate::cpu::sample);
    let cpu_before = sample();
    let start_ns = super::now_ns();
    let schedule = Schedule {
        rate: plan.rate,
        burst: plan.burst.max(1),
        secs: plan.secs,
        layout: layout.clone(),
        payload_bytes: plan.payload_bytes,
        window: plan.window,
    };
    let published = publisher::publish(&plan.broker, &mut publisher, &schedule).await?;
    let cpu_published = sample();
    // Time for the last deliveries to arrive: what a subscriber has not
    // received by then is lost.
    let give_up_ms = 10_000 + (published.elapsed.as_millis() as u64);
    let clock = rounds.map(|_| RoundClock {
        start_ns: published.start_ns,
        interval_ns: 1_000_000_000 / u64::from(plan.rate.max(1)),
    });
    let done = generator::done_line(published.messages, give_up_ms, clock);
    for generator in &mut generators {
        generator
            .stdin
            .write_all(done.as_bytes())
            .await
            .map_err(|e| PushBenchError::Refused(format!("a generator: {e}")))?;
    }
    let mut reports = Vec::with_capacity(count);
    for generator in &mut generators {
        let line = generator.line().await?;
        let report: GeneratorReport = serde_json::from_str(&line)
            .map_err(|e| PushBenchError::Refused(format!("a generator's report {line:?}: {e}")))?;
        reports.push(report);
    }
    let cpu_delivered = sample();
    for mut generator in generators {
        let _ = generator.child.wait().await;
    }
    drop(publisher);

    let mut latencies = histogram::new();
    let mut spared = histogram::new();
    let mut disturbed = histogram::new();
    let mut catch_up = histogram::new();
    let mut total = GeneratorReport::default();
    let mut generator_memory = 0u64;
    let mut last_ns = 0u64;
    let deadline_us = rounds.map_or(0, |r| r.deadline_ms.saturating_mul(1000));
    let mut rounds_by_node = vec![RoundCounter::new(deadline_us); nodes.len()];
    for report in reports {
        for (node, tally) in rounds_by_node.iter_mut().zip(&report.rounds) {
            node.merge(tally);
        }
        for (value, n) in &report.latencies_us {
            let _ = latencies.record_n(*value, *n);
            let _ = spared.record_n(*value, *n);
        }
        for (value, n) in &report.disturbed_latencies_us {
            let _ = latencies.record_n(*value, *n);
            let _ = disturbed.record_n(*value, *n);
        }
        for (value, n) in &report.catch_up_us {
            let _ = catch_up.record_n(*value, *n);
        }
        total.disturbed += report.disturbed;
        total.setup_retries += report.setup_retries;
        total.disturbed_lost += report.disturbed_lost;
        total.delivered += report.delivered;
        total.lost += report.lost;
        total.duplicated += report.duplicated;
        total.dropped += report.dropped;
        for (why, n) in report.disconnected {
            *total.disconnected.entry(why).or_default() += n;
        }
        generator_memory += report.memory_bytes;
        last_ns = last_ns.max(report.last_ns);
    }
    let delivering_secs = last_ns.saturating_sub(start_ns) as f64 / 1e9;
    let (p50, p99, p999) = histogram::percentiles(&latencies).unwrap_or_default();
    let subscribers = plan.subscribers.max(1) as f64;
    let p99_of = |h: &hdrhistogram::Histogram<u64>| {
        (!h.is_empty()).then(|| h.value_at_quantile(0.99) as f64)
    };
    let ms = |h: &hdrhistogram::Histogram<u64>, q: f64| {
        (!h.is_empty()).then(|| h.value_at_quantile(q) as f64 / 1000.0)
    };
    let late = latencies.count_between(1_000_001, u64::MAX);
    let cpu_ns = cpu_before
        .zip(cpu_delivered)
        .map(|(before, after)| crate::cpu::between(before, after).0);
    let broker_bytes = memory_before
        .zip(memory_after)
        .map(|(before, after)| after.saturating_sub(before) as f64);
    let heap_bytes = heap_before
        .zip(heap_after)
        .map(|(before, after)| (after - before).max(0.0));
    Ok(FanoutRow {
        scenario: plan.scenario.clone(),
        system: plan.broker.system(),
        transport: plan.broker.label(),
        subscribers: plan.subscribers,
        nodes: nodes.len(),
        subjects: layout.subjects.max(1),
        subscriptions: layout.subscriptions(),
        patterns: if layout.patterns {
            layout.subscribers
        } else {
            0
        },
        choice: layout.choice.name(),
        burst: plan.burst.max(1),
        generators: count,
        rate: plan.rate,
        payload_bytes: plan.payload_bytes,
        window: plan.window,
        published: published.messages,
        planned: published.planned,
        publish_secs: published.elapsed.as_secs_f64(),
        delivered: total.delivered,
        deliveries_per_sec: if delivering_secs > 0.0 {
            total.delivered as f64 / delivering_secs
        } else {
            0.0
        },
        lost: total.lost,
        duplicated: total.duplicated,
        dropped_subscribers: total.dropped,
        disconnected: total.disconnected,
        mean_us: latencies.mean(),
        p50_us: p50,
        p99_us: p99,
        p999_us: p999,
        max_us: latencies.max() as f64,
        late_share: if latencies.is_empty() {
            0.0
        } else {
            late as f64 / latencies.len() as f64
        },
        disturbed_subscribers: total.disturbed,
        spared_p99_us: p99_of(&spared),
        disturbed_p99_us: p99_of(&disturbed),
        disturbed_lost: total.disturbed_lost,
        catch_up_p50_ms: ms(&catch_up, 0.5),
        catch_up_p99_ms: ms(&catch_up, 0.99),
        catch_up_max_ms: ms(&catch_up, 1.0),
        broker_cores: cpu_before
            .zip(cpu_published)
            .map(|(before, after)| crate::cpu::between(before, after).1),
        broker_ns_per_delivery: cpu_ns
            .filter(|_| total.delivered > 0)
            .map(|ns| ns / total.delivered as f64),
        broker_ns_per_message: cpu_ns
            .filter(|_| published.messages > 0)
            .map(|ns| ns / published.messages as f64),
        broker_bytes_per_connection: broker_bytes.map(|bytes| bytes / subscribers),
        broker_bytes_per_subscription: broker_bytes
            .map(|bytes| bytes / layout.subscriptions().max(1) as f64),
        broker_heap_bytes_per_connection: heap_bytes.map(|bytes| bytes / subscribers),
        broker_heap_bytes_per_subscription: heap_bytes
            .map(|bytes| bytes / layout.subscriptions().max(1) as f64),
        generator_bytes_per_connection: generator_memory as f64 / subscribers,
        setup_retries: total.setup_retries,
        rounds: rounds.map(|_| {
            let mut every = RoundCounter::new(deadline_us);
            for node in &rounds_by_node {
                every.merge(&node.tally());
            }
            every.stats()
        }),
        rounds_by_node: if rounds.is_some() && nodes.len() > 1 {
            rounds_by_node.iter().map(RoundCounter::stats).collect()
        } else {
            Vec::new()
        },
    })
}

/// Messages published before measuring, on subjects nobody listens to.
const WARM_UP_MESSAGES: u32 = 64;

/// Publishes [`WARM_UP_MESSAGES`] on subjects outside the run's, so that
/// what a broker does once per partition or per subject before its first
/// message (herald lays out the first pages of each partition's segment
/// ahead of the writers, in the background) is not charged to the run.
/// 64 keys reach every partition of a 16-partition topic with
/// near-certainty. The floor has no subjects (every message goes to every
/// subscriber) and nothing to warm.
async fn warm_up(publisher: &mut Publisher) -> Result<(), PushBenchError> {
    if matches!(publisher, Publisher::Floor(_)) {
        return Ok(());
    }
    let payload = [0u8; stamp::STAMP_BYTES];
    let mut answers = 0;
    for n in 0..WARM_UP_MESSAGES {
        if publisher.send(&format!("warm-up.{n}"), &payload).await? {
            answers += 1;
        }
    }
    for _ in 0..answers {
        publisher.answered().await?;
    }
    publisher.round_trip().await
}

/// Starts the floor's relay ([`floor::relay`]) as a child process of
/// `program` (this load generator), on `cpu` if given; returns it, its
/// pid and its address.
/// It stops when the child handle is dropped.
pub async fn start_floor(
    program: &PathBuf,
    payload_bytes: usize,
    senders: usize,
    cpu: Option<usize>,
) -> Result<(Child, u32, String), PushBenchError> {
    let failed = |e: String| PushBenchError::Refused(format!("the floor's relay: {e}"));
    let mut child = tokio::process::Command::new(program)
        .args(["push", "fanout-floor-relay"])
        .args(["--payload-bytes", &payload_bytes.to_string()])
        .args(["--senders", &senders.to_string()])
        .args(cpu.map(|cpu| format!("--cpu={cpu}")))
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .map_err(|e| failed(e.to_string()))?;
    let pid = child.id().ok_or_else(|| failed("no pid".into()))?;
    let stdout = child
        .stdout
        .take()
        .ok_or_else(|| failed("no stdout".into()))?;
    let addr = tokio::time::timeout(SETUP, BufReader::new(stdout).lines().next_line())
        .await
        .map_err(|_| failed("did not start in time".into()))?
        .map_err(|e| failed(e.to_string()))?
        .ok_or_else(|| failed("ended before listening".into()))?;
    Ok((child, pid, addr))
}
