//! Process-wide figures sampled at scrape time.

use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

/// The process gauges.
#[derive(Debug, Default)]
pub struct ProcessMetrics {
    heap_bytes: Gauge,
}

impl ProcessMetrics {
    /// Unregistered, zero.
    pub fn new() -> Self {
        Self::default()
    }

    pub(crate) fn register(&self, registry: &mut Registry) {
        registry.sub_registry_with_prefix("process").register(
            "heap_bytes",
            "Bytes the allocator has handed out and not taken back (in use, not what it keeps for reuse); absent where the allocator does not say",
            self.heap_bytes.clone(),
        );
    }

    /// Sets the heap figure.
    pub fn set_heap_bytes(&self, bytes: u64) {
        self.heap_bytes
            .set(i64::try_from(bytes).unwrap_or(i64::MAX));
    }
}
