//! The push listener: one port serving gRPC (HTTP/2), WebSocket and
//! Server-Sent Events (HTTP/1.1), with a bound on open connections.

use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use axum::routing::get;
use axum::Router;
use herald_push::PushEngine;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio_util::sync::CancellationToken;

use crate::config::GatewayConfig;
use crate::grpc::HeraldService;
use crate::proto::herald_server::HeraldServer;
use crate::{sse, websocket};

/// What every handler of the listener shares.
#[derive(Debug)]
pub(crate) struct Shared {
    pub(crate) engine: Arc<PushEngine>,
    pub(crate) max_message_bytes: usize,
    /// Fires when the broker shuts down: sessions say go-away and end.
    pub(crate) shutdown: CancellationToken,
    connections: AtomicUsize,
    max_connections: usize,
    refused: AtomicU64,
}

/// The push listener, bound and ready to serve.
pub struct GatewayServer {
    listener: TcpListener,
    shared: Arc<Shared>,
}

impl std::fmt::Debug for GatewayServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GatewayServer")
            .field("addr", &self.listener.local_addr().ok())
            .finish()
    }
}

/// Connection counts of the push listener.
#[derive(Debug, Clone)]
pub struct GatewayCounters(Arc<Shared>);

impl GatewayCounters {
    /// Connections open now.
    pub fn open(&self) -> usize {
        self.0.connections.load(Ordering::Relaxed)
    }

    /// Connections closed at once because the listener was full.
    pub fn refused(&self) -> u64 {
        self.0.refused.load(Ordering::Relaxed)
    }
}

/// Connections the kernel may hold waiting for `accept`. A reconnection
/// storm (every subscriber of a restarted load balancer coming back within
/// a second) arrives faster than one task accepts; past the backlog the
/// kernel drops SYNs and each client waits out a 1, 3, 7, 15 s retry.
/// Linux caps it at `net.core.somaxconn` (4,096 by default).
const ACCEPT_BACKLOG: u32 = 16_384;

/// A listening socket on `addr` with [`ACCEPT_BACKLOG`] and the address
/// reusable at once after a restart.
fn listen(addr: std::net::SocketAddr) -> io::Result<TcpListener> {
    let socket = if addr.is_ipv4() {
        tokio::net::TcpSocket::new_v4()?
    } else {
        tokio::net::TcpSocket::new_v6()?
    };
    socket.set_reuseaddr(true)?;
    socket.bind(addr)?;
    socket.listen(ACCEPT_BACKLOG)
}

impl GatewayServer {
    /// Binds the listener.
    pub async fn bind(config: GatewayConfig, engine: Arc<PushEngine>) -> io::Result<Self> {
        let listener = listen(config.listen)?;
        Ok(Self {
            listener,
            shared: Arc::new(Shared {
                engine,
                max_message_bytes: config.max_message_bytes,
                shutdown: CancellationToken::new(),
                connections: AtomicUsize::new(0),
                max_connections: config.max_connections,
                refused: AtomicU64::new(0),
            }),
        })
    }

    /// The bound address (the port, when bound to port 0).
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.listener.local_addr()
    }

    /// Its connection counts, for metrics.
    pub fn counters(&self) -> GatewayCounters {
        GatewayCounters(Arc::clone(&self.shared))
    }

    /// Serves until `shutdown`; then every session is told to go away and
    /// gets a few seconds to finish writing.
    pub async fn run(self, shutdown: CancellationToken) {
        let shared = self.shared;
        let service = HeraldService {
            engine: Arc::clone(&shared.engine),
            max_message_bytes: shared.max_message_bytes,
            shutdown: shared.shutdown.clone(),
        };
        let grpc = tonic::service::Routes::new(
            HeraldServer::new(service).max_decoding_message_size(shared.max_message_bytes),
        )
        .into_axum_router();
        let router = Router::new()
            .route("/v1/session", get(websocket::upgrade))
            .route("/v1/events", get(sse::events))
            .with_state(Arc::clone(&shared))
            .merge(grpc);
        let listener = Limited {
            inner: self.listener,
            shared: Arc::clone(&shared),
        };
        let sessions = shared.shutdown.clone();
        let graceful = shutdown.clone();
        let serve = axum::serve(listener, router).with_graceful_shutdown(async move {
            graceful.cancelled().await;
            sessions.cancel();
        });
        tokio::select! {
            result = serve => {
                if let Err(e) = result {
                    tracing::error!(error = %e, "push listener failed");
                }
            }
            _ = async {
                shutdown.cancelled().await;
                tokio::time::sleep(crate::driver::CLOSE_GRACE).await;
            } => {
                tracing::warn!("push connections still open after the grace period; closing them");
            }
        }
    }
}

/// The TCP listener with a bound on open connections: past it, a new
/// connection is closed at once (sessions past the engine's own session
/// limit get a go-away instead, so the bound here is a little higher).
/// Bytes a push connection may hold in its kernel send queue not yet
/// sent. What is queued there cannot be overtaken: with the default (no
/// limit, megabytes with autotuning) a high-priority delivery would wait
/// behind every normal one written before it. Beyond this, the queue stays
/// in the session's outbox, where priority applies.
const UNSENT_BYTES_MAX: libc::c_int = 128 * 1024;

/// Sets `TCP_NOTSENT_LOWAT` on `stream`; a kernel without it keeps its
/// default, which costs only the ordering above.
fn limit_unsent(stream: &tokio::net::TcpStream) {
    use std::os::fd::AsRawFd as _;
    let value = UNSENT_BYTES_MAX;
    // SAFETY: the fd is open for the call's duration (borrowed from
    // `stream`), and the option value is a c_int of the size given.
    let rc = unsafe {
        libc::setsockopt(
            stream.as_raw_fd(),
            libc::IPPROTO_TCP,
            libc::TCP_NOTSENT_LOWAT,
            std::ptr::addr_of!(value).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    if rc != 0 {
        tracing::debug!(error = %std::io::Error::last_os_error(), "TCP_NOTSENT_LOWAT not set");
    }
}

struct Limited {
    inner: TcpListener,
    shared: Arc<Shared>,
}

impl axum::serve::Listener for Limited {
    type Io = Counted;
    type Addr = SocketAddr;

    async fn accept(&mut self) -> (Self::Io, Self::Addr) {
        loop {
            match self.inner.accept().await {
                Ok((stream, addr)) => {
                    let open = self.shared.connections.fetch_add(1, Ordering::AcqRel);
                    if open >= self.shared.max_connections {
                        self.shared.connections.fetch_sub(1, Ordering::AcqRel);
                        self.shared.refused.fetch_add(1, Ordering::Relaxed);
                        tracing::debug!(%addr, "push listener full; connection closed");
                        drop(stream);
                        continue;
                    }
                    let _ = stream.set_nodelay(true);
                    limit_unsent(&stream);
                    let counted = Counted {
                        stream,
                        shared: Arc::clone(&self.shared),
                    };
                    return (counted, addr);
                }
                Err(e) => {
                    // Out of file descriptors, or a connection reset before
                    // it was accepted: wait a little rather than spin.
                    tracing::warn!(error = %e, "push listener accept failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
            }
        }
    }

    fn local_addr(&self) -> io::Result<Self::Addr> {
        self.inner.local_addr()
    }
}

/// A connection counted against the bound until it is dropped.
struct Counted {
    stream: TcpStream,
    shared: Arc<Shared>,
}

impl Drop for Counted {
    fn drop(&mut self) {
        self.shared.connections.fetch_sub(1, Ordering::AcqRel);
    }
}

impl AsyncRead for Counted {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().stream).poll_read(cx, buf)
    }
}

impl AsyncWrite for Counted {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().stream).poll_write(cx, buf)
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().stream).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().stream).poll_shutdown(cx)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().stream).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.stream.is_write_vectored()
    }
}
