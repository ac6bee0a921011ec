//! DescribeAcls: the bindings a filter matches, grouped by resource.
//! Needs DESCRIBE on the cluster; SECURITY_DISABLED without an authorizer.

use std::collections::BTreeMap;

use herald_auth::{AclError, AclFilter, Operation, PatternType, Permission, ResourceType};
use kafka_protocol::messages::describe_acls_response::{AclDescription, DescribeAclsResource};
use kafka_protocol::messages::{DescribeAclsRequest, DescribeAclsResponse};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::ResponseError;

use super::{acl_request_refusal, wire_str, Context};
use crate::error_code;
use crate::session::Session;

/// Answers a DescribeAcls request.
pub fn handle(
    ctx: &Context,
    session: &Session,
    request: DescribeAclsRequest,
) -> DescribeAclsResponse {
    let refuse = |error: ResponseError, message: String| {
        DescribeAclsResponse::default()
            .with_error_code(error_code::code(error))
            .with_error_message(Some(wire_str(message)))
    };
    if let Some((error, message)) = acl_request_refusal(ctx, session, Operation::Describe) {
        return refuse(error, message.to_owned());
    }
    let filter = match filter_from_wire(
        request.resource_type_filter,
        request.resource_name_filter.as_ref(),
        request.pattern_type_filter,
        request.principal_filter.as_ref(),
        request.host_filter.as_ref(),
        request.operation,
        request.permission_type,
    ) {
        Ok(filter) => filter,
        Err(e) => return refuse(ResponseError::InvalidRequest, e.to_string()),
    };
    let state = ctx.broker.security().state();
    let mut by_resource: BTreeMap<(i8, String, i8), Vec<AclDescription>> = BTreeMap::new();
    for binding in state.acls.iter().filter(|b| filter.matches(b)) {
        by_resource
            .entry((
                binding.resource_type.code(),
                binding.name.clone(),
                binding.pattern_type.code(),
            ))
            .or_default()
            .push(
                AclDescription::default()
                    .with_principal(wire_str(binding.principal.clone()))
                    .with_host(wire_str(binding.host.clone()))
                    .with_operation(binding.operation.code())
                    .with_permission_type(binding.permission.code()),
            );
    }
    DescribeAclsResponse::default().with_resources(
        by_resource
            .into_iter()
            .map(|((resource_type, name, pattern_type), acls)| {
                DescribeAclsResource::default()
                    .with_resource_type(resource_type)
                    .with_resource_name(wire_str(name))
                    .with_pattern_type(pattern_type)
                    .with_acls(acls)
            })
            .collect(),
    )
}

/// A filter from the wire fields DescribeAcls and DeleteAcls share, its
/// codes checked.
pub(crate) fn filter_from_wire(
    resource_type: i8,
    name: Option<&StrBytes>,
    pattern_type: i8,
    principal: Option<&StrBytes>,
    host: Option<&StrBytes>,
    operation: i8,
    permission: i8,
) -> Result<AclFilter, AclError> {
    let unknown = |what, code| AclError::UnknownCode { what, code };
    Ok(AclFilter {
        resource_type: ResourceType::from_code(resource_type)
            .ok_or(unknown("resource type", resource_type))?,
        name: name.map(|n| n.to_string()),
        pattern_type: PatternType::from_code(pattern_type)
            .ok_or(unknown("pattern type", pattern_type))?,
        principal: principal.map(|p| p.to_string()),
        host: host.map(|h| h.to_string()),
        operation: Operation::from_code(operation).ok_or(unknown("operation", operation))?,
        permission: Permission::from_code(permission)
            .ok_or(unknown("permission type", permission))?,
    })
}

/// How the guard walks this API's request body before `kafka-protocol`
/// decodes it, transcribed from Kafka's message definition.
pub(crate) mod layout {
    use crate::codec::guard::Ty::*;
    use crate::codec::guard::{all, since, Field, Schema};

    /// The filter fields, shared with DeleteAcls.
    pub(crate) const FILTER: &[Field] = &[
        all(I8),
        all(Str),
        since(1, I8),
        all(Str),
        all(Str),
        all(I8),
        all(I8),
    ];
    pub(crate) const SCHEMA: Schema = Schema {
        flexible_from: 2,
        fields: FILTER,
    };
}
