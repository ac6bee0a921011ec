//! CreatePartitions: grow a topic's partition count.

use kafka_protocol::messages::create_partitions_response::CreatePartitionsTopicResult;
use kafka_protocol::messages::{CreatePartitionsRequest, CreatePartitionsResponse};
use kafka_protocol::ResponseError;

use super::{topic_allowed, wire_str, Context};
use crate::error_code;
use crate::quota::Mutations;
use crate::session::Session;
use herald_auth::Operation;

/// Answers a CreatePartitions request.
pub fn handle(
    ctx: &Context,
    session: &Session,
    request: CreatePartitionsRequest,
    version: i16,
    client_id: String,
) -> CreatePartitionsResponse {
    let node = ctx.broker.node_id();
    let mutations = Mutations::new(ctx, session, client_id, version >= 3);
    let results = request
        .topics
        .into_iter()
        .map(|t| {
            let result = CreatePartitionsTopicResult::default().with_name(t.name.clone());
            if !topic_allowed(ctx, session, Operation::Alter, &t.name.0) {
                return result
                    .with_error_code(error_code::code(ResponseError::TopicAuthorizationFailed))
                    .with_error_message(Some(wire_str("not authorized to alter this topic")));
            }
            let foreign = t
                .assignments
                .iter()
                .flatten()
                .any(|a| a.broker_ids.iter().any(|b| b.0 != node));
            if foreign {
                return result
                    .with_error_code(error_code::code(ResponseError::InvalidReplicaAssignment))
                    .with_error_message(Some(wire_str(format!(
                        "assignments may only name broker {node}"
                    ))));
            }
            let Ok(count) = u32::try_from(t.count) else {
                return result
                    .with_error_code(error_code::code(ResponseError::InvalidPartitions))
                    .with_error_message(Some(wire_str(format!(
                        "invalid partition count {}",
                        t.count
                    ))));
            };
            if !request.validate_only {
                let adding = ctx
                    .broker
                    .topic(&t.name.0)
                    .map_or(0, |topic| count.saturating_sub(topic.partition_count()));
                if let Err(message) = mutations.admit(adding.into()) {
                    return result
                        .with_error_code(error_code::code(ResponseError::ThrottlingQuotaExceeded))
                        .with_error_message(Some(wire_str(message)));
                }
            }
            match ctx
                .broker
                .create_partitions(&t.name.0, count, request.validate_only)
            {
                Ok(()) => result,
                Err(e) => result
                    .with_error_code(error_code::broker(&e))
                    .with_error_message(Some(wire_str(e.to_string()))),
            }
        })
        .collect();
    CreatePartitionsResponse::default()
        .with_results(results)
        .with_throttle_time_ms(mutations.throttle_time_ms())
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
