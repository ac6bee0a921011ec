//! A client of the broker's admin API (`/v1/` on the admin listener), for
//! the CLI: one HTTP/1.1 request per connection, JSON in and out.

use std::time::Duration;

use anyhow::Context as _;
use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::{Method, Request, StatusCode};
use hyper_util::rt::TokioIo;
use tokio::net::TcpStream;

/// Longest the CLI waits for one admin API answer to a JSON call.
const ANSWER_TIMEOUT: Duration = Duration::from_secs(120);

/// An admin listener and the credentials to call it with.
#[derive(Debug, Clone)]
pub struct AdminTarget {
    /// HOST:PORT.
    pub address: String,
    /// The `Authorization` header's value, if any.
    pub authorization: Option<String>,
}

/// Sends `method path` with `body` (JSON) to the admin listener `admin`
/// and returns the answer's JSON; a refusal becomes an error carrying the
/// broker's message.
pub async fn call(
    admin: &AdminTarget,
    method: Method,
    path: &str,
    body: Option<serde_json::Value>,
) -> anyhow::Result<serde_json::Value> {
    let bytes = match &body {
        Some(json) => Bytes::from(serde_json::to_vec(json)?),
        None => Bytes::new(),
    };
    send(admin, method, path, Full::new(bytes), Some(ANSWER_TIMEOUT)).await
}

/// [`call`] with a body streamed from `chunks` (a large upload, sent as it
/// is read). No overall timeout: the broker answers once the whole body
/// is in, and gives up on a body that stalls.
pub async fn call_streaming(
    admin: &AdminTarget,
    method: Method,
    path: &str,
    chunks: tokio::sync::mpsc::Receiver<std::io::Result<Bytes>>,
) -> anyhow::Result<serde_json::Value> {
    use tokio_stream::StreamExt as _;
    let frames = tokio_stream::wrappers::ReceiverStream::new(chunks)
        .map(|chunk| chunk.map(hyper::body::Frame::data));
    send(
        admin,
        method,
        path,
        http_body_util::StreamBody::new(frames),
        None,
    )
    .await
}

async fn send<B>(
    target: &AdminTarget,
    method: Method,
    path: &str,
    body: B,
    timeout: Option<Duration>,
) -> anyhow::Result<serde_json::Value>
where
    B: hyper::body::Body<Data = Bytes> + Send + 'static,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let (mut sender, driver) = connect(target).await?;
    let request = request(target, method, path, body)?;
    let exchange = async {
        let response = sender.send_request(request).await?;
        let status = response.status();
        let body = response.into_body().collect().await?.to_bytes();
        Ok::<_, hyper::Error>((status, body))
    };
    let answered = match timeout {
        Some(limit) => tokio::time::timeout(limit, exchange)
            .await
            .context("the admin listener did not answer in time")?,
        None => exchange.await,
    }
    .context("calling the admin API")?;
    driver.abort();
    let (status, body) = answered;
    let json: serde_json::Value = serde_json::from_slice(&body).with_context(|| {
        format!(
            "the admin API answered {status} with a body that is not JSON: {}",
            String::from_utf8_lossy(&body)
        )
    })?;
    if status.is_success() {
        return Ok(json);
    }
    let message = json
        .get("error")
        .and_then(|e| e.as_str())
        .unwrap_or("no reason given");
    if status == StatusCode::NOT_FOUND && json.get("error").is_none() {
        anyhow::bail!("the admin API has no {path}");
    }
    anyhow::bail!("{message} ({status})")
}

/// Sends `method path` with `body` (JSON) and writes the answer's body to
/// `out` as it arrives (SQL results); answers the answer's
/// `herald-snapshot` header. A refusal becomes an error carrying the
/// broker's message; a body cut short (the query failed after its first
/// results) is an error too. No overall timeout: the broker bounds the
/// query's time.
pub async fn download(
    target: &AdminTarget,
    method: Method,
    path: &str,
    body: Option<serde_json::Value>,
    out: &mut (impl tokio::io::AsyncWrite + Unpin),
) -> anyhow::Result<Option<String>> {
    use tokio::io::AsyncWriteExt as _;
    let (mut sender, driver) = connect(target).await?;
    let bytes = match &body {
        Some(json) => Bytes::from(serde_json::to_vec(json)?),
        None => Bytes::new(),
    };
    let response = sender
        .send_request(request(target, method, path, Full::new(bytes))?)
        .await
        .context("calling the admin API")?;
    let status = response.status();
    let snapshot = response
        .headers()
        .get("herald-snapshot")
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    let mut body = response.into_body();
    if !status.is_success() {
        let whole = body.collect().await?.to_bytes();
        driver.abort();
        let message = serde_json::from_slice::<serde_json::Value>(&whole)
            .ok()
            .and_then(|json| {
                json.get("error")
                    .and_then(|e| e.as_str())
                    .map(str::to_owned)
            })
            .unwrap_or_else(|| String::from_utf8_lossy(&whole).into_owned());
        anyhow::bail!("{message} ({status})");
    }
    while let Some(frame) = body.frame().await {
        let frame = frame.context(
            "the results were cut short: the query failed after its first results (the broker's log says why)",
        )?;
        if let Ok(data) = frame.into_data() {
            out.write_all(&data).await?;
        }
    }
    out.flush().await?;
    driver.abort();
    Ok(snapshot)
}

/// An HTTP/1.1 connection to the admin listener: the sender, and the task
/// driving the connection (aborted once the answer is read).
async fn connect<B>(
    target: &AdminTarget,
) -> anyhow::Result<(
    hyper::client::conn::http1::SendRequest<B>,
    tokio::task::JoinHandle<hyper::Result<()>>,
)>
where
    B: hyper::body::Body + Send + 'static,
    B::Data: Send,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let admin = target.address.as_str();
    let stream = TcpStream::connect(admin)
        .await
        .with_context(|| format!("connecting to the admin listener at {admin}"))?;
    let (sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
        .await
        .context("starting HTTP with the admin listener")?;
    Ok((sender, tokio::spawn(connection)))
}

/// `method path` with `body` (JSON) and the target's credentials.
fn request<B>(
    target: &AdminTarget,
    method: Method,
    path: &str,
    body: B,
) -> anyhow::Result<Request<B>> {
    let mut request = Request::builder()
        .method(method)
        .uri(path)
        .header(hyper::header::HOST, target.address.as_str())
        .header(hyper::header::CONTENT_TYPE, "application/json");
    if let Some(authorization) = &target.authorization {
        request = request.header(hyper::header::AUTHORIZATION, authorization);
    }
    Ok(request.body(body)?)
}
