//! `herald-log-bench`: write and read throughput of one herald partition
//! against a mutex log and memcpy. Run it through `scripts/bench-log.sh`.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::{Duration, Instant};

use anyhow::Context as _;
use clap::Parser;
use herald_bench::machine::{load_average, Machine};
use herald_bench::runner::{self, Event};
use herald_bench::{chart, report, summary, targets, BaselineMemory, Settings};

/// Measures one partition's write throughput (N publishers) and read
/// throughput (N subscribers, each reading it whole) for herald's lock-free
/// log, a mutex log and memcpy, and writes a table, a CSV and a chart.
#[derive(Parser, Debug)]
#[command(name = "herald-log-bench", version)]
struct Args {
    /// Smoke test: small volumes, one repetition, output under target/
    /// unless --out is given.
    #[arg(long)]
    quick: bool,
    /// Repetitions of each point (the report shows the median).
    #[arg(long)]
    reps: Option<usize>,
    /// Directory under which herald's log is created (default /dev/shm,
    /// a RAM disk, as the seed ran Kafka on one).
    #[arg(long)]
    dir: Option<PathBuf>,
    /// Publisher and subscriber counts.
    #[arg(long, value_delimiter = ',')]
    threads: Option<Vec<usize>>,
    /// Records per batch.
    #[arg(long, value_delimiter = ',')]
    batches: Option<Vec<u32>>,
    /// Where log.csv, log.png and log-latest.md go (default docs/benchmarks,
    /// or target/herald-log-bench-quick with --quick).
    #[arg(long)]
    out: Option<PathBuf>,
    /// Duration of one write point, in milliseconds.
    #[arg(long)]
    write_ms: Option<u64>,
    /// Size of the partition the subscribers read, in MiB.
    #[arg(long)]
    read_mib: Option<u64>,
    /// herald's segment size, in MiB.
    #[arg(long)]
    segment_mib: Option<u32>,
    /// herald's preallocation step in MiB (default: the log's own). Equal to
    /// --segment-mib, a whole segment is provisioned before timing: the
    /// append path without the cost of new RAM-disk pages.
    #[arg(long)]
    preallocate_mib: Option<u32>,
    /// What the mutex and memcpy baselines write into: `prefaulted` (one
    /// buffer touched before timing, the bound) or `fresh` (new pages per
    /// sample, faulted in while timed, as herald's new segment pages are).
    #[arg(long, value_enum, default_value = "prefaulted")]
    baseline_memory: MemoryArg,
    /// TrueType font for the chart's text.
    #[arg(long, default_value = chart::FONT_PATH)]
    font: PathBuf,
}

#[derive(clap::ValueEnum, Clone, Copy, Debug)]
enum MemoryArg {
    Prefaulted,
    Fresh,
}

impl Args {
    fn settings(&self) -> Settings {
        let mut s = if self.quick {
            Settings::quick()
        } else {
            Settings::full()
        };
        if let Some(reps) = self.reps {
            s.reps = reps;
        }
        match &self.dir {
            Some(dir) => s.dir = dir.clone(),
            // Without a RAM disk, the system's temporary directory is the
            // next best place (often tmpfs as well).
            None if !s.dir.is_dir() => s.dir = std::env::temp_dir(),
            None => {}
        }
        if let Some(threads) = &self.threads {
            s.threads = threads.clone();
        }
        if let Some(batches) = &self.batches {
            s.batches = batches.clone();
        }
        if let Some(ms) = self.write_ms {
            s.write_time = Duration::from_millis(ms);
        }
        if let Some(mib) = self.read_mib {
            s.read_bytes = mib << 20;
        }
        if let Some(mib) = self.segment_mib {
            s.segment_bytes = mib.saturating_mul(1 << 20);
        }
        if let Some(mib) = self.preallocate_mib {
            s.preallocate_bytes = Some(mib.saturating_mul(1 << 20));
        }
        s.baseline_memory = match self.baseline_memory {
            MemoryArg::Prefaulted => BaselineMemory::Prefaulted,
            MemoryArg::Fresh => BaselineMemory::Fresh,
        };
        s
    }

    fn out(&self) -> PathBuf {
        match (&self.out, self.quick) {
            (Some(out), _) => out.clone(),
            // A smoke run must not overwrite the published results.
            (None, true) => PathBuf::from("target/herald-log-bench-quick"),
            (None, false) => PathBuf::from("docs/benchmarks"),
        }
    }
}

fn main() -> anyhow::Result<ExitCode> {
    let args = Args::parse();
    let settings = args.settings();
    settings.validate()?;
    let out = args.out();
    let machine = Machine::detect();
    println!("herald-log-bench");
    println!("machine: {machine}");
    println!("plan:    {}", summary::plan(&settings));
    let load_before = load_average();
    println!("load:    {load_before} (1, 5, 15 min)");
    println!();

    let started = Instant::now();
    let measurements = runner::run(&settings, print_progress).context("benchmark run failed")?;
    let run = summary::RunFacts {
        took: started.elapsed(),
        load_before,
        load_after: load_average(),
    };

    let rows = report::rows(&measurements);
    let verdicts = targets::evaluate(&rows);
    println!(
        "\nmedians of {} repetition(s), aggregate over all threads; load average now {}:\n",
        settings.reps, run.load_after
    );
    print!("{}", report::table(&rows));
    println!("\ntargets (issue 2):");
    for v in &verdicts {
        println!("  {v}");
    }

    let written = write_outputs(&out, &args.font, &machine, &settings, &rows, &run)?;
    Ok(if written {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

/// Writes log.csv, log-latest.md and log.png under `out`; false if the chart
/// could not be drawn (the CSV and summary are written first, so a missing
/// font costs only the chart).
fn write_outputs(
    out: &Path,
    font: &Path,
    machine: &Machine,
    settings: &Settings,
    rows: &[report::Row],
    run: &summary::RunFacts,
) -> anyhow::Result<bool> {
    std::fs::create_dir_all(out).with_context(|| format!("create {}", out.display()))?;
    let csv = out.join("log.csv");
    std::fs::write(&csv, report::csv(rows)).with_context(|| format!("write {}", csv.display()))?;
    let md = out.join("log-latest.md");
    let text = summary::markdown(machine, settings, rows, &targets::evaluate(rows), run);
    std::fs::write(&md, text).with_context(|| format!("write {}", md.display()))?;
    let png = out.join("log.png");
    let title = format!("herald partition log vs mutex log, 64-byte records (medians; {machine})");
    if let Err(e) = chart::draw(rows, &png, font, &title) {
        eprintln!("chart not drawn: {e} (install fonts-dejavu-core or pass --font)");
        return Ok(false);
    }
    println!(
        "\nwrote {}, {} and {} in {:.0} s",
        csv.display(),
        md.display(),
        png.display(),
        run.took.as_secs_f64()
    );
    Ok(true)
}

fn print_progress(event: Event<'_>) {
    match event {
        Event::Filling { batch_records, bytes } => {
            eprintln!("writing the {} MiB partition for reads, batch {batch_records}", bytes >> 20)
        }
        Event::Sampled { done, total, key, rep, sample } => eprintln!(
            "[{done:>4}/{total}] {:<5} {:<6} {:>2} threads  batch {:>5}  rep {rep}  {:>9} msgs/s {:>8.0} MB/s",
            key.workload.name(),
            key.system.name(),
            key.threads,
            key.batch_records,
            report::si(sample.records_per_s()),
            sample.mb_per_s(),
        ),
    }
}
