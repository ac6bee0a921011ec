//! TLS for herald's listeners (Kafka and push): a rustls server config
//! built from PEM files, with mutual TLS when a client CA is given; the
//! client certificate's subject as Kafka writes it (RFC 2253), for the
//! principal mapping rules; and an accept that tells a plaintext client on
//! a TLS port from a failed handshake, so the log says which it was.
//!
//! The crypto provider is `ring`, named explicitly, so the process never
//! depends on which provider another crate enabled.

mod accept;
mod config;
mod subject;

pub use accept::{accept, looks_like_tls, AcceptError};
pub use config::{client_config, server_config, ClientAuth, TlsError, TlsFiles};
pub use rustls::ServerConfig;
pub use subject::client_subject;
pub use tokio_rustls::server::TlsStream;
pub use tokio_rustls::TlsAcceptor;
