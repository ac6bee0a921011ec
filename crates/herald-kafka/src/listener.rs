//! A Kafka listener as Kafka configures one: an address, what it
//! advertises, and its security protocol (PLAINTEXT, SSL, SASL_PLAINTEXT,
//! SASL_SSL) with the TLS config, SASL mechanisms and principal mapping
//! that protocol needs. A broker has one or several.

use std::net::SocketAddr;
use std::sync::Arc;

use herald_auth::PrincipalMapping;
pub use herald_auth::{SaslMechanism, SecurityProtocol};

/// One listener.
#[derive(Debug, Clone)]
pub struct ListenerConfig {
    /// Its name, as in Kafka's `listeners` (`PLAINTEXT`, `EXTERNAL`).
    pub name: String,
    /// Address to bind.
    pub listen: SocketAddr,
    /// Host clients of this listener are told to connect to.
    pub advertised_host: String,
    /// Port clients of this listener are told to connect to (0: the port
    /// bound).
    pub advertised_port: u16,
    /// Its security protocol.
    pub protocol: SecurityProtocol,
    /// The SASL mechanisms offered (SASL protocols only).
    pub sasl_mechanisms: Vec<SaslMechanism>,
    /// The TLS config (TLS protocols only).
    pub tls: Option<Arc<herald_tls::ServerConfig>>,
    /// How a client certificate's subject becomes a principal (SSL).
    pub principal_mapping: PrincipalMapping,
}

impl ListenerConfig {
    /// A PLAINTEXT listener named `PLAINTEXT` on `listen`, advertising the
    /// same address.
    pub fn plaintext(listen: SocketAddr) -> Self {
        Self {
            name: SecurityProtocol::Plaintext.name().to_owned(),
            listen,
            advertised_host: listen.ip().to_string(),
            advertised_port: listen.port(),
            protocol: SecurityProtocol::Plaintext,
            sasl_mechanisms: Vec::new(),
            tls: None,
            principal_mapping: PrincipalMapping::default(),
        }
    }

    /// The mechanisms' names, as SaslHandshake lists them.
    pub fn mechanism_names(&self) -> Vec<&'static str> {
        self.sasl_mechanisms.iter().map(|m| m.name()).collect()
    }
}
