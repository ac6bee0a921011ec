//! `/v1/queries`: register, list, read and delete online queries.
//!
//! - `POST /v1/queries` with a query spec (`herald_query::QuerySpec` as
//!   JSON): registers it and starts its indexers (201).
//! - `GET /v1/queries`: every query with its lag and alerts.
//! - `GET /v1/queries/{id}?from_ms=..&to_ms=..`: its results, each bucket
//!   starting in the range and each aggregate over it, and its lag (the
//!   records its indexers have still to read: a result is complete for the
//!   records before it once the lag is 0).
//! - `DELETE /v1/queries/{id}`: stops and forgets it.

use std::sync::Arc;

use bytes::Bytes;
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::{Method, Request, Response, StatusCode};
use serde_json::json;

use herald_broker::queries::{QueryError, RunningQuery};
use herald_broker::Broker;
use herald_query::QuerySpec;

use super::{error, json, json_body};

fn summary(query: &RunningQuery) -> serde_json::Value {
    json!({
        "spec": query.spec(),
        "lag": query.lag(),
        "alerts": query.alerts(),
    })
}

/// Answers `/v1/queries[/{id}]`; `rest` is the path after `queries`.
pub async fn handle(
    broker: &Arc<Broker>,
    request: Request<Incoming>,
    rest: &[&str],
) -> Response<Full<Bytes>> {
    let method = request.method().clone();
    match (method, rest) {
        (Method::GET, []) => {
            let all: Vec<serde_json::Value> =
                broker.queries().list().iter().map(|q| summary(q)).collect();
            json(StatusCode::OK, &all)
        }
        (Method::POST, []) => {
            let spec: QuerySpec = match json_body(request).await {
                Ok(spec) => spec,
                Err(response) => return response,
            };
            match broker.register_query(spec) {
                Ok(query) => json(StatusCode::CREATED, &summary(&query)),
                Err(e) => refused(&e),
            }
        }
        (Method::GET, [id]) => {
            let Some(query) = broker.queries().get(id) else {
                return refused(&QueryError::Unknown {
                    id: (*id).to_owned(),
                });
            };
            let (from, to) = match range(request.uri().query()) {
                Ok(range) => range,
                Err(message) => return error(StatusCode::BAD_REQUEST, &message),
            };
            let mut answer = summary(&query);
            answer["results"] = json!(query.results(from, to));
            json(StatusCode::OK, &answer)
        }
        (Method::DELETE, [id]) => match broker.delete_query(id) {
            Ok(()) => json(StatusCode::OK, &json!({ "deleted": id })),
            Err(e) => refused(&e),
        },
        (_, [] | [_]) => error(
            StatusCode::METHOD_NOT_ALLOWED,
            "/v1/queries takes GET and POST; /v1/queries/{id} takes GET and DELETE",
        ),
        _ => error(StatusCode::NOT_FOUND, "not found"),
    }
}

/// `from_ms` and `to_ms` of a query string.
fn range(query: Option<&str>) -> Result<(Option<i64>, Option<i64>), String> {
    let (mut from, mut to) = (None, None);
    for pair in query
        .unwrap_or_default()
        .split('&')
        .filter(|p| !p.is_empty())
    {
        let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
        let parsed = value
            .parse::<i64>()
            .map_err(|_| format!("{key} must be milliseconds, not {value:?}"));
        match key {
            "from_ms" => from = Some(parsed?),
            "to_ms" => to = Some(parsed?),
            _ => return Err(format!("unknown parameter {key:?} (from_ms, to_ms)")),
        }
    }
    Ok((from, to))
}

fn refused(e: &QueryError) -> Response<Full<Bytes>> {
    let status = match e {
        QueryError::Unknown { .. } | QueryError::UnknownTopic { .. } => StatusCode::NOT_FOUND,
        QueryError::Exists { .. } => StatusCode::CONFLICT,
        QueryError::TooMany { .. } => StatusCode::INSUFFICIENT_STORAGE,
        QueryError::Storage { .. } | QueryError::Runtime { .. } => {
            StatusCode::INTERNAL_SERVER_ERROR
        }
        QueryError::Spec(_) | QueryError::Unsupported { .. } => StatusCode::BAD_REQUEST,
    };
    error(status, &e.to_string())
}
