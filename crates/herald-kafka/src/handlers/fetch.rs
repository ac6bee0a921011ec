//! Fetch: whole batches from each requested partition, sent as the log's
//! own bytes (spliced into the response, never re-encoded). When less than
//! `min_bytes` is available the request parks on the partitions' data
//! notifications until enough arrives, `max_wait_ms` passes, or the server
//! shuts down; there is no polling loop. Fetch sessions are declined
//! (session id 0), so every requested partition is always answered.

use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

use bytes::Bytes;
use herald_broker::{StorageError, Watermarks};
use kafka_protocol::messages::fetch_response::{FetchableTopicResponse, PartitionData};
use kafka_protocol::messages::{FetchRequest, FetchResponse};
use kafka_protocol::ResponseError;
use tokio::time::Instant;

use super::read_source::{ReadSource, ReadTopic};
use super::{topic_allowed, Context};
use crate::codec::Spliced;
use crate::error_code;
use crate::session::Session;
use herald_auth::Operation;

/// One requested partition, resolved.
struct Wanted {
    topic_slot: usize,
    index: i32,
    partition: Result<ReadSource, i16>,
    fetch_offset: i64,
    max_bytes: usize,
}

/// Answers a Fetch request; also returns the record buffers to splice.
///
/// Under a fetch quota (the client's `consumer_byte_rate`, its tenant's
/// output rates) the answer is sized to the tokens the quota holds rather
/// than answered empty: at least the first batch goes, as Kafka's
/// `max_bytes` allows. What went over is answered with `throttle_time_ms`
/// and paid by pausing the connection.
pub async fn handle(
    ctx: &Context,
    session: &Session,
    request: FetchRequest,
    version: i16,
    client_id: &str,
) -> (FetchResponse, Vec<Spliced>) {
    let (topics, wanted) = resolve(ctx, session, &request, version);
    let min_bytes = usize::try_from(request.min_bytes).unwrap_or(0);
    let mut max_bytes = usize::try_from(request.max_bytes).unwrap_or(0);
    if let Some(allowed) = crate::quota::fetch_allowance(ctx, session, client_id) {
        max_bytes = max_bytes.min(usize::try_from(allowed).unwrap_or(usize::MAX).max(1));
    }
    let wait = Duration::from_millis(u64::try_from(request.max_wait_ms).unwrap_or(0))
        .min(ctx.config.fetch_wait_max);
    let deadline = Instant::now() + wait;
    loop {
        let read = read_all(&wanted, max_bytes).await;
        let done = read.bytes >= min_bytes.max(1) || read.any_error || Instant::now() >= deadline;
        if done || !wait_for_any(ctx, &wanted, &read.high_watermarks, deadline).await {
            let records = || {
                read.partitions
                    .iter()
                    .filter_map(|(_, p)| p.records.as_deref())
                    .map(super::produce::record_count)
                    .sum()
            };
            let verdict =
                crate::quota::charge_fetch(ctx, session, client_id, read.bytes as u64, records);
            let response =
                assemble(topics, read.partitions).with_throttle_time_ms(verdict.throttle_time_ms());
            // Records shown to a client must not overtake a snapshot's cut.
            ctx.broker.snapshots().gate().pass().await;
            return (response, read.splice);
        }
    }
}

fn resolve(
    ctx: &Context,
    session: &Session,
    request: &FetchRequest,
    version: i16,
) -> (Vec<FetchableTopicResponse>, Vec<Wanted>) {
    let mut topics = Vec::with_capacity(request.topics.len());
    let mut wanted = Vec::new();
    for (slot, t) in request.topics.iter().enumerate() {
        let topic = if version >= 13 {
            ReadTopic::by_id(ctx, t.topic_id)
        } else {
            ReadTopic::by_name(ctx, &t.topic.0)
        };
        let unknown = if version >= 13 {
            ResponseError::UnknownTopicId
        } else {
            ResponseError::UnknownTopicOrPartition
        };
        topics.push(
            FetchableTopicResponse::default()
                .with_topic(t.topic.clone())
                .with_topic_id(t.topic_id),
        );
        // Authorized before its existence is told; an unknown topic id
        // names nothing to authorize.
        let name = topic
            .as_ref()
            .map_or_else(|| t.topic.0.to_string(), |t| t.authorized_name().to_owned());
        let unknown_id = version >= 13 && topic.is_none();
        let denied = !unknown_id && !topic_allowed(ctx, session, Operation::Read, &name);
        for p in &t.partitions {
            let partition = match &topic {
                _ if denied => Err(error_code::code(ResponseError::TopicAuthorizationFailed)),
                None => Err(error_code::code(unknown)),
                Some(topic) => topic
                    .partition(p.partition)
                    .ok_or(error_code::code(ResponseError::UnknownTopicOrPartition)),
            };
            wanted.push(Wanted {
                topic_slot: slot,
                index: p.partition,
                partition,
                fetch_offset: p.fetch_offset,
                max_bytes: usize::try_from(p.partition_max_bytes).unwrap_or(0),
            });
        }
    }
    (topics, wanted)
}

struct ReadResult {
    partitions: Vec<(usize, PartitionData)>,
    splice: Vec<Spliced>,
    high_watermarks: Vec<u64>,
    bytes: usize,
    any_error: bool,
}

/// Reads every partition once, within the per-partition and total limits.
/// The first non-empty partition always gets at least one whole batch (so
/// a batch larger than the limits still makes progress); later partitions
/// only get what fits in the rest of the total. Each partition's answer
/// states the watermarks its read was made at, so it never carries records
/// past the high watermark it states.
async fn read_all(wanted: &[Wanted], max_bytes_total: usize) -> ReadResult {
    let mut result = ReadResult {
        partitions: Vec::with_capacity(wanted.len()),
        splice: Vec::new(),
        high_watermarks: Vec::with_capacity(wanted.len()),
        bytes: 0,
        any_error: false,
    };
    for w in wanted {
        let base = PartitionData::default()
            .with_partition_index(w.index)
            .with_records(Some(Bytes::new()));
        let partition = match &w.partition {
            Ok(p) => p,
            Err(code) => {
                result.any_error = true;
                result.high_watermarks.push(0);
                result.partitions.push((
                    w.topic_slot,
                    base.with_error_code(*code).with_high_watermark(-1),
                ));
                continue;
            }
        };
        let budget = max_bytes_total.saturating_sub(result.bytes);
        let offset = u64::try_from(w.fetch_offset);
        let skip = result.bytes > 0 && budget == 0;
        let read = match offset {
            Ok(offset) if !skip => {
                Some(partition.read(offset, w.max_bytes.min(budget).max(1)).await)
            }
            _ => None,
        };
        let watermarks = match &read {
            Some(Ok(slice)) => slice.watermarks,
            Some(Err(StorageError::OffsetOutOfRange {
                log_start_offset,
                high_watermark,
                ..
            })) => Watermarks {
                log_start_offset: *log_start_offset,
                high_watermark: *high_watermark,
            },
            _ => partition.watermarks(),
        };
        result.high_watermarks.push(watermarks.high_watermark);
        let base = base
            .with_high_watermark(watermarks.high_watermark as i64)
            .with_last_stable_offset(watermarks.high_watermark as i64)
            .with_log_start_offset(watermarks.log_start_offset as i64);
        if offset.is_err() {
            result.any_error = true;
            result.partitions.push((
                w.topic_slot,
                base.with_error_code(error_code::code(ResponseError::OffsetOutOfRange)),
            ));
            continue;
        }
        let Some(read) = read else {
            // The total is spent: this partition waits for the next fetch.
            result.partitions.push((w.topic_slot, base));
            continue;
        };
        match read {
            Ok(slice) if result.bytes > 0 && slice.bytes.len() > budget => {
                // Would overrun the total: leave it for the next fetch.
                result.partitions.push((w.topic_slot, base));
            }
            Ok(slice) => {
                result.bytes += slice.bytes.len();
                if !slice.bytes.is_empty() {
                    result.splice.push(Spliced {
                        bytes: slice.bytes.clone(),
                        region: slice.region,
                    });
                }
                result
                    .partitions
                    .push((w.topic_slot, base.with_records(Some(slice.bytes))));
            }
            Err(e) => {
                result.any_error = true;
                result
                    .partitions
                    .push((w.topic_slot, base.with_error_code(error_code::storage(&e))));
            }
        }
    }
    result
}

/// Waits until any partition's high watermark passes what was seen, the
/// deadline, or shutdown. Returns false if waiting should stop.
async fn wait_for_any(ctx: &Context, wanted: &[Wanted], seen: &[u64], deadline: Instant) -> bool {
    let waits: Vec<Pin<Box<dyn Future<Output = ()> + Send + '_>>> = wanted
        .iter()
        .zip(seen)
        .filter_map(|(w, &hw)| {
            w.partition
                .as_ref()
                .ok()
                .map(|p| Box::pin(p.wait_for_data(hw)) as _)
        })
        .collect();
    if waits.is_empty() {
        tokio::select! {
            _ = tokio::time::sleep_until(deadline) => {}
            _ = ctx.shutdown.cancelled() => {}
        }
        return false;
    }
    let woken = tokio::select! {
        _ = futures_util::future::select_all(waits) => true,
        _ = tokio::time::sleep_until(deadline) => false,
        _ = ctx.shutdown.cancelled() => false,
    };
    // A wait also ends when a log is closed (its topic deleted, or the
    // broker stopping) without new data; waiting again would spin, so the
    // fetch is answered now unless some partition really grew.
    woken && advanced(wanted, seen)
}

fn advanced(wanted: &[Wanted], seen: &[u64]) -> bool {
    wanted.iter().zip(seen).any(|(w, &hw)| {
        w.partition
            .as_ref()
            .is_ok_and(|p| p.watermarks().high_watermark > hw)
    })
}

fn assemble(
    mut topics: Vec<FetchableTopicResponse>,
    partitions: Vec<(usize, PartitionData)>,
) -> FetchResponse {
    for (slot, data) in partitions {
        topics[slot].partitions.push(data);
    }
    // Session id 0: sessions are declined, every fetch is a full fetch.
    FetchResponse::default()
        .with_session_id(0)
        .with_responses(topics)
}

/// How the guard walks this API's request body before `kafka-protocol`
/// decodes it, transcribed from Kafka's message definition (the registry's
/// tests check it consumes exactly the bytes of every served version).
pub(crate) mod layout {
    use crate::codec::guard::Ty::*;
    use crate::codec::guard::{all, between, since, tagged, Field, Schema};

    const FETCH_PARTITION: &[Field] = &[
        all(I32),
        since(9, I32),
        all(I64),
        since(12, I32),
        since(5, I64),
        all(I32),
        tagged(0, 17, Uuid),
        tagged(1, 18, I64),
    ];
    const REPLICA_STATE: &[Field] = &[since(15, I32), since(15, I64)];
    const FETCH_TOPIC: &[Field] = &[
        between(0, 12, Str),
        since(13, Uuid),
        all(Array(FETCH_PARTITION)),
    ];
    const FORGOTTEN_TOPIC: &[Field] = &[between(7, 12, Str), since(13, Uuid), since(7, I32Array)];
    pub(crate) const SCHEMA: Schema = Schema {
        flexible_from: 12,
        fields: &[
            between(0, 14, I32),
            all(I32),
            all(I32),
            all(I32),
            all(I8),
            since(7, I32),
            since(7, I32),
            all(Array(FETCH_TOPIC)),
            since(7, Array(FORGOTTEN_TOPIC)),
            since(11, Str),
            tagged(0, 12, Str),
            tagged(1, 15, Struct(REPLICA_STATE)),
        ],
    };
}
