//! A whole suite against one broker: every produce point, the consume
//! points over a filled topic, and the latency points; each run on a fresh
//! topic, each bracketed by broker CPU samples, each written as a row the
//! moment it ends. A failed run becomes a row with a note, not an abort.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use crate::consume::{self, ConsumeSpec};
use crate::plan::{acks_name, Plan};
use crate::produce::{self, ProduceSpec};
use crate::progress::{spawn_printer, Progress};
use crate::row::{Kind, Row};
use crate::{admin, cpu, histogram, latency, LoadError};

/// Attempts of the readiness probe, 250 ms apart.
const READY_ATTEMPTS: u32 = 40;

/// Before each measured run the broker must have used less than
/// `SETTLE_MAX_CORES` over a `SETTLE_WINDOW`, so that the previous run's
/// background work (freeing a deleted topic, garbage collection) is not
/// charged to this one; after `SETTLE_TIMEOUT` the run goes ahead anyway.
const SETTLE_WINDOW: Duration = Duration::from_millis(300);
/// See [`SETTLE_WINDOW`]; an idle JVM broker stays well below it.
const SETTLE_MAX_CORES: f64 = 0.05;
/// See [`SETTLE_WINDOW`].
const SETTLE_TIMEOUT: Duration = Duration::from_secs(20);

/// One suite against one broker.
#[derive(Debug, Clone)]
pub struct Suite {
    /// The broker.
    pub addr: SocketAddr,
    /// Its name in the rows ("herald", "kafka").
    pub broker: String,
    /// Its PID, for CPU accounting.
    pub broker_pid: Option<u32>,
    /// What to measure.
    pub plan: Plan,
    /// Rows of a reference broker: latency runs offer the same load as
    /// its latency rows did.
    pub reference: Vec<Row>,
    /// The JSON-lines file rows are appended to.
    pub out: PathBuf,
}

impl Suite {
    /// Runs every point of the plan; returns the rows written.
    pub async fn run(&self) -> Result<Vec<Row>, LoadError> {
        let mut out = OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.out)
            .map_err(|e| LoadError::io("open results file", e))?;
        let mut rows = Vec::new();
        self.warm_up().await;
        for &batch in &self.plan.batches {
            for &acks in &self.plan.acks {
                for &publishers in &self.plan.publishers {
                    let mut runs = Vec::new();
                    for _ in 0..self.plan.repeats.max(1) {
                        runs.push(self.produce_point(batch, publishers, acks).await);
                    }
                    if let Some(row) = Row::median_of(runs) {
                        emit(&mut out, &mut rows, row)?;
                    }
                }
            }
            for row in self.consume_points(batch).await {
                emit(&mut out, &mut rows, row)?;
            }
        }
        for &batch in &self.plan.latency_batches {
            let row = self.latency_point(batch, &rows).await;
            emit(&mut out, &mut rows, row)?;
        }
        Ok(rows)
    }

    /// Unrecorded produce and consume at batch 1024, so that a JIT-compiled
    /// broker is measured warm, as a long-running one would be.
    async fn warm_up(&self) {
        let topic = self.topic("warmup", 1024, 1);
        let mut spec = self.spec(&topic, 1024, 1, 1);
        spec.duration = self.plan.warm_up;
        let label = format!("{} warm-up", self.broker);
        let result = async {
            self.fresh_topic(&topic).await?;
            self.measured(&label, |p| async move { produce::run(&spec, p).await })
                .await?;
            let read = ConsumeSpec {
                addr: self.addr,
                topic: topic.clone(),
                subscribers: 1,
                max_bytes: self.plan.fetch_max_bytes,
                duration: self.plan.warm_up,
                min_duration: self.plan.warm_up,
                records_max: u64::MAX,
                security: Default::default(),
            };
            self.measured(&label, |p| async move { consume::run(&read, p).await })
                .await
        }
        .await;
        if let Err(e) = result {
            eprintln!("  warm-up failed: {e}");
        }
        let _ = admin::delete_topic(self.addr, &topic).await;
    }

    fn topic(&self, what: &str, batch: u32, clients: u32) -> String {
        format!(
            "wire-{}-{what}-b{batch}-n{clients}-{}",
            self.broker,
            crate::clock::now_ns()
        )
    }

    fn spec(&self, topic: &str, batch: u32, publishers: u32, acks: i16) -> ProduceSpec {
        ProduceSpec {
            addr: self.addr,
            topic: topic.to_owned(),
            batch,
            publishers,
            acks,
            in_flight: self.plan.in_flight,
            duration: self.plan.produce_duration,
            records_max: self.plan.produce_records_max,
            rate: None,
            stamp: false,
            security: Default::default(),
        }
    }

    async fn produce_point(&self, batch: u32, publishers: u32, acks: i16) -> Row {
        let mut row = Row::new(Kind::Produce, &self.broker, batch, publishers);
        row.acks = Some(acks_name(acks).to_owned());
        let topic = self.topic("produce", batch, publishers);
        let spec = self.spec(&topic, batch, publishers, acks);
        let label = format!(
            "{} produce b={batch} p={publishers} acks={}",
            self.broker,
            acks_name(acks)
        );
        let result = async {
            self.fresh_topic(&topic).await?;
            self.measured(&label, |p| async move { produce::run(&spec, p).await })
                .await
        }
        .await;
        let _ = admin::delete_topic(self.addr, &topic).await;
        match result {
            Ok((outcome, cpu)) => {
                row = row.with_totals(outcome.records, outcome.bytes, outcome.secs);
                if let Some((p50, p99, p999)) = histogram::percentiles(&outcome.latency_us) {
                    (row.p50_us, row.p99_us, row.p999_us) = (Some(p50), Some(p99), Some(p999));
                }
                if outcome.errors > 0 {
                    row.note = Some(format!(
                        "{} requests failed, last error code {:?}",
                        outcome.errors, outcome.last_error
                    ));
                }
                with_cpu(row, cpu)
            }
            Err(e) => failed(row, &e),
        }
    }

    async fn consume_points(&self, batch: u32) -> Vec<Row> {
        let topic = self.topic("consume", batch, 0);
        let mut fill = self.spec(&topic, batch, 1, 1);
        fill.duration = self.plan.fill_duration;
        fill.records_max = self.plan.fill_records(batch);
        let label = format!("{} fill b={batch}", self.broker);
        let filled = async {
            self.fresh_topic(&topic).await?;
            self.measured(&label, |p| async move { produce::run(&fill, p).await })
                .await
        }
        .await;
        let mut rows = Vec::new();
        for &subscribers in &self.plan.subscribers {
            let row = Row::new(Kind::Consume, &self.broker, batch, subscribers);
            if let Err(e) = &filled {
                rows.push(failed(row, e));
                continue;
            }
            let spec = ConsumeSpec {
                addr: self.addr,
                topic: topic.clone(),
                subscribers,
                max_bytes: self.plan.fetch_max_bytes,
                duration: self.plan.consume_duration,
                min_duration: self.plan.consume_min_duration,
                records_max: u64::MAX,
                security: Default::default(),
            };
            let label = format!("{} consume b={batch} c={subscribers}", self.broker);
            let mut runs = Vec::new();
            for _ in 0..self.plan.repeats.max(1) {
                let spec = spec.clone();
                let result = self
                    .measured(&label, |p| async move { consume::run(&spec, p).await })
                    .await;
                runs.push(match result {
                    Ok((outcome, cpu)) => {
                        let run =
                            row.clone()
                                .with_totals(outcome.records, outcome.bytes, outcome.secs);
                        with_cpu(run, cpu)
                    }
                    Err(e) => failed(row.clone(), &e),
                });
            }
            if let Some(median) = Row::median_of(runs) {
                rows.push(median);
            }
        }
        let _ = admin::delete_topic(self.addr, &topic).await;
        rows
    }

    async fn latency_point(&self, batch: u32, own: &[Row]) -> Row {
        let mut row = Row::new(Kind::Latency, &self.broker, batch, 1);
        row.acks = Some("1".to_owned());
        let Some(rate) = self.offered_rate(batch, own) else {
            row.note = Some("no produce figure to derive the offered load from".to_owned());
            return row;
        };
        row.offered_msgs_per_s = Some(rate);
        let topic = self.topic("latency", batch, 1);
        let mut spec = self.spec(&topic, batch, 1, 1);
        spec.rate = Some(rate);
        spec.duration = self.plan.latency_duration;
        let label = format!("{} latency b={batch} rate={rate:.0}/s", self.broker);
        let result = async {
            self.fresh_topic(&topic).await?;
            self.measured(&label, |p| async move { latency::run(&spec, p).await })
                .await
        }
        .await;
        let _ = admin::delete_topic(self.addr, &topic).await;
        match result {
            Ok((outcome, cpu)) => {
                let produced = &outcome.produce;
                row = row.with_totals(produced.records, produced.bytes, produced.secs);
                if let Some((p50, p99, p999)) = histogram::percentiles(&produced.latency_us) {
                    (row.p50_us, row.p99_us, row.p999_us) = (Some(p50), Some(p99), Some(p999));
                }
                if let Some((p50, p99, p999)) = histogram::percentiles(&outcome.end_to_end_us) {
                    (row.e2e_p50_us, row.e2e_p99_us, row.e2e_p999_us) =
                        (Some(p50), Some(p99), Some(p999));
                }
                with_cpu(row, cpu)
            }
            Err(e) => failed(row, &e),
        }
    }

    /// The reference broker's offered load for `batch`, or else half of
    /// this broker's own full-speed rate with one publisher and acks=1.
    fn offered_rate(&self, batch: u32, own: &[Row]) -> Option<f64> {
        let reference = self
            .reference
            .iter()
            .find(|r| r.kind == Kind::Latency && r.batch == batch)
            .and_then(|r| r.offered_msgs_per_s);
        reference.or_else(|| {
            own.iter()
                .find(|r| {
                    r.kind == Kind::Produce
                        && r.batch == batch
                        && r.clients == 1
                        && r.acks.as_deref() == Some("1")
                        && r.msgs_per_s > 0.0
                })
                .map(|r| r.msgs_per_s / 2.0)
        })
    }

    /// Creates `topic` and waits until it takes a write.
    async fn fresh_topic(&self, topic: &str) -> Result<(), LoadError> {
        admin::create_topic(self.addr, topic).await?;
        let mut probe = self.spec(topic, 1, 1, 1);
        probe.records_max = 1;
        probe.duration = Duration::from_secs(2);
        for _ in 0..READY_ATTEMPTS {
            let outcome = produce::run(&probe, Arc::new(Progress::default())).await?;
            if outcome.records > 0 {
                return Ok(());
            }
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
        Err(LoadError::Timeout {
            what: "the new topic to take a write",
            timeout_ms: u64::from(READY_ATTEMPTS) * 250,
        })
    }

    /// Runs `work` with progress printed and the broker's CPU sampled
    /// around it: (its outcome, broker CPU ns and cores).
    async fn measured<T, F, Fut>(
        &self,
        label: &str,
        work: F,
    ) -> Result<(T, Option<(f64, f64)>), LoadError>
    where
        F: FnOnce(Arc<Progress>) -> Fut,
        Fut: std::future::Future<Output = Result<T, LoadError>>,
    {
        if let Some(pid) = self.broker_pid {
            match cpu::settle(pid, SETTLE_WINDOW, SETTLE_MAX_CORES, SETTLE_TIMEOUT).await {
                Some(settled) if !settled.quiet => eprintln!(
                    "  {label}: the broker was still busy after {:.1} s; measuring anyway",
                    settled.waited.as_secs_f64()
                ),
                Some(_) => {}
                None => eprintln!(
                    "  {label}: cannot read the CPU time of PID {pid} (has the broker exited?)"
                ),
            }
        }
        let progress = Arc::new(Progress::default());
        let printer = spawn_printer(label.to_owned(), progress.clone());
        let before = self.broker_pid.and_then(cpu::sample);
        let result = work(progress.clone()).await;
        let after = self.broker_pid.and_then(cpu::sample);
        progress.finish();
        printer.abort();
        let used = before.zip(after).map(|(b, a)| cpu::between(b, a));
        result.map(|outcome| (outcome, used))
    }
}

fn with_cpu(mut row: Row, cpu: Option<(f64, f64)>) -> Row {
    if let Some((cpu_ns, cores)) = cpu {
        row.broker_cores = Some(cores);
        if row.records > 0 {
            row.broker_cpu_ns_per_msg = Some(cpu_ns / row.records as f64);
        }
    }
    row
}

fn failed(mut row: Row, error: &LoadError) -> Row {
    row.note = Some(format!("failed: {error}"));
    row
}

fn emit(out: &mut File, rows: &mut Vec<Row>, row: Row) -> Result<(), LoadError> {
    eprintln!("{}", row.summary());
    if let Some(note) = &row.note {
        eprintln!("  note: {note}");
    }
    let line = serde_json::to_string(&row).map_err(|e| LoadError::Results {
        line: rows.len() + 1,
        detail: e.to_string(),
    })?;
    writeln!(out, "{line}").map_err(|e| LoadError::io("write results file", e))?;
    rows.push(row);
    Ok(())
}
