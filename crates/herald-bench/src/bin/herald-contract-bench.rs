//! `herald-contract-bench`: what the partition contract costs the embedded
//! log. The same appends and reads go once straight to a [`Log`] and once
//! through [`herald_broker::Partition`] (the door the Kafka front end
//! uses: batch split, size check, validation, the two-step append of the
//! contract), interleaved, and the ratio of the medians is printed.
//!
//! One-record batches are measured because there the per-call overhead of
//! the contract weighs most; the reads walk the partition in fetch-sized
//! chunks. Run it through `scripts/bench-contract.sh`.

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{anyhow, Context as _};
use clap::Parser;
use futures_util::FutureExt as _;
use herald_broker::{Acks, Broker, BrokerConfig, Partition};
use herald_log::{Log, LogConfig};
use herald_records::testing;

/// Appends and reads through the log directly and through the partition
/// contract; prints ns per operation and the contract/direct ratio.
#[derive(Parser, Debug)]
#[command(name = "herald-contract-bench", version)]
struct Args {
    /// Directory for both partitions (default /dev/shm, a RAM disk).
    #[arg(long, default_value = "/dev/shm")]
    dir: PathBuf,
    /// Repetitions of each measurement (the median is reported).
    #[arg(long, default_value_t = 5)]
    reps: usize,
    /// One-record batches appended in one sample, by all threads together
    /// (they must fit the 1 GiB segment provisioned beforehand: a batch of
    /// a 64-byte record takes 140 bytes).
    #[arg(long, default_value_t = 2_000_000)]
    appends: u64,
    /// Publisher threads appending at once.
    #[arg(long, value_delimiter = ',', default_value = "1,2")]
    threads: Vec<usize>,
    /// Bytes per read (a fetch's partition_max_bytes).
    #[arg(long, default_value_t = 1 << 20)]
    read_bytes: usize,
}

/// One system under test: the log itself, or the partition in front of it.
enum Path {
    Direct(Box<Log>),
    Contract(Arc<Partition>),
}

impl Path {
    fn append(&self, batch: &[u8]) -> anyhow::Result<()> {
        match self {
            Path::Direct(log) => log.append(batch).map(drop).map_err(Into::into),
            // Polled once, as an executor would: with no fsync to wait for,
            // the append completes on its first poll.
            Path::Contract(p) => p
                .append(batch, Acks::Leader)
                .now_or_never()
                .ok_or_else(|| anyhow!("append did not complete on its first poll"))?
                .map(drop)
                .map_err(Into::into),
        }
    }

    /// Reads from `offset`; returns the bytes read and the next offset.
    fn read(&self, offset: u64, max_bytes: usize) -> anyhow::Result<(usize, u64)> {
        match self {
            Path::Direct(log) => {
                let slice = log.read(offset, max_bytes)?;
                Ok((slice.bytes.len(), slice.next_offset))
            }
            Path::Contract(p) => {
                let read = p
                    .read(offset, max_bytes)
                    .now_or_never()
                    .ok_or_else(|| anyhow!("read did not complete on its first poll"))??;
                Ok((read.bytes.len(), read.next_offset))
            }
        }
    }

    fn high_watermark(&self) -> u64 {
        match self {
            Path::Direct(log) => log.high_watermark(),
            Path::Contract(p) => p.watermarks().high_watermark,
        }
    }
}

/// Appends `appends` one-record batches, split between `threads` threads;
/// returns ns of wall time per append per thread (the time a thread spends
/// on one append).
fn append_sample(path: &Path, threads: usize, appends: u64) -> anyhow::Result<f64> {
    let batch = testing::batch(1, &[7u8; 64], 1_000);
    let each = appends / threads as u64;
    let started = Instant::now();
    std::thread::scope(|scope| {
        let workers: Vec<_> = (0..threads)
            .map(|_| {
                scope.spawn(|| -> anyhow::Result<()> {
                    for _ in 0..each {
                        path.append(&batch)?;
                    }
                    Ok(())
                })
            })
            .collect();
        workers
            .into_iter()
            .try_for_each(|w| w.join().map_err(|_| anyhow!("append thread panicked"))?)
    })?;
    let elapsed = started.elapsed();
    Ok(elapsed.as_nanos() as f64 * threads as f64 / (each * threads as u64) as f64)
}

/// Reads the whole partition once; returns ns per batch read.
fn read_sample(path: &Path, read_bytes: usize) -> anyhow::Result<f64> {
    let end = path.high_watermark();
    let started = Instant::now();
    let (mut offset, mut bytes) = (0u64, 0usize);
    while offset < end {
        let (n, next) = path.read(offset, read_bytes)?;
        if next <= offset {
            return Err(anyhow!("read at {offset} made no progress"));
        }
        bytes += n;
        offset = next;
    }
    std::hint::black_box(bytes);
    Ok(started.elapsed().as_nanos() as f64 / end as f64)
}

/// Waits (at most 20 s) until this process used under a tenth of a core
/// over 200 ms: the provisioner has faulted the segment in.
fn settle() {
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut last = cpu_ticks();
    while Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(200));
        let now = cpu_ticks();
        // 100 ticks a second: under 2 ticks in 200 ms is under 0.1 core.
        if now.saturating_sub(last) < 2 {
            return;
        }
        last = now;
    }
}

/// User plus system CPU ticks of this process, from `/proc/self/stat`.
fn cpu_ticks() -> u64 {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    // Fields after the command name (which may hold spaces) start at 3.
    let after = stat.rsplit_once(')').map_or("", |(_, rest)| rest);
    let fields: Vec<&str> = after.split_whitespace().collect();
    let field = |i: usize| {
        fields
            .get(i)
            .and_then(|f| f.parse::<u64>().ok())
            .unwrap_or(0)
    };
    field(11) + field(12)
}

fn median(mut values: Vec<f64>) -> f64 {
    herald_bench::report::median(&mut values)
}

/// The partition config measured: one segment of 1 GiB provisioned whole
/// when it is created (before timing), no fsync, no age roll or
/// retention: what is left is the cost of the calls, not of new pages.
fn log_config() -> LogConfig {
    LogConfig {
        segment_bytes: SEGMENT_BYTES,
        preallocate_bytes: SEGMENT_BYTES,
        segment_age: None,
        retention_age: None,
        ..LogConfig::default()
    }
}

const SEGMENT_BYTES: u32 = 1 << 30;

/// Opens a fresh partition of the given kind under `root`.
fn open_path(
    contract: bool,
    root: &std::path::Path,
) -> anyhow::Result<(Path, Option<Arc<Broker>>)> {
    if !contract {
        let log = Log::open(root.join("direct"), log_config()).context("open the log")?;
        return Ok((Path::Direct(Box::new(log)), None));
    }
    let mut config = BrokerConfig::new(root.join("broker"));
    config.log_defaults = log_config();
    let broker = Broker::open(config).context("open the broker")?;
    broker
        .create_topic("contract", Some(1), &[], false)
        .context("create the topic")?;
    let partition = broker
        .topic("contract")
        .and_then(|t| t.partition(0))
        .ok_or_else(|| anyhow!("the topic has no partition 0"))?;
    Ok((Path::Contract(partition), Some(broker)))
}

/// One append sample and one read of what it appended, on a fresh
/// partition; returns ns per append and ns per batch read.
fn sample(args: &Args, contract: bool, threads: usize) -> anyhow::Result<(f64, f64)> {
    let root = tempfile::Builder::new()
        .prefix("herald-contract-bench-")
        .tempdir_in(&args.dir)
        .with_context(|| format!("create a directory in {}", args.dir.display()))?;
    let (path, broker) = open_path(contract, root.path())?;
    // Untimed: creates the segment and provisions all of it; the
    // provisioner thread faults the pages in, which is waited out.
    path.append(&testing::batch(1, &[7u8; 64], 1_000))?;
    settle();
    let append = append_sample(&path, threads, args.appends)?;
    let read = read_sample(&path, args.read_bytes)?;
    drop(path);
    if let Some(broker) = broker {
        broker.close().context("close the broker")?;
    }
    Ok((append, read))
}

fn run(args: &Args) -> anyhow::Result<()> {
    println!("| measurement | direct (ns/op) | contract (ns/op) | contract / direct |");
    println!("|---|---|---|---|");
    for &threads in &args.threads {
        let (mut appends, mut reads) = ([Vec::new(), Vec::new()], [Vec::new(), Vec::new()]);
        // Interleaved, so noise from other processes hits both alike.
        for _ in 0..args.reps {
            for (i, contract) in [false, true].into_iter().enumerate() {
                let (append, read) = sample(args, contract, threads)?;
                appends[i].push(append);
                reads[i].push(read);
            }
        }
        let [direct, contract] = appends.map(median);
        println!(
            "| append, 1-record batches, {threads} thread(s) | {direct:.1} | {contract:.1} | {:.3} |",
            contract / direct
        );
        let [direct, contract] = reads.map(median);
        println!(
            "| read after {threads} thread(s), {} KiB per call, per batch | {direct:.2} | {contract:.2} | {:.3} |",
            args.read_bytes / 1024,
            contract / direct
        );
    }
    Ok(())
}

fn main() -> ExitCode {
    let args = Args::parse();
    if args.reps == 0 || args.threads.is_empty() || args.threads.contains(&0) {
        eprintln!("herald-contract-bench: --reps and --threads must be positive");
        return ExitCode::from(2);
    }
    match run(&args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("herald-contract-bench: {e:#}");
            ExitCode::FAILURE
        }
    }
}
