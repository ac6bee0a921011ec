//! OffsetDelete: removes a group's committed offsets of topics no member is
//! subscribed to.

use herald_broker::{GroupCall, GroupReply};
use herald_group::TopicPartition;
use kafka_protocol::messages::offset_delete_response::{
    OffsetDeleteResponsePartition, OffsetDeleteResponseTopic,
};
use kafka_protocol::messages::{ApiKey, OffsetDeleteRequest, OffsetDeleteResponse, TopicName};

use super::{group_call, topic_allowed, unexpected_reply, wire_str, Context, Wait};
use crate::error_code;
use crate::session::Session;
use herald_auth::Operation;

/// Answers an OffsetDelete request.
pub async fn handle(
    ctx: &Context,
    session: &Session,
    request: OffsetDeleteRequest,
    _version: i16,
) -> OffsetDeleteResponse {
    // Each topic needs READ; the group's DELETE was checked before.
    let (topics_allowed, topics_denied): (Vec<_>, Vec<_>) = request
        .topics
        .iter()
        .partition(|t| topic_allowed(ctx, session, Operation::Read, &t.name.0));
    let partitions = topics_allowed
        .into_iter()
        .flat_map(|t| {
            t.partitions
                .iter()
                .map(|p| TopicPartition::new(t.name.0.to_string(), p.partition_index))
        })
        .collect();
    let call = GroupCall::OffsetDelete(herald_group::OffsetDeleteRequest {
        group_id: request.group_id.0.to_string(),
        partitions,
    });
    let r = match group_call(ctx, call, Wait::Short).await {
        GroupReply::OffsetDelete(r) => r,
        other => {
            let code = unexpected_reply(ApiKey::OffsetDelete, &other);
            return OffsetDeleteResponse::default().with_error_code(code);
        }
    };
    let mut topics: Vec<OffsetDeleteResponseTopic> = topics_denied
        .into_iter()
        .map(|t| {
            OffsetDeleteResponseTopic::default()
                .with_name(t.name.clone())
                .with_partitions(
                    t.partitions
                        .iter()
                        .map(|p| {
                            OffsetDeleteResponsePartition::default()
                                .with_partition_index(p.partition_index)
                                .with_error_code(error_code::code(
                                    kafka_protocol::ResponseError::TopicAuthorizationFailed,
                                ))
                        })
                        .collect(),
                )
        })
        .collect();
    for p in r.partitions {
        let partition = OffsetDeleteResponsePartition::default()
            .with_partition_index(p.topic_partition.partition)
            .with_error_code(error_code::group(p.error));
        match topics.last_mut() {
            Some(t) if *t.name.0 == *p.topic_partition.topic => t.partitions.push(partition),
            _ => topics.push(
                OffsetDeleteResponseTopic::default()
                    .with_name(TopicName(wire_str(p.topic_partition.topic)))
                    .with_partitions(vec![partition]),
            ),
        }
    }
    OffsetDeleteResponse::default()
        .with_error_code(error_code::group(r.error))
        .with_topics(topics)
}

/// How the guard walks this API's request body before `kafka-protocol`
/// decodes it, transcribed from Kafka's message definition (the registry's
/// tests check it consumes exactly the bytes of every served version).
pub(crate) mod layout {
    use crate::codec::guard::Ty::*;
    use crate::codec::guard::{all, Field, Schema};

    const OFFSET_DELETE_PARTITION: &[Field] = &[all(I32)];
    const OFFSET_DELETE_TOPIC: &[Field] = &[all(Str), all(Array(OFFSET_DELETE_PARTITION))];
    pub(crate) const SCHEMA: Schema = Schema {
        // OffsetDelete has no flexible version.
        flexible_from: i16::MAX,
        fields: &[all(Str), all(Array(OFFSET_DELETE_TOPIC))],
    };
}
