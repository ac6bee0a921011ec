//! Metrics of the Kafka front end: requests and their latency per API,
//! bytes received and sent, connections. One call per request
//! ([`KafkaMetrics::record_request`]), one guard per connection
//! ([`KafkaMetrics::connection_opened`]).

use std::sync::atomic::AtomicU64;
use std::time::Duration;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};
use prometheus_client::registry::Registry;

/// Label set of the per-API families: Kafka's name of the API (`Produce`,
/// `Fetch`, ...).
#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
pub struct ApiLabels {
    /// The API's name.
    pub api: &'static str,
}

/// Kafka front-end metrics.
#[derive(Debug)]
pub struct KafkaMetrics {
    requests: Family<ApiLabels, Counter>,
    request_seconds: Family<ApiLabels, Histogram>,
    received_bytes: Counter,
    sent_bytes: Counter,
    connections_open: Gauge,
    connections_accepted: Counter,
    flow_limit: Gauge,
    flow_throughput: Gauge<f64, AtomicU64>,
    flow_latency_seconds: Gauge<f64, AtomicU64>,
    flow_windows: Counter,
    quota_pauses: Counter,
    quota_paused_seconds: Counter<f64, AtomicU64>,
}

/// Latency buckets: 50 µs doubling up to about 52 s (a fetch long-poll is
/// capped at 30 s).
fn latency_histogram() -> Histogram {
    Histogram::new(exponential_buckets(0.000_05, 2.0, 21))
}

impl KafkaMetrics {
    /// Unregistered metrics, all at zero.
    pub fn new() -> Self {
        Self {
            requests: Family::default(),
            request_seconds: Family::new_with_constructor(latency_histogram),
            received_bytes: Counter::default(),
            sent_bytes: Counter::default(),
            connections_open: Gauge::default(),
            connections_accepted: Counter::default(),
            flow_limit: Gauge::default(),
            flow_throughput: Gauge::default(),
            flow_latency_seconds: Gauge::default(),
            flow_windows: Counter::default(),
            quota_pauses: Counter::default(),
            quota_paused_seconds: Counter::default(),
        }
    }

    pub(crate) fn register(&self, registry: &mut Registry) {
        let kafka = registry.sub_registry_with_prefix("kafka");
        kafka.register(
            "requests",
            "Kafka requests answered (or dropped for acks=0), by API",
            self.requests.clone(),
        );
        kafka.register(
            "request_duration_seconds",
            "Time from a request's frame being read to its response being ready, by API",
            self.request_seconds.clone(),
        );
        kafka.register(
            "received_bytes",
            "Bytes of request frames read, size prefix included",
            self.received_bytes.clone(),
        );
        kafka.register(
            "sent_bytes",
            "Bytes of response frames written, size prefix included",
            self.sent_bytes.clone(),
        );
        kafka.register(
            "connections_open",
            "Client connections currently open",
            self.connections_open.clone(),
        );
        kafka.register(
            "connections_accepted",
            "Client connections accepted and served",
            self.connections_accepted.clone(),
        );
        kafka.register(
            "flow_limit_records",
            "Produce records the flow-control gate lets be in flight (0 while it is off)",
            self.flow_limit.clone(),
        );
        kafka.register(
            "flow_throughput_records_per_second",
            "Records answered per second over the last flow-control window (λ)",
            self.flow_throughput.clone(),
        );
        kafka.register(
            "flow_latency_seconds",
            "Mean time a record spent in flight over the last flow-control window (W)",
            self.flow_latency_seconds.clone(),
        );
        kafka.register(
            "flow_windows",
            "Flow-control windows measured (each a controller decision)",
            self.flow_windows.clone(),
        );
        kafka.register(
            "quota_pauses",
            "Times a connection was not read from because a quota or tenant rate throttled it",
            self.quota_pauses.clone(),
        );
        kafka.register(
            "quota_paused_seconds",
            "Time connections spent not read from because a quota or tenant rate throttled them",
            self.quota_paused_seconds.clone(),
        );
    }

    /// Records the flow-control limit in force.
    pub fn record_flow_limit(&self, limit: u32) {
        self.flow_limit.set(i64::from(limit));
    }

    /// Records one flow-control window: the limit it led to, λ and W.
    pub fn record_flow_window(&self, limit: u32, throughput: f64, latency_ns: f64) {
        self.flow_limit.set(i64::from(limit));
        self.flow_throughput.set(throughput);
        self.flow_latency_seconds.set(latency_ns / 1e9);
        self.flow_windows.inc();
    }

    /// Records one request of `api` whose frame was `request_bytes` long
    /// (with the size prefix) and took `elapsed` to answer.
    pub fn record_request(&self, api: &'static str, request_bytes: usize, elapsed: Duration) {
        let labels = ApiLabels { api };
        self.requests.get_or_create(&labels).inc();
        self.request_seconds
            .get_or_create(&labels)
            .observe(elapsed.as_secs_f64());
        self.received_bytes.inc_by(request_bytes as u64);
    }

    /// Records `bytes` of a response written to a client.
    pub fn record_sent(&self, bytes: usize) {
        self.sent_bytes.inc_by(bytes as u64);
    }

    /// Records one pause of a connection a quota throttled.
    pub fn record_quota_pause(&self, seconds: f64) {
        self.quota_pauses.inc();
        self.quota_paused_seconds.inc_by(seconds);
    }

    /// Counts a connection as open until the returned guard is dropped.
    pub fn connection_opened(&self) -> ConnectionGuard {
        self.connections_accepted.inc();
        self.connections_open.inc();
        ConnectionGuard {
            open: self.connections_open.clone(),
        }
    }
}

impl Default for KafkaMetrics {
    fn default() -> Self {
        Self::new()
    }
}

/// Keeps one connection counted in `herald_kafka_connections_open`.
#[derive(Debug)]
pub struct ConnectionGuard {
    open: Gauge,
}

impl Drop for ConnectionGuard {
    fn drop(&mut self) {
        self.open.dec();
    }
}
