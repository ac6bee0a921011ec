//! IncrementalAlterConfigs: SET and DELETE of individual topic configs.
//! APPEND and SUBTRACT apply to list configs only, and the one list config
//! herald has (cleanup.policy) accepts a single value, so they are refused.

use herald_broker::ConfigChange;
use kafka_protocol::messages::incremental_alter_configs_response::AlterConfigsResourceResponse;
use kafka_protocol::messages::{IncrementalAlterConfigsRequest, IncrementalAlterConfigsResponse};
use kafka_protocol::ResponseError;

use super::alter_configs::static_broker_message;
use super::describe_configs::{RESOURCE_BROKER, RESOURCE_TOPIC};
use super::{wire_str, Context};
use crate::error_code;
use crate::session::Session;

const OP_SET: i8 = 0;
const OP_DELETE: i8 = 1;

/// Answers an IncrementalAlterConfigs request.
pub async fn handle(
    ctx: &Context,
    session: &Session,
    request: IncrementalAlterConfigsRequest,
    _version: i16,
) -> IncrementalAlterConfigsResponse {
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
                (None, RESOURCE_TOPIC) => match changes(&r.configs) {
                    Ok(changes) => {
                        match super::alter_topic_config(
                            ctx,
                            &r.resource_name,
                            &changes,
                            false,
                            request.validate_only,
                        )
                        .await
                        {
                            Ok(()) => (error_code::NONE, None),
                            Err(e) => (error_code::broker(&e), Some(e.to_string())),
                        }
                    }
                    Err(message) => (
                        error_code::code(ResponseError::InvalidConfig),
                        Some(message),
                    ),
                },
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
    IncrementalAlterConfigsResponse::default().with_responses(responses)
}

fn changes(
    configs: &[kafka_protocol::messages::incremental_alter_configs_request::AlterableConfig],
) -> Result<Vec<ConfigChange>, String> {
    configs
        .iter()
        .map(|c| {
            let key = c.name.to_string();
            match (c.config_operation, &c.value) {
                (OP_SET, Some(value)) => Ok(ConfigChange::Set {
                    key,
                    value: value.to_string(),
                }),
                (OP_SET, None) => Err(format!("SET of {key} needs a value")),
                (OP_DELETE, _) => Ok(ConfigChange::Delete { key }),
                (op, _) => Err(format!(
                    "operation {op} on {key} is not supported (only SET and DELETE)"
                )),
            }
        })
        .collect()
}

/// How the guard walks this API's request body before `kafka-protocol`
/// decodes it, transcribed from Kafka's message definition (the registry's
/// tests check it consumes exactly the bytes of every served version).
pub(crate) mod layout {
    use crate::codec::guard::Ty::*;
    use crate::codec::guard::{all, Field, Schema};

    const INCREMENTAL_CONFIG: &[Field] = &[all(Str), all(I8), all(Str)];
    const INCREMENTAL_RESOURCE: &[Field] = &[all(I8), all(Str), all(Array(INCREMENTAL_CONFIG))];
    pub(crate) const SCHEMA: Schema = Schema {
        flexible_from: 1,
        fields: &[all(Array(INCREMENTAL_RESOURCE)), all(Bool)],
    };
}
