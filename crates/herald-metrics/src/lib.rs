//! herald's Prometheus metrics. This crate owns the registry and the metric
//! families; it knows nothing of sockets, Kafka messages or the broker.
//! Front ends record into the handles it hands out ([`KafkaMetrics`]), the
//! binary refreshes what is sampled from elsewhere just before each scrape
//! (the per-partition gauges of [`PartitionMetrics`], the log flush
//! counters of [`FsyncMetrics`], the group offsets of [`GroupMetrics`],
//! the online queries' lag and alerts of [`QueryMetrics`]),
//! and the admin listener renders everything in the Prometheus text format
//! with [`Metrics::scrape`].
//!
//! Every metric name starts with `herald_`.

pub mod fsync;
pub mod groups;
pub mod kafka;
pub mod partitions;
pub mod process;
pub mod push;
pub mod queries;

use std::sync::Arc;

use parking_lot::Mutex;
use prometheus_client::registry::Registry;

pub use fsync::{FsyncMetrics, HistogramSample, PartitionFsyncSample, SampledHistogram};
pub use groups::{GroupMetrics, GroupOffsetSample};
pub use kafka::KafkaMetrics;
pub use partitions::{PartitionMetrics, PartitionSample};
pub use process::ProcessMetrics;
pub use push::{PushMetrics, PushSample};
pub use queries::{QueryMetrics, QuerySample};

/// The registry and every metric herald exports.
#[derive(Debug)]
pub struct Metrics {
    registry: Registry,
    /// Kafka front-end metrics (requests, bytes, connections).
    pub kafka: Arc<KafkaMetrics>,
    /// Per-partition log gauges.
    pub partitions: Arc<PartitionMetrics>,
    /// Log flush latency and counts.
    pub fsync: Arc<FsyncMetrics>,
    /// Consumer group committed offsets and lag.
    pub groups: Arc<GroupMetrics>,
    /// Push delivery.
    pub push: Arc<PushMetrics>,
    /// Process-wide figures.
    pub process: Arc<ProcessMetrics>,
    /// Registered online queries.
    pub queries: Arc<QueryMetrics>,
    /// Serialises scrapes, so a refresh of the partition gauges never
    /// interleaves with another scrape's rendering.
    scrape_lock: Mutex<()>,
}

impl Metrics {
    /// A registry with every herald metric registered.
    pub fn new() -> Self {
        let mut registry = Registry::with_prefix("herald");
        let kafka = Arc::new(KafkaMetrics::new());
        kafka.register(&mut registry);
        let partitions = Arc::new(PartitionMetrics::new());
        partitions.register(&mut registry);
        let fsync = Arc::new(FsyncMetrics::new());
        fsync.register(&mut registry);
        let groups = Arc::new(GroupMetrics::new());
        groups.register(&mut registry);
        let push = Arc::new(PushMetrics::new());
        push.register(&mut registry);
        let process = Arc::new(ProcessMetrics::new());
        process.register(&mut registry);
        let queries = Arc::new(QueryMetrics::new());
        queries.register(&mut registry);
        Self {
            registry,
            kafka,
            partitions,
            fsync,
            groups,
            push,
            process,
            queries,
            scrape_lock: Mutex::new(()),
        }
    }

    /// Runs `refresh` (which updates the metrics sampled at scrape time:
    /// [`Metrics::partitions`], [`Metrics::fsync`], [`Metrics::groups`])
    /// and renders every metric in the Prometheus text exposition format.
    pub fn scrape(&self, refresh: impl FnOnce(&Metrics)) -> String {
        let _serialised = self.scrape_lock.lock();
        refresh(self);
        let mut text = String::new();
        // Writing into a String cannot fail.
        let _ = prometheus_client::encoding::text::encode(&mut text, &self.registry);
        text
    }
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sampled_metrics_render_as_their_samples() {
        let metrics = Metrics::new();
        let text = metrics.scrape(|m| {
            m.fsync.set_latency(HistogramSample {
                sum: 0.5,
                buckets: vec![(0.001, 2), (0.01, 0), (f64::INFINITY, 1)],
            });
            m.fsync.replace_partitions([PartitionFsyncSample {
                topic: "t".into(),
                partition: 3,
                fsyncs: 3,
                seconds: 0.5,
            }]);
            m.groups.replace([
                GroupOffsetSample {
                    group: "g".into(),
                    topic: "t".into(),
                    partition: 3,
                    committed_offset: 40,
                    lag: Some(2),
                },
                GroupOffsetSample {
                    group: "g".into(),
                    topic: "gone".into(),
                    partition: 0,
                    committed_offset: 7,
                    lag: None,
                },
            ]);
        });
        for line in [
            "# TYPE herald_log_fsync_duration_seconds histogram",
            "herald_log_fsync_duration_seconds_sum 0.5",
            "herald_log_fsync_duration_seconds_count 3",
            "herald_log_fsync_duration_seconds_bucket{le=\"0.001\"} 2",
            "herald_log_fsync_duration_seconds_bucket{le=\"0.01\"} 2",
            "herald_log_fsync_duration_seconds_bucket{le=\"+Inf\"} 3",
            "herald_partition_log_fsyncs_total{topic=\"t\",partition=\"3\"} 3",
            "herald_partition_log_fsync_seconds_total{topic=\"t\",partition=\"3\"} 0.5",
            "herald_group_committed_offset{group=\"g\",topic=\"t\",partition=\"3\"} 40",
            "herald_group_lag{group=\"g\",topic=\"t\",partition=\"3\"} 2",
            "herald_group_committed_offset{group=\"g\",topic=\"gone\",partition=\"0\"} 7",
        ] {
            assert!(
                text.lines().any(|l| l == line),
                "{line:?} missing from\n{text}"
            );
        }
        assert!(!text.contains("herald_group_lag{group=\"g\",topic=\"gone\""));

        let text = metrics.scrape(|m| m.groups.clear());
        assert!(!text.contains("herald_group_committed_offset{"));
    }
}
