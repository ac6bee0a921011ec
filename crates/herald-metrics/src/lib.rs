//! herald's Prometheus metrics. This crate owns the registry and the metric
//! families; it knows nothing of sockets, Kafka messages or the broker.
//! Front ends record into the handles it hands out ([`KafkaMetrics`]), the
//! binary refreshes the per-partition gauges ([`PartitionMetrics`]) just
//! before each scrape, and the admin listener renders everything in the
//! Prometheus text format with [`Metrics::scrape`].
//!
//! Every metric name starts with `herald_`.

pub mod kafka;
pub mod partitions;

use std::sync::Arc;

use parking_lot::Mutex;
use prometheus_client::registry::Registry;

pub use kafka::KafkaMetrics;
pub use partitions::{PartitionMetrics, PartitionSample};

/// The registry and every metric herald exports.
#[derive(Debug)]
pub struct Metrics {
    registry: Registry,
    /// Kafka front-end metrics (requests, bytes, connections).
    pub kafka: Arc<KafkaMetrics>,
    /// Per-partition log gauges.
    pub partitions: Arc<PartitionMetrics>,
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
        Self {
            registry,
            kafka,
            partitions,
            scrape_lock: Mutex::new(()),
        }
    }

    /// Runs `refresh` (which updates gauges sampled at scrape time, such as
    /// the partition gauges) and renders every metric in the Prometheus
    /// text exposition format.
    pub fn scrape(&self, refresh: impl FnOnce(&PartitionMetrics)) -> String {
        let _serialised = self.scrape_lock.lock();
        refresh(&self.partitions);
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
