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
use herald_flow::{EntityType, QuotaEntity, QuotaOp, QuotaState};
use tonic::{Request, Response, Status};

use crate::grpc::caller;
use crate::proto::herald_admin_server::HeraldAdmin;
use crate::proto::{
    AlterNamespaceRequest, AlterTenantSlaRequest, CreateTenantRequest, DeleteTenantRequest,
    DeleteTenantResponse, ListTenantsRequest, ListTenantsResponse, Namespace, Tenant,
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

    async fn apply(&self, commands: Vec<SecurityCommand>) -> Result<(), Status> {
        self.shared
            .engine
            .broker()
            .change_security(commands)
            .await
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

/// The quota entity a tenant's SLA is stored under.
fn sla_entity(tenant: &str) -> QuotaEntity {
    QuotaEntity([(EntityType::Tenant, Some(tenant.to_owned()))].into())
}

/// A tenant as the protocol shows it.
fn tenant_message(state: &SecurityState, quotas: &QuotaState, name: &str) -> Option<Tenant> {
    let tenant = state.tenants.get(name)?;
    let sla = quotas
        .entries
        .get(&sla_entity(name))
        .map(|values| values.clone().into_iter().collect())
        .unwrap_or_default();
    Some(Tenant {
        sla,
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
        self.apply(commands).await?;
        tracing::info!(tenant = %request.name, "tenant created");
        let broker = self.shared.engine.broker();
        tenant_message(&broker.security().state(), &broker.quotas(), &request.name)
            .map(Response::new)
            .ok_or_else(|| Status::aborted("the tenant was removed meanwhile"))
    }

    async fn delete_tenant(
        &self,
        request: Request<DeleteTenantRequest>,
    ) -> Result<Response<DeleteTenantResponse>, Status> {
        self.require(&request, Operation::Alter).await?;
        let name = request.into_inner().name;
        self.apply(vec![SecurityCommand::DeleteTenant { name: name.clone() }])
            .await?;
        // Its SLA goes with it: a tenant made again under the name starts
        // without one.
        let broker = self.shared.engine.broker();
        if let Some(values) = broker.quotas().entries.get(&sla_entity(&name)) {
            let removals = values
                .keys()
                .map(|key| QuotaOp {
                    key: key.clone(),
                    value: 0.0,
                    remove: true,
                })
                .collect();
            broker
                .change_quotas(vec![(sla_entity(&name), removals)], false)
                .await
                .map_err(|e| Status::unavailable(e.to_string()))?;
        }
        tracing::info!(tenant = %name, "tenant deleted");
        Ok(Response::new(DeleteTenantResponse {}))
    }

    async fn list_tenants(
        &self,
        request: Request<ListTenantsRequest>,
    ) -> Result<Response<ListTenantsResponse>, Status> {
        self.require(&request, Operation::Describe).await?;
        let broker = self.shared.engine.broker();
        let (state, quotas) = (broker.security().state(), broker.quotas());
        let tenants = state
            .tenants
            .keys()
            .filter_map(|name| tenant_message(&state, &quotas, name))
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
        }])
        .await?;
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

    async fn alter_tenant_sla(
        &self,
        request: Request<AlterTenantSlaRequest>,
    ) -> Result<Response<Tenant>, Status> {
        self.require(&request, Operation::Alter).await?;
        let request = request.into_inner();
        let broker = self.shared.engine.broker();
        if !broker
            .security()
            .state()
            .tenants
            .contains_key(&request.name)
        {
            return Err(Status::not_found(format!("no tenant {}", request.name)));
        }
        let mut ops: Vec<QuotaOp> = request
            .set
            .into_iter()
            .map(|(key, value)| QuotaOp {
                key,
                value,
                remove: false,
            })
            .collect();
        ops.extend(request.remove.into_iter().map(|key| QuotaOp {
            key,
            value: 0.0,
            remove: true,
        }));
        let mut outcomes = broker
            .change_quotas(vec![(sla_entity(&request.name), ops)], false)
            .await
            .map_err(|e| Status::unavailable(e.to_string()))?;
        if let Some(Err(e)) = outcomes.pop() {
            return Err(Status::invalid_argument(e.to_string()));
        }
        tracing::info!(tenant = %request.name, "tenant SLA altered");
        tenant_message(&broker.security().state(), &broker.quotas(), &request.name)
            .map(Response::new)
            .ok_or_else(|| Status::aborted("the tenant was removed meanwhile"))
    }
}
