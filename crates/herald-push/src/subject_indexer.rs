//! The indexer of subject filters: one task that follows every partition
//! whose topic keeps them (`subject.filters`: always, or under `auto`
//! once the topic had a push subscription) and hands what it
//! reads to the partition's [`herald_broker::subject_index::SubjectIndex`],
//! off the produce path. It reads from the log's committed tail, usually
//! still in the page cache, a bounded amount per partition per pass so a
//! busy partition does not hold the others back, and rests when every
//! partition is indexed.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use herald_broker::topic_config::SubjectFilters;
use herald_broker::{Broker, Partition, StorageError};
use tokio_util::sync::CancellationToken;

use crate::stats::PushStats;

/// Bytes indexed per partition per pass before the next partition's turn.
const PASS_BYTES: usize = 4 * 1024 * 1024;
/// Bytes per read.
const READ_BYTES: usize = 1024 * 1024;
/// The rest between passes when nothing was left to index: new records
/// are indexed this long after they are written, at most; until then a
/// reader reads them.
const IDLE_PAUSE: Duration = Duration::from_millis(50);

/// Runs the indexer over `broker`'s partitions until `stop`.
pub(crate) async fn run(broker: Arc<Broker>, stats: Arc<PushStats>, stop: CancellationToken) {
    loop {
        let mut worked = false;
        let mut lag = 0;
        for topic in broker.topics() {
            let mode = topic.subject_filters();
            for partition in topic.partitions().iter() {
                if stop.is_cancelled() {
                    return;
                }
                let (indexed, behind) = index_partition(partition, mode).await;
                worked |= indexed > 0;
                lag += behind;
                PushStats::add(&stats.indexed_bytes, indexed as u64);
            }
        }
        stats.subject_index_lag.store(lag, Ordering::Relaxed);
        if !worked {
            tokio::select! {
                () = stop.cancelled() => return,
                () = tokio::time::sleep(IDLE_PAUSE) => {}
            }
        }
    }
}

/// One pass over one partition: follows retention, indexes up to
/// `PASS_BYTES` if `mode` (and, under auto, a subscription) asks. Answers the bytes indexed and the offsets
/// left to index (none when not enabled: nothing is meant to be).
async fn index_partition(partition: &Partition, mode: SubjectFilters) -> (usize, u64) {
    let Some(index) = partition.subject_index() else {
        return (0, 0);
    };
    let enabled = match mode {
        SubjectFilters::Always => true,
        SubjectFilters::Never => false,
        SubjectFilters::Auto => index.is_active(),
    };
    let watermarks = partition.watermarks();
    index.truncate_before(watermarks.log_start_offset);
    if !enabled {
        return (0, 0);
    }
    let mut indexed = 0;
    while indexed < PASS_BYTES {
        let from = index.indexed_through();
        if from >= watermarks.high_watermark {
            break;
        }
        match partition.read(from, READ_BYTES).await {
            Ok(stored) if stored.next_offset > from => {
                index.add(from, &stored.bytes, stored.next_offset);
                indexed += stored.bytes.len();
            }
            Ok(_) => break,
            Err(StorageError::OffsetOutOfRange {
                log_start_offset, ..
            }) if from < log_start_offset => index.truncate_before(log_start_offset),
            // Closed (deleted) or failed: nothing to index.
            Err(_) => break,
        }
        // Decoding is CPU work: let sessions and tailers run between reads.
        tokio::task::yield_now().await;
    }
    let lag = watermarks
        .high_watermark
        .saturating_sub(index.indexed_through());
    (indexed, lag)
}
