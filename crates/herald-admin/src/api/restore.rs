//! `POST /v1/topics/{name}/restore`: creates topic `name` from a raw
//! backup, its records at their original offsets.
//!
//! The body is one line of JSON, the plan,
//! `{"partitions": [{"start": S, "end": E, "bytes": B}, ...], "configs":
//! {"retention.ms": "...", ...}}`, then each partition's `B` bytes of
//! batches in partition order (the `.batches` files of the backup). The
//! body is read as it arrives, about a megabyte of batches held at a time,
//! written off the async runtime; the topic exists only once every batch
//! is in (201), and nothing is left of it otherwise. A body that stalls
//! for [`BODY_IDLE_TIMEOUT`] is given up; at most [`RESTORES_MAX`]
//! restores run at once.

use std::collections::BTreeMap;
use std::sync::Arc;

use bytes::{Buf, Bytes, BytesMut};
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::{Request, Response, StatusCode};
use serde::Deserialize;
use serde_json::json;

use herald_broker::{Broker, BrokerError, TopicRestore};

use super::{error, json, BODY_IDLE_TIMEOUT, JSON_BODY_MAX};

/// Largest batch a backup may hold (the largest a frame may carry).
const BATCH_BYTES_MAX: usize = 128 << 20;
/// Most restores at once.
pub const RESTORES_MAX: usize = 2;
/// Bytes of batches gathered before they are written.
const WRITE_BYTES: usize = 1 << 20;

static RESTORES: tokio::sync::Semaphore = tokio::sync::Semaphore::const_new(RESTORES_MAX);
/// Bytes of a batch's header up to and including its length.
const LENGTH_END: usize = 12;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Plan {
    partitions: Vec<PlannedPartition>,
    #[serde(default)]
    configs: BTreeMap<String, String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct PlannedPartition {
    start: u64,
    end: u64,
    bytes: u64,
}

/// Answers `POST /v1/topics/{name}/restore`.
pub async fn handle(
    broker: &Arc<Broker>,
    name: &str,
    request: Request<Incoming>,
) -> Response<Full<Bytes>> {
    let Ok(_slot) = RESTORES.try_acquire() else {
        return error(
            StatusCode::TOO_MANY_REQUESTS,
            &format!("{RESTORES_MAX} restores are running; try again once one ends"),
        );
    };
    let mut body = request.into_body();
    let mut buffer = BytesMut::new();
    let plan = loop {
        if let Some(newline) = buffer.iter().position(|&b| b == b'\n') {
            let line = buffer.split_to(newline + 1);
            match serde_json::from_slice::<Plan>(&line[..newline]) {
                Ok(plan) => break plan,
                Err(e) => return error(StatusCode::BAD_REQUEST, &format!("invalid plan: {e}")),
            }
        }
        if buffer.len() > JSON_BODY_MAX {
            return error(StatusCode::BAD_REQUEST, "the plan's line is too long");
        }
        match next_chunk(&mut body).await {
            Ok(Some(chunk)) => buffer.extend_from_slice(&chunk),
            Ok(None) => return error(StatusCode::BAD_REQUEST, "the body ended before the plan"),
            Err(e) => return error(StatusCode::BAD_REQUEST, &e),
        }
    };
    let ranges: Vec<(u64, u64)> = plan.partitions.iter().map(|p| (p.start, p.end)).collect();
    let configs: Vec<(String, String)> = plan.configs.into_iter().collect();
    let (opening, topic) = (Arc::clone(broker), name.to_owned());
    let begun =
        tokio::task::spawn_blocking(move || opening.begin_restore(&topic, &configs, &ranges)).await;
    let mut restore = match begun {
        Ok(Ok(restore)) => restore,
        Ok(Err(e)) => return refused(&e),
        Err(e) => {
            return error(
                StatusCode::INTERNAL_SERVER_ERROR,
                &format!("restore task: {e}"),
            )
        }
    };
    let mut records = 0u64;
    for (index, partition) in plan.partitions.iter().enumerate() {
        let mut left = partition.bytes;
        while left > 0 {
            // About a megabyte of whole batches, then written in one go.
            let mut gathered = Vec::new();
            let mut size = 0;
            while left > 0 && size < WRITE_BYTES {
                match next_batch(&mut body, &mut buffer, left).await {
                    Ok(batch) => {
                        left -= batch.len() as u64;
                        size += batch.len();
                        gathered.push(batch);
                    }
                    Err(e) => {
                        return error(StatusCode::BAD_REQUEST, &format!("partition {index}: {e}"))
                    }
                }
            }
            let written = tokio::task::spawn_blocking(move || {
                for batch in &gathered {
                    restore.append(index, batch)?;
                }
                Ok::<_, BrokerError>(restore)
            })
            .await;
            restore = match written {
                Ok(Ok(restore)) => restore,
                Ok(Err(e)) => return refused(&e),
                Err(e) => {
                    return error(
                        StatusCode::INTERNAL_SERVER_ERROR,
                        &format!("restore task: {e}"),
                    )
                }
            };
        }
        records += partition.end.saturating_sub(partition.start);
    }
    if !buffer.is_empty() || matches!(next_chunk(&mut body).await, Ok(Some(c)) if !c.is_empty()) {
        return error(
            StatusCode::BAD_REQUEST,
            "the body holds more than the plan's bytes",
        );
    }
    match tokio::task::spawn_blocking(move || finish(restore, records)).await {
        Ok(response) => response,
        Err(e) => error(
            StatusCode::INTERNAL_SERVER_ERROR,
            &format!("restore task: {e}"),
        ),
    }
}

fn finish(restore: TopicRestore, records: u64) -> Response<Full<Bytes>> {
    match restore.finish() {
        Ok(summary) => json(
            StatusCode::CREATED,
            &json!({
                "topic": summary.name,
                "id": summary.id.to_string(),
                "partitions": summary.partitions,
                "records": records,
            }),
        ),
        Err(e) => refused(&e),
    }
}

/// The next whole batch, at most `left` bytes, reading more of the body
/// as needed.
async fn next_batch(
    body: &mut Incoming,
    buffer: &mut BytesMut,
    left: u64,
) -> Result<Bytes, String> {
    loop {
        if buffer.len() >= LENGTH_END {
            let declared = i32::from_be_bytes([buffer[8], buffer[9], buffer[10], buffer[11]]);
            let size = usize::try_from(declared)
                .ok()
                .and_then(|n| n.checked_add(LENGTH_END))
                .filter(|&n| n <= BATCH_BYTES_MAX)
                .ok_or_else(|| format!("a batch declares {declared} bytes"))?;
            if size as u64 > left {
                return Err(format!(
                    "a batch of {size} bytes crosses the partition's end"
                ));
            }
            if buffer.len() >= size {
                let batch = buffer.split_to(size).freeze();
                herald_records::validate(&batch).map_err(|e| format!("a damaged batch: {e}"))?;
                return Ok(batch);
            }
        }
        match next_chunk(body).await? {
            Some(chunk) => buffer.extend_from_slice(&chunk),
            None => return Err("the body ended inside the partition's bytes".to_owned()),
        }
    }
}

async fn next_chunk(body: &mut Incoming) -> Result<Option<Bytes>, String> {
    loop {
        let Ok(frame) = tokio::time::timeout(BODY_IDLE_TIMEOUT, body.frame()).await else {
            return Err(format!(
                "the body stalled for {} s",
                BODY_IDLE_TIMEOUT.as_secs()
            ));
        };
        match frame {
            None => return Ok(None),
            Some(Err(e)) => return Err(format!("reading the body: {e}")),
            Some(Ok(frame)) => {
                if let Ok(mut data) = frame.into_data() {
                    return Ok(Some(data.copy_to_bytes(data.remaining())));
                }
            }
        }
    }
}

fn refused(e: &BrokerError) -> Response<Full<Bytes>> {
    let status = match e {
        BrokerError::TopicExists { .. } => StatusCode::CONFLICT,
        BrokerError::Io { .. } | BrokerError::Log { .. } => StatusCode::INTERNAL_SERVER_ERROR,
        _ => StatusCode::BAD_REQUEST,
    };
    error(status, &e.to_string())
}
