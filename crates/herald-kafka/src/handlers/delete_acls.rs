//! DeleteAcls: removes the bindings each filter matches, all stored
//! together, and lists them per filter. Needs ALTER on the cluster;
//! SECURITY_DISABLED without an authorizer.

use herald_auth::{Applied, Operation, SecurityCommand};
use kafka_protocol::messages::delete_acls_response::{
    DeleteAclsFilterResult, DeleteAclsMatchingAcl,
};
use kafka_protocol::messages::{DeleteAclsRequest, DeleteAclsResponse};
use kafka_protocol::ResponseError;

use super::describe_acls::filter_from_wire;
use super::{acl_request_refusal, wire_str, Context};
use crate::error_code;
use crate::session::Session;

/// Answers a DeleteAcls request.
pub async fn handle(
    ctx: &Context,
    session: &Session,
    request: DeleteAclsRequest,
) -> DeleteAclsResponse {
    let refused = |error: ResponseError, message: String| {
        DeleteAclsFilterResult::default()
            .with_error_code(error_code::code(error))
            .with_error_message(Some(wire_str(message)))
    };
    let refuse_all = |error: ResponseError, message: &str| {
        DeleteAclsResponse::default().with_filter_results(
            request
                .filters
                .iter()
                .map(|_| refused(error, message.to_owned()))
                .collect(),
        )
    };
    if let Some((error, message)) = acl_request_refusal(ctx, session, Operation::Alter) {
        return refuse_all(error, message);
    }
    let parsed: Vec<_> = request
        .filters
        .iter()
        .map(|f| {
            filter_from_wire(
                f.resource_type_filter,
                f.resource_name_filter.as_ref(),
                f.pattern_type_filter,
                f.principal_filter.as_ref(),
                f.host_filter.as_ref(),
                f.operation,
                f.permission_type,
            )
        })
        .collect();
    let valid: Vec<_> = parsed
        .iter()
        .filter_map(|f| f.as_ref().ok().cloned())
        .collect();
    let deleted = if valid.is_empty() {
        Ok(Vec::new())
    } else {
        match ctx
            .broker
            .change_security(vec![SecurityCommand::DeleteAcls(valid)])
            .await
            .map(|mut applied| applied.pop())
        {
            Ok(Some(Applied::DeletedAcls(deleted))) => Ok(deleted),
            Ok(_) => Ok(Vec::new()),
            Err(e) => Err(e),
        }
    };
    let mut deleted_per_valid = match &deleted {
        Ok(lists) => lists.clone().into_iter(),
        Err(_) => Vec::new().into_iter(),
    };
    let results = parsed
        .into_iter()
        .map(|filter| match (filter, &deleted) {
            (Err(e), _) => refused(ResponseError::InvalidRequest, e.to_string()),
            (Ok(_), Err(e)) => DeleteAclsFilterResult::default()
                .with_error_code(error_code::broker(e))
                .with_error_message(Some(wire_str(e.to_string()))),
            (Ok(_), Ok(_)) => DeleteAclsFilterResult::default().with_matching_acls(
                deleted_per_valid
                    .next()
                    .unwrap_or_default()
                    .into_iter()
                    .map(|b| {
                        DeleteAclsMatchingAcl::default()
                            .with_resource_type(b.resource_type.code())
                            .with_resource_name(wire_str(b.name))
                            .with_pattern_type(b.pattern_type.code())
                            .with_principal(wire_str(b.principal))
                            .with_host(wire_str(b.host))
                            .with_operation(b.operation.code())
                            .with_permission_type(b.permission.code())
                    })
                    .collect(),
            ),
        })
        .collect();
    DeleteAclsResponse::default().with_filter_results(results)
}

/// How the guard walks this API's request body before `kafka-protocol`
/// decodes it, transcribed from Kafka's message definition.
pub(crate) mod layout {
    use crate::codec::guard::Ty::*;
    use crate::codec::guard::{all, Schema};

    pub(crate) const SCHEMA: Schema = Schema {
        flexible_from: 2,
        fields: &[all(Array(super::super::describe_acls::layout::FILTER))],
    };
}
