//! Tenants and namespaces (seed 004, sections 2.3.5 and 2.3.6): a tenant
//! groups principals and owns namespaces; a namespace is a topic-name
//! prefix whose topics inherit its configs (retention and others). A
//! tenant's principals get every operation on the topics, groups and
//! transactional ids under its namespaces, as prefixed ACLs: the same
//! authorizer then keeps two tenants from seeing or touching each other's.

use std::collections::{BTreeMap, BTreeSet};
use std::ops::Bound;

use serde::{Deserialize, Serialize};

use crate::acl::{AclBinding, Operation, PatternType, Permission, ResourceType, WILDCARD};

/// Longest tenant name.
pub const TENANT_NAME_MAX: usize = 128;
/// Longest namespace prefix (a topic name is at most 249 characters).
pub const NAMESPACE_MAX: usize = 200;

/// One tenant.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Tenant {
    /// Its name.
    pub name: String,
    /// Its principals (`User:alice`).
    pub principals: BTreeSet<String>,
    /// The prefixes of its namespaces.
    pub namespaces: BTreeSet<String>,
}

/// One namespace: a topic-name prefix and the configs its topics inherit.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Namespace {
    /// The prefix.
    pub prefix: String,
    /// The tenant that owns it.
    pub tenant: String,
    /// Topic configs (Kafka keys) its topics inherit unless they set
    /// their own.
    pub configs: BTreeMap<String, String>,
}

/// Why a tenant or namespace was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TenantError {
    /// A name that is empty, too long or has characters outside
    /// `[A-Za-z0-9._-]`.
    #[error("invalid tenant name {0:?}: 1 to {TENANT_NAME_MAX} of [A-Za-z0-9._-]")]
    Name(String),
    /// A prefix that is empty, too long or has characters a topic name
    /// may not have.
    #[error("invalid namespace {0:?}: 1 to {NAMESPACE_MAX} of [A-Za-z0-9._-]")]
    Prefix(String),
    /// A principal without its type.
    #[error("invalid principal {0:?}: expected Type:name, as User:alice")]
    Principal(String),
    /// The tenant exists.
    #[error("tenant {0} exists")]
    Exists(String),
    /// No such tenant.
    #[error("no tenant {0}")]
    NoSuchTenant(String),
    /// No such namespace.
    #[error("no namespace {0}")]
    NoSuchNamespace(String),
    /// A namespace that is a prefix of another's, or has one as its
    /// prefix: their topics would be both tenants'.
    #[error("namespace {0:?} overlaps namespace {1:?} of tenant {2}")]
    Overlap(String, String, String),
}

fn valid_chars(text: &str) -> bool {
    text.chars()
        .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'))
}

/// Checks a tenant name.
pub fn check_name(name: &str) -> Result<(), TenantError> {
    if name.is_empty() || name.len() > TENANT_NAME_MAX || !valid_chars(name) {
        return Err(TenantError::Name(name.into()));
    }
    Ok(())
}

/// Checks a namespace prefix.
pub fn check_prefix(prefix: &str) -> Result<(), TenantError> {
    if prefix.is_empty() || prefix.len() > NAMESPACE_MAX || !valid_chars(prefix) {
        return Err(TenantError::Prefix(prefix.into()));
    }
    Ok(())
}

/// Checks a principal.
pub fn check_principal(principal: &str) -> Result<(), TenantError> {
    match principal.split_once(':') {
        Some((kind, name)) if !kind.is_empty() && !name.is_empty() => Ok(()),
        _ => Err(TenantError::Principal(principal.into())),
    }
}

impl Tenant {
    /// The ACLs that give its principals its namespaces: every operation
    /// on the topics, groups and transactional ids under each prefix.
    pub fn acls(&self) -> Vec<AclBinding> {
        let mut acls = Vec::new();
        for principal in &self.principals {
            for prefix in &self.namespaces {
                acls.extend(namespace_acls(principal, prefix));
            }
        }
        acls
    }
}

/// What a principal of a namespace's tenant may do there.
pub fn namespace_acls(principal: &str, prefix: &str) -> Vec<AclBinding> {
    [
        ResourceType::Topic,
        ResourceType::Group,
        ResourceType::TransactionalId,
    ]
    .into_iter()
    .map(|resource_type| AclBinding {
        resource_type,
        name: prefix.to_owned(),
        pattern_type: PatternType::Prefixed,
        principal: principal.to_owned(),
        host: WILDCARD.to_owned(),
        operation: Operation::All,
        permission: Permission::Allow,
    })
    .collect()
}

/// The namespace a topic is in: the longest prefix of its name among
/// `namespaces` (which never overlap, so at most one).
pub fn namespace_of<'a>(
    namespaces: &'a BTreeMap<String, Namespace>,
    topic: &str,
) -> Option<&'a Namespace> {
    // A prefix of the name sorts at or before it, and anything sorting
    // between the prefix and the name starts with the prefix, so would
    // overlap it: the last namespace at or before the name is the only
    // candidate.
    namespaces
        .range::<str, _>((Bound::Unbounded, Bound::Included(topic)))
        .next_back()
        .filter(|(prefix, _)| topic.starts_with(prefix.as_str()))
        .map(|(_, namespace)| namespace)
}

/// The namespace `prefix` would overlap, if any: one that is a prefix of
/// it or has it as a prefix.
pub fn overlapping<'a>(
    namespaces: &'a BTreeMap<String, Namespace>,
    prefix: &str,
) -> Option<&'a Namespace> {
    namespaces
        .values()
        .find(|n| n.prefix.starts_with(prefix) || prefix.starts_with(n.prefix.as_str()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn namespaces(prefixes: &[&str]) -> BTreeMap<String, Namespace> {
        prefixes
            .iter()
            .map(|p| {
                (
                    (*p).to_owned(),
                    Namespace {
                        prefix: (*p).to_owned(),
                        tenant: "t".into(),
                        configs: BTreeMap::new(),
                    },
                )
            })
            .collect()
    }

    #[test]
    fn a_topic_is_in_the_namespace_its_name_starts_with() {
        let all = namespaces(&["acme.", "globex.", "initech.orders."]);
        let of = |t: &str| namespace_of(&all, t).map(|n| n.prefix.as_str());
        assert_eq!(of("acme.orders"), Some("acme."));
        assert_eq!(of("acme."), Some("acme."));
        assert_eq!(of("acme"), None);
        assert_eq!(of("globex.x.y"), Some("globex."));
        assert_eq!(of("initech.orders.eu"), Some("initech.orders."));
        assert_eq!(of("initech.payments"), None);
        assert_eq!(of("zzz"), None);
    }

    #[test]
    fn overlapping_namespaces_are_found() {
        let all = namespaces(&["acme."]);
        assert!(overlapping(&all, "acme.eu.").is_some());
        assert!(overlapping(&all, "ac").is_some());
        assert!(overlapping(&all, "acme-").is_none());
    }

    #[test]
    fn a_tenant_gets_every_operation_under_its_prefixes() {
        let tenant = Tenant {
            name: "acme".into(),
            principals: ["User:a".to_owned(), "User:b".to_owned()].into(),
            namespaces: ["acme.".to_owned()].into(),
        };
        let acls = tenant.acls();
        assert_eq!(acls.len(), 6);
        assert!(acls
            .iter()
            .all(|a| a.pattern_type == PatternType::Prefixed && a.name == "acme."));
    }

    proptest::proptest! {
        #[test]
        fn the_namespace_found_is_the_one_a_scan_finds(
            prefixes in proptest::collection::btree_set("[ab.]{1,4}", 0..8),
            topic in "[ab.]{0,6}",
        ) {
            // Keep the prefixes that overlap none kept before them.
            let mut kept: BTreeMap<String, Namespace> = BTreeMap::new();
            for prefix in prefixes {
                if overlapping(&kept, &prefix).is_none() {
                    kept.extend(namespaces(&[&prefix]));
                }
            }
            let scanned = kept.values().find(|n| topic.starts_with(n.prefix.as_str()));
            proptest::prop_assert_eq!(namespace_of(&kept, &topic), scanned);
        }
    }

    #[test]
    fn names_are_checked() {
        assert!(check_name("acme-1").is_ok());
        assert!(check_name("").is_err());
        assert!(check_name("a b").is_err());
        assert!(check_prefix("acme.").is_ok());
        assert!(check_prefix("acme/").is_err());
        assert!(check_principal("User:alice").is_ok());
        assert!(check_principal("alice").is_err());
        assert!(check_principal("User:").is_err());
    }
}
