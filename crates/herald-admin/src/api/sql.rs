//! SQL over topics and snapshots (built with the `sql` feature):
//!
//! - `POST /v1/sql` with `{"sql": "...", "snapshot": "ID", "format":
//!   "jsonl|csv|parquet|table", "max_memory_bytes": N, "max_scan_bytes":
//!   N, "timeout_ms": N}` (all but `sql` optional; the limits only lower
//!   the broker's): the results, streamed as they come, in the format
//!   asked for (JSON lines by default). The header `herald-snapshot` names
//!   the cut the query read.
//! - `GET /v1/topics/{name}/history?from_ms=T1&to_ms=T2&subject=S&format=F`:
//!   seed 003's history, the records of the topic (and of one subject,
//!   its key) with timestamps in `T1..T2`, in time order.
//!
//! A query that cannot start (bad SQL, an unknown table, over a limit at
//! once) is answered `{"error": ...}` with a status that says why; one
//! that fails after its first results ends the stream early (the body is
//! cut short, so no client takes it as complete). A client that goes away
//! cancels its query.

use std::sync::{Arc, OnceLock};
use std::time::Duration;

use http_body_util::{BodyExt, StreamBody};
use hyper::body::{Frame, Incoming};
use hyper::{Request, Response, StatusCode};
use serde::Deserialize;

use herald_auth::{Caller, Operation, ResourceType};
use herald_broker::{Broker, SnapshotError};
use herald_sql::{OutputFormat, SqlEngine, SqlError, SqlLimits, SqlRequest, TopicAccess};

use super::{error, json_body, AdminBody};

/// Queries running at once, at most.
pub const SQL_RUNNING_MAX: usize = 4;

/// The engine, started with the first query.
#[derive(Default)]
pub struct SqlService {
    engine: OnceLock<Result<Arc<SqlEngine>, String>>,
}

impl std::fmt::Debug for SqlService {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SqlService").finish_non_exhaustive()
    }
}

impl SqlService {
    fn engine(&self, broker: &Arc<Broker>) -> Result<Arc<SqlEngine>, String> {
        self.engine
            .get_or_init(|| {
                SqlEngine::new(Arc::clone(broker), SQL_RUNNING_MAX, SqlLimits::default())
                    .map(Arc::new)
                    .map_err(|e| e.to_string())
            })
            .clone()
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct SqlBody {
    sql: String,
    #[serde(default)]
    snapshot: Option<String>,
    #[serde(default)]
    format: Option<String>,
    #[serde(default)]
    max_memory_bytes: Option<usize>,
    #[serde(default)]
    max_scan_bytes: Option<u64>,
    #[serde(default)]
    timeout_ms: Option<u64>,
}

/// Answers `POST /v1/sql`.
pub async fn handle(
    service: &SqlService,
    broker: &Arc<Broker>,
    caller: Option<Caller>,
    request: Request<Incoming>,
) -> Response<AdminBody> {
    let body: SqlBody = match json_body(request).await {
        Ok(body) => body,
        Err(response) => return super::boxed(response),
    };
    let format = match body
        .format
        .as_deref()
        .unwrap_or("jsonl")
        .parse::<OutputFormat>()
    {
        Ok(format) => format,
        Err(message) => return super::boxed(error(StatusCode::BAD_REQUEST, &message)),
    };
    let ceiling = SqlLimits::default();
    let limits = SqlLimits {
        memory_bytes: body.max_memory_bytes.unwrap_or(ceiling.memory_bytes),
        scan_bytes: body.max_scan_bytes.unwrap_or(ceiling.scan_bytes),
        time: body.timeout_ms.map_or(ceiling.time, Duration::from_millis),
    };
    run(
        service,
        broker,
        SqlRequest {
            sql: body.sql,
            snapshot: body.snapshot,
            format,
            limits,
            access: access(broker, caller),
        },
    )
    .await
}

/// With authorization on, a query may read only the topics its caller
/// may READ.
fn access(broker: &Arc<Broker>, caller: Option<Caller>) -> TopicAccess {
    match caller {
        None => TopicAccess::everything(),
        Some(caller) => {
            let broker = Arc::clone(broker);
            TopicAccess::only(move |topic| {
                broker
                    .security()
                    .authorize(&caller, Operation::Read, ResourceType::Topic, topic)
            })
        }
    }
}

/// Answers `GET /v1/topics/{name}/history`.
pub async fn history(
    service: &SqlService,
    broker: &Arc<Broker>,
    caller: Option<Caller>,
    topic: &str,
    query: Option<&str>,
) -> Response<AdminBody> {
    let mut from = None;
    let mut to = None;
    let mut subject = None;
    let mut format = OutputFormat::Jsonl;
    for (name, value) in query
        .unwrap_or_default()
        .split('&')
        .filter_map(|p| p.split_once('='))
    {
        let value = percent_decode(value);
        match name {
            "from_ms" => from = value.parse::<i64>().ok(),
            "to_ms" => to = value.parse::<i64>().ok(),
            "subject" => subject = Some(value),
            "format" => match value.parse() {
                Ok(f) => format = f,
                Err(message) => return super::boxed(error(StatusCode::BAD_REQUEST, &message)),
            },
            _ => {}
        }
    }
    let (Some(from), Some(to)) = (from, to) else {
        return super::boxed(error(
            StatusCode::BAD_REQUEST,
            "history needs from_ms and to_ms (milliseconds since the epoch)",
        ));
    };
    // Whether the topic exists is the query's to say, after the caller's
    // access is checked; a name that could end the quoted identifier is
    // no topic's.
    if topic.contains('"') {
        return super::boxed(error(
            StatusCode::NOT_FOUND,
            &format!("unknown topic {topic}"),
        ));
    }
    run(
        service,
        broker,
        SqlRequest {
            sql: history_sql(
                topic,
                from,
                to,
                subject.as_deref(),
                format != OutputFormat::Csv,
            ),
            snapshot: None,
            format,
            limits: SqlLimits::default(),
            access: access(broker, caller),
        },
    )
    .await
}

/// The query history runs: topic names hold no quote (Kafka's rules); a
/// subject's quotes are doubled. CSV holds no map, so its rows leave the
/// headers out (`headers` false).
pub fn history_sql(
    topic: &str,
    from_ms: i64,
    to_ms: i64,
    subject: Option<&str>,
    headers: bool,
) -> String {
    let subject = subject.map_or(String::new(), |s| {
        format!(" AND key = '{}'", s.replace('\'', "''"))
    });
    let headers = if headers { ", headers" } else { "" };
    format!(
        "SELECT partition, \"offset\", timestamp, key, value{headers} FROM \"{topic}\" \
         WHERE timestamp >= to_timestamp_millis({from_ms}) AND timestamp < to_timestamp_millis({to_ms}){subject} \
         ORDER BY timestamp, partition, \"offset\""
    )
}

fn percent_decode(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'+' => out.push(b' '),
            b'%' => match text
                .get(i + 1..i + 3)
                .filter(|hex| hex.bytes().all(|b| b.is_ascii_hexdigit()))
                .and_then(|hex| u8::from_str_radix(hex, 16).ok())
            {
                Some(byte) => {
                    out.push(byte);
                    i += 2;
                }
                None => out.push(b'%'),
            },
            other => out.push(other),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

async fn run(
    service: &SqlService,
    broker: &Arc<Broker>,
    request: SqlRequest,
) -> Response<AdminBody> {
    let engine = match service.engine(broker) {
        Ok(engine) => engine,
        Err(message) => return super::boxed(error(StatusCode::INTERNAL_SERVER_ERROR, &message)),
    };
    let format = request.format;
    let answer = match engine.run(request).await {
        Ok(answer) => answer,
        Err(e) => return super::boxed(error(status(&e), &e.to_string())),
    };
    let snapshot = answer.snapshot;
    let chunks = futures_util::stream::unfold(answer.chunks, |mut chunks| async move {
        let chunk = chunks.recv().await?;
        let frame = chunk.map(Frame::data).map_err(|e| {
            tracing::warn!(error = %e, "a SQL query failed after its first results");
            std::io::Error::other(e.to_string())
        });
        Some((frame, chunks))
    });
    let mut response = Response::new(StreamBody::new(chunks).boxed_unsync());
    let headers = response.headers_mut();
    headers.insert(
        hyper::header::CONTENT_TYPE,
        hyper::header::HeaderValue::from_static(format.content_type()),
    );
    if let Ok(value) = hyper::header::HeaderValue::from_str(&snapshot) {
        headers.insert("herald-snapshot", value);
    }
    response
}

fn status(e: &SqlError) -> StatusCode {
    match e {
        SqlError::Busy { .. } => StatusCode::TOO_MANY_REQUESTS,
        SqlError::UnknownTable { .. } | SqlError::NotInSnapshot { .. } => StatusCode::NOT_FOUND,
        SqlError::Denied { .. } => StatusCode::FORBIDDEN,
        SqlError::Invalid(_) => StatusCode::BAD_REQUEST,
        SqlError::Cut(cut) => match cut {
            SnapshotError::TooMany { .. } => StatusCode::SERVICE_UNAVAILABLE,
            SnapshotError::Storage { .. } | SnapshotError::NotWritten { .. } => {
                StatusCode::INTERNAL_SERVER_ERROR
            }
            _ => StatusCode::BAD_REQUEST,
        },
        SqlError::OverLimit(_) | SqlError::TimeLimit { .. } => StatusCode::UNPROCESSABLE_ENTITY,
        SqlError::Execution(_) | SqlError::Output(_) => StatusCode::INTERNAL_SERVER_ERROR,
    }
}
