//! Issue 15's cost measurement: what selective delivery, priority and
//! expiry cost the broker against plain delivery, with the same records
//! (every one carries one header of the same size) and the same
//! subscribers.
//!
//! - `plain`: no filter; every record delivered to every subscription;
//! - `filter`: each subscription's filter holds for 10% of the records;
//! - `priority`: 1% of the records are high priority;
//! - `expiry`: 5% of the records are past their expiry.
//!
//! Throughput is records over the time from the first publish to the last
//! expected delivery; the broker's CPU over the same time is divided by
//! the records published. The batches are built before the clock starts.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use herald_client::Connection;
use herald_gateway::proto::server_message::Kind;
use serde::Serialize;

use super::session::{AnySession, Transport};
use super::PushBenchError;

/// Which feature the records and subscriptions exercise.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum Feature {
    /// None: the baseline.
    Plain,
    /// A filter holding for 10% of the records.
    Filter,
    /// 1% of the records high priority.
    Priority,
    /// 5% of the records expired.
    Expiry,
}

/// What to run.
#[derive(Debug, Clone)]
pub struct Features {
    /// The push listener.
    pub push: String,
    /// The Kafka listener (publishing).
    pub bootstrap: String,
    /// The topic (it must exist).
    pub topic: String,
    /// Its partitions.
    pub partitions: u32,
    /// Records published.
    pub records: u64,
    /// Subscribers, a session each, every one subscribed to every record's
    /// subject pattern.
    pub subscribers: u32,
    /// The feature.
    pub feature: Feature,
    /// The subscribers' transport.
    pub transport: Transport,
    /// The broker's pid, for its CPU.
    pub broker_pid: Option<u32>,
}

/// One run's figures.
#[derive(Debug, Clone, Serialize)]
pub struct FeaturesRow {
    /// `features`.
    pub scenario: &'static str,
    /// The feature.
    pub feature: Feature,
    /// Records published.
    pub records: u64,
    /// Subscribers.
    pub subscribers: u32,
    /// Deliveries expected and received.
    pub delivered: u64,
    /// Seconds from the first publish to the last delivery.
    pub total_secs: f64,
    /// `records / total_secs`.
    pub records_per_sec: f64,
    /// Broker CPU over that time per record published, ns.
    pub broker_ns_per_record: Option<f64>,
}

/// Longest wait for the deliveries after publishing.
const DELIVERY_WAIT: Duration = Duration::from_secs(120);

/// The header every record carries, so that all four runs store and read
/// the same bytes: one of these, name and value.
fn header_of(feature: Feature, j: u64) -> (&'static [u8], &'static [u8]) {
    match feature {
        Feature::Filter if j.is_multiple_of(10) => (b"f", b"y"),
        Feature::Priority if j.is_multiple_of(100) => (b"herald.priority", b"high"),
        // Long expired: 1 ms after the Unix epoch.
        Feature::Expiry if j.is_multiple_of(20) => (b"herald.expires-at", b"1"),
        _ => (b"f", b"n"),
    }
}

/// How many of `records` each subscription receives.
fn delivered_each(feature: Feature, records: u64) -> u64 {
    let every = |n: u64| records.div_ceil(n);
    match feature {
        Feature::Plain | Feature::Priority => records,
        Feature::Filter => every(10),
        Feature::Expiry => records - every(20),
    }
}

/// Runs one measurement.
pub async fn run(plan: &Features) -> Result<FeaturesRow, PushBenchError> {
    let delivered = Arc::new(AtomicU64::new(0));
    let mut readers = Vec::new();
    for _ in 0..plan.subscribers {
        let mut session = AnySession::open(plan.transport, &plan.push).await?;
        let filter = match plan.feature {
            Feature::Filter => r#"header.f == "y""#,
            _ => "",
        };
        super::session::subscribe_pattern(&mut session, &plan.topic, "feat.>", filter).await?;
        let delivered = Arc::clone(&delivered);
        readers.push(tokio::spawn(async move {
            while let Ok(kind) = session.next().await {
                if let Kind::Deliveries(batch) = kind {
                    delivered.fetch_add(batch.deliveries.len() as u64, Ordering::Relaxed);
                }
            }
        }));
    }
    let expected = delivered_each(plan.feature, plan.records) * u64::from(plan.subscribers);
    let value = [7u8; 64];
    let records = (0..plan.records).map(|j| {
        let (name, header_value) = header_of(plan.feature, j);
        (
            format!("feat.{}", j % 64).into_bytes(),
            &value[..],
            vec![(name, Some(header_value))],
        )
    });
    let prepared = super::publish::batches_with_headers(records, plan.partitions);
    let mut producer = Connection::connect(&plan.bootstrap).await?;
    let cpu_before = plan.broker_pid.and_then(crate::cpu::sample);
    let start = Instant::now();
    for (partition, batch) in prepared {
        herald_client::data::produce(&mut producer, &plan.topic, partition as i32, batch).await?;
    }
    let give_up = Instant::now() + DELIVERY_WAIT;
    while delivered.load(Ordering::Relaxed) < expected && Instant::now() < give_up {
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    let total_secs = start.elapsed().as_secs_f64();
    let broker_ns_per_record = cpu_before
        .zip(plan.broker_pid.and_then(crate::cpu::sample))
        .map(|(before, after)| crate::cpu::between(before, after).0 / plan.records as f64);
    for reader in readers {
        reader.abort();
    }
    Ok(FeaturesRow {
        scenario: "features",
        feature: plan.feature,
        records: plan.records,
        subscribers: plan.subscribers,
        delivered: delivered.load(Ordering::Relaxed),
        total_secs,
        records_per_sec: plan.records as f64 / total_secs,
        broker_ns_per_record,
    })
}
