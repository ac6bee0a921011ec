//! Runs the load generator for about a second against a real `herald serve`
//! on a free port and checks that every acknowledged record is read back.
//! No timing is asserted.

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::Duration;

use herald_loadgen::consume::{self, ConsumeSpec};
use herald_loadgen::produce::{self, ProduceSpec};
use herald_loadgen::progress::Progress;
use herald_loadgen::{admin, latency};

/// The herald binary of this workspace, built in debug mode if missing.
fn herald_binary() -> PathBuf {
    let target = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../target");
    for profile in ["release", "debug"] {
        let path = target.join(profile).join("herald");
        if path.exists() {
            return path;
        }
    }
    let status = Command::new(env!("CARGO"))
        .args(["build", "-p", "herald"])
        .status()
        .expect("run cargo build -p herald");
    assert!(status.success(), "cargo build -p herald failed");
    target.join("debug").join("herald")
}

/// True if this build of herald has an admin HTTP listener to move.
fn has_admin_listener(binary: &PathBuf) -> bool {
    Command::new(binary)
        .args(["serve", "--help"])
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).contains("--admin-listen"))
        .unwrap_or(false)
}

/// A `herald serve` on a free port, killed on drop.
struct Herald {
    child: Child,
    addr: SocketAddr,
    _data: tempfile::TempDir,
}

impl Herald {
    fn start() -> Self {
        let data = tempfile::tempdir().expect("temp dir");
        let binary = herald_binary();
        let mut command = Command::new(&binary);
        command
            .args(["serve", "--kafka-listen", "127.0.0.1:0", "--data-dir"])
            .arg(data.path());
        if has_admin_listener(&binary) {
            // Two servers at once must not both want the default admin port.
            command.args(["--admin-listen", "127.0.0.1:0"]);
        }
        let mut child = command
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn herald");
        let stderr = child.stderr.take().expect("stderr");
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let mut sent = false;
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                if let (false, Some(rest)) = (sent, line.split("kafka listener ready on ").nth(1)) {
                    let addr = rest
                        .split_whitespace()
                        .next()
                        .unwrap_or_default()
                        .to_owned();
                    let _ = tx.send(addr);
                    sent = true;
                }
            }
        });
        let addr = rx
            .recv_timeout(Duration::from_secs(30))
            .expect("herald reports its listener");
        Self {
            child,
            addr: addr.parse().expect("listener address"),
            _data: data,
        }
    }
}

impl Drop for Herald {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
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
    }
}

#[tokio::test(flavor = "current_thread")]
async fn consumed_records_equal_produced_records() {
    let herald = Herald::start();
    admin::create_topic(herald.addr, "roundtrip")
        .await
        .expect("create topic");
    let produced = produce::run(
        &spec(herald.addr, "roundtrip"),
        Arc::new(Progress::default()),
    )
    .await
    .expect("produce");
    assert_eq!(produced.errors, 0, "last error {:?}", produced.last_error);
    assert!(produced.records > 0);

    let consume_spec = ConsumeSpec {
        addr: herald.addr,
        topic: "roundtrip".to_owned(),
        subscribers: 2,
        max_bytes: 1 << 20,
        duration: Duration::from_secs(30),
        min_duration: Duration::ZERO,
        records_max: u64::MAX,
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
    admin::create_topic(herald.addr, "stamps")
        .await
        .expect("create topic");
    let mut spec = spec(herald.addr, "stamps");
    spec.publishers = 1;
    spec.rate = Some(64_000.0);
    let outcome = latency::run(&spec, Arc::new(Progress::default()))
        .await
        .expect("latency run");
    assert!(outcome.produce.records > 0);
    assert!(!outcome.end_to_end_us.is_empty());
}
