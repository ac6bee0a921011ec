//! AlterConfigs (non-incremental): replaces a topic's whole set of
//! overrides with the given one. Broker configs are static (flags, env,
//! file) and refused here.

use herald_broker::ConfigChange;
use kafka_protocol::messages::alter_configs_response::AlterConfigsResourceResponse;
use kafka_protocol::messages::{AlterConfigsRequest, AlterConfigsResponse};
use kafka_protocol::ResponseError;

use super::describe_configs::{RESOURCE_BROKER, RESOURCE_TOPIC};
use super::{wire_str, Context};
use crate::error_code;
use crate::session::Session;

/// Answers an AlterConfigs request.
pub async fn handle(
    ctx: &Context,
    session: &Session,
    request: AlterConfigsRequest,
    _version: i16,
) -> AlterConfigsResponse {
    let mut responses = Vec::with_capacity(request.resources.len());
    for r in request.resources {
        responses.push({
            let response = AlterConfigsResourceResponse::default()
                .with_resource_type(r.resource_type)
                .with_resource_name(r.resource_name.clone());
            let refusal =
                super::alter_configs_refusal(ctx, session, r.resource_type, &r.resource_name);
            let (code, message) = match (refusal, r.resource_type) {
                (Some(refused), _) => refused,
                (None, RESOURCE_TOPIC) => {
                    // A null value leaves the key out, i.e. back to its default.
                    let changes: Vec<ConfigChange> = r
                        .configs
                        .iter()
                        .filter_map(|c| {
                            c.value.as_ref().map(|v| ConfigChange::Set {
                                key: c.name.to_string(),
                                value: v.to_string(),
                            })
                        })
                        .collect();
                    match super::alter_topic_config(
                        ctx,
                        &r.resource_name,
                        &changes,
                        true,
                        request.validate_only,
                    )
                    .await
                    {
                        Ok(()) => (error_code::NONE, None),
                        Err(e) => (error_code::broker(&e), Some(e.to_string())),
                    }
                }
                (None, RESOURCE_BROKER) => (
                    error_code::code(ResponseError::InvalidRequest),
                    Some(static_broker_message()),
                ),
                (None, other) => (
                    error_code::code(ResponseError::InvalidRequest),
                    Some(format!("resource type {other} is not supported")),
                ),
            };
            response
                .with_error_code(code)
                .with_error_message(message.map(wire_str))
        });
    }
    AlterConfigsResponse::default().with_responses(responses)
}

/// Why broker configs cannot be altered over the wire.
pub(crate) fn static_broker_message() -> String {
    "broker configs are static in herald: set them with flags, HERALD_* environment or the config file".to_owned()
}

/// How the guard walks this API's request body before `kafka-protocol`
/// decodes it, transcribed from Kafka's message definition (the registry's
/// tests check it consumes exactly the bytes of every served version).
pub(crate) mod layout {
    use crate::codec::guard::Ty::*;
    use crate::codec::guard::{all, Field, Schema};

    const ALTERABLE_CONFIG: &[Field] = &[all(Str), all(Str)];
    const ALTER_CONFIGS_RESOURCE: &[Field] = &[all(I8), all(Str), all(Array(ALTERABLE_CONFIG))];
    pub(crate) const SCHEMA: Schema = Schema {
        flexible_from: 2,
        fields: &[all(Array(ALTER_CONFIGS_RESOURCE)), all(Bool)],
    };
}
