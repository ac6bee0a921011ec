//! Samples the broker for the metrics read at scrape time: every
//! partition's log (gauges and flush counters), the flush latency of every
//! log of the process, the group coordinator's committed offsets (with
//! their lag behind the high watermarks) and the registered queries' lag
//! and alerts.

use std::collections::HashMap;
use std::time::Duration;

use herald_broker::groups::CommittedOffsetEntry;
use herald_broker::storage::{FlushStats, FlushStatsSnapshot};
use herald_broker::{Broker, OFFSETS_TOPIC};
use herald_gateway::GatewayCounters;
use herald_metrics::{
    GroupOffsetSample, HistogramSample, Metrics, PartitionFsyncSample, PartitionSample, PushSample,
    QuerySample,
};
use herald_push::{PushEngine, PushStats};

/// Longest a scrape waits for the group coordinator's committed offsets;
/// past it the group gauges are left out of that scrape.
pub const GROUP_SNAPSHOT_TIMEOUT: Duration = Duration::from_secs(1);

/// Refreshes every sampled metric from `broker`. Blocks for at most
/// [`GROUP_SNAPSHOT_TIMEOUT`] (plus the time to read the logs' counters).
pub fn refresh(broker: &Broker, metrics: &Metrics) {
    // Committed offsets first, high watermarks second: a high watermark
    // only grows, so a commit at or below it when the snapshot was taken
    // never shows a negative lag.
    let committed = broker
        .groups()
        .committed_offsets_snapshot(GROUP_SNAPSHOT_TIMEOUT);
    let partitions = partition_samples(broker);
    match committed {
        Some(committed) => metrics
            .groups
            .replace(group_offset_samples(committed, &partitions)),
        None => {
            tracing::warn!(
                "group coordinator stopped or slower than {GROUP_SNAPSHOT_TIMEOUT:?} to list \
                 committed offsets; group metrics left out of this scrape"
            );
            metrics.groups.clear();
        }
    }
    metrics
        .fsync
        .set_latency(latency_sample(&FlushStats::global().snapshot()));
    metrics.fsync.replace_partitions(fsync_samples(broker));
    metrics.partitions.replace(partitions);
    metrics.queries.replace(query_samples(broker));
}

/// The figures of every registered query.
fn query_samples(broker: &Broker) -> Vec<QuerySample> {
    broker
        .queries()
        .list()
        .iter()
        .map(|query| QuerySample {
            query: query.spec().id.clone(),
            topic: query.spec().topic.clone(),
            lag_records: query.lag(),
            indexed_records: query.indexed_records(),
            alerts: query.alerts(),
        })
        .collect()
}

/// Sets the process heap gauge: what glibc's allocator has in use, over
/// every arena and large mapping.
pub fn refresh_process(metrics: &Metrics) {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        // SAFETY: mallinfo2 only reads the allocator's own statistics.
        let info = unsafe { libc::mallinfo2() };
        metrics
            .process
            .set_heap_bytes((info.uordblks + info.hblkhd) as u64);
    }
    #[cfg(not(all(target_os = "linux", target_env = "gnu")))]
    let _ = metrics;
}

/// Refreshes the push metrics from the engine and its listener.
pub fn refresh_push(engine: &PushEngine, listener: &GatewayCounters, metrics: &Metrics) {
    let stats = engine.stats();
    let get = PushStats::get;
    let routing = engine.routing_size();
    let cursors = get(&stats.cursors);
    let catching_up = get(&stats.catching_up).min(cursors);
    metrics.push.set(&PushSample {
        sessions: get(&stats.sessions),
        connections: listener.open() as u64,
        subscriptions: get(&stats.subscriptions),
        cursors_live: cursors - catching_up,
        cursors_catching_up: catching_up,
        queued_bytes: get(&stats.queued_bytes),
        live_deliveries: get(&stats.live_deliveries),
        catch_up_deliveries: get(&stats.catch_up_deliveries),
        written_deliveries: get(&stats.written_deliveries),
        written_bytes: get(&stats.written_bytes),
        overflows: get(&stats.overflows),
        catch_up_read_bytes: get(&stats.catch_up_read_bytes),
        catch_up_delivered_bytes: get(&stats.catch_up_delivered_bytes),
        catch_up_skipped_offsets: get(&stats.catch_up_skipped_offsets),
        subject_indexed_bytes: get(&stats.indexed_bytes),
        subject_index_lag: get(&stats.subject_index_lag),
        gaps_retention: get(&stats.gaps_retention),
        gaps_lag_limit: get(&stats.gaps_lag_limit),
        expired_records: get(&stats.expired_records),
        disconnects_client: get(&stats.disconnects_client),
        disconnects_protocol_error: get(&stats.disconnects_protocol_error),
        disconnects_message_too_large: get(&stats.disconnects_message_too_large),
        disconnects_shutdown: get(&stats.disconnects_shutdown),
        sessions_refused: get(&stats.sessions_refused),
        connections_refused: listener.refused(),
        routing_subjects: routing.subjects as u64,
        routing_literal_routes: routing.literal_routes as u64,
        routing_pattern_routes: routing.pattern_routes as u64,
        routing_bytes: routing.approximate_bytes as u64,
    });
}

/// The current state of every partition of every topic.
pub fn partition_samples(broker: &Broker) -> Vec<PartitionSample> {
    let mut samples = Vec::new();
    for topic in broker.topics() {
        for partition in topic.partitions().iter() {
            let watermarks = partition.watermarks();
            let stats = partition.stats();
            let view = partition.replica_view(broker.node_id());
            let leads = view.leader == Some(broker.node_id());
            samples.push(PartitionSample {
                topic: topic.name().to_owned(),
                partition: partition.index(),
                high_watermark: watermarks.high_watermark,
                log_start_offset: watermarks.log_start_offset,
                size_bytes: stats.size_bytes,
                segment_count: stats.segment_count as u64,
                // Without the indexer thread nothing is ever indexed: no lag
                // to watch for.
                history_lag_records: if broker.config().history_index {
                    stats.history_lag_records
                } else {
                    0
                },
                key_copy_bytes: stats.key_copy_bytes,
                key_copy_pending_segments: stats.key_copy_pending_segments,
                failed: partition.failure().is_some(),
                replicas: view.replicas.len() as u32,
                in_sync_replicas: view.isr.len() as u32,
                under_replicated: leads && view.isr.len() < view.replicas.len(),
            });
        }
    }
    samples
}

/// Flush counters of every partition log, the internal offsets partition
/// included.
fn fsync_samples(broker: &Broker) -> Vec<PartitionFsyncSample> {
    let sample = |topic: &str, partition: u32, stats: FlushStatsSnapshot| PartitionFsyncSample {
        topic: topic.to_owned(),
        partition,
        fsyncs: stats.count(),
        seconds: stats.sum.as_secs_f64(),
    };
    let mut samples = Vec::new();
    for topic in broker.topics() {
        for partition in topic.partitions().iter() {
            // A backend that does not flush files itself has no row.
            if let Some(flushes) = partition.stats().flushes {
                samples.push(sample(topic.name(), partition.index(), flushes));
            }
        }
    }
    samples.push(sample(
        OFFSETS_TOPIC,
        0,
        broker.groups().offsets_log_flush_stats(),
    ));
    samples
}

/// The histogram of `stats`, in seconds.
pub fn latency_sample(stats: &FlushStatsSnapshot) -> HistogramSample {
    HistogramSample {
        sum: stats.sum.as_secs_f64(),
        buckets: stats
            .bucket_counts()
            // Nanoseconds / 1e9 rounds once, so bounds print as 1.31072,
            // not 1.3107199999999999.
            .map(|(bound, count)| {
                let seconds = bound.map_or(f64::INFINITY, |b| b.as_nanos() as f64 / 1e9);
                (seconds, count)
            })
            .collect(),
    }
}

/// Each committed offset with its lag: the partition's high watermark
/// minus the offset, when the partition exists and the offset is not
/// negative (a group may commit -1 or an offset of a deleted topic).
pub fn group_offset_samples(
    committed: Vec<CommittedOffsetEntry>,
    partitions: &[PartitionSample],
) -> Vec<GroupOffsetSample> {
    let high_watermarks: HashMap<(&str, u32), u64> = partitions
        .iter()
        .map(|p| ((p.topic.as_str(), p.partition), p.high_watermark))
        .collect();
    committed
        .into_iter()
        .map(|entry| {
            let high_watermark = u32::try_from(entry.partition)
                .ok()
                .and_then(|index| high_watermarks.get(&(entry.topic.as_str(), index)));
            let lag = match high_watermark {
                Some(&hw) if entry.offset >= 0 => {
                    Some(i64::try_from(hw).unwrap_or(i64::MAX) - entry.offset)
                }
                _ => None,
            };
            GroupOffsetSample {
                group: entry.group_id,
                topic: entry.topic,
                partition: entry.partition,
                committed_offset: entry.offset,
                lag,
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn partition(topic: &str, partition: u32, high_watermark: u64) -> PartitionSample {
        PartitionSample {
            topic: topic.into(),
            partition,
            high_watermark,
            log_start_offset: 0,
            size_bytes: 0,
            segment_count: 1,
            history_lag_records: 0,
            key_copy_bytes: 0,
            key_copy_pending_segments: 0,
            failed: false,
            replicas: 1,
            in_sync_replicas: 1,
            under_replicated: false,
        }
    }

    fn entry(topic: &str, partition: i32, offset: i64) -> CommittedOffsetEntry {
        CommittedOffsetEntry {
            group_id: "g".into(),
            topic: topic.into(),
            partition,
            offset,
        }
    }

    #[test]
    fn lag_is_the_high_watermark_minus_the_commit_where_the_partition_exists() {
        let partitions = [partition("t", 0, 50), partition("t", 1, 10)];
        let samples = group_offset_samples(
            vec![
                entry("t", 0, 42),
                entry("t", 1, 10),
                entry("t", 2, 3),
                entry("gone", 0, 7),
                entry("t", 0, -1),
                entry("t", -1, 5),
            ],
            &partitions,
        );
        let lags: Vec<_> = samples.iter().map(|s| s.lag).collect();
        assert_eq!(lags, [Some(8), Some(0), None, None, None, None]);
        assert_eq!(samples[0].committed_offset, 42);
    }

    #[test]
    fn the_latency_histogram_ends_with_an_unbounded_bucket() {
        let stats = FlushStats::new();
        stats.record(Duration::from_millis(2));
        let sample = latency_sample(&stats.snapshot());
        assert_eq!(
            sample.buckets.len(),
            herald_broker::storage::FLUSH_LATENCY_BUCKETS
        );
        assert_eq!(sample.buckets.last().map(|b| b.0), Some(f64::INFINITY));
        assert_eq!(sample.buckets.iter().map(|b| b.1).sum::<u64>(), 1);
        assert!((sample.sum - 0.002).abs() < 1e-9);
    }
}
