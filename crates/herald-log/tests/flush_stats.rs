//! Flush statistics: which flushes are counted, and that a snapshot is
//! consistent (its buckets sum to its count).

mod common;

use std::sync::Arc;
use std::time::Duration;

use common::{small_config, tagged_batch};
use herald_log::{FlushPolicy, FlushStats, FlushStatsSnapshot, Log, LogConfig};

fn config(flush: FlushPolicy) -> LogConfig {
    LogConfig {
        flush,
        ..small_config()
    }
}

fn assert_consistent(snapshot: &FlushStatsSnapshot) {
    let from_buckets: u64 = snapshot.bucket_counts().map(|(_, count)| count).sum();
    assert_eq!(from_buckets, snapshot.count(), "buckets sum to the count");
    if snapshot.count() > 0 {
        assert!(snapshot.sum > Duration::ZERO, "flushes take some time");
    }
}

#[test]
fn every_append_flushes_once_per_sequential_append() {
    let dir = tempfile::tempdir().unwrap();
    let log = Log::open(dir.path(), config(FlushPolicy::EveryAppend)).unwrap();
    let opened = log.flush_stats();
    assert_consistent(&opened);
    let appends = 7;
    for tag in 0..appends {
        log.append(&tagged_batch(2, tag, 0)).unwrap();
    }
    let after = log.flush_stats();
    assert_consistent(&after);
    assert_eq!(after.count() - opened.count(), appends);
    assert!(after.sum > opened.sum);
}

#[test]
fn concurrent_appenders_share_flushes() {
    let dir = tempfile::tempdir().unwrap();
    let log = Arc::new(Log::open(dir.path(), config(FlushPolicy::EveryAppend)).unwrap());
    let before = log.flush_stats().count();
    let (threads, per_thread) = (4u64, 25u64);
    let workers: Vec<_> = (0..threads)
        .map(|t| {
            let log = Arc::clone(&log);
            std::thread::spawn(move || {
                for i in 0..per_thread {
                    log.append(&tagged_batch(1, t * 1000 + i, 0)).unwrap();
                }
            })
        })
        .collect();
    for worker in workers {
        worker.join().unwrap();
    }
    let after = log.flush_stats();
    assert_consistent(&after);
    let flushes = after.count() - before;
    assert!(
        (1..=threads * per_thread).contains(&flushes),
        "{flushes} flushes for {} appends",
        threads * per_thread
    );
}

#[test]
fn without_a_flush_policy_only_explicit_flushes_count() {
    let dir = tempfile::tempdir().unwrap();
    let log = Log::open(dir.path(), config(FlushPolicy::Never)).unwrap();
    let opened = log.flush_stats().count();
    for tag in 0..5 {
        log.append(&tagged_batch(3, tag, 0)).unwrap();
    }
    assert_eq!(log.flush_stats().count(), opened, "appends do not flush");
    log.flush().unwrap();
    assert_eq!(log.flush_stats().count(), opened + 1);
    log.flush().unwrap();
    assert_eq!(
        log.flush_stats().count(),
        opened + 1,
        "nothing new to sync is not a flush"
    );
    assert_consistent(&log.flush_stats());
}

#[test]
fn the_process_wide_stats_see_every_log() {
    let before = FlushStats::global().snapshot();
    let dir = tempfile::tempdir().unwrap();
    let log = Log::open(dir.path(), config(FlushPolicy::EveryAppend)).unwrap();
    log.append(&tagged_batch(1, 1, 0)).unwrap();
    let mine = log.flush_stats();
    let after = FlushStats::global().snapshot();
    // Other tests flush concurrently: the global count grows by at least
    // this log's flushes.
    assert!(after.count() - before.count() >= mine.count());
    assert!(after.sum - before.sum >= mine.sum);
    assert_consistent(&after);
}
