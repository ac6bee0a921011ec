//! The admin listener: /health, /ready and /metrics, whose counters move by
//! exactly what a known workload did (parsed as Prometheus text).

mod common;

use std::io::{Read as _, Write as _};
use std::net::{SocketAddr, TcpStream};

use common::{batch, create_topic, fetch, produce, Client, Server, IO_TIMEOUT};
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

#[test]
fn health_and_ready_answer_200_while_serving() {
    let dir = tempfile::tempdir().expect("tempdir");
    let server = Server::start(dir.path(), &[]);
    assert_eq!(get(server.admin_addr, "/health"), (200, "ok\n".to_owned()));
    assert_eq!(get(server.admin_addr, "/ready").0, 200);
    assert_eq!(get(server.admin_addr, "/nothing").0, 404);
}

#[test]
fn metrics_count_requests_bytes_and_partition_state_of_a_workload() {
    let dir = tempfile::tempdir().expect("tempdir");
    let server = Server::start(dir.path(), &[]);
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
}
