//! Who a push client is: from an access token in its HTTP request, from
//! its TLS certificate, or from a login in its session's hello; and
//! whether the listener lets it in without one.

use std::net::SocketAddr;
use std::time::Duration;

use axum::http::HeaderMap;
use herald_auth::{oauthbearer, LoginStep, SaslMechanism, SecurityProtocol};
use herald_push::{Identity, PushEngine};

use crate::server::{Peer, Shared};

/// Longest a client may take to log in, from its connection to its last
/// login message: an unauthenticated connection must not linger.
pub(crate) const LOGIN_DEADLINE: Duration = Duration::from_secs(30);

/// What the request says of who the client is.
#[derive(Debug)]
pub(crate) enum Known {
    /// The client is this principal (a token, a certificate, or anonymous
    /// on a listener that lets anyone in).
    Identity(Identity),
    /// It must log in before anything else (a SASL listener, no token).
    MustLogIn,
}

/// Why a request's credentials were refused.
#[derive(Debug)]
pub(crate) struct Refused(pub(crate) String);

/// The credentials a request carries.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Credentials<'a> {
    /// An access token.
    Bearer(&'a str),
    /// A user name and password (HTTP Basic), checked as PLAIN is.
    Basic(String, String),
    /// None.
    None,
}

/// The credentials of an `Authorization` header value (or gRPC metadata),
/// else an `access_token` query parameter (browsers cannot set headers on
/// an EventSource or a WebSocket).
pub(crate) fn credentials<'a>(
    authorization: Option<&'a str>,
    query_token: Option<&'a str>,
) -> Credentials<'a> {
    let header = authorization.and_then(|v| v.trim().split_once(' '));
    match header {
        Some((scheme, token)) if scheme.eq_ignore_ascii_case("bearer") => {
            Credentials::Bearer(token.trim())
        }
        Some((scheme, encoded)) if scheme.eq_ignore_ascii_case("basic") => {
            basic(encoded.trim()).map_or(Credentials::None, |(u, p)| Credentials::Basic(u, p))
        }
        _ => query_token.map_or(Credentials::None, Credentials::Bearer),
    }
}

/// The credentials of a request's headers and `access_token` parameter.
pub(crate) fn from_headers<'a>(
    headers: &'a HeaderMap,
    query_token: Option<&'a str>,
) -> Credentials<'a> {
    let authorization = headers
        .get(axum::http::header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok());
    credentials(authorization, query_token)
}

/// The user name and password of base64 `user:password`.
pub(crate) fn basic(encoded: &str) -> Option<(String, String)> {
    herald_auth::plain::http_basic(encoded)
}

/// Checks a user's password as a PLAIN login does (on a blocking thread,
/// with the shared throttle); answers the user.
pub(crate) async fn check_password(
    engine: &PushEngine,
    peer: SocketAddr,
    user: &str,
    password: &str,
) -> Option<String> {
    let checked = engine
        .broker()
        .security()
        .check_password(peer.ip(), user, password)
        .await;
    if checked.is_none() {
        tracing::info!(%peer, %user, "push request with invalid credentials");
    }
    checked
}

/// Who the client of a request is, from its credentials and its
/// connection.
pub(crate) async fn identify(
    shared: &Shared,
    peer: &Peer,
    credentials: Credentials<'_>,
) -> Result<Known, Refused> {
    let host = peer.addr.ip().to_string();
    match credentials {
        Credentials::Bearer(token) => {
            let security = shared.engine.broker().security();
            let now = security.login_context().now_secs;
            return match security.token_key().verify(token, now) {
                Ok(claims) => Ok(Known::Identity(Identity::new(claims.principal(), host))),
                Err(e) => {
                    tracing::info!(peer = %peer.addr, reason = %e, "push access token refused");
                    Err(Refused(e.to_string()))
                }
            };
        }
        Credentials::Basic(user, password) => {
            return match check_password(&shared.engine, peer.addr, &user, &password).await {
                Some(user) => Ok(Known::Identity(Identity::new(format!("User:{user}"), host))),
                None => Err(Refused("invalid user name or password".into())),
            };
        }
        Credentials::None => {}
    }
    // On SASL_SSL the certificate secures the channel; the login says who
    // the client is, as on Kafka's listeners.
    if shared.protocol == SecurityProtocol::Ssl {
        if let Some(principal) = &peer.certificate_principal {
            return Ok(Known::Identity(Identity::new(principal.clone(), host)));
        }
    }
    if shared.protocol.uses_sasl() {
        return Ok(Known::MustLogIn);
    }
    Ok(Known::Identity(Identity::anonymous(host)))
}

/// How a login in a hello ended.
#[derive(Debug)]
pub(crate) enum LoginOutcome {
    /// Authenticated: the identity, and the server's last message for the
    /// client (SCRAM's proof of the server).
    Done(Identity, Vec<u8>),
    /// Refused; the client is told only that.
    Failed,
}

/// The transport's side of a login: sends a challenge and waits for the
/// client's answer.
pub(crate) trait Conversation {
    /// Sends `challenge`; the client's answer, or `None` if it left or
    /// sent something else.
    fn exchange(
        &mut self,
        challenge: Vec<u8>,
    ) -> impl std::future::Future<Output = Option<Vec<u8>>> + Send;
}

/// One login exchange: the hello's first message, then each answer the
/// client gives a challenge through `conversation`.
pub(crate) async fn log_in<C: Conversation>(
    engine: &PushEngine,
    allowed: &[SaslMechanism],
    peer: Option<SocketAddr>,
    mechanism: &str,
    payload: Vec<u8>,
    conversation: &mut C,
) -> LoginOutcome {
    let security = engine.broker().security();
    let refuse = |user: Option<String>, reason: String| async move {
        let user = user.unwrap_or_default();
        tracing::info!(?peer, %user, %mechanism, %reason, "push login failed");
        if let Some(peer) = peer {
            tokio::time::sleep(security.login_failed(peer.ip(), &user)).await;
        }
        LoginOutcome::Failed
    };
    let Some(chosen) = SaslMechanism::from_name(mechanism).filter(|m| allowed.contains(m)) else {
        return refuse(None, format!("mechanism {mechanism:?} is not offered")).await;
    };
    // A bare token is taken as OAUTHBEARER's message would carry it.
    let mut message = if chosen == SaslMechanism::OAuthBearer
        && !(payload.starts_with(b"n,") || payload.starts_with(b"y,"))
    {
        oauthbearer::initial_response(&String::from_utf8_lossy(&payload))
    } else {
        payload
    };
    let mut login = herald_auth::Login::new(chosen);
    loop {
        let (step, rest) = security.login_step(login, message).await;
        match step {
            LoginStep::Done { user, last } => {
                if let Some(peer) = peer {
                    security.login_succeeded(peer.ip(), &user);
                }
                tracing::info!(?peer, %user, mechanism = chosen.name(), "push client logged in");
                let host = peer.map(|p| p.ip().to_string()).unwrap_or_default();
                return LoginOutcome::Done(Identity::new(format!("User:{user}"), host), last);
            }
            LoginStep::Continue(challenge) => {
                let (Some(next), Some(answer)) = (rest, conversation.exchange(challenge).await)
                else {
                    return refuse(None, "the exchange was not continued".into()).await;
                };
                login = next;
                message = answer;
            }
            // No SASL framing to carry the error challenge: refused now.
            LoginStep::Rejected { reason, .. } => return refuse(None, reason).await,
            LoginStep::Failed { user, reason } => return refuse(user, reason).await,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_header_wins_over_the_query_and_basic_is_decoded() {
        assert_eq!(credentials(None, Some("q")), Credentials::Bearer("q"));
        assert_eq!(
            credentials(Some("bearer  abc.def.ghi "), Some("q")),
            Credentials::Bearer("abc.def.ghi")
        );
        // base64 of "alice:pass:word": the password keeps its colons.
        assert_eq!(
            credentials(Some("Basic YWxpY2U6cGFzczp3b3Jk"), None),
            Credentials::Basic("alice".into(), "pass:word".into())
        );
        assert_eq!(credentials(Some("Basic !!"), None), Credentials::None);
        assert_eq!(credentials(Some("Digest x"), None), Credentials::None);
    }
}
