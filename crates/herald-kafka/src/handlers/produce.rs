//! Produce: each partition's record batch goes to `Partition::append` as the
//! byte slice it arrived in (never decoded), with the durability `acks` asks
//! for; acks=0 gets no response.

use bytes::Bytes;
use herald_broker::{Acks, ProduceError, Topic};
use kafka_protocol::messages::produce_request::TopicProduceData;
use kafka_protocol::messages::produce_response::{PartitionProduceResponse, TopicProduceResponse};
use kafka_protocol::messages::{ProduceRequest, ProduceResponse};
use kafka_protocol::ResponseError;

use super::{topic_allowed, wire_str, Context};
use crate::error_code;
use crate::session::Session;
use herald_auth::Operation;

/// Answers a Produce request; `None` for acks=0.
pub async fn handle(
    ctx: &Context,
    session: &Session,
    request: ProduceRequest,
    version: i16,
) -> Option<ProduceResponse> {
    let acks = request.acks;
    let mut responses = Vec::with_capacity(request.topic_data.len());
    for data in request.topic_data {
        responses.push(produce_topic(ctx, session, data, acks, version).await);
    }
    (acks != 0).then(|| ProduceResponse::default().with_responses(responses))
}

async fn produce_topic(
    ctx: &Context,
    session: &Session,
    data: TopicProduceData,
    acks: i16,
    version: i16,
) -> TopicProduceResponse {
    let topic = if version >= 13 {
        ctx.broker.topic_by_id(data.topic_id)
    } else {
        ctx.broker.topic(&data.name.0)
    };
    let response = TopicProduceResponse::default()
        .with_name(data.name.clone())
        .with_topic_id(data.topic_id);
    let unknown = if version >= 13 {
        ResponseError::UnknownTopicId
    } else {
        ResponseError::UnknownTopicOrPartition
    };
    // Authorized before its existence is told (a name only: an unknown
    // topic id names nothing to authorize).
    let name = topic
        .as_ref()
        .map_or_else(|| data.name.0.to_string(), |t| t.name().to_owned());
    let refusal = if version >= 13 && topic.is_none() {
        Some(unknown)
    } else if !topic_allowed(ctx, session, Operation::Write, &name) {
        Some(ResponseError::TopicAuthorizationFailed)
    } else if topic.is_none() {
        Some(unknown)
    } else {
        None
    };
    let (Some(topic), None) = (topic, refusal) else {
        let code = error_code::code(refusal.unwrap_or(unknown));
        let partitions = data
            .partition_data
            .iter()
            .map(|p| failed(p.index, code, None))
            .collect();
        return response.with_partition_responses(partitions);
    };
    let mut partitions = Vec::with_capacity(data.partition_data.len());
    for p in data.partition_data {
        partitions.push(produce_partition(&topic, p.index, p.records, acks).await);
    }
    response.with_partition_responses(partitions)
}

async fn produce_partition(
    topic: &Topic,
    index: i32,
    records: Option<Bytes>,
    acks: i16,
) -> PartitionProduceResponse {
    let acks = match acks {
        0 => Acks::None,
        1 => Acks::Leader,
        -1 => Acks::All,
        _ => {
            return failed(
                index,
                error_code::code(ResponseError::InvalidRequiredAcks),
                None,
            )
        }
    };
    let Some(partition) = topic.partition(index) else {
        return failed(
            index,
            error_code::code(ResponseError::UnknownTopicOrPartition),
            None,
        );
    };
    let Some(records) = records else {
        return failed(
            index,
            error_code::code(ResponseError::InvalidRecord),
            Some("records are null"),
        );
    };
    match partition.append(&records, acks).await {
        Ok(outcome) => PartitionProduceResponse::default()
            .with_index(index)
            .with_base_offset(outcome.base_offset as i64)
            .with_log_append_time_ms(-1)
            .with_log_start_offset(outcome.log_start_offset as i64),
        Err(e) => {
            match &e {
                ProduceError::Storage(_) => {
                    tracing::error!(topic = topic.name(), partition = index, error = %e, "append failed")
                }
                _ => {
                    tracing::debug!(topic = topic.name(), partition = index, error = %e, "batch refused")
                }
            }
            failed(index, error_code::produce(&e), Some(&e.to_string()))
        }
    }
}

fn failed(index: i32, error_code: i16, message: Option<&str>) -> PartitionProduceResponse {
    PartitionProduceResponse::default()
        .with_index(index)
        .with_error_code(error_code)
        .with_base_offset(-1)
        .with_log_append_time_ms(-1)
        .with_log_start_offset(-1)
        .with_error_message(message.map(wire_str))
}

/// How the guard walks this API's request body before `kafka-protocol`
/// decodes it, transcribed from Kafka's message definition (the registry's
/// tests check it consumes exactly the bytes of every served version).
pub(crate) mod layout {
    use crate::codec::guard::Ty::*;
    use crate::codec::guard::{all, between, since, Field, Schema};

    const PRODUCE_PARTITION: &[Field] = &[all(I32), all(Bytes)];
    const PRODUCE_TOPIC: &[Field] = &[
        between(0, 12, Str),
        since(13, Uuid),
        all(Array(PRODUCE_PARTITION)),
    ];
    pub(crate) const SCHEMA: Schema = Schema {
        flexible_from: 9,
        fields: &[all(Str), all(I16), all(I32), all(Array(PRODUCE_TOPIC))],
    };
}
