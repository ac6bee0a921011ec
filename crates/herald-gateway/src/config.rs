//! Settings of the push listener.

use std::net::SocketAddr;

/// Default address of the push listener: next to the Kafka listener.
pub const PUSH_LISTEN_DEFAULT: &str = "127.0.0.1:9093";

/// Default largest client message, in bytes.
pub const MAX_MESSAGE_BYTES_DEFAULT: usize = 4 * 1024 * 1024;

/// Settings of the push listener.
#[derive(Debug, Clone)]
pub struct GatewayConfig {
    /// Where to listen.
    pub listen: SocketAddr,
    /// Most TCP connections open at once; more are closed on accept.
    pub max_connections: usize,
    /// Largest message a client may send (a publish's record, mostly).
    pub max_message_bytes: usize,
}
