//! Maps one HTTP request to its response. Pure: no I/O.

use bytes::Bytes;
use http_body_util::Full;
use hyper::{Method, Request, Response, StatusCode};

use crate::server::AdminState;

/// Content type of the Prometheus text exposition format.
pub const METRICS_CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

/// The response to `request`.
pub fn respond<B>(state: &AdminState, request: &Request<B>) -> Response<Full<Bytes>> {
    if request.method() != Method::GET && request.method() != Method::HEAD {
        return text(StatusCode::METHOD_NOT_ALLOWED, "only GET is served\n");
    }
    match request.uri().path() {
        "/metrics" => {
            let body = state
                .metrics
                .scrape(|partitions| (state.refresh)(partitions));
            let mut response = Response::new(Full::new(Bytes::from(body)));
            response.headers_mut().insert(
                hyper::header::CONTENT_TYPE,
                hyper::header::HeaderValue::from_static(METRICS_CONTENT_TYPE),
            );
            response
        }
        "/health" => text(StatusCode::OK, "ok\n"),
        "/ready" if state.readiness.is_ready() => text(StatusCode::OK, "ready\n"),
        "/ready" => text(StatusCode::SERVICE_UNAVAILABLE, "not ready\n"),
        _ => text(
            StatusCode::NOT_FOUND,
            "not found: try /metrics, /health or /ready\n",
        ),
    }
}

fn text(status: StatusCode, body: &'static str) -> Response<Full<Bytes>> {
    let mut response = Response::new(Full::new(Bytes::from_static(body.as_bytes())));
    *response.status_mut() = status;
    response.headers_mut().insert(
        hyper::header::CONTENT_TYPE,
        hyper::header::HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    response
}
