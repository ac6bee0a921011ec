//! Push delivery metrics: sessions, subscriptions live and catching up,
//! deliveries and bytes, queues, gaps, disconnects, the routing tables.
//! Sampled from the push engine at scrape time (the engine keeps plain
//! atomic counters on its hot paths); each scrape replaces every value.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

/// A label naming one kind of a thing (a reason, a path, a state).
#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
pub struct KindLabel {
    /// The kind.
    pub kind: &'static str,
}

/// The push engine and listener at scrape time.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PushSample {
    /// Open sessions.
    pub sessions: u64,
    /// Open TCP connections of the push listener.
    pub connections: u64,
    /// Subscriptions held.
    pub subscriptions: u64,
    /// (subscription, partition) cursors delivered live.
    pub cursors_live: u64,
    /// (subscription, partition) cursors catching up from the log.
    pub cursors_catching_up: u64,
    /// Bytes queued in sessions' outboxes.
    pub queued_bytes: u64,
    /// Deliveries queued by tailers since start.
    pub live_deliveries: u64,
    /// Deliveries queued by catch-up readers since start.
    pub catch_up_deliveries: u64,
    /// Deliveries written to clients since start.
    pub written_deliveries: u64,
    /// Bytes of deliveries written to clients since start.
    pub written_bytes: u64,
    /// Live cursors that left for the log since start.
    pub overflows: u64,
    /// Bytes read by catch-up readers since start.
    pub catch_up_read_bytes: u64,
    /// Bytes of deliveries queued by catch-up readers since start.
    pub catch_up_delivered_bytes: u64,
    /// Offsets catch-up readers passed over on the subject filters' word.
    pub catch_up_skipped_offsets: u64,
    /// Bytes of the logs the subject indexer read since start.
    pub subject_indexed_bytes: u64,
    /// Offsets not yet in the subject filters.
    pub subject_index_lag: u64,
    /// Gaps reported because of retention.
    pub gaps_retention: u64,
    /// Gaps reported because of a lag limit.
    pub gaps_lag_limit: u64,
    /// Records skipped as expired since start.
    pub expired_records: u64,
    /// Sessions closed by their client.
    pub disconnects_client: u64,
    /// Sessions ended for a protocol error.
    pub disconnects_protocol_error: u64,
    /// Sessions ended for an oversized message.
    pub disconnects_message_too_large: u64,
    /// Sessions ended by a shutdown.
    pub disconnects_shutdown: u64,
    /// Sessions refused at the session limit.
    pub sessions_refused: u64,
    /// Connections closed on accept at the listener's bound.
    pub connections_refused: u64,
    /// Literal subjects in the routing tables.
    pub routing_subjects: u64,
    /// Literal (subject, subscription) routes.
    pub routing_literal_routes: u64,
    /// (pattern, subscription) routes.
    pub routing_pattern_routes: u64,
    /// Estimated heap bytes of the routing tables.
    pub routing_bytes: u64,
}

/// The push metric families.
#[derive(Debug, Default)]
pub struct PushMetrics {
    sessions: Gauge,
    connections: Gauge,
    subscriptions: Gauge,
    cursors: Family<KindLabel, Gauge>,
    queued_bytes: Gauge,
    queued: Family<KindLabel, Counter>,
    written: Counter,
    written_bytes: Counter,
    overflows: Counter,
    expired_records: Counter,
    catch_up_read_bytes: Counter,
    catch_up_delivered_bytes: Counter,
    catch_up_skipped_offsets: Counter,
    subject_indexed_bytes: Counter,
    subject_index_lag: Gauge,
    gaps: Family<KindLabel, Counter>,
    disconnects: Family<KindLabel, Counter>,
    routing_subjects: Gauge,
    routing_routes: Family<KindLabel, Gauge>,
    routing_bytes: Gauge,
}

impl PushMetrics {
    /// Unregistered families, all zero.
    pub fn new() -> Self {
        Self::default()
    }

    pub(crate) fn register(&self, registry: &mut Registry) {
        let push = registry.sub_registry_with_prefix("push");
        push.register("sessions", "Open push sessions", self.sessions.clone());
        push.register(
            "connections",
            "Open TCP connections of the push listener",
            self.connections.clone(),
        );
        push.register(
            "subscriptions",
            "Push subscriptions held",
            self.subscriptions.clone(),
        );
        push.register(
            "cursors",
            "Subscription cursors (one per subscription and partition) by kind: live (fed by the partition's tailer) or catching_up (reading the log)",
            self.cursors.clone(),
        );
        push.register(
            "queued_bytes",
            "Bytes queued in push sessions' outboxes",
            self.queued_bytes.clone(),
        );
        push.register(
            "deliveries_queued",
            "Deliveries queued for sessions, by kind: live (by a tailer) or catch_up (by a catch-up reader)",
            self.queued.clone(),
        );
        push.register(
            "deliveries_written",
            "Deliveries written to push clients",
            self.written.clone(),
        );
        push.register(
            "delivered_bytes",
            "Bytes of deliveries written to push clients (key, value, headers and a fixed overhead each)",
            self.written_bytes.clone(),
        );
        push.register(
            "expired_records",
            "Records not pushed to a subscription that would have received them because they were past their expiry",
            self.expired_records.clone(),
        );
        push.register(
            "overflows",
            "Live cursors whose session was full or out of credit, which continued from the log",
            self.overflows.clone(),
        );
        push.register(
            "catch_up_read_bytes",
            "Bytes read from logs by catch-up readers",
            self.catch_up_read_bytes.clone(),
        );
        push.register(
            "catch_up_delivered_bytes",
            "Bytes of the deliveries catch-up readers queued (key, value, headers and a fixed overhead each): catch_up_read_bytes over this is what a catch-up reads per byte it delivers",
            self.catch_up_delivered_bytes.clone(),
        );
        push.register(
            "catch_up_skipped_offsets",
            "Offsets catch-up readers passed over without reading, because the subject filters showed none of their subject's records there",
            self.catch_up_skipped_offsets.clone(),
        );
        push.register(
            "subject_indexed_bytes",
            "Bytes of the logs the subject indexer read to build the per-block subject filters",
            self.subject_indexed_bytes.clone(),
        );
        push.register(
            "subject_index_lag",
            "Offsets written but not yet in the subject filters, over every partition whose topic keeps them",
            self.subject_index_lag.clone(),
        );
        push.register(
            "gaps",
            "Gaps reported to subscribers, by reason",
            self.gaps.clone(),
        );
        push.register(
            "disconnects",
            "Push sessions ended or refused, by reason",
            self.disconnects.clone(),
        );
        push.register(
            "routing_subjects",
            "Literal subjects with subscribers in the routing tables",
            self.routing_subjects.clone(),
        );
        push.register(
            "routing_routes",
            "Routes in the routing tables, by kind: literal or pattern",
            self.routing_routes.clone(),
        );
        push.register(
            "routing_bytes",
            "Estimated heap bytes of the routing tables",
            self.routing_bytes.clone(),
        );
    }

    /// Replaces every value with `sample`'s.
    pub fn set(&self, sample: &PushSample) {
        let gauge = |g: &Gauge, v: u64| {
            g.set(i64::try_from(v).unwrap_or(i64::MAX));
        };
        // The counts are kept by the engine; a fresh counter mirrors each.
        let counter = |family: &Family<KindLabel, Counter>, kind: &'static str, v: u64| {
            family.get_or_create(&KindLabel { kind }).inc_by(v);
        };
        gauge(&self.sessions, sample.sessions);
        gauge(&self.connections, sample.connections);
        gauge(&self.subscriptions, sample.subscriptions);
        gauge(
            &self.cursors.get_or_create(&KindLabel { kind: "live" }),
            sample.cursors_live,
        );
        gauge(
            &self.cursors.get_or_create(&KindLabel {
                kind: "catching_up",
            }),
            sample.cursors_catching_up,
        );
        gauge(&self.queued_bytes, sample.queued_bytes);
        self.queued.clear();
        counter(&self.queued, "live", sample.live_deliveries);
        counter(&self.queued, "catch_up", sample.catch_up_deliveries);
        mirror(&self.written, sample.written_deliveries);
        mirror(&self.written_bytes, sample.written_bytes);
        mirror(&self.overflows, sample.overflows);
        mirror(&self.expired_records, sample.expired_records);
        mirror(&self.catch_up_read_bytes, sample.catch_up_read_bytes);
        mirror(
            &self.catch_up_delivered_bytes,
            sample.catch_up_delivered_bytes,
        );
        mirror(
            &self.catch_up_skipped_offsets,
            sample.catch_up_skipped_offsets,
        );
        mirror(&self.subject_indexed_bytes, sample.subject_indexed_bytes);
        gauge(&self.subject_index_lag, sample.subject_index_lag);
        self.gaps.clear();
        counter(&self.gaps, "retention", sample.gaps_retention);
        counter(&self.gaps, "lag_limit", sample.gaps_lag_limit);
        self.disconnects.clear();
        counter(
            &self.disconnects,
            "client_closed",
            sample.disconnects_client,
        );
        counter(
            &self.disconnects,
            "protocol_error",
            sample.disconnects_protocol_error,
        );
        counter(
            &self.disconnects,
            "message_too_large",
            sample.disconnects_message_too_large,
        );
        counter(&self.disconnects, "shutdown", sample.disconnects_shutdown);
        counter(
            &self.disconnects,
            "too_many_sessions",
            sample.sessions_refused,
        );
        counter(
            &self.disconnects,
            "listener_full",
            sample.connections_refused,
        );
        gauge(&self.routing_subjects, sample.routing_subjects);
        gauge(
            &self
                .routing_routes
                .get_or_create(&KindLabel { kind: "literal" }),
            sample.routing_literal_routes,
        );
        gauge(
            &self
                .routing_routes
                .get_or_create(&KindLabel { kind: "pattern" }),
            sample.routing_pattern_routes,
        );
        gauge(&self.routing_bytes, sample.routing_bytes);
    }
}

/// Moves a counter up to `value` (the engine's count only grows).
fn mirror(counter: &Counter, value: u64) {
    let now = counter.get();
    if value > now {
        counter.inc_by(value - now);
    }
}
