//! Seed 002's experiment: N subscribers of one subject, a publisher at a
//! fixed rate, the publish-to-deliver latency of every delivery and the
//! subscribers that did not get every message ("dropped").

use std::time::Duration;

use herald_gateway::proto::{server_message::Kind, PublishRequest};
use serde::Serialize;

use super::session::{connect, AnySession, Transport};
use super::{now_ns, PushBenchError};
use crate::histogram;

/// What to run.
#[derive(Debug, Clone)]
pub struct Fanout {
    /// The push listener.
    pub push: String,
    /// The topic (it must exist).
    pub topic: String,
    /// Subscribers, each on a connection of its own.
    pub subscribers: usize,
    /// Messages published per second.
    pub rate: u32,
    /// Seconds of publishing.
    pub secs: f64,
    /// Sessions opened at once while setting up.
    pub open_parallel: usize,
    /// The subscribers' transport.
    pub transport: Transport,
    /// The broker's pid, to report its CPU while publishing.
    pub broker_pid: Option<u32>,
}

/// One run's figures.
#[derive(Debug, Clone, Serialize)]
pub struct FanoutRow {
    /// `fanout`.
    pub scenario: &'static str,
    /// The subscribers' transport (`grpc`, `websocket`), or `kernel` for
    /// the floor of [`super::fanout_floor`].
    pub transport: &'static str,
    /// Subscribers.
    pub subscribers: usize,
    /// Messages published.
    pub published: u64,
    /// Deliveries received, over all subscribers.
    pub delivered: u64,
    /// Subscribers that missed at least one message or lost their session.
    pub dropped_subscribers: usize,
    /// Mean publish-to-deliver latency, µs.
    pub mean_us: f64,
    /// Median, µs.
    pub p50_us: f64,
    /// 99th percentile, µs.
    pub p99_us: f64,
    /// Largest, µs.
    pub max_us: f64,
    /// Cores the broker kept busy while publishing (the rest of the
    /// machine went to the subscribers, here on the same 2 cores).
    pub broker_cores: Option<f64>,
}

/// What every subscriber of a fan-out run got.
pub(crate) struct Tally {
    /// Deliveries, over all subscribers.
    pub(crate) delivered: u64,
    /// Subscribers that got fewer than every message.
    pub(crate) dropped: usize,
    /// Every delivery's latency, µs.
    pub(crate) latencies: hdrhistogram::Histogram<u64>,
}

/// Waits for every subscriber's (deliveries, latencies in µs) and merges
/// them. Subscribers keep a list, not a histogram each: a histogram is
/// some 200 KiB to zero, and 10,000 of them zeroed while the first
/// messages arrive would be what the run measures.
pub(crate) async fn tally(
    readers: Vec<tokio::task::JoinHandle<(u64, Vec<u64>)>>,
    published: u64,
) -> Tally {
    let mut tally = Tally {
        delivered: 0,
        dropped: 0,
        latencies: histogram::new(),
    };
    for reader in readers {
        let (got, local) = reader.await.unwrap_or_default();
        for latency_us in local {
            let _ = tally.latencies.record(latency_us);
        }
        tally.delivered += got;
        if got < published {
            tally.dropped += 1;
        }
    }
    tally
}

/// The subject every subscriber listens to.
const SUBJECT: &[u8] = b"fanout.subject";

/// Runs one fan-out measurement.
pub async fn run(plan: &Fanout) -> Result<FanoutRow, PushBenchError> {
    let mut sessions = Vec::with_capacity(plan.subscribers);
    for chunk in (0..plan.subscribers)
        .collect::<Vec<_>>()
        .chunks(plan.open_parallel.max(1))
    {
        let opened = futures_util::future::join_all(chunk.iter().map(|_| async {
            let mut session = AnySession::open(plan.transport, &plan.push).await?;
            super::session::subscribe_all(&mut session, &plan.topic, std::iter::once(1), |_| {
                SUBJECT.to_vec()
            })
            .await?;
            Ok::<_, PushBenchError>(session)
        }))
        .await;
        for session in opened {
            sessions.push(session?);
        }
    }
    let published = (plan.rate as f64 * plan.secs).round().max(1.0) as u64;
    let readers: Vec<_> = sessions
        .into_iter()
        .map(|mut session| {
            tokio::spawn(async move {
                // A list: see `tally`.
                let mut local = Vec::with_capacity(published as usize);
                let mut got = 0u64;
                let deadline = tokio::time::Instant::now()
                    + Duration::from_secs_f64(published as f64 * 2.0 + 30.0);
                while got < published {
                    let next = tokio::time::timeout_at(deadline, session.next()).await;
                    let Ok(Ok(kind)) = next else { break };
                    if let Kind::Deliveries(batch) = kind {
                        let now = now_ns();
                        for delivery in batch.deliveries {
                            let sent = delivery
                                .value
                                .as_ref()
                                .and_then(|v| v.get(..8))
                                .map_or(now, |b| {
                                    u64::from_be_bytes(b.try_into().unwrap_or([0; 8]))
                                });
                            local.push(now.saturating_sub(sent) / 1000);
                            got += 1;
                        }
                    }
                }
                (got, local)
            })
        })
        .collect();
    let mut publisher = connect(&plan.push).await?;
    let cpu_before = plan.broker_pid.and_then(crate::cpu::sample);
    let mut tick =
        tokio::time::interval(Duration::from_secs_f64(1.0 / f64::from(plan.rate.max(1))));
    for i in 0..published {
        tick.tick().await;
        let request = PublishRequest {
            request_id: i,
            topic: plan.topic.clone(),
            key: Some(SUBJECT.to_vec().into()),
            value: Some(now_ns().to_be_bytes().to_vec().into()),
            ..Default::default()
        };
        let answer = publisher.publish(request).await?.into_inner();
        if let Some(error) = answer.error {
            return Err(PushBenchError::Refused(error.message));
        }
    }
    let broker_cores = cpu_before
        .zip(plan.broker_pid.and_then(crate::cpu::sample))
        .map(|(before, after)| crate::cpu::between(before, after).1);
    let Tally {
        delivered,
        dropped,
        latencies,
    } = tally(readers, published).await;
    let (p50, p99, _) = histogram::percentiles(&latencies).unwrap_or_default();
    Ok(FanoutRow {
        scenario: "fanout",
        transport: plan.transport.name(),
        subscribers: plan.subscribers,
        published,
        delivered,
        dropped_subscribers: dropped,
        mean_us: latencies.mean(),
        p50_us: p50,
        p99_us: p99,
        max_us: latencies.max() as f64,
        broker_cores,
    })
}
