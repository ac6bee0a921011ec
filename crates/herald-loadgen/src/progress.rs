//! Progress while a run goes: a line every second on stderr with the
//! records counted so far and the current rate.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Counters shared by a run's tasks and its progress printer.
#[derive(Debug, Default)]
pub struct Progress {
    /// Records done (acknowledged or read).
    pub records: AtomicU64,
    done: AtomicBool,
}

impl Progress {
    /// Adds `n` records.
    pub fn add(&self, n: u64) {
        // Relaxed: a statistic, read only for display.
        self.records.fetch_add(n, Ordering::Relaxed);
    }

    /// Stops the printer.
    pub fn finish(&self) {
        self.done.store(true, Ordering::Relaxed);
    }
}

/// Prints `label` with the progress every second until [`Progress::finish`].
pub fn spawn_printer(label: String, progress: Arc<Progress>) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let start = Instant::now();
        let mut last = 0u64;
        let mut tick = tokio::time::interval(Duration::from_secs(1));
        tick.tick().await;
        loop {
            tick.tick().await;
            if progress.done.load(Ordering::Relaxed) {
                break;
            }
            let now = progress.records.load(Ordering::Relaxed);
            eprintln!(
                "  [{label}] {:>4.1}s {:>12} records, {:>10.0} msgs/s",
                start.elapsed().as_secs_f64(),
                now,
                (now - last) as f64
            );
            last = now;
        }
    })
}
