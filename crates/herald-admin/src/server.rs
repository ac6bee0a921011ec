//! The admin accept loop: one task per connection, a cap on connections,
//! a timeout on reading request headers, and a stop on shutdown.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use herald_metrics::Metrics;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::net::TcpListener;
use tokio::sync::Semaphore;
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

use crate::api::OpenedBroker;
use crate::readiness::Readiness;
use crate::routes;

/// Most admin connections served at once; more are closed on accept.
pub const CONNECTIONS_MAX: usize = 64;
/// How long a client may take to send a request's headers.
pub const HEADER_READ_TIMEOUT: Duration = Duration::from_secs(10);

/// Updates the metrics sampled at scrape time (partition gauges, flush
/// counters, group offsets). Runs on a blocking thread, not the async
/// runtime, so it may block briefly; it should bound every wait.
pub type ScrapeRefresh = Box<dyn Fn(&Metrics) + Send + Sync>;

/// What request handling reads.
pub struct AdminState {
    /// Every metric.
    pub metrics: Arc<Metrics>,
    /// Called before each `/metrics` rendering, on a blocking thread.
    pub refresh: ScrapeRefresh,
    /// Answer of `/ready`.
    pub readiness: Readiness,
    /// The broker the API under `/v1/` acts on, once it is open.
    pub broker: OpenedBroker,
    /// What the API keeps between requests.
    pub api: crate::api::ApiState,
}

impl std::fmt::Debug for AdminState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AdminState")
            .field("readiness", &self.readiness)
            .finish_non_exhaustive()
    }
}

/// A bound admin HTTP listener.
#[derive(Debug)]
pub struct AdminServer {
    listener: TcpListener,
    state: Arc<AdminState>,
}

impl AdminServer {
    /// Binds `addr`; `/ready` answers from `readiness`, `/metrics` renders
    /// `metrics` after calling `refresh`, and the API under `/v1/` acts on
    /// `broker` once it is set.
    pub async fn bind(
        addr: SocketAddr,
        metrics: Arc<Metrics>,
        refresh: ScrapeRefresh,
        readiness: Readiness,
        broker: OpenedBroker,
    ) -> std::io::Result<Self> {
        let listener = TcpListener::bind(addr).await?;
        Ok(Self {
            listener,
            state: Arc::new(AdminState {
                metrics,
                refresh,
                readiness,
                broker,
                api: crate::api::ApiState::default(),
            }),
        })
    }

    /// The address actually bound.
    pub fn local_addr(&self) -> std::io::Result<SocketAddr> {
        self.listener.local_addr()
    }

    /// Where to hand the API the flow-control gate once it exists
    /// (`/v1/flow-control` answers 503 until then).
    pub fn flow_control(&self) -> crate::api::flow::OpenedFlowControl {
        Arc::clone(&self.state.api.flow)
    }

    /// Serves until `shutdown` is cancelled, then drops every connection.
    pub async fn run(self, shutdown: CancellationToken) {
        let connections = Arc::new(Semaphore::new(CONNECTIONS_MAX));
        let mut tasks = JoinSet::new();
        loop {
            tokio::select! {
                _ = shutdown.cancelled() => break,
                accepted = self.listener.accept() => match accepted {
                    Ok((stream, peer)) => {
                        let Ok(permit) = Arc::clone(&connections).try_acquire_owned() else {
                            tracing::warn!(%peer, "admin connection limit reached; closing new connection");
                            continue;
                        };
                        let state = Arc::clone(&self.state);
                        tasks.spawn(async move {
                            serve_connection(stream, peer, state).await;
                            drop(permit);
                        });
                    }
                    Err(e) => {
                        tracing::warn!(error = %e, "admin accept failed");
                        tokio::time::sleep(Duration::from_millis(50)).await;
                    }
                },
                Some(_) = tasks.join_next(), if !tasks.is_empty() => {}
            }
        }
        tasks.shutdown().await;
    }
}

async fn serve_connection(stream: tokio::net::TcpStream, peer: SocketAddr, state: Arc<AdminState>) {
    let service = service_fn(move |request| {
        let answer = routes::respond(&state, &request);
        let state = Arc::clone(&state);
        async move {
            let response = match answer {
                routes::Answer::Now(response) => crate::api::boxed(response),
                routes::Answer::Api => {
                    crate::api::handle(&state.broker, &state.api, peer, request).await
                }
                // The refresh samples the broker and may wait for the group
                // coordinator: keep it off the runtime's worker threads.
                routes::Answer::Scrape => {
                    match tokio::task::spawn_blocking(move || routes::scrape(&state)).await {
                        Ok(body) => crate::api::boxed(routes::metrics_response(body)),
                        Err(e) => {
                            tracing::error!(error = %e, "scrape task failed");
                            crate::api::boxed(routes::scrape_failed())
                        }
                    }
                }
            };
            Ok::<_, Infallible>(response)
        }
    });
    let served = http1::Builder::new()
        .timer(TokioTimer::new())
        .header_read_timeout(HEADER_READ_TIMEOUT)
        .serve_connection(TokioIo::new(stream), service)
        .await;
    if let Err(e) = served {
        tracing::debug!(%peer, error = %e, "admin connection ended with an error");
    }
}
