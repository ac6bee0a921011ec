//! Server-Sent Events: `GET /v1/events?topic=T&subject=S` (or `pattern=P`,
//! and `from=earliest|now|timestamp:MS`; `filter=EXPR` and
//! `attributes=A,B` as a session's `Subscribe` has them), read only, for
//! browsers and curl.
//!
//! Each delivery is an event `delivery` whose `data` is one JSON object
//! (`partition`, `offset`, `timestamp_ms`, `key`, `value`, `headers`; a key,
//! value or header value that is not UTF-8 is given base64-encoded under
//! `key_base64`, `value_base64`, `value_base64` instead) and whose `id` is a
//! resume token (base64url) covering it and everything before it. A
//! reconnecting `EventSource` sends the last id back as `Last-Event-ID` and
//! continues right after that delivery. Gaps arrive as `gap` events, the
//! broker's shutdown as a `goaway` event.
//!
//! An access token goes in `access_token=` (an EventSource cannot set
//! headers) or an `Authorization: Bearer` header; an invalid one gets 401,
//! a topic the principal may not read 403.

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use axum::extract::{ConnectInfo, Query, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::response::sse::{Event as SseEvent, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use base64::Engine as _;
use herald_push::{
    AckMode, Credit, Event, PushStats, Session, Start, SubscribeError, SubscribeRequest,
};
use herald_subjects::Selector;
use serde::Deserialize;
use serde_json::{json, Map, Value};
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;

use crate::auth::{self, Known};
use crate::convert;
use crate::driver::DELIVERIES_MESSAGE_BYTES;
use crate::server::{Peer, Shared};

const TOKEN_CODEC: base64::engine::GeneralPurpose =
    base64::engine::general_purpose::URL_SAFE_NO_PAD;

/// The id of the one subscription of an SSE session.
const SUBSCRIPTION_ID: u64 = 1;

/// The query of `/v1/events`.
#[derive(Debug, Deserialize)]
pub(crate) struct EventsQuery {
    topic: String,
    subject: Option<String>,
    pattern: Option<String>,
    from: Option<String>,
    filter: Option<String>,
    /// Comma-separated (an attribute holds no comma).
    attributes: Option<String>,
    /// An access token (an EventSource cannot set headers).
    access_token: Option<String>,
}

fn refuse(status: StatusCode, text: impl Into<String>) -> Response {
    (status, text.into()).into_response()
}

/// Opens the event stream, or answers why not with an HTTP status.
pub(crate) async fn events(
    State(shared): State<Arc<Shared>>,
    ConnectInfo(peer): ConnectInfo<Peer>,
    Query(query): Query<EventsQuery>,
    headers: HeaderMap,
) -> Response {
    let credentials = auth::from_headers(&headers, query.access_token.as_deref());
    let identity = match auth::identify(&shared, &peer, credentials).await {
        Ok(Known::Identity(identity)) => identity,
        Ok(Known::MustLogIn) => {
            let mut response = refuse(
                StatusCode::UNAUTHORIZED,
                "this listener requires a login: send access_token= (from POST /v1/token)\n",
            );
            response.headers_mut().insert(
                axum::http::header::WWW_AUTHENTICATE,
                HeaderValue::from_static("Bearer"),
            );
            return response;
        }
        Err(refused) => return crate::token_endpoint::unauthorized(&refused.0),
    };
    let selector = match (&query.subject, &query.pattern) {
        (Some(subject), None) => Selector::literal(subject.as_bytes()),
        (None, Some(pattern)) => Selector::parse(pattern.as_bytes()),
        _ => {
            return refuse(
                StatusCode::BAD_REQUEST,
                "name exactly one of subject= or pattern=\n",
            )
        }
    };
    let selector = match selector {
        Ok(selector) => selector,
        Err(e) => return refuse(StatusCode::BAD_REQUEST, format!("{e}\n")),
    };
    let attributes: Vec<&str> = query
        .attributes
        .as_deref()
        .map(|a| a.split(',').filter(|a| !a.is_empty()).collect())
        .unwrap_or_default();
    let selection = match convert::selection(query.filter.as_deref(), &attributes) {
        Ok(selection) => selection,
        Err(refused) => return refuse(StatusCode::BAD_REQUEST, format!("{}\n", refused.message)),
    };
    let start = match headers.get("last-event-id") {
        Some(id) => match id
            .to_str()
            .ok()
            .and_then(|id| TOKEN_CODEC.decode(id.trim()).ok())
        {
            Some(token) => Start::Token(token),
            None => {
                return refuse(
                    StatusCode::BAD_REQUEST,
                    "Last-Event-ID is not a resume token\n",
                )
            }
        },
        None => match parse_from(query.from.as_deref()) {
            Some(start) => start,
            None => {
                return refuse(
                    StatusCode::BAD_REQUEST,
                    "from= is earliest, now or timestamp:MS\n",
                )
            }
        },
    };
    let mut session = match shared.engine.open_session(Credit::default()) {
        Ok(session) => session,
        Err(full) => {
            let mut response = refuse(StatusCode::SERVICE_UNAVAILABLE, format!("{full}\n"));
            response
                .headers_mut()
                .insert("retry-after", HeaderValue::from_static("1"));
            return response;
        }
    };
    if let Err(over) = session.set_identity(identity) {
        let mut response = refuse(StatusCode::TOO_MANY_REQUESTS, format!("{over}\n"));
        response
            .headers_mut()
            .insert("retry-after", HeaderValue::from_static("1"));
        return response;
    }
    // Cumulative acks, each delivery acknowledged as it is written: an
    // event's id then covers exactly what the browser received.
    let request = SubscribeRequest {
        id: SUBSCRIPTION_ID,
        topic: query.topic,
        selector,
        start,
        ack_mode: AckMode::Cumulative,
        max_lag: 0,
        name: None,
        selection,
        report_expired: false,
    };
    if let Err(e) = session.subscribe(request).await {
        let status = match e {
            SubscribeError::UnknownTopic(_) => StatusCode::NOT_FOUND,
            SubscribeError::NotAuthorized(_) => StatusCode::FORBIDDEN,
            SubscribeError::TooManySubscriptions { .. } | SubscribeError::SubscribeRate { .. } => {
                StatusCode::TOO_MANY_REQUESTS
            }
            SubscribeError::Storage(_) => StatusCode::SERVICE_UNAVAILABLE,
            _ => StatusCode::BAD_REQUEST,
        };
        return refuse(status, format!("{e}\n"));
    }
    let (tx, rx) = mpsc::channel(16);
    tokio::spawn(stream(session, tx, shared.shutdown.clone()));
    let mut response = Sse::new(ReceiverStream::new(rx))
        .keep_alive(KeepAlive::new().interval(Duration::from_secs(15)))
        .into_response();
    // Readable from pages of any origin: a page reads only what its token
    // (or the anonymous principal) may read, and the browser sends no
    // cookie, so another origin gains nothing it could not ask for itself.
    response
        .headers_mut()
        .insert("access-control-allow-origin", HeaderValue::from_static("*"));
    response
}

fn parse_from(from: Option<&str>) -> Option<Start> {
    match from {
        None | Some("now") => Some(Start::Now),
        Some("earliest") => Some(Start::Earliest),
        Some(other) => other
            .strip_prefix("timestamp:")
            .and_then(|ms| ms.parse().ok())
            .map(Start::Timestamp),
    }
}

type Sent = mpsc::Sender<Result<SseEvent, Infallible>>;

async fn stream(mut session: Session, tx: Sent, shutdown: tokio_util::sync::CancellationToken) {
    let outbox = Arc::clone(session.outbox());
    let stats = Arc::clone(session.stats());
    loop {
        let events = tokio::select! {
            events = outbox.take(session.take_bytes(DELIVERIES_MESSAGE_BYTES)) => events,
            _ = shutdown.cancelled() => {
                PushStats::add(&stats.disconnects_shutdown, 1);
                let _ = tx.send(Ok(SseEvent::default().event("goaway").data("{\"reason\":\"shutdown\"}"))).await;
                return;
            }
            _ = tx.closed() => {
                PushStats::add(&stats.disconnects_client, 1);
                return;
            }
        };
        let Some(events) = events else { return };
        stats.record_written(&events);
        let paced = session.output_paced();
        for event in events {
            let mut pause = None;
            let (sse, last) = match event {
                Event::Delivery(delivery) => {
                    if paced {
                        pause = session.charge_delivery(&delivery);
                    }
                    let record = &delivery.record;
                    let Ok(token) = session.ack(SUBSCRIPTION_ID, delivery.partition, record.offset)
                    else {
                        return;
                    };
                    let mut data = Map::new();
                    data.insert("partition".into(), json!(delivery.partition));
                    data.insert("offset".into(), json!(record.offset));
                    data.insert("timestamp_ms".into(), json!(record.timestamp));
                    put_bytes(&mut data, "key", record.key.as_deref());
                    put_bytes(&mut data, "value", record.value.as_deref());
                    let headers: Vec<Value> = record
                        .headers()
                        .map_while(Result::ok)
                        .map(|(key, value)| {
                            let mut header = Map::new();
                            header.insert("key".into(), json!(String::from_utf8_lossy(key)));
                            put_bytes(&mut header, "value", value);
                            Value::Object(header)
                        })
                        .collect();
                    data.insert("headers".into(), Value::Array(headers));
                    let sse = SseEvent::default()
                        .event("delivery")
                        .id(TOKEN_CODEC.encode(token))
                        .data(Value::Object(data).to_string());
                    (sse, false)
                }
                Event::Subscribed { start_offsets, .. } => {
                    let offsets: Map<String, Value> = start_offsets
                        .into_iter()
                        .map(|(p, o)| (p.to_string(), json!(o)))
                        .collect();
                    let data = json!({ "start_offsets": offsets });
                    // Reconnect soon after a broker restart (browsers wait
                    // 3 s by default).
                    let sse = SseEvent::default()
                        .event("subscribed")
                        .retry(Duration::from_secs(1))
                        .data(data.to_string());
                    (sse, false)
                }
                Event::Gap {
                    partition,
                    from_offset,
                    to_offset,
                    reason,
                    ..
                } => {
                    let reason = convert::gap_reason(reason).as_str_name();
                    let data = json!({ "partition": partition, "from_offset": from_offset, "to_offset": to_offset, "reason": reason });
                    (
                        SseEvent::default().event("gap").data(data.to_string()),
                        false,
                    )
                }
                Event::State {
                    partition,
                    live,
                    lag,
                    ..
                } => {
                    let data = json!({ "partition": partition, "live": live, "lag": lag });
                    (
                        SseEvent::default().event("status").data(data.to_string()),
                        false,
                    )
                }
                Event::Unsubscribed { .. } => return,
                Event::Ended { reason, .. } => {
                    let data = json!({ "reason": reason });
                    (
                        SseEvent::default().event("end").data(data.to_string()),
                        true,
                    )
                }
            };
            if tx.send(Ok(sse)).await.is_err() || last {
                return;
            }
            if let Some(pause) = pause {
                // Over the tenant's output rate: nothing more until the
                // rate has paid for what went.
                tokio::select! {
                    _ = tokio::time::sleep(pause) => {}
                    _ = shutdown.cancelled() => {}
                    _ = tx.closed() => return,
                }
            }
        }
    }
}

/// `name`: the bytes as text when they are UTF-8, else `name_base64`;
/// null when absent.
fn put_bytes(object: &mut Map<String, Value>, name: &str, bytes: Option<&[u8]>) {
    match bytes.map(std::str::from_utf8) {
        None => {
            object.insert(name.into(), Value::Null);
        }
        Some(Ok(text)) => {
            object.insert(name.into(), json!(text));
        }
        Some(Err(_)) => {
            let encoded =
                base64::engine::general_purpose::STANDARD.encode(bytes.unwrap_or_default());
            object.insert(format!("{name}_base64"), json!(encoded));
        }
    }
}
