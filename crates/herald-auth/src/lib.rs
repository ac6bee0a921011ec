//! Who may do what in herald, without I/O: SASL credentials and
//! exchanges (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512), Kafka's ACLs and the
//! authorizer that applies them, and tenants with their namespaces.
//! The front ends (Kafka, push) call into this crate; the broker keeps its
//! state durably in its metadata.

pub mod acl;
pub mod authorizer;
pub mod login_throttle;
pub mod plain;
pub mod principal_mapping;
pub mod scram;
pub mod scram_messages;
pub mod state;
pub mod tenant;

pub use acl::{AclBinding, AclError, AclFilter, Operation, PatternType, Permission, ResourceType};
pub use authorizer::{AclIndex, Authorizer, Caller, DecisionCache};
pub use login_throttle::LoginThrottle;
pub use principal_mapping::{MappingError, PrincipalMapping};
pub use scram::{
    CredentialError, ScramClient, ScramCredential, ScramError, ScramMechanism, ScramServer,
};
pub use state::{Applied, SecurityCommand, SecurityError, SecurityState, UserCredentials};
pub use tenant::{Namespace, Tenant, TenantError};
