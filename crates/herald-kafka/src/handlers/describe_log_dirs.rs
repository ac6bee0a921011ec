//! DescribeLogDirs: the partitions this node stores, with their sizes, in
//! its one log directory (the data directory), and the room left on its
//! file system. Kafka's `kafka-log-dirs.sh` asks it, and so does
//! `kafka-reassign-partitions.sh --execute` before it moves anything. A
//! partition of a cluster whose replicas are on other nodes is not
//! listed: each node answers for what it holds, as each Kafka broker does.

use kafka_protocol::messages::describe_log_dirs_response::{
    DescribeLogDirsPartition, DescribeLogDirsResult, DescribeLogDirsTopic,
};
use kafka_protocol::messages::{DescribeLogDirsRequest, DescribeLogDirsResponse, TopicName};
use kafka_protocol::ResponseError;

use super::{cluster_allowed, wire_str, Context};
use crate::error_code;
use crate::session::Session;
use herald_auth::Operation;

/// What a size is reported as when the file system cannot be asked
/// (Kafka's "unknown").
const UNKNOWN_BYTES: i64 = -1;

/// Answers a DescribeLogDirs request.
pub fn handle(
    ctx: &Context,
    session: &Session,
    request: DescribeLogDirsRequest,
    version: i16,
) -> DescribeLogDirsResponse {
    if !cluster_allowed(ctx, session, Operation::Describe) {
        // Kafka answers an unauthorized client with no directory (and,
        // from v3, the error).
        return DescribeLogDirsResponse::default()
            .with_error_code(error_code::code(ResponseError::ClusterAuthorizationFailed));
    }
    let wanted = |topic: &str, partition: i32| match &request.topics {
        None => true,
        Some(topics) => topics
            .iter()
            .any(|t| t.topic.0.as_str() == topic && t.partitions.contains(&partition)),
    };
    let mut topics = Vec::new();
    for topic in ctx.broker.topics() {
        let partitions: Vec<DescribeLogDirsPartition> = topic
            .partitions()
            .iter()
            .filter(|p| p.held_here() && wanted(topic.name(), p.index() as i32))
            .map(|p| {
                DescribeLogDirsPartition::default()
                    .with_partition_index(p.index() as i32)
                    .with_partition_size(i64::try_from(p.stats().size_bytes).unwrap_or(i64::MAX))
                    // No future replica is ever kept (herald moves no
                    // partition between directories), so no lag either.
                    .with_offset_lag(0)
                    .with_is_future_key(false)
            })
            .collect();
        if !partitions.is_empty() {
            topics.push(
                DescribeLogDirsTopic::default()
                    .with_name(TopicName(wire_str(topic.name())))
                    .with_partitions(partitions),
            );
        }
    }
    let data_dir = &ctx.broker.config().data_dir;
    let shown = std::fs::canonicalize(data_dir).unwrap_or_else(|_| data_dir.clone());
    let mut result = DescribeLogDirsResult::default()
        .with_log_dir(wire_str(shown.display().to_string()))
        .with_topics(topics)
        .with_total_bytes(UNKNOWN_BYTES)
        .with_usable_bytes(UNKNOWN_BYTES);
    if version >= 4 {
        match herald_broker::disk_space::of(data_dir) {
            Ok(space) => {
                result = result
                    .with_total_bytes(i64::try_from(space.total_bytes).unwrap_or(i64::MAX))
                    .with_usable_bytes(i64::try_from(space.usable_bytes).unwrap_or(i64::MAX));
            }
            Err(e) => {
                tracing::warn!(dir = %data_dir.display(), error = %e, "the data directory's file system could not be measured");
            }
        }
    }
    DescribeLogDirsResponse::default().with_results(vec![result])
}

/// How the guard walks this API's request body before `kafka-protocol`
/// decodes it, transcribed from Kafka's message definition (the registry's
/// tests check it consumes exactly the bytes of every served version).
pub(crate) mod layout {
    use crate::codec::guard::Ty::*;
    use crate::codec::guard::{all, Field, Schema};

    const TOPIC: &[Field] = &[all(Str), all(I32Array)];
    pub(crate) const SCHEMA: Schema = Schema {
        flexible_from: 2,
        fields: &[all(Array(TOPIC))],
    };
}
