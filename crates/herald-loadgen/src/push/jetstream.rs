//! NATS JetStream for the comparisons that need persistence: a file-backed
//! stream over the fan-out's subjects, and per subscriber an ephemeral push
//! consumer delivering to the subscriber's own subject, from now or from
//! right after the last stream sequence it received (the resume a client
//! that keeps its position does, as herald's clients keep theirs).
//!
//! JetStream's API is JSON over requests (`$JS.API.…`); its deliveries are
//! ordinary messages whose reply subject (`$JS.ACK.…`) carries the stream
//! sequence. Consumers acknowledge nothing (`ack_policy: none`), as herald's
//! subscriptions in the comparisons do not: the client's position is what
//! it resumes from.

use serde_json::{json, Value};

use super::nats::NatsConnection;
use super::PushBenchError;

/// The stream the fan-out publishes into.
pub const STREAM: &str = "HERALD_FANOUT";
/// The subjects it stores: the fan-out's and the warm-up's.
pub const STREAM_SUBJECTS: [&str; 2] = ["fanout.>", "warm-up.>"];

/// Consumers the stream allows: two per subscriber at the most the
/// open-file limit allows, and room to spare.
const MAX_CONSUMERS: u64 = 1_000_000;

/// How long a push consumer outlives its subscriber's interest.
const INACTIVE_THRESHOLD_NS: u64 = 2_000_000_000;

fn failed(reason: impl std::fmt::Display) -> PushBenchError {
    PushBenchError::Refused(format!("jetstream: {reason}"))
}

/// Sends one API request and returns its answer, or the error it carries.
async fn api(
    connection: &mut NatsConnection,
    subject: &str,
    body: &Value,
) -> Result<Value, PushBenchError> {
    let answer = connection
        .request(subject, body.to_string().as_bytes())
        .await?;
    let answer: Value = serde_json::from_slice(&answer).map_err(failed)?;
    if let Some(error) = answer.get("error") {
        return Err(failed(format!("{subject}: {error}")));
    }
    Ok(answer)
}

/// Creates the stream afresh (deleting one left by an earlier run): file
/// storage, one replica, nothing expires during a run.
pub async fn create_stream(connection: &mut NatsConnection) -> Result<(), PushBenchError> {
    delete_stream(connection).await?;
    let config = json!({
        "name": STREAM,
        "subjects": STREAM_SUBJECTS,
        "storage": "file",
        "retention": "limits",
        "num_replicas": 1,
        // nats-server 2.15 limits a stream to 1,000 consumers unless it
        // says otherwise (and takes no value below 1 for unlimited); a run
        // has one per subscriber, twice over while a storm's closed ones
        // linger.
        "max_consumers": MAX_CONSUMERS,
    });
    api(
        connection,
        &format!("$JS.API.STREAM.CREATE.{STREAM}"),
        &config,
    )
    .await?;
    Ok(())
}

/// Deletes the stream if it exists.
pub async fn delete_stream(connection: &mut NatsConnection) -> Result<(), PushBenchError> {
    let subject = format!("$JS.API.STREAM.DELETE.{STREAM}");
    let answer = connection.request(&subject, b"").await?;
    let answer: Value = serde_json::from_slice(&answer).map_err(failed)?;
    match answer.get("error") {
        // 10059: stream not found.
        Some(error) if error.get("err_code").and_then(Value::as_u64) != Some(10059) => {
            Err(failed(format!("{subject}: {error}")))
        }
        _ => Ok(()),
    }
}

/// Where a push consumer starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Start {
    /// With the next message stored.
    New,
    /// Right after this stream sequence.
    After(u64),
}

/// Creates an ephemeral push consumer of `filters` delivering to
/// `deliver`, which the connection must already be subscribed to; returns
/// the stream sequence it starts after.
pub async fn push_consumer(
    connection: &mut NatsConnection,
    deliver: &str,
    filters: &[String],
    start: Start,
) -> Result<u64, PushBenchError> {
    let mut config = json!({
        "deliver_subject": deliver,
        "ack_policy": "none",
        "filter_subjects": filters,
        "inactive_threshold": INACTIVE_THRESHOLD_NS,
        "max_deliver": -1,
    });
    match start {
        Start::New => config["deliver_policy"] = json!("new"),
        Start::After(sequence) => {
            config["deliver_policy"] = json!("by_start_sequence");
            config["opt_start_seq"] = json!(sequence + 1);
        }
    }
    let body = json!({ "stream_name": STREAM, "config": config });
    let answer = api(
        connection,
        &format!("$JS.API.CONSUMER.CREATE.{STREAM}"),
        &body,
    )
    .await?;
    Ok(match start {
        Start::After(sequence) => sequence,
        // A new consumer's delivered stream sequence is the stream's last
        // at its creation.
        Start::New => answer
            .pointer("/delivered/stream_seq")
            .and_then(Value::as_u64)
            .unwrap_or(0),
    })
}

/// The stream sequence a delivery's reply subject carries:
/// `$JS.ACK.<stream>.<consumer>.<delivered>.<stream seq>.…` (9 tokens),
/// or with a domain and an account hash after `ACK` (11 or more).
pub fn stream_sequence(reply: &str) -> Option<u64> {
    let tokens: Vec<&str> = reply.split('.').collect();
    let at = match tokens.len() {
        9 => 5,
        n if n >= 11 => 7,
        _ => return None,
    };
    if tokens.first() != Some(&"$JS") || tokens.get(1) != Some(&"ACK") {
        return None;
    }
    tokens.get(at)?.parse().ok()
}

/// The stream sequence a publish's acknowledgement names, or the error
/// it carries.
pub fn published_sequence(answer: &[u8]) -> Result<u64, PushBenchError> {
    let answer: Value = serde_json::from_slice(answer).map_err(failed)?;
    if let Some(error) = answer.get("error") {
        return Err(failed(format!("publish refused: {error}")));
    }
    answer
        .get("seq")
        .and_then(Value::as_u64)
        .ok_or_else(|| failed(format!("a publish answer without a sequence: {answer}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_stream_sequence_is_read_from_both_reply_formats() {
        assert_eq!(
            stream_sequence("$JS.ACK.S.C.1.42.7.1700000000000000000.3"),
            Some(42)
        );
        assert_eq!(
            stream_sequence("$JS.ACK.hub.ACCHASH.S.C.1.43.8.1700000000000000000.3.tok"),
            Some(43)
        );
        assert_eq!(stream_sequence("_INBOX.x.1"), None);
        assert_eq!(published_sequence(br#"{"stream":"S","seq":9}"#).unwrap(), 9);
        assert!(published_sequence(br#"{"error":{"code":503}}"#).is_err());
    }
}
