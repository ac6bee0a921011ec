//! SaslHandshake: the client names the SASL mechanism it will
//! authenticate with; the answer lists the listener's mechanisms. Only
//! version 1 is served (the exchange then goes in SaslAuthenticate
//! requests); version 0's raw tokens are refused by closing the
//! connection, as for any version not served.

use kafka_protocol::messages::{SaslHandshakeRequest, SaslHandshakeResponse};
use kafka_protocol::ResponseError;

use super::wire_str;
use crate::error_code;
use crate::listener::SaslMechanism;
use crate::session::Session;

/// Answers a SaslHandshake request.
pub fn handle(session: &Session, request: SaslHandshakeRequest) -> SaslHandshakeResponse {
    let listener = session.listener();
    let offered: Vec<_> = listener
        .mechanism_names()
        .into_iter()
        .map(wire_str)
        .collect();
    let response = SaslHandshakeResponse::default().with_mechanisms(offered);
    if !listener.protocol.uses_sasl() {
        return response.with_error_code(error_code::code(ResponseError::IllegalSaslState));
    }
    let chosen = SaslMechanism::from_name(&request.mechanism)
        .filter(|m| listener.sasl_mechanisms.contains(m));
    let Some(chosen) = chosen else {
        tracing::info!(peer = ?session.peer(), mechanism = %request.mechanism, "SASL mechanism not offered on this listener");
        return response.with_error_code(error_code::code(ResponseError::UnsupportedSaslMechanism));
    };
    if !session.choose_mechanism(chosen) {
        return response.with_error_code(error_code::code(ResponseError::IllegalSaslState));
    }
    response
}

/// How the guard walks this API's request body before `kafka-protocol`
/// decodes it, transcribed from Kafka's message definition.
pub(crate) mod layout {
    use crate::codec::guard::Ty::*;
    use crate::codec::guard::{all, Schema};

    pub(crate) const SCHEMA: Schema = Schema {
        // SaslHandshake has no flexible version.
        flexible_from: i16::MAX,
        fields: &[all(Str)],
    };
}
