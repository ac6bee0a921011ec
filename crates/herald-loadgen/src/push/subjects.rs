//! Routing with a million subjects against one: the same subscriptions
//! (by default 100,000 literal subjects over 100 connections) and the same
//! share of records delivered (one in ten), differing only in how many
//! distinct keys the records carry.
//!
//! - `many`: record j has key `k.(j mod subjects)`; the subscribed subjects
//!   are every tenth, so one record in ten is delivered, spread over every
//!   subscription.
//! - `one`: one record in ten has key `k.0` (subscribed), the others `k.1`
//!   (not subscribed): two distinct keys, every delivery to one
//!   subscription on one connection.
//! - `few`: the delivered tenth goes to the same connections in the same
//!   order as with `many` (a thousand deliveries in a row to one
//!   connection, then the next), but over only `FEW_PER_CONNECTION`
//!   subjects of each connection, taken in turn; the others cycle through
//!   `FEW_UNSUBSCRIBED` unsubscribed keys. About 1,700 distinct keys
//!   instead of a million, spread over the partitions as `many`'s are,
//!   with rarely two consecutive records of a partition on one key (so the
//!   tailer looks nearly every record up on its own, as with `many`).
//!   Against `many`, only the number of subjects differs: what the
//!   subject count itself costs.
//!
//! Throughput is records over the time from the first publish to the last
//! delivery; the batches are built before the clock starts. With the
//! broker's PID, its CPU time over the same span (from `/proc`, after it
//! went quiet) gives its CPU per delivery, whatever the clients cost: they
//! share the machine's cores.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use herald_client::Connection;
use herald_gateway::proto::server_message::Kind;
use serde::Serialize;

use super::session::Session;
use super::PushBenchError;

/// Which key distribution.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum Keys {
    /// Keys over every subject.
    Many,
    /// Two keys, one subscribed.
    One,
    /// `many`'s deliveries over a few subjects per connection.
    Few,
}

/// What to run.
#[derive(Debug, Clone)]
pub struct Subjects {
    /// The push listener.
    pub push: String,
    /// The Kafka listener (publishing).
    pub bootstrap: String,
    /// The topic (it must exist).
    pub topic: String,
    /// Its partitions.
    pub partitions: u32,
    /// Distinct subjects records may carry.
    pub subjects: u64,
    /// Subscriptions, each to one subject.
    pub subscriptions: u64,
    /// Connections they are spread over.
    pub connections: u64,
    /// Records published.
    pub records: u64,
    /// The key distribution.
    pub keys: Keys,
    /// The broker's process, for its CPU time.
    pub broker_pid: Option<u32>,
}

/// One run's figures.
#[derive(Debug, Clone, Serialize)]
pub struct SubjectsRow {
    /// `subjects`.
    pub scenario: &'static str,
    /// The key distribution.
    pub keys: Keys,
    /// Distinct subjects of the run (2 for `one`).
    pub distinct_keys: u64,
    /// Subscriptions.
    pub subscriptions: u64,
    /// Records published.
    pub records: u64,
    /// Deliveries received.
    pub delivered: u64,
    /// Seconds to publish.
    pub publish_secs: f64,
    /// Seconds from the first publish to the last delivery.
    pub total_secs: f64,
    /// `records / total_secs`.
    pub records_per_sec: f64,
    /// Broker CPU time from the first publish to the last delivery, per
    /// delivery (with `--broker-pid`).
    pub broker_ns_per_delivery: Option<f64>,
}

/// Subjects of each connection `few` delivers to: enough that one
/// connection's deliveries spread over the partitions.
const FEW_PER_CONNECTION: u64 = 16;
/// Unsubscribed keys `few` cycles through: enough that each partition gets
/// several, interleaved.
const FEW_UNSUBSCRIBED: u64 = 64;

/// Longest wait for the deliveries after publishing.
const DELIVERY_WAIT: Duration = Duration::from_secs(120);

/// Runs one measurement.
pub async fn run(plan: &Subjects) -> Result<SubjectsRow, PushBenchError> {
    let stride = (plan.subjects / plan.subscriptions.max(1)).max(1);
    let per_connection = plan.subscriptions.div_ceil(plan.connections.max(1));
    let delivered = Arc::new(AtomicU64::new(0));
    let mut readers = Vec::new();
    for connection in 0..plan.connections {
        let first = connection * per_connection;
        let last = (first + per_connection).min(plan.subscriptions);
        if first >= last {
            break;
        }
        let mut session = Session::open(&plan.push).await?;
        super::session::subscribe_all(&mut session, &plan.topic, first..last, |i| {
            format!("k.{}", i * stride).into_bytes()
        })
        .await?;
        let delivered = Arc::clone(&delivered);
        readers.push(tokio::spawn(async move {
            while let Ok(kind) = session.next().await {
                if let Kind::Deliveries(batch) = kind {
                    delivered.fetch_add(batch.deliveries.len() as u64, Ordering::Relaxed);
                }
            }
        }));
    }
    let connections_used = plan.subscriptions.div_ceil(per_connection.max(1)).max(1);
    let few_per_connection = FEW_PER_CONNECTION.min(per_connection).max(1);
    let key_of = |j: u64| -> u64 {
        match plan.keys {
            Keys::Many => j % plan.subjects,
            Keys::One if j.is_multiple_of(stride) => 0,
            Keys::One => 1,
            Keys::Few if j.is_multiple_of(stride) => {
                // `many`'s m-th delivery goes to subscription m mod
                // subscriptions, so to connection m / per_connection (mod
                // the connections): the same here, to one of that
                // connection's first few subscriptions.
                let m = j / stride;
                let connection = m / per_connection % connections_used;
                let subscription = (connection * per_connection + m % few_per_connection)
                    .min(plan.subscriptions.saturating_sub(1));
                subscription * stride
            }
            // Past every subscribed subject.
            Keys::Few => plan.subjects + j % FEW_UNSUBSCRIBED,
        }
    };
    let expected = (0..plan.records)
        .filter(|&j| key_of(j) % stride == 0 && key_of(j) / stride < plan.subscriptions)
        .count() as u64;
    // Every batch is built before the clock starts, so the figure is the
    // broker's (taking, routing and delivering), not the time this client
    // spends formatting a million keys.
    let mut prepared = Vec::new();
    let mut j = 0;
    while j < plan.records {
        let end = (j + u64::from(super::publish::BATCH_RECORDS) * u64::from(plan.partitions))
            .min(plan.records);
        prepared.extend(batches(plan, j..end, key_of));
        j = end;
    }
    let mut producer = Connection::connect(&plan.bootstrap).await?;
    if let Some(pid) = plan.broker_pid {
        // Subscribing leaves the broker busy for a while (catch-up readers
        // finding nothing): not this run's routing.
        super::settle_broker(pid).await;
    }
    let cpu_before = plan.broker_pid.and_then(crate::cpu::sample);
    let start = Instant::now();
    for (partition, batch) in prepared {
        herald_client::data::produce(&mut producer, &plan.topic, partition as i32, batch).await?;
    }
    let publish_secs = start.elapsed().as_secs_f64();
    let give_up = Instant::now() + DELIVERY_WAIT;
    while delivered.load(Ordering::Relaxed) < expected && Instant::now() < give_up {
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    let total_secs = start.elapsed().as_secs_f64();
    let delivered = delivered.load(Ordering::Relaxed);
    let broker_ns_per_delivery = cpu_before
        .zip(plan.broker_pid.and_then(crate::cpu::sample))
        .filter(|_| delivered > 0)
        .map(|(before, after)| crate::cpu::between(before, after).0 / delivered as f64);
    for reader in readers {
        reader.abort();
    }
    Ok(SubjectsRow {
        scenario: "subjects",
        keys: plan.keys,
        distinct_keys: match plan.keys {
            Keys::Many => plan.subjects.min(plan.records),
            Keys::One => 2,
            Keys::Few => connections_used * few_per_connection + FEW_UNSUBSCRIBED,
        },
        subscriptions: plan.subscriptions,
        records: plan.records,
        delivered,
        publish_secs,
        total_secs,
        records_per_sec: plan.records as f64 / total_secs,
        broker_ns_per_delivery,
    })
}

/// Records `range` as produce batches.
fn batches(
    plan: &Subjects,
    range: std::ops::Range<u64>,
    key_of: impl Fn(u64) -> u64,
) -> Vec<(u32, Bytes)> {
    let value = [7u8; 64];
    let records = range.map(|j| (format!("k.{}", key_of(j)).into_bytes(), &value[..]));
    super::publish::batches(records, plan.partitions)
}
