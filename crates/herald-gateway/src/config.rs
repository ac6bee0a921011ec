//! Settings of the push listener.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use herald_auth::{PrincipalMapping, SaslMechanism, SecurityProtocol};

/// Default address of the push listener: next to the Kafka listener.
pub const PUSH_LISTEN_DEFAULT: &str = "127.0.0.1:9093";

/// Default largest client message, in bytes.
pub const MAX_MESSAGE_BYTES_DEFAULT: usize = 4 * 1024 * 1024;

/// Default lifetime of an access token `POST /v1/token` issues.
pub const TOKEN_LIFETIME_DEFAULT: Duration = Duration::from_secs(3600);

/// Settings of the push listener.
#[derive(Debug, Clone)]
pub struct GatewayConfig {
    /// Where to listen.
    pub listen: SocketAddr,
    /// Most TCP connections open at once; more are closed on accept.
    pub max_connections: usize,
    /// Largest message a client may send (a publish's record, mostly).
    pub max_message_bytes: usize,
    /// Its security protocol: with SASL, every client logs in (in its
    /// session's hello, or with an access token); with TLS, connections
    /// start with a TLS handshake.
    pub protocol: SecurityProtocol,
    /// The mechanisms a hello may log in with.
    pub sasl_mechanisms: Vec<SaslMechanism>,
    /// The TLS config (TLS protocols only).
    pub tls: Option<Arc<herald_tls::ServerConfig>>,
    /// How a client certificate's subject becomes a principal (SSL).
    pub principal_mapping: PrincipalMapping,
    /// Longest lifetime of an access token `POST /v1/token` issues (and its
    /// default).
    pub token_lifetime: Duration,
}

impl GatewayConfig {
    /// A plaintext listener on `listen` with the default limits.
    pub fn plaintext(listen: SocketAddr, max_connections: usize) -> Self {
        Self {
            listen,
            max_connections,
            max_message_bytes: MAX_MESSAGE_BYTES_DEFAULT,
            protocol: SecurityProtocol::Plaintext,
            sasl_mechanisms: SaslMechanism::ALL.to_vec(),
            tls: None,
            principal_mapping: PrincipalMapping::default(),
            token_lifetime: TOKEN_LIFETIME_DEFAULT,
        }
    }
}
