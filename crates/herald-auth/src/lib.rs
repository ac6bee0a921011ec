//! Who may do what in herald, without I/O: SASL credentials and
//! exchanges (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512, OAUTHBEARER with tokens the
//! broker signs), Kafka's ACLs and the
//! authorizer that applies them, and tenants with their namespaces.
//! The front ends (Kafka, push) call into this crate; the broker keeps its
//! state durably in its metadata.

pub mod access_token;
pub mod acl;
pub mod authorizer;
pub mod login;
pub mod login_throttle;
pub mod mechanism;
pub mod oauthbearer;
pub mod plain;
pub mod principal_mapping;
pub mod scram;
pub mod scram_messages;
pub mod state;
pub mod tenant;

pub use access_token::{TokenClaims, TokenError, TokenKey};
pub use acl::{AclBinding, AclError, AclFilter, Operation, PatternType, Permission, ResourceType};
pub use authorizer::{AclIndex, Authorizer, Caller, DecisionCache};
pub use login::{Login, LoginContext, LoginStep};
pub use login_throttle::LoginThrottle;
pub use mechanism::{SaslMechanism, SecurityProtocol};
pub use principal_mapping::{MappingError, PrincipalMapping};
pub use scram::{
    CredentialError, ScramClient, ScramCredential, ScramError, ScramMechanism, ScramServer,
};
pub use state::{Applied, SecurityCommand, SecurityError, SecurityState, UserCredentials};
pub use tenant::{Namespace, Tenant, TenantError};
