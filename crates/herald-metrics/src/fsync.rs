//! Log flush (fsync) metrics: a broker-wide latency histogram and
//! per-partition counters. The flushes are counted by the log itself; at
//! scrape time the binary copies its counters in here ([`FsyncMetrics::set_latency`],
//! [`FsyncMetrics::replace_partitions`]), so nothing on the flush path
//! touches this crate.

use std::sync::Arc;

use parking_lot::Mutex;
use prometheus_client::encoding::{EncodeMetric, MetricEncoder, NoLabelSet};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::{MetricType, TypedMetric};
use prometheus_client::registry::Registry;

use crate::partitions::PartitionLabels;

/// A histogram's state copied from counters kept elsewhere.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct HistogramSample {
    /// Total of the observed values.
    pub sum: f64,
    /// Each bucket's upper bound (inclusive) and its count, not cumulative,
    /// in increasing order of bound. The last bound should be
    /// `f64::INFINITY`, so that every observation is in some bucket; the
    /// count is the sum of the buckets.
    pub buckets: Vec<(f64, u64)>,
}

/// A histogram whose value is replaced wholesale at scrape time, for
/// observations counted outside of prometheus-client.
#[derive(Debug, Clone, Default)]
pub struct SampledHistogram {
    sample: Arc<Mutex<HistogramSample>>,
}

impl SampledHistogram {
    /// Replaces the histogram's state.
    pub fn set(&self, sample: HistogramSample) {
        *self.sample.lock() = sample;
    }
}

impl TypedMetric for SampledHistogram {
    const TYPE: MetricType = MetricType::Histogram;
}

impl EncodeMetric for SampledHistogram {
    fn encode(&self, mut encoder: MetricEncoder) -> Result<(), std::fmt::Error> {
        let sample = self.sample.lock();
        let count = sample.buckets.iter().map(|(_, count)| count).sum();
        // The text encoder spells an upper bound of f64::MAX as "+Inf".
        let buckets: Vec<(f64, u64)> = sample
            .buckets
            .iter()
            .map(|&(bound, count)| (if bound.is_finite() { bound } else { f64::MAX }, count))
            .collect();
        encoder.encode_histogram::<NoLabelSet>(sample.sum, count, &buckets, None)
    }

    fn metric_type(&self) -> MetricType {
        Self::TYPE
    }
}

/// One partition log's flush counters at scrape time.
#[derive(Debug, Clone, PartialEq)]
pub struct PartitionFsyncSample {
    /// Topic name.
    pub topic: String,
    /// Partition index.
    pub partition: u32,
    /// Flushes since the log was opened.
    pub fsyncs: u64,
    /// Seconds spent in them.
    pub seconds: f64,
}

/// The flush metric families.
#[derive(Debug, Default)]
pub struct FsyncMetrics {
    latency: SampledHistogram,
    fsyncs: Family<PartitionLabels, Counter>,
    seconds: Family<PartitionLabels, Counter<f64>>,
}

impl FsyncMetrics {
    /// Unregistered metrics, all empty.
    pub fn new() -> Self {
        Self::default()
    }

    pub(crate) fn register(&self, registry: &mut Registry) {
        registry.sub_registry_with_prefix("log").register(
            "fsync_duration_seconds",
            "Duration of each flush (fsync) of a log, over every log of the broker, \
             the internal __consumer_offsets one included, since the broker started",
            self.latency.clone(),
        );
        let partition = registry.sub_registry_with_prefix("partition");
        partition.register(
            "log_fsyncs",
            "Flushes (fsyncs) of the partition's log since it was opened",
            self.fsyncs.clone(),
        );
        partition.register(
            "log_fsync_seconds",
            "Seconds spent flushing the partition's log since it was opened",
            self.seconds.clone(),
        );
    }

    /// Replaces the broker-wide flush latency histogram (in seconds).
    pub fn set_latency(&self, sample: HistogramSample) {
        self.latency.set(sample);
    }

    /// Replaces every partition's flush counters with `samples`
    /// (partitions not in `samples` disappear).
    pub fn replace_partitions(&self, samples: impl IntoIterator<Item = PartitionFsyncSample>) {
        self.fsyncs.clear();
        self.seconds.clear();
        for sample in samples {
            let labels = PartitionLabels {
                topic: sample.topic,
                partition: sample.partition,
            };
            // The counts are kept by the log; the families were just
            // cleared, so each counter starts at zero and mirrors them.
            self.fsyncs.get_or_create(&labels).inc_by(sample.fsyncs);
            self.seconds.get_or_create(&labels).inc_by(sample.seconds);
        }
    }
}
