//! Push benchmarks: herald's push delivery measured the way the source
//! documents measured theirs.
//!
//! - [`fanout`]: seed 002's table, publish-to-deliver latency, losses and
//!   dropped subscribers for N subscribers of one subject at a fixed rate
//!   or at saturation, against herald, core NATS (through [`nats`], a
//!   client of its text protocol), an MQTT 3.1.1 broker (through [`mqtt`])
//!   and the floor with no broker, all with the same clients;
//! - [`rounds`]: seed 003's round, many clients each receiving 20 messages
//!   on their own subject per round, the share of clients late by 1 s;
//! - [`subjects`]: routing throughput with 1M subjects against 1, the same
//!   subscriptions and deliveries;
//! - [`memory`]: broker memory per idle session and per subscription;
//! - [`features`]: what filters, priority and expiry cost against plain
//!   delivery;
//! - [`priority`]: high-priority latency under a normal flood against an
//!   idle subscriber;
//! - [`catch_up`]: bytes a catch-up for one subject among many reads per
//!   byte it delivers, with the subject filters and without.
//!
//! Every scenario is bounded in time and count, prints one JSON row, and
//! asserts nothing about timings; a benchmark script takes medians.

pub mod catch_up;
pub mod fanout;
pub mod features;
pub mod jetstream;
pub mod memory;
pub mod mqtt;
pub mod nats;
pub mod priority;
pub mod publish;
pub mod rounds;
pub mod session;
pub mod socket;
pub mod subjects;

use std::io::{Read, Write};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// Why a push benchmark could not run.
#[derive(Debug, thiserror::Error)]
pub enum PushBenchError {
    /// The push listener could not be reached.
    #[error("connecting to the push listener at {addr}: {reason}")]
    Connect {
        /// The address.
        addr: String,
        /// Why.
        reason: String,
    },
    /// A gRPC call failed.
    #[error("push call failed: {0}")]
    Rpc(#[from] tonic::Status),
    /// The broker refused something the benchmark needs.
    #[error("the broker refused: {0}")]
    Refused(String),
    /// The Kafka side (topic setup, producing) failed.
    #[error(transparent)]
    Kafka(#[from] herald_client::ClientError),
    /// Reading the broker's memory failed.
    #[error("reading /proc/{pid}/status: {reason}")]
    Proc {
        /// The broker's pid.
        pid: u32,
        /// Why.
        reason: String,
    },
}

/// The broker counts as settled below this share of a core ...
const SETTLE_MAX_CORES: f64 = 0.05;
/// ... over a window this long ...
const SETTLE_WINDOW: Duration = Duration::from_millis(250);
/// ... or once this long has passed.
const SETTLE_TIMEOUT: Duration = Duration::from_secs(10);

/// Waits for the broker `pid` to go quiet before a push scenario measures
/// its CPU, so that what the setup left running (subscribing, a previous
/// run's clean-up) is not charged to the run; goes ahead after a timeout.
pub(crate) async fn settle_broker(pid: u32) {
    crate::cpu::settle(pid, SETTLE_WINDOW, SETTLE_MAX_CORES, SETTLE_TIMEOUT).await;
}

/// Nanoseconds since the Unix epoch: the send time carried in a record.
pub fn now_ns() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64)
}

/// The anonymous resident memory of process `pid`, in bytes (the log's
/// mapped files are page cache and counted apart).
pub fn anon_rss_bytes(pid: u32) -> Result<u64, PushBenchError> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/status")).map_err(|e| {
        PushBenchError::Proc {
            pid,
            reason: e.to_string(),
        }
    })?;
    text.lines()
        .find_map(|line| line.strip_prefix("RssAnon:"))
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|kib| kib.parse::<u64>().ok())
        .map(|kib| kib * 1024)
        .ok_or(PushBenchError::Proc {
            pid,
            reason: "no RssAnon line".into(),
        })
}

/// The value of the sample `name` (no labels) in the broker's `/metrics`,
/// read from its admin listener at `admin`.
pub fn metric(admin: &str, name: &str) -> Result<f64, PushBenchError> {
    let failed = |reason: String| {
        PushBenchError::Refused(format!("reading http://{admin}/metrics: {reason}"))
    };
    let mut stream = std::net::TcpStream::connect(admin).map_err(|e| failed(e.to_string()))?;
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .map_err(|e| failed(e.to_string()))?;
    write!(stream, "GET /metrics HTTP/1.0\r\nHost: {admin}\r\n\r\n")
        .map_err(|e| failed(e.to_string()))?;
    let mut text = String::new();
    stream
        .read_to_string(&mut text)
        .map_err(|e| failed(e.to_string()))?;
    text.lines()
        .find_map(|line| {
            line.strip_prefix(name)
                .and_then(|rest| rest.strip_prefix(' '))
        })
        .and_then(|v| v.trim().parse::<f64>().ok())
        .ok_or_else(|| failed(format!("no {name}")))
}
