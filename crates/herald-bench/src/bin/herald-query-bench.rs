//! `herald-query-bench`: how fast online queries index a topic. Records
//! are JSON values (`{"user": …, "region": …, "total": …, "latency_ms": …}`)
//! with keys drawn from 1M ids on a skewed distribution and two headers,
//! in batches of 1,024, uncompressed and lz4. For each codec it times, in
//! the same process, taking turns, in records per second per core (thread
//! CPU time):
//!
//! - **scan**: decoding every record and touching its fields, the floor
//!   any reader of the log pays;
//! - **light**: the issue's workload as written, ten filters over the
//!   key, headers and timestamp and four aggregates among them (count,
//!   distinct keys, first and last timestamp) with one trigger, fed
//!   through `herald_query::feed_batches`, the indexer's own loop (one
//!   decode for all ten);
//! - **metadata**: ten queries on the same filters, each computing all
//!   four aggregates and holding a trigger (forty aggregates);
//! - **json**: those ten queries with half their filters and two of
//!   their aggregates on JSON fields of the value (sum and max).
//!
//! With `--broker` it also times the real thing: a broker over a
//! temporary directory holding the records, the ten queries registered,
//! and the CPU time of the indexer thread until every query's lag is 0.
//! Run it through `scripts/bench-queries.sh`.

use std::process::ExitCode;
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context as _};
use clap::Parser;
use herald_bench::threads::thread_cpu;
use herald_broker::{Acks, Broker, BrokerConfig};
use herald_query::{feed_batches, Follower, QuerySpec, QueryState};
use herald_records::{batches, stamp, BatchBuilder, Compression, RecordFields};

/// Times the query indexer against a plain scan.
#[derive(Parser, Debug)]
#[command(name = "herald-query-bench", version)]
struct Args {
    /// Repetitions of each measurement (the median is reported).
    #[arg(long, default_value_t = 5)]
    reps: usize,
    /// Records indexed per measurement.
    #[arg(long, default_value_t = 2_000_000)]
    records: u64,
    /// Also time a broker's indexer thread over a real log.
    #[arg(long)]
    broker: bool,
    /// Run only one workload (for a profiler): the issue's ten filters
    /// and four aggregates, ten queries of four aggregates on metadata, or
    /// those half on JSON; all by default.
    #[arg(long, value_parser = ["light", "metadata", "json"])]
    only: Option<String>,
}

const PER_BATCH: u64 = 1024;
const IDS: u64 = 1_000_000;
const REGIONS: [&str; 4] = ["eu", "us", "ap", "sa"];
const BASE_TS: i64 = 1_700_000_000_000;

/// A key id in `0..IDS`, skewed: the square of a uniform draw puts a
/// quarter of the records on the first 1/16 of the ids.
fn skewed_id(state: &mut u64) -> u64 {
    *state ^= *state << 13;
    *state ^= *state >> 7;
    *state ^= *state << 17;
    let u = (*state >> 11) as f64 / (1u64 << 53) as f64;
    ((u * u) * IDS as f64) as u64
}

/// Stored batches holding `records` records from offset 0, one record
/// per millisecond.
fn build_log(codec: Compression, records: u64) -> anyhow::Result<Vec<u8>> {
    let mut rng = 0x9e37_79b9_7f4a_7c15u64;
    let mut log = Vec::new();
    let mut offset = 0;
    while offset < records {
        let count = PER_BATCH.min(records - offset);
        let mut builder = BatchBuilder::new(BASE_TS + offset as i64);
        for i in 0..count {
            let n = offset + i;
            let id = skewed_id(&mut rng);
            let key = format!("user-{id:07}");
            let region = REGIONS[(id % 4) as usize];
            let value = format!(
                r#"{{"user":"{key}","region":"{region}","total":{}.{:02},"latency_ms":{},"status":"ok"}}"#,
                id % 500,
                n % 100,
                n % 250
            );
            let kind: &[u8] = if n % 10 == 0 { b"refund" } else { b"order" };
            let headers: [(&[u8], Option<&[u8]>); 2] =
                [(b"type", Some(kind)), (b"region", Some(region.as_bytes()))];
            builder.push(RecordFields {
                timestamp_ms: BASE_TS + n as i64,
                key: Some(key.as_bytes()),
                value: Some(value.as_bytes()),
                headers: &headers,
            });
        }
        let mut batch = builder.finish_with(codec)?;
        stamp(&mut batch, offset, 0);
        log.extend_from_slice(&batch);
        offset += count;
    }
    Ok(log)
}

/// What the queries of a measurement compute.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Workload {
    /// The issue's figure as written: ten filters on metadata and four
    /// aggregates among them (count, distinct keys, first and last
    /// timestamp, one on each of four queries), one trigger.
    Light,
    /// Ten queries on metadata, each with four aggregates and a trigger:
    /// forty aggregates.
    Metadata,
    /// As `Metadata`, half the filters and two aggregates of each query on
    /// JSON fields of the value.
    Json,
}

impl Workload {
    const ALL: [Workload; 3] = [Workload::Light, Workload::Metadata, Workload::Json];

    fn name(self) -> &'static str {
        match self {
            Workload::Light => "light",
            Workload::Metadata => "metadata",
            Workload::Json => "json",
        }
    }
}

/// The ten queries of `workload`.
fn specs(workload: Workload, topic: &str) -> anyhow::Result<Vec<QuerySpec>> {
    let json = workload == Workload::Json;
    let mid = BASE_TS + 500_000;
    let metadata = [
        r#"key starts_with "user-00""#.to_owned(),
        r#"header.type == "refund""#.to_owned(),
        r#"header.region in ("eu", "ap")"#.to_owned(),
        format!("timestamp >= {mid}"),
        r#"key == "user-0000001""#.to_owned(),
        r#"header.region == "us" and header.type == "order""#.to_owned(),
        r#"not (header.type == "order")"#.to_owned(),
        format!(r#"timestamp < {mid} or header.region == "sa""#),
        r#"key starts_with "user-09" and exists header.type"#.to_owned(),
        r#"header.type != "refund""#.to_owned(),
    ];
    let on_values = [
        "value.total > 250".to_owned(),
        r#"value.region == "eu""#.to_owned(),
        "value.latency_ms >= 200".to_owned(),
        r#"value.status == "ok" and value.total < 10"#.to_owned(),
        r#"value.user starts_with "user-00""#.to_owned(),
    ];
    let aggregates = if json {
        serde_json::json!([
            {"name": "n", "function": "count"},
            {"name": "revenue", "function": "sum", "field": "value.total"},
            {"name": "slowest", "function": "max", "field": "value.latency_ms"},
            {"name": "users", "function": "distinct", "field": "key"}
        ])
    } else {
        serde_json::json!([
            {"name": "n", "function": "count"},
            {"name": "first", "function": "min", "field": "timestamp"},
            {"name": "last", "function": "max", "field": "timestamp"},
            {"name": "users", "function": "distinct", "field": "key"}
        ])
    };
    let light = [
        serde_json::json!([{"name": "n", "function": "count"}]),
        serde_json::json!([{"name": "users", "function": "distinct", "field": "key"}]),
        serde_json::json!([{"name": "first", "function": "min", "field": "timestamp"}]),
        serde_json::json!([{"name": "last", "function": "max", "field": "timestamp"}]),
    ];
    (0..10)
        .map(|i| {
            let filter = if json && i % 2 == 1 {
                on_values[i / 2].clone()
            } else {
                metadata[i].clone()
            };
            let many = serde_json::json!([{"name": "many", "aggregate": "n", "op": ">=",
                                           "threshold": 1e12, "window_ms": 60_000}]);
            let (aggregates, triggers) = match workload {
                Workload::Light if i == 0 => (light[0].clone(), many),
                Workload::Light => (
                    light
                        .get(i)
                        .cloned()
                        .unwrap_or_else(|| serde_json::json!([])),
                    serde_json::json!([]),
                ),
                _ => (aggregates.clone(), many),
            };
            serde_json::from_value(serde_json::json!({
                "id": format!("q{i}"),
                "topic": topic,
                "filter": filter,
                "bucket_ms": 60_000,
                "aggregates": aggregates,
                "triggers": triggers
            }))
            .with_context(|| format!("query {i}"))
        })
        .collect()
}

fn states(specs: &[QuerySpec]) -> anyhow::Result<Vec<QueryState>> {
    specs
        .iter()
        .map(|s| Ok(QueryState::new(s.clone().compile()?)))
        .collect()
}

fn scan(run: &[u8], scratch: &mut Vec<u8>) -> anyhow::Result<u64> {
    herald_bench::read::decode_pass(run, scratch).map_err(|e| anyhow::anyhow!("{e}"))
}

/// The indexer's loop over the whole log for every query; returns the
/// records each query was offered.
fn index(log: &[u8], states: &mut [QueryState], scratch: &mut Vec<u8>) -> u64 {
    let mut followers: Vec<Follower<'_>> = states.iter_mut().map(|s| Follower::new(0, s)).collect();
    feed_batches(log, &mut followers, scratch);
    followers.first().map_or(0, |f| f.records)
}

fn median(mut values: Vec<f64>) -> f64 {
    herald_bench::report::median(&mut values)
}

fn rate(records: u64, cpu: Duration) -> f64 {
    records as f64 / cpu.as_secs_f64() / 1e6
}

fn in_process(args: &Args) -> anyhow::Result<()> {
    println!("| codec | scan (M records/s/core) | 10 filters, 4 aggregates | 10 queries x 4 aggregates, metadata | 10 queries x 4 aggregates, half on JSON fields | light / scan | metadata / scan | json / scan |");
    println!("|---|---|---|---|---|---|---|---|");
    let only = args.only.as_deref();
    for codec in [Compression::None, Compression::Lz4] {
        let log = build_log(codec, args.records)?;
        let workloads = Workload::ALL
            .iter()
            .map(|&w| Ok((w, specs(w, "t")?)))
            .collect::<anyhow::Result<Vec<_>>>()?;
        let mut scratch = Vec::new();
        let mut floor = Vec::new();
        let mut rates = vec![Vec::new(); workloads.len()];
        for _ in 0..args.reps {
            let started = thread_cpu();
            let read = scan(&log, &mut scratch)?;
            floor.push(rate(read, thread_cpu() - started));
            for ((workload, specs), rates) in workloads.iter().zip(&mut rates) {
                if only.is_some_and(|o| o != workload.name()) {
                    rates.push(f64::NAN);
                    continue;
                }
                let mut fresh = states(specs)?;
                let started = thread_cpu();
                let read = index(&log, &mut fresh, &mut scratch);
                rates.push(rate(read, thread_cpu() - started));
                std::hint::black_box(&fresh);
            }
        }
        let floor = median(floor);
        let rates: Vec<f64> = rates.into_iter().map(median).collect();
        println!(
            "| {codec:?} | {floor:.1} | {:.2} | {:.2} | {:.2} | {:.2} | {:.2} | {:.2} |",
            rates[0],
            rates[1],
            rates[2],
            rates[0] / floor,
            rates[1] / floor,
            rates[2] / floor
        );
    }
    Ok(())
}

/// CPU time of this process's thread called `name`, from the
/// scheduler's own count (nanoseconds on a CPU).
fn named_thread_cpu(name: &str) -> anyhow::Result<Duration> {
    for task in std::fs::read_dir("/proc/self/task")? {
        let path = task?.path();
        let comm = std::fs::read_to_string(path.join("comm")).unwrap_or_default();
        if comm.trim() == name {
            let schedstat = std::fs::read_to_string(path.join("schedstat"))?;
            let ns: u64 = schedstat
                .split_whitespace()
                .next()
                .ok_or_else(|| anyhow!("empty schedstat"))?
                .parse()?;
            return Ok(Duration::from_nanos(ns));
        }
    }
    bail!("no thread called {name}")
}

/// The broker's indexer thread over a real log: records per second of
/// its CPU time, and of wall time, until all ten queries are caught up.
async fn through_broker(
    codec: Compression,
    args: &Args,
    workload: Workload,
) -> anyhow::Result<(f64, f64)> {
    let dir = tempfile::tempdir()?;
    let broker = Broker::open(BrokerConfig::new(dir.path()))?;
    broker.create_topic("orders", Some(1), &[], false)?;
    let partition = broker
        .topic("orders")
        .and_then(|t| t.partition(0))
        .ok_or_else(|| anyhow!("no partition"))?;
    let log = build_log(codec, args.records)?;
    for batch in batches(&log) {
        partition.append(batch?, Acks::Leader).await?;
    }
    // The indexer thread starts with the first query: all its CPU time is
    // this run's.
    let started = Instant::now();
    for spec in specs(workload, "orders")? {
        broker.register_query(spec)?;
    }
    let deadline = started + Duration::from_secs(600);
    while broker.queries().list().iter().any(|q| q.lag() > 0) {
        if Instant::now() > deadline {
            bail!("the queries did not catch up in 10 minutes");
        }
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    let wall = started.elapsed();
    let cpu = named_thread_cpu("herald-queries")?;
    broker.close()?;
    Ok((rate(args.records, cpu), rate(args.records, wall)))
}

fn broker_runs(args: &Args) -> anyhow::Result<()> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()?;
    println!();
    println!(
        "| codec | workload | broker indexer thread (M records/s/core) | wall (M records/s) |"
    );
    println!("|---|---|---|---|");
    for codec in [Compression::None, Compression::Lz4] {
        for workload in Workload::ALL {
            if args.only.as_deref().is_some_and(|o| o != workload.name()) {
                continue;
            }
            let (mut cpu, mut wall) = (Vec::new(), Vec::new());
            for _ in 0..args.reps {
                let (c, w) = runtime.block_on(through_broker(codec, args, workload))?;
                cpu.push(c);
                wall.push(w);
            }
            println!(
                "| {codec:?} | {} | {:.2} | {:.2} |",
                workload.name(),
                median(cpu),
                median(wall)
            );
        }
    }
    Ok(())
}

fn main() -> ExitCode {
    let args = Args::parse();
    if args.reps == 0 || args.records == 0 {
        eprintln!("herald-query-bench: --reps and --records must be positive");
        return ExitCode::from(2);
    }
    let result = in_process(&args).and_then(|()| {
        if args.broker {
            broker_runs(&args)
        } else {
            Ok(())
        }
    });
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("herald-query-bench: {e:#}");
            ExitCode::FAILURE
        }
    }
}
