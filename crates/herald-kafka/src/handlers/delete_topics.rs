//! DeleteTopics: by name (all versions) or by topic id (v6+).

use kafka_protocol::messages::delete_topics_response::DeletableTopicResult;
use kafka_protocol::messages::{DeleteTopicsRequest, DeleteTopicsResponse, TopicName};
use kafka_protocol::ResponseError;

use super::{topic_allowed, wire_str, Context};
use crate::error_code;
use crate::quota::Mutations;
use crate::session::Session;
use herald_auth::Operation;

/// Answers a DeleteTopics request.
pub async fn handle(
    ctx: &Context,
    session: &Session,
    request: DeleteTopicsRequest,
    version: i16,
    client_id: String,
) -> DeleteTopicsResponse {
    let mutations = Mutations::new(ctx, session, client_id, version >= 5);
    let mut responses: Vec<DeletableTopicResult> = Vec::with_capacity(request.topic_names.len());
    for name in request.topic_names {
        responses.push(delete_by_name(ctx, session, name, &mutations).await);
    }
    if version >= 6 {
        for state in request.topics {
            let result = match state.name {
                Some(name) => delete_by_name(ctx, session, name, &mutations).await,
                None => match ctx.broker.topic_by_id(state.topic_id) {
                    Some(topic) => {
                        let name = TopicName(wire_str(topic.name()));
                        delete_by_name(ctx, session, name, &mutations).await
                    }
                    None => DeletableTopicResult::default()
                        .with_topic_id(state.topic_id)
                        .with_error_code(error_code::code(ResponseError::UnknownTopicId)),
                },
            };
            responses.push(result);
        }
    }
    DeleteTopicsResponse::default()
        .with_responses(responses)
        .with_throttle_time_ms(mutations.throttle_time_ms())
}

async fn delete_by_name(
    ctx: &Context,
    session: &Session,
    name: TopicName,
    mutations: &Mutations<'_>,
) -> DeletableTopicResult {
    let result = DeletableTopicResult::default().with_name(Some(name.clone()));
    if !topic_allowed(ctx, session, Operation::Delete, &name.0) {
        return result
            .with_error_code(error_code::code(ResponseError::TopicAuthorizationFailed))
            .with_error_message(Some(wire_str("not authorized to delete this topic")));
    }
    if let Some(topic) = ctx.broker.topic(&name.0) {
        if let Err(message) = mutations.admit(topic.partition_count().into()) {
            return result
                .with_error_code(error_code::code(ResponseError::ThrottlingQuotaExceeded))
                .with_error_message(Some(wire_str(message)));
        }
    }
    match delete(ctx, &name.0).await {
        Ok(id) => result.with_topic_id(id),
        Err(e) => result
            .with_error_code(error_code::broker(&e))
            .with_error_message(Some(wire_str(e.to_string()))),
    }
}

/// Deletes the topic: through the cluster's metadata in a cluster, here
/// otherwise.
async fn delete(ctx: &Context, name: &str) -> Result<uuid::Uuid, herald_broker::BrokerError> {
    #[cfg(feature = "cluster")]
    if let Some(cluster) = ctx.broker.cluster() {
        return cluster.delete_topic(&ctx.broker, name).await;
    }
    ctx.broker.delete_topic(name)
}

/// How the guard walks this API's request body before `kafka-protocol`
/// decodes it, transcribed from Kafka's message definition (the registry's
/// tests check it consumes exactly the bytes of every served version).
pub(crate) mod layout {
    use crate::codec::guard::Ty::*;
    use crate::codec::guard::{all, between, since, Field, Schema};

    const DELETE_TOPIC_STATE: &[Field] = &[all(Str), all(Uuid)];
    pub(crate) const SCHEMA: Schema = Schema {
        flexible_from: 4,
        fields: &[
            since(6, Array(DELETE_TOPIC_STATE)),
            between(0, 5, StrArray),
            all(I32),
        ],
    };
}
