//! The accept loop over every listener: one task per connection, a cap on
//! connections over all listeners, and a clean shutdown that lets every
//! connection answer what it has read.

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
use crate::flow_gate::FlowGate;
use crate::handlers::Context;
use crate::listener::{ListenerConfig, SecurityProtocol};
use herald_tls::TlsAcceptor;

/// A bound listener: its socket, its settings, and (for TLS protocols)
/// the acceptor made once from its TLS config.
struct Bound {
    socket: TcpListener,
    config: Arc<ListenerConfig>,
    tls: Option<TlsAcceptor>,
}

impl std::fmt::Debug for Bound {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Bound")
            .field("socket", &self.socket)
            .field("listener", &self.config.name)
            .field("tls", &self.tls.is_some())
            .finish()
    }
}

/// The bound Kafka listeners.
#[derive(Debug)]
pub struct KafkaServer {
    listeners: Vec<Bound>,
    broker: Arc<Broker>,
    config: KafkaConfig,
    metrics: Option<Arc<KafkaMetrics>>,
    flow: Arc<FlowGate>,
}

/// Why the listeners could not be bound.
#[derive(Debug, thiserror::Error)]
pub enum BindError {
    /// No listener configured.
    #[error("no Kafka listener is configured")]
    NoListener,
    /// A listener's address could not be bound.
    #[error("binding listener {name} on {addr}: {source}")]
    Bind {
        /// The listener's name.
        name: String,
        /// Its address.
        addr: SocketAddr,
        /// Why.
        source: std::io::Error,
    },
    /// A TLS protocol without a TLS config.
    #[error("listener {0} uses {1} but has no TLS certificate and key")]
    NoTls(String, SecurityProtocol),
    /// A SASL protocol without mechanisms.
    #[error("listener {0} uses {1} but offers no SASL mechanism")]
    NoMechanism(String, SecurityProtocol),
}

impl KafkaServer {
    /// Binds every listener's address. A listener advertising port 0
    /// advertises the port bound.
    pub async fn bind(mut config: KafkaConfig, broker: Arc<Broker>) -> Result<Self, BindError> {
        if config.listeners.is_empty() {
            return Err(BindError::NoListener);
        }
        let mut listeners = Vec::with_capacity(config.listeners.len());
        for listener in &mut config.listeners {
            let tls = match (&listener.tls, listener.protocol.uses_tls()) {
                (Some(tls), true) => Some(TlsAcceptor::from(Arc::clone(tls))),
                (None, true) => {
                    return Err(BindError::NoTls(listener.name.clone(), listener.protocol))
                }
                (_, false) => None,
            };
            if listener.protocol.uses_sasl() && listener.sasl_mechanisms.is_empty() {
                return Err(BindError::NoMechanism(
                    listener.name.clone(),
                    listener.protocol,
                ));
            }
            let bind_error = |source| BindError::Bind {
                name: listener.name.clone(),
                addr: listener.listen,
                source,
            };
            let socket = TcpListener::bind(listener.listen)
                .await
                .map_err(bind_error)?;
            let local = socket.local_addr().map_err(bind_error)?;
            // Binding port 0 picks a free port: advertise the real one.
            if listener.advertised_port == 0 {
                listener.advertised_port = local.port();
            }
            listener.listen = local;
            listeners.push(Bound {
                socket,
                config: Arc::new(listener.clone()),
                tls,
            });
        }
        let flow = Arc::new(FlowGate::new(config.flow_control));
        Ok(Self {
            listeners,
            broker,
            config,
            metrics: None,
            flow,
        })
    }

    /// The gate on produce work in flight, for changing its mode and limit
    /// while serving.
    pub fn flow_gate(&self) -> Arc<FlowGate> {
        Arc::clone(&self.flow)
    }

    /// Records request, byte and connection metrics into `metrics`.
    pub fn with_metrics(mut self, metrics: Arc<KafkaMetrics>) -> Self {
        self.metrics = Some(metrics);
        self
    }

    /// The address the first listener bound.
    pub fn local_addr(&self) -> std::io::Result<SocketAddr> {
        self.listeners[0].socket.local_addr()
    }

    /// Every listener's name, protocol and bound address.
    pub fn local_addrs(&self) -> Vec<(String, SecurityProtocol, SocketAddr)> {
        self.listeners
            .iter()
            .map(|l| (l.config.name.clone(), l.config.protocol, l.config.listen))
            .collect()
    }

    /// Each listener's name and the host and port its clients are told to
    /// connect to: what a cluster's other nodes advertise for this node to
    /// clients of the listener of that name.
    pub fn advertised_endpoints(&self) -> Vec<(String, String, u16)> {
        self.listeners
            .iter()
            .map(|l| {
                let port = match l.config.advertised_port {
                    0 => l.config.listen.port(),
                    port => port,
                };
                (
                    l.config.name.clone(),
                    l.config.advertised_host.clone(),
                    port,
                )
            })
            .collect()
    }

    /// Serves until `shutdown` is cancelled, then stops accepting, lets each
    /// connection answer the requests it has read (within the grace period)
    /// and returns.
    pub async fn run(self, shutdown: CancellationToken) {
        let Self {
            listeners,
            broker,
            config,
            metrics,
            flow,
        } = self;
        let context = Arc::new(
            Context::new(broker, config)
                .with_shutdown(shutdown.clone())
                .with_flow(flow),
        );
        if let Some(metrics) = &metrics {
            context.flow.report_to(Arc::clone(metrics));
        }
        let connections = Arc::new(Semaphore::new(context.config.max_connections));
        let mut tasks = JoinSet::new();
        loop {
            let accepts = listeners
                .iter()
                .map(|l| Box::pin(l.socket.accept()))
                .collect::<Vec<_>>();
            tokio::select! {
                _ = shutdown.cancelled() => break,
                (accepted, index, _) = futures_util::future::select_all(accepts) => match accepted {
                    Ok((stream, peer)) => {
                        let Ok(permit) = Arc::clone(&connections).try_acquire_owned() else {
                            tracing::warn!(%peer, max = context.config.max_connections, "connection limit reached; closing new connection");
                            drop(stream);
                            continue;
                        };
                        let listener = &listeners[index];
                        let (config, tls) = (Arc::clone(&listener.config), listener.tls.clone());
                        let context = Arc::clone(&context);
                        let token = shutdown.clone();
                        let metrics = metrics.clone();
                        tasks.spawn(async move {
                            match crate::quota::admit_connection(&context, peer.ip()) {
                                // Over its address's connection_creation_rate:
                                // held unread for the throttle time, then
                                // closed, as Kafka does (the client backs off
                                // and reconnects).
                                Some(delay) => {
                                    tracing::info!(%peer, delay_ms = delay.as_millis() as u64, "connection_creation_rate exceeded; closing the connection after the throttle time");
                                    tokio::select! {
                                        _ = token.cancelled() => {}
                                        _ = tokio::time::sleep(delay) => {}
                                    }
                                    drop(stream);
                                }
                                None => {
                                    connection::serve(stream, peer, context, config, tls, token, metrics).await;
                                }
                            }
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
        drop(listeners);
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
