//! The Markdown summary of a run (`log-latest.md`): machine, plan, table and
//! target verdicts, so a reader of the repository sees the numbers behind the
//! chart without running anything.

use std::fmt::Write as _;
use std::time::Duration;

use crate::machine::Machine;
use crate::report::{self, Row};
use crate::targets::Verdict;
use crate::Settings;

/// What a run observed besides its measurements.
#[derive(Debug, Clone)]
pub struct RunFacts {
    /// Wall time of the whole run.
    pub took: Duration,
    /// Load averages when it started.
    pub load_before: String,
    /// Load averages when it ended.
    pub load_after: String,
}

/// One line describing the plan of a run.
pub fn plan(settings: &Settings) -> String {
    format!(
        "threads {:?}, batches {:?} records of 64-byte values, {} repetition(s) (median), \
         write points {} ms or {} MiB, read partition {} MiB, fetch 1 MiB, herald segments {} MiB in {}, \
         baseline memory {:?}, herald preallocation {}",
        settings.threads,
        settings.batches,
        settings.reps,
        settings.write_time.as_millis(),
        settings.write_bytes_max >> 20,
        settings.read_bytes >> 20,
        settings.segment_bytes >> 20,
        settings.dir.display(),
        settings.baseline_memory,
        settings.preallocate_bytes.map_or_else(|| "default".to_owned(), |b| format!("{} MiB", b >> 20)),
    )
}

/// The whole summary.
pub fn markdown(
    machine: &Machine,
    settings: &Settings,
    rows: &[Row],
    verdicts: &[Verdict],
    run: &RunFacts,
) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "# herald-log-bench: latest run\n");
    let _ = writeln!(
        out,
        "Written by `scripts/bench-log.sh`; the method is in `log.md`.\n"
    );
    let _ = writeln!(out, "- Machine: {machine}");
    let _ = writeln!(out, "- Plan: {}", plan(settings));
    let _ = writeln!(
        out,
        "- Took: {:.0} s; load average {} before, {} after\n",
        run.took.as_secs_f64(),
        run.load_before,
        run.load_after
    );
    let _ = writeln!(
        out,
        "Medians; msgs/s and MB/s are aggregates over all threads (MB = 10^6 bytes of batches); \
         cpu ns/msg is the process's CPU time per record during the sample, herald | mutex.\n"
    );
    let _ = writeln!(out, "```text\n{}```\n", report::table(rows));
    let _ = writeln!(out, "## Targets (issue 2)\n");
    for v in verdicts {
        let _ = writeln!(out, "- {v}");
    }
    out
}
