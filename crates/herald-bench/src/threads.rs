//! Running N worker threads from a common start, and the bounds that stop
//! each worker's loop.

use std::sync::{Condvar, Mutex, PoisonError};
use std::thread;
use std::time::{Duration, Instant};

use crate::BenchError;

/// What one worker did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Tally {
    /// Records (offsets) appended or read.
    pub records: u64,
    /// Bytes of batches appended or read.
    pub bytes: u64,
}

/// One timed repetition of one point: every worker's tally added up, over the
/// wall time from their common start to the end of the last one.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Sample {
    /// Records moved by all workers.
    pub records: u64,
    /// Bytes moved by all workers.
    pub bytes: u64,
    /// Wall time.
    pub elapsed: Duration,
    /// CPU time the process used during the sample (all its threads). On a
    /// machine shared with other work the wall-time rates vary with the load;
    /// CPU time per record compares the systems' costs regardless.
    pub cpu: Duration,
}

impl Sample {
    /// Records per second.
    pub fn records_per_s(&self) -> f64 {
        self.records as f64 / self.elapsed.as_secs_f64().max(1e-9)
    }

    /// CPU nanoseconds per record.
    pub fn cpu_ns_per_record(&self) -> f64 {
        self.cpu.as_nanos() as f64 / self.records.max(1) as f64
    }

    /// Megabytes (10^6 bytes) per second.
    pub fn mb_per_s(&self) -> f64 {
        self.bytes as f64 / 1e6 / self.elapsed.as_secs_f64().max(1e-9)
    }
}

/// Runs `work` once per element of `states`, each on its own thread, all
/// released together once all have started, and measures the wall time.
///
/// Threads are named `{name}{i}` (e.g. `herald-w0`), so that `perf report
/// --comm herald-w0` profiles one system's workers alone.
pub fn run_workers<S, F>(name: &str, states: Vec<S>, work: F) -> Result<Sample, BenchError>
where
    S: Send,
    F: Fn(S) -> Result<Tally, BenchError> + Sync,
{
    let workers = states.len();
    let gate = StartGate::default();
    let (work, gate) = (&work, &gate);
    thread::scope(|scope| {
        let mut handles = Vec::with_capacity(workers);
        for (i, state) in states.into_iter().enumerate() {
            let spawned = thread::Builder::new()
                .name(format!("{name}{i}"))
                .spawn_scoped(scope, move || {
                    if !gate.arrive_and_wait() {
                        let now = Instant::now();
                        return (Ok(Tally::default()), now, now);
                    }
                    let started = Instant::now();
                    let tally = work(state);
                    (tally, started, Instant::now())
                });
            match spawned {
                Ok(handle) => handles.push(handle),
                Err(e) => {
                    // Send the workers already waiting home, or the scope
                    // would wait for them forever.
                    gate.open(false);
                    return Err(BenchError::Spawn(e));
                }
            }
        }
        gate.wait_for(workers);
        let cpu_started = process_cpu_time();
        gate.open(true);
        let mut sample = Sample {
            records: 0,
            bytes: 0,
            elapsed: Duration::ZERO,
            cpu: Duration::ZERO,
        };
        // The wall time runs from the first worker's start to the last one's
        // end, both read by the workers themselves: with more threads than
        // cores, this thread may not run again until some worker is done.
        let (mut first_start, mut last_end) = (None::<Instant>, None::<Instant>);
        let mut first_error = None;
        // Every handle is joined, even after a failure, so that a panic is
        // reported as an error instead of re-raised by the scope.
        for handle in handles {
            let (tally, started, finished) = match handle.join() {
                Ok(done) => done,
                Err(_) => {
                    let now = Instant::now();
                    (Err(BenchError::WorkerPanicked), now, now)
                }
            };
            match tally {
                Ok(t) => {
                    sample.records += t.records;
                    sample.bytes += t.bytes;
                }
                Err(e) => first_error = first_error.or(Some(e)),
            }
            first_start = Some(first_start.map_or(started, |s| s.min(started)));
            last_end = Some(last_end.map_or(finished, |e| e.max(finished)));
        }
        sample.cpu = process_cpu_time().saturating_sub(cpu_started);
        if let (Some(start), Some(end)) = (first_start, last_end) {
            sample.elapsed = end.saturating_duration_since(start);
        }
        first_error.map_or(Ok(sample), Err)
    })
}

/// CPU time the whole process has used so far: the workers, and any thread
/// the system under test runs on its own (herald's log may provision memory
/// in the background), which a per-worker clock would miss.
fn process_cpu_time() -> Duration {
    let mut now = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `now` is a valid, writable timespec; CLOCK_PROCESS_CPUTIME_ID
    // exists on every Linux the log runs on.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_PROCESS_CPUTIME_ID, &mut now) };
    if rc != 0 {
        // Only an informative column depends on it: report zero, not an error.
        return Duration::ZERO;
    }
    Duration::new(now.tv_sec as u64, now.tv_nsec as u32)
}

/// When a worker's loop stops: at a deadline, or once its byte budget would
/// be exceeded.
#[derive(Debug, Clone, Copy)]
pub struct Limit {
    deadline: Instant,
    bytes_max: u64,
    /// The clock is read once per `clock_mask + 1` iterations.
    clock_mask: u64,
}

impl Limit {
    /// Bytes moved between two readings of the clock. Reading it costs tens
    /// of nanoseconds, a sizeable share of a one-record append if done every
    /// time; every 64 KiB it is negligible and still stops within microseconds.
    const CLOCK_EVERY_BYTES: u64 = 64 * 1024;

    /// A limit starting now, for a loop moving `step_bytes` per iteration.
    pub fn starting_now(time: Duration, bytes_max: u64, step_bytes: u64) -> Self {
        let every = (Self::CLOCK_EVERY_BYTES / step_bytes.max(1))
            .max(1)
            .next_power_of_two();
        Self {
            deadline: Instant::now() + time,
            bytes_max,
            clock_mask: every - 1,
        }
    }

    /// Whether iteration `iteration`, which would bring the worker's total to
    /// `bytes_after`, must not run.
    pub fn reached(&self, iteration: u64, bytes_after: u64) -> bool {
        bytes_after > self.bytes_max
            || (iteration & self.clock_mask == 0 && Instant::now() >= self.deadline)
    }
}

/// A start line: workers wait at it until all have arrived and the runner
/// opens it, so that no worker starts its clock while others are still being
/// created. Unlike `std::sync::Barrier` it can send waiting workers home when
/// the run cannot start.
#[derive(Default)]
struct StartGate {
    state: Mutex<GateState>,
    changed: Condvar,
}

#[derive(Default)]
struct GateState {
    arrived: usize,
    /// `Some(true)`: go; `Some(false)`: do not run.
    open: Option<bool>,
}

impl StartGate {
    fn lock(&self) -> std::sync::MutexGuard<'_, GateState> {
        // The state is two plain fields, valid even after a panic elsewhere.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Called by a worker: arrives, waits for the gate, and says whether to run.
    fn arrive_and_wait(&self) -> bool {
        let mut state = self.lock();
        state.arrived += 1;
        self.changed.notify_all();
        loop {
            if let Some(go) = state.open {
                return go;
            }
            state = self
                .changed
                .wait(state)
                .unwrap_or_else(PoisonError::into_inner);
        }
    }

    /// Called by the runner: waits until `workers` have arrived.
    fn wait_for(&self, workers: usize) {
        let mut state = self.lock();
        while state.arrived < workers {
            state = self
                .changed
                .wait(state)
                .unwrap_or_else(PoisonError::into_inner);
        }
    }

    fn open(&self, go: bool) {
        self.lock().open = Some(go);
        self.changed.notify_all();
    }
}

/// CPU time the calling thread has used: what "per core" rates divide by,
/// so time the thread spent waiting for a core on a shared machine does
/// not count against it.
pub fn thread_cpu() -> Duration {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes one timespec into memory we own.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
}
