//! Per-partition log gauges (high watermark, log start offset, size on
//! disk, segment count, history index lag, failed storage, replicas and
//! in-sync replicas),
//! sampled from the broker at scrape time: the set of
//! partitions changes with topic creation and deletion, so every scrape
//! replaces the whole set.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

/// Label set of a partition.
#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
pub struct PartitionLabels {
    /// Topic name.
    pub topic: String,
    /// Partition index.
    pub partition: u32,
}

/// One partition's state at scrape time.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PartitionSample {
    /// Topic name.
    pub topic: String,
    /// Partition index.
    pub partition: u32,
    /// Offset of the next record to be made visible.
    pub high_watermark: u64,
    /// First offset still stored.
    pub log_start_offset: u64,
    /// Bytes of the partition's segment files.
    pub size_bytes: u64,
    /// Number of segments.
    pub segment_count: u64,
    /// Committed records the history index (key index, smallest
    /// timestamps) has not reached yet.
    pub history_lag_records: u64,
    /// Bytes of the partition's key-sorted copies (`key.sorted.copy`).
    pub key_copy_bytes: u64,
    /// Sealed segments still waiting for their key-sorted copy (0 when the
    /// topic keeps none).
    pub key_copy_pending_segments: u64,
    /// The partition's storage failed (a failed fsync, a damaged log) and
    /// refuses requests until an operator repairs it.
    pub failed: bool,
    /// Its replicas (1 for an unreplicated partition).
    pub replicas: u32,
    /// Its in-sync replicas as this node knows them.
    pub in_sync_replicas: u32,
    /// This node leads the partition and fewer replicas than all are in
    /// sync (Kafka's under-replicated partitions, counted by leaders).
    pub under_replicated: bool,
}

/// The per-partition gauge families.
#[derive(Debug, Default)]
pub struct PartitionMetrics {
    high_watermark: Family<PartitionLabels, Gauge>,
    log_start_offset: Family<PartitionLabels, Gauge>,
    size_bytes: Family<PartitionLabels, Gauge>,
    segments: Family<PartitionLabels, Gauge>,
    history_lag: Family<PartitionLabels, Gauge>,
    key_copy_bytes: Family<PartitionLabels, Gauge>,
    key_copy_pending: Family<PartitionLabels, Gauge>,
    failed: Family<PartitionLabels, Gauge>,
    replicas: Family<PartitionLabels, Gauge>,
    in_sync_replicas: Family<PartitionLabels, Gauge>,
    under_replicated: Family<PartitionLabels, Gauge>,
}

impl PartitionMetrics {
    /// Unregistered, empty families.
    pub fn new() -> Self {
        Self::default()
    }

    pub(crate) fn register(&self, registry: &mut Registry) {
        let partition = registry.sub_registry_with_prefix("partition");
        partition.register(
            "high_watermark",
            "Offset of the next record to be made visible, per partition",
            self.high_watermark.clone(),
        );
        partition.register(
            "log_start_offset",
            "First offset still stored, per partition",
            self.log_start_offset.clone(),
        );
        partition.register(
            "log_size_bytes",
            "Bytes of the partition's segment files",
            self.size_bytes.clone(),
        );
        partition.register(
            "log_segments",
            "Number of segments of the partition's log",
            self.segments.clone(),
        );
        partition.register(
            "history_index_lag_records",
            "Committed records of the partition its history index (key index, smallest timestamps) has not reached yet; SQL reads them in full",
            self.history_lag.clone(),
        );
        partition.register(
            "key_copy_bytes",
            "Bytes of the partition's key-sorted copies of sealed segments (topic config key.sorted.copy)",
            self.key_copy_bytes.clone(),
        );
        partition.register(
            "key_copy_pending_segments",
            "Sealed segments of the partition whose key-sorted copy is not built yet (0 when the topic keeps none); key lookups read their batches meanwhile",
            self.key_copy_pending.clone(),
        );
        partition.register(
            "storage_failed",
            "1 while the partition's storage has failed (a failed fsync, a damaged log) and refuses requests; 0 otherwise",
            self.failed.clone(),
        );
        partition.register(
            "replicas",
            "Replicas of the partition (1 when it is not replicated)",
            self.replicas.clone(),
        );
        partition.register(
            "in_sync_replicas",
            "Replicas in sync with the partition's leader, as this node knows them",
            self.in_sync_replicas.clone(),
        );
        partition.register(
            "under_replicated",
            "1 on the partition's leader while fewer than all its replicas are in sync; 0 otherwise",
            self.under_replicated.clone(),
        );
    }

    /// Replaces every partition's gauges with `samples` (partitions not in
    /// `samples` disappear).
    pub fn replace(&self, samples: impl IntoIterator<Item = PartitionSample>) {
        self.high_watermark.clear();
        self.log_start_offset.clear();
        self.size_bytes.clear();
        self.segments.clear();
        self.history_lag.clear();
        self.key_copy_bytes.clear();
        self.key_copy_pending.clear();
        self.failed.clear();
        self.replicas.clear();
        self.in_sync_replicas.clear();
        self.under_replicated.clear();
        for sample in samples {
            let labels = PartitionLabels {
                topic: sample.topic,
                partition: sample.partition,
            };
            set(&self.high_watermark, &labels, sample.high_watermark);
            set(&self.log_start_offset, &labels, sample.log_start_offset);
            set(&self.size_bytes, &labels, sample.size_bytes);
            set(&self.segments, &labels, sample.segment_count);
            set(&self.history_lag, &labels, sample.history_lag_records);
            set(&self.key_copy_bytes, &labels, sample.key_copy_bytes);
            set(
                &self.key_copy_pending,
                &labels,
                sample.key_copy_pending_segments,
            );
            set(&self.failed, &labels, u64::from(sample.failed));
            set(&self.replicas, &labels, u64::from(sample.replicas));
            set(
                &self.in_sync_replicas,
                &labels,
                u64::from(sample.in_sync_replicas),
            );
            set(
                &self.under_replicated,
                &labels,
                u64::from(sample.under_replicated),
            );
        }
    }
}

fn set(family: &Family<PartitionLabels, Gauge>, labels: &PartitionLabels, value: u64) {
    family
        .get_or_create(labels)
        .set(i64::try_from(value).unwrap_or(i64::MAX));
}
