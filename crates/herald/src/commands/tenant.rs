//! `herald tenant create|delete|list|configure|sla`: tenants, their
//! namespaces and their SLAs through the push listener's `HeraldAdmin` service.

use anyhow::Context as _;
use herald_gateway::proto::{
    AlterNamespaceRequest, AlterTenantSlaRequest, CreateTenantRequest, DeleteTenantRequest,
    ListTenantsRequest, Namespace, Tenant,
};

use crate::cli_client::TenantCommand;

/// Runs one tenant command.
pub async fn run(command: TenantCommand) -> anyhow::Result<()> {
    match command {
        TenantCommand::Create {
            name,
            principals,
            namespaces,
            configs,
            push,
        } => {
            let mut client = super::push_client::connect_admin(&push).await?;
            let tenant = client
                .create_tenant(CreateTenantRequest {
                    name: name.clone(),
                    principals,
                    namespaces,
                    configs: configs.into_iter().collect(),
                })
                .await
                .map_err(refused)
                .with_context(|| format!("creating tenant {name}"))?
                .into_inner();
            println!("created tenant {}", tenant.name);
            print_tenant(&tenant);
        }
        TenantCommand::Delete { name, push } => {
            let mut client = super::push_client::connect_admin(&push).await?;
            client
                .delete_tenant(DeleteTenantRequest { name: name.clone() })
                .await
                .map_err(refused)
                .with_context(|| format!("deleting tenant {name}"))?;
            println!("deleted tenant {name}");
        }
        TenantCommand::List { push } => {
            let mut client = super::push_client::connect_admin(&push).await?;
            let tenants = client
                .list_tenants(ListTenantsRequest {})
                .await
                .map_err(refused)
                .context("listing tenants")?
                .into_inner()
                .tenants;
            for tenant in &tenants {
                println!("{}", tenant.name);
                print_tenant(tenant);
            }
        }
        TenantCommand::Configure {
            prefix,
            set,
            remove,
            push,
        } => {
            let mut client = super::push_client::connect_admin(&push).await?;
            let namespace = client
                .alter_namespace(AlterNamespaceRequest {
                    prefix: prefix.clone(),
                    set: set.into_iter().collect(),
                    remove,
                })
                .await
                .map_err(refused)
                .with_context(|| format!("configuring namespace {prefix}"))?
                .into_inner();
            print_namespace(&namespace);
        }
        TenantCommand::Sla {
            name,
            set,
            remove,
            push,
        } => {
            let mut client = super::push_client::connect_admin(&push).await?;
            let tenant = client
                .alter_tenant_sla(AlterTenantSlaRequest {
                    name: name.clone(),
                    set: set.into_iter().collect(),
                    remove,
                })
                .await
                .map_err(refused)
                .with_context(|| format!("altering the SLA of tenant {name}"))?
                .into_inner();
            println!("{}", tenant.name);
            print_tenant(&tenant);
        }
    }
    Ok(())
}

/// The broker's refusal, as one line.
fn refused(status: tonic::Status) -> anyhow::Error {
    anyhow::anyhow!("{:?}: {}", status.code(), status.message())
}

fn print_tenant(tenant: &Tenant) {
    for principal in &tenant.principals {
        println!("  principal {principal}");
    }
    for namespace in &tenant.namespaces {
        print_namespace(namespace);
    }
    let mut sla: Vec<_> = tenant.sla.iter().collect();
    sla.sort_by(|a, b| a.0.cmp(b.0));
    for (key, value) in sla {
        println!("  sla {key}={value}");
    }
}

fn print_namespace(namespace: &Namespace) {
    println!("  namespace {}", namespace.prefix);
    let mut configs: Vec<_> = namespace.configs.iter().collect();
    configs.sort();
    for (key, value) in configs {
        println!("    {key}={value}");
    }
}
