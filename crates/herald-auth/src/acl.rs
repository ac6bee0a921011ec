//! Kafka's ACL model, with Kafka's numeric codes and names: bindings
//! (who may or may not do what to which resources) and the filters that
//! DescribeAcls and DeleteAcls match them with.

use serde::{Deserialize, Serialize};

/// The resource name of the cluster, as Kafka names it.
pub const CLUSTER_NAME: &str = "kafka-cluster";
/// A literal resource name or principal name that matches every one.
pub const WILDCARD: &str = "*";
/// The principal of every user.
pub const WILDCARD_PRINCIPAL: &str = "User:*";

macro_rules! kafka_enum {
    ($(#[$doc:meta])* $name:ident { $($(#[$vdoc:meta])* $variant:ident = $code:literal, $text:literal;)* }) => {
        $(#[$doc])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
        pub enum $name {
            $($(#[$vdoc])* #[serde(rename = $text)] $variant,)*
        }

        impl $name {
            /// Kafka's code.
            pub fn code(self) -> i8 {
                match self { $($name::$variant => $code,)* }
            }

            /// The value of a Kafka code, if it names one.
            pub fn from_code(code: i8) -> Option<Self> {
                match code { $($code => Some($name::$variant),)* _ => None }
            }

            /// Kafka's name (as its tools print it).
            pub fn name(self) -> &'static str {
                match self { $($name::$variant => $text,)* }
            }

            /// The value Kafka's name (any case) names.
            pub fn from_name(name: &str) -> Option<Self> {
                [$($name::$variant,)*].into_iter().find(|v| v.name().eq_ignore_ascii_case(name))
            }
        }

        impl std::fmt::Display for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(self.name())
            }
        }
    };
}

kafka_enum! {
    /// What kind of thing an ACL is about.
    ResourceType {
        /// In filters only: any type.
        Any = 1, "ANY";
        /// A topic.
        Topic = 2, "TOPIC";
        /// A consumer group.
        Group = 3, "GROUP";
        /// The cluster (named `kafka-cluster`).
        Cluster = 4, "CLUSTER";
        /// A transactional id.
        TransactionalId = 5, "TRANSACTIONAL_ID";
        /// A delegation token.
        DelegationToken = 6, "DELEGATION_TOKEN";
        /// A user (for acting on behalf of one).
        User = 7, "USER";
    }
}

kafka_enum! {
    /// How an ACL's resource name matches.
    PatternType {
        /// In filters only: any pattern type, the name as given.
        Any = 1, "ANY";
        /// In filters only: every binding that applies to the name
        /// (literal, wildcard and prefixes of it).
        Match = 2, "MATCH";
        /// The name itself (or `*`, every name).
        Literal = 3, "LITERAL";
        /// Every name that starts with it.
        Prefixed = 4, "PREFIXED";
    }
}

kafka_enum! {
    /// What an ACL allows or denies.
    Operation {
        /// In filters only: any operation.
        Any = 1, "ANY";
        /// Every operation.
        All = 2, "ALL";
        /// Consume, fetch offsets, join a group.
        Read = 3, "READ";
        /// Produce.
        Write = 4, "WRITE";
        /// Create topics.
        Create = 5, "CREATE";
        /// Delete topics, records, groups.
        Delete = 6, "DELETE";
        /// Create partitions, alter ACLs.
        Alter = 7, "ALTER";
        /// Metadata, list and describe.
        Describe = 8, "DESCRIBE";
        /// Broker-to-broker requests.
        ClusterAction = 9, "CLUSTER_ACTION";
        /// Describe configs.
        DescribeConfigs = 10, "DESCRIBE_CONFIGS";
        /// Alter configs.
        AlterConfigs = 11, "ALTER_CONFIGS";
        /// Idempotent produce.
        IdempotentWrite = 12, "IDEMPOTENT_WRITE";
        /// Create delegation tokens.
        CreateTokens = 13, "CREATE_TOKENS";
        /// Describe delegation tokens.
        DescribeTokens = 14, "DESCRIBE_TOKENS";
        /// Two-phase commit of transactions.
        TwoPhaseCommit = 15, "TWO_PHASE_COMMIT";
    }
}

kafka_enum! {
    /// Whether an ACL allows or denies.
    Permission {
        /// In filters only: either.
        Any = 1, "ANY";
        /// Denies, over any allow.
        Deny = 2, "DENY";
        /// Allows, unless denied.
        Allow = 3, "ALLOW";
    }
}

/// One ACL: `principal` is `permission`ed `operation` on the resources
/// `pattern_type` `name` of `resource_type`, from `host`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct AclBinding {
    /// The kind of resource.
    pub resource_type: ResourceType,
    /// The resource name, prefix or `*`.
    pub name: String,
    /// How the name matches.
    pub pattern_type: PatternType,
    /// `Type:name`, as `User:alice` or `User:*`.
    pub principal: String,
    /// The client's address, or `*`.
    pub host: String,
    /// The operation.
    pub operation: Operation,
    /// Allow or deny.
    pub permission: Permission,
}

/// Why an ACL was refused (Kafka answers INVALID_REQUEST with the text).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AclError {
    /// A code Kafka does not define.
    #[error("unknown {what} code {code}")]
    UnknownCode {
        /// What the code is of.
        what: &'static str,
        /// The code.
        code: i8,
    },
    /// A filter-only value in a binding.
    #[error("invalid {what} {value} in an ACL binding")]
    FilterOnly {
        /// What the value is of.
        what: &'static str,
        /// The value.
        value: &'static str,
    },
    /// No resource name.
    #[error("resource name should not be empty")]
    EmptyName,
    /// A principal without its type.
    #[error("could not parse principal from `{0}` (no colon is present separating the principal type from the principal name)")]
    Principal(String),
    /// The cluster under another name.
    #[error("the cluster resource is named {CLUSTER_NAME}, not {0}")]
    ClusterName(String),
}

impl AclBinding {
    /// Checks a binding as CreateAcls does.
    pub fn validate(&self) -> Result<(), AclError> {
        if self.resource_type == ResourceType::Any {
            return Err(AclError::FilterOnly {
                what: "resource type",
                value: "ANY",
            });
        }
        if !matches!(
            self.pattern_type,
            PatternType::Literal | PatternType::Prefixed
        ) {
            return Err(AclError::FilterOnly {
                what: "pattern type",
                value: self.pattern_type.name(),
            });
        }
        if self.operation == Operation::Any {
            return Err(AclError::FilterOnly {
                what: "operation",
                value: "ANY",
            });
        }
        if self.permission == Permission::Any {
            return Err(AclError::FilterOnly {
                what: "permission type",
                value: "ANY",
            });
        }
        if self.name.is_empty() {
            return Err(AclError::EmptyName);
        }
        if !self.principal.contains(':') {
            return Err(AclError::Principal(self.principal.clone()));
        }
        if self.resource_type == ResourceType::Cluster && self.name != CLUSTER_NAME {
            return Err(AclError::ClusterName(self.name.clone()));
        }
        Ok(())
    }

    /// True if this binding applies to `name` (of its resource type).
    pub fn applies_to(&self, name: &str) -> bool {
        match self.pattern_type {
            PatternType::Literal => self.name == name || self.name == WILDCARD,
            PatternType::Prefixed => name.starts_with(&self.name),
            PatternType::Any | PatternType::Match => false,
        }
    }
}

/// What DescribeAcls and DeleteAcls select: each `None` (or `Any`)
/// matches everything.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AclFilter {
    /// `Any`, or one type.
    pub resource_type: ResourceType,
    /// A name, or every name.
    pub name: Option<String>,
    /// `Any` (the name as given, any pattern type), `Match` (every
    /// binding that applies to the name), `Literal` or `Prefixed`.
    pub pattern_type: PatternType,
    /// A principal, or every one.
    pub principal: Option<String>,
    /// A host, or every one.
    pub host: Option<String>,
    /// `Any`, or one operation.
    pub operation: Operation,
    /// `Any`, or one permission.
    pub permission: Permission,
}

impl AclFilter {
    /// The filter that matches every binding.
    pub fn everything() -> Self {
        Self {
            resource_type: ResourceType::Any,
            name: None,
            pattern_type: PatternType::Any,
            principal: None,
            host: None,
            operation: Operation::Any,
            permission: Permission::Any,
        }
    }

    /// True if `binding` is selected.
    pub fn matches(&self, binding: &AclBinding) -> bool {
        let type_ok =
            self.resource_type == ResourceType::Any || self.resource_type == binding.resource_type;
        let pattern_ok = match (&self.name, self.pattern_type) {
            (None, PatternType::Any | PatternType::Match) => true,
            (None, pattern) => pattern == binding.pattern_type,
            (Some(name), PatternType::Any) => *name == binding.name,
            (Some(name), PatternType::Match) => binding.applies_to(name),
            (Some(name), pattern) => pattern == binding.pattern_type && *name == binding.name,
        };
        let principal_ok = self
            .principal
            .as_ref()
            .is_none_or(|p| *p == binding.principal);
        let host_ok = self.host.as_ref().is_none_or(|h| *h == binding.host);
        let operation_ok = self.operation == Operation::Any || self.operation == binding.operation;
        let permission_ok =
            self.permission == Permission::Any || self.permission == binding.permission;
        type_ok && pattern_ok && principal_ok && host_ok && operation_ok && permission_ok
    }
}

/// What the tests of this crate build bindings with.
#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A binding from any host.
    pub(crate) fn binding(
        resource_type: ResourceType,
        name: &str,
        pattern_type: PatternType,
        principal: &str,
        operation: Operation,
        permission: Permission,
    ) -> AclBinding {
        AclBinding {
            resource_type,
            name: name.into(),
            pattern_type,
            principal: principal.into(),
            host: WILDCARD.into(),
            operation,
            permission,
        }
    }

    #[test]
    fn codes_and_names_are_kafkas() {
        assert_eq!(ResourceType::Topic.code(), 2);
        assert_eq!(
            ResourceType::from_code(5),
            Some(ResourceType::TransactionalId)
        );
        assert_eq!(ResourceType::from_code(0), None);
        assert_eq!(PatternType::Prefixed.code(), 4);
        assert_eq!(Operation::IdempotentWrite.code(), 12);
        assert_eq!(
            Operation::from_name("describe_configs"),
            Some(Operation::DescribeConfigs)
        );
        assert_eq!(Permission::Allow.code(), 3);
        assert_eq!(
            serde_json::to_string(&Operation::AlterConfigs).expect("json"),
            "\"ALTER_CONFIGS\""
        );
    }

    #[test]
    fn bindings_are_validated_as_create_acls_does() {
        use Operation::*;
        let ok = binding(
            ResourceType::Topic,
            "t",
            PatternType::Literal,
            "User:a",
            Read,
            Permission::Allow,
        );
        assert_eq!(ok.validate(), Ok(()));
        let mut bad = ok.clone();
        bad.pattern_type = PatternType::Match;
        assert!(matches!(bad.validate(), Err(AclError::FilterOnly { .. })));
        let mut bad = ok.clone();
        bad.operation = Any;
        assert!(bad.validate().is_err());
        let mut bad = ok.clone();
        bad.name.clear();
        assert_eq!(bad.validate(), Err(AclError::EmptyName));
        let mut bad = ok.clone();
        bad.principal = "alice".into();
        assert!(matches!(bad.validate(), Err(AclError::Principal(_))));
        let mut bad = ok;
        bad.resource_type = ResourceType::Cluster;
        assert!(matches!(bad.validate(), Err(AclError::ClusterName(_))));
    }

    #[test]
    fn filters_select_as_kafka_does() {
        use Operation::*;
        let literal = binding(
            ResourceType::Topic,
            "orders",
            PatternType::Literal,
            "User:a",
            Read,
            Permission::Allow,
        );
        let wildcard = binding(
            ResourceType::Topic,
            "*",
            PatternType::Literal,
            "User:b",
            Write,
            Permission::Deny,
        );
        let prefixed = binding(
            ResourceType::Topic,
            "ord",
            PatternType::Prefixed,
            "User:a",
            All,
            Permission::Allow,
        );
        let group = binding(
            ResourceType::Group,
            "orders",
            PatternType::Literal,
            "User:a",
            Read,
            Permission::Allow,
        );
        let all = [&literal, &wildcard, &prefixed, &group];
        let select = |filter: &AclFilter| -> Vec<usize> {
            all.iter()
                .enumerate()
                .filter(|(_, b)| filter.matches(b))
                .map(|(i, _)| i)
                .collect()
        };
        assert_eq!(select(&AclFilter::everything()), [0, 1, 2, 3]);
        let mut f = AclFilter::everything();
        f.resource_type = ResourceType::Topic;
        f.name = Some("orders".into());
        f.pattern_type = PatternType::Match;
        assert_eq!(
            select(&f),
            [0, 1, 2],
            "literal, wildcard and prefix all apply"
        );
        f.pattern_type = PatternType::Any;
        assert_eq!(select(&f), [0], "ANY: the name as given");
        f.name = Some("ord".into());
        f.pattern_type = PatternType::Prefixed;
        assert_eq!(select(&f), [2]);
        let mut f = AclFilter::everything();
        f.principal = Some("User:a".into());
        f.permission = Permission::Allow;
        f.operation = Read;
        assert_eq!(select(&f), [0, 3]);
    }
}
