//! What one run measures: the plan (thread counts, batch sizes, repetitions)
//! and the volumes and time limits that keep every loop bounded.

use std::fmt;
use std::path::PathBuf;
use std::time::Duration;

use crate::BenchError;

/// Size of every record value, as in the seed experiment.
pub const VALUE_BYTES: usize = 64;
/// Bytes a subscriber asks for per read (a Kafka fetch's `max_bytes`).
pub const FETCH_BYTES: usize = 1024 * 1024;

/// Upper bounds of the settings, so that no option can make a run unbounded.
const THREADS_MAX: usize = 64;
const BATCH_RECORDS_MAX: u32 = 65_536;
const REPS_MAX: usize = 20;
const WRITE_TIME_MAX: Duration = Duration::from_secs(10);
const VOLUME_BYTES_MAX: u64 = 8 << 30;

/// Which side of the partition is measured.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Workload {
    /// N publishers append to one partition.
    Write,
    /// N subscribers each read the whole partition independently.
    Read,
}

impl Workload {
    /// Name used in the table and the CSV.
    pub fn name(self) -> &'static str {
        match self {
            Workload::Write => "write",
            Workload::Read => "read",
        }
    }
}

impl fmt::Display for Workload {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// The system under measurement.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum System {
    /// herald's lock-free log.
    Herald,
    /// The baseline whose append takes a mutex.
    Mutex,
    /// Plain memcpy of the same bytes: the bound.
    Memcpy,
}

impl System {
    /// Every system, in the order they are run for each point (interleaved,
    /// so that noise from other processes hits all three alike).
    pub const ALL: [System; 3] = [System::Herald, System::Mutex, System::Memcpy];

    /// Name used in progress lines.
    pub fn name(self) -> &'static str {
        match self {
            System::Herald => "herald",
            System::Mutex => "mutex",
            System::Memcpy => "memcpy",
        }
    }
}

impl fmt::Display for System {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// The memory the two baselines write into during a write point.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BaselineMemory {
    /// One buffer, touched once before any timing and reused: the baselines
    /// measure the copy and the lock alone (the default, the bound).
    Prefaulted,
    /// A new, untouched buffer per sample, so that the baselines pay a page
    /// fault per 4 KiB as herald pays for its fresh segment pages: a
    /// like-for-like comparison on a machine where new memory is expensive.
    Fresh,
}

/// The plan of one run.
#[derive(Debug, Clone)]
pub struct Settings {
    /// Publisher and subscriber counts.
    pub threads: Vec<usize>,
    /// Records per batch.
    pub batches: Vec<u32>,
    /// Repetitions of each point; the report shows the median.
    pub reps: usize,
    /// Directory under which herald's log is created (a RAM disk by default,
    /// as the seed put Kafka's storage on one).
    pub dir: PathBuf,
    /// A write point stops after this long...
    pub write_time: Duration,
    /// ...or once this many bytes are written, whichever comes first.
    pub write_bytes_max: u64,
    /// Size of the partition each subscriber reads whole.
    pub read_bytes: u64,
    /// Safety limit of one read point; a subscriber still reading then stops
    /// and the row shows a read volume below the partition's.
    pub read_time_max: Duration,
    /// herald's segment size: small enough that rolls happen during a write
    /// point, large enough that they are not what is measured.
    pub segment_bytes: u32,
    /// What the baselines write into.
    pub baseline_memory: BaselineMemory,
    /// herald's `preallocate_bytes` (disk space allocated and pre-faulted
    /// ahead of writers); `None` keeps the log's default. Setting it to the
    /// segment size provisions a whole segment on the untimed warm-up append,
    /// which separates the append path from the cost of new RAM-disk pages.
    pub preallocate_bytes: Option<u32>,
}

impl Settings {
    /// The documented default run: about two minutes on two cores.
    pub fn full() -> Self {
        Self {
            threads: vec![1, 2, 4, 8],
            batches: vec![1, 64, 1024, 16384],
            reps: 3,
            dir: PathBuf::from("/dev/shm"),
            write_time: Duration::from_secs(1),
            write_bytes_max: 2 << 30,
            read_bytes: 256 << 20,
            read_time_max: Duration::from_secs(30),
            segment_bytes: 256 << 20,
            baseline_memory: BaselineMemory::Prefaulted,
            preallocate_bytes: None,
        }
    }

    /// A smoke test: every point once, with small volumes.
    pub fn quick() -> Self {
        Self {
            reps: 1,
            write_time: Duration::from_millis(100),
            write_bytes_max: 64 << 20,
            read_bytes: 16 << 20,
            segment_bytes: 16 << 20,
            ..Self::full()
        }
    }

    /// Number of timed samples the plan takes (for progress).
    pub fn sample_count(&self) -> usize {
        2 * self.threads.len() * self.batches.len() * self.reps * System::ALL.len()
    }

    /// Checks every setting against its bound.
    pub fn validate(&self) -> Result<(), BenchError> {
        let bad = |name, reason: String| Err(BenchError::Setting { name, reason });
        if self.threads.is_empty() || self.threads.iter().any(|&t| t == 0 || t > THREADS_MAX) {
            return bad(
                "threads",
                format!("need 1..={THREADS_MAX} threads per point"),
            );
        }
        if self.batches.is_empty()
            || self
                .batches
                .iter()
                .any(|&b| b == 0 || b > BATCH_RECORDS_MAX)
        {
            return bad(
                "batches",
                format!("need 1..={BATCH_RECORDS_MAX} records per batch"),
            );
        }
        if self.reps == 0 || self.reps > REPS_MAX {
            return bad("reps", format!("need 1..={REPS_MAX}"));
        }
        if self.write_time.is_zero() || self.write_time > WRITE_TIME_MAX {
            return bad(
                "write_time",
                format!("need more than 0 and at most {WRITE_TIME_MAX:?}"),
            );
        }
        for (name, bytes) in [
            ("write_bytes_max", self.write_bytes_max),
            ("read_bytes", self.read_bytes),
        ] {
            if !(1 << 20..=VOLUME_BYTES_MAX).contains(&bytes) {
                return bad(name, format!("need 1 MiB..={VOLUME_BYTES_MAX} bytes"));
            }
        }
        Ok(())
    }
}
