//! The admin listener: /health, /ready and /metrics, whose counters move by
//! exactly what a known workload did (parsed as Prometheus text): requests,
//! partition state, log flushes and consumer group lag.

mod common;

use std::io::{Read as _, Write as _};
use std::net::{SocketAddr, TcpStream};

use common::{batch, create_topic, fetch, produce, s, Client, IO_TIMEOUT};
use kafka_protocol::messages::{
    offset_commit_request, ApiKey, GroupId, OffsetCommitRequest, OffsetCommitResponse, TopicName,
};
use prometheus_parse::{Sample, Scrape, Value};

/// GETs `path`; returns (status, body).
fn get(addr: SocketAddr, path: &str) -> (u16, String) {
    let mut stream = TcpStream::connect(addr).expect("connect admin");
    stream.set_read_timeout(Some(IO_TIMEOUT)).expect("timeout");
    write!(
        stream,
        "GET {path} HTTP/1.1\r\nHost: herald\r\nConnection: close\r\n\r\n"
    )
    .expect("send");
    let mut response = String::new();
    stream.read_to_string(&mut response).expect("read");
    let status = response
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .expect("status code");
    let body = response
        .split_once("\r\n\r\n")
        .map(|(_, b)| b.to_owned())
        .unwrap_or_default();
    (status, body)
}

fn scrape(addr: SocketAddr) -> Vec<Sample> {
    let (status, body) = get(addr, "/metrics");
    assert_eq!(status, 200);
    Scrape::parse(body.lines().map(|l| Ok(l.to_owned())))
        .expect("valid Prometheus text")
        .samples
}

/// The value of `name` with every label of `labels`, 0 if absent.
fn value(samples: &[Sample], name: &str, labels: &[(&str, &str)]) -> f64 {
    samples
        .iter()
        .find(|s| s.metric == name && labels.iter().all(|(k, v)| s.labels.get(k) == Some(*v)))
        .map_or(0.0, |s| match &s.value {
            Value::Counter(v) | Value::Gauge(v) | Value::Untyped(v) => *v,
            Value::Histogram(buckets) => buckets.last().map_or(0.0, |b| b.count),
            Value::Summary(_) => f64::NAN,
        })
}

/// The value of `name` with every label of `labels`, `None` if absent.
fn find(samples: &[Sample], name: &str, labels: &[(&str, &str)]) -> Option<f64> {
    samples
        .iter()
        .any(|s| s.metric == name && labels.iter().all(|(k, v)| s.labels.get(k) == Some(*v)))
        .then(|| value(samples, name, labels))
}

/// The cumulative bucket counts of the unlabelled histogram `name`.
fn histogram_buckets(samples: &[Sample], name: &str) -> Vec<(f64, f64)> {
    samples
        .iter()
        .find_map(|s| match &s.value {
            Value::Histogram(buckets) if s.metric == name => Some(
                buckets
                    .iter()
                    .map(|b| (b.less_than, b.count))
                    .collect::<Vec<_>>(),
            ),
            _ => None,
        })
        .unwrap_or_else(|| panic!("histogram {name} missing"))
}

/// Commits `offsets` (partition, offset) of `topic` for `group` as a
/// simple (generation -1) commit; every partition must be accepted.
fn commit(client: &mut Client, group: &str, topic: &str, offsets: &[(i32, i64)]) {
    let request = OffsetCommitRequest::default()
        .with_group_id(GroupId(s(group)))
        .with_generation_id_or_member_epoch(-1)
        .with_topics(vec![
            offset_commit_request::OffsetCommitRequestTopic::default()
                .with_name(TopicName(s(topic)))
                .with_partitions(
                    offsets
                        .iter()
                        .map(|&(partition, offset)| {
                            offset_commit_request::OffsetCommitRequestPartition::default()
                                .with_partition_index(partition)
                                .with_committed_offset(offset)
                        })
                        .collect(),
                ),
        ]);
    let response: OffsetCommitResponse = client.call(ApiKey::OffsetCommit, 8, &request);
    for partition in &response.topics[0].partitions {
        assert_eq!(partition.error_code, 0, "commit of {partition:?}");
    }
}

#[test]
fn health_and_ready_answer_200_while_serving() {
    let dir = tempfile::tempdir().expect("tempdir");
    let server = common::start(dir.path(), &[]);
    assert_eq!(get(server.admin_addr, "/health"), (200, "ok\n".to_owned()));
    assert_eq!(get(server.admin_addr, "/ready").0, 200);
    assert_eq!(get(server.admin_addr, "/nothing").0, 404);
}

#[test]
fn metrics_count_requests_bytes_and_partition_state_of_a_workload() {
    let dir = tempfile::tempdir().expect("tempdir");
    let server = common::start(dir.path(), &[]);
    let mut client = Client::connect(server.addr);
    assert_eq!(create_topic(&mut client, "measured", 1, &[]), 0);
    let before = scrape(server.admin_addr);

    let records_per_batch = 10;
    let batches = 5;
    let one = batch(records_per_batch, &[7u8; 100]);
    for _ in 0..batches {
        let (error, _) = produce(&mut client, "measured", 0, one.clone());
        assert_eq!(error, 0);
    }
    let fetched = fetch(&mut client, "measured", 0, 0);
    assert_eq!(fetched.error_code, 0);
    let after = scrape(server.admin_addr);

    let produce_label = [("api", "Produce")];
    let delta = |name: &str, labels: &[(&str, &str)]| {
        value(&after, name, labels) - value(&before, name, labels)
    };
    assert_eq!(
        delta("herald_kafka_requests_total", &produce_label),
        batches as f64
    );
    assert_eq!(
        delta("herald_kafka_requests_total", &[("api", "Fetch")]),
        1.0
    );
    assert_eq!(
        delta(
            "herald_kafka_request_duration_seconds_count",
            &produce_label
        ),
        batches as f64
    );
    // Every produce frame carries at least its batch; the fetch answer carries all of them.
    let batch_bytes = one.len() as f64;
    assert!(delta("herald_kafka_received_bytes_total", &[]) >= batch_bytes * batches as f64);
    assert!(delta("herald_kafka_sent_bytes_total", &[]) >= batch_bytes * batches as f64);
    assert_eq!(value(&after, "herald_kafka_connections_open", &[]), 1.0);

    let partition = [("topic", "measured"), ("partition", "0")];
    assert_eq!(
        value(&after, "herald_partition_high_watermark", &partition),
        f64::from(records_per_batch * batches)
    );
    assert_eq!(
        value(&after, "herald_partition_log_segments", &partition),
        1.0
    );
    assert!(
        value(&after, "herald_partition_log_size_bytes", &partition)
            >= batch_bytes * batches as f64
    );
    // A single node's partition: one replica, in sync, never
    // under-replicated.
    assert_eq!(value(&after, "herald_partition_replicas", &partition), 1.0);
    assert_eq!(
        value(&after, "herald_partition_in_sync_replicas", &partition),
        1.0
    );
    assert_eq!(
        value(&after, "herald_partition_under_replicated", &partition),
        0.0
    );
    // The topic keeps no key-sorted copies: none on disk, none waited for.
    for name in [
        "herald_partition_key_copy_bytes",
        "herald_partition_key_copy_pending_segments",
    ] {
        assert_eq!(value(&after, name, &partition), 0.0, "{name}");
    }
    // The history indexer reaches the tail: its lag falls to nothing.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    loop {
        let lag = value(
            &scrape(server.admin_addr),
            "herald_partition_history_index_lag_records",
            &partition,
        );
        if lag == 0.0 {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "history lag stays {lag}"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

#[test]
fn every_append_fsyncs_are_timed_and_counted() {
    let dir = tempfile::tempdir().expect("tempdir");
    let server = common::start(dir.path(), &["--flush", "every-append"]);
    let mut client = Client::connect(server.addr);
    assert_eq!(create_topic(&mut client, "durable", 1, &[]), 0);
    let before = scrape(server.admin_addr);

    let appends = 5;
    for _ in 0..appends {
        let (error, _) = produce(&mut client, "durable", 0, batch(3, &[1u8; 64]));
        assert_eq!(error, 0);
    }
    let after = scrape(server.admin_addr);
    let delta = |name: &str, labels: &[(&str, &str)]| {
        value(&after, name, labels) - value(&before, name, labels)
    };

    // Each acknowledged append is covered by an fsync; concurrent ones may
    // share one (group commit), so at least one and at most one per append.
    let histogram = "herald_log_fsync_duration_seconds";
    let fsyncs = delta(&format!("{histogram}_count"), &[]);
    assert!(
        (1.0..=f64::from(appends)).contains(&fsyncs),
        "{fsyncs} fsyncs for {appends} appends"
    );
    assert!(delta(&format!("{histogram}_sum"), &[]) > 0.0);
    let buckets = histogram_buckets(&after, histogram);
    assert!(
        buckets
            .windows(2)
            .all(|w| w[0].0 < w[1].0 && w[0].1 <= w[1].1),
        "buckets are cumulative: {buckets:?}"
    );
    assert_eq!(buckets.last().map(|b| b.0), Some(f64::INFINITY));
    assert_eq!(
        buckets.last().map(|b| b.1),
        Some(value(&after, &format!("{histogram}_count"), &[])),
        "the +Inf bucket holds every fsync"
    );

    let partition = [("topic", "durable"), ("partition", "0")];
    let partition_fsyncs = delta("herald_partition_log_fsyncs_total", &partition);
    assert!(
        (1.0..=fsyncs).contains(&partition_fsyncs),
        "{partition_fsyncs} fsyncs of the partition, {fsyncs} in all"
    );
    assert!(delta("herald_partition_log_fsync_seconds_total", &partition) > 0.0);
}

#[test]
fn group_lag_is_the_high_watermark_minus_the_committed_offset() {
    let dir = tempfile::tempdir().expect("tempdir");
    let server = common::start(dir.path(), &[]);
    let mut client = Client::connect(server.addr);
    assert_eq!(create_topic(&mut client, "consumed", 2, &[]), 0);
    for _ in 0..3 {
        assert_eq!(produce(&mut client, "consumed", 0, batch(10, b"v")).0, 0);
    }
    assert_eq!(produce(&mut client, "consumed", 1, batch(4, b"v")).0, 0);
    let offsets_log = [("topic", "__consumer_offsets"), ("partition", "0")];
    let before = scrape(server.admin_addr);
    assert_eq!(find(&before, "herald_group_lag", &[]), None, "no group yet");

    let committed = [(0, 12), (1, 4)];
    commit(&mut client, "lagging", "consumed", &committed);
    let after = scrape(server.admin_addr);

    for (partition, offset) in committed {
        let index = partition.to_string();
        let labels = [
            ("group", "lagging"),
            ("topic", "consumed"),
            ("partition", index.as_str()),
        ];
        let high_watermark = value(
            &after,
            "herald_partition_high_watermark",
            &[("topic", "consumed"), ("partition", index.as_str())],
        );
        assert_eq!(
            find(&after, "herald_group_committed_offset", &labels),
            Some(offset as f64)
        );
        assert_eq!(
            find(&after, "herald_group_lag", &labels),
            Some(high_watermark - offset as f64),
            "lag of partition {partition}"
        );
    }
    assert_eq!(
        find(
            &after,
            "herald_group_lag",
            &[("group", "lagging"), ("partition", "0")]
        ),
        Some(18.0)
    );
    // The commit was made durable by an fsync of the offsets partition.
    let offsets_fsyncs = value(&after, "herald_partition_log_fsyncs_total", &offsets_log)
        - value(&before, "herald_partition_log_fsyncs_total", &offsets_log);
    assert!(offsets_fsyncs >= 1.0, "{offsets_fsyncs} offsets fsyncs");
    assert!(
        value(&after, "herald_log_fsync_duration_seconds_count", &[])
            - value(&before, "herald_log_fsync_duration_seconds_count", &[])
            >= offsets_fsyncs
    );
}

/// Every `.log` segment file of partition `partition` of `topic`.
fn segment_files(data: &std::path::Path, topic: &str, partition: u32) -> Vec<std::path::PathBuf> {
    let dir = data.join(format!("{topic}-{partition}"));
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .expect("partition directory")
        .map(|e| e.expect("entry").path())
        .collect();
    files.sort();
    files
}

#[test]
fn a_damaged_partition_is_reported_and_refused_while_the_others_serve() {
    let dir = tempfile::tempdir().expect("tempdir");
    {
        let server = common::start(dir.path(), &[]);
        let mut client = Client::connect(server.addr);
        assert_eq!(create_topic(&mut client, "fragile", 2, &[]), 0);
        for partition in [0, 1] {
            assert_eq!(
                produce(&mut client, "fragile", partition, batch(5, b"safe")).0,
                0
            );
        }
        assert!(server.terminate().success());
    }
    // Damage a record of partition 0 (its CRC no longer matches) and remove
    // the segment's index, so the next start scans the bytes it had
    // recorded as durable and finds them damaged.
    let files = segment_files(dir.path(), "fragile", 0);
    let log = files
        .iter()
        .find(|p| p.extension().is_some_and(|e| e == "log"))
        .expect("a segment file");
    let mut bytes = std::fs::read(log).expect("read segment");
    bytes[70] ^= 0xff;
    std::fs::write(log, bytes).expect("damage segment");
    for index in files
        .iter()
        .filter(|p| p.extension().is_some_and(|e| e == "index"))
    {
        std::fs::remove_file(index).expect("remove index");
    }

    let server = common::start(dir.path(), &[]);
    let mut client = Client::connect(server.addr);
    // The broker serves the healthy partition...
    let (error, base) = produce(&mut client, "fragile", 1, batch(1, b"more"));
    assert_eq!((error, base), (0, 5), "the healthy partition takes appends");
    assert_eq!(fetch(&mut client, "fragile", 1, 0).error_code, 0);
    // ...and refuses the damaged one with KAFKA_STORAGE_ERROR (56).
    assert_eq!(produce(&mut client, "fragile", 0, batch(1, b"x")).0, 56);
    assert_eq!(fetch(&mut client, "fragile", 0, 0).error_code, 56);
    // /ready names it, and the metric flags it.
    let (status, body) = get(server.admin_addr, "/ready");
    assert_eq!(status, 503, "{body}");
    assert!(
        body.contains("partition fragile-0 storage failed") && body.contains("corrupt"),
        "{body}"
    );
    assert!(!body.contains("fragile-1"), "{body}");
    let samples = scrape(server.admin_addr);
    let failed = |p: &str| {
        find(
            &samples,
            "herald_partition_storage_failed",
            &[("topic", "fragile"), ("partition", p)],
        )
    };
    assert_eq!(failed("0"), Some(1.0));
    assert_eq!(failed("1"), Some(0.0));
    assert!(server.terminate().success());
}

#[test]
fn a_partition_poisoned_while_serving_is_reported_and_refused_while_its_neighbour_serves() {
    let dir = tempfile::tempdir().expect("tempdir");
    let server = common::start(dir.path(), &[]);
    let mut client = Client::connect(server.addr);
    assert_eq!(
        create_topic(&mut client, "t", 2, &[("segment.bytes", "4096")]),
        0
    );
    // Enough to roll partition 0's first segment: the new segment file
    // leaves its directory to be fsynced by the next maintenance pass.
    for _ in 0..6 {
        assert_eq!(produce(&mut client, "t", 0, batch(1, &[7u8; 1000])).0, 0);
    }
    assert_eq!(produce(&mut client, "t", 1, batch(2, b"fine")).0, 0);
    // The directory disappears under the running broker: that fsync fails,
    // and a failed fsync poisons the log.
    std::fs::rename(dir.path().join("t-0"), dir.path().join("t-0.unreachable"))
        .expect("move partition 0's directory away");
    // Maintenance runs about once a second; the wait is bounded.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    let body = loop {
        let (status, body) = get(server.admin_addr, "/ready");
        if status == 503 {
            break body;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the partition was not reported failed within 30 s"
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    };
    assert!(
        body.contains("partition t-0 storage failed") && body.contains("fsync"),
        "/ready names the partition and the failed call: {body}"
    );
    assert!(!body.contains("t-1"), "{body}");
    // Requests to it are refused with KAFKA_STORAGE_ERROR...
    assert_eq!(produce(&mut client, "t", 0, batch(1, b"refused")).0, 56);
    assert_eq!(fetch(&mut client, "t", 0, 0).error_code, 56);
    // ...while the other partition is served as before.
    assert_eq!(produce(&mut client, "t", 1, batch(1, b"more")), (0, 2));
    assert_eq!(fetch(&mut client, "t", 1, 0).error_code, 0);
    let samples = scrape(server.admin_addr);
    let failed = |p: &str| {
        find(
            &samples,
            "herald_partition_storage_failed",
            &[("topic", "t"), ("partition", p)],
        )
    };
    assert_eq!(failed("0"), Some(1.0));
    assert_eq!(failed("1"), Some(0.0));
    assert_eq!(get(server.admin_addr, "/health").0, 200);
}
