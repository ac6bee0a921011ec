//! Who a push client is, and what the broker's ACLs let it do: READ on a
//! topic to subscribe to it (and on the consumer group a named
//! subscription keeps its positions in), WRITE on a topic to publish to
//! it. The answers are cached per session, so the hot path does not look
//! at the ACLs again until they change.

use std::sync::Arc;

use herald_auth::{Caller, DecisionCache, Operation, ResourceType, SecurityState};
use herald_broker::{Broker, Security};
use herald_flow::{QuotaState, TenantRates};

/// The principal of a client nobody authenticated (Kafka's).
pub const ANONYMOUS: &str = "User:ANONYMOUS";

/// A client's principal, its cached ACL answers and its tenant's rates.
#[derive(Debug)]
pub struct Identity {
    cache: DecisionCache,
    /// Boxed, and made only once quotas exist: most identities never
    /// need it.
    tenant: Option<Box<TenantCache>>,
}

/// The tenant's rates as resolved against the quotas and tenants of the
/// time (compared by identity: both are replaced whole on change).
#[derive(Debug, Default)]
struct TenantCache {
    from: Option<(Arc<QuotaState>, Arc<SecurityState>)>,
    rates: Option<TenantRates>,
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
            tenant: None,
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

    /// The SLA rates of this client's tenant (`None`: no tenant, or no
    /// SLA), resolved again only when the quotas or the tenants changed.
    pub fn tenant_rates(&mut self, broker: &Broker) -> Option<&TenantRates> {
        if !broker.has_quotas() {
            return None;
        }
        let quotas = broker.quotas();
        let security = broker.security().state();
        let principal = self.cache.caller().principal.as_str();
        let cache = self.tenant.get_or_insert_with(Box::default);
        let same = cache
            .from
            .as_ref()
            .is_some_and(|(q, s)| Arc::ptr_eq(q, &quotas) && Arc::ptr_eq(s, &security));
        if !same {
            cache.rates = security
                .tenant_of_principal(principal)
                .and_then(|t| TenantRates::resolve(broker.quota_buckets(), &quotas, &t.name));
            cache.from = Some((quotas, security));
        }
        cache.rates.as_ref()
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
