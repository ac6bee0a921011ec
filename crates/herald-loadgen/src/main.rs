//! `herald-loadgen`: the wire benchmark's load generator and report writer.
//!
//! - `suite`: every produce, consume and latency point against one broker,
//!   rows appended to a JSON-lines file;
//! - `loopback`: the TCP bound, one row;
//! - `floor`: the kernel floors of produce and consume, two rows;
//! - `report`: rows of both brokers to `wire.md`, `wire.csv`, `wire.png`;
//! - `push ...`: the push benchmarks (`push_cli`).

mod push_cli;

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::Context;
use clap::{Parser, Subcommand};
use herald_loadgen::floor::{self, Floor};
use herald_loadgen::loopback;
use herald_loadgen::plan::Plan;
use herald_loadgen::report::{chart, csv, markdown, read_rows};
use herald_loadgen::row::{Kind, Row};
use herald_loadgen::suite::Suite;

#[derive(Parser)]
#[command(about = "Kafka-protocol load generator: herald against Apache Kafka")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Runs the whole plan against one broker.
    Suite {
        /// The broker's Kafka listener.
        #[arg(long)]
        bootstrap: SocketAddr,
        /// Its name in the rows: herald or kafka.
        #[arg(long)]
        broker: String,
        /// Its PID, for CPU accounting.
        #[arg(long)]
        broker_pid: Option<u32>,
        /// The smoke-test plan.
        #[arg(long)]
        quick: bool,
        /// Rows of the reference broker: latency runs offer its load.
        #[arg(long)]
        reference: Option<PathBuf>,
        /// Runtime worker threads; 1 keeps the client on one core.
        #[arg(long, default_value_t = 1)]
        threads: usize,
        /// JSON-lines file the rows are appended to.
        #[arg(long)]
        out: PathBuf,
        /// Only these batch sizes (comma-separated), to study a few points.
        #[arg(long, value_delimiter = ',')]
        batches: Option<Vec<u32>>,
        /// Only these publisher counts.
        #[arg(long, value_delimiter = ',')]
        publishers: Option<Vec<u32>>,
        /// Only these subscriber counts (an empty value: no consume points).
        #[arg(long, value_delimiter = ',', num_args = 0..)]
        subscribers: Option<Vec<u32>>,
        /// Only these acks (1 or -1).
        #[arg(long, value_delimiter = ',', allow_negative_numbers = true)]
        acks: Option<Vec<i16>>,
        /// Latency batch sizes (an empty value: no latency points).
        #[arg(long, value_delimiter = ',', num_args = 0..)]
        latency_batches: Option<Vec<u32>>,
        /// Seconds of each produce run.
        #[arg(long)]
        produce_secs: Option<f64>,
        /// Runs of every produce and consume point (the median is kept).
        #[arg(long)]
        repeats: Option<u32>,
    },
    /// Measures one loopback TCP stream and appends its row.
    Loopback {
        /// How long to measure, in seconds.
        #[arg(long, default_value_t = 2.0)]
        secs: f64,
        /// Runs; the median is kept (one short run can be an outlier on a
        /// shared machine).
        #[arg(long, default_value_t = 3)]
        repeats: u32,
        /// JSON-lines file the row is appended to.
        #[arg(long)]
        out: PathBuf,
    },
    /// Measures the kernel floors (no broker) and appends their two rows.
    Floor {
        /// Where the scratch files go: tmpfs, like the brokers' data.
        #[arg(long, default_value = "/dev/shm")]
        dir: PathBuf,
        /// How long to measure each floor, in seconds.
        #[arg(long, default_value_t = 2.0)]
        secs: f64,
        /// Runs of each floor; the median is kept.
        #[arg(long, default_value_t = 3)]
        repeats: u32,
        /// JSON-lines file the rows are appended to.
        #[arg(long)]
        out: PathBuf,
    },
    /// Push delivery benchmarks against herald's push listener.
    #[command(subcommand)]
    Push(push_cli::PushCommand),
    /// One run of the flow-control evaluation (scripts/bench-flow.sh).
    Flow(herald_loadgen::flow_cli::FlowArgs),
    /// What TLS, SASL and ACLs cost (scripts/bench-security.sh).
    #[command(subcommand)]
    Security(herald_loadgen::security_cli::SecurityCommand),
    /// Writes wire.md, wire.csv and wire.png from result files.
    Report {
        /// JSON-lines result files.
        #[arg(long, required = true, num_args = 1..)]
        results: Vec<PathBuf>,
        /// Where the report goes.
        #[arg(long)]
        out_dir: PathBuf,
        /// The command that reproduces the report, quoted in it.
        #[arg(long, default_value = "scripts/bench-wire.sh")]
        command: String,
        /// TrueType font for the chart.
        #[arg(long, default_value = chart::FONT_PATH)]
        font: PathBuf,
    },
}

fn main() -> anyhow::Result<()> {
    match Cli::parse().command {
        Command::Suite {
            bootstrap,
            broker,
            broker_pid,
            quick,
            reference,
            threads,
            out,
            batches,
            publishers,
            subscribers,
            acks,
            latency_batches,
            produce_secs,
            repeats,
        } => {
            let mut plan = if quick { Plan::quick() } else { Plan::full() };
            plan.batches = batches.unwrap_or(plan.batches);
            plan.publishers = publishers.unwrap_or(plan.publishers);
            plan.subscribers = subscribers.unwrap_or(plan.subscribers);
            plan.acks = acks.unwrap_or(plan.acks);
            plan.latency_batches = latency_batches.unwrap_or(plan.latency_batches);
            plan.repeats = repeats.unwrap_or(plan.repeats);
            if let Some(secs) = produce_secs {
                plan.produce_duration = Duration::from_secs_f64(secs);
            }
            let reference = match reference {
                Some(path) => {
                    read_rows(&path).with_context(|| format!("reading {}", path.display()))?
                }
                None => Vec::new(),
            };
            let suite = Suite {
                addr: bootstrap,
                broker,
                broker_pid,
                plan,
                reference,
                out,
            };
            let runtime = if threads <= 1 {
                tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()?
            } else {
                tokio::runtime::Builder::new_multi_thread()
                    .worker_threads(threads)
                    .enable_all()
                    .build()?
            };
            let rows = runtime.block_on(suite.run())?;
            eprintln!("{} rows written to {}", rows.len(), suite.out.display());
        }
        Command::Loopback { secs, repeats, out } => {
            let mut runs = Vec::new();
            for _ in 0..repeats.max(1) {
                let bytes_per_s = loopback::measure(Duration::from_secs_f64(secs))?;
                let mut row = Row::new(Kind::Loopback, "loopback", 0, 1);
                row.secs = secs;
                row.mb_per_s = bytes_per_s / 1e6;
                eprintln!("loopback TCP: {:.0} MB/s", row.mb_per_s);
                runs.push(row);
            }
            let row = median_by_bandwidth(runs).context("no loopback run")?;
            eprintln!("loopback TCP, median: {:.0} MB/s", row.mb_per_s);
            append_rows(&out, &[row])?;
        }
        Command::Push(command) => push_cli::run(command)?,
        Command::Security(command) => herald_loadgen::security_cli::run(command)?,
        Command::Flow(args) => herald_loadgen::flow_cli::run(args)?,
        Command::Floor {
            dir,
            secs,
            repeats,
            out,
        } => {
            let duration = Duration::from_secs_f64(secs);
            let (mut stores, mut sends) = (Vec::new(), Vec::new());
            for _ in 0..repeats.max(1) {
                let store = floor::store_floor(&dir, duration).context("store floor")?;
                stores.push(floor_row("store floor", &store, Kind::StoreFloor));
                let send = floor::send_floor(&dir, duration).context("send floor")?;
                sends.push(floor_row("send floor", &send, Kind::SendFloor));
            }
            let store = median_by_bandwidth(stores).context("no store floor run")?;
            let send = median_by_bandwidth(sends).context("no send floor run")?;
            eprintln!(
                "floors, median runs: store {:.1}, send {:.1} ns/msg of CPU",
                store.broker_cpu_ns_per_msg.unwrap_or(0.0),
                send.broker_cpu_ns_per_msg.unwrap_or(0.0)
            );
            append_rows(&out, &[store, send])?;
        }
        Command::Report {
            results,
            out_dir,
            command,
            font,
        } => {
            let mut rows = Vec::new();
            for path in &results {
                rows.extend(
                    read_rows(path).with_context(|| format!("reading {}", path.display()))?,
                );
            }
            std::fs::create_dir_all(&out_dir)?;
            let machine = herald_bench::machine::Machine::detect().to_string();
            std::fs::write(
                out_dir.join("wire.md"),
                markdown::render(&rows, &machine, &command),
            )?;
            std::fs::write(out_dir.join("wire.csv"), csv::render(&rows))?;
            chart::draw(&rows, &out_dir.join("wire.png"), &font)?;
            eprintln!("report written to {}", out_dir.display());
        }
    }
    Ok(())
}

/// The run with the median bandwidth (the upper one of an even count).
fn median_by_bandwidth(mut runs: Vec<Row>) -> Option<Row> {
    runs.sort_by(|a, b| a.mb_per_s.total_cmp(&b.mb_per_s));
    let middle = runs.len() / 2;
    runs.into_iter().nth(middle)
}

/// The row of one floor, announced on stderr.
fn floor_row(name: &str, floor: &Floor, kind: Kind) -> Row {
    let row = floor.row(kind);
    eprintln!(
        "{name}: {:.0} MB/s, {:.1} ns/msg of CPU",
        row.mb_per_s,
        row.broker_cpu_ns_per_msg.unwrap_or(0.0)
    );
    row
}

/// Appends `rows` to the JSON-lines file `out`, creating it if needed.
fn append_rows(out: &Path, rows: &[Row]) -> anyhow::Result<()> {
    use std::io::Write;
    let mut file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(out)
        .with_context(|| format!("opening {}", out.display()))?;
    for row in rows {
        writeln!(file, "{}", serde_json::to_string(row)?)?;
    }
    Ok(())
}
