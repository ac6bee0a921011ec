//! Online query figures, sampled at scrape time (queries are registered
//! and deleted at any time, so every scrape replaces the whole set): how
//! far each query's indexers are behind the high watermarks, the records
//! they have indexed and the alerts its triggers have raised.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

/// Label set of one query.
#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
pub struct QueryLabels {
    /// Query id.
    pub query: String,
    /// The topic it follows.
    pub topic: String,
}

/// One query's figures at scrape time.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QuerySample {
    /// Query id.
    pub query: String,
    /// The topic it follows.
    pub topic: String,
    /// Records its indexers have still to read, over every partition.
    pub lag_records: u64,
    /// Records indexed since it was registered or the broker started.
    pub indexed_records: u64,
    /// Alerts raised since it was registered or the broker started.
    pub alerts: u64,
}

/// The query metric families.
#[derive(Debug, Default)]
pub struct QueryMetrics {
    lag: Family<QueryLabels, Gauge>,
    indexed: Family<QueryLabels, Counter>,
    alerts: Family<QueryLabels, Counter>,
}

impl QueryMetrics {
    /// Unregistered, empty families.
    pub fn new() -> Self {
        Self::default()
    }

    pub(crate) fn register(&self, registry: &mut Registry) {
        let query = registry.sub_registry_with_prefix("query");
        query.register(
            "lag_records",
            "Records a registered query's indexers have still to read",
            self.lag.clone(),
        );
        query.register(
            "indexed_records",
            "Records indexed for a registered query",
            self.indexed.clone(),
        );
        query.register(
            "alerts",
            "Alerts raised by a registered query's triggers",
            self.alerts.clone(),
        );
    }

    /// Replaces every query's figures with `samples` (queries not in
    /// `samples` disappear).
    pub fn replace(&self, samples: impl IntoIterator<Item = QuerySample>) {
        self.lag.clear();
        self.indexed.clear();
        self.alerts.clear();
        for sample in samples {
            let labels = QueryLabels {
                query: sample.query,
                topic: sample.topic,
            };
            self.lag
                .get_or_create(&labels)
                .set(i64::try_from(sample.lag_records).unwrap_or(i64::MAX));
            // The counts are kept by the broker; the families were just
            // cleared, so each counter starts at zero and mirrors them.
            self.indexed
                .get_or_create(&labels)
                .inc_by(sample.indexed_records);
            self.alerts.get_or_create(&labels).inc_by(sample.alerts);
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::Metrics;

    use super::*;

    #[test]
    fn a_scrape_shows_the_queries_sampled_and_only_those() {
        let metrics = Metrics::new();
        let text = metrics.scrape(|m| {
            m.queries.replace([QuerySample {
                query: "big".into(),
                topic: "orders".into(),
                lag_records: 12,
                indexed_records: 3_000,
                alerts: 2,
            }])
        });
        for line in [
            "herald_query_lag_records{query=\"big\",topic=\"orders\"} 12",
            "herald_query_indexed_records_total{query=\"big\",topic=\"orders\"} 3000",
            "herald_query_alerts_total{query=\"big\",topic=\"orders\"} 2",
        ] {
            assert!(
                text.lines().any(|l| l == line),
                "{line:?} missing from\n{text}"
            );
        }
        let text = metrics.scrape(|m| m.queries.replace([]));
        assert!(!text.contains("herald_query_lag_records{"), "{text}");
    }
}
