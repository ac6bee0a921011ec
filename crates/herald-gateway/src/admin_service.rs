//! The `HeraldAdmin` gRPC service: tenants and their namespaces, stored
//! through the broker's security state (so in its metadata, with the ACLs
//! a tenant's principals get).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use herald_auth::acl::CLUSTER_NAME;
use herald_auth::{
    Operation, ResourceType, SecurityCommand, SecurityError, SecurityState, TenantError,
};
use herald_broker::BrokerError;
use tonic::{Request, Response, Status};

use crate::grpc::caller;
use crate::proto::herald_admin_server::HeraldAdmin;
use crate::proto::{
    AlterNamespaceRequest, CreateTenantRequest, DeleteTenantRequest, DeleteTenantResponse,
    ListTenantsRequest, ListTenantsResponse, Namespace, Tenant,
};
use crate::server::Shared;

/// The admin service.
#[derive(Clone)]
pub(crate) struct AdminService {
    pub(crate) shared: Arc<Shared>,
}

impl AdminService {
    /// Refuses the call unless its caller may do `operation` on the
    /// cluster.
    async fn require<T>(&self, request: &Request<T>, operation: Operation) -> Result<(), Status> {
        let mut identity = caller(&self.shared, request).await?;
        let security = self.shared.engine.broker().security();
        if identity.may(security, operation, ResourceType::Cluster, CLUSTER_NAME) {
            Ok(())
        } else {
            tracing::info!(
                principal = identity.principal(),
                ?operation,
                "tenant admin call refused"
            );
            Err(Status::permission_denied(format!(
                "{} may not {} the cluster",
                identity.principal(),
                operation.name().to_ascii_lowercase()
            )))
        }
    }

    fn apply(&self, commands: Vec<SecurityCommand>) -> Result<(), Status> {
        self.shared
            .engine
            .broker()
            .apply_security_all(commands)
            .map(|_| ())
            .map_err(refusal)
    }
}

/// The status a refused change answers with.
fn refusal(error: BrokerError) -> Status {
    match &error {
        BrokerError::Security(SecurityError::Tenant(TenantError::Exists(_))) => {
            Status::already_exists(error.to_string())
        }
        BrokerError::Security(SecurityError::Tenant(
            TenantError::NoSuchTenant(_) | TenantError::NoSuchNamespace(_),
        )) => Status::not_found(error.to_string()),
        BrokerError::Security(_) | BrokerError::InvalidConfig { .. } => {
            Status::invalid_argument(error.to_string())
        }
        _ => Status::unavailable(error.to_string()),
    }
}

/// A tenant as the protocol shows it.
fn tenant_message(state: &SecurityState, name: &str) -> Option<Tenant> {
    let tenant = state.tenants.get(name)?;
    Some(Tenant {
        name: tenant.name.clone(),
        principals: tenant.principals.iter().cloned().collect(),
        namespaces: tenant
            .namespaces
            .iter()
            .filter_map(|prefix| state.namespaces.get(prefix))
            .map(|n| Namespace {
                prefix: n.prefix.clone(),
                configs: n.configs.clone().into_iter().collect(),
            })
            .collect(),
    })
}

#[tonic::async_trait]
impl HeraldAdmin for AdminService {
    async fn create_tenant(
        &self,
        request: Request<CreateTenantRequest>,
    ) -> Result<Response<Tenant>, Status> {
        self.require(&request, Operation::Alter).await?;
        let request = request.into_inner();
        let configs: BTreeMap<String, String> = request.configs.into_iter().collect();
        let namespaces: BTreeSet<String> = request.namespaces.into_iter().collect();
        let mut commands = vec![SecurityCommand::CreateTenant {
            name: request.name.clone(),
            principals: request.principals.into_iter().collect(),
            namespaces: namespaces.clone(),
        }];
        if !configs.is_empty() {
            commands.extend(namespaces.iter().map(|prefix| {
                SecurityCommand::AlterNamespaceConfigs {
                    prefix: prefix.clone(),
                    set: configs.clone(),
                    remove: BTreeSet::new(),
                }
            }));
        }
        self.apply(commands)?;
        tracing::info!(tenant = %request.name, "tenant created");
        let state = self.shared.engine.broker().security().state();
        tenant_message(&state, &request.name)
            .map(Response::new)
            .ok_or_else(|| Status::aborted("the tenant was removed meanwhile"))
    }

    async fn delete_tenant(
        &self,
        request: Request<DeleteTenantRequest>,
    ) -> Result<Response<DeleteTenantResponse>, Status> {
        self.require(&request, Operation::Alter).await?;
        let name = request.into_inner().name;
        self.apply(vec![SecurityCommand::DeleteTenant { name: name.clone() }])?;
        tracing::info!(tenant = %name, "tenant deleted");
        Ok(Response::new(DeleteTenantResponse {}))
    }

    async fn list_tenants(
        &self,
        request: Request<ListTenantsRequest>,
    ) -> Result<Response<ListTenantsResponse>, Status> {
        self.require(&request, Operation::Describe).await?;
        let state = self.shared.engine.broker().security().state();
        let tenants = state
            .tenants
            .keys()
            .filter_map(|name| tenant_message(&state, name))
            .collect();
        Ok(Response::new(ListTenantsResponse { tenants }))
    }

    async fn alter_namespace(
        &self,
        request: Request<AlterNamespaceRequest>,
    ) -> Result<Response<Namespace>, Status> {
        self.require(&request, Operation::Alter).await?;
        let request = request.into_inner();
        self.apply(vec![SecurityCommand::AlterNamespaceConfigs {
            prefix: request.prefix.clone(),
            set: request.set.into_iter().collect(),
            remove: request.remove.into_iter().collect(),
        }])?;
        tracing::info!(namespace = %request.prefix, "namespace configs altered");
        let state = self.shared.engine.broker().security().state();
        state
            .namespaces
            .get(&request.prefix)
            .map(|n| {
                Response::new(Namespace {
                    prefix: n.prefix.clone(),
                    configs: n.configs.clone().into_iter().collect(),
                })
            })
            .ok_or_else(|| Status::aborted("the namespace was removed meanwhile"))
    }
}
