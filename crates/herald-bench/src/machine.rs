//! A description of the machine, printed above every report: throughput
//! figures mean little without the cores and memory they came from.

use std::fmt;
use std::fs;

/// What the report says about the machine.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Machine {
    /// CPU model name, from `/proc/cpuinfo`.
    pub cpu: String,
    /// Logical cores this process may use.
    pub cores: usize,
    /// Total memory in bytes, from `/proc/meminfo`.
    pub memory_bytes: Option<u64>,
    /// Kernel release.
    pub kernel: String,
}

impl Machine {
    /// Reads the description from the running system. Missing facts read as
    /// "unknown": a description never fails a run.
    pub fn detect() -> Self {
        let cpuinfo = fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
        let cpu = cpuinfo
            .lines()
            .find_map(|l| {
                l.strip_prefix("model name")
                    .and_then(|r| r.split(':').nth(1))
            })
            .map_or_else(|| "unknown CPU".to_owned(), |m| m.trim().to_owned());
        let meminfo = fs::read_to_string("/proc/meminfo").unwrap_or_default();
        let memory_bytes = meminfo
            .lines()
            .find_map(|l| l.strip_prefix("MemTotal:"))
            .and_then(|r| r.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
            .map(|kib| kib * 1024);
        let kernel = fs::read_to_string("/proc/sys/kernel/osrelease")
            .map_or_else(|_| "unknown".to_owned(), |k| k.trim().to_owned());
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        Self {
            cpu,
            cores,
            memory_bytes,
            kernel,
        }
    }
}

impl fmt::Display for Machine {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let memory = self.memory_bytes.map_or_else(
            || "unknown".to_owned(),
            |b| format!("{:.1} GiB", b as f64 / (1u64 << 30) as f64),
        );
        write!(
            f,
            "{} cores ({}), {} memory, Linux {}",
            self.cores, self.cpu, memory, self.kernel
        )
    }
}

/// The 1, 5 and 15 minute load averages, as `/proc/loadavg` shows them: on a
/// machine shared with other work, they say how much the figures may suffer.
pub fn load_average() -> String {
    fs::read_to_string("/proc/loadavg")
        .ok()
        .map(|l| l.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|| "unknown".to_owned())
}
