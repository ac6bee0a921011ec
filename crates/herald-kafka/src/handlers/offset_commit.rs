//! OffsetCommit: commits of group members (generation checked) and of
//! simple consumers (generation -1, no member id). Partitions that do not
//! exist are refused here, as Kafka does; the rest go to the coordinator,
//! which answers once the commit is on stable storage.

use herald_broker::{GroupCall, GroupReply};
use herald_group::OffsetCommitPartition;
use kafka_protocol::messages::offset_commit_response::{
    OffsetCommitResponsePartition, OffsetCommitResponseTopic,
};
use kafka_protocol::messages::{ApiKey, OffsetCommitRequest, OffsetCommitResponse};
use kafka_protocol::ResponseError;

use super::{group_allowed, group_call, topic_allowed, unexpected_reply, Context, Wait};
use crate::error_code;
use crate::session::Session;
use herald_auth::Operation;

/// Answers an OffsetCommit request.
pub async fn handle(
    ctx: &Context,
    session: &Session,
    request: OffsetCommitRequest,
    version: i16,
) -> OffsetCommitResponse {
    let unknown = error_code::code(ResponseError::UnknownTopicOrPartition);
    // The group needs READ (every partition is refused without it), and
    // each topic READ.
    let group_denied = (!group_allowed(ctx, session, Operation::Read, &request.group_id.0))
        .then_some(error_code::code(ResponseError::GroupAuthorizationFailed));
    let topic_denied = error_code::code(ResponseError::TopicAuthorizationFailed);
    // Per requested partition: a code decided here, or None if it goes to
    // the coordinator (whose results come back in the order sent).
    let mut decided: Vec<Vec<Option<i16>>> = Vec::with_capacity(request.topics.len());
    let mut partitions = Vec::new();
    for topic in &request.topics {
        let name = topic.name.0.to_string();
        // A snapshot's view topic takes commits too (Connect, Spark and
        // Flink commit what they read), authorized as its topic.
        let known = super::read_source::ReadTopic::by_name(ctx, &name);
        let authorized = known
            .as_ref()
            .map_or(name.as_str(), |t| t.authorized_name())
            .to_owned();
        let denied = group_denied.or_else(|| {
            (!topic_allowed(ctx, session, Operation::Read, &authorized)).then_some(topic_denied)
        });
        let mut codes = Vec::with_capacity(topic.partitions.len());
        for p in &topic.partitions {
            if let Some(code) = denied {
                codes.push(Some(code));
                continue;
            }
            if known
                .as_ref()
                .and_then(|t| t.partition(p.partition_index))
                .is_none()
            {
                codes.push(Some(unknown));
                continue;
            }
            codes.push(None);
            partitions.push(OffsetCommitPartition {
                topic: name.clone(),
                partition: p.partition_index,
                offset: p.committed_offset,
                leader_epoch: (version >= 6 && p.committed_leader_epoch >= 0)
                    .then_some(p.committed_leader_epoch),
                metadata: p.committed_metadata.as_ref().map(|m| m.to_string()),
            });
        }
        decided.push(codes);
    }
    let mut failed = error_code::group_unavailable();
    let mut results = if partitions.is_empty() {
        Vec::new()
    } else {
        let call = GroupCall::OffsetCommit(herald_group::OffsetCommitRequest {
            group_id: request.group_id.0.to_string(),
            generation_id: request.generation_id_or_member_epoch,
            member_id: request.member_id.to_string(),
            group_instance_id: request.group_instance_id.map(|s| s.to_string()),
            partitions,
        });
        match group_call(ctx, call, Wait::Short).await {
            GroupReply::OffsetCommit(r) => r
                .partitions
                .into_iter()
                .map(|p| error_code::group(p.error))
                .collect(),
            other => {
                failed = unexpected_reply(ApiKey::OffsetCommit, &other);
                Vec::new()
            }
        }
    }
    .into_iter();
    let topics = request
        .topics
        .into_iter()
        .zip(decided)
        .map(|(topic, codes)| {
            let partitions = topic
                .partitions
                .iter()
                .zip(codes)
                .map(|(p, code)| {
                    let code = code.or_else(|| results.next()).unwrap_or(failed);
                    OffsetCommitResponsePartition::default()
                        .with_partition_index(p.partition_index)
                        .with_error_code(code)
                })
                .collect();
            OffsetCommitResponseTopic::default()
                .with_name(topic.name)
                .with_partitions(partitions)
        })
        .collect();
    OffsetCommitResponse::default().with_topics(topics)
}

/// How the guard walks this API's request body before `kafka-protocol`
/// decodes it, transcribed from Kafka's message definition (the registry's
/// tests check it consumes exactly the bytes of every served version).
pub(crate) mod layout {
    use crate::codec::guard::Ty::*;
    use crate::codec::guard::{all, between, since, Field, Schema};

    const OFFSET_COMMIT_PARTITION: &[Field] = &[all(I32), all(I64), since(6, I32), all(Str)];
    const OFFSET_COMMIT_TOPIC: &[Field] = &[all(Str), all(Array(OFFSET_COMMIT_PARTITION))];
    pub(crate) const SCHEMA: Schema = Schema {
        flexible_from: 8,
        fields: &[
            all(Str),
            all(I32),
            all(Str),
            since(7, Str),
            between(2, 4, I64),
            all(Array(OFFSET_COMMIT_TOPIC)),
        ],
    };
}
