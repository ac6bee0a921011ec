//! Records in and out: Produce (one batch to one partition), Fetch (from
//! several partitions at once, decoded), ListOffsets (earliest, latest, by
//! timestamp).

use std::time::Duration;

use crate::error::{ClientError, Context as _};
use bytes::Bytes;
use kafka_protocol::messages::{
    fetch_request, list_offsets_request, produce_request, FetchRequest, ListOffsetsRequest,
    ProduceRequest,
};

use crate::connection::{versions, IO_TIMEOUT};
use crate::errors::{check, UNKNOWN_TOPIC_OR_PARTITION};
use crate::records::{decode_batch, FetchedRecord};
use crate::{topic_name, Connection};

/// ListOffsets timestamp asking for the latest offset (the high watermark).
pub const LATEST: i64 = -1;
/// ListOffsets timestamp asking for the earliest offset.
pub const EARLIEST: i64 = -2;
/// Bytes asked per partition in a fetch.
const PARTITION_FETCH_BYTES: i32 = 1024 * 1024;
/// Bytes asked per fetch in total.
const FETCH_BYTES: i32 = 8 * 1024 * 1024;

/// A Produce request carrying one batch for `topic`/`partition`, with
/// `acks` and the broker's time limit `timeout_ms`.
pub fn single_batch_request(
    topic: &str,
    partition: i32,
    batch: Bytes,
    acks: i16,
    timeout_ms: i32,
) -> ProduceRequest {
    ProduceRequest::default()
        .with_acks(acks)
        .with_timeout_ms(timeout_ms)
        .with_topic_data(vec![produce_request::TopicProduceData::default()
            .with_name(topic_name(topic))
            .with_partition_data(vec![
                produce_request::PartitionProduceData::default()
                    .with_index(partition)
                    .with_records(Some(batch)),
            ])])
}

/// Sends one batch to `topic`/`partition` with acks=1; returns its base offset.
pub async fn produce(
    connection: &mut Connection,
    topic: &str,
    partition: i32,
    batch: Bytes,
) -> Result<i64, ClientError> {
    let request = single_batch_request(topic, partition, batch, 1, 10_000);
    let response = connection
        .call(request, versions::PRODUCE, IO_TIMEOUT)
        .await?;
    let answer = response
        .responses
        .into_iter()
        .flat_map(|t| t.partition_responses)
        .next()
        .context("Produce answered no partition")?;
    if answer.error_code == UNKNOWN_TOPIC_OR_PARTITION {
        return Err(ClientError::refused(format!(
            "unknown topic '{topic}' or partition {partition}"
        )));
    }
    check(
        answer.error_code,
        answer.error_message.as_ref(),
        &format!("producing to {topic}/{partition}"),
    )?;
    Ok(answer.base_offset)
}

/// The offset of each of `partitions` of `topic` for a ListOffsets
/// `timestamp` ([`EARLIEST`], [`LATEST`] or milliseconds): for a timestamp,
/// the first offset whose record is at or after it, or `None` if none is.
pub async fn list_offsets(
    connection: &mut Connection,
    topic: &str,
    partitions: &[i32],
    timestamp: i64,
) -> Result<Vec<(i32, Option<i64>)>, ClientError> {
    let request = ListOffsetsRequest::default()
        .with_replica_id((-1).into())
        .with_topics(vec![list_offsets_request::ListOffsetsTopic::default()
            .with_name(topic_name(topic))
            .with_partitions(
                partitions
                    .iter()
                    .map(|p| {
                        list_offsets_request::ListOffsetsPartition::default()
                            .with_partition_index(*p)
                            .with_current_leader_epoch(-1)
                            .with_timestamp(timestamp)
                    })
                    .collect(),
            )]);
    let response = connection
        .call(request, versions::LIST_OFFSETS, IO_TIMEOUT)
        .await?;
    let mut out = Vec::with_capacity(partitions.len());
    for answer in response.topics.into_iter().flat_map(|t| t.partitions) {
        if answer.error_code == UNKNOWN_TOPIC_OR_PARTITION {
            return Err(ClientError::refused(format!("unknown topic '{topic}'")));
        }
        check(
            answer.error_code,
            None,
            &format!("listing offsets of {topic}/{}", answer.partition_index),
        )?;
        let offset = (answer.offset >= 0).then_some(answer.offset);
        out.push((answer.partition_index, offset));
    }
    out.sort_unstable();
    Ok(out)
}

/// What a fetch returned for one partition.
#[derive(Debug, Default)]
pub struct PartitionRecords {
    /// Partition index.
    pub partition: i32,
    /// Records at or after the requested offset, in order.
    pub records: Vec<FetchedRecord>,
}

/// Fetches from `topic` at each `(partition, offset)`, waiting up to
/// `max_wait` for data.
pub async fn fetch(
    connection: &mut Connection,
    topic: &str,
    positions: &[(i32, i64)],
    max_wait: Duration,
) -> Result<Vec<PartitionRecords>, ClientError> {
    let response = fetch_response(connection, topic, positions, max_wait).await?;
    let mut out = Vec::new();
    for answer in response.responses.into_iter().flat_map(|t| t.partitions) {
        check_partition(topic, &answer)?;
        let from = positions
            .iter()
            .find(|(p, _)| *p == answer.partition_index)
            .map_or(0, |(_, offset)| *offset);
        let bytes = answer.records.unwrap_or_default();
        let mut records = Vec::new();
        // A partial batch at the end is normal (cut by max bytes): stop there.
        for batch in herald_records::batches(&bytes).map_while(Result::ok) {
            records.extend(
                decode_batch(batch)?
                    .into_iter()
                    .filter(|r| r.offset >= from),
            );
        }
        out.push(PartitionRecords {
            partition: answer.partition_index,
            records,
        });
    }
    Ok(out)
}

/// Fetches whole batches, as the broker stores them, from `topic` at each
/// `(partition, offset)`; a batch cut short by the size limit is left out.
/// Returns each partition's batches with its high watermark.
pub async fn fetch_batches(
    connection: &mut Connection,
    topic: &str,
    positions: &[(i32, i64)],
    max_wait: Duration,
) -> Result<Vec<(i32, bytes::Bytes, i64)>, ClientError> {
    let response = fetch_response(connection, topic, positions, max_wait).await?;
    let mut out = Vec::new();
    for answer in response.responses.into_iter().flat_map(|t| t.partitions) {
        check_partition(topic, &answer)?;
        let bytes = answer.records.unwrap_or_default();
        let whole: usize = herald_records::batches(&bytes)
            .map_while(Result::ok)
            .map(<[u8]>::len)
            .sum();
        out.push((
            answer.partition_index,
            bytes.slice(..whole),
            answer.high_watermark,
        ));
    }
    Ok(out)
}

fn check_partition(
    topic: &str,
    answer: &kafka_protocol::messages::fetch_response::PartitionData,
) -> Result<(), ClientError> {
    if answer.error_code == UNKNOWN_TOPIC_OR_PARTITION {
        return Err(ClientError::refused(format!("unknown topic '{topic}'")));
    }
    check(
        answer.error_code,
        None,
        &format!("fetching {topic}/{}", answer.partition_index),
    )
}

async fn fetch_response(
    connection: &mut Connection,
    topic: &str,
    positions: &[(i32, i64)],
    max_wait: Duration,
) -> Result<kafka_protocol::messages::FetchResponse, ClientError> {
    let max_wait_ms = i32::try_from(max_wait.as_millis()).unwrap_or(i32::MAX);
    let request = FetchRequest::default()
        .with_replica_id((-1).into())
        .with_max_wait_ms(max_wait_ms)
        .with_min_bytes(1)
        .with_max_bytes(FETCH_BYTES)
        .with_session_epoch(-1)
        .with_topics(vec![fetch_request::FetchTopic::default()
            .with_topic(topic_name(topic))
            .with_partitions(
                positions
                    .iter()
                    .map(|(partition, offset)| {
                        fetch_request::FetchPartition::default()
                            .with_partition(*partition)
                            .with_current_leader_epoch(-1)
                            .with_fetch_offset(*offset)
                            .with_partition_max_bytes(PARTITION_FETCH_BYTES)
                    })
                    .collect(),
            )]);
    let response = connection
        .call(request, versions::FETCH, IO_TIMEOUT + max_wait)
        .await?;
    check(response.error_code, None, "fetch")?;
    Ok(response)
}
