//! Runs the load generator for about a second against a real `herald serve`
//! on a free port and checks that every acknowledged record is read back.
//! No timing is asserted.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use herald_testkit::{herald_binary, Server};

use herald_loadgen::consume::{self, ConsumeSpec};
use herald_loadgen::produce::{self, ProduceSpec};
use herald_loadgen::progress::Progress;
use herald_loadgen::{admin, latency};

/// A `herald serve` on free ports, with a data directory that goes with it.
struct Herald {
    server: Server,
    _data: tempfile::TempDir,
}

impl Herald {
    fn start() -> Self {
        let data = tempfile::tempdir().expect("temp dir");
        let server = Server::start(&herald_binary(), data.path(), &[]);
        Self {
            server,
            _data: data,
        }
    }

    fn addr(&self) -> SocketAddr {
        self.server.addr
    }
}

fn spec(addr: SocketAddr, topic: &str) -> ProduceSpec {
    ProduceSpec {
        addr,
        topic: topic.to_owned(),
        batch: 64,
        publishers: 2,
        acks: 1,
        in_flight: 4,
        duration: Duration::from_secs(1),
        records_max: 2_000_000,
        rate: None,
        stamp: false,
        security: Default::default(),
    }
}

#[tokio::test(flavor = "current_thread")]
async fn consumed_records_equal_produced_records() {
    let herald = Herald::start();
    admin::create_topic(herald.addr(), "roundtrip")
        .await
        .expect("create topic");
    let produced = produce::run(
        &spec(herald.addr(), "roundtrip"),
        Arc::new(Progress::default()),
    )
    .await
    .expect("produce");
    assert_eq!(produced.errors, 0, "last error {:?}", produced.last_error);
    assert!(produced.records > 0);

    let consume_spec = ConsumeSpec {
        addr: herald.addr(),
        topic: "roundtrip".to_owned(),
        subscribers: 2,
        max_bytes: 1 << 20,
        duration: Duration::from_secs(30),
        min_duration: Duration::ZERO,
        records_max: u64::MAX,
        security: Default::default(),
    };
    let consumed = consume::run(&consume_spec, Arc::new(Progress::default()))
        .await
        .expect("consume");
    assert_eq!(consumed.records, 2 * produced.records);
    assert_eq!(consumed.bytes, 2 * produced.bytes);
}

#[tokio::test(flavor = "current_thread")]
async fn latency_run_reads_back_its_stamps() {
    let herald = Herald::start();
    admin::create_topic(herald.addr(), "stamps")
        .await
        .expect("create topic");
    let mut spec = spec(herald.addr(), "stamps");
    spec.publishers = 1;
    spec.rate = Some(64_000.0);
    let outcome = latency::run(&spec, Arc::new(Progress::default()))
        .await
        .expect("latency run");
    assert!(outcome.produce.records > 0);
    assert!(!outcome.end_to_end_us.is_empty());
}
