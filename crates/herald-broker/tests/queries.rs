//! Registered queries against real logs: indexed from the log start and
//! then as records arrive, results equal to what the records hold, alerts
//! appended to the alerts topic, kept across a restart, refusals.

use std::sync::Arc;
use std::time::Duration;

use herald_broker::queries::{QueryError, ALERTS_TOPIC};
use herald_broker::{Acks, Broker, BrokerConfig};
use herald_query::QuerySpec;
use herald_records::{BatchBuilder, RecordFields};

fn open(dir: &std::path::Path) -> Arc<Broker> {
    Broker::open(BrokerConfig::new(dir)).expect("open broker")
}

/// Appends one record per value, at `timestamp + i`.
async fn append(broker: &Broker, topic: &str, values: &[&str], timestamp: i64) {
    let partition = broker.topic(topic).unwrap().partition(0).unwrap();
    for (i, value) in values.iter().enumerate() {
        let mut builder = BatchBuilder::new(timestamp);
        builder.push(RecordFields {
            timestamp_ms: timestamp + i as i64,
            key: None,
            value: Some(value.as_bytes()),
            headers: &[],
        });
        partition
            .append(&builder.finish().unwrap(), Acks::Leader)
            .await
            .unwrap();
    }
}

fn spec() -> QuerySpec {
    serde_json::from_value(serde_json::json!({
        "id": "big", "topic": "orders", "filter": "value.total > 10",
        "bucket_ms": 1000,
        "aggregates": [
            {"name": "n", "function": "count"},
            {"name": "total", "function": "sum", "field": "value.total"}
        ],
        "triggers": [{"name": "three", "aggregate": "n", "op": ">=", "threshold": 3, "window_ms": 1000}]
    }))
    .unwrap()
}

async fn settle(broker: &Broker, id: &str, seen: u64) -> herald_query::Results {
    for _ in 0..500 {
        let query = broker.queries().get(id).expect("registered");
        let results = query.results(None, None);
        if query.lag() == 0 && results.records_seen == seen {
            return results;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("query {id} did not index {seen} records");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_query_indexes_what_is_stored_then_follows_and_comes_back_after_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    {
        let broker = open(dir.path());
        broker.create_topic("orders", Some(1), &[], false).unwrap();
        append(
            &broker,
            "orders",
            &[r#"{"total": 5}"#, r#"{"total": 20}"#],
            10_000,
        )
        .await;
        broker.register_query(spec()).unwrap();
        append(
            &broker,
            "orders",
            &[r#"{"total": 30}"#, "not json", r#"{"total": 40}"#],
            10_500,
        )
        .await;
        let results = settle(&broker, "big", 5).await;
        assert_eq!(results.records_matched, 3);
        assert_eq!(results.totals, vec![Some(3.0), Some(90.0)]);
        assert_eq!(broker.queries().get("big").unwrap().alerts(), 1);
        let alerts = broker.topic(ALERTS_TOPIC).expect("alerts topic");
        let stored = alerts.partition(0).unwrap().read(0, 1 << 20).await.unwrap();
        let text = String::from_utf8_lossy(&stored.bytes).into_owned();
        assert!(text.contains(r#""trigger":"three""#), "{text}");
        assert!(matches!(
            broker.register_query(spec()),
            Err(QueryError::Exists { .. })
        ));
        broker.close().unwrap();
    }
    let broker = open(dir.path());
    broker.start_queries().unwrap();
    let results = settle(&broker, "big", 5).await;
    assert_eq!(results.totals, vec![Some(3.0), Some(90.0)]);
    broker.delete_query("big").unwrap();
    assert!(broker.queries().list().is_empty());
    assert!(matches!(
        broker.delete_query("big"),
        Err(QueryError::Unknown { .. })
    ));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_queries_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let broker = open(dir.path());
    let mut unknown = spec();
    unknown.topic = "nope".into();
    assert!(matches!(
        broker.register_query(unknown),
        Err(QueryError::UnknownTopic { .. })
    ));
    broker.create_topic("orders", Some(1), &[], false).unwrap();
    let mut bad = spec();
    bad.filter = Some("value.total >".into());
    assert!(matches!(
        broker.register_query(bad),
        Err(QueryError::Spec(_))
    ));
    assert!(broker.queries().list().is_empty());
}

/// Names of this process's threads.
fn thread_names() -> Vec<String> {
    std::fs::read_dir("/proc/self/task")
        .map(|tasks| {
            tasks
                .filter_map(|t| std::fs::read_to_string(t.ok()?.path().join("comm")).ok())
                .map(|name| name.trim().to_owned())
                .collect()
        })
        .unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn queries_of_one_topic_share_its_indexer_and_each_counts_from_its_own_start() {
    let dir = tempfile::tempdir().unwrap();
    let broker = open(dir.path());
    broker.create_topic("orders", Some(1), &[], false).unwrap();
    append(
        &broker,
        "orders",
        &[r#"{"total": 5}"#, r#"{"total": 20}"#],
        10_000,
    )
    .await;
    broker.register_query(spec()).unwrap();
    settle(&broker, "big", 2).await;
    if cfg!(target_os = "linux") {
        assert!(
            thread_names().iter().any(|n| n == "herald-queries"),
            "the indexers run on their own thread: {:?}",
            thread_names()
        );
    }
    // Registered while the first waits at the tail: it still counts the
    // topic from the log start.
    let mut all = spec();
    all.id = "all".into();
    all.filter = None;
    all.triggers.clear();
    broker.register_query(all).unwrap();
    let results = settle(&broker, "all", 2).await;
    assert_eq!(results.totals, vec![Some(2.0), Some(25.0)]);
    append(&broker, "orders", &[r#"{"total": 30}"#], 10_500).await;
    assert_eq!(
        settle(&broker, "all", 3).await.totals,
        vec![Some(3.0), Some(55.0)]
    );
    assert_eq!(
        settle(&broker, "big", 3).await.totals,
        vec![Some(2.0), Some(50.0)]
    );
    // The first gone, the second goes on following the topic.
    broker.delete_query("big").unwrap();
    append(&broker, "orders", &[r#"{"total": 1}"#], 10_600).await;
    let results = settle(&broker, "all", 4).await;
    assert_eq!(results.totals, vec![Some(4.0), Some(56.0)]);
    assert_eq!(broker.queries().get("all").unwrap().indexed_records(), 4);
}
