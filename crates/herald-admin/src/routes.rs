//! Maps one HTTP request to its response. Pure: no I/O. A scrape, which
//! samples the broker and may wait, is left to the caller
//! ([`Answer::Scrape`]), which runs it off the async runtime.

use bytes::Bytes;
use http_body_util::Full;
use hyper::{Method, Request, Response, StatusCode};

use crate::readiness::ReadyState;
use crate::server::AdminState;

/// Content type of the Prometheus text exposition format.
pub const METRICS_CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

/// What to answer a request with.
#[derive(Debug)]
pub enum Answer {
    /// This response, ready now.
    Now(Response<Full<Bytes>>),
    /// A scrape: run [`scrape`] (it may block) and answer with
    /// [`metrics_response`].
    Scrape,
    /// A call of the admin API (`/v1/...`): answered by
    /// [`crate::api::handle`], which reads the body and may wait.
    Api,
}

/// The answer to `request`.
pub fn respond<B>(state: &AdminState, request: &Request<B>) -> Answer {
    if request.uri().path().starts_with("/v1/") {
        return Answer::Api;
    }
    if request.method() != Method::GET && request.method() != Method::HEAD {
        return Answer::Now(text(StatusCode::METHOD_NOT_ALLOWED, "only GET is served\n"));
    }
    Answer::Now(match request.uri().path() {
        "/metrics" => return Answer::Scrape,
        "/health" => text(StatusCode::OK, "ok\n"),
        "/ready" => match state.readiness.state() {
            ReadyState::Ready => text(StatusCode::OK, "ready\n"),
            ReadyState::NotReady => text(StatusCode::SERVICE_UNAVAILABLE, "not ready\n"),
            ReadyState::Degraded(problems) => {
                let mut body = String::from("degraded\n");
                for problem in problems {
                    body.push_str(&problem);
                    body.push('\n');
                }
                owned_text(StatusCode::SERVICE_UNAVAILABLE, body)
            }
        },
        _ => text(
            StatusCode::NOT_FOUND,
            "not found: try /metrics, /health, /ready or the API under /v1/\n",
        ),
    })
}

/// Refreshes the sampled metrics and renders every metric. Blocking: the
/// refresh reads the broker and waits (bounded) for the group coordinator.
pub fn scrape(state: &AdminState) -> String {
    state.metrics.scrape(|metrics| (state.refresh)(metrics))
}

/// The `/metrics` response carrying `body`.
pub fn metrics_response(body: String) -> Response<Full<Bytes>> {
    let mut response = Response::new(Full::new(Bytes::from(body)));
    response.headers_mut().insert(
        hyper::header::CONTENT_TYPE,
        hyper::header::HeaderValue::from_static(METRICS_CONTENT_TYPE),
    );
    response
}

/// The answer when a scrape could not run (its blocking task failed).
pub fn scrape_failed() -> Response<Full<Bytes>> {
    text(StatusCode::INTERNAL_SERVER_ERROR, "scrape failed\n")
}

fn text(status: StatusCode, body: &'static str) -> Response<Full<Bytes>> {
    owned_text(status, body.to_owned())
}

fn owned_text(status: StatusCode, body: String) -> Response<Full<Bytes>> {
    let mut response = Response::new(Full::new(Bytes::from(body)));
    *response.status_mut() = status;
    response.headers_mut().insert(
        hyper::header::CONTENT_TYPE,
        hyper::header::HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    response
}
