//! SaslAuthenticate: one step of the SASL exchange SaslHandshake chose
//! ([`herald_auth::Login`]). PLAIN takes one step, SCRAM two, OAUTHBEARER
//! one (two when the token is refused: the error challenge, then the
//! client's acknowledgement). A failure is answered with Kafka's
//! SASL_AUTHENTICATION_FAILED and the same message whatever went wrong (a
//! wrong password, an unknown user, a malformed message), after a delay
//! that doubles with each recent failure of the same user from the same
//! address; the connection then closes.

use bytes::Bytes;
use herald_auth::LoginStep;
use kafka_protocol::messages::{SaslAuthenticateRequest, SaslAuthenticateResponse};
use kafka_protocol::ResponseError;

use super::{wire_str, Context};
use crate::error_code;
use crate::listener::SaslMechanism;
use crate::session::Session;

/// Answers a SaslAuthenticate request.
pub async fn handle(
    ctx: &Context,
    session: &Session,
    request: SaslAuthenticateRequest,
) -> SaslAuthenticateResponse {
    let illegal = |message: &str| {
        SaslAuthenticateResponse::default()
            .with_error_code(error_code::code(ResponseError::IllegalSaslState))
            .with_error_message(Some(wire_str(message)))
    };
    if !session.listener().protocol.uses_sasl() || session.is_authenticated() {
        return illegal("SaslAuthenticate is not expected now");
    }
    let Some(mechanism) = session.chosen_mechanism() else {
        return illegal("SaslAuthenticate before SaslHandshake");
    };
    let Some(login) = session.take_login() else {
        return illegal("no SASL exchange under way");
    };
    let (step, login) = ctx
        .broker
        .security()
        .login_step(login, request.auth_bytes.to_vec())
        .await;
    match step {
        LoginStep::Continue(answer)
        | LoginStep::Rejected {
            challenge: answer, ..
        } => {
            if let Some(login) = login {
                session.put_back(login);
            }
            SaslAuthenticateResponse::default().with_auth_bytes(Bytes::from(answer))
        }
        LoginStep::Done { user, last } => {
            if let Some(peer) = session.peer() {
                ctx.broker.security().login_succeeded(peer.ip(), &user);
            }
            let principal = format!("User:{user}");
            match ctx.broker.admit_tenant_connection(&principal) {
                Ok(slot) => session.hold_tenant_connection(slot),
                Err(over) => {
                    tracing::info!(peer = ?session.peer(), user, reason = %over, "connection refused after authentication");
                    session.failed();
                    return SaslAuthenticateResponse::default()
                        .with_error_code(error_code::code(ResponseError::SaslAuthenticationFailed))
                        .with_error_message(Some(wire_str(over.to_string())));
                }
            }
            tracing::info!(peer = ?session.peer(), user, mechanism = mechanism.name(), listener = %session.listener().name, "authenticated");
            session.authenticated(&user);
            SaslAuthenticateResponse::default().with_auth_bytes(Bytes::from(last))
        }
        LoginStep::Failed { user, reason } => {
            session.failed();
            let user = user.unwrap_or_default();
            tracing::info!(peer = ?session.peer(), %user, mechanism = mechanism.name(), %reason, "SASL authentication failed");
            if let Some(peer) = session.peer() {
                let delay = ctx.broker.security().login_failed(peer.ip(), &user);
                tokio::time::sleep(delay).await;
            }
            SaslAuthenticateResponse::default()
                .with_error_code(error_code::code(ResponseError::SaslAuthenticationFailed))
                .with_error_message(Some(wire_str(failure_message(mechanism))))
        }
    }
}

/// What Kafka tells a client whose authentication failed, whatever the
/// reason.
fn failure_message(mechanism: SaslMechanism) -> String {
    match mechanism {
        SaslMechanism::Plain => "Authentication failed: Invalid username or password".to_owned(),
        SaslMechanism::Scram(m) => format!(
            "Authentication failed during authentication due to invalid credentials with SASL mechanism {m}"
        ),
        SaslMechanism::OAuthBearer => {
            String::from_utf8_lossy(herald_auth::oauthbearer::INVALID_TOKEN_CHALLENGE).into_owned()
        }
    }
}

/// How the guard walks this API's request body before `kafka-protocol`
/// decodes it, transcribed from Kafka's message definition.
pub(crate) mod layout {
    use crate::codec::guard::Ty::*;
    use crate::codec::guard::{all, Schema};

    pub(crate) const SCHEMA: Schema = Schema {
        flexible_from: 2,
        fields: &[all(Bytes)],
    };
}
