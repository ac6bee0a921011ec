//! ListPartitionReassignments: the reassignments started and not
//! completed, with the replicas being added and removed (none on a single
//! node, which never reassigns).

use kafka_protocol::messages::list_partition_reassignments_response::{
    OngoingPartitionReassignment, OngoingTopicReassignment,
};
use kafka_protocol::messages::{
    ListPartitionReassignmentsRequest, ListPartitionReassignmentsResponse, TopicName,
};
use kafka_protocol::ResponseError;

use super::{cluster_allowed, wire_str, Context};
use crate::error_code;
use crate::session::Session;
use herald_auth::Operation;

/// Answers a ListPartitionReassignments request.
pub fn handle(
    ctx: &Context,
    session: &Session,
    request: ListPartitionReassignmentsRequest,
    _version: i16,
) -> ListPartitionReassignmentsResponse {
    if !cluster_allowed(ctx, session, Operation::Describe) {
        return ListPartitionReassignmentsResponse::default()
            .with_error_code(error_code::code(ResponseError::ClusterAuthorizationFailed))
            .with_error_message(Some(wire_str(
                "not authorized to list reassignments (DESCRIBE on the cluster)",
            )));
    }
    let wanted = |topic: &str, partition: u32| match &request.topics {
        None => true,
        Some(topics) => topics.iter().any(|t| {
            t.name.0.as_str() == topic && t.partition_indexes.contains(&(partition as i32))
        }),
    };
    let mut topics: Vec<OngoingTopicReassignment> = Vec::new();
    for (topic, partition) in ongoing(ctx) {
        if !wanted(&topic.0, partition.partition_index as u32) {
            continue;
        }
        match topics.iter_mut().find(|t| t.name.0 == topic.0) {
            Some(existing) => existing.partitions.push(partition),
            None => topics.push(
                OngoingTopicReassignment::default()
                    .with_name(topic)
                    .with_partitions(vec![partition]),
            ),
        }
    }
    ListPartitionReassignmentsResponse::default().with_topics(topics)
}

/// Every reassignment in progress, in Kafka's terms: the replicas are the
/// target and those still to be removed.
fn ongoing(ctx: &Context) -> Vec<(TopicName, OngoingPartitionReassignment)> {
    #[cfg(feature = "cluster")]
    if let Some(cluster) = ctx.broker.cluster() {
        use kafka_protocol::messages::BrokerId;
        let ids = |nodes: &mut dyn Iterator<Item = &u64>| -> Vec<BrokerId> {
            nodes.map(|&n| BrokerId(n as i32)).collect()
        };
        return cluster
            .reassignments()
            .into_iter()
            .map(|r| {
                let removing: Vec<u64> = r
                    .from
                    .iter()
                    .copied()
                    .filter(|n| !r.target.contains(n))
                    .collect();
                let adding: Vec<u64> = r
                    .target
                    .iter()
                    .copied()
                    .filter(|n| !r.from.contains(n))
                    .collect();
                let replicas: Vec<u64> = r.target.iter().chain(&removing).copied().collect();
                (
                    TopicName(wire_str(r.topic)),
                    OngoingPartitionReassignment::default()
                        .with_partition_index(r.partition as i32)
                        .with_replicas(ids(&mut replicas.iter()))
                        .with_adding_replicas(ids(&mut adding.iter()))
                        .with_removing_replicas(ids(&mut removing.iter())),
                )
            })
            .collect();
    }
    let _ = ctx;
    Vec::new()
}

/// How the guard walks this API's request body before `kafka-protocol`
/// decodes it, transcribed from Kafka's message definition (the registry's
/// tests check it consumes exactly the bytes of every served version).
pub(crate) mod layout {
    use crate::codec::guard::Ty::*;
    use crate::codec::guard::{all, Field, Schema};

    const TOPIC: &[Field] = &[all(Str), all(I32Array)];
    pub(crate) const SCHEMA: Schema = Schema {
        flexible_from: 0,
        fields: &[all(I32), all(Array(TOPIC))],
    };
}
