//! DescribeClientQuotas: the quotas whose entities match the request's
//! components (a name, the default, or any), as `kafka-configs.sh
//! --describe --entity-type users|clients|ips` asks. Needs DESCRIBE_CONFIGS
//! on the cluster.

use herald_auth::Operation;
use herald_flow::quotas::Match;
use herald_flow::EntityType;
use kafka_protocol::messages::describe_client_quotas_response::{EntityData, EntryData, ValueData};
use kafka_protocol::messages::{DescribeClientQuotasRequest, DescribeClientQuotasResponse};
use kafka_protocol::ResponseError;

use super::{cluster_allowed, wire_str, Context};
use crate::error_code;
use crate::session::Session;

/// Kafka's match types.
const MATCH_EXACT: i8 = 0;
const MATCH_DEFAULT: i8 = 1;
const MATCH_ANY: i8 = 2;

/// Answers a DescribeClientQuotas request.
pub fn handle(
    ctx: &Context,
    session: &Session,
    request: DescribeClientQuotasRequest,
) -> DescribeClientQuotasResponse {
    let refused = |error: ResponseError, message: String| {
        DescribeClientQuotasResponse::default()
            .with_error_code(error_code::code(error))
            .with_error_message(Some(wire_str(message)))
            .with_entries(None)
    };
    if !cluster_allowed(ctx, session, Operation::DescribeConfigs) {
        return refused(
            ResponseError::ClusterAuthorizationFailed,
            "not authorized to describe quotas".into(),
        );
    }
    let mut filter = Vec::with_capacity(request.components.len());
    for component in &request.components {
        let Some(kind) = EntityType::from_name(&component.entity_type) else {
            return refused(
                ResponseError::InvalidRequest,
                format!("unknown entity type {}", &*component.entity_type),
            );
        };
        let matching = match (component.match_type, &component._match) {
            (MATCH_EXACT, Some(name)) => Match::Exact(name.to_string()),
            (MATCH_DEFAULT, _) => Match::Default,
            (MATCH_ANY, _) => Match::Any,
            (MATCH_EXACT, None) => {
                return refused(
                    ResponseError::InvalidRequest,
                    "an exact match names an entity".into(),
                )
            }
            (other, _) => {
                return refused(
                    ResponseError::InvalidRequest,
                    format!("unknown match type {other}"),
                )
            }
        };
        if filter.iter().any(|(k, _)| *k == kind) {
            return refused(
                ResponseError::InvalidRequest,
                format!("entity type {} is named twice", kind.name()),
            );
        }
        filter.push((kind, matching));
    }
    let quotas = ctx.broker.quotas();
    let entries = quotas
        .describe(&filter, request.strict)
        .into_iter()
        .map(|(entity, values)| {
            EntryData::default()
                .with_entity(
                    entity
                        .0
                        .iter()
                        .map(|(kind, name)| {
                            EntityData::default()
                                .with_entity_type(wire_str(kind.name()))
                                .with_entity_name(name.as_deref().map(wire_str))
                        })
                        .collect(),
                )
                .with_values(
                    values
                        .iter()
                        .map(|(key, value)| {
                            ValueData::default()
                                .with_key(wire_str(key))
                                .with_value(*value)
                        })
                        .collect(),
                )
        })
        .collect();
    DescribeClientQuotasResponse::default().with_entries(Some(entries))
}

/// How the guard walks this API's request body before `kafka-protocol`
/// decodes it, transcribed from Kafka's message definition.
pub(crate) mod layout {
    use crate::codec::guard::Ty::*;
    use crate::codec::guard::{all, Field, Schema};

    const COMPONENT: &[Field] = &[all(Str), all(I8), all(Str)];
    pub(crate) const SCHEMA: Schema = Schema {
        flexible_from: 1,
        fields: &[all(Array(COMPONENT)), all(Bool)],
    };
}
