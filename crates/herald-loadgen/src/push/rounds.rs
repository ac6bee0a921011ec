//! Seed 003's round: many clients, each subscribed to a subject of its own;
//! each round publishes 20 messages to every client's subject (through the
//! Kafka API, as a backend would) and a client is late when its 20 have
//! not all arrived within 1 s of the round's start.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use bytes::Bytes;
use herald_client::Connection;
use herald_gateway::proto::server_message::Kind;
use serde::Serialize;
use tokio::sync::mpsc;

use super::session::Session;
use super::PushBenchError;

/// What to run.
#[derive(Debug, Clone)]
pub struct Rounds {
    /// The push listener.
    pub push: String,
    /// The Kafka listener (publishing).
    pub bootstrap: String,
    /// The topic (it must exist) and its partition count.
    pub topic: String,
    /// Partitions of the topic.
    pub partitions: u32,
    /// Clients, each on a connection of its own.
    pub clients: usize,
    /// Messages per client per round.
    pub messages: u32,
    /// Rounds.
    pub rounds: u32,
    /// A client is late past this.
    pub deadline: Duration,
    /// Sessions opened at once while setting up.
    pub open_parallel: usize,
}

/// One run's figures.
#[derive(Debug, Clone, Serialize)]
pub struct RoundsRow {
    /// `rounds`.
    pub scenario: &'static str,
    /// Clients.
    pub clients: usize,
    /// Messages per client per round.
    pub messages: u32,
    /// Rounds run.
    pub rounds: u32,
    /// Median time for every client to have its messages, ms.
    pub round_ms_p50: f64,
    /// Slowest round, ms (the deadline's triple when a client never
    /// completed).
    pub round_ms_max: f64,
    /// Rounds in which every client was on time.
    pub rounds_on_time: u32,
    /// (client, round) pairs late past the deadline.
    pub late: u64,
    /// `late` over clients × rounds.
    pub late_share: f64,
    /// Time to publish one round's records, median, ms.
    pub publish_ms_p50: f64,
}

fn subject(client: usize) -> Vec<u8> {
    format!("client.{client}").into_bytes()
}

/// Runs the rounds.
pub async fn run(plan: &Rounds) -> Result<RoundsRow, PushBenchError> {
    // Each client reports (round, completion time) on this channel.
    let (done_tx, mut done_rx) = mpsc::unbounded_channel::<(u32, Instant)>();
    let mut opened = 0;
    let mut readers = Vec::with_capacity(plan.clients);
    while opened < plan.clients {
        let batch: Vec<usize> =
            (opened..(opened + plan.open_parallel.max(1)).min(plan.clients)).collect();
        let sessions = futures_util::future::join_all(batch.iter().map(|&client| async move {
            let mut session = Session::open(&plan.push).await?;
            super::session::subscribe_all(
                &mut session,
                &plan.topic,
                std::iter::once(client as u64),
                |c| subject(c as usize),
            )
            .await?;
            Ok::<_, PushBenchError>(session)
        }))
        .await;
        for session in sessions {
            let mut session = session?;
            let done = done_tx.clone();
            let messages = plan.messages;
            readers.push(tokio::spawn(async move {
                let mut counts: HashMap<u32, u32> = HashMap::new();
                while let Ok(kind) = session.next().await {
                    let Kind::Deliveries(batch) = kind else {
                        continue;
                    };
                    for delivery in batch.deliveries {
                        let round = delivery
                            .value
                            .as_ref()
                            .and_then(|v| v.get(..4))
                            .map_or(u32::MAX, |b| u32::from_be_bytes([b[0], b[1], b[2], b[3]]));
                        let count = counts.entry(round).or_default();
                        *count += 1;
                        if *count == messages {
                            let _ = done.send((round, Instant::now()));
                        }
                    }
                }
            }));
        }
        opened += batch.len();
    }
    drop(done_tx);
    let mut producer = Connection::connect(&plan.bootstrap).await?;
    let mut durations = Vec::new();
    let mut publish_times = Vec::new();
    let mut late = 0u64;
    let mut on_time = 0;
    for round in 0..plan.rounds {
        let batches = round_batches(plan, round);
        let start = Instant::now();
        for (partition, batch) in batches {
            herald_client::data::produce(&mut producer, &plan.topic, partition as i32, batch)
                .await?;
        }
        publish_times.push(start.elapsed().as_secs_f64() * 1000.0);
        let give_up = start + plan.deadline * 3;
        let mut completed = 0usize;
        let mut last = start;
        let mut in_time = 0usize;
        while completed < plan.clients {
            let wait = give_up.saturating_duration_since(Instant::now());
            match tokio::time::timeout(wait, done_rx.recv()).await {
                Ok(Some((r, at))) if r == round => {
                    completed += 1;
                    last = last.max(at);
                    if at.duration_since(start) <= plan.deadline {
                        in_time += 1;
                    }
                }
                Ok(Some(_)) => {}
                Ok(None) | Err(_) => break,
            }
        }
        let round_late = (plan.clients - in_time) as u64;
        late += round_late;
        if round_late == 0 {
            on_time += 1;
        }
        let took = if completed == plan.clients {
            last.duration_since(start)
        } else {
            plan.deadline * 3
        };
        durations.push(took.as_secs_f64() * 1000.0);
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    for reader in readers {
        reader.abort();
    }
    Ok(RoundsRow {
        scenario: "rounds",
        clients: plan.clients,
        messages: plan.messages,
        rounds: plan.rounds,
        round_ms_p50: median(&mut durations.clone()),
        round_ms_max: durations.iter().copied().fold(0.0, f64::max),
        rounds_on_time: on_time,
        late,
        late_share: late as f64 / (plan.clients as f64 * f64::from(plan.rounds.max(1))),
        publish_ms_p50: median(&mut publish_times),
    })
}

/// One round's records (each value starts with the round number).
fn round_batches(plan: &Rounds, round: u32) -> Vec<(u32, Bytes)> {
    let mut value = round.to_be_bytes().to_vec();
    value.extend_from_slice(&[0u8; 60]);
    let records = (0..plan.clients)
        .flat_map(|client| std::iter::repeat_n(subject(client), plan.messages as usize))
        .map(|key| (key, value.as_slice()));
    super::publish::batches(records, plan.partitions)
}

/// The median of `values` (0 when empty).
pub fn median(values: &mut [f64]) -> f64 {
    if values.is_empty() {
        return 0.0;
    }
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
}
