//! A Kafka listener as Kafka configures one: an address, what it
//! advertises, and its security protocol (PLAINTEXT, SSL, SASL_PLAINTEXT,
//! SASL_SSL) with the TLS config, SASL mechanisms and principal mapping
//! that protocol needs. A broker has one or several.

use std::net::SocketAddr;
use std::sync::Arc;

use herald_auth::{PrincipalMapping, ScramMechanism};

/// Kafka's `security.protocol`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SecurityProtocol {
    /// Neither TLS nor SASL.
    Plaintext,
    /// TLS; the principal comes from the client certificate, if any.
    Ssl,
    /// SASL without TLS.
    SaslPlaintext,
    /// SASL over TLS.
    SaslSsl,
}

impl SecurityProtocol {
    /// Every protocol.
    pub const ALL: [SecurityProtocol; 4] = [
        SecurityProtocol::Plaintext,
        SecurityProtocol::Ssl,
        SecurityProtocol::SaslPlaintext,
        SecurityProtocol::SaslSsl,
    ];

    /// Kafka's name.
    pub fn name(self) -> &'static str {
        match self {
            SecurityProtocol::Plaintext => "PLAINTEXT",
            SecurityProtocol::Ssl => "SSL",
            SecurityProtocol::SaslPlaintext => "SASL_PLAINTEXT",
            SecurityProtocol::SaslSsl => "SASL_SSL",
        }
    }

    /// The protocol Kafka's name (any case) names.
    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL
            .into_iter()
            .find(|p| p.name().eq_ignore_ascii_case(name))
    }

    /// Connections start with a TLS handshake.
    pub fn uses_tls(self) -> bool {
        matches!(self, SecurityProtocol::Ssl | SecurityProtocol::SaslSsl)
    }

    /// Clients authenticate with SASL before anything but ApiVersions.
    pub fn uses_sasl(self) -> bool {
        matches!(
            self,
            SecurityProtocol::SaslPlaintext | SecurityProtocol::SaslSsl
        )
    }
}

impl std::fmt::Display for SecurityProtocol {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// A SASL mechanism herald serves.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SaslMechanism {
    /// `PLAIN`, checked against the user's SCRAM credential.
    Plain,
    /// `SCRAM-SHA-256` or `SCRAM-SHA-512`.
    Scram(ScramMechanism),
}

impl SaslMechanism {
    /// Every mechanism, in the order a listener offers them by default.
    pub const ALL: [SaslMechanism; 3] = [
        SaslMechanism::Scram(ScramMechanism::Sha512),
        SaslMechanism::Scram(ScramMechanism::Sha256),
        SaslMechanism::Plain,
    ];

    /// The SASL name.
    pub fn name(self) -> &'static str {
        match self {
            SaslMechanism::Plain => "PLAIN",
            SaslMechanism::Scram(m) => m.name(),
        }
    }

    /// The mechanism a SASL name names (exactly, as Kafka compares them).
    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|m| m.name() == name)
    }
}

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
