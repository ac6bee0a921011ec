//! Snapshots against real logs: the cut, the view, pins against retention
//! and DeleteRecords, persistence, expiry, and refusals.

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use herald_broker::snapshots::{view_name, SnapshotError, SnapshotSpec};
use herald_broker::{Acks, Broker, BrokerConfig, BrokerError, OffsetSpec, StorageError, Topic};
use herald_records::testing;

fn open(dir: &std::path::Path) -> Arc<Broker> {
    Broker::open(BrokerConfig::new(dir)).expect("open broker")
}

async fn produce(topic: &Topic, partition: i32, batches: u32, timestamp: i64) {
    let p = topic.partition(partition).expect("partition");
    for _ in 0..batches {
        p.append(
            &testing::batch(2, b"0123456789abcdef", timestamp),
            Acks::Leader,
        )
        .await
        .expect("append");
    }
}

fn spec(id: &str, topics: Vec<Arc<Topic>>) -> SnapshotSpec {
    SnapshotSpec {
        id: Some(id.to_owned()),
        topics,
        ttl: None,
        ephemeral: false,
    }
}

#[tokio::test]
async fn a_view_ends_at_the_cut_while_the_topic_grows() {
    let dir = tempfile::tempdir().unwrap();
    let broker = open(dir.path());
    broker.create_topic("orders", Some(2), &[], false).unwrap();
    let topic = broker.topic("orders").unwrap();
    produce(&topic, 0, 5, 1_000).await;
    produce(&topic, 1, 3, 2_000).await;
    let snapshot = broker
        .take_snapshot(spec("s1", vec![Arc::clone(&topic)]), SystemTime::now())
        .await
        .unwrap();
    assert_eq!(snapshot.records(), 16);
    assert_eq!(snapshot.topics[0].partitions[0].end, 10);
    assert_eq!(snapshot.topics[0].partitions[1].end, 6);
    // testing::batch stamps its records a millisecond apart.
    assert_eq!(snapshot.time_range(), Some((1_000, 2_001)));
    assert!(snapshot.bytes() > 0);
    produce(&topic, 0, 4, 3_000).await;

    let view = broker
        .snapshots()
        .view(&view_name("s1", "orders"))
        .expect("the view is served");
    assert!(broker.snapshots().view_by_id(view.id()).is_some());
    let p0 = view.partition(0).unwrap();
    assert_eq!(p0.watermarks().high_watermark, 10);
    assert_eq!(p0.watermarks().log_start_offset, 0);
    let read = p0.read(0, 1 << 20).unwrap();
    assert_eq!(read.next_offset, 10, "the read stops at the cut");
    assert!(matches!(
        p0.read(11, 1 << 20),
        Err(StorageError::OffsetOutOfRange { .. })
    ));
    assert!(p0.read(10, 1 << 20).unwrap().bytes.is_empty());
    let latest = p0.list_offset(OffsetSpec::Latest).await.unwrap().unwrap();
    assert_eq!(latest.offset, 10);
    let late = p0.list_offset(OffsetSpec::Timestamp(2_500)).await.unwrap();
    assert_eq!(late, None, "records past the cut do not answer");
    let max = p0
        .list_offset(OffsetSpec::MaxTimestamp)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(max.timestamp, 1_001);
    assert_eq!(
        topic.partition(0).unwrap().watermarks().high_watermark,
        18,
        "the topic itself goes on"
    );
}

#[tokio::test]
async fn pinned_records_outlive_retention_and_delete_records_until_the_snapshot_goes() {
    let dir = tempfile::tempdir().unwrap();
    let broker = open(dir.path());
    let configs = [
        ("segment.bytes".to_owned(), "4096".to_owned()),
        ("retention.bytes".to_owned(), "8192".to_owned()),
    ];
    broker
        .create_topic("events", Some(1), &configs, false)
        .unwrap();
    let topic = broker.topic("events").unwrap();
    produce(&topic, 0, 50, 1_000).await;
    broker
        .take_snapshot(spec("keep", vec![Arc::clone(&topic)]), SystemTime::now())
        .await
        .unwrap();
    produce(&topic, 0, 300, 2_000).await;
    broker.maintain(SystemTime::now());
    let partition = topic.partition(0).unwrap();
    assert_eq!(
        partition.watermarks().log_start_offset,
        0,
        "retention held back"
    );
    assert!(matches!(
        partition.truncate_before(10).await,
        Err(StorageError::Pinned { floor: 0, .. })
    ));
    assert!(matches!(
        broker.delete_topic("events"),
        Err(BrokerError::TopicPinned { .. })
    ));

    broker.snapshots().delete("keep").await.unwrap();
    assert!(broker
        .snapshots()
        .view(&view_name("keep", "events"))
        .is_none());
    broker.maintain(SystemTime::now());
    assert!(
        partition.watermarks().log_start_offset > 0,
        "retention caught up"
    );
    broker.delete_topic("events").unwrap();
}

#[tokio::test]
async fn snapshots_and_their_pins_survive_a_restart_and_expire() {
    let dir = tempfile::tempdir().unwrap();
    let configs = [
        ("segment.bytes".to_owned(), "4096".to_owned()),
        ("retention.bytes".to_owned(), "8192".to_owned()),
    ];
    {
        let broker = open(dir.path());
        broker.create_topic("t", Some(1), &configs, false).unwrap();
        let topic = broker.topic("t").unwrap();
        produce(&topic, 0, 50, 1_000).await;
        let mut with_ttl = spec("brief", vec![Arc::clone(&topic)]);
        with_ttl.ttl = Some(Duration::from_secs(60));
        broker
            .take_snapshot(with_ttl, SystemTime::now())
            .await
            .unwrap();
        broker.close().unwrap();
    }
    let broker = open(dir.path());
    let topic = broker.topic("t").unwrap();
    produce(&topic, 0, 300, 2_000).await;
    broker.maintain(SystemTime::now());
    assert_eq!(
        topic.partition(0).unwrap().watermarks().log_start_offset,
        0,
        "the pin came back with the snapshot"
    );
    let view = broker.snapshots().view("__snapshot.brief.t").unwrap();
    assert_eq!(view.partition(0).unwrap().watermarks().high_watermark, 100);

    broker.maintain(SystemTime::now() + Duration::from_secs(61));
    assert!(broker.snapshots().get("brief").is_none(), "expired");
    broker.maintain(SystemTime::now());
    assert!(topic.partition(0).unwrap().watermarks().log_start_offset > 0);
    drop(topic);
    broker.close().unwrap();
    drop(broker);
    let broker = open(dir.path());
    assert!(broker.snapshots().list().is_empty(), "the expiry was kept");
}

#[tokio::test]
async fn bad_requests_are_refused_and_change_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let broker = open(dir.path());
    broker.create_topic("a", Some(1), &[], false).unwrap();
    let a = broker.topic("a").unwrap();
    let snapshots = broker.snapshots();
    let now = SystemTime::now();
    for bad in ["", "has.dot", "spa ce", &"x".repeat(65)] {
        assert!(matches!(
            broker
                .take_snapshot(spec(bad, vec![Arc::clone(&a)]), now)
                .await,
            Err(SnapshotError::InvalidId { .. })
        ));
    }
    assert_eq!(
        broker.take_snapshot(spec("none", vec![]), now).await,
        Err(SnapshotError::NoTopics)
    );
    assert!(matches!(
        broker
            .take_snapshot(spec("twice", vec![Arc::clone(&a), Arc::clone(&a)]), now)
            .await,
        Err(SnapshotError::DuplicateTopic { .. })
    ));
    broker
        .take_snapshot(spec("one", vec![Arc::clone(&a)]), now)
        .await
        .unwrap();
    assert!(matches!(
        broker
            .take_snapshot(spec("one", vec![Arc::clone(&a)]), now)
            .await,
        Err(SnapshotError::Exists { .. })
    ));
    assert!(matches!(
        snapshots.delete("nope").await,
        Err(SnapshotError::Unknown { .. })
    ));
    assert!(matches!(
        broker.create_topic("__snapshot.one.a", Some(1), &[], false),
        Err(BrokerError::InvalidTopicName { .. })
    ));
    assert_eq!(snapshots.list().len(), 1);
}

#[tokio::test]
async fn a_restore_recreates_a_views_batches_at_their_offsets_and_nothing_on_failure() {
    let dir = tempfile::tempdir().unwrap();
    let broker = open(dir.path());
    broker.create_topic("src", Some(2), &[], false).unwrap();
    let topic = broker.topic("src").unwrap();
    produce(&topic, 0, 5, 1_000).await;
    produce(&topic, 1, 4, 1_000).await;
    // A log start inside a batch (DeleteRecords of 3 records).
    topic
        .partition(1)
        .unwrap()
        .truncate_before(3)
        .await
        .unwrap();
    broker
        .take_snapshot(spec("b", vec![Arc::clone(&topic)]), SystemTime::now())
        .await
        .unwrap();
    let view = broker.snapshots().view("__snapshot.b.src").unwrap();
    let stored: Vec<(u64, u64, bytes::Bytes)> = view
        .partitions()
        .iter()
        .map(|p| {
            let (start, end) = p.range();
            (start, end, p.read(start, 1 << 20).unwrap().bytes)
        })
        .collect();
    assert_eq!((stored[1].0, stored[1].1), (3, 8));

    let ranges: Vec<(u64, u64)> = stored.iter().map(|(s, e, _)| (*s, *e)).collect();
    let mut restore = broker.begin_restore("copy", &[], &ranges).unwrap();
    assert!(
        matches!(
            broker.create_topic("copy", Some(1), &[], false),
            Err(BrokerError::TopicExists { .. })
        ),
        "the name is reserved while restoring"
    );
    assert!(
        broker.topic("copy").is_none(),
        "not visible before it is whole"
    );
    for (partition, (_, _, bytes)) in stored.iter().enumerate() {
        for batch in herald_records::batches(bytes) {
            restore.append(partition, batch.unwrap()).unwrap();
        }
    }
    restore.finish().unwrap();
    let copy = broker.topic("copy").unwrap();
    for (partition, (start, end, bytes)) in stored.iter().enumerate() {
        let p = copy.partition(partition as i32).unwrap();
        assert_eq!(p.watermarks().log_start_offset, *start);
        assert_eq!(p.watermarks().high_watermark, *end);
        assert_eq!(
            &p.read(*start, 1 << 20).await.unwrap().bytes,
            bytes,
            "byte for byte"
        );
    }

    // Out of order: refused, and nothing is left.
    let mut restore = broker.begin_restore("broken", &[], &ranges[..1]).unwrap();
    let batches: Vec<&[u8]> = herald_records::batches(&stored[0].2)
        .map(Result::unwrap)
        .collect();
    restore.append(0, batches[0]).unwrap();
    assert!(matches!(
        restore.append(0, batches[2]),
        Err(BrokerError::InvalidRestore(_))
    ));
    drop(restore);
    assert!(broker.topic("broken").is_none());
    let restore = broker.begin_restore("short", &[], &ranges[..1]).unwrap();
    assert!(matches!(
        restore.finish(),
        Err(BrokerError::InvalidRestore(_))
    ));
    assert!(broker.topic("short").is_none());
    broker.create_topic("short", Some(1), &[], false).unwrap();
}

/// The history indexer thread builds every log's key index behind the
/// tail: a view's key lookup then names only the batches holding the key,
/// and stopping the thread leaves the broker serving.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_history_indexer_thread_indexes_keys_behind_the_tail() {
    use herald_records::{BatchBuilder, RecordFields};
    let dir = tempfile::tempdir().unwrap();
    let broker = open(dir.path());
    broker.create_topic("devices", Some(1), &[], false).unwrap();
    let topic = broker.topic("devices").unwrap();
    let partition = topic.partition(0).unwrap();
    let indexer = herald_broker::HistoryIndexer::start(&broker).unwrap();
    for b in 0..40i64 {
        let key = format!("d{}", b % 4);
        let mut builder = BatchBuilder::new(1_000);
        builder.push(RecordFields {
            timestamp_ms: 1_000 + b,
            key: Some(key.as_bytes()),
            value: Some(b"reading"),
            headers: &[],
        });
        partition
            .append(&builder.finish().unwrap(), Acks::Leader)
            .await
            .unwrap();
    }
    broker
        .take_snapshot(spec("s", vec![Arc::clone(&topic)]), SystemTime::now())
        .await
        .unwrap();
    let view = broker.snapshots().view(&view_name("s", "devices")).unwrap();
    let p0 = view.partition(0).unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    let found = loop {
        let found = p0.key_batches(b"d1", 0, 40, usize::MAX);
        if found.unindexed_from == 40 {
            break found;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "never indexed: {found:?}"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    };
    assert_eq!(
        found.last_offsets,
        (0..40).filter(|b| b % 4 == 1).collect::<Vec<u64>>()
    );
    indexer.stop();
    produce(&topic, 0, 1, 2_000).await;
    assert_eq!(topic.partition(0).unwrap().watermarks().high_watermark, 42);
}

/// An ephemeral cut (a SQL query's) is served like any snapshot while it
/// lives, but never saved: deleting it leaves the saved ones as they were,
/// and a restart knows only those.
#[tokio::test]
async fn ephemeral_snapshots_are_served_but_never_saved() {
    let dir = tempfile::tempdir().unwrap();
    {
        let broker = open(dir.path());
        broker.create_topic("t", Some(1), &[], false).unwrap();
        let topic = broker.topic("t").unwrap();
        produce(&topic, 0, 3, 1_000).await;
        broker
            .take_snapshot(spec("kept", vec![Arc::clone(&topic)]), SystemTime::now())
            .await
            .unwrap();
        let mut brief = spec("brief", vec![Arc::clone(&topic)]);
        brief.ephemeral = true;
        broker
            .take_snapshot(brief, SystemTime::now())
            .await
            .unwrap();
        produce(&topic, 0, 1, 2_000).await;
        let view = broker.snapshots().view("__snapshot.brief.t").unwrap();
        assert_eq!(view.partition(0).unwrap().watermarks().high_watermark, 6);
        let mut other = spec("brief2", vec![Arc::clone(&topic)]);
        other.ephemeral = true;
        broker
            .take_snapshot(other, SystemTime::now())
            .await
            .unwrap();
        broker.snapshots().delete("brief2").await.unwrap();
        broker.close().unwrap();
    }
    let broker = open(dir.path());
    let ids: Vec<String> = broker
        .snapshots()
        .list()
        .iter()
        .map(|s| s.id.clone())
        .collect();
    assert_eq!(ids, ["kept"]);
}
