//! OffsetFetch: committed offsets of one group (v1-7) or of several groups
//! in one request (v8+). A partition without a commit answers offset -1.

use herald_broker::{GroupCall, GroupReply};
use herald_group::{OffsetFetchPartition, TopicPartition};
use kafka_protocol::messages::offset_fetch_response::{
    OffsetFetchResponseGroup, OffsetFetchResponsePartition, OffsetFetchResponsePartitions,
    OffsetFetchResponseTopic, OffsetFetchResponseTopics,
};
use kafka_protocol::messages::{
    ApiKey, GroupId, OffsetFetchRequest, OffsetFetchResponse, TopicName,
};
use kafka_protocol::ResponseError;

use super::{group_allowed, group_call, topic_allowed, unexpected_reply, wire_str, Context, Wait};
use crate::error_code;
use crate::session::Session;
use herald_auth::Operation;

/// Answers an OffsetFetch request.
pub async fn handle(
    ctx: &Context,
    session: &Session,
    request: OffsetFetchRequest,
    version: i16,
) -> OffsetFetchResponse {
    let require_stable = version >= 7 && request.require_stable;
    if version >= 8 {
        let mut groups = Vec::with_capacity(request.groups.len());
        for group in request.groups {
            let partitions = group.topics.map(|topics| {
                topics
                    .into_iter()
                    .flat_map(|t| {
                        let name = t.name.0.to_string();
                        t.partition_indexes
                            .into_iter()
                            .map(move |p| TopicPartition::new(name.clone(), p))
                    })
                    .collect()
            });
            let (error, found, denied) =
                fetch(ctx, session, &group.group_id, partitions, require_stable).await;
            let topics = by_topic(found)
                .into_iter()
                .map(|(name, partitions)| {
                    OffsetFetchResponseTopics::default()
                        .with_name(TopicName(wire_str(name)))
                        .with_partitions(
                            partitions
                                .into_iter()
                                .map(|p| {
                                    OffsetFetchResponsePartitions::default()
                                        .with_partition_index(p.topic_partition.partition)
                                        .with_committed_offset(p.offset)
                                        .with_committed_leader_epoch(p.leader_epoch.unwrap_or(-1))
                                        .with_error_code(code_of(&p, &denied))
                                        .with_metadata(Some(wire_str(p.metadata)))
                                })
                                .collect(),
                        )
                })
                .collect();
            groups.push(
                OffsetFetchResponseGroup::default()
                    .with_group_id(group.group_id)
                    .with_error_code(error)
                    .with_topics(topics),
            );
        }
        return OffsetFetchResponse::default().with_groups(groups);
    }
    let partitions = request.topics.map(|topics| {
        topics
            .into_iter()
            .flat_map(|t| {
                let name = t.name.0.to_string();
                t.partition_indexes
                    .into_iter()
                    .map(move |p| TopicPartition::new(name.clone(), p))
            })
            .collect()
    });
    let (error, found, denied) =
        fetch(ctx, session, &request.group_id, partitions, require_stable).await;
    // v1 has no group-level error: it is reported on every partition.
    let (group_error, partition_error) = if version < 2 && error != 0 {
        (0, Some(error))
    } else {
        (error, None)
    };
    let topics = by_topic(found)
        .into_iter()
        .map(|(name, partitions)| {
            OffsetFetchResponseTopic::default()
                .with_name(TopicName(wire_str(name)))
                .with_partitions(
                    partitions
                        .into_iter()
                        .map(|p| {
                            OffsetFetchResponsePartition::default()
                                .with_partition_index(p.topic_partition.partition)
                                .with_committed_offset(p.offset)
                                .with_committed_leader_epoch(p.leader_epoch.unwrap_or(-1))
                                .with_error_code(partition_error.unwrap_or(code_of(&p, &denied)))
                                .with_metadata(Some(wire_str(p.metadata)))
                        })
                        .collect(),
                )
        })
        .collect();
    OffsetFetchResponse::default()
        .with_error_code(group_error)
        .with_topics(topics)
}

/// Partitions the client named whose topics it may not describe.
type Denied = std::collections::HashSet<TopicPartition>;

/// One partition's code: TOPIC_AUTHORIZATION_FAILED if denied, else the
/// coordinator's.
fn code_of(p: &OffsetFetchPartition, denied: &Denied) -> i16 {
    if denied.contains(&p.topic_partition) {
        error_code::code(ResponseError::TopicAuthorizationFailed)
    } else {
        error_code::group(p.error)
    }
}

/// One group's offsets: (group error code, partitions, the partitions
/// named whose topics the client may not describe). The group needs
/// DESCRIBE; a named partition of a topic the client may not describe is
/// answered TOPIC_AUTHORIZATION_FAILED, and when all are asked for, such
/// topics are left out.
async fn fetch(
    ctx: &Context,
    session: &Session,
    group_id: &GroupId,
    partitions: Option<Vec<TopicPartition>>,
    require_stable: bool,
) -> (i16, Vec<OffsetFetchPartition>, Denied) {
    if !group_allowed(ctx, session, Operation::Describe, &group_id.0) {
        return (
            error_code::code(ResponseError::GroupAuthorizationFailed),
            Vec::new(),
            Denied::new(),
        );
    }
    let mut denied = Denied::new();
    let partitions = partitions.map(|list| {
        list.into_iter()
            .filter(|tp| {
                let allowed = topic_allowed(
                    ctx,
                    session,
                    Operation::Describe,
                    &super::read_source::authorized_name(ctx, &tp.topic),
                );
                if !allowed {
                    denied.insert(tp.clone());
                }
                allowed
            })
            .collect::<Vec<_>>()
    });
    let named = partitions.is_some();
    let call = GroupCall::OffsetFetch(herald_group::OffsetFetchRequest {
        group_id: group_id.0.to_string(),
        partitions,
        require_stable,
    });
    let (error, mut found) = match group_call(ctx, call, Wait::Short).await {
        GroupReply::OffsetFetch(r) => (error_code::group(r.error), r.partitions),
        other => (unexpected_reply(ApiKey::OffsetFetch, &other), Vec::new()),
    };
    if named {
        found.extend(denied.iter().map(|tp| OffsetFetchPartition {
            topic_partition: tp.clone(),
            offset: -1,
            leader_epoch: None,
            metadata: String::new(),
            error: herald_group::ErrorCode::None,
        }));
        found.sort_by(|a, b| a.topic_partition.cmp(&b.topic_partition));
    } else {
        found.retain(|p| {
            topic_allowed(
                ctx,
                session,
                Operation::Describe,
                &super::read_source::authorized_name(ctx, &p.topic_partition.topic),
            )
        });
    }
    (error, found, denied)
}

/// Consecutive partitions of the same topic, grouped, order kept.
fn by_topic(partitions: Vec<OffsetFetchPartition>) -> Vec<(String, Vec<OffsetFetchPartition>)> {
    let mut topics: Vec<(String, Vec<OffsetFetchPartition>)> = Vec::new();
    for p in partitions {
        match topics.last_mut() {
            Some((name, list)) if *name == p.topic_partition.topic => list.push(p),
            _ => topics.push((p.topic_partition.topic.clone(), vec![p])),
        }
    }
    topics
}

/// How the guard walks this API's request body before `kafka-protocol`
/// decodes it, transcribed from Kafka's message definition (the registry's
/// tests check it consumes exactly the bytes of every served version).
pub(crate) mod layout {
    use crate::codec::guard::Ty::*;
    use crate::codec::guard::{all, between, since, Field, Schema};

    const OFFSET_FETCH_TOPIC: &[Field] = &[all(Str), all(I32Array)];
    const OFFSET_FETCH_GROUP: &[Field] = &[
        all(Str),
        since(9, Str),
        since(9, I32),
        all(Array(OFFSET_FETCH_TOPIC)),
    ];
    pub(crate) const SCHEMA: Schema = Schema {
        flexible_from: 6,
        fields: &[
            between(0, 7, Str),
            between(0, 7, Array(OFFSET_FETCH_TOPIC)),
            since(8, Array(OFFSET_FETCH_GROUP)),
            since(7, Bool),
        ],
    };
}
