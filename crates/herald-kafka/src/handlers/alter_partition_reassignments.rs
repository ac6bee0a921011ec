//! AlterPartitionReassignments: moves a partition's replicas to other
//! nodes. In a cluster the move goes through the metadata log and the
//! partition's leader carries it out (new replicas catch up as Raft
//! learners, then the voters change); the answer comes once the move is
//! recorded, as Kafka's does, and ListPartitionReassignments shows it until
//! it completes. A cluster's offsets partitions move the same way, named
//! as the partitions of `__consumer_offsets`. A partition without replicas
//! in the request has its reassignment in progress cancelled (Kafka's
//! `kafka-reassign-partitions.sh --cancel`): it goes back to the replicas
//! it had. A single node has one broker to place replicas on.

use kafka_protocol::messages::alter_partition_reassignments_response::{
    ReassignablePartitionResponse, ReassignableTopicResponse,
};
use kafka_protocol::messages::{
    AlterPartitionReassignmentsRequest, AlterPartitionReassignmentsResponse,
};
use kafka_protocol::ResponseError;

use super::{cluster_allowed, wire_str, Context};
use crate::error_code;
use crate::session::Session;
use herald_auth::Operation;

/// Answers an AlterPartitionReassignments request.
pub async fn handle(
    ctx: &Context,
    session: &Session,
    request: AlterPartitionReassignmentsRequest,
    version: i16,
) -> AlterPartitionReassignmentsResponse {
    let response = AlterPartitionReassignmentsResponse::default()
        .with_allow_replication_factor_change(request.allow_replication_factor_change);
    if !cluster_allowed(ctx, session, Operation::Alter) {
        return response
            .with_error_code(error_code::code(ResponseError::ClusterAuthorizationFailed))
            .with_error_message(Some(wire_str(
                "not authorized to reassign partitions (ALTER on the cluster)",
            )));
    }
    // Before v1 a reassignment may change a partition's replica count.
    let keep_factor = version >= 1 && !request.allow_replication_factor_change;
    let mut topics = Vec::with_capacity(request.topics.len());
    for topic in request.topics {
        let name = topic.name.0.to_string();
        let mut partitions = Vec::with_capacity(topic.partitions.len());
        for p in topic.partitions {
            let target = p
                .replicas
                .map(|replicas| replicas.iter().map(|b| b.0).collect::<Vec<i32>>());
            let (code, message) =
                match reassign(ctx, &name, p.partition_index, target, keep_factor).await {
                    Ok(()) => (error_code::NONE, None),
                    Err((code, message)) => (code, Some(wire_str(message))),
                };
            partitions.push(
                ReassignablePartitionResponse::default()
                    .with_partition_index(p.partition_index)
                    .with_error_code(code)
                    .with_error_message(message),
            );
        }
        topics.push(
            ReassignableTopicResponse::default()
                .with_name(topic.name)
                .with_partitions(partitions),
        );
    }
    response.with_responses(topics)
}

/// Starts one partition's reassignment to `target` (`None`: cancels the
/// one in progress).
async fn reassign(
    ctx: &Context,
    name: &str,
    partition: i32,
    target: Option<Vec<i32>>,
    keep_factor: bool,
) -> Result<(), (i16, String)> {
    #[cfg(feature = "cluster")]
    if name == herald_broker::OFFSETS_TOPIC {
        if let Some(cluster) = ctx.broker.cluster() {
            return reassign_offsets(ctx, cluster, partition, target, keep_factor).await;
        }
    }
    let topic = ctx.broker.topic(name).ok_or_else(|| {
        (
            error_code::code(ResponseError::UnknownTopicOrPartition),
            format!("unknown topic {name}"),
        )
    })?;
    let current = topic.partition(partition).ok_or_else(|| {
        (
            error_code::code(ResponseError::UnknownTopicOrPartition),
            format!("topic {name} has no partition {partition}"),
        )
    })?;
    let replicas = current.replica_view(ctx.broker.node_id()).replicas;
    let Some(target) = target else {
        return cancel(ctx, name, partition).await;
    };
    let nodes = target_nodes(&target, replicas.len(), keep_factor)?;
    #[cfg(feature = "cluster")]
    if let Some(cluster) = ctx.broker.cluster() {
        let partition = u32::try_from(partition).unwrap_or(u32::MAX);
        return cluster
            .reassign(&ctx.broker, name, partition, nodes)
            .await
            .map_err(|e| (error_code::broker(&e), e.to_string()));
    }
    let me = ctx.broker.node_id();
    if nodes != [me as u64] {
        return Err((
            error_code::code(ResponseError::InvalidReplicaAssignment),
            format!("a single node places every replica on broker {me}"),
        ));
    }
    Ok(())
}

/// Moves one of a cluster's offsets partitions (named, as in Kafka, as
/// partitions of `__consumer_offsets`).
#[cfg(feature = "cluster")]
async fn reassign_offsets(
    ctx: &Context,
    cluster: &herald_broker::cluster::Cluster,
    partition: i32,
    target: Option<Vec<i32>>,
    keep_factor: bool,
) -> Result<(), (i16, String)> {
    let name = herald_broker::OFFSETS_TOPIC;
    let unknown = || {
        (
            error_code::code(ResponseError::UnknownTopicOrPartition),
            format!("the cluster has no offsets partition {partition}"),
        )
    };
    let index = u32::try_from(partition).map_err(|_| unknown())?;
    let replicas = cluster.offsets_replicas(index).ok_or_else(unknown)?;
    let Some(target) = target else {
        return cancel(ctx, name, partition).await;
    };
    let nodes = target_nodes(&target, replicas.len(), keep_factor)?;
    cluster
        .reassign(&ctx.broker, name, index, nodes)
        .await
        .map_err(|e| (error_code::broker(&e), e.to_string()))
}

/// The target's node ids, checked: none negative, and as many as the
/// partition's `replicas` when the request keeps the replication factor.
fn target_nodes(
    target: &[i32],
    replicas: usize,
    keep_factor: bool,
) -> Result<Vec<u64>, (i16, String)> {
    if keep_factor && target.len() != replicas {
        return Err((
            error_code::code(ResponseError::InvalidReplicationFactor),
            format!(
                "the partition has {replicas} replicas and the request does not allow changing that"
            ),
        ));
    }
    target
        .iter()
        .map(|&n| u64::try_from(n))
        .collect::<Result<_, _>>()
        .map_err(|_| {
            (
                error_code::code(ResponseError::InvalidReplicaAssignment),
                "node ids are not negative".to_owned(),
            )
        })
}

/// Cancels the reassignment of `name`/`partition` in progress: the
/// partition goes back to the replicas it had. NO_REASSIGNMENT_IN_PROGRESS
/// when none runs (as Kafka), which is all a single node can answer.
async fn cancel(ctx: &Context, name: &str, partition: i32) -> Result<(), (i16, String)> {
    #[cfg(feature = "cluster")]
    if let Some(cluster) = ctx.broker.cluster() {
        let index = u32::try_from(partition).unwrap_or(u32::MAX);
        return cluster
            .cancel_reassignment(name, index)
            .await
            .map_err(|e| (error_code::broker(&e), e.to_string()));
    }
    let _ = ctx;
    Err((
        error_code::code(ResponseError::NoReassignmentInProgress),
        format!("no reassignment of {name}/{partition} is in progress"),
    ))
}

/// How the guard walks this API's request body before `kafka-protocol`
/// decodes it, transcribed from Kafka's message definition (the registry's
/// tests check it consumes exactly the bytes of every served version).
pub(crate) mod layout {
    use crate::codec::guard::Ty::*;
    use crate::codec::guard::{all, since, Field, Schema};

    const PARTITION: &[Field] = &[all(I32), all(I32Array)];
    const TOPIC: &[Field] = &[all(Str), all(Array(PARTITION))];
    pub(crate) const SCHEMA: Schema = Schema {
        flexible_from: 0,
        fields: &[all(I32), since(1, Bool), all(Array(TOPIC))],
    };
}
