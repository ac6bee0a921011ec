//! One client connection: a reader that frames requests, a processor that
//! answers them one at a time in arrival order, and a writer that sends the
//! responses, all bounded by a per-connection in-flight limit. Requests are
//! processed in order (as Kafka does), so a producer's pipelined batches are
//! appended in the order it sent them.

use std::net::SocketAddr;
use std::os::fd::AsRawFd;
use std::sync::{Arc, OnceLock};
use std::time::Instant;

use bytes::{Buf, BufMut, Bytes, BytesMut};
use herald_broker::storage::FileRegion;
use herald_metrics::KafkaMetrics;
use kafka_protocol::messages::ApiKey;
use tokio::io::{
    AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, BufWriter, Interest, WriteHalf,
};
use tokio::net::tcp::OwnedWriteHalf;
use tokio::net::TcpStream;
use tokio::sync::{mpsc, OwnedSemaphorePermit, Semaphore};
use tokio_util::sync::CancellationToken;

use crate::codec::{check_frame_length, Chunk, FrameError, ResponseFrame, LENGTH_PREFIX_BYTES};
use crate::flow_gate::FlowTicket;
use crate::frame_buffers::FrameBuffers;
use crate::handlers::{self, Context, Outcome};
use crate::listener::ListenerConfig;
use crate::quota::Verdict;
use crate::session::Session;
use herald_tls::TlsAcceptor;

/// Bytes asked of the socket per read while a frame is incomplete.
const READ_CHUNK_BYTES: usize = 64 * 1024;
/// Writer buffer; response chunks at least this large bypass it.
const WRITE_BUFFER_BYTES: usize = 64 * 1024;
/// Record chunks at least this large go out with `sendfile(2)` from their
/// segment file; smaller ones are copied into the write buffer, where one
/// system call carries several of them.
const SENDFILE_BYTES_MIN: usize = 16 * 1024;

/// What a request holds from the moment its size is known until its
/// response is written: a slot of the connection's in-flight limit and its
/// frame's bytes of the server-wide request-memory budget.
struct Permit {
    _slot: OwnedSemaphorePermit,
    _bytes: OwnedSemaphorePermit,
}

/// Longest a TLS handshake may take.
const TLS_HANDSHAKE_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);

/// Serves one connection of `listener` until the peer closes it, a
/// protocol error or a failed authentication closes it, or shutdown
/// (after answering every request already read). On a TLS listener the
/// handshake comes first, and a client certificate's subject, through the
/// listener's mapping rules, is the client's principal.
pub(crate) async fn serve(
    stream: TcpStream,
    peer: SocketAddr,
    ctx: Arc<Context>,
    listener: Arc<ListenerConfig>,
    tls: Option<TlsAcceptor>,
    shutdown: CancellationToken,
    metrics: Option<Arc<KafkaMetrics>>,
) {
    let _counted = metrics.as_ref().map(|m| m.connection_opened());
    let metrics = metrics.as_deref();
    if let Err(e) = stream.set_nodelay(true) {
        tracing::debug!(%peer, error = %e, "TCP_NODELAY failed");
    }
    tracing::debug!(%peer, listener = %listener.name, "connection opened");
    let Some(acceptor) = tls else {
        let session = Session::new(listener, Some(peer), None);
        let (read_half, write_half) = stream.into_split();
        serve_io(read_half, write_half, &ctx, &session, &shutdown, metrics).await;
        tracing::debug!(%peer, "connection closed");
        return;
    };
    let tls = match herald_tls::accept(&acceptor, stream, TLS_HANDSHAKE_TIMEOUT).await {
        Ok(tls) => tls,
        Err(e) => {
            tracing::info!(%peer, listener = %listener.name, error = %e, "TLS connection refused");
            return;
        }
    };
    let subject = tls
        .get_ref()
        .1
        .peer_certificates()
        .and_then(herald_tls::client_subject);
    let principal = match subject {
        None => None,
        Some(subject) => match listener.principal_mapping.map(&subject) {
            Some(name) => Some(format!("User:{name}")),
            None => {
                tracing::info!(%peer, listener = %listener.name, %subject, "no principal mapping rule applies to the client certificate; closing");
                return;
            }
        },
    };
    let session = Session::new(listener, Some(peer), principal);
    let (read_half, write_half) = tokio::io::split(tls);
    serve_io(read_half, write_half, &ctx, &session, &shutdown, metrics).await;
    tracing::debug!(%peer, "connection closed");
}

/// Reads, answers and writes until the connection ends.
async fn serve_io<R, W>(
    read_half: R,
    write_half: W,
    ctx: &Context,
    session: &Session,
    shutdown: &CancellationToken,
    metrics: Option<&KafkaMetrics>,
) where
    R: AsyncRead + Unpin,
    W: ResponseSink,
{
    let peer = peer_of(session);
    // A client known from its listener (no SASL) counts against its
    // tenant now; a SASL client once it authenticates.
    if let Some(principal) = session.principal() {
        match ctx.broker.admit_tenant_connection(&principal) {
            Ok(slot) => session.hold_tenant_connection(slot),
            Err(over) => {
                tracing::info!(%peer, %principal, reason = %over, "connection refused");
                return;
            }
        }
    }
    let limit = ctx.config.max_in_flight_requests.max(1);
    let in_flight = Arc::new(Semaphore::new(limit));
    let (requests, request_rx) = mpsc::channel::<(Bytes, Admitted, Permit)>(limit);
    let (responses, response_rx) = mpsc::channel::<(ResponseFrame, Permit)>(limit);
    tokio::join!(
        read_requests(read_half, ctx, session, in_flight, requests, shutdown, metrics),
        process_requests(ctx, session, request_rx, responses, metrics),
        write_responses(write_half, response_rx, peer, metrics),
    );
}

/// Where responses are written: a plain socket may send record chunks
/// from their segment files with `sendfile(2)`; a TLS stream must encrypt
/// them, so copies.
pub(crate) trait ResponseSink: AsyncWrite + Unpin {
    /// The socket, when bytes may go to it straight from a file.
    fn sendfile_socket(&self) -> Option<&TcpStream>;
}

impl ResponseSink for OwnedWriteHalf {
    fn sendfile_socket(&self) -> Option<&TcpStream> {
        Some(self.as_ref())
    }
}

impl<S: AsyncRead + AsyncWrite + Unpin> ResponseSink for WriteHalf<S> {
    fn sendfile_socket(&self) -> Option<&TcpStream> {
        None
    }
}

/// What was decided of a frame as it was read.
struct Admitted {
    verdict: Verdict,
    flow: Option<FlowTicket>,
}

/// The client's address, for logs (unspecified when unknown).
fn peer_of(session: &Session) -> SocketAddr {
    session
        .peer()
        .unwrap_or_else(|| SocketAddr::from(([0, 0, 0, 0], 0)))
}

async fn read_requests<R: AsyncRead + Unpin>(
    mut socket: R,
    ctx: &Context,
    session: &Session,
    in_flight: Arc<Semaphore>,
    requests: mpsc::Sender<(Bytes, Admitted, Permit)>,
    shutdown: &CancellationToken,
    metrics: Option<&KafkaMetrics>,
) {
    let peer = peer_of(session);
    let mut buf = BytesMut::with_capacity(READ_CHUNK_BYTES);
    loop {
        let next = async {
            // A client its quota throttled is not read from meanwhile (as
            // Kafka mutes its channel): it cannot send more by ignoring
            // `throttle_time_ms`, as librdkafka does.
            while let Some(pause) = session.quotas().pause_left(ctx.broker.quota_buckets()) {
                if let Some(metrics) = metrics {
                    metrics.record_quota_pause(pause.as_secs_f64());
                }
                tokio::time::sleep(pause).await;
            }
            let slot = Arc::clone(&in_flight).acquire_owned().await.ok()?;
            let result = async {
                type Read = Result<Option<(Bytes, Admitted, Permit)>, ReadError>;
                let Some(size) =
                    read_prefix(&mut socket, &mut buf, ctx.config.max_frame_bytes).await?
                else {
                    return Read::Ok(None);
                };
                // Reserve the frame's bytes of the shared budget before
                // reading its body: under memory pressure reading pauses.
                let bytes = Arc::clone(&ctx.request_memory)
                    .acquire_many_owned(size as u32)
                    .await
                    .map_err(|_| ReadError::Closed)?;
                let frame = read_body(&mut socket, &mut buf, size, &ctx.frame_buffers).await?;
                // Charged before the next frame is read, so a throttled
                // client's next request waits for the pause.
                let verdict = crate::quota::admit_frame(ctx, session, &frame);
                // A produce waits for room under the flow-control limit,
                // holding the reader as a quota's pause does.
                let flow = match crate::quota::produce_client_id(&frame) {
                    Some(_) => ctx.flow.admit().await,
                    None => None,
                };
                Ok(Some((
                    frame,
                    Admitted { verdict, flow },
                    Permit {
                        _slot: slot,
                        _bytes: bytes,
                    },
                )))
            };
            match result.await {
                Ok(item) => item,
                Err(e) => {
                    if buf.starts_with(&[22, 3]) {
                        tracing::info!(%peer, "a TLS client on a plaintext listener; closing (configure the client for PLAINTEXT or connect to a TLS listener)");
                    } else {
                        tracing::info!(%peer, error = %e, "closing connection");
                    }
                    None
                }
            }
        };
        let item = tokio::select! {
            item = next => item,
            _ = shutdown.cancelled() => None,
            _ = requests.closed() => None,
        };
        let Some(item) = item else { return };
        if requests.send(item).await.is_err() {
            return;
        }
    }
}

#[derive(Debug, thiserror::Error)]
enum ReadError {
    #[error(transparent)]
    Frame(#[from] FrameError),
    #[error("connection closed in the middle of a frame")]
    Truncated,
    #[error(transparent)]
    Io(#[from] std::io::Error),
    #[error("server is shutting down")]
    Closed,
}

/// Reads until the next frame's size prefix is in `buf` and checks it
/// against the limit; `None` at a clean end of stream.
async fn read_prefix<R: AsyncRead + Unpin>(
    socket: &mut R,
    buf: &mut BytesMut,
    max: usize,
) -> Result<Option<usize>, ReadError> {
    while buf.len() < LENGTH_PREFIX_BYTES {
        buf.reserve(READ_CHUNK_BYTES);
        if socket.read_buf(buf).await? == 0 {
            return if buf.is_empty() {
                Ok(None)
            } else {
                Err(ReadError::Truncated)
            };
        }
    }
    Ok(Some(check_frame_length(
        [buf[0], buf[1], buf[2], buf[3]],
        max,
    )?))
}

/// Reads the body of a frame of `size` bytes whose prefix is in `buf`.
async fn read_body<R: AsyncRead + Unpin>(
    socket: &mut R,
    buf: &mut BytesMut,
    size: usize,
    pool: &Arc<FrameBuffers>,
) -> Result<Bytes, ReadError> {
    let whole = LENGTH_PREFIX_BYTES + size;
    if buf.len() < whole && size > READ_CHUNK_BYTES && pool.serves(size) {
        return read_large_body(socket, buf, size, pool).await;
    }
    // Room grows only as bytes actually arrive, never by the declared size.
    while buf.len() < whole {
        buf.reserve((whole - buf.len()).min(READ_CHUNK_BYTES * 16));
        if socket.read_buf(buf).await? == 0 {
            return Err(ReadError::Truncated);
        }
    }
    buf.advance(LENGTH_PREFIX_BYTES);
    Ok(buf.split_to(size).freeze())
}

/// Reads a large frame's body straight into a recycled buffer of its size:
/// no copy as the connection buffer would grow, and no fresh pages to fault
/// in. The frame's bytes are already admitted by the request-memory budget.
async fn read_large_body<R: AsyncRead + Unpin>(
    socket: &mut R,
    buf: &mut BytesMut,
    size: usize,
    pool: &Arc<FrameBuffers>,
) -> Result<Bytes, ReadError> {
    buf.advance(LENGTH_PREFIX_BYTES);
    let mut body = pool.take(size);
    let buffered = buf.len().min(size);
    body.extend_from_slice(&buf[..buffered]);
    buf.advance(buffered);
    while body.len() < size {
        // Never past the frame: what follows belongs to the next one.
        let room = size - body.len();
        if socket.read_buf(&mut (&mut body).limit(room)).await? == 0 {
            return Err(ReadError::Truncated);
        }
    }
    Ok(pool.frame(body))
}

async fn process_requests(
    ctx: &Context,
    session: &Session,
    mut requests: mpsc::Receiver<(Bytes, Admitted, Permit)>,
    responses: mpsc::Sender<(ResponseFrame, Permit)>,
    metrics: Option<&KafkaMetrics>,
) {
    let peer = session.peer();
    while let Some((frame, admitted, permit)) = requests.recv().await {
        let started = Instant::now();
        let (api, frame_bytes) = (api_name(&frame), LENGTH_PREFIX_BYTES + frame.len());
        let outcome =
            handlers::handle_admitted(ctx, session, frame, admitted.verdict, admitted.flow).await;
        if let Some(metrics) = metrics {
            metrics.record_request(api, frame_bytes, started.elapsed());
        }
        match outcome {
            Outcome::Respond(response) => {
                if responses.send((response, permit)).await.is_err() {
                    return;
                }
            }
            Outcome::NoResponse => drop(permit),
            Outcome::Close(reason) => {
                tracing::info!(?peer, %reason, "closing connection");
                return;
            }
        }
        // Kafka closes a connection whose authentication failed once its
        // answer is written (dropping the sender lets the writer finish).
        if session.has_failed() {
            return;
        }
    }
}

async fn write_responses<W: ResponseSink>(
    socket: W,
    mut responses: mpsc::Receiver<(ResponseFrame, Permit)>,
    peer: SocketAddr,
    metrics: Option<&KafkaMetrics>,
) {
    let mut sendfile = socket.sendfile_socket().is_some();
    let mut writer = BufWriter::with_capacity(WRITE_BUFFER_BYTES, socket);
    while let Some((response, permit)) = responses.recv().await {
        if let Err(e) = write_frame(&mut writer, &response, &mut sendfile).await {
            tracing::debug!(%peer, error = %e, "write failed");
            return;
        }
        drop(permit);
        if let Some(metrics) = metrics {
            metrics.record_sent(response.len());
        }
        // Flush once no further response is ready, so pipelined responses
        // share a system call.
        if responses.is_empty() {
            if let Err(e) = writer.flush().await {
                tracing::debug!(%peer, error = %e, "flush failed");
                return;
            }
        }
    }
    let _ = writer.shutdown().await;
}

/// Writes one response. Large record chunks are sent from their segment
/// file; if the kernel refuses `sendfile` for this file system, `sendfile`
/// turns false and the connection copies from then on.
async fn write_frame<W: ResponseSink>(
    writer: &mut BufWriter<W>,
    response: &ResponseFrame,
    sendfile: &mut bool,
) -> std::io::Result<()> {
    for chunk in response.chunks() {
        match chunk {
            Chunk::File(bytes, region) if *sendfile && bytes.len() >= SENDFILE_BYTES_MIN => {
                // What is buffered goes first, to keep the response in order.
                writer.flush().await?;
                let Some(socket) = writer.get_ref().sendfile_socket() else {
                    *sendfile = false;
                    writer.write_all(bytes).await?;
                    continue;
                };
                if !send_file(socket, region).await? {
                    *sendfile = false;
                    writer.write_all(bytes).await?;
                }
            }
            other => writer.write_all(other.bytes()).await?,
        }
    }
    Ok(())
}

/// Sends `region` with `sendfile(2)`, waiting for the socket to be writable
/// as needed. Returns false, having sent nothing, when the file cannot be
/// sent that way.
async fn send_file(stream: &TcpStream, region: &FileRegion) -> std::io::Result<bool> {
    let start = libc::off_t::try_from(region.offset())
        .map_err(|_| std::io::Error::other("segment offset out of range"))?;
    let end = start + region.len() as libc::off_t;
    let mut offset = start;
    let (socket_fd, file_fd) = (stream.as_raw_fd(), region.fd().as_raw_fd());
    while offset < end {
        stream.writable().await?;
        let sent = stream.try_io(Interest::WRITABLE, || {
            // SAFETY: both descriptors are open (the stream and the region
            // are borrowed), and `offset` is a valid place for the kernel to
            // store the new position.
            let n =
                unsafe { libc::sendfile(socket_fd, file_fd, &mut offset, (end - offset) as usize) };
            if n < 0 {
                Err(std::io::Error::last_os_error())
            } else {
                Ok(n)
            }
        });
        match sent {
            Ok(0) => return Err(std::io::ErrorKind::WriteZero.into()),
            Ok(_) => {}
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
            Err(e)
                if offset == start
                    && matches!(e.raw_os_error(), Some(libc::EINVAL | libc::ENOSYS)) =>
            {
                return Ok(false)
            }
            Err(e) => return Err(e),
        }
    }
    Ok(true)
}

/// Kafka's name of the API a request frame is for (its first two bytes),
/// for metric labels; `"unknown"` for a key Kafka does not define.
fn api_name(frame: &[u8]) -> &'static str {
    static NAMES: OnceLock<Vec<Option<&'static str>>> = OnceLock::new();
    let names = NAMES.get_or_init(|| {
        // Built once from kafka-protocol's list; a few dozen short names.
        (0..=i16::from(u8::MAX))
            .map(|key| {
                ApiKey::try_from(key)
                    .ok()
                    .map(|api| &*Box::leak(format!("{api:?}").into_boxed_str()))
            })
            .collect()
    });
    let Some(key) = frame.get(..2) else {
        return "unknown";
    };
    let key = i16::from_be_bytes([key[0], key[1]]);
    usize::try_from(key)
        .ok()
        .and_then(|index| names.get(index).copied().flatten())
        .unwrap_or("unknown")
}
