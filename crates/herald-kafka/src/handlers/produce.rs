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
use crate::quota::Verdict;
use crate::registry::Call;
use crate::session::Session;
use herald_auth::Operation;
use herald_records::BatchHeader;

/// Answers a Produce request; `None` for acks=0.
///
/// The frame's bytes were charged to the client's produce quota and its
/// tenant's input byte rate as it was read (`call.quota`); its records are
/// charged here to the tenant's input message rate. Throttled, the answer
/// carries `throttle_time_ms` (the connection is paused meanwhile);
/// refused (a tenant in reject mode), every partition is answered
/// THROTTLING_QUOTA_EXCEEDED with the reason and nothing is appended.
pub async fn handle(call: &Call<'_>, request: ProduceRequest) -> Option<ProduceResponse> {
    let (ctx, session, version) = (call.ctx, call.session, call.version);
    let acks = request.acks;
    let mut verdict = call.quota.clone();
    // Counted only when a limit or a quota will read the count.
    let counted = call.flow.is_some() || ctx.broker.has_quotas();
    if counted {
        let records: u64 = request
            .topic_data
            .iter()
            .flat_map(|t| t.partition_data.iter())
            .filter_map(|p| p.records.as_deref())
            .map(record_count)
            .sum();
        if let Some(flow) = &call.flow {
            flow.count(records);
        }
        if !matches!(verdict, Verdict::Refuse(_)) {
            let client_id = call.client_id();
            verdict = verdict.and(crate::quota::admit_records(
                ctx, session, &client_id, records,
            ));
        }
    }
    let responses = match &verdict {
        Verdict::Refuse(refusal) => request
            .topic_data
            .into_iter()
            .map(|data| refused(data, &refusal.message))
            .collect(),
        _ => {
            let mut responses = Vec::with_capacity(request.topic_data.len());
            for data in request.topic_data {
                responses.push(produce_topic(ctx, session, data, acks, version).await);
            }
            // An acknowledgement must not overtake a snapshot's cut.
            ctx.broker.snapshots().gate().pass().await;
            responses
        }
    };
    if let Some(flow) = &call.flow {
        flow.answered();
    }
    (acks != 0).then(|| {
        ProduceResponse::default()
            .with_responses(responses)
            .with_throttle_time_ms(verdict.throttle_time_ms())
    })
}

/// The records in a produce's batches, by their headers.
pub(crate) fn record_count(records: &[u8]) -> u64 {
    herald_records::batches(records)
        .map_while(Result::ok)
        .filter_map(BatchHeader::parse)
        .map(|header| u64::try_from(header.records_count()).unwrap_or(0))
        .sum()
}

/// Every partition of `data` answered THROTTLING_QUOTA_EXCEEDED.
fn refused(data: TopicProduceData, message: &str) -> TopicProduceResponse {
    let code = error_code::code(ResponseError::ThrottlingQuotaExceeded);
    let partitions = data
        .partition_data
        .iter()
        .map(|p| failed(p.index, code, Some(message)))
        .collect();
    TopicProduceResponse::default()
        .with_name(data.name)
        .with_topic_id(data.topic_id)
        .with_partition_responses(partitions)
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
    let view = if version >= 13 {
        ctx.broker.snapshots().view_by_id(data.topic_id)
    } else {
        ctx.broker.snapshots().view(&data.name.0)
    };
    if let Some(view) = view {
        // Told only to whoever may write the topic it shows.
        let (code, message) = if topic_allowed(ctx, session, Operation::Write, view.topic().name())
        {
            (
                error_code::code(ResponseError::InvalidTopicException),
                Some("a snapshot's view topic is read-only"),
            )
        } else {
            (
                error_code::code(ResponseError::TopicAuthorizationFailed),
                None,
            )
        };
        let partitions = data
            .partition_data
            .iter()
            .map(|p| failed(p.index, code, message))
            .collect();
        return response.with_partition_responses(partitions);
    }
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
    let adding = data
        .partition_data
        .iter()
        .filter_map(|p| p.records.as_ref())
        .map(|records| records.len() as u64)
        .sum();
    if let Err(over) = ctx.broker.check_tenant_storage(topic.name(), adding) {
        let code = error_code::code(ResponseError::PolicyViolation);
        let message = over.to_string();
        let partitions = data
            .partition_data
            .iter()
            .map(|p| failed(p.index, code, Some(&message)))
            .collect();
        return response.with_partition_responses(partitions);
    }
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
