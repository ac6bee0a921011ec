//! ListOffsets: earliest (-2), latest (-1), max timestamp (-3), earliest
//! local (-4, the same as earliest on one tier), and by timestamp. On a
//! replicated partition only the leader answers, as on Kafka: elsewhere
//! NOT_LEADER_OR_FOLLOWER sends the client to look the leader up again.

use herald_broker::OffsetSpec;
use kafka_protocol::messages::list_offsets_request::ListOffsetsPartition;
use kafka_protocol::messages::list_offsets_response::{
    ListOffsetsPartitionResponse, ListOffsetsTopicResponse,
};
use kafka_protocol::messages::{ListOffsetsRequest, ListOffsetsResponse};
use kafka_protocol::ResponseError;

use super::read_source::ReadTopic;
use super::{topic_allowed, Context};
use crate::error_code;
use crate::session::Session;
use herald_auth::Operation;

const LATEST: i64 = -1;
const EARLIEST: i64 = -2;
const MAX_TIMESTAMP: i64 = -3;
const EARLIEST_LOCAL: i64 = -4;

/// Answers a ListOffsets request.
pub async fn handle(
    ctx: &Context,
    session: &Session,
    request: ListOffsetsRequest,
    version: i16,
) -> ListOffsetsResponse {
    let mut topics = Vec::with_capacity(request.topics.len());
    for t in request.topics {
        let topic = ReadTopic::by_name(ctx, &t.name.0);
        let name = topic.as_ref().map_or(&*t.name.0, |t| t.authorized_name());
        let allowed = topic_allowed(ctx, session, Operation::Describe, name);
        let mut partitions = Vec::with_capacity(t.partitions.len());
        for p in &t.partitions {
            partitions.push(if allowed {
                lookup(topic.as_ref(), p, version).await
            } else {
                ListOffsetsPartitionResponse::default()
                    .with_partition_index(p.partition_index)
                    .with_timestamp(-1)
                    .with_offset(-1)
                    .with_error_code(error_code::code(ResponseError::TopicAuthorizationFailed))
            });
        }
        topics.push(
            ListOffsetsTopicResponse::default()
                .with_name(t.name)
                .with_partitions(partitions),
        );
    }
    ListOffsetsResponse::default().with_topics(topics)
}

async fn lookup(
    topic: Option<&ReadTopic>,
    request: &ListOffsetsPartition,
    version: i16,
) -> ListOffsetsPartitionResponse {
    let response = ListOffsetsPartitionResponse::default()
        .with_partition_index(request.partition_index)
        .with_timestamp(-1)
        .with_offset(-1);
    let Some(partition) = topic.and_then(|t| t.partition(request.partition_index)) else {
        return response.with_error_code(error_code::code(ResponseError::UnknownTopicOrPartition));
    };
    let spec = match request.timestamp {
        LATEST => OffsetSpec::Latest,
        EARLIEST | EARLIEST_LOCAL => OffsetSpec::Earliest,
        MAX_TIMESTAMP => OffsetSpec::MaxTimestamp,
        ts if ts >= 0 => OffsetSpec::Timestamp(ts),
        _ => return response.with_error_code(error_code::code(ResponseError::InvalidRequest)),
    };
    let response = if version >= 4 {
        response.with_leader_epoch(0)
    } else {
        response
    };
    if !partition.leads_here() {
        return response.with_error_code(error_code::code(ResponseError::NotLeaderOrFollower));
    }
    match partition.list_offset(spec).await {
        Ok(Some(found)) => response
            .with_offset(found.offset as i64)
            .with_timestamp(found.timestamp),
        // No record at or after the timestamp (or an empty partition for
        // max timestamp): Kafka answers offset and timestamp -1.
        Ok(None) => response,
        Err(e) => response.with_error_code(error_code::storage(&e)),
    }
}

/// How the guard walks this API's request body before `kafka-protocol`
/// decodes it, transcribed from Kafka's message definition (the registry's
/// tests check it consumes exactly the bytes of every served version).
pub(crate) mod layout {
    use crate::codec::guard::Ty::*;
    use crate::codec::guard::{all, since, Field, Schema};

    const LIST_OFFSETS_PARTITION: &[Field] = &[all(I32), since(4, I32), all(I64)];
    const LIST_OFFSETS_TOPIC: &[Field] = &[all(Str), all(Array(LIST_OFFSETS_PARTITION))];
    pub(crate) const SCHEMA: Schema = Schema {
        flexible_from: 6,
        fields: &[
            all(I32),
            since(2, I8),
            all(Array(LIST_OFFSETS_TOPIC)),
            since(10, I32),
        ],
    };
}
