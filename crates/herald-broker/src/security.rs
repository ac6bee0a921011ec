//! The broker's side of who may do what: the security state (credentials,
//! ACLs, tenants, namespaces) as last persisted in the metadata, published
//! for lock-free reading, the authorizer built from its ACLs, and the
//! secret that makes unknown users' decoy credentials.
//!
//! Changes go through [`crate::Broker::apply_security`], which persists
//! the new state before publishing it.

use std::sync::Arc;

use arc_swap::ArcSwap;
use herald_auth::{Authorizer, Caller, Operation, ResourceType, SecurityState};

/// Who may do what, as configured when the broker starts.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SecurityConfig {
    /// Check every request against the ACLs (Kafka's `authorizer.class.name`
    /// set). Off, every client may do everything, as with Kafka's default.
    pub authorization: bool,
    /// Principals (`User:admin`) that may do anything.
    pub super_users: Vec<String>,
    /// Allow what no ACL is about to everyone (Kafka's
    /// `allow.everyone.if.no.acl.found`).
    pub allow_everyone_if_no_acl_found: bool,
}

/// The published security state of a broker.
#[derive(Debug)]
pub struct Security {
    config: SecurityConfig,
    state: ArcSwap<SecurityState>,
    authorizer: Authorizer,
    secret: Vec<u8>,
}

impl Security {
    pub(crate) fn new(config: SecurityConfig, state: SecurityState, secret: Vec<u8>) -> Self {
        let authorizer = Authorizer::new(
            config.super_users.iter().cloned(),
            config.allow_everyone_if_no_acl_found,
        );
        authorizer.replace(state.acls.iter().cloned());
        Self {
            config,
            state: ArcSwap::from_pointee(state),
            authorizer,
            secret,
        }
    }

    /// Publishes a state just persisted.
    pub(crate) fn publish(&self, state: SecurityState) {
        self.authorizer.replace(state.acls.iter().cloned());
        self.state.store(Arc::new(state));
    }

    /// The settings it started with.
    pub fn config(&self) -> &SecurityConfig {
        &self.config
    }

    /// The state now (credentials, ACLs, tenants, namespaces).
    pub fn state(&self) -> Arc<SecurityState> {
        self.state.load_full()
    }

    /// The authorizer over the ACLs now.
    pub fn authorizer(&self) -> &Authorizer {
        &self.authorizer
    }

    /// What unknown users' decoy credentials are made from: kept in the
    /// metadata, so a name gets the same salt across restarts.
    pub fn secret(&self) -> &[u8] {
        &self.secret
    }

    /// True if `caller` may do `operation` on `name` of `resource_type`;
    /// always true when authorization is off.
    pub fn authorize(
        &self,
        caller: &Caller,
        operation: Operation,
        resource_type: ResourceType,
        name: &str,
    ) -> bool {
        !self.config.authorization
            || self
                .authorizer
                .authorize(caller, operation, resource_type, name)
    }
}
