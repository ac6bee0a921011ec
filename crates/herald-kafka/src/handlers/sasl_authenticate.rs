//! SaslAuthenticate: one step of the SASL exchange SaslHandshake chose.
//! PLAIN takes one step, SCRAM two. A failure is answered with Kafka's
//! SASL_AUTHENTICATION_FAILED and the same message whatever went wrong (a
//! wrong password, an unknown user, a malformed message), after a delay
//! that doubles with each recent failure of the same user from the same
//! address; the connection then closes.

use std::sync::Arc;
use std::time::Instant;

use bytes::Bytes;
use herald_auth::{plain, ScramError};
use kafka_protocol::messages::{SaslAuthenticateRequest, SaslAuthenticateResponse};
use kafka_protocol::ResponseError;

use super::{wire_str, Context};
use crate::error_code;
use crate::listener::SaslMechanism;
use crate::session::Session;

/// What one step came to.
enum Step {
    /// Send these bytes; the exchange goes on.
    Continue(Vec<u8>),
    /// Authenticated as this user; send these bytes (SCRAM's proof of the
    /// server) last.
    Done(String, Vec<u8>),
    /// Refused, for the user the message named (if it named one); the
    /// reason is for the log only.
    Failed(Option<String>, String),
}

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
    let security = ctx.broker.security();
    let state = security.state();
    let secret = security.secret();
    let bytes = &request.auth_bytes;
    let step = match mechanism {
        SaslMechanism::Plain => {
            // Checking a password costs thousands of PBKDF2 rounds
            // (milliseconds): off the connections' threads.
            let (message, state, secret) = (bytes.clone(), Arc::clone(&state), secret.to_vec());
            let checked = tokio::task::spawn_blocking(move || {
                plain::authenticate(
                    &message,
                    |user| state.any_scram(user).map(|(m, c)| (m, c.clone())),
                    &secret,
                )
            })
            .await;
            match checked {
                Ok(Ok(user)) => Step::Done(user, Vec::new()),
                Ok(Err(e)) => Step::Failed(plain::parse(bytes).ok().map(|p| p.user), e.to_string()),
                Err(e) => Step::Failed(None, format!("the password check did not finish: {e}")),
            }
        }
        SaslMechanism::Scram(m) => session
            .with_scram(|server| {
                let first = server.awaits_first();
                let named = server.user().map(str::to_owned);
                if first {
                    server
                        .client_first(bytes, |user| state.scram(user, m).cloned(), secret)
                        .map(Step::Continue)
                } else {
                    server
                        .client_final(bytes)
                        .map(|(last, user)| Step::Done(user, last))
                }
                .unwrap_or_else(|e: ScramError| {
                    let user = named.or_else(|| {
                        herald_auth::scram_messages::parse_client_first(bytes)
                            .ok()
                            .map(|f| f.user)
                    });
                    Step::Failed(user, e.to_string())
                })
            })
            .unwrap_or_else(|| Step::Failed(None, "no SCRAM exchange under way".into())),
    };
    match step {
        Step::Continue(answer) => {
            SaslAuthenticateResponse::default().with_auth_bytes(Bytes::from(answer))
        }
        Step::Done(user, answer) => {
            if let Some(peer) = session.peer() {
                ctx.login_throttle.lock().succeeded(peer.ip(), &user);
            }
            tracing::info!(peer = ?session.peer(), user, mechanism = mechanism.name(), listener = %session.listener().name, "authenticated");
            session.authenticated(&user);
            SaslAuthenticateResponse::default().with_auth_bytes(Bytes::from(answer))
        }
        Step::Failed(user, reason) => {
            session.failed();
            let user = user.unwrap_or_default();
            tracing::info!(peer = ?session.peer(), %user, mechanism = mechanism.name(), %reason, "SASL authentication failed");
            if let Some(peer) = session.peer() {
                let delay = ctx
                    .login_throttle
                    .lock()
                    .failed(peer.ip(), &user, Instant::now());
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
