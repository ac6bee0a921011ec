//! The TCP accept loop: one task per connection, a cap on connections, and
//! a clean shutdown that lets every connection answer what it has read.

use std::net::SocketAddr;
use std::sync::Arc;

use herald_broker::Broker;
use herald_metrics::KafkaMetrics;
use tokio::net::TcpListener;
use tokio::sync::Semaphore;
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

use crate::config::KafkaConfig;
use crate::connection;
use crate::handlers::Context;

/// A bound Kafka listener.
#[derive(Debug)]
pub struct KafkaServer {
    listener: TcpListener,
    broker: Arc<Broker>,
    config: KafkaConfig,
    metrics: Option<Arc<KafkaMetrics>>,
}

impl KafkaServer {
    /// Binds the listen address.
    pub async fn bind(mut config: KafkaConfig, broker: Arc<Broker>) -> std::io::Result<Self> {
        let listener = TcpListener::bind(config.listen).await?;
        let local = listener.local_addr()?;
        // Binding port 0 picks a free port: advertise the real one.
        if config.advertised_port == 0 {
            config.advertised_port = local.port();
        }
        Ok(Self {
            listener,
            broker,
            config,
            metrics: None,
        })
    }

    /// Records request, byte and connection metrics into `metrics`.
    pub fn with_metrics(mut self, metrics: Arc<KafkaMetrics>) -> Self {
        self.metrics = Some(metrics);
        self
    }

    /// The address actually bound.
    pub fn local_addr(&self) -> std::io::Result<SocketAddr> {
        self.listener.local_addr()
    }

    /// Serves until `shutdown` is cancelled, then stops accepting, lets each
    /// connection answer the requests it has read (within the grace period)
    /// and returns.
    pub async fn run(self, shutdown: CancellationToken) {
        let Self {
            listener,
            broker,
            config,
            metrics,
        } = self;
        let context = Arc::new(Context::new(broker, config).with_shutdown(shutdown.clone()));
        let connections = Arc::new(Semaphore::new(context.config.max_connections));
        let mut tasks = JoinSet::new();
        loop {
            tokio::select! {
                _ = shutdown.cancelled() => break,
                accepted = listener.accept() => match accepted {
                    Ok((stream, peer)) => {
                        let Ok(permit) = Arc::clone(&connections).try_acquire_owned() else {
                            tracing::warn!(%peer, max = context.config.max_connections, "connection limit reached; closing new connection");
                            drop(stream);
                            continue;
                        };
                        let context = Arc::clone(&context);
                        let token = shutdown.clone();
                        let metrics = metrics.clone();
                        tasks.spawn(async move {
                            connection::serve(stream, peer, context, token, metrics).await;
                            drop(permit);
                        });
                    }
                    // Accept errors (EMFILE, aborted handshakes) are
                    // transient: log and keep serving.
                    Err(e) => {
                        tracing::warn!(error = %e, "accept failed");
                        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                    }
                },
                Some(_) = tasks.join_next(), if !tasks.is_empty() => {}
            }
        }
        drop(listener);
        let grace = context.config.shutdown_grace;
        let drained =
            tokio::time::timeout(grace, async { while tasks.join_next().await.is_some() {} }).await;
        if drained.is_err() {
            tracing::warn!(
                remaining = tasks.len(),
                "connections still busy after the grace period; aborting them"
            );
            tasks.shutdown().await;
        }
    }
}
