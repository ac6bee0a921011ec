//! Consumer group gauges: each group's committed offset per partition and
//! its lag behind the partition's high watermark, sampled at scrape time
//! (groups, their commits and the partitions come and go, so every scrape
//! replaces the whole set).

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

/// Label set of a group's partition.
#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
pub struct GroupPartitionLabels {
    /// Group id.
    pub group: String,
    /// Topic name.
    pub topic: String,
    /// Partition index.
    pub partition: i32,
}

/// One committed offset at scrape time.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupOffsetSample {
    /// Group id.
    pub group: String,
    /// Topic name.
    pub topic: String,
    /// Partition index.
    pub partition: i32,
    /// The committed offset: the next record the group will read.
    pub committed_offset: i64,
    /// High watermark minus committed offset; `None` when the partition
    /// does not exist (or the offset is negative), so no lag is exported.
    pub lag: Option<i64>,
}

/// The group gauge families.
#[derive(Debug, Default)]
pub struct GroupMetrics {
    committed_offset: Family<GroupPartitionLabels, Gauge>,
    lag: Family<GroupPartitionLabels, Gauge>,
}

impl GroupMetrics {
    /// Unregistered, empty families.
    pub fn new() -> Self {
        Self::default()
    }

    pub(crate) fn register(&self, registry: &mut Registry) {
        let group = registry.sub_registry_with_prefix("group");
        group.register(
            "committed_offset",
            "Offset committed by a consumer group, per partition",
            self.committed_offset.clone(),
        );
        group.register(
            "lag",
            "Partition high watermark minus the group's committed offset",
            self.lag.clone(),
        );
    }

    /// Replaces every group's gauges with `samples` (commits not in
    /// `samples` disappear).
    pub fn replace(&self, samples: impl IntoIterator<Item = GroupOffsetSample>) {
        self.clear();
        for sample in samples {
            let labels = GroupPartitionLabels {
                group: sample.group,
                topic: sample.topic,
                partition: sample.partition,
            };
            self.committed_offset
                .get_or_create(&labels)
                .set(sample.committed_offset);
            if let Some(lag) = sample.lag {
                self.lag.get_or_create(&labels).set(lag);
            }
        }
    }

    /// Removes every group gauge (when the committed offsets could not be
    /// read, absent is better than stale).
    pub fn clear(&self) {
        self.committed_offset.clear();
        self.lag.clear();
    }
}
