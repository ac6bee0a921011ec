//! Broker CPU accounting from `/proc/PID/stat`: user + system time, so that
//! brokers compare by their own cost per message whatever the client does.

use std::time::{Duration, Instant};

/// A reading of a process's CPU time.
#[derive(Debug, Clone, Copy)]
pub struct CpuSample {
    /// User + system time, in clock ticks.
    ticks: u64,
    at: Instant,
}

/// Reads the CPU time of `pid`; `None` if the process is gone or unreadable.
pub fn sample(pid: u32) -> Option<CpuSample> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name (field 2) may hold spaces: fields are counted after
    // its closing parenthesis, where field 3 (state) is the first.
    let rest = &stat[stat.rfind(')')? + 1..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let utime: u64 = fields.get(11)?.parse().ok()?; // field 14
    let stime: u64 = fields.get(12)?.parse().ok()?; // field 15
    Some(CpuSample {
        ticks: utime + stime,
        at: Instant::now(),
    })
}

/// CPU used between two samples: (CPU nanoseconds, cores busy on average).
pub fn between(before: CpuSample, after: CpuSample) -> (f64, f64) {
    let ticks_per_s = clock_ticks_per_s();
    let cpu_ns = after.ticks.saturating_sub(before.ticks) as f64 * 1e9 / ticks_per_s;
    let wall_ns = after.at.duration_since(before.at).as_nanos() as f64;
    let cores = if wall_ns > 0.0 { cpu_ns / wall_ns } else { 0.0 };
    (cpu_ns, cores)
}

/// How long [`settle`] waited, and whether the process went quiet.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Settled {
    /// Time spent waiting.
    pub waited: Duration,
    /// False if `timeout` passed with the process still busy: the caller
    /// measures anyway and may say so.
    pub quiet: bool,
}

/// Waits until `pid` uses less than `max_cores` of CPU over a whole
/// `window`, or `timeout` passes; `None` as soon as the process cannot be
/// read (it exited, or is not ours to read), when there is nothing to wait
/// for.
///
/// Why: a broker finishes the previous run's work in the background
/// (herald frees a deleted topic's pages on its own thread, Kafka deletes
/// files and collects garbage later); measured without this, that work is
/// charged to whatever run happens to come next.
pub async fn settle(
    pid: u32,
    window: Duration,
    max_cores: f64,
    timeout: Duration,
) -> Option<Settled> {
    let started = Instant::now();
    let mut last = sample(pid)?;
    loop {
        tokio::time::sleep(window).await;
        let now = sample(pid)?;
        let quiet = between(last, now).1 < max_cores;
        let waited = started.elapsed();
        if quiet || waited >= timeout {
            return Some(Settled { waited, quiet });
        }
        last = now;
    }
}

/// The unit of `/proc/PID/stat` times: `sysconf(_SC_CLK_TCK)`.
fn clock_ticks_per_s() -> f64 {
    // SAFETY: sysconf reads a constant of the C library; no memory is passed.
    let ticks = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if ticks > 0 {
        ticks as f64
    } else {
        100.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_own_cpu_time() {
        let first = sample(std::process::id()).expect("own stat");
        let mut x = 0u64;
        for i in 0..20_000_000u64 {
            x = x.wrapping_add(i * i);
        }
        std::hint::black_box(x);
        let second = sample(std::process::id()).expect("own stat");
        let (cpu_ns, _) = between(first, second);
        assert!(cpu_ns >= 0.0);
    }

    #[tokio::test]
    async fn settle_waits_while_the_process_is_busy() {
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let spinner = {
            let stop = stop.clone();
            std::thread::spawn(move || {
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    std::hint::spin_loop();
                }
            })
        };
        let pid = std::process::id();
        let window = Duration::from_millis(200);
        // A spinning thread takes well over a tenth of a core even on a
        // busy 2-core machine running other tests.
        let busy = settle(pid, window, 0.1, Duration::from_millis(700)).await;
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        spinner.join().expect("spinner");
        let busy = busy.expect("own stat");
        assert!(!busy.quiet, "a spinning thread is not quiet");
        assert!(busy.waited >= Duration::from_millis(700));
        // Other tests of this process may run meanwhile; the timeout
        // outlasts them.
        let idle = settle(pid, window, 0.5, Duration::from_secs(60)).await;
        assert!(idle.expect("own stat").quiet, "an idle process settles");
        let gone = settle(u32::MAX, window, 0.5, Duration::from_secs(10)).await;
        assert_eq!(gone, None, "no process to read, nothing to wait for");
    }
}
