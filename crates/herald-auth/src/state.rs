//! Everything herald knows of who may do what, as one state machine:
//! users' SCRAM credentials, ACLs, tenants and namespaces, changed only by
//! applying commands. The broker keeps the state in its durable metadata;
//! a Raft group can later carry the same commands between nodes.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

use crate::acl::{AclBinding, AclError, AclFilter};
use crate::scram::{ScramCredential, ScramMechanism};
use crate::tenant::{self, Namespace, Tenant, TenantError};

/// One user's credentials, one per SCRAM mechanism at most.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct UserCredentials {
    /// By mechanism.
    pub scram: BTreeMap<ScramMechanism, ScramCredential>,
}

/// The whole state.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SecurityState {
    /// Users by name.
    #[serde(default)]
    pub users: BTreeMap<String, UserCredentials>,
    /// Every ACL, a tenant's among them.
    #[serde(default)]
    pub acls: BTreeSet<AclBinding>,
    /// Tenants by name.
    #[serde(default)]
    pub tenants: BTreeMap<String, Tenant>,
    /// Namespaces by prefix.
    #[serde(default)]
    pub namespaces: BTreeMap<String, Namespace>,
}

/// A change to the state.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum SecurityCommand {
    /// Sets a user's credential for a mechanism (creating the user).
    UpsertScram {
        /// The user.
        user: String,
        /// The mechanism.
        mechanism: ScramMechanism,
        /// The credential.
        credential: ScramCredential,
    },
    /// Removes a user's credential for a mechanism (and the user with its
    /// last one).
    DeleteScram {
        /// The user.
        user: String,
        /// The mechanism.
        mechanism: ScramMechanism,
    },
    /// Adds ACLs (one already there is no change).
    CreateAcls(Vec<AclBinding>),
    /// Removes the ACLs each filter matches.
    DeleteAcls(Vec<AclFilter>),
    /// Creates a tenant with its principals and namespaces, and the ACLs
    /// that give them the namespaces.
    CreateTenant {
        /// Its name.
        name: String,
        /// Its principals.
        principals: BTreeSet<String>,
        /// Its namespaces' prefixes.
        namespaces: BTreeSet<String>,
    },
    /// Removes a tenant, its namespaces and the ACLs it was given (its
    /// topics stay, reachable by super users and other ACLs).
    DeleteTenant {
        /// Its name.
        name: String,
    },
    /// Sets and removes configs a namespace's topics inherit.
    AlterNamespaceConfigs {
        /// The namespace's prefix.
        prefix: String,
        /// Keys set, with their values.
        set: BTreeMap<String, String>,
        /// Keys removed.
        remove: BTreeSet<String>,
    },
}

/// What applying a command came to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Applied {
    /// Done.
    Done,
    /// For each filter of a `DeleteAcls`, the ACLs it removed.
    DeletedAcls(Vec<Vec<AclBinding>>),
}

/// Why a command was refused (the state is unchanged).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SecurityError {
    /// No credential of that mechanism for that user.
    #[error("user {0} has no {1} credential")]
    NoSuchCredential(String, ScramMechanism),
    /// An empty user name.
    #[error("a user name must not be empty")]
    EmptyUser,
    /// An ACL refused.
    #[error(transparent)]
    Acl(#[from] AclError),
    /// A tenant or namespace refused.
    #[error(transparent)]
    Tenant(#[from] TenantError),
}

impl SecurityState {
    /// Applies `command`, or refuses it and changes nothing.
    pub fn apply(&mut self, command: SecurityCommand) -> Result<Applied, SecurityError> {
        match command {
            SecurityCommand::UpsertScram {
                user,
                mechanism,
                credential,
            } => {
                if user.is_empty() {
                    return Err(SecurityError::EmptyUser);
                }
                self.users
                    .entry(user)
                    .or_default()
                    .scram
                    .insert(mechanism, credential);
            }
            SecurityCommand::DeleteScram { user, mechanism } => {
                let removed = self
                    .users
                    .get_mut(&user)
                    .and_then(|u| u.scram.remove(&mechanism));
                if removed.is_none() {
                    return Err(SecurityError::NoSuchCredential(user, mechanism));
                }
                if self.users.get(&user).is_some_and(|u| u.scram.is_empty()) {
                    self.users.remove(&user);
                }
            }
            SecurityCommand::CreateAcls(bindings) => {
                for binding in &bindings {
                    binding.validate()?;
                }
                self.acls.extend(bindings);
            }
            SecurityCommand::DeleteAcls(filters) => {
                let mut deleted = Vec::with_capacity(filters.len());
                for filter in &filters {
                    let matched: Vec<AclBinding> = self
                        .acls
                        .iter()
                        .filter(|b| filter.matches(b))
                        .cloned()
                        .collect();
                    for binding in &matched {
                        self.acls.remove(binding);
                    }
                    deleted.push(matched);
                }
                return Ok(Applied::DeletedAcls(deleted));
            }
            SecurityCommand::CreateTenant {
                name,
                principals,
                namespaces,
            } => {
                tenant::check_name(&name)?;
                if self.tenants.contains_key(&name) {
                    return Err(TenantError::Exists(name).into());
                }
                for principal in &principals {
                    tenant::check_principal(principal)?;
                }
                for (i, prefix) in namespaces.iter().enumerate() {
                    tenant::check_prefix(prefix)?;
                    if let Some(other) = tenant::overlapping(&self.namespaces, prefix) {
                        return Err(TenantError::Overlap(
                            prefix.clone(),
                            other.prefix.clone(),
                            other.tenant.clone(),
                        )
                        .into());
                    }
                    // Nor may a tenant's own namespaces overlap.
                    if let Some(mine) = namespaces
                        .iter()
                        .take(i)
                        .find(|p| prefix.starts_with(p.as_str()) || p.starts_with(prefix.as_str()))
                    {
                        return Err(TenantError::Overlap(prefix.clone(), mine.clone(), name).into());
                    }
                }
                let tenant = Tenant {
                    name: name.clone(),
                    principals,
                    namespaces,
                };
                self.acls.extend(tenant.acls());
                for prefix in &tenant.namespaces {
                    self.namespaces.insert(
                        prefix.clone(),
                        Namespace {
                            prefix: prefix.clone(),
                            tenant: name.clone(),
                            configs: BTreeMap::new(),
                        },
                    );
                }
                self.tenants.insert(name, tenant);
            }
            SecurityCommand::DeleteTenant { name } => {
                let tenant = self
                    .tenants
                    .remove(&name)
                    .ok_or(TenantError::NoSuchTenant(name))?;
                for binding in tenant.acls() {
                    self.acls.remove(&binding);
                }
                for prefix in &tenant.namespaces {
                    self.namespaces.remove(prefix);
                }
            }
            SecurityCommand::AlterNamespaceConfigs {
                prefix,
                set,
                remove,
            } => {
                let namespace = self
                    .namespaces
                    .get_mut(&prefix)
                    .ok_or(TenantError::NoSuchNamespace(prefix))?;
                for key in &remove {
                    namespace.configs.remove(key);
                }
                namespace.configs.extend(set);
            }
        }
        Ok(Applied::Done)
    }

    /// The credential of `user` for `mechanism`.
    pub fn scram(&self, user: &str, mechanism: ScramMechanism) -> Option<&ScramCredential> {
        self.users.get(user).and_then(|u| u.scram.get(&mechanism))
    }

    /// Any credential of `user` (SHA-512 first), for SASL/PLAIN.
    pub fn any_scram(&self, user: &str) -> Option<(ScramMechanism, &ScramCredential)> {
        let user = self.users.get(user)?;
        [ScramMechanism::Sha512, ScramMechanism::Sha256]
            .into_iter()
            .find_map(|m| user.scram.get(&m).map(|c| (m, c)))
    }

    /// The tenant `principal` belongs to, if any (the first by name: a
    /// principal is meant to be in one).
    pub fn tenant_of_principal(&self, principal: &str) -> Option<&Tenant> {
        self.tenants
            .values()
            .find(|t| t.principals.contains(principal))
    }

    /// The tenant whose namespace `topic` is in, if any.
    pub fn tenant_of_topic(&self, topic: &str) -> Option<&Tenant> {
        self.tenants.get(&self.namespace_of(topic)?.tenant)
    }

    /// The namespace `topic` is in.
    pub fn namespace_of(&self, topic: &str) -> Option<&Namespace> {
        tenant::namespace_of(&self.namespaces, topic)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::acl::{Operation, PatternType, Permission, ResourceType};
    use crate::authorizer::{Authorizer, Caller};

    fn credential() -> ScramCredential {
        ScramCredential::from_password(ScramMechanism::Sha256, "pw", 4096).expect("made")
    }

    fn tenant(name: &str, principal: &str, prefix: &str) -> SecurityCommand {
        SecurityCommand::CreateTenant {
            name: name.into(),
            principals: [principal.to_owned()].into(),
            namespaces: [prefix.to_owned()].into(),
        }
    }

    #[test]
    fn credentials_come_and_go_per_mechanism() {
        let mut state = SecurityState::default();
        state
            .apply(SecurityCommand::UpsertScram {
                user: "alice".into(),
                mechanism: ScramMechanism::Sha256,
                credential: credential(),
            })
            .expect("set");
        assert!(state.scram("alice", ScramMechanism::Sha256).is_some());
        assert!(state.scram("alice", ScramMechanism::Sha512).is_none());
        assert_eq!(
            state.any_scram("alice").map(|(m, _)| m),
            Some(ScramMechanism::Sha256)
        );
        assert_eq!(
            state.apply(SecurityCommand::DeleteScram {
                user: "alice".into(),
                mechanism: ScramMechanism::Sha512
            }),
            Err(SecurityError::NoSuchCredential(
                "alice".into(),
                ScramMechanism::Sha512
            ))
        );
        state
            .apply(SecurityCommand::DeleteScram {
                user: "alice".into(),
                mechanism: ScramMechanism::Sha256,
            })
            .expect("deleted");
        assert!(
            state.users.is_empty(),
            "the user goes with its last credential"
        );
    }

    #[test]
    fn two_tenants_cannot_reach_each_others_resources() {
        let mut state = SecurityState::default();
        state
            .apply(tenant("acme", "User:ann", "acme."))
            .expect("acme");
        state
            .apply(tenant("globex", "User:gus", "globex."))
            .expect("globex");
        assert!(matches!(
            state.apply(tenant("evil", "User:eve", "acme.orders.")),
            Err(SecurityError::Tenant(TenantError::Overlap(..)))
        ));
        assert!(matches!(
            state.apply(tenant("evil", "User:eve", "ac")),
            Err(SecurityError::Tenant(TenantError::Overlap(..)))
        ));
        let authorizer = Authorizer::new(Vec::new(), false);
        authorizer.replace(state.acls.iter().cloned());
        let who = |p: &str| Caller {
            principal: p.into(),
            host: "10.1.1.1".into(),
        };
        let (ann, gus) = (who("User:ann"), who("User:gus"));
        for (op, t) in [
            (Operation::Write, ResourceType::Topic),
            (Operation::Read, ResourceType::Topic),
            (Operation::Create, ResourceType::Topic),
            (Operation::Read, ResourceType::Group),
        ] {
            assert!(authorizer.authorize(&ann, op, t, "acme.orders"));
            assert!(!authorizer.authorize(&ann, op, t, "globex.orders"));
            assert!(authorizer.authorize(&gus, op, t, "globex.orders"));
            assert!(!authorizer.authorize(&gus, op, t, "acme.orders"));
        }
        assert_eq!(
            state.namespace_of("acme.orders").map(|n| n.tenant.as_str()),
            Some("acme")
        );
        state
            .apply(SecurityCommand::DeleteTenant {
                name: "acme".into(),
            })
            .expect("deleted");
        assert!(state.namespace_of("acme.orders").is_none());
        assert!(state.acls.iter().all(|a| a.principal != "User:ann"));
    }

    #[test]
    fn acls_are_validated_and_deleted_by_filter() {
        let mut state = SecurityState::default();
        let binding = AclBinding {
            resource_type: ResourceType::Topic,
            name: "t".into(),
            pattern_type: PatternType::Literal,
            principal: "User:a".into(),
            host: "*".into(),
            operation: Operation::Read,
            permission: Permission::Allow,
        };
        let mut bad = binding.clone();
        bad.name.clear();
        assert!(state
            .apply(SecurityCommand::CreateAcls(vec![binding.clone(), bad]))
            .is_err());
        assert!(state.acls.is_empty(), "a refused command changes nothing");
        state
            .apply(SecurityCommand::CreateAcls(vec![
                binding.clone(),
                binding.clone(),
            ]))
            .expect("created");
        assert_eq!(state.acls.len(), 1);
        let deleted = state
            .apply(SecurityCommand::DeleteAcls(vec![AclFilter::everything()]))
            .expect("deleted");
        assert_eq!(deleted, Applied::DeletedAcls(vec![vec![binding]]));
    }

    #[test]
    fn namespace_configs_are_set_and_removed() {
        let mut state = SecurityState::default();
        state
            .apply(tenant("acme", "User:ann", "acme."))
            .expect("acme");
        state
            .apply(SecurityCommand::AlterNamespaceConfigs {
                prefix: "acme.".into(),
                set: [("retention.ms".to_owned(), "3600000".to_owned())].into(),
                remove: BTreeSet::new(),
            })
            .expect("set");
        assert_eq!(
            state
                .namespace_of("acme.x")
                .and_then(|n| n.configs.get("retention.ms"))
                .map(String::as_str),
            Some("3600000")
        );
        let json = serde_json::to_string(&state).expect("json");
        assert_eq!(
            serde_json::from_str::<SecurityState>(&json).expect("read back"),
            state
        );
        assert_eq!(
            serde_json::from_str::<SecurityState>("{}").expect("empty"),
            SecurityState::default()
        );
    }
}
