//! `/v1/flow-control`: the broker-wide limit on produce records in flight
//! (`--flow-control`), read and changed while the broker serves.
//!
//! - `GET` answers its mode, the limit in force (`null` when off), the
//!   records in flight and the bounds a controller works within.
//! - `PUT` with `{"mode": "fixed", "limit": 2000}` switches it: `mode` is
//!   one of `--flow-control`'s names, `limit` the fixed limit or a
//!   controller's first (which its bounds clamp); left out, the limit
//!   last asked for (at first `--flow-limit`). A controller starts
//!   afresh, or with `"resume": true` carries on from the limit and
//!   history it had when last switched away from (afresh when there is
//!   none; the answer's `resumed` says which). Requests already admitted
//!   keep their places. The change lasts until the broker restarts (the
//!   flags and the configuration file say what it starts with).
//!
//! The gate itself belongs to the Kafka listener (herald-kafka's
//! `flow_gate`); the binary hands the API a [`FlowControlHandle`] on it
//! once the listener is bound.

use std::sync::{Arc, OnceLock};

use bytes::Bytes;
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::{Method, Request, Response, StatusCode};
use serde::{Deserialize, Serialize};

use super::{error, json, json_body};

/// What the API can do with the gate.
pub trait FlowControlHandle: Send + Sync + std::fmt::Debug {
    /// The gate now.
    fn state(&self) -> FlowControlView;
    /// Switches the gate to `mode` (a `--flow-control` name) starting at
    /// `limit` (the one last set when `None`); with `resume`, the last
    /// controller of that mode switched away from carries on. The
    /// refusal's message when `mode` is unknown.
    fn reconfigure(
        &self,
        mode: &str,
        limit: Option<u32>,
        resume: bool,
    ) -> Result<FlowControlView, String>;
}

/// The gate's handle, once the Kafka listener is bound (the admin
/// listener starts before it).
pub type OpenedFlowControl = Arc<OnceLock<Arc<dyn FlowControlHandle>>>;

/// The gate as the API answers it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FlowControlView {
    /// `off`, `fixed`, `last-three-points`, `adaptive` or `gradient`.
    pub mode: String,
    /// The limit in force, in records; `None` when off.
    pub limit: Option<u32>,
    /// Records admitted and not yet answered (counted while on).
    pub in_flight: u64,
    /// Whether the controller in force carried on from where it was when
    /// last switched away from.
    #[serde(default)]
    pub resumed: bool,
    /// The smallest limit a controller may set.
    pub min_limit: u32,
    /// The largest limit a controller may set.
    pub max_limit: u32,
    /// A controller's step (seed 004's delta).
    pub delta: u32,
}

/// The body of `PUT /v1/flow-control`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Change {
    mode: String,
    #[serde(default)]
    limit: Option<u32>,
    #[serde(default)]
    resume: bool,
}

/// Answers `/v1/flow-control`; `rest` is the path after it.
pub async fn handle(
    flow: &OpenedFlowControl,
    request: Request<Incoming>,
    rest: &[&str],
) -> Response<Full<Bytes>> {
    if !rest.is_empty() {
        return error(StatusCode::NOT_FOUND, "not found: try /v1/flow-control");
    }
    let Some(flow) = flow.get() else {
        return error(
            StatusCode::SERVICE_UNAVAILABLE,
            "the Kafka listener is not bound yet",
        );
    };
    let method = request.method().clone();
    match method {
        Method::GET => json(StatusCode::OK, &flow.state()),
        Method::PUT => {
            let change: Change = match json_body(request).await {
                Ok(change) => change,
                Err(response) => return response,
            };
            if change.limit == Some(0) {
                return error(
                    StatusCode::BAD_REQUEST,
                    "the limit must be at least 1 record",
                );
            }
            match flow.reconfigure(&change.mode, change.limit, change.resume) {
                Ok(view) => json(StatusCode::OK, &view),
                Err(message) => error(StatusCode::BAD_REQUEST, &message),
            }
        }
        _ => error(
            StatusCode::METHOD_NOT_ALLOWED,
            "/v1/flow-control takes GET and PUT",
        ),
    }
}
