//! Who a push client is, and what the broker's ACLs let it do: READ on a
//! topic to subscribe to it (and on the consumer group a named
//! subscription keeps its positions in), WRITE on a topic to publish to
//! it. The answers are cached per session, so the hot path does not look
//! at the ACLs again until they change.

use herald_auth::{Caller, DecisionCache, Operation, ResourceType};
use herald_broker::Security;

/// The principal of a client nobody authenticated (Kafka's).
pub const ANONYMOUS: &str = "User:ANONYMOUS";

/// A client's principal and its cached ACL answers.
#[derive(Debug)]
pub struct Identity {
    cache: DecisionCache,
}

impl Identity {
    /// `principal` (`User:alice`) connecting from `host` (its IP address,
    /// as ACLs name hosts).
    pub fn new(principal: impl Into<String>, host: impl Into<String>) -> Self {
        Self {
            cache: DecisionCache::new(Caller {
                principal: principal.into(),
                host: host.into(),
            }),
        }
    }

    /// A client that did not authenticate, from `host`.
    pub fn anonymous(host: impl Into<String>) -> Self {
        Self::new(ANONYMOUS, host)
    }

    /// The principal.
    pub fn principal(&self) -> &str {
        &self.cache.caller().principal
    }

    /// True if this client may do `operation` on `name` of
    /// `resource_type`: always when the broker runs without authorization.
    pub fn may(
        &mut self,
        security: &Security,
        operation: Operation,
        resource_type: ResourceType,
        name: &str,
    ) -> bool {
        !security.config().authorization
            || security.authorizer().authorize_cached(
                &mut self.cache,
                operation,
                resource_type,
                name,
            )
    }

    /// Whether this client may read `topic`: the refusal if not.
    pub(crate) fn may_read(&mut self, security: &Security, topic: &str) -> Result<(), String> {
        if self.may(security, Operation::Read, ResourceType::Topic, topic) {
            Ok(())
        } else {
            Err(format!("{} may not read topic {topic}", self.principal()))
        }
    }
}
