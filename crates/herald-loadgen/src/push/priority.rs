//! Issue 15's priority measurement: the publish-to-deliver latency of
//! high-priority records sent to a subscriber that is flooded with normal
//! records it cannot keep up with, against the same probes to an idle one.
//!
//! One session subscribes to `prio.>`. A prober publishes a record on
//! `prio.probe` with `herald.priority: high` and its send time as value,
//! `probe_rate` times a second, through the push API. With `flood`, a
//! Kafka producer meanwhile publishes prebuilt batches of normal records on
//! `prio.flood` as fast as the broker takes them, more than one subscriber
//! reads, so its queue stays full and its cursor goes back to the log.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use herald_client::Connection;
use herald_gateway::proto::{self, server_message::Kind, PublishRequest};
use serde::Serialize;

use super::session::{connect, AnySession, Transport};
use super::{now_ns, PushBenchError};
use crate::histogram;

/// What to run.
#[derive(Debug, Clone)]
pub struct Priority {
    /// The push listener.
    pub push: String,
    /// The Kafka listener (the flood).
    pub bootstrap: String,
    /// The topic (it must exist): one partition, or two with `apart`.
    pub topic: String,
    /// Probes on partition 1, the flood on partition 0: what is left of
    /// the latency when the probe does not wait for the flood's records
    /// ahead of it in one log.
    pub apart: bool,
    /// Flood the subscriber with normal records, or leave it idle.
    pub flood: bool,
    /// Seconds of probing.
    pub secs: f64,
    /// High-priority probes per second.
    pub probe_rate: u32,
    /// The subscriber's transport.
    pub transport: Transport,
    /// The WebSocket subscriber's kernel receive buffer, bytes (`None`:
    /// the kernel's autotuning).
    pub receive_buffer: Option<u32>,
    /// Normal records per second in the flood (`None`: as fast as the
    /// broker takes them, which on this machine saturates both cores).
    pub flood_rate: Option<u64>,
}

/// One run's figures.
#[derive(Debug, Clone, Serialize)]
pub struct PriorityRow {
    /// `priority`.
    pub scenario: &'static str,
    /// Whether normal records flooded the subscriber.
    pub flood: bool,
    /// Whether probes and flood went to different partitions.
    pub apart: bool,
    /// The subscriber's transport.
    pub transport: &'static str,
    /// The subscriber's kernel receive buffer, if set.
    pub receive_buffer: Option<u32>,
    /// The flood's rate in records per second, if paced.
    pub flood_rate: Option<u64>,
    /// High-priority probes published.
    pub probes: u64,
    /// Probes received.
    pub probes_received: u64,
    /// Probe latency, µs.
    pub p50_us: f64,
    /// 99th percentile, µs.
    pub p99_us: f64,
    /// Largest, µs.
    pub max_us: f64,
    /// Normal records published while probing.
    pub flood_published: u64,
    /// Normal records the subscriber received while probing (the rest
    /// waited in the log).
    pub flood_received: u64,
}

/// The flood's records: values of this many bytes.
const FLOOD_VALUE_BYTES: usize = 256;
/// Records per flood batch: about 270 KiB, well under the 1 MiB batch
/// limit.
const FLOOD_BATCH_RECORDS: u32 = 1024;
/// Longest wait for the last probes after probing stops.
const LAST_PROBE_WAIT: Duration = Duration::from_secs(10);

/// Runs one measurement.
pub async fn run(plan: &Priority) -> Result<PriorityRow, PushBenchError> {
    let mut session = match (plan.transport, plan.receive_buffer) {
        (Transport::Websocket, Some(bytes)) => AnySession::Ws(
            super::session::WsSession::open_with_receive_buffer(&plan.push, Some(bytes)).await?,
        ),
        _ => AnySession::open(plan.transport, &plan.push).await?,
    };
    super::session::subscribe_pattern(&mut session, &plan.topic, "prio.>", "").await?;
    let probes_received = Arc::new(AtomicU64::new(0));
    let flood_received = Arc::new(AtomicU64::new(0));
    let probing = Arc::new(AtomicBool::new(true));
    let (stop_reader, mut stop) = tokio::sync::oneshot::channel::<()>();
    let reader = {
        let (probes_received, flood_received, probing) = (
            Arc::clone(&probes_received),
            Arc::clone(&flood_received),
            Arc::clone(&probing),
        );
        tokio::spawn(async move {
            let mut latencies = Vec::new();
            loop {
                let kind = tokio::select! {
                    kind = session.next() => kind,
                    _ = &mut stop => break,
                };
                let Ok(kind) = kind else { break };
                let Kind::Deliveries(batch) = kind else {
                    continue;
                };
                let now = now_ns();
                for delivery in batch.deliveries {
                    if delivery.key.as_deref() == Some(b"prio.probe".as_slice()) {
                        let sent = delivery
                            .value
                            .as_ref()
                            .and_then(|v| v.get(..8))
                            .and_then(|b| b.try_into().ok())
                            .map_or(now, u64::from_be_bytes);
                        latencies.push(now.saturating_sub(sent) / 1000);
                        probes_received.fetch_add(1, Ordering::Relaxed);
                    } else if probing.load(Ordering::Relaxed) {
                        flood_received.fetch_add(1, Ordering::Relaxed);
                    }
                }
            }
            latencies
        })
    };
    let flood_published = Arc::new(AtomicU64::new(0));
    let flood = if plan.flood {
        let batches = super::publish::batches(
            (0..FLOOD_BATCH_RECORDS)
                .map(|_| (b"prio.flood".to_vec(), &[7u8; FLOOD_VALUE_BYTES][..])),
            1,
        );
        let mut producer = Connection::connect(&plan.bootstrap).await?;
        let (topic, probing, published) = (
            plan.topic.clone(),
            Arc::clone(&probing),
            Arc::clone(&flood_published),
        );
        // Paced by batch: open loop, the schedule does not wait for the
        // broker's answers to fall behind.
        let mut pace = plan.flood_rate.map(|rate| {
            let mut pace = tokio::time::interval(Duration::from_secs_f64(
                f64::from(FLOOD_BATCH_RECORDS) / rate.max(1) as f64,
            ));
            pace.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Burst);
            pace
        });
        Some(tokio::spawn(async move {
            while probing.load(Ordering::Relaxed) {
                for (partition, batch) in &batches {
                    if let Some(pace) = pace.as_mut() {
                        pace.tick().await;
                    }
                    if herald_client::data::produce(
                        &mut producer,
                        &topic,
                        *partition as i32,
                        batch.clone(),
                    )
                    .await
                    .is_err()
                    {
                        return;
                    }
                    published.fetch_add(u64::from(FLOOD_BATCH_RECORDS), Ordering::Relaxed);
                }
            }
        }))
    } else {
        None
    };
    // Let the flood fill the subscriber's queue before the first probe.
    if plan.flood {
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    let mut publisher = connect(&plan.push).await?;
    let probes = (f64::from(plan.probe_rate) * plan.secs).round().max(1.0) as u64;
    let mut tick = tokio::time::interval(Duration::from_secs_f64(
        1.0 / f64::from(plan.probe_rate.max(1)),
    ));
    for i in 0..probes {
        tick.tick().await;
        let request = PublishRequest {
            request_id: i,
            topic: plan.topic.clone(),
            key: Some(b"prio.probe".to_vec().into()),
            value: Some(now_ns().to_be_bytes().to_vec().into()),
            partition: plan.apart.then_some(1),
            headers: vec![proto::Header {
                key: "herald.priority".into(),
                value: Some(b"high".to_vec().into()),
            }],
            ..Default::default()
        };
        let answer = publisher.publish(request).await?.into_inner();
        if let Some(error) = answer.error {
            return Err(PushBenchError::Refused(error.message));
        }
    }
    probing.store(false, Ordering::Relaxed);
    if let Some(flood) = flood {
        let _ = flood.await;
    }
    let give_up = Instant::now() + LAST_PROBE_WAIT;
    while probes_received.load(Ordering::Relaxed) < probes && Instant::now() < give_up {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let _ = stop_reader.send(());
    let latencies = reader.await.unwrap_or_default();
    let mut histogram = histogram::new();
    for latency_us in latencies {
        let _ = histogram.record(latency_us);
    }
    let (p50, p99, _) = histogram::percentiles(&histogram).unwrap_or_default();
    Ok(PriorityRow {
        scenario: "priority",
        flood: plan.flood,
        apart: plan.apart,
        transport: plan.transport.name(),
        receive_buffer: plan.receive_buffer,
        flood_rate: plan.flood_rate,
        probes,
        probes_received: probes_received.load(Ordering::Relaxed),
        p50_us: p50,
        p99_us: p99,
        max_us: histogram.max() as f64,
        flood_published: flood_published.load(Ordering::Relaxed),
        flood_received: flood_received.load(Ordering::Relaxed),
    })
}
