//! What one connection knows of its client: the listener it came in on,
//! its address, who it is (authenticated once, by TLS or SASL), the SASL
//! exchange under way, and its cached ACL answers. A connection answers
//! its requests one at a time, so the locks here are never contended.

use std::net::SocketAddr;
use std::sync::Arc;

use herald_auth::{Caller, DecisionCache, Login, Operation, ResourceType};
use herald_broker::Security;
use parking_lot::Mutex;

use crate::listener::{ListenerConfig, SaslMechanism};
use crate::quota::ConnectionQuotas;
use herald_broker::TenantConnection;

/// The principal of a client nobody authenticated (Kafka's).
pub const ANONYMOUS: &str = "User:ANONYMOUS";

/// Where a connection is in authenticating.
#[derive(Debug)]
enum Auth {
    /// A SASL listener's client before it authenticated: the exchange
    /// SaslHandshake started (taken out while a step runs).
    Pending {
        mechanism: Option<SaslMechanism>,
        login: Option<Login>,
    },
    /// Authenticated (or on a listener without SASL).
    Known(DecisionCache),
    /// Authentication failed: the connection closes after its answer.
    Failed,
}

/// One connection's client.
#[derive(Debug)]
pub struct Session {
    listener: Arc<ListenerConfig>,
    peer: Option<SocketAddr>,
    auth: Mutex<Auth>,
    quotas: ConnectionQuotas,
    /// This connection, counted against its tenant's `max_connections`
    /// while it lives.
    tenant_connection: Mutex<Option<TenantConnection>>,
}

impl Session {
    /// A client on `listener` from `peer`. `principal` is who TLS says it
    /// is (a mapped certificate subject), if anyone; on a SASL listener
    /// the client still authenticates with SASL.
    pub fn new(
        listener: Arc<ListenerConfig>,
        peer: Option<SocketAddr>,
        principal: Option<String>,
    ) -> Self {
        let auth = if listener.protocol.uses_sasl() {
            Auth::Pending {
                mechanism: None,
                login: None,
            }
        } else {
            Auth::Known(DecisionCache::new(Caller {
                principal: principal.unwrap_or_else(|| ANONYMOUS.to_owned()),
                host: host_of(peer),
            }))
        };
        Self {
            listener,
            peer,
            auth: Mutex::new(auth),
            quotas: ConnectionQuotas::default(),
            tenant_connection: Mutex::new(None),
        }
    }

    /// The listener the client came in on.
    pub fn listener(&self) -> &ListenerConfig {
        &self.listener
    }

    /// The client's address, when known.
    pub fn peer(&self) -> Option<SocketAddr> {
        self.peer
    }

    /// True once the client may send any request.
    pub fn is_authenticated(&self) -> bool {
        matches!(*self.auth.lock(), Auth::Known(_))
    }

    /// True once authentication failed: nothing more is answered.
    pub fn has_failed(&self) -> bool {
        matches!(*self.auth.lock(), Auth::Failed)
    }

    /// The client's principal, once known.
    pub fn principal(&self) -> Option<String> {
        match &*self.auth.lock() {
            Auth::Known(cache) => Some(cache.caller().principal.clone()),
            _ => None,
        }
    }

    /// The mechanism SaslHandshake chose, while authentication is pending.
    pub(crate) fn chosen_mechanism(&self) -> Option<SaslMechanism> {
        match &*self.auth.lock() {
            Auth::Pending { mechanism, .. } => *mechanism,
            _ => None,
        }
    }

    /// Records the mechanism SaslHandshake chose. False when a handshake
    /// is not expected now (on a listener without SASL, or after one).
    pub(crate) fn choose_mechanism(&self, chosen: SaslMechanism) -> bool {
        match &mut *self.auth.lock() {
            Auth::Pending { mechanism, login } if mechanism.is_none() => {
                *mechanism = Some(chosen);
                *login = Some(Login::new(chosen));
                true
            }
            _ => false,
        }
    }

    /// Takes the exchange under way out of the session, to run its next
    /// step (perhaps on another thread); [`Self::put_back`] returns it.
    pub(crate) fn take_login(&self) -> Option<Login> {
        match &mut *self.auth.lock() {
            Auth::Pending { login, .. } => login.take(),
            _ => None,
        }
    }

    /// Returns an exchange that goes on after its step.
    pub(crate) fn put_back(&self, exchange: Login) {
        if let Auth::Pending { login, .. } = &mut *self.auth.lock() {
            *login = Some(exchange);
        }
    }

    /// The client authenticated as `user`.
    pub(crate) fn authenticated(&self, user: &str) {
        *self.auth.lock() = Auth::Known(DecisionCache::new(Caller {
            principal: format!("User:{user}"),
            host: host_of(self.peer),
        }));
    }

    /// Keeps the connection counted against its tenant until it closes.
    pub(crate) fn hold_tenant_connection(&self, slot: Option<TenantConnection>) {
        *self.tenant_connection.lock() = slot;
    }

    /// The client failed to authenticate.
    pub(crate) fn failed(&self) {
        *self.auth.lock() = Auth::Failed;
    }

    /// True if the client may do `operation` on `name` of
    /// `resource_type`: always when authorization is off; never before it
    /// authenticated; otherwise the ACLs decide, through this connection's
    /// cache.
    pub fn authorize(
        &self,
        security: &Security,
        operation: Operation,
        resource_type: ResourceType,
        name: &str,
    ) -> bool {
        if !security.config().authorization {
            return true;
        }
        match &mut *self.auth.lock() {
            Auth::Known(cache) => {
                security
                    .authorizer()
                    .authorize_cached(cache, operation, resource_type, name)
            }
            _ => false,
        }
    }

    /// True if the client may do `operation` on some resource of
    /// `resource_type` (see [`herald_auth::Authorizer::authorize_any`]).
    pub fn authorize_any(
        &self,
        security: &Security,
        operation: Operation,
        resource_type: ResourceType,
    ) -> bool {
        if !security.config().authorization {
            return true;
        }
        match &*self.auth.lock() {
            Auth::Known(cache) => {
                security
                    .authorizer()
                    .authorize_any(cache.caller(), operation, resource_type)
            }
            _ => false,
        }
    }
}

impl Session {
    /// What the connection is charged to, and until when it is paused.
    pub fn quotas(&self) -> &ConnectionQuotas {
        &self.quotas
    }
}

/// The host an ACL names: the client's IP address.
fn host_of(peer: Option<SocketAddr>) -> String {
    peer.map(|p| p.ip().to_string()).unwrap_or_default()
}
