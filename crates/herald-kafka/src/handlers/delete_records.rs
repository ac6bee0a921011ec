//! DeleteRecords: moves each partition's log start offset up to the offset
//! asked (-1: the high watermark), through the partition contract's
//! truncation. Records below it are no longer served; whole segments below
//! it are deleted by the next maintenance. The answer's low watermark is
//! the log start offset after the call. On a replicated partition the
//! move is a Raft entry every replica applies; waiting for it to commit is
//! bounded by the request's timeout (REQUEST_TIMED_OUT past it, while the
//! entry may still commit).

use herald_broker::Topic;
use kafka_protocol::messages::delete_records_request::DeleteRecordsPartition;
use kafka_protocol::messages::delete_records_response::{
    DeleteRecordsPartitionResult, DeleteRecordsTopicResult,
};
use kafka_protocol::messages::{DeleteRecordsRequest, DeleteRecordsResponse};
use kafka_protocol::ResponseError;

use super::{topic_allowed, Context};
use crate::error_code;
use crate::session::Session;
use herald_auth::Operation;

/// Kafka's "up to the high watermark" offset.
const HIGH_WATERMARK: i64 = -1;

/// Answers a DeleteRecords request.
pub async fn handle(
    ctx: &Context,
    session: &Session,
    request: DeleteRecordsRequest,
    _version: i16,
) -> DeleteRecordsResponse {
    let deadline = tokio::time::Instant::now()
        + std::time::Duration::from_millis(request.timeout_ms.max(0) as u64);
    let mut topics = Vec::with_capacity(request.topics.len());
    for t in request.topics {
        let allowed = topic_allowed(ctx, session, Operation::Delete, &t.name.0);
        let topic = ctx.broker.topic(&t.name.0);
        let mut partitions = Vec::with_capacity(t.partitions.len());
        for p in &t.partitions {
            partitions.push(if allowed {
                delete_partition(topic.as_deref(), p, deadline).await
            } else {
                DeleteRecordsPartitionResult::default()
                    .with_partition_index(p.partition_index)
                    .with_low_watermark(-1)
                    .with_error_code(error_code::code(ResponseError::TopicAuthorizationFailed))
            });
        }
        topics.push(
            DeleteRecordsTopicResult::default()
                .with_name(t.name)
                .with_partitions(partitions),
        );
    }
    DeleteRecordsResponse::default().with_topics(topics)
}

async fn delete_partition(
    topic: Option<&Topic>,
    request: &DeleteRecordsPartition,
    deadline: tokio::time::Instant,
) -> DeleteRecordsPartitionResult {
    let result = DeleteRecordsPartitionResult::default()
        .with_partition_index(request.partition_index)
        .with_low_watermark(-1);
    let Some(partition) = topic.and_then(|t| t.partition(request.partition_index)) else {
        return result.with_error_code(error_code::code(ResponseError::UnknownTopicOrPartition));
    };
    let offset = match request.offset {
        HIGH_WATERMARK => partition.watermarks().high_watermark,
        offset => match u64::try_from(offset) {
            Ok(offset) => offset,
            Err(_) => {
                return result.with_error_code(error_code::code(ResponseError::OffsetOutOfRange))
            }
        },
    };
    let truncated = tokio::time::timeout_at(deadline, partition.truncate_before(offset))
        .await
        .unwrap_or(Err(herald_broker::StorageError::TimedOut));
    match truncated {
        Ok(log_start_offset) => result.with_low_watermark(log_start_offset as i64),
        Err(e) => {
            tracing::debug!(topic = topic.map(Topic::name), partition = request.partition_index, error = %e, "delete records refused");
            result.with_error_code(error_code::storage(&e))
        }
    }
}

/// How the guard walks this API's request body before `kafka-protocol`
/// decodes it, transcribed from Kafka's message definition (the registry's
/// tests check it consumes exactly the bytes of every served version).
pub(crate) mod layout {
    use crate::codec::guard::Ty::*;
    use crate::codec::guard::{all, Field, Schema};

    const DELETE_RECORDS_PARTITION: &[Field] = &[all(I32), all(I64)];
    const DELETE_RECORDS_TOPIC: &[Field] = &[all(Str), all(Array(DELETE_RECORDS_PARTITION))];
    pub(crate) const SCHEMA: Schema = Schema {
        flexible_from: 2,
        fields: &[all(Array(DELETE_RECORDS_TOPIC)), all(I32)],
    };
}
