//! Who may call the admin API. With authorization off (the broker's
//! default, as Kafka without an authorizer) anyone who reaches the
//! listener may. With it on, each call carries the caller's credentials,
//! `Authorization: Basic` (a SCRAM user's name and password, checked as a
//! PLAIN login is, with the broker's login throttle) or `Bearer` (an
//! access token the broker signed), and the caller needs the operation on
//! the cluster resource: DESCRIBE to read (a SQL query is a read), ALTER
//! to change anything. Super users pass, as on every other API. A SQL
//! query also needs READ on each topic it reads (checked by the query).

use std::net::SocketAddr;

use herald_auth::{Caller, Operation, ResourceType};
use herald_broker::Broker;
use hyper::header::{HeaderValue, AUTHORIZATION, WWW_AUTHENTICATE};
use hyper::{Method, Request, Response, StatusCode};

use bytes::Bytes;
use http_body_util::Full;

use super::error;

/// The name of the cluster resource in ACLs.
const CLUSTER: &str = herald_auth::acl::CLUSTER_NAME;

/// Checks the caller of `request`: who it is when authorization is on
/// (`None` when it is off), the refusal to answer with otherwise.
pub async fn check<B>(
    broker: &Broker,
    peer: SocketAddr,
    request: &Request<B>,
) -> Result<Option<Caller>, Response<Full<Bytes>>> {
    let security = broker.security();
    if !security.config().authorization {
        return Ok(None);
    }
    let header = request
        .headers()
        .get(AUTHORIZATION)
        .and_then(|h| h.to_str().ok());
    let principal = match header.and_then(|h| h.split_once(' ')) {
        Some((scheme, token)) if scheme.eq_ignore_ascii_case("bearer") => {
            let now = security.login_context().now_secs;
            match security.token_key().verify(token.trim(), now) {
                Ok(claims) => claims.principal(),
                Err(e) => return Err(unauthorized(&format!("the access token is refused: {e}"))),
            }
        }
        Some((scheme, encoded)) if scheme.eq_ignore_ascii_case("basic") => {
            let Some((user, password)) = herald_auth::plain::http_basic(encoded) else {
                return Err(unauthorized(
                    "the Basic credentials are not base64 of USER:PASSWORD",
                ));
            };
            match security.check_password(peer.ip(), &user, &password).await {
                Some(user) => format!("User:{user}"),
                None => {
                    tracing::info!(%peer, %user, "admin API call with invalid credentials");
                    return Err(unauthorized("invalid user name or password"));
                }
            }
        }
        _ => {
            return Err(unauthorized(
                "authorization is on: send a user's name and password (Basic) or an access token (Bearer)",
            ))
        }
    };
    let reads = request.method() == Method::GET
        || request.method() == Method::HEAD
        || (request.method() == Method::POST && request.uri().path() == "/v1/sql");
    let operation = if reads {
        Operation::Describe
    } else {
        Operation::Alter
    };
    let caller = Caller {
        principal,
        host: peer.ip().to_string(),
    };
    if security.authorize(&caller, operation, ResourceType::Cluster, CLUSTER) {
        return Ok(Some(caller));
    }
    tracing::info!(principal = %caller.principal, %peer, ?operation, "admin API call denied");
    Err(error(
        StatusCode::FORBIDDEN,
        &format!(
            "{} may not {} the cluster (an ACL on the cluster resource allows it)",
            caller.principal,
            match operation {
                Operation::Describe => "DESCRIBE",
                _ => "ALTER",
            }
        ),
    ))
}

fn unauthorized(message: &str) -> Response<Full<Bytes>> {
    let mut response = error(StatusCode::UNAUTHORIZED, message);
    response.headers_mut().insert(
        WWW_AUTHENTICATE,
        HeaderValue::from_static("Basic realm=\"herald\""),
    );
    response
}
