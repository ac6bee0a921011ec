//! CreateAcls: adds ACL bindings. Needs ALTER on the cluster; without an
//! authorizer (authorization off) Kafka answers SECURITY_DISABLED, and so
//! does herald. Each binding is checked as Kafka checks it; the valid
//! ones are stored together, durably, before the answer.

use herald_auth::{
    AclBinding, AclError, Operation, PatternType, Permission, ResourceType, SecurityCommand,
};
use kafka_protocol::messages::create_acls_request::AclCreation;
use kafka_protocol::messages::create_acls_response::AclCreationResult;
use kafka_protocol::messages::{CreateAclsRequest, CreateAclsResponse};
use kafka_protocol::ResponseError;

use super::{acl_request_refusal, wire_str, Context};
use crate::error_code;
use crate::session::Session;

/// Answers a CreateAcls request.
pub async fn handle(
    ctx: &Context,
    session: &Session,
    request: CreateAclsRequest,
) -> CreateAclsResponse {
    let result = |error: ResponseError, message: String| {
        AclCreationResult::default()
            .with_error_code(error_code::code(error))
            .with_error_message(Some(wire_str(message)))
    };
    let refuse_all = |error: ResponseError, message: &str| {
        CreateAclsResponse::default().with_results(
            request
                .creations
                .iter()
                .map(|_| result(error, message.to_owned()))
                .collect(),
        )
    };
    if let Some((error, message)) = acl_request_refusal(ctx, session, Operation::Alter) {
        return refuse_all(error, message);
    }
    let checked: Vec<Result<AclBinding, AclError>> = request
        .creations
        .iter()
        .map(|c| binding_from_wire(c).and_then(|b| b.validate().map(|()| b)))
        .collect();
    let valid: Vec<AclBinding> = checked
        .iter()
        .filter_map(|b| b.as_ref().ok().cloned())
        .collect();
    let stored = if valid.is_empty() {
        Ok(())
    } else {
        ctx.broker
            .change_security(vec![SecurityCommand::CreateAcls(valid)])
            .await
            .map(|_| ())
    };
    let results = checked
        .into_iter()
        .map(|binding| match (binding, &stored) {
            (Err(e), _) => result(ResponseError::InvalidRequest, e.to_string()),
            (Ok(_), Ok(())) => AclCreationResult::default(),
            (Ok(_), Err(e)) => AclCreationResult::default()
                .with_error_code(error_code::broker(e))
                .with_error_message(Some(wire_str(e.to_string()))),
        })
        .collect();
    if let Err(e) = &stored {
        tracing::warn!(error = %e, "storing ACLs failed");
    }
    CreateAclsResponse::default().with_results(results)
}

/// A binding from the wire, its codes checked.
fn binding_from_wire(c: &AclCreation) -> Result<AclBinding, AclError> {
    let unknown = |what, code| AclError::UnknownCode { what, code };
    Ok(AclBinding {
        resource_type: ResourceType::from_code(c.resource_type)
            .ok_or(unknown("resource type", c.resource_type))?,
        name: c.resource_name.to_string(),
        pattern_type: PatternType::from_code(c.resource_pattern_type)
            .ok_or(unknown("pattern type", c.resource_pattern_type))?,
        principal: c.principal.to_string(),
        host: c.host.to_string(),
        operation: Operation::from_code(c.operation).ok_or(unknown("operation", c.operation))?,
        permission: Permission::from_code(c.permission_type)
            .ok_or(unknown("permission type", c.permission_type))?,
    })
}

/// How the guard walks this API's request body before `kafka-protocol`
/// decodes it, transcribed from Kafka's message definition.
pub(crate) mod layout {
    use crate::codec::guard::Ty::*;
    use crate::codec::guard::{all, Schema};

    /// A creation has the fields of a DescribeAcls filter.
    pub(crate) const SCHEMA: Schema = Schema {
        flexible_from: 2,
        fields: &[all(Array(super::super::describe_acls::layout::FILTER))],
    };
}
