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

/// The bearer token a request carries: its `Authorization: Bearer`
/// header, else its `access_token` query parameter (browsers cannot set
/// headers on an EventSource or a WebSocket).
pub(crate) fn bearer<'a>(headers: &'a HeaderMap, query_token: Option<&'a str>) -> Option<&'a str> {
    headers
        .get(axum::http::header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| {
            let (scheme, token) = v.trim().split_once(' ')?;
            scheme.eq_ignore_ascii_case("bearer").then(|| token.trim())
        })
        .or(query_token)
}

/// Who the client of a request is, from its token and its connection.
pub(crate) fn identify(
    shared: &Shared,
    peer: &Peer,
    token: Option<&str>,
) -> Result<Known, Refused> {
    let host = peer.addr.ip().to_string();
    if let Some(token) = token {
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
    use axum::http::HeaderValue;

    #[test]
    fn a_bearer_header_wins_over_the_query_and_other_schemes_are_ignored() {
        let mut headers = HeaderMap::new();
        assert_eq!(bearer(&headers, Some("q")), Some("q"));
        headers.insert(
            axum::http::header::AUTHORIZATION,
            HeaderValue::from_static("bearer  abc.def.ghi "),
        );
        assert_eq!(bearer(&headers, Some("q")), Some("abc.def.ghi"));
        headers.insert(
            axum::http::header::AUTHORIZATION,
            HeaderValue::from_static("Basic dXNlcjpwdw=="),
        );
        assert_eq!(bearer(&headers, None), None);
    }
}
