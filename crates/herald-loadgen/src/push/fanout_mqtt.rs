//! Seed 002's experiment against an MQTT 3.1.1 broker (Mosquitto, started
//! by `bench/mosquitto/start.sh`): the same subscribers, rate, payload (the
//! 8-byte send time) and tally as [`super::fanout`], at QoS 0 or 1 for
//! both the publisher and the subscriptions.

use std::time::Duration;

use super::fanout::{tally, FanoutRow, Tally};
use super::mqtt::MqttConnection;
use super::{now_ns, PushBenchError};
use crate::histogram;
use rumqttc::mqttbytes::QoS;

/// What to run.
#[derive(Debug, Clone)]
pub struct FanoutMqtt {
    /// The MQTT broker's address.
    pub mqtt: String,
    /// QoS of the publishes and subscriptions: 0 or 1.
    pub qos: u8,
    /// Subscribers, each on a connection of its own.
    pub subscribers: usize,
    /// Messages published per second.
    pub rate: u32,
    /// Seconds of publishing.
    pub secs: f64,
    /// Connections opened at once while setting up.
    pub open_parallel: usize,
    /// The broker's pid, to report its CPU while publishing.
    pub broker_pid: Option<u32>,
}

/// The topic every subscriber listens to.
const SUBJECT: &str = "fanout/subject";

/// Runs one fan-out measurement against an MQTT broker.
pub async fn run(plan: &FanoutMqtt) -> Result<FanoutRow, PushBenchError> {
    let qos = match plan.qos {
        0 => QoS::AtMostOnce,
        1 => QoS::AtLeastOnce,
        other => {
            return Err(PushBenchError::Refused(format!(
                "QoS {other} is not measured"
            )))
        }
    };
    let client_id = |i: usize| format!("herald-loadgen-{}-{i}", std::process::id());
    let mut connections = Vec::with_capacity(plan.subscribers);
    for chunk in (0..plan.subscribers)
        .collect::<Vec<_>>()
        .chunks(plan.open_parallel.max(1))
    {
        let opened = futures_util::future::join_all(chunk.iter().map(|&i| async move {
            let mut connection = MqttConnection::connect(&plan.mqtt, &client_id(i)).await?;
            connection.subscribe(SUBJECT, qos).await?;
            Ok::<_, PushBenchError>(connection)
        }))
        .await;
        for connection in opened {
            connections.push(connection?);
        }
    }
    let published = (plan.rate as f64 * plan.secs).round().max(1.0) as u64;
    let readers: Vec<_> = connections
        .into_iter()
        .map(|mut connection| {
            tokio::spawn(async move {
                // A list: see `fanout::tally`.
                let mut local = Vec::with_capacity(published as usize);
                let mut got = 0u64;
                let deadline = tokio::time::Instant::now()
                    + Duration::from_secs_f64(published as f64 * 2.0 + 30.0);
                while got < published {
                    let next = tokio::time::timeout_at(deadline, connection.next_message()).await;
                    let Ok(Ok(payload)) = next else { break };
                    let now = now_ns();
                    let sent = payload
                        .get(..8)
                        .and_then(|b| b.try_into().ok())
                        .map_or(now, u64::from_be_bytes);
                    local.push(now.saturating_sub(sent) / 1000);
                    got += 1;
                }
                (got, local)
            })
        })
        .collect();
    let mut publisher = MqttConnection::connect(&plan.mqtt, &client_id(usize::MAX)).await?;
    let cpu_before = plan.broker_pid.and_then(crate::cpu::sample);
    let mut tick =
        tokio::time::interval(Duration::from_secs_f64(1.0 / f64::from(plan.rate.max(1))));
    for _ in 0..published {
        tick.tick().await;
        publisher
            .publish(SUBJECT, qos, &now_ns().to_be_bytes())
            .await?;
    }
    publisher.flush().await?;
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
        transport: if plan.qos == 0 {
            "mqtt-qos0"
        } else {
            "mqtt-qos1"
        },
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
