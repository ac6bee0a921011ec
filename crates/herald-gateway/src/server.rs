//! The push listener: one port serving gRPC (HTTP/2), WebSocket,
//! Server-Sent Events and the token endpoint (HTTP/1.1), plaintext or
//! TLS, with a bound on open connections.

use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use axum::routing::{get, post};
use axum::Router;
use herald_auth::{PrincipalMapping, SaslMechanism, SecurityProtocol};
use herald_push::PushEngine;
use herald_tls::TlsAcceptor;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::admin_service::AdminService;
use crate::config::GatewayConfig;
use crate::grpc::HeraldService;
use crate::proto::herald_admin_server::HeraldAdminServer;
use crate::proto::herald_server::HeraldServer;
use crate::{sse, token_endpoint, websocket};

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
    /// Its security protocol: with SASL, clients must log in.
    pub(crate) protocol: SecurityProtocol,
    /// The mechanisms a hello may log in with.
    pub(crate) sasl_mechanisms: Vec<SaslMechanism>,
    /// Longest (and default) lifetime of the tokens `/v1/token` issues.
    pub(crate) token_lifetime: Duration,
    /// The TLS config, with ALPN for HTTP/2 (TLS protocols only).
    tls: Option<Arc<herald_tls::ServerConfig>>,
    principal_mapping: PrincipalMapping,
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
        let tls = match (&config.tls, config.protocol.uses_tls()) {
            (Some(tls), true) => {
                // gRPC clients insist on HTTP/2 chosen by ALPN; browsers
                // and curl speak either.
                let mut tls = (**tls).clone();
                tls.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
                Some(Arc::new(tls))
            }
            (None, true) => {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidInput,
                    format!(
                        "the push listener uses {} but has no TLS certificate and key",
                        config.protocol
                    ),
                ))
            }
            (_, false) => None,
        };
        Ok(Self {
            listener,
            shared: Arc::new(Shared {
                engine,
                max_message_bytes: config.max_message_bytes,
                shutdown: CancellationToken::new(),
                connections: AtomicUsize::new(0),
                max_connections: config.max_connections,
                refused: AtomicU64::new(0),
                protocol: config.protocol,
                sasl_mechanisms: config.sasl_mechanisms,
                token_lifetime: config.token_lifetime,
                tls,
                principal_mapping: config.principal_mapping,
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
            shared: Arc::clone(&shared),
        };
        let admin = AdminService {
            shared: Arc::clone(&shared),
        };
        let grpc = tonic::service::Routes::new(
            HeraldServer::new(service).max_decoding_message_size(shared.max_message_bytes),
        )
        .add_service(HeraldAdminServer::new(admin))
        .into_axum_router();
        let router = Router::new()
            .route("/v1/session", get(websocket::upgrade))
            .route("/v1/events", get(sse::events))
            .route("/v1/token", post(token_endpoint::issue))
            .with_state(Arc::clone(&shared))
            .merge(grpc);
        let local_addr = self.listener.local_addr();
        let (ready_tx, ready_rx) = mpsc::channel(ACCEPTED_QUEUE);
        let acceptor = tokio::spawn(accept_loop(
            self.listener,
            Arc::clone(&shared),
            ready_tx,
            shutdown.clone(),
        ));
        let listener = Accepted {
            ready: ready_rx,
            local_addr,
        };
        let sessions = shared.shutdown.clone();
        let graceful = shutdown.clone();
        let app = router.into_make_service_with_connect_info::<Peer>();
        let serve = axum::serve(listener, app).with_graceful_shutdown(async move {
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
        acceptor.abort();
    }
}

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

/// Connections accepted (and, on TLS, through their handshake) and not
/// yet taken by the HTTP server.
const ACCEPTED_QUEUE: usize = 1024;

/// Longest a client may take over its TLS handshake.
const TLS_HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// What the listener knows of a connection, for the requests on it.
#[derive(Debug, Clone)]
pub(crate) struct Peer {
    /// The client's address.
    pub(crate) addr: SocketAddr,
    /// On a TLS listener, the principal its certificate maps to, if it
    /// showed one.
    pub(crate) certificate_principal: Option<String>,
}

impl axum::extract::connect_info::Connected<axum::serve::IncomingStream<'_, Accepted>> for Peer {
    fn connect_info(stream: axum::serve::IncomingStream<'_, Accepted>) -> Self {
        stream.io().peer.clone()
    }
}

/// Accepts connections, bounds how many are open (past the bound a new
/// connection is closed at once; sessions past the engine's own session
/// limit get a go-away instead, so the bound here is a little higher), and
/// runs each TLS
/// handshake in a task of its own (a slow or silent client must not hold
/// up the others); hands each ready connection to the HTTP server.
async fn accept_loop(
    listener: TcpListener,
    shared: Arc<Shared>,
    ready: mpsc::Sender<(Counted, SocketAddr)>,
    shutdown: CancellationToken,
) {
    loop {
        let accepted = tokio::select! {
            accepted = listener.accept() => accepted,
            _ = shutdown.cancelled() => return,
        };
        let (stream, addr) = match accepted {
            Ok(accepted) => accepted,
            Err(e) => {
                // Out of file descriptors, or a connection reset before
                // it was accepted: wait a little rather than spin.
                tracing::warn!(error = %e, "push listener accept failed");
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        let open = shared.connections.fetch_add(1, Ordering::AcqRel);
        let slot = Slot(Arc::clone(&shared));
        if open >= shared.max_connections {
            shared.refused.fetch_add(1, Ordering::Relaxed);
            tracing::debug!(%addr, "push listener full; connection closed");
            continue;
        }
        let _ = stream.set_nodelay(true);
        limit_unsent(&stream);
        let Some(acceptor) = shared.tls.clone().map(TlsAcceptor::from) else {
            let peer = Peer {
                addr,
                certificate_principal: None,
            };
            let counted = Counted {
                stream: Transport::Plain(stream),
                peer,
                _slot: slot,
            };
            if ready.send((counted, addr)).await.is_err() {
                return;
            }
            continue;
        };
        let shared = Arc::clone(&shared);
        let ready = ready.clone();
        tokio::spawn(async move {
            let tls = match herald_tls::accept(&acceptor, stream, TLS_HANDSHAKE_TIMEOUT).await {
                Ok(tls) => tls,
                Err(e) => {
                    tracing::info!(%addr, error = %e, "push connection closed before its TLS session began");
                    return;
                }
            };
            let subject = tls
                .get_ref()
                .1
                .peer_certificates()
                .and_then(herald_tls::client_subject);
            let certificate_principal = match subject {
                None => None,
                Some(subject) => match shared.principal_mapping.map(&subject) {
                    Some(name) => Some(format!("User:{name}")),
                    None => {
                        tracing::info!(%addr, %subject, "no principal mapping rule applies to the client certificate; closing");
                        return;
                    }
                },
            };
            let counted = Counted {
                stream: Transport::Tls(Box::new(tls)),
                peer: Peer {
                    addr,
                    certificate_principal,
                },
                _slot: slot,
            };
            let _ = ready.send((counted, addr)).await;
        });
    }
}

/// The connections [`accept_loop`] made ready, as the HTTP server takes
/// them.
pub(crate) struct Accepted {
    ready: mpsc::Receiver<(Counted, SocketAddr)>,
    local_addr: io::Result<SocketAddr>,
}

impl axum::serve::Listener for Accepted {
    type Io = Counted;
    type Addr = SocketAddr;

    async fn accept(&mut self) -> (Self::Io, Self::Addr) {
        match self.ready.recv().await {
            Some(ready) => ready,
            // The accept loop ended (shutdown): nothing more will come.
            None => std::future::pending().await,
        }
    }

    fn local_addr(&self) -> io::Result<Self::Addr> {
        match &self.local_addr {
            Ok(addr) => Ok(*addr),
            Err(e) => Err(io::Error::new(e.kind(), e.to_string())),
        }
    }
}

/// A place in the bound on open connections, given back when dropped.
struct Slot(Arc<Shared>);

impl Drop for Slot {
    fn drop(&mut self) {
        self.0.connections.fetch_sub(1, Ordering::AcqRel);
    }
}

/// A connection's byte stream: TCP, or TLS over it.
enum Transport {
    Plain(TcpStream),
    Tls(Box<herald_tls::TlsStream<TcpStream>>),
}

/// A connection counted against the bound until it is dropped.
pub(crate) struct Counted {
    stream: Transport,
    peer: Peer,
    _slot: Slot,
}

impl AsyncRead for Counted {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        match &mut self.get_mut().stream {
            Transport::Plain(s) => Pin::new(s).poll_read(cx, buf),
            Transport::Tls(s) => Pin::new(s.as_mut()).poll_read(cx, buf),
        }
    }
}

impl AsyncWrite for Counted {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        match &mut self.get_mut().stream {
            Transport::Plain(s) => Pin::new(s).poll_write(cx, buf),
            Transport::Tls(s) => Pin::new(s.as_mut()).poll_write(cx, buf),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match &mut self.get_mut().stream {
            Transport::Plain(s) => Pin::new(s).poll_flush(cx),
            Transport::Tls(s) => Pin::new(s.as_mut()).poll_flush(cx),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match &mut self.get_mut().stream {
            Transport::Plain(s) => Pin::new(s).poll_shutdown(cx),
            Transport::Tls(s) => Pin::new(s.as_mut()).poll_shutdown(cx),
        }
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        match &mut self.get_mut().stream {
            Transport::Plain(s) => Pin::new(s).poll_write_vectored(cx, bufs),
            Transport::Tls(s) => Pin::new(s.as_mut()).poll_write_vectored(cx, bufs),
        }
    }

    fn is_write_vectored(&self) -> bool {
        match &self.stream {
            Transport::Plain(s) => s.is_write_vectored(),
            Transport::Tls(s) => s.is_write_vectored(),
        }
    }
}
