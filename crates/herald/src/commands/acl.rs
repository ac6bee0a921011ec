//! `herald acl add|list|remove`: Kafka's ACLs over Create/Describe/
//! DeleteAcls, printed as Kafka's tools print them.

use anyhow::{anyhow, bail};
use herald_auth::{AclBinding, AclFilter, Operation, PatternType, Permission, ResourceType};
use herald_client::security_admin;

use crate::cli_client::{AclArgs, AclCommand};

/// The resource the flags name, if any: (type, name).
fn resource(args: &AclArgs) -> Option<(ResourceType, String)> {
    if let Some(topic) = &args.topic {
        return Some((ResourceType::Topic, topic.clone()));
    }
    if let Some(group) = &args.group {
        return Some((ResourceType::Group, group.clone()));
    }
    if let Some(id) = &args.transactional_id {
        return Some((ResourceType::TransactionalId, id.clone()));
    }
    args.cluster.then(|| {
        (
            ResourceType::Cluster,
            herald_auth::acl::CLUSTER_NAME.to_owned(),
        )
    })
}

fn operations(args: &AclArgs) -> anyhow::Result<Vec<Operation>> {
    args.operations
        .iter()
        .map(|o| {
            Operation::from_name(o)
                .filter(|o| *o != Operation::Any)
                .ok_or_else(|| anyhow!("invalid --operation {o}"))
        })
        .collect()
}

fn pattern_type(args: &AclArgs) -> PatternType {
    if args.prefixed {
        PatternType::Prefixed
    } else {
        PatternType::Literal
    }
}

fn permission(args: &AclArgs) -> Permission {
    if args.deny {
        Permission::Deny
    } else {
        Permission::Allow
    }
}

/// The bindings `add` makes: one per operation.
fn bindings(args: &AclArgs) -> anyhow::Result<Vec<AclBinding>> {
    let Some(principal) = &args.principal else {
        bail!("acl add needs --principal (as User:alice)");
    };
    let Some((resource_type, name)) = resource(args) else {
        bail!("acl add needs --topic, --group, --cluster or --transactional-id");
    };
    let operations = operations(args)?;
    if operations.is_empty() {
        bail!("acl add needs at least one --operation");
    }
    Ok(operations
        .into_iter()
        .map(|operation| AclBinding {
            resource_type,
            name: name.clone(),
            pattern_type: pattern_type(args),
            principal: principal.clone(),
            host: args.host.clone().unwrap_or_else(|| "*".to_owned()),
            operation,
            permission: permission(args),
        })
        .collect())
}

/// The filters `list` and `remove` use: one per operation (or one for any).
fn filters(args: &AclArgs) -> anyhow::Result<Vec<AclFilter>> {
    let (resource_type, name) = match resource(args) {
        Some((t, n)) => (t, Some(n)),
        None => (ResourceType::Any, None),
    };
    let operations = operations(args)?;
    let operations = if operations.is_empty() {
        vec![Operation::Any]
    } else {
        operations
    };
    let explicit_pattern = args.prefixed || name.is_some();
    Ok(operations
        .into_iter()
        .map(|operation| AclFilter {
            resource_type,
            name: name.clone(),
            pattern_type: if explicit_pattern {
                pattern_type(args)
            } else {
                PatternType::Any
            },
            principal: args.principal.clone(),
            host: args.host.clone(),
            operation,
            permission: if args.deny {
                Permission::Deny
            } else {
                Permission::Any
            },
        })
        .collect())
}

fn print(binding: &AclBinding) {
    println!(
        "{} {} {}\t(principal={}, host={}, operation={}, permissionType={})",
        binding.resource_type,
        binding.pattern_type,
        binding.name,
        binding.principal,
        binding.host,
        binding.operation,
        binding.permission
    );
}

/// Runs one acl subcommand.
pub async fn run(command: AclCommand) -> anyhow::Result<()> {
    match command {
        AclCommand::Add { acl, broker } => {
            let bindings = bindings(&acl)?;
            let mut connection = broker.connect().await?;
            security_admin::create_acls(&mut connection, &bindings).await?;
            for binding in &bindings {
                print(binding);
            }
        }
        AclCommand::List { acl, broker } => {
            let mut connection = broker.connect().await?;
            for filter in filters(&acl)? {
                for binding in security_admin::describe_acls(&mut connection, &filter).await? {
                    print(&binding);
                }
            }
        }
        AclCommand::Remove { acl, broker } => {
            let mut connection = broker.connect().await?;
            let mut removed = 0;
            for filter in filters(&acl)? {
                for binding in security_admin::delete_acls(&mut connection, &filter).await? {
                    removed += 1;
                    print(&binding);
                }
            }
            println!("removed {removed} ACLs");
        }
    }
    Ok(())
}
