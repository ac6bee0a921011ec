//! From samples to what a person reads: median rows, the text table and the
//! CSV.

use std::fmt::Write as _;

use crate::runner::{Key, Measurement};
use crate::threads::Sample;
use crate::{System, Workload};

/// Median throughput of one system at one point.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Rate {
    /// Records per second (aggregate over all threads).
    pub msgs_per_s: f64,
    /// Megabytes (10^6 bytes) of batches per second.
    pub mb_per_s: f64,
    /// Median CPU nanoseconds per record, all threads added up.
    pub cpu_ns_per_msg: f64,
    /// Smallest volume moved by one repetition; for reads it must be
    /// subscribers x partition bytes, or a subscriber stopped early.
    pub bytes_min: u64,
}

/// One line of the report: a (workload, threads, batch size) point.
#[derive(Debug, Clone, PartialEq)]
pub struct Row {
    /// Write or read.
    pub workload: Workload,
    /// Publishers or subscribers.
    pub threads: usize,
    /// Records per batch.
    pub batch_records: u32,
    /// Bytes per batch.
    pub batch_bytes: usize,
    /// Repetitions behind each median.
    pub reps: usize,
    /// For reads, the partition each subscriber read.
    pub partition_bytes: Option<u64>,
    /// herald's log.
    pub herald: Rate,
    /// The mutex baseline.
    pub mutex: Rate,
    /// The memcpy bound.
    pub memcpy: Rate,
}

impl Row {
    /// herald's throughput over the mutex baseline's.
    pub fn herald_vs_mutex(&self) -> f64 {
        ratio(self.herald.msgs_per_s, self.mutex.msgs_per_s)
    }

    /// herald's bandwidth over memcpy's.
    pub fn herald_vs_memcpy(&self) -> f64 {
        ratio(self.herald.mb_per_s, self.memcpy.mb_per_s)
    }
}

fn ratio(a: f64, b: f64) -> f64 {
    if b > 0.0 {
        a / b
    } else {
        0.0
    }
}

/// Median of `values` (the mean of the two middle ones for an even count).
pub fn median(values: &mut [f64]) -> f64 {
    if values.is_empty() {
        return 0.0;
    }
    values.sort_by(f64::total_cmp);
    let mid = values.len() / 2;
    if values.len() % 2 == 1 {
        values[mid]
    } else {
        (values[mid - 1] + values[mid]) / 2.0
    }
}

fn rate(samples: &[Sample]) -> Rate {
    let mut msgs: Vec<f64> = samples.iter().map(Sample::records_per_s).collect();
    let mut mb: Vec<f64> = samples.iter().map(Sample::mb_per_s).collect();
    let mut cpu: Vec<f64> = samples.iter().map(Sample::cpu_ns_per_record).collect();
    Rate {
        msgs_per_s: median(&mut msgs),
        mb_per_s: median(&mut mb),
        cpu_ns_per_msg: median(&mut cpu),
        bytes_min: samples.iter().map(|s| s.bytes).min().unwrap_or(0),
    }
}

/// Groups measurements into rows, in plan order (writes, then reads).
pub fn rows(measurements: &[Measurement]) -> Vec<Row> {
    let mut rows: Vec<Row> = Vec::new();
    for m in measurements {
        let Key {
            workload,
            threads,
            batch_records,
            system,
        } = m.key;
        let index = match rows.iter().position(|r| {
            (r.workload, r.threads, r.batch_records) == (workload, threads, batch_records)
        }) {
            Some(i) => i,
            None => {
                rows.push(Row {
                    workload,
                    threads,
                    batch_records,
                    batch_bytes: m.batch_bytes,
                    reps: m.samples.len(),
                    partition_bytes: m.partition_bytes,
                    herald: Rate::default(),
                    mutex: Rate::default(),
                    memcpy: Rate::default(),
                });
                rows.len() - 1
            }
        };
        let row = &mut rows[index];
        let slot = match system {
            System::Herald => &mut row.herald,
            System::Mutex => &mut row.mutex,
            System::Memcpy => &mut row.memcpy,
        };
        *slot = rate(&m.samples);
    }
    rows.sort_by_key(|r| (r.workload, r.batch_records, r.threads));
    rows
}

/// A rate with three significant digits and a unit prefix (k, M, G).
pub fn si(value: f64) -> String {
    let (scaled, prefix) = match value.abs() {
        v if v >= 1e9 => (value / 1e9, "G"),
        v if v >= 1e6 => (value / 1e6, "M"),
        v if v >= 1e3 => (value / 1e3, "k"),
        _ => (value, ""),
    };
    let digits = match scaled.abs() {
        v if v >= 100.0 => 0,
        v if v >= 10.0 => 1,
        _ => 2,
    };
    format!(
        "{scaled:.digits$}{}{prefix}",
        if prefix.is_empty() { "" } else { " " }
    )
}

/// The table printed at the end of a run (also used in Markdown, where it is
/// placed in a code block).
pub fn table(rows: &[Row]) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{:<8}{:>8}{:>7}{:>15}{:>13}{:>15}{:>13}{:>14}{:>15}{:>20}",
        "workload",
        "threads",
        "batch",
        "herald msgs/s",
        "herald MB/s",
        "mutex msgs/s",
        "memcpy MB/s",
        "herald/mutex",
        "herald/memcpy",
        "cpu ns/msg h|m",
    );
    for r in rows {
        let _ = writeln!(
            out,
            "{:<8}{:>8}{:>7}{:>15}{:>13.0}{:>15}{:>13.0}{:>13.2}x{:>14.0}%{:>20}",
            r.workload.name(),
            r.threads,
            r.batch_records,
            si(r.herald.msgs_per_s),
            r.herald.mb_per_s,
            si(r.mutex.msgs_per_s),
            r.memcpy.mb_per_s,
            r.herald_vs_mutex(),
            r.herald_vs_memcpy() * 100.0,
            format!(
                "{:.1}|{:.1}",
                r.herald.cpu_ns_per_msg, r.mutex.cpu_ns_per_msg
            ),
        );
    }
    out
}

/// The CSV header, one column per field of [`Row`] plus the two ratios.
pub const CSV_HEADER: &str = "workload,threads,batch_records,batch_bytes,reps,\
herald_msgs_per_s,herald_mb_per_s,mutex_msgs_per_s,mutex_mb_per_s,\
memcpy_msgs_per_s,memcpy_mb_per_s,herald_vs_mutex,herald_vs_memcpy,\
partition_bytes,herald_bytes_min,mutex_bytes_min,memcpy_bytes_min,\
herald_cpu_ns_per_msg,mutex_cpu_ns_per_msg,memcpy_cpu_ns_per_msg";

/// The rows as CSV.
pub fn csv(rows: &[Row]) -> String {
    let mut out = String::from(CSV_HEADER);
    out.push('\n');
    for r in rows {
        let _ = writeln!(
            out,
            "{},{},{},{},{},{:.0},{:.2},{:.0},{:.2},{:.0},{:.2},{:.4},{:.4},{},{},{},{},{:.1},{:.1},{:.1}",
            r.workload.name(),
            r.threads,
            r.batch_records,
            r.batch_bytes,
            r.reps,
            r.herald.msgs_per_s,
            r.herald.mb_per_s,
            r.mutex.msgs_per_s,
            r.mutex.mb_per_s,
            r.memcpy.msgs_per_s,
            r.memcpy.mb_per_s,
            r.herald_vs_mutex(),
            r.herald_vs_memcpy(),
            r.partition_bytes
                .map_or_else(String::new, |b| b.to_string()),
            r.herald.bytes_min,
            r.mutex.bytes_min,
            r.memcpy.bytes_min,
            r.herald.cpu_ns_per_msg,
            r.mutex.cpu_ns_per_msg,
            r.memcpy.cpu_ns_per_msg,
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn median_of_odd_and_even_counts() {
        assert_eq!(median(&mut [3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(&mut [4.0, 1.0, 2.0, 3.0]), 2.5);
        assert_eq!(median(&mut []), 0.0);
    }

    #[test]
    fn si_prefixes_keep_three_digits() {
        assert_eq!(si(1_234_567.0), "1.23 M");
        assert_eq!(si(98_700.0), "98.7 k");
        assert_eq!(si(12.0), "12.0");
    }
}
