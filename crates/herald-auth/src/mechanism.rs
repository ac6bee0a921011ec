//! The SASL mechanisms herald serves, on its Kafka listeners and on the
//! push listener alike, with their SASL names.

use crate::scram::ScramMechanism;

/// A SASL mechanism herald serves.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SaslMechanism {
    /// `PLAIN`, checked against the user's SCRAM credential.
    Plain,
    /// `SCRAM-SHA-256` or `SCRAM-SHA-512`.
    Scram(ScramMechanism),
    /// `OAUTHBEARER` (RFC 7628) with an access token this broker signed
    /// (see [`crate::access_token`]).
    OAuthBearer,
}

impl SaslMechanism {
    /// Every mechanism, in the order a listener offers them by default.
    pub const ALL: [SaslMechanism; 4] = [
        SaslMechanism::Scram(ScramMechanism::Sha512),
        SaslMechanism::Scram(ScramMechanism::Sha256),
        SaslMechanism::Plain,
        SaslMechanism::OAuthBearer,
    ];

    /// The SASL name.
    pub fn name(self) -> &'static str {
        match self {
            SaslMechanism::Plain => "PLAIN",
            SaslMechanism::Scram(m) => m.name(),
            SaslMechanism::OAuthBearer => "OAUTHBEARER",
        }
    }

    /// The mechanism a SASL name names (exactly, as Kafka compares them).
    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|m| m.name() == name)
    }
}

impl std::fmt::Display for SaslMechanism {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// A listener's security protocol, as Kafka names it (`security.protocol`).
/// The push listener takes the same four.
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

    /// Clients authenticate with SASL (or a token) before anything else.
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_compare_as_kafka_does() {
        for m in SaslMechanism::ALL {
            assert_eq!(SaslMechanism::from_name(m.name()), Some(m));
        }
        assert_eq!(SaslMechanism::from_name("scram-sha-512"), None);
        assert_eq!(
            SecurityProtocol::from_name("sasl_ssl"),
            Some(SecurityProtocol::SaslSsl)
        );
        assert!(SecurityProtocol::SaslSsl.uses_tls() && SecurityProtocol::SaslSsl.uses_sasl());
        assert!(!SecurityProtocol::Ssl.uses_sasl());
    }
}
