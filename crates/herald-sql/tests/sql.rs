//! SQL over a real broker's logs: answers equal to the records appended,
//! filters on partition, offset and time narrowing what is read (seen
//! through the bytes-read limit), snapshots giving the same answer after
//! more appends, every output format, and refusals: statements that are
//! not queries, unknown tables, bad SQL, queries over their limits.

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use herald_broker::{Acks, Broker, BrokerConfig, SnapshotSpec};
use herald_records::{BatchBuilder, Compression, RecordFields};
use herald_sql::{OutputFormat, SqlEngine, SqlError, SqlLimits, SqlRequest, TopicAccess};

const BASE_TS: i64 = 1_700_000_000_000;

/// Topic `orders`, 3 partitions, 40 records each: offset `o` of partition
/// `p` has total `p * 100 + o`, region eu for even offsets, timestamp
/// BASE + o seconds, key `c<o % 7>`, header `type` = refund every 10th.
async fn broker_with_orders(dir: &std::path::Path) -> Arc<Broker> {
    let broker = Broker::open(BrokerConfig::new(dir)).expect("open");
    broker.create_topic("orders", Some(3), &[], false).unwrap();
    let topic = broker.topic("orders").unwrap();
    for p in 0..3 {
        let partition = topic.partition(p).unwrap();
        for chunk in 0..4 {
            let mut builder = BatchBuilder::new(BASE_TS);
            for i in 0..10 {
                let o = chunk * 10 + i;
                let value = format!(
                    r#"{{"total": {}, "region": "{}"}}"#,
                    i64::from(p) * 100 + o,
                    if o % 2 == 0 { "eu" } else { "us" }
                );
                let key = format!("c{}", o % 7);
                let kind: &[u8] = if o % 10 == 0 { b"refund" } else { b"order" };
                builder.push(RecordFields {
                    timestamp_ms: BASE_TS + o * 1000,
                    key: Some(key.as_bytes()),
                    value: Some(value.as_bytes()),
                    headers: &[(b"type", Some(kind))],
                });
            }
            partition
                .append(&builder.finish().unwrap(), Acks::Leader)
                .await
                .unwrap();
        }
    }
    broker
}

fn request(sql: &str) -> SqlRequest {
    SqlRequest {
        sql: sql.to_owned(),
        snapshot: None,
        format: OutputFormat::Jsonl,
        limits: SqlLimits::default(),
        access: TopicAccess::everything(),
    }
}

/// Runs `request` and answers its whole output.
async fn run(engine: &SqlEngine, request: SqlRequest) -> Result<Vec<u8>, SqlError> {
    let mut answer = engine.run(request).await?;
    let mut out = Vec::new();
    while let Some(chunk) = answer.chunks.recv().await {
        out.extend_from_slice(&chunk?);
    }
    Ok(out)
}

async fn rows(engine: &SqlEngine, sql: &str) -> Vec<serde_json::Value> {
    let out = run(engine, request(sql))
        .await
        .unwrap_or_else(|e| panic!("{sql}: {e}"));
    String::from_utf8(out)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

fn engine(broker: &Arc<Broker>) -> SqlEngine {
    SqlEngine::new(Arc::clone(broker), 4, SqlLimits::default()).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn answers_are_what_the_records_hold() {
    let dir = tempfile::tempdir().unwrap();
    let broker = broker_with_orders(dir.path()).await;
    let engine = engine(&broker);
    let all = rows(
        &engine,
        "SELECT count(*) AS n, sum(CAST(value->>'total' AS BIGINT)) AS total FROM orders",
    )
    .await;
    // Per partition: 40 * p * 100 + (0 + … + 39).
    let expected_total: i64 = (0..3).map(|p| 40 * p * 100 + 780).sum();
    assert_eq!(
        all,
        vec![serde_json::json!({"n": 120, "total": expected_total})]
    );

    let by_region = rows(
        &engine,
        "SELECT json_get_str(value, 'region') AS region, count(*) AS n FROM orders \
         WHERE headers['type'] = 'refund' GROUP BY 1 ORDER BY 1",
    )
    .await;
    // Refunds at offsets 0, 10, 20, 30 of each partition: all even, all eu.
    assert_eq!(
        by_region,
        vec![serde_json::json!({"region": "eu", "n": 12})]
    );

    let some = rows(
        &engine,
        "SELECT partition, \"offset\", key, timestamp FROM orders \
         WHERE partition = 1 AND \"offset\" >= 5 AND \"offset\" < 8 ORDER BY \"offset\"",
    )
    .await;
    let offsets: Vec<i64> = some.iter().map(|r| r["offset"].as_i64().unwrap()).collect();
    assert_eq!(offsets, vec![5, 6, 7]);
    assert!(some.iter().all(|r| r["partition"] == 1));
    assert_eq!(some[0]["key"], "c5");

    let late = rows(
        &engine,
        &format!(
            "SELECT count(*) AS n FROM orders WHERE timestamp >= to_timestamp_millis({})",
            BASE_TS + 35_000
        ),
    )
    .await;
    assert_eq!(late, vec![serde_json::json!({"n": 15})]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn filters_on_partition_offset_and_time_read_only_what_can_match() {
    let dir = tempfile::tempdir().unwrap();
    let broker = broker_with_orders(dir.path()).await;
    let engine = engine(&broker);
    let whole = broker
        .topic("orders")
        .unwrap()
        .partitions()
        .iter()
        .map(|p| p.stats().size_bytes)
        .sum::<u64>();
    // A limit of half the topic's size: a full scan is refused, narrowed
    // scans (one partition of three, the last batch of each) fit.
    let tight = SqlLimits {
        scan_bytes: whole / 2,
        ..SqlLimits::default()
    };
    let mut full = request("SELECT count(*) FROM orders WHERE key = 'c1'");
    full.limits = tight;
    assert!(matches!(
        run(&engine, full).await,
        Err(SqlError::OverLimit(_))
    ));
    for narrow in [
        "SELECT count(*) AS n FROM orders WHERE partition = 2",
        "SELECT count(*) AS n FROM orders WHERE \"offset\" >= 38",
        &format!(
            "SELECT count(*) AS n FROM orders WHERE timestamp > to_timestamp_millis({})",
            BASE_TS + 38_000
        ),
    ] {
        let mut narrow_request = request(narrow);
        narrow_request.limits = tight;
        let out = run(&engine, narrow_request)
            .await
            .unwrap_or_else(|e| panic!("{narrow}: {e}"));
        assert!(!out.is_empty(), "{narrow}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_snapshot_answers_the_same_after_more_appends_and_cuts_are_not_left_behind() {
    let dir = tempfile::tempdir().unwrap();
    let broker = broker_with_orders(dir.path()).await;
    let engine = engine(&broker);
    let topic = broker.topic("orders").unwrap();
    broker
        .take_snapshot(
            SnapshotSpec {
                id: Some("before".into()),
                topics: vec![Arc::clone(&topic)],
                ttl: None,
                ephemeral: false,
            },
            SystemTime::now(),
        )
        .await
        .unwrap();
    let mut builder = BatchBuilder::new(BASE_TS);
    builder.push(RecordFields {
        timestamp_ms: BASE_TS,
        key: None,
        value: Some(b"late"),
        headers: &[],
    });
    topic
        .partition(0)
        .unwrap()
        .append(&builder.finish().unwrap(), Acks::Leader)
        .await
        .unwrap();
    let mut at_snapshot = request("SELECT count(*) AS n FROM orders");
    at_snapshot.snapshot = Some("before".into());
    let out = run(&engine, at_snapshot).await.unwrap();
    assert_eq!(String::from_utf8(out).unwrap().trim(), r#"{"n":120}"#);
    assert_eq!(
        rows(
            &engine,
            r#"SELECT count(*) AS n FROM "__snapshot.before.orders""#
        )
        .await,
        vec![serde_json::json!({"n": 120})]
    );
    assert_eq!(
        rows(&engine, "SELECT count(*) AS n FROM orders").await,
        vec![serde_json::json!({"n": 121})]
    );
    // The cuts taken for the queries are deleted once they end.
    for _ in 0..200 {
        if broker.snapshots().list().len() == 1 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let left: Vec<String> = broker
        .snapshots()
        .list()
        .iter()
        .map(|s| s.id.clone())
        .collect();
    assert_eq!(left, vec!["before".to_owned()]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_output_format() {
    let dir = tempfile::tempdir().unwrap();
    let broker = broker_with_orders(dir.path()).await;
    let engine = engine(&broker);
    let sql = "SELECT partition, \"offset\", key FROM orders WHERE partition = 0 AND \"offset\" < 2 ORDER BY \"offset\"";
    let mut csv = request(sql);
    csv.format = OutputFormat::Csv;
    assert_eq!(
        String::from_utf8(run(&engine, csv).await.unwrap()).unwrap(),
        "partition,offset,key\n0,0,c0\n0,1,c1\n"
    );
    let mut table = request(sql);
    table.format = OutputFormat::Table;
    let text = String::from_utf8(run(&engine, table).await.unwrap()).unwrap();
    assert!(text.contains("| partition | offset | key |"), "{text}");
    assert!(text.ends_with("2 rows\n"), "{text}");
    let mut parquet = request("SELECT * FROM orders");
    parquet.format = OutputFormat::Parquet;
    let file = run(&engine, parquet).await.unwrap();
    assert!(file.starts_with(b"PAR1") && file.ends_with(b"PAR1"));
    // Nested columns cannot be CSV: a clear error, before any output.
    let mut nested = request("SELECT headers FROM orders");
    nested.format = OutputFormat::Csv;
    match run(&engine, nested).await {
        Err(SqlError::Output(message)) => assert!(message.contains("nested"), "{message}"),
        other => panic!("{other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn what_is_not_a_query_or_is_over_its_limits_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let broker = broker_with_orders(dir.path()).await;
    let engine = engine(&broker);
    for sql in [
        "DROP TABLE orders",
        "CREATE TABLE t AS SELECT * FROM orders",
        "COPY orders TO '/tmp/herald-sql-copy.csv'",
        "INSERT INTO orders VALUES (1)",
        "SET datafusion.execution.batch_size = 1",
        "SELEC 1",
        "SELECT nope FROM orders",
    ] {
        match run(&engine, request(sql)).await {
            Err(SqlError::Invalid(_)) => {}
            other => panic!("{sql}: {other:?}"),
        }
    }
    assert!(!std::path::Path::new("/tmp/herald-sql-copy.csv").exists());
    assert!(matches!(
        run(&engine, request("SELECT * FROM missing")).await,
        Err(SqlError::UnknownTable { .. })
    ));
    let mut at_missing_snapshot = request("SELECT * FROM orders");
    at_missing_snapshot.snapshot = Some("nope".into());
    assert!(matches!(
        run(&engine, at_missing_snapshot).await,
        Err(SqlError::NotInSnapshot { .. })
    ));
    let mut no_time = request("SELECT count(*) FROM orders");
    no_time.limits.time = Duration::ZERO;
    assert!(matches!(
        run(&engine, no_time).await,
        Err(SqlError::TimeLimit { .. })
    ));
    let mut no_memory = request("SELECT * FROM orders a, orders b ORDER BY a.value, b.value");
    no_memory.limits.memory_bytes = 64 << 10;
    assert!(matches!(
        run(&engine, no_memory).await,
        Err(SqlError::OverLimit(_))
    ));
    let mut denied = request("SELECT count(*) FROM orders");
    denied.access = TopicAccess::only(|topic| topic != "orders");
    assert!(matches!(
        run(&engine, denied).await,
        Err(SqlError::Denied { .. })
    ));
    // The broker and the engine serve on.
    assert_eq!(
        rows(&engine, "SELECT count(*) AS n FROM orders").await,
        vec![serde_json::json!({"n": 120})]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn joins_sorts_and_aggregates_over_nothing_answer_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let broker = broker_with_orders(dir.path()).await;
    broker.create_topic("empty", Some(2), &[], false).unwrap();
    let engine = engine(&broker);
    // An empty topic, and filters no record can pass, leave no partition
    // to scan; the plans above still need one input partition.
    for sql in [
        "SELECT * FROM empty a, empty b",
        "SELECT * FROM empty a JOIN orders b ON a.key = b.key",
        "SELECT * FROM orders a, orders b WHERE a.\"offset\" > 1000",
        "SELECT key FROM empty ORDER BY timestamp",
        "SELECT * FROM orders WHERE partition = 9 ORDER BY \"offset\"",
    ] {
        assert_eq!(
            rows(&engine, sql).await,
            Vec::<serde_json::Value>::new(),
            "{sql}"
        );
    }
    assert_eq!(
        rows(&engine, "SELECT count(*) AS n FROM empty").await,
        vec![serde_json::json!({"n": 0})]
    );
}

/// Topic `events`, 1 partition, 200 batches of 5 records: batch `b` holds
/// key `u{b % 20}` only; its records are stamped BASE + b s, except the
/// first, stamped 30 s later (timestamps out of order).
async fn broker_with_events(dir: &std::path::Path) -> Arc<Broker> {
    let broker = Broker::open(BrokerConfig::new(dir)).expect("open");
    broker.create_topic("events", Some(1), &[], false).unwrap();
    let partition = broker.topic("events").unwrap().partition(0).unwrap();
    for b in 0..200i64 {
        let key = format!("u{}", b % 20);
        let mut builder = BatchBuilder::new(BASE_TS);
        for r in 0..5 {
            let late = if r == 0 { 30_000 } else { 0 };
            builder.push(RecordFields {
                timestamp_ms: BASE_TS + b * 1000 + late,
                key: Some(key.as_bytes()),
                value: Some(br#"{"padding": "a value long enough to take some room in the log"}"#),
                headers: &[],
            });
        }
        partition
            .append(&builder.finish().unwrap(), Acks::Leader)
            .await
            .unwrap();
    }
    broker
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_history_index_narrows_key_lookups_and_time_ranges_from_above() {
    let dir = tempfile::tempdir().unwrap();
    let broker = broker_with_events(dir.path()).await;
    let engine = engine(&broker);
    let whole = broker.topic("events").unwrap().partitions()[0]
        .stats()
        .size_bytes;
    let tight = SqlLimits {
        scan_bytes: whole / 5,
        ..SqlLimits::default()
    };
    let early = BASE_TS + 20_000;
    let queries = [
        (
            "SELECT count(*) AS n FROM events WHERE key = 'u7'".to_owned(),
            50,
        ),
        (
            "SELECT count(*) AS n FROM events WHERE key IN ('u3', 'u4') AND \"offset\" >= 500"
                .to_owned(),
            50,
        ),
        // Records at or before BASE + 20 s: batches 0..=20 but the late
        // first records of batches 0..=20 that land after it (all but
        // none: a late record of batch b is at b + 30 s > 20 s).
        (
            format!(
                "SELECT count(*) AS n FROM events WHERE timestamp <= to_timestamp_millis({early})"
            ),
            21 * 4,
        ),
    ];
    // Before the index is built, each reads the whole topic.
    for (sql, _) in &queries {
        let mut over = request(sql);
        over.limits = tight;
        assert!(
            matches!(run(&engine, over).await, Err(SqlError::OverLimit(_))),
            "{sql}"
        );
    }
    while herald_broker::history_indexer::sweep(&broker) > 0 {}
    for (sql, n) in &queries {
        let mut narrow = request(sql);
        narrow.limits = tight;
        let out = run(&engine, narrow)
            .await
            .unwrap_or_else(|e| panic!("{sql}: {e}"));
        let got: serde_json::Value = serde_json::from_slice(&out).unwrap();
        assert_eq!(got["n"], *n, "{sql}");
    }
    // Rows as well as counts: every record of the key, in offset order.
    let rows = rows(
        &engine,
        "SELECT \"offset\" FROM events WHERE key_bytes = X'7531' ORDER BY \"offset\"",
    )
    .await;
    let want: Vec<serde_json::Value> = (0..200)
        .filter(|b| b % 20 == 1)
        .flat_map(|b| (0..5).map(move |r| serde_json::json!({"offset": b * 5 + r})))
        .collect();
    assert_eq!(rows, want);
}

/// A batch whose records a client numbered out of order (deltas 0, 3, 1,
/// 2, which the broker does not check) is read whole by a key lookup, even
/// once the key index names the key's last record in it: the lookup
/// answers what a full scan answers.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn key_lookups_read_a_batch_numbered_out_of_order_whole() {
    let dir = tempfile::tempdir().unwrap();
    let broker = Broker::open(BrokerConfig::new(dir.path())).expect("open");
    broker.create_topic("odd", Some(1), &[], false).unwrap();
    let partition = broker.topic("odd").unwrap().partition(0).unwrap();
    let keys: [&[u8]; 4] = [b"a", b"b", b"a", b"b"];
    for codec in [Compression::Lz4, Compression::None] {
        let batch = herald_records::testing::batch_numbered(&[0, 3, 1, 2], &keys, 30_000, codec);
        partition.append(&batch, Acks::Leader).await.unwrap();
    }
    let engine = engine(&broker);
    let lookups = [
        ("SELECT count(*) AS n FROM odd WHERE key = 'a'", 4),
        ("SELECT count(*) AS n FROM odd WHERE key IN ('a', 'b')", 8),
        (
            "SELECT count(*) AS n FROM odd WHERE key = 'b' AND \"offset\" >= 4",
            2,
        ),
        // b's records in the second batch are at 7 (delta 3) then 6: the
        // index must name 7, the largest, not 6, the last.
        (
            "SELECT count(*) AS n FROM odd WHERE key = 'b' AND \"offset\" >= 7",
            1,
        ),
        (
            "SELECT count(*) AS n FROM odd WHERE key = 'b' AND \"offset\" >= 3",
            3,
        ),
    ];
    for round in ["before the index", "after it"] {
        for (sql, n) in lookups {
            let got = rows(&engine, sql).await;
            assert_eq!(got[0]["n"], n, "{sql}, {round}");
        }
        while herald_broker::history_indexer::sweep(&broker) > 0 {}
    }
}

/// A topic keeping key-sorted copies (`key.sorted.copy`) gets its sealed
/// segments copied while produce goes on, and answers key lookups, with
/// every column, exactly as a topic without them does (reading much less
/// to do so).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn key_lookups_through_key_sorted_copies_answer_what_batches_answer() {
    let dir = tempfile::tempdir().unwrap();
    let broker = Broker::open(BrokerConfig::new(dir.path())).expect("open");
    let small = |copy: &str| {
        vec![
            ("segment.bytes".to_owned(), "16384".to_owned()),
            ("max.message.bytes".to_owned(), "8192".to_owned()),
            ("key.sorted.copy".to_owned(), copy.to_owned()),
        ]
    };
    broker
        .create_topic("plain", Some(1), &small("false"), false)
        .unwrap();
    broker
        .create_topic("sorted", Some(1), &small("true"), false)
        .unwrap();
    for topic in ["plain", "sorted"] {
        let partition = broker.topic(topic).unwrap().partition(0).unwrap();
        for b in 0..300i64 {
            let mut builder = BatchBuilder::new(BASE_TS);
            for r in 0..4i64 {
                let n = b * 4 + r;
                let key = format!("u{}", n * 7 % 23);
                let value = format!(r#"{{"n": {n}}}"#);
                let source = format!("s{}", n % 3);
                let headers: [(&[u8], Option<&[u8]>); 1] = [(b"source", Some(source.as_bytes()))];
                builder.push(RecordFields {
                    timestamp_ms: BASE_TS + n * 10,
                    key: (n % 13 != 0).then_some(key.as_bytes()),
                    value: (n % 17 != 0).then_some(value.as_bytes()),
                    headers: &headers,
                });
            }
            let codec = if b % 2 == 0 {
                Compression::Lz4
            } else {
                Compression::None
            };
            partition
                .append(&builder.finish_with(codec).unwrap(), Acks::Leader)
                .await
                .unwrap();
            // A sweep between appends, as under steady produce: the
            // partition is never caught up, and is copied all the same.
            herald_broker::history_indexer::sweep(&broker);
        }
    }
    let copies = walk_files(dir.path(), ".kcopy");
    assert!(
        copies >= 3,
        "{copies} key-sorted copies under steady produce"
    );
    while herald_broker::history_indexer::sweep(&broker) > 0 {}
    let engine = engine(&broker);
    let queries = [
        "SELECT \"offset\", timestamp, key, value, headers FROM {t} WHERE key = 'u5' ORDER BY \"offset\"",
        "SELECT \"offset\", value FROM {t} WHERE key IN ('u1', 'u2', 'u22') ORDER BY \"offset\"",
        "SELECT \"offset\" FROM {t} WHERE key = 'u9' AND \"offset\" BETWEEN 100 AND 900 ORDER BY \"offset\"",
        "SELECT count(*) AS n FROM {t} WHERE key = 'u3' AND timestamp >= to_timestamp_millis(1700000004000)",
        "SELECT count(*) AS n FROM {t} WHERE key = 'nobody'",
    ];
    for sql in queries {
        let plain = rows(&engine, &sql.replace("{t}", "plain")).await;
        let sorted = rows(&engine, &sql.replace("{t}", "sorted")).await;
        assert!(!plain.is_empty(), "{sql}");
        assert_eq!(plain, sorted, "{sql}");
    }
}

/// Files under `dir` (at any depth) whose name ends with `suffix`.
fn walk_files(dir: &std::path::Path, suffix: &str) -> usize {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .map(|p| {
            if p.is_dir() {
                walk_files(&p, suffix)
            } else {
                usize::from(p.to_string_lossy().ends_with(suffix))
            }
        })
        .sum()
}
