//! The flow-control evaluation (issue 18, seed 004's chapter 5 method):
//! in-flight-limited producers send to 1, 16 or 256 subjects (topics),
//! choosing each request's subject uniformly, normally or by Poisson; every
//! N records answered make one point (published so far, throughput, mean
//! and p99 latency, errors, and the broker's flow-control limit scraped
//! from its metrics). Optional steps: a demand step (three quarters of the
//! publishers start late: 4x the demand) and a capacity step: a CPU quota
//! on the broker's cgroup cuts it to a share of one core
//! ([`crate::cpu_quota`]: half, whatever its threads do), busy threads
//! pinned to the broker's core take their share of it (one thread against
//! the broker's many takes little), or threads syncing on its data disk
//! compete for the disk's flushes ([`crate::disk_hog`]: where the disk,
//! not the broker's CPU, bounds its fsyncs).
//!
//! Open loop (`offered_rate`): the publishers offer records on a fixed
//! schedule whatever the answers, as many independent clients would. A
//! request due while its publisher's buffer (`in_flight` requests) is full
//! is refused at once, as a producer with a full queue refuses a record;
//! one answered later than the deadline counts as timed out. Latency runs
//! from when the request was due.
//!
//! Interleaved (`interleave`): the run switches the broker's flow control
//! between setups every slice (see [`crate::flow_interleave`]); each point
//! names the setup it was measured under, its turn and cycle and when in
//! its turn it began, and no point spans a switch.
//!
//! Points go to a JSON-lines file; scripts/bench_flow_report.py turns them
//! into goodput, p99, time to settle and the seed's plots.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};
use hdrhistogram::Histogram;
use herald_client::{ConnectOptions, Stream};
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::{ApiKey, ProduceRequest};
use serde::Serialize;
use std::sync::Mutex;
use tokio::io::{AsyncReadExt, AsyncWriteExt, ReadHalf};
use tokio::sync::{mpsc, Semaphore};

use crate::admin::topic_name;
use crate::cpu_quota::{CpuQuota, CpuQuotaReport, CpuQuotaSpec};
use crate::disk_hog::{DiskHog, DiskHogReport, DiskHogSpec};
use crate::flow_interleave::{self, Interleave, Schedule, Turn};
use crate::produce::{next_answer, PRODUCE_VERSION};
use crate::push::fanout::layout::{Choice, Layout};
use crate::wire::{patch_correlation, request_frame};
use crate::{histogram, records, LoadError};

/// What one evaluation run does.
#[derive(Debug, Clone)]
pub struct FlowSpec {
    /// The broker's Kafka listener.
    pub addr: SocketAddr,
    /// Its admin listener, to read the flow-control limit (none: not read).
    pub admin: Option<SocketAddr>,
    /// The subjects, one topic each.
    pub topics: Vec<String>,
    /// How each request's subject is chosen.
    pub choice: Choice,
    /// Publishers, each on its own connection.
    pub publishers: u32,
    /// Records per request.
    pub batch: u32,
    /// Requests in flight per publisher (the producers' own limit).
    pub in_flight: usize,
    /// acks (1 or -1).
    pub acks: i16,
    /// How long.
    pub duration: Duration,
    /// Records per point (the seed's N).
    pub window: u64,
    /// When the late three quarters of the publishers start (a 4x demand
    /// step); none: all start at once.
    pub demand_step_at: Option<Duration>,
    /// When busy threads start taking the broker's core; none: never.
    pub hog_at: Option<Duration>,
    /// The core the busy threads are pinned to.
    pub hog_cpu: usize,
    /// How many busy threads.
    pub hog_threads: usize,
    /// The disk capacity step: when and where threads start syncing on the
    /// broker's data disk; none: never.
    pub disk_hog: Option<DiskHogSpec>,
    /// The CPU quota step: when, on which cgroup (the broker's) and what
    /// share of a core; none: never.
    pub cpu_quota: Option<CpuQuotaSpec>,
    /// Seeds the subject draws.
    pub seed: u64,
    /// Open loop: records per second offered across all publishers (none:
    /// closed loop, each publisher keeps `in_flight` requests out).
    pub offered_rate: Option<f64>,
    /// Open loop: how long after it was due a request may be answered
    /// and still count.
    pub deadline: Duration,
    /// Setups taken in turn within the run (needs `admin`); none: the
    /// broker's flow control as it was started.
    pub interleave: Option<Interleave>,
}

/// What one run measured.
#[derive(Debug, Clone)]
pub struct FlowRun {
    /// Its points, in order.
    pub points: Vec<Point>,
    /// What the disk capacity step did, when the run had one.
    pub disk_hog: Option<DiskHogReport>,
    /// What the CPU quota step did, when the run had one.
    pub cpu_quota: Option<CpuQuotaReport>,
}

/// One point: N records answered.
#[derive(Debug, Clone, Serialize)]
pub struct Point {
    /// Seconds since the run started.
    pub t: f64,
    /// Records answered without error so far.
    pub published: u64,
    /// Records per second over the point.
    pub throughput: f64,
    /// Mean request latency over the point, ms.
    pub latency_ms: f64,
    /// p99 request latency over the point, ms.
    pub p99_ms: f64,
    /// Requests answered with an error over the point.
    pub errors: u64,
    /// The broker's flow-control limit when the point closed (0: off or
    /// not read).
    pub limit: u64,
    /// Open loop: requests over the point refused by a full client buffer
    /// or answered past their deadline.
    pub expired: u64,
    /// Interleaved: the setup the point was measured under.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub setup: Option<String>,
    /// Interleaved: seconds from the switch to that setup to the point's
    /// start.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub since_switch: Option<f64>,
    /// Interleaved: the turn, counted from 0 over the run.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub turn: Option<usize>,
    /// Interleaved: the cycle the turn belongs to (one turn of every
    /// setup each).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cycle: Option<usize>,
}

struct Recorder {
    started: Instant,
    window: u64,
    published: u64,
    in_point: u64,
    point_started: f64,
    latency_sum_us: u128,
    latency: Histogram<u64>,
    errors: u64,
    expired: u64,
    points: Vec<Point>,
    setup: Option<String>,
    turn: Option<(usize, usize)>,
    switched_at: f64,
}

impl Recorder {
    fn new(started: Instant, window: u64) -> Self {
        Self {
            started,
            window: window.max(1),
            published: 0,
            in_point: 0,
            point_started: 0.0,
            latency_sum_us: 0,
            latency: histogram::new(),
            errors: 0,
            expired: 0,
            points: Vec::new(),
            setup: None,
            turn: None,
            switched_at: 0.0,
        }
    }

    /// The broker switched to `turn`'s setup: the point under way closes
    /// (with `limit`, the one it was measured under), so that none spans
    /// two turns.
    fn switch(&mut self, turn: &Turn, limit: u64) {
        self.close_point(limit);
        let now = self.started.elapsed().as_secs_f64();
        self.point_started = now;
        self.switched_at = now;
        self.setup = Some(turn.setup.name());
        self.turn = Some((turn.index, turn.cycle));
    }

    /// Counts requests refused by a full client buffer or answered past
    /// their deadline.
    fn expired(&mut self, requests: u64) {
        self.expired += requests;
    }

    fn answered(&mut self, records: u64, latency_us: u64, ok: bool, limit: u64) {
        if !ok {
            self.errors += 1;
        } else {
            self.published += records;
            self.in_point += records;
            self.latency_sum_us += u128::from(latency_us) * u128::from(records);
            self.latency.saturating_record(latency_us.max(1));
        }
        if self.in_point < self.window {
            return;
        }
        self.close_point(limit);
    }

    /// Closes the point under way, if it holds anything: every N records
    /// answered, and once more at the end of the run (so that an open-loop
    /// run whose requests all expired still reports them).
    fn close_point(&mut self, limit: u64) {
        if self.in_point == 0 && self.errors == 0 && self.expired == 0 {
            return;
        }
        let t = self.started.elapsed().as_secs_f64();
        let span = (t - self.point_started).max(1e-9);
        self.points.push(Point {
            t,
            published: self.published,
            throughput: self.in_point as f64 / span,
            latency_ms: self.latency_sum_us as f64 / self.in_point.max(1) as f64 / 1000.0,
            p99_ms: self.latency.value_at_quantile(0.99) as f64 / 1000.0,
            errors: self.errors,
            limit,
            expired: self.expired,
            setup: self.setup.clone(),
            since_switch: self
                .setup
                .as_ref()
                .map(|_| self.point_started - self.switched_at),
            turn: self.turn.map(|(index, _)| index),
            cycle: self.turn.map(|(_, cycle)| cycle),
        });
        self.in_point = 0;
        self.point_started = t;
        self.latency_sum_us = 0;
        self.latency.reset();
        self.errors = 0;
        self.expired = 0;
    }
}

/// Runs the evaluation; answers its points and what the disk and CPU
/// quota capacity steps did. The disk step's files are made, and the
/// quota step's cgroup checked, before the publishers start, so a
/// directory that is not there fails the run at once; a failure of the
/// disk step's writes or syncs, or of writing the quota, later stops the
/// step, not the publishers, and is returned when the run ends. The quota
/// is taken off again at the end of the run.
pub async fn run(spec: &FlowSpec) -> Result<FlowRun, LoadError> {
    let cpu_quota = spec.cpu_quota.as_ref().map(CpuQuota::open).transpose()?;
    let disk_hog = spec.disk_hog.as_ref().map(DiskHog::create).transpose()?;
    let started = Instant::now();
    let recorder = Arc::new(Mutex::new(Recorder::new(started, spec.window)));
    let limit = Arc::new(AtomicU64::new(0));
    let done = Arc::new(AtomicBool::new(false));
    let scraper = spec
        .admin
        .map(|admin| tokio::spawn(scrape_limit(admin, Arc::clone(&limit), Arc::clone(&done))));
    let hog = spec.hog_at.map(|at| {
        let (cpu, threads, end) = (spec.hog_cpu, spec.hog_threads, spec.duration);
        let done = Arc::clone(&done);
        std::thread::spawn(move || hog_after(at, end, cpu, threads, started, &done))
    });
    let frames = Arc::new(frames(spec)?);
    let switching = match (&spec.interleave, spec.admin) {
        (Some(interleave), Some(admin)) => {
            let schedule = Schedule::new(interleave.clone());
            switch_to(admin, &schedule.current(), &recorder, &limit).await?;
            let (recorder, limit, duration) =
                (Arc::clone(&recorder), Arc::clone(&limit), spec.duration);
            Some(tokio::spawn(take_turns(
                admin, schedule, started, duration, recorder, limit,
            )))
        }
        (Some(_), None) => {
            return Err(LoadError::Admin {
                what: "interleaving setups",
                detail: "needs the broker's admin listener".into(),
            })
        }
        _ => None,
    };
    // Spawned once nothing above can return early: an early return drops
    // the hog, which removes its files (and the quota step, which has
    // written nothing yet).
    let disk_hog = disk_hog.map(|hog| {
        let (end, done) = (spec.duration, Arc::clone(&done));
        std::thread::spawn(move || {
            let report = hog.run(end, started, &done);
            let removed = hog.remove();
            let report = report?;
            removed.map(|()| report)
        })
    });
    let cpu_quota = cpu_quota.map(|quota| {
        let (end, done) = (spec.duration, Arc::clone(&done));
        std::thread::spawn(move || {
            let report = quota.run(end, started, &done);
            let restored = quota.restore();
            let report = report?;
            restored.map(|()| report)
        })
    });
    let mut tasks = Vec::new();
    for index in 0..spec.publishers {
        let late = spec
            .demand_step_at
            .filter(|_| index >= spec.publishers.div_ceil(4));
        let (spec, frames) = (spec.clone(), Arc::clone(&frames));
        let (recorder, limit) = (Arc::clone(&recorder), Arc::clone(&limit));
        tasks.push(tokio::spawn(async move {
            if let Some(at) = late {
                tokio::time::sleep_until(tokio::time::Instant::from_std(started + at)).await;
            }
            publish(index, &spec, &frames, started, recorder, limit).await
        }));
    }
    let mut first_error = None;
    for task in tasks {
        // A publisher that panicked does not end the run early either: the
        // others and the hog are still waited for.
        let outcome = task.await.unwrap_or_else(|e| {
            Err(LoadError::Io {
                what: "flow publisher",
                source: std::io::Error::other(e.to_string()),
            })
        });
        if let Err(e) = outcome {
            first_error.get_or_insert(e);
        }
    }
    done.store(true, Ordering::Relaxed);
    if let Some(scraper) = scraper {
        let _ = scraper.await;
    }
    if let Some(switching) = switching {
        // Kept, not returned at once: the capacity steps below must still
        // be joined, so that the quota is put back and the files removed.
        let outcome = switching.await.unwrap_or_else(|e| {
            Err(LoadError::Io {
                what: "switching setups",
                source: std::io::Error::other(e.to_string()),
            })
        });
        if let Err(e) = outcome {
            first_error.get_or_insert(e);
        }
    }
    if let Some(hog) = hog {
        let _ = hog.join();
    }
    let disk_hog = joined(disk_hog, "disk capacity step", &mut first_error);
    let cpu_quota = joined(cpu_quota, "CPU quota step", &mut first_error);
    if let Some(e) = first_error {
        return Err(e);
    }
    let mut recorder = lock(&recorder);
    let last_limit = limit.load(Ordering::Relaxed);
    recorder.close_point(last_limit);
    Ok(FlowRun {
        points: std::mem::take(&mut recorder.points),
        disk_hog,
        cpu_quota,
    })
}

/// The recorder, even if a publisher panicked holding it.
fn lock(recorder: &Mutex<Recorder>) -> std::sync::MutexGuard<'_, Recorder> {
    recorder
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// One encoded request per subject.
fn frames(spec: &FlowSpec) -> Result<Vec<Vec<u8>>, LoadError> {
    let batch = Bytes::from(records::batch(spec.batch));
    spec.topics
        .iter()
        .map(|topic| {
            let request = ProduceRequest::default()
                .with_acks(spec.acks)
                .with_timeout_ms(30_000)
                .with_topic_data(vec![TopicProduceData::default()
                    .with_name(topic_name(topic))
                    .with_partition_data(vec![PartitionProduceData::default()
                        .with_index(0)
                        .with_records(Some(batch.clone()))])]);
            request_frame(
                ApiKey::Produce,
                PRODUCE_VERSION,
                0,
                "herald-flow-eval",
                &request,
            )
        })
        .collect()
}

async fn publish(
    index: u32,
    spec: &FlowSpec,
    frames: &[Vec<u8>],
    started: Instant,
    recorder: Arc<Mutex<Recorder>>,
    limit: Arc<AtomicU64>,
) -> Result<(), LoadError> {
    let stream = crate::connect::open(spec.addr, &ConnectOptions::default()).await?;
    let (reader, mut writer) = tokio::io::split(stream);
    let permits = Arc::new(Semaphore::new(spec.in_flight.max(1)));
    let (sent_tx, sent_rx) = mpsc::channel::<Instant>(spec.in_flight.max(1));
    let recorder_for_expiry = Arc::clone(&recorder);
    let answers = tokio::spawn(read_answers(
        reader,
        sent_rx,
        Arc::clone(&permits),
        Answered {
            records: u64::from(spec.batch),
            deadline_us: if spec.offered_rate.is_some() {
                u64::try_from(spec.deadline.as_micros()).unwrap_or(u64::MAX)
            } else {
                u64::MAX
            },
        },
        recorder,
        limit,
    ));
    let layout = Layout {
        subjects: spec.topics.len() as u32,
        subscribers: 1,
        per_subscriber: 1,
        patterns: false,
        choice: spec.choice,
        seed: spec.seed.wrapping_add(u64::from(index)),
    };
    let mut draws = layout
        .draws()
        .map_err(|e| LoadError::io("subject draws", std::io::Error::other(e.to_string())))?;
    let deadline = tokio::time::Instant::from_std(started + spec.duration);
    let mut frame = Vec::new();
    let mut correlation_id = 0i32;
    // Open loop: when this publisher's next request is due.
    let interval = spec.offered_rate.map(|rate| {
        Duration::from_secs_f64(f64::from(spec.batch) * f64::from(spec.publishers) / rate.max(1.0))
    });
    let mut due = tokio::time::Instant::from_std(started)
        + interval.map_or(Duration::ZERO, |i| i * index / spec.publishers.max(1));
    while tokio::time::Instant::now() < deadline {
        let sent_at = match interval {
            None => {
                let Ok(permit) = tokio::time::timeout_at(deadline, permits.acquire()).await else {
                    break;
                };
                permit
                    .map_err(|_| {
                        LoadError::io("in-flight semaphore", std::io::Error::other("closed"))
                    })?
                    .forget();
                Instant::now()
            }
            Some(interval) => {
                if due >= deadline {
                    break;
                }
                tokio::time::sleep_until(due).await;
                let this = due;
                due += interval;
                match permits.try_acquire() {
                    Ok(permit) => permit.forget(),
                    Err(_) => {
                        // The client's buffer (its requests in flight) is
                        // full: refused at once, as a producer whose queue
                        // is full refuses a record.
                        lock(&recorder_for_expiry).expired(1);
                        continue;
                    }
                }
                this.into_std()
            }
        };
        let subject = draws.next().unwrap_or(0) as usize;
        frame.clear();
        frame.extend_from_slice(&frames[subject.min(frames.len() - 1)]);
        correlation_id = correlation_id.wrapping_add(1);
        patch_correlation(&mut frame, correlation_id);
        if sent_tx.send(sent_at).await.is_err() {
            break;
        }
        if let Err(e) = writer.write_all(&frame).await {
            drop(sent_tx);
            let _ = answers.await;
            return Err(LoadError::io("send produce request", e));
        }
    }
    drop(sent_tx);
    match tokio::time::timeout(Duration::from_secs(60), answers).await {
        Ok(joined) => joined.map_err(|e| LoadError::Io {
            what: "flow answers",
            source: std::io::Error::other(e.to_string()),
        })?,
        Err(_) => Err(LoadError::Timeout {
            what: "the last produce answers",
            timeout_ms: 60_000,
        }),
    }
}

/// What each answer on a connection counts for.
#[derive(Debug, Clone, Copy)]
struct Answered {
    /// Records per request.
    records: u64,
    /// An answer later than this (µs after the request was due) timed out.
    deadline_us: u64,
}

async fn read_answers(
    mut reader: ReadHalf<Stream>,
    mut sent: mpsc::Receiver<Instant>,
    permits: Arc<Semaphore>,
    answered: Answered,
    recorder: Arc<Mutex<Recorder>>,
    limit: Arc<AtomicU64>,
) -> Result<(), LoadError> {
    let mut buf = BytesMut::with_capacity(4096);
    while let Some(sent_at) = sent.recv().await {
        let (latency_us, code) = next_answer(&mut reader, &mut buf, sent_at).await?;
        permits.add_permits(1);
        let mut recorder = lock(&recorder);
        if latency_us > answered.deadline_us {
            recorder.expired(1);
            continue;
        }
        recorder.answered(
            answered.records,
            latency_us,
            code.is_none(),
            limit.load(Ordering::Relaxed),
        );
    }
    Ok(())
}

/// Switches the broker to the next setup at the end of every slice until
/// the run's end; each controller's limit at the end of its turn is where
/// its next turn starts.
async fn take_turns(
    admin: SocketAddr,
    mut schedule: Schedule,
    started: Instant,
    duration: Duration,
    recorder: Arc<Mutex<Recorder>>,
    limit: Arc<AtomicU64>,
) -> Result<(), LoadError> {
    let mut turn: u32 = 1;
    loop {
        let at = schedule.slice().saturating_mul(turn);
        // A turn too short to measure anything is not started.
        if at + schedule.slice() / 2 >= duration {
            return Ok(());
        }
        tokio::time::sleep_until(tokio::time::Instant::from_std(started + at)).await;
        let reached = flow_interleave::read_gate(admin).await?.limit;
        let next = schedule.next(reached);
        switch_to(admin, &next, &recorder, &limit).await?;
        turn += 1;
    }
}

/// Switches the broker to `turn`'s setup, and the points with it.
async fn switch_to(
    admin: SocketAddr,
    turn: &Turn,
    recorder: &Mutex<Recorder>,
    limit: &AtomicU64,
) -> Result<(), LoadError> {
    let gate = flow_interleave::switch_gate(admin, turn).await?;
    // The point under way closes with the limit it was measured under.
    lock(recorder).switch(turn, limit.load(Ordering::Relaxed));
    limit.store(u64::from(gate.limit.unwrap_or(0)), Ordering::Relaxed);
    Ok(())
}

/// Reads `herald_kafka_flow_limit_records` from the admin listener every
/// 100 ms until `done`.
async fn scrape_limit(admin: SocketAddr, limit: Arc<AtomicU64>, done: Arc<AtomicBool>) {
    while !done.load(Ordering::Relaxed) {
        if let Ok(Ok(Some(value))) =
            tokio::time::timeout(Duration::from_secs(1), read_limit(admin)).await
        {
            limit.store(value, Ordering::Relaxed);
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

async fn read_limit(admin: SocketAddr) -> std::io::Result<Option<u64>> {
    let mut stream = tokio::net::TcpStream::connect(admin).await?;
    stream
        .write_all(b"GET /metrics HTTP/1.0\r\nHost: herald\r\n\r\n")
        .await?;
    let mut body = String::new();
    stream.read_to_string(&mut body).await?;
    Ok(body
        .lines()
        .find_map(|line| line.strip_prefix("herald_kafka_flow_limit_records "))
        .and_then(|value| value.trim().parse::<f64>().ok())
        .map(|value| value as u64))
}

/// What a capacity step's thread (`what`) came to, once it has ended: its
/// report, or none with its error (or its panic) kept in `first_error`
/// unless an earlier one is there.
fn joined<T>(
    step: Option<std::thread::JoinHandle<Result<T, LoadError>>>,
    what: &'static str,
    first_error: &mut Option<LoadError>,
) -> Option<T> {
    match step?.join() {
        Ok(Ok(report)) => Some(report),
        Ok(Err(e)) => {
            first_error.get_or_insert(e);
            None
        }
        Err(_) => {
            first_error.get_or_insert(LoadError::io(
                what,
                std::io::Error::other("its thread panicked"),
            ));
            None
        }
    }
}

/// From `at` to `end` (since `started`), `threads` busy threads pinned to
/// `cpu`: the broker pinned there keeps about half of its core.
fn hog_after(
    at: Duration,
    end: Duration,
    cpu: usize,
    threads: usize,
    started: Instant,
    done: &AtomicBool,
) {
    if let Some(wait) = (started + at).checked_duration_since(Instant::now()) {
        std::thread::sleep(wait);
    }
    std::thread::scope(|scope| {
        for _ in 0..threads.max(1) {
            scope.spawn(|| {
                pin_to(cpu);
                let mut x = 0u64;
                while started.elapsed() < end && !done.load(Ordering::Relaxed) {
                    x = std::hint::black_box(x.wrapping_mul(6364136223846793005).wrapping_add(1));
                }
            });
        }
    });
}

fn pin_to(cpu: usize) {
    // SAFETY: a zeroed cpu_set_t is a valid empty set; CPU_SET writes in
    // bounds for cpu < CPU_SETSIZE, and sched_setaffinity(0) changes only
    // this thread.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        if cpu < libc::CPU_SETSIZE as usize {
            libc::CPU_SET(cpu, &mut set);
            libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_point_closes_every_n_records_with_its_figures() {
        let mut recorder = Recorder::new(Instant::now(), 10);
        recorder.answered(5, 1000, true, 64);
        recorder.answered(5, 3000, false, 64);
        assert!(recorder.points.is_empty());
        recorder.answered(5, 3000, true, 80);
        let point = recorder.points.first().expect("a point after 10 records");
        assert_eq!((point.published, point.errors, point.limit), (10, 1, 80));
        assert!((point.latency_ms - 2.0).abs() < 1e-9, "{point:?}");
    }

    #[test]
    fn the_last_point_reports_what_expired() {
        let mut recorder = Recorder::new(Instant::now(), 10);
        recorder.answered(5, 1000, true, 0);
        recorder.expired(3);
        recorder.close_point(7);
        let point = recorder.points.first().expect("a closing point");
        assert_eq!((point.published, point.expired, point.limit), (5, 3, 7));
        recorder.close_point(7);
        assert_eq!(recorder.points.len(), 1, "nothing new, no point");
    }
}
