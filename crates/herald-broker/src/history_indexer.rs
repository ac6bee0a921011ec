//! The history indexer: one background thread in the kernel's idle
//! scheduling class (`SCHED_IDLE`: it runs only on a core nothing else
//! wants, so it never takes CPU from producers), that keeps every embedded log's
//! history index (key index, smallest timestamp per bucket; see
//! `herald_log::Log::index_history`) close behind the committed tail.
//!
//! It sweeps the partitions: one with nothing new costs two loads; one
//! with new records gets up to [`SLICE_BYTES`] indexed before the sweep
//! moves on, so a busy partition cannot starve the others. A partition
//! whose topic keeps key-sorted copies (`key.sorted.copy`) then gets the
//! copy of one sealed, indexed segment made (a few seconds for a full
//! one), or else of its active segment's next indexed stretch (see
//! `herald_log::Log::build_key_copy`), however busy its tail. When a sweep
//! finds nothing to do the thread rests [`IDLE_REST`]; produce never waits
//! for it, and when the cores are contended it falls behind (queries then
//! read the unindexed rest in full).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, RecvTimeoutError};
use std::sync::{Arc, Weak};
use std::thread::JoinHandle;
use std::time::Duration;

use crate::broker::Broker;

/// Bytes indexed for one partition before the sweep moves to the next.
pub const SLICE_BYTES: u64 = 4 << 20;

/// The rest after a sweep that found nothing to index.
pub const IDLE_REST: Duration = Duration::from_millis(20);

/// Handle of the running history indexer; stops it when dropped.
#[derive(Debug)]
pub struct HistoryIndexer {
    /// Checked between partitions, so a stop never waits for a sweep.
    stopping: Arc<AtomicBool>,
    stop: Option<mpsc::Sender<()>>,
    thread: Option<JoinHandle<()>>,
}

impl HistoryIndexer {
    /// Starts indexing the history of `broker`'s embedded logs. The thread
    /// holds the broker weakly: it ends when stopped or when the broker is
    /// gone.
    pub fn start(broker: &Arc<Broker>) -> std::io::Result<Self> {
        let (stop, stopped) = mpsc::channel::<()>();
        let broker = Arc::downgrade(broker);
        let stopping = Arc::new(AtomicBool::new(false));
        let flag = Arc::clone(&stopping);
        let thread = std::thread::Builder::new()
            .name("herald-history".into())
            .spawn(move || {
                crate::thread_priority::idle_current_thread("history indexer");
                run(&broker, &stopped, &flag);
            })?;
        Ok(Self {
            stopping,
            stop: Some(stop),
            thread: Some(thread),
        })
    }

    /// Stops the thread, letting the slice in progress finish (at most
    /// [`SLICE_BYTES`] of one partition). Blocks: call it off an async
    /// runtime's workers.
    pub fn stop(mut self) {
        self.shutdown();
    }

    fn shutdown(&mut self) {
        self.stopping.store(true, Ordering::Relaxed);
        drop(self.stop.take());
        if let Some(thread) = self.thread.take() {
            if thread.join().is_err() {
                tracing::error!("history indexer thread panicked");
            }
        }
    }
}

impl Drop for HistoryIndexer {
    fn drop(&mut self) {
        self.shutdown();
    }
}

fn run(broker: &Weak<Broker>, stopped: &mpsc::Receiver<()>, stopping: &AtomicBool) {
    loop {
        let Some(live) = broker.upgrade() else {
            return;
        };
        let indexed = sweep_until(&live, stopping);
        drop(live);
        let rest = if indexed == 0 {
            IDLE_REST
        } else {
            Duration::ZERO
        };
        match stopped.recv_timeout(rest) {
            Err(RecvTimeoutError::Timeout) => {}
            // A message or a dropped sender both end the loop.
            _ => return,
        }
    }
}

/// One pass over every partition, indexing up to [`SLICE_BYTES`] of each;
/// answers the bytes indexed, plus one per key-sorted copy made (zero:
/// nothing was left to do). The thread calls it; so can a test or a tool
/// that wants the index built now.
pub fn sweep(broker: &Broker) -> u64 {
    sweep_until(broker, &AtomicBool::new(false))
}

/// [`sweep`], ending early once `stopping` is set.
fn sweep_until(broker: &Broker, stopping: &AtomicBool) -> u64 {
    let mut indexed = 0;
    for topic in broker.topics() {
        for partition in topic.partitions().iter() {
            if stopping.load(Ordering::Relaxed) {
                return indexed;
            }
            let Some(log) = partition.local_log() else {
                continue;
            };
            if log.history_lag() > 0 {
                indexed += log.index_history(SLICE_BYTES).bytes;
            }
            // Sealed segments are copied while the tail keeps moving (a
            // busy partition is never caught up); free when the topic
            // keeps no copies or every sealed one is settled.
            if log.build_key_copy(stopping) {
                // Not bytes indexed, but work done: no rest follows.
                indexed += 1;
            }
        }
    }
    indexed
}
