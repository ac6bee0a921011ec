//! `/v1/snapshots`: take, list, show and delete snapshots of topics.
//!
//! - `POST /v1/snapshots` with `{"topics": ["orders", ...], "id": "nightly"
//!   (optional), "ttl_ms": 86400000 (optional)}`: takes one (201).
//! - `GET /v1/snapshots`: every snapshot.
//! - `GET /v1/snapshots/{id}`: one, with each partition's range.
//! - `DELETE /v1/snapshots/{id}`: deletes it; its records are unpinned.

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use bytes::Bytes;
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::{Method, Request, Response, StatusCode};
use serde::{Deserialize, Serialize};

use herald_broker::snapshots::{view_name, SnapshotSpec};
use herald_broker::{Broker, SnapshotError, SnapshotRecord};

use super::{error, json, json_body};

/// The body of `POST /v1/snapshots`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct CreateRequest {
    topics: Vec<String>,
    #[serde(default)]
    id: Option<String>,
    #[serde(default)]
    ttl_ms: Option<u64>,
}

/// A snapshot as the API shows it.
#[derive(Debug, Serialize)]
pub struct SnapshotView {
    id: String,
    created_at_ms: i64,
    expires_at_ms: Option<i64>,
    /// How long the cut held answers back, in microseconds.
    cut_micros: f64,
    records: u64,
    bytes: u64,
    first_timestamp: Option<i64>,
    last_timestamp: Option<i64>,
    topics: Vec<TopicView>,
}

#[derive(Debug, Serialize)]
struct TopicView {
    name: String,
    /// The read-only topic Kafka clients read the snapshot from.
    view_topic: String,
    partitions: Vec<PartitionView>,
}

#[derive(Debug, Serialize)]
struct PartitionView {
    partition: usize,
    start: u64,
    end: u64,
    records: u64,
    bytes: u64,
    first_timestamp: Option<i64>,
    last_timestamp: Option<i64>,
}

impl SnapshotView {
    /// How `record` is shown.
    pub fn of(record: &SnapshotRecord) -> Self {
        let time_range = record.time_range();
        Self {
            id: record.id.clone(),
            created_at_ms: record.created_at_ms,
            expires_at_ms: record.expires_at_ms,
            cut_micros: record.cut_nanos as f64 / 1_000.0,
            records: record.records(),
            bytes: record.bytes(),
            first_timestamp: time_range.map(|(first, _)| first),
            last_timestamp: time_range.map(|(_, last)| last),
            topics: record
                .topics
                .iter()
                .map(|t| TopicView {
                    name: t.name.clone(),
                    view_topic: view_name(&record.id, &t.name),
                    partitions: t
                        .partitions
                        .iter()
                        .enumerate()
                        .map(|(partition, p)| PartitionView {
                            partition,
                            start: p.start,
                            end: p.end,
                            records: p.end - p.start,
                            bytes: p.bytes,
                            first_timestamp: p.first_timestamp,
                            last_timestamp: p.last_timestamp,
                        })
                        .collect(),
                })
                .collect(),
        }
    }
}

/// Answers `/v1/snapshots[/{id}]`; `rest` is the path after `snapshots`.
pub async fn handle(
    broker: &Arc<Broker>,
    request: Request<Incoming>,
    rest: &[&str],
) -> Response<Full<Bytes>> {
    let method = request.method().clone();
    match (method, rest) {
        (Method::GET, []) => {
            let all: Vec<SnapshotView> = broker
                .snapshots()
                .list()
                .iter()
                .map(|r| SnapshotView::of(r))
                .collect();
            json(StatusCode::OK, &all)
        }
        (Method::POST, []) => create(broker, request).await,
        (Method::GET, [id]) => match broker.snapshots().get(id) {
            Some(record) => json(StatusCode::OK, &SnapshotView::of(&record)),
            None => refused(&SnapshotError::Unknown {
                id: (*id).to_owned(),
            }),
        },
        (Method::DELETE, [id]) => match broker.snapshots().delete(id).await {
            Ok(record) => json(StatusCode::OK, &SnapshotView::of(&record)),
            Err(e) => refused(&e),
        },
        (_, [] | [_]) => error(
            StatusCode::METHOD_NOT_ALLOWED,
            "/v1/snapshots takes GET and POST; /v1/snapshots/{id} takes GET and DELETE",
        ),
        _ => error(StatusCode::NOT_FOUND, "not found"),
    }
}

async fn create(broker: &Arc<Broker>, request: Request<Incoming>) -> Response<Full<Bytes>> {
    let asked: CreateRequest = match json_body(request).await {
        Ok(asked) => asked,
        Err(response) => return response,
    };
    let mut topics = Vec::with_capacity(asked.topics.len());
    for name in &asked.topics {
        match broker.topic(name) {
            Some(topic) => topics.push(topic),
            None => return refused(&SnapshotError::UnknownTopic { name: name.clone() }),
        }
    }
    let spec = SnapshotSpec {
        id: asked.id,
        topics,
        ttl: asked.ttl_ms.map(Duration::from_millis),
        ephemeral: false,
    };
    match broker.take_snapshot(spec, SystemTime::now()).await {
        Ok(record) => json(StatusCode::CREATED, &SnapshotView::of(&record)),
        Err(e) => refused(&e),
    }
}

fn refused(e: &SnapshotError) -> Response<Full<Bytes>> {
    let status = match e {
        SnapshotError::Unknown { .. } | SnapshotError::UnknownTopic { .. } => StatusCode::NOT_FOUND,
        SnapshotError::Exists { .. } => StatusCode::CONFLICT,
        SnapshotError::TooMany { .. } => StatusCode::INSUFFICIENT_STORAGE,
        SnapshotError::Storage { .. } => StatusCode::INTERNAL_SERVER_ERROR,
        SnapshotError::NotWritten { .. } => StatusCode::SERVICE_UNAVAILABLE,
        SnapshotError::InvalidId { .. }
        | SnapshotError::NoTopics
        | SnapshotError::DuplicateTopic { .. }
        | SnapshotError::Unsupported { .. }
        | SnapshotError::InvalidTtl(_) => StatusCode::BAD_REQUEST,
    };
    error(status, &e.to_string())
}
