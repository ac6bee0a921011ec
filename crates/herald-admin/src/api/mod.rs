//! The admin HTTP API under `/v1/`: JSON in and out, for operators and
//! the `herald` CLI: snapshots ([`snapshots`]), restoring a raw backup as
//! a topic ([`restore`]), online queries ([`queries`]) and the flow-control
//! gate ([`flow`]). Errors are
//! `{"error": "..."}` with a status that says whose fault it was.

pub mod auth;
pub mod flow;
pub mod queries;
pub mod restore;
pub mod snapshots;
#[cfg(feature = "sql")]
pub mod sql;

use std::net::SocketAddr;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::combinators::UnsyncBoxBody;
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::Incoming;
use hyper::{Request, Response, StatusCode};
use serde::Serialize;

use herald_broker::Broker;

/// Largest JSON request body accepted.
pub const JSON_BODY_MAX: usize = 1 << 20;
/// Longest a client may take to send a JSON body, or between two pieces
/// of a streamed one (a restore's).
pub const BODY_IDLE_TIMEOUT: Duration = Duration::from_secs(30);

/// The broker, once it is open (the admin listener starts before it).
pub type OpenedBroker = Arc<OnceLock<Arc<Broker>>>;

/// The body of every admin response: whole, or streamed (SQL results).
pub type AdminBody = UnsyncBoxBody<Bytes, std::io::Error>;

/// A whole response as an [`AdminBody`] one.
pub fn boxed(response: Response<Full<Bytes>>) -> Response<AdminBody> {
    response.map(|body| body.map_err(|never| match never {}).boxed_unsync())
}

/// What the API keeps between requests.
#[derive(Debug, Default)]
pub struct ApiState {
    /// The SQL engine, started with the first query.
    #[cfg(feature = "sql")]
    pub sql: sql::SqlService,
    /// The flow-control gate, once the Kafka listener is bound.
    pub flow: flow::OpenedFlowControl,
}

/// Answers one `/v1/` request.
pub async fn handle(
    broker: &OpenedBroker,
    state: &ApiState,
    peer: SocketAddr,
    request: Request<Incoming>,
) -> Response<AdminBody> {
    let Some(broker) = broker.get() else {
        return boxed(error(
            StatusCode::SERVICE_UNAVAILABLE,
            "the broker is not open yet",
        ));
    };
    let caller = match auth::check(broker, peer, &request).await {
        Ok(caller) => caller,
        Err(refused) => return boxed(refused),
    };
    #[cfg(not(feature = "sql"))]
    let _ = caller;
    let path = request.uri().path().to_owned();
    #[cfg(feature = "sql")]
    {
        let segments: Vec<&str> = path.trim_start_matches("/v1/").split('/').collect();
        match (request.method(), segments.as_slice()) {
            (&hyper::Method::POST, ["sql"]) => {
                return sql::handle(&state.sql, broker, caller, request).await
            }
            (&hyper::Method::GET, ["topics", name, "history"]) => {
                let query = request.uri().query().map(str::to_owned);
                return sql::history(&state.sql, broker, caller, name, query.as_deref()).await;
            }
            _ => {}
        }
    }
    boxed(handle_whole(broker, state, path, request).await)
}

/// The requests answered with a whole body.
async fn handle_whole(
    broker: &Arc<Broker>,
    state: &ApiState,
    path: String,
    request: Request<Incoming>,
) -> Response<Full<Bytes>> {
    let segments: Vec<&str> = path
        .trim_start_matches("/v1/")
        .split('/')
        .filter(|s| !s.is_empty())
        .collect();
    match segments.first() {
        Some(&"snapshots") => snapshots::handle(broker, request, &segments[1..]).await,
        Some(&"queries") => queries::handle(broker, request, &segments[1..]).await,
        Some(&"flow-control") => flow::handle(&state.flow, request, &segments[1..]).await,
        Some(&"topics") => match (request.method(), &segments[1..]) {
            (&hyper::Method::POST, [name, "restore"]) => {
                let name = (*name).to_owned();
                restore::handle(broker, &name, request).await
            }
            _ => error(
                StatusCode::NOT_FOUND,
                "not found: topics take POST /v1/topics/{name}/restore",
            ),
        },
        _ => error(
            StatusCode::NOT_FOUND,
            "not found: the API serves /v1/snapshots, /v1/queries, /v1/topics/{name}/restore, /v1/flow-control, and with the sql feature /v1/sql and /v1/topics/{name}/history",
        ),
    }
}

/// A JSON response.
pub(crate) fn json(status: StatusCode, value: &impl Serialize) -> Response<Full<Bytes>> {
    match serde_json::to_vec_pretty(value) {
        Ok(mut body) => {
            body.push(b'\n');
            let mut response = Response::new(Full::new(Bytes::from(body)));
            *response.status_mut() = status;
            response.headers_mut().insert(
                hyper::header::CONTENT_TYPE,
                hyper::header::HeaderValue::from_static("application/json"),
            );
            response
        }
        Err(e) => error(
            StatusCode::INTERNAL_SERVER_ERROR,
            &format!("encoding the answer: {e}"),
        ),
    }
}

/// An error response: `{"error": message}`.
pub(crate) fn error(status: StatusCode, message: &str) -> Response<Full<Bytes>> {
    #[derive(Serialize)]
    struct Failure<'a> {
        error: &'a str,
    }
    let body = serde_json::to_vec(&Failure { error: message }).unwrap_or_default();
    let mut response = Response::new(Full::new(Bytes::from(body)));
    *response.status_mut() = status;
    response.headers_mut().insert(
        hyper::header::CONTENT_TYPE,
        hyper::header::HeaderValue::from_static("application/json"),
    );
    response
}

/// The request's body as JSON of type `T`, at most [`JSON_BODY_MAX`]
/// bytes; an error response otherwise.
pub(crate) async fn json_body<T>(request: Request<Incoming>) -> Result<T, Response<Full<Bytes>>>
where
    T: serde::de::DeserializeOwned,
{
    let body = Limited::new(request.into_body(), JSON_BODY_MAX);
    let bytes = match tokio::time::timeout(BODY_IDLE_TIMEOUT, body.collect()).await {
        Ok(Ok(collected)) => collected.to_bytes(),
        Ok(Err(e)) => {
            return Err(error(
                StatusCode::PAYLOAD_TOO_LARGE,
                &format!("the body could not be read (at most {JSON_BODY_MAX} bytes): {e}"),
            ))
        }
        Err(_) => {
            return Err(error(
                StatusCode::REQUEST_TIMEOUT,
                "the body did not come in time",
            ))
        }
    };
    serde_json::from_slice(&bytes)
        .map_err(|e| error(StatusCode::BAD_REQUEST, &format!("invalid JSON body: {e}")))
}
