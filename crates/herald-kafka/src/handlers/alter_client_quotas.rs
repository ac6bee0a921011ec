//! AlterClientQuotas: sets and removes quota values by entity (user,
//! client id, both, IP, or herald's tenant), as `kafka-configs.sh --alter
//! --add-config producer_byte_rate=...` sends them. Each entry is checked
//! on its own and answered INVALID_REQUEST with Kafka's message when
//! refused; the valid ones are stored together. Needs ALTER_CONFIGS on the
//! cluster.

use herald_auth::Operation;
use herald_flow::{QuotaEntity, QuotaOp};
use kafka_protocol::messages::alter_client_quotas_response::{EntityData, EntryData};
use kafka_protocol::messages::{AlterClientQuotasRequest, AlterClientQuotasResponse};
use kafka_protocol::ResponseError;

use super::{cluster_allowed, wire_str, Context};
use crate::error_code;
use crate::session::Session;

/// Answers an AlterClientQuotas request.
pub async fn handle(
    ctx: &Context,
    session: &Session,
    request: AlterClientQuotasRequest,
) -> AlterClientQuotasResponse {
    let echo = |entry: &kafka_protocol::messages::alter_client_quotas_request::EntryData| {
        entry
            .entity
            .iter()
            .map(|e| {
                EntityData::default()
                    .with_entity_type(e.entity_type.clone())
                    .with_entity_name(e.entity_name.clone())
            })
            .collect::<Vec<_>>()
    };
    let answer =
        |entries: Vec<EntryData>| AlterClientQuotasResponse::default().with_entries(entries);
    let failed = |entity: Vec<EntityData>, error: ResponseError, message: String| {
        EntryData::default()
            .with_entity(entity)
            .with_error_code(error_code::code(error))
            .with_error_message(Some(wire_str(message)))
    };
    if !cluster_allowed(ctx, session, Operation::AlterConfigs) {
        return answer(
            request
                .entries
                .iter()
                .map(|e| {
                    failed(
                        echo(e),
                        ResponseError::ClusterAuthorizationFailed,
                        "not authorized to alter quotas".into(),
                    )
                })
                .collect(),
        );
    }
    // Entries whose entity parses go to the broker; the others are answered
    // here. `slots` keeps each entry's place.
    let mut changes = Vec::new();
    let mut slots = Vec::with_capacity(request.entries.len());
    for entry in &request.entries {
        let entity = QuotaEntity::parse(
            entry
                .entity
                .iter()
                .map(|e| (&*e.entity_type, e.entity_name.as_deref())),
        );
        match entity {
            Ok(entity) => {
                let ops = entry
                    .ops
                    .iter()
                    .map(|op| QuotaOp {
                        key: op.key.to_string(),
                        value: op.value,
                        remove: op.remove,
                    })
                    .collect();
                slots.push(Ok(changes.len()));
                changes.push((entity, ops));
            }
            Err(e) => slots.push(Err(e.to_string())),
        }
    }
    let outcomes = match ctx
        .broker
        .change_quotas(changes, request.validate_only)
        .await
    {
        Ok(outcomes) => outcomes,
        Err(e) => {
            return answer(
                request
                    .entries
                    .iter()
                    .map(|entry| {
                        failed(
                            echo(entry),
                            ResponseError::UnknownServerError,
                            e.to_string(),
                        )
                    })
                    .collect(),
            )
        }
    };
    let entries = request
        .entries
        .iter()
        .zip(slots)
        .map(|(entry, slot)| {
            let outcome = match slot {
                Ok(index) => outcomes[index].clone().map_err(|e| e.to_string()),
                Err(message) => Err(message),
            };
            match outcome {
                Ok(()) => EntryData::default().with_entity(echo(entry)),
                Err(message) => failed(echo(entry), ResponseError::InvalidRequest, message),
            }
        })
        .collect();
    answer(entries)
}

/// How the guard walks this API's request body before `kafka-protocol`
/// decodes it, transcribed from Kafka's message definition.
pub(crate) mod layout {
    use crate::codec::guard::Ty::*;
    use crate::codec::guard::{all, Field, Schema};

    const ENTITY: &[Field] = &[all(Str), all(Str)];
    const OP: &[Field] = &[all(Str), all(F64), all(Bool)];
    const ENTRY: &[Field] = &[all(Array(ENTITY)), all(Array(OP))];
    pub(crate) const SCHEMA: Schema = Schema {
        flexible_from: 1,
        fields: &[all(Array(ENTRY)), all(Bool)],
    };
}
