//! `POST /v1/token`: an access token for a user who proves who they are,
//! shaped as an OAuth 2.0 token endpoint answers the client-credentials
//! grant (RFC 6749 §4.4), so that OAuth clients (librdkafka's and the Java
//! client's OAUTHBEARER login, a browser's `fetch`) get tokens from herald
//! as they would from an identity provider.
//!
//! The caller proves who it is with HTTP Basic (its user name and password,
//! checked against its SCRAM credential as PLAIN is), with `client_id` and
//! `client_secret` form fields, or with its client certificate on an SSL
//! listener. A super user may ask for a token for another user
//! (`user=NAME`): a web application's back end does so for the people it
//! signed in. Failures are told apart only as OAuth does (`invalid_client`,
//! `invalid_request`, `unauthorized_client`), after the same growing delay
//! as a failed Kafka login.

use std::sync::Arc;

use axum::extract::{ConnectInfo, State};
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use serde::Deserialize;
use serde_json::json;

use crate::server::{Peer, Shared};

/// The form fields of a token request; others are ignored.
#[derive(Debug, Default, Deserialize)]
struct TokenForm {
    grant_type: Option<String>,
    client_id: Option<String>,
    client_secret: Option<String>,
    /// herald's: the user to issue the token for (super users only).
    user: Option<String>,
    /// herald's: a shorter lifetime than the listener's, in seconds.
    expires_in: Option<u64>,
}

/// An OAuth error response (RFC 6749 §5.2).
fn oauth_error(status: StatusCode, error: &str, description: &str) -> Response {
    let body = json!({ "error": error, "error_description": description });
    let mut response = (status, axum::Json(body)).into_response();
    if status == StatusCode::UNAUTHORIZED {
        response.headers_mut().insert(
            header::WWW_AUTHENTICATE,
            HeaderValue::from_static("Basic realm=\"herald\""),
        );
    }
    no_store(&mut response);
    response
}

/// 401 for a request whose bearer token was refused (the WebSocket and
/// SSE endpoints).
pub(crate) fn unauthorized(reason: &str) -> Response {
    let mut response = (
        StatusCode::UNAUTHORIZED,
        format!("invalid access token: {reason}\n"),
    )
        .into_response();
    response.headers_mut().insert(
        header::WWW_AUTHENTICATE,
        HeaderValue::from_static("Bearer error=\"invalid_token\""),
    );
    response
}

fn no_store(response: &mut Response) {
    response
        .headers_mut()
        .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
}

/// The user name and password of an `Authorization: Basic` header.
fn basic_credentials(headers: &HeaderMap) -> Option<(String, String)> {
    match crate::auth::from_headers(headers, None) {
        crate::auth::Credentials::Basic(user, password) => Some((user, password)),
        _ => None,
    }
}

/// Answers a token request.
pub(crate) async fn issue(
    State(shared): State<Arc<Shared>>,
    ConnectInfo(peer): ConnectInfo<Peer>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let form: TokenForm = match serde_urlencoded::from_bytes(&body) {
        Ok(form) => form,
        Err(e) => {
            return oauth_error(
                StatusCode::BAD_REQUEST,
                "invalid_request",
                &format!("the body is not a form: {e}"),
            )
        }
    };
    if let Some(grant) = form
        .grant_type
        .as_deref()
        .filter(|g| *g != "client_credentials")
    {
        return oauth_error(
            StatusCode::BAD_REQUEST,
            "unsupported_grant_type",
            &format!("grant type {grant} is not served; use client_credentials"),
        );
    }
    let security = shared.engine.broker().security();
    let credentials = basic_credentials(&headers)
        .or_else(|| form.client_id.clone().zip(form.client_secret.clone()));
    let caller = match credentials {
        Some((user, password)) => {
            match crate::auth::check_password(&shared.engine, peer.addr, &user, &password).await {
                Some(user) => user,
                None => {
                    return oauth_error(
                        StatusCode::UNAUTHORIZED,
                        "invalid_client",
                        "authentication failed",
                    );
                }
            }
        }
        None => match peer
            .certificate_principal
            .as_deref()
            .and_then(|p| p.strip_prefix("User:"))
        {
            Some(user) => user.to_owned(),
            None => {
                return oauth_error(
                    StatusCode::UNAUTHORIZED,
                    "invalid_client",
                    "send a user name and password (HTTP Basic)",
                )
            }
        },
    };
    let subject = match form.user {
        Some(user) if user != caller => {
            if !security
                .authorizer()
                .is_super_user(&format!("User:{caller}"))
            {
                return oauth_error(
                    StatusCode::FORBIDDEN,
                    "unauthorized_client",
                    "only a super user may ask for another user's token",
                );
            }
            user
        }
        _ => caller.clone(),
    };
    let longest = shared.token_lifetime.as_secs().max(1);
    let lifetime = form.expires_in.unwrap_or(longest).clamp(1, longest);
    let now = security.login_context().now_secs;
    let lifetime_secs = i64::try_from(lifetime).unwrap_or(i64::MAX);
    let token = match security.token_key().issue(&subject, now, lifetime_secs) {
        Ok(token) => token,
        Err(e) => {
            return oauth_error(StatusCode::BAD_REQUEST, "invalid_request", &e.to_string());
        }
    };
    tracing::info!(peer = %peer.addr, %caller, user = %subject, lifetime, "access token issued");
    let body = json!({
        "access_token": token,
        "token_type": "Bearer",
        "expires_in": lifetime,
        "principal": format!("User:{subject}"),
    });
    let mut response = axum::Json(body).into_response();
    no_store(&mut response);
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn basic_credentials_split_at_the_first_colon() {
        let mut headers = HeaderMap::new();
        let encoded = "YWxpY2U6cGFzczp3b3Jk";
        headers.insert(
            header::AUTHORIZATION,
            HeaderValue::from_str(&format!("Basic {encoded}")).expect("ascii"),
        );
        assert_eq!(
            basic_credentials(&headers),
            Some(("alice".to_owned(), "pass:word".to_owned()))
        );
        headers.insert(header::AUTHORIZATION, HeaderValue::from_static("Basic !!"));
        assert_eq!(basic_credentials(&headers), None);
    }
}
