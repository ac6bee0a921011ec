//! CreatePartitions: grow a topic's partition count.

use kafka_protocol::messages::create_partitions_request::CreatePartitionsTopic;
use kafka_protocol::messages::create_partitions_response::CreatePartitionsTopicResult;
use kafka_protocol::messages::{CreatePartitionsRequest, CreatePartitionsResponse};
use kafka_protocol::ResponseError;

use super::{topic_allowed, wire_str, Context};
use crate::error_code;
use crate::quota::Mutations;
use crate::session::Session;
use herald_auth::Operation;

/// Answers a CreatePartitions request.
pub async fn handle(
    ctx: &Context,
    session: &Session,
    request: CreatePartitionsRequest,
    version: i16,
    client_id: String,
) -> CreatePartitionsResponse {
    let mutations = Mutations::new(ctx, session, client_id, version >= 3);
    let mut results = Vec::with_capacity(request.topics.len());
    for t in request.topics {
        results.push(grow(ctx, session, t, request.validate_only, &mutations).await);
    }
    CreatePartitionsResponse::default()
        .with_results(results)
        .with_throttle_time_ms(mutations.throttle_time_ms())
}

/// Grows one topic, or says why not.
async fn grow(
    ctx: &Context,
    session: &Session,
    t: CreatePartitionsTopic,
    validate_only: bool,
    mutations: &Mutations<'_>,
) -> CreatePartitionsTopicResult {
    let node = ctx.broker.node_id();
    let result = CreatePartitionsTopicResult::default().with_name(t.name.clone());
    let refused = |code: ResponseError, message: String| {
        CreatePartitionsTopicResult::default()
            .with_name(t.name.clone())
            .with_error_code(error_code::code(code))
            .with_error_message(Some(wire_str(message)))
    };
    if !topic_allowed(ctx, session, Operation::Alter, &t.name.0) {
        return refused(
            ResponseError::TopicAuthorizationFailed,
            "not authorized to alter this topic".to_owned(),
        );
    }
    let assigned = t.assignments.as_ref().is_some_and(|a| !a.is_empty());
    if assigned && ctx.broker.clustered() {
        return refused(
            ResponseError::InvalidReplicaAssignment,
            "manual replica assignment is not supported in a cluster: herald places the new partitions' replicas".to_owned(),
        );
    }
    let foreign = t
        .assignments
        .iter()
        .flatten()
        .any(|a| a.broker_ids.iter().any(|b| b.0 != node));
    if foreign {
        return refused(
            ResponseError::InvalidReplicaAssignment,
            format!("assignments may only name broker {node}"),
        );
    }
    let Ok(count) = u32::try_from(t.count) else {
        return refused(
            ResponseError::InvalidPartitions,
            format!("invalid partition count {}", t.count),
        );
    };
    if !validate_only {
        let adding = ctx
            .broker
            .topic(&t.name.0)
            .map_or(0, |topic| count.saturating_sub(topic.partition_count()));
        if let Err(message) = mutations.admit(adding.into()) {
            return refused(ResponseError::ThrottlingQuotaExceeded, message);
        }
    }
    match create_partitions(ctx, &t.name.0, count, validate_only).await {
        Ok(()) => result,
        Err(e) => result
            .with_error_code(error_code::broker(&e))
            .with_error_message(Some(wire_str(e.to_string()))),
    }
}

/// Grows topic `name` to `count` partitions: through the cluster's
/// metadata log on a cluster node, else on this broker.
async fn create_partitions(
    ctx: &Context,
    name: &str,
    count: u32,
    validate_only: bool,
) -> Result<(), herald_broker::BrokerError> {
    #[cfg(feature = "cluster")]
    if let Some(cluster) = ctx.broker.cluster() {
        return cluster
            .create_partitions(&ctx.broker, name, count, validate_only)
            .await;
    }
    ctx.broker.create_partitions(name, count, validate_only)
}

/// How the guard walks this API's request body before `kafka-protocol`
/// decodes it, transcribed from Kafka's message definition (the registry's
/// tests check it consumes exactly the bytes of every served version).
pub(crate) mod layout {
    use crate::codec::guard::Ty::*;
    use crate::codec::guard::{all, Field, Schema};

    const PARTITIONS_ASSIGNMENT: &[Field] = &[all(I32Array)];
    const PARTITIONS_TOPIC: &[Field] = &[all(Str), all(I32), all(Array(PARTITIONS_ASSIGNMENT))];
    pub(crate) const SCHEMA: Schema = Schema {
        flexible_from: 2,
        fields: &[all(Array(PARTITIONS_TOPIC)), all(I32), all(Bool)],
    };
}
