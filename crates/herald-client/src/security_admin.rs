//! Users' SCRAM credentials and ACLs, over Kafka's APIs
//! (Describe/AlterUserScramCredentials, Create/Describe/DeleteAcls): what
//! `herald user` and `herald acl` do, against any broker that serves them.

use bytes::Bytes;
use herald_auth::{
    AclBinding, AclFilter, Operation, PatternType, Permission, ResourceType, ScramMechanism,
};
use kafka_protocol::messages::alter_user_scram_credentials_request::{
    ScramCredentialDeletion, ScramCredentialUpsertion,
};
use kafka_protocol::messages::create_acls_request::AclCreation;
use kafka_protocol::messages::delete_acls_request::DeleteAclsFilter;
use kafka_protocol::messages::describe_user_scram_credentials_request::UserName;
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;

use crate::connection::{versions, IO_TIMEOUT};
use crate::{ClientError, Connection};

fn wire(s: &str) -> StrBytes {
    StrBytes::from_string(s.to_owned())
}

fn check(context: &str, code: i16, message: Option<&StrBytes>) -> Result<(), ClientError> {
    if code == 0 {
        return Ok(());
    }
    Err(ClientError::Broker {
        context: context.to_owned(),
        code,
        reason: message
            .map(|m| m.to_string())
            .filter(|m| !m.is_empty())
            .unwrap_or_else(|| crate::errors::describe(code)),
    })
}

/// Sets `user`'s password for `mechanism`: the salt is made here and only
/// the salted password travels, as Kafka's tools do.
pub async fn set_scram(
    connection: &mut Connection,
    user: &str,
    mechanism: ScramMechanism,
    iterations: u32,
    password: &str,
) -> Result<(), ClientError> {
    let salt =
        herald_auth::scram::random_salt().map_err(|e| ClientError::refused(e.to_string()))?;
    let salted = mechanism.salted_password(password.as_bytes(), &salt, iterations);
    let request = AlterUserScramCredentialsRequest::default().with_upsertions(vec![
        ScramCredentialUpsertion::default()
            .with_name(wire(user))
            .with_mechanism(mechanism.code())
            .with_iterations(i32::try_from(iterations).unwrap_or(i32::MAX))
            .with_salt(Bytes::copy_from_slice(&salt))
            .with_salted_password(Bytes::from(salted)),
    ]);
    alter_scram(connection, request, user).await
}

/// Removes `user`'s credential for `mechanism`.
pub async fn delete_scram(
    connection: &mut Connection,
    user: &str,
    mechanism: ScramMechanism,
) -> Result<(), ClientError> {
    let request = AlterUserScramCredentialsRequest::default().with_deletions(vec![
        ScramCredentialDeletion::default()
            .with_name(wire(user))
            .with_mechanism(mechanism.code()),
    ]);
    alter_scram(connection, request, user).await
}

async fn alter_scram(
    connection: &mut Connection,
    request: AlterUserScramCredentialsRequest,
    user: &str,
) -> Result<(), ClientError> {
    let response: AlterUserScramCredentialsResponse = connection
        .call(request, versions::ALTER_USER_SCRAM_CREDENTIALS, IO_TIMEOUT)
        .await?;
    for result in &response.results {
        check(
            &format!("changing the credentials of {user}"),
            result.error_code,
            result.error_message.as_ref(),
        )?;
    }
    Ok(())
}

/// Every user with credentials (or the named ones), with each mechanism's
/// iterations.
pub async fn describe_users(
    connection: &mut Connection,
    users: &[String],
) -> Result<Vec<(String, Vec<(String, i32)>)>, ClientError> {
    let request =
        DescribeUserScramCredentialsRequest::default().with_users((!users.is_empty()).then(|| {
            users
                .iter()
                .map(|u| UserName::default().with_name(wire(u)))
                .collect()
        }));
    let response: DescribeUserScramCredentialsResponse = connection
        .call(
            request,
            versions::DESCRIBE_USER_SCRAM_CREDENTIALS,
            IO_TIMEOUT,
        )
        .await?;
    check(
        "describing users",
        response.error_code,
        response.error_message.as_ref(),
    )?;
    response
        .results
        .into_iter()
        .map(|r| {
            check(
                &format!("describing user {}", r.user),
                r.error_code,
                r.error_message.as_ref(),
            )?;
            let mechanisms = r
                .credential_infos
                .iter()
                .map(|c| {
                    let name = ScramMechanism::from_code(c.mechanism).map_or_else(
                        || format!("mechanism {}", c.mechanism),
                        |m| m.name().to_owned(),
                    );
                    (name, c.iterations)
                })
                .collect();
            Ok((r.user.to_string(), mechanisms))
        })
        .collect()
}

/// Adds `bindings`.
pub async fn create_acls(
    connection: &mut Connection,
    bindings: &[AclBinding],
) -> Result<(), ClientError> {
    let request = CreateAclsRequest::default().with_creations(
        bindings
            .iter()
            .map(|b| {
                AclCreation::default()
                    .with_resource_type(b.resource_type.code())
                    .with_resource_name(wire(&b.name))
                    .with_resource_pattern_type(b.pattern_type.code())
                    .with_principal(wire(&b.principal))
                    .with_host(wire(&b.host))
                    .with_operation(b.operation.code())
                    .with_permission_type(b.permission.code())
            })
            .collect(),
    );
    let response: CreateAclsResponse = connection
        .call(request, versions::CREATE_ACLS, IO_TIMEOUT)
        .await?;
    for result in &response.results {
        check(
            "creating ACLs",
            result.error_code,
            result.error_message.as_ref(),
        )?;
    }
    Ok(())
}

/// The bindings `filter` matches.
pub async fn describe_acls(
    connection: &mut Connection,
    filter: &AclFilter,
) -> Result<Vec<AclBinding>, ClientError> {
    let request = DescribeAclsRequest::default()
        .with_resource_type_filter(filter.resource_type.code())
        .with_resource_name_filter(filter.name.as_deref().map(wire))
        .with_pattern_type_filter(filter.pattern_type.code())
        .with_principal_filter(filter.principal.as_deref().map(wire))
        .with_host_filter(filter.host.as_deref().map(wire))
        .with_operation(filter.operation.code())
        .with_permission_type(filter.permission.code());
    let response: DescribeAclsResponse = connection
        .call(request, versions::DESCRIBE_ACLS, IO_TIMEOUT)
        .await?;
    check(
        "describing ACLs",
        response.error_code,
        response.error_message.as_ref(),
    )?;
    let mut bindings = Vec::new();
    for resource in response.resources {
        for acl in resource.acls {
            bindings.push(binding(
                resource.resource_type,
                &resource.resource_name,
                resource.pattern_type,
                &acl.principal,
                &acl.host,
                acl.operation,
                acl.permission_type,
            )?);
        }
    }
    Ok(bindings)
}

/// Removes the bindings `filter` matches; answers them.
pub async fn delete_acls(
    connection: &mut Connection,
    filter: &AclFilter,
) -> Result<Vec<AclBinding>, ClientError> {
    let request = DeleteAclsRequest::default().with_filters(vec![DeleteAclsFilter::default()
        .with_resource_type_filter(filter.resource_type.code())
        .with_resource_name_filter(filter.name.as_deref().map(wire))
        .with_pattern_type_filter(filter.pattern_type.code())
        .with_principal_filter(filter.principal.as_deref().map(wire))
        .with_host_filter(filter.host.as_deref().map(wire))
        .with_operation(filter.operation.code())
        .with_permission_type(filter.permission.code())]);
    let response: DeleteAclsResponse = connection
        .call(request, versions::DELETE_ACLS, IO_TIMEOUT)
        .await?;
    let mut deleted = Vec::new();
    for result in response.filter_results {
        check(
            "deleting ACLs",
            result.error_code,
            result.error_message.as_ref(),
        )?;
        for acl in result.matching_acls {
            deleted.push(binding(
                acl.resource_type,
                &acl.resource_name,
                acl.pattern_type,
                &acl.principal,
                &acl.host,
                acl.operation,
                acl.permission_type,
            )?);
        }
    }
    Ok(deleted)
}

/// A binding from the wire's codes.
fn binding(
    resource_type: i8,
    name: &StrBytes,
    pattern_type: i8,
    principal: &StrBytes,
    host: &StrBytes,
    operation: i8,
    permission: i8,
) -> Result<AclBinding, ClientError> {
    let unknown = |what: &str, code: i8| {
        ClientError::refused(format!("the broker answered an unknown {what} code {code}"))
    };
    Ok(AclBinding {
        resource_type: ResourceType::from_code(resource_type)
            .ok_or_else(|| unknown("resource type", resource_type))?,
        name: name.to_string(),
        pattern_type: PatternType::from_code(pattern_type)
            .ok_or_else(|| unknown("pattern type", pattern_type))?,
        principal: principal.to_string(),
        host: host.to_string(),
        operation: Operation::from_code(operation)
            .ok_or_else(|| unknown("operation", operation))?,
        permission: Permission::from_code(permission)
            .ok_or_else(|| unknown("permission", permission))?,
    })
}
