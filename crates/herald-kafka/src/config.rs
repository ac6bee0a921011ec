//! Settings of the Kafka listener.

use std::net::SocketAddr;
use std::time::Duration;

use crate::flow_gate::FlowControlConfig;
use crate::listener::ListenerConfig;

/// Default largest request frame (Kafka's `socket.request.max.bytes`).
pub const MAX_FRAME_BYTES_DEFAULT: usize = 100 * 1024 * 1024;

/// How the Kafka front end listens and what it tells clients.
#[derive(Debug, Clone)]
pub struct KafkaConfig {
    /// The listeners, at least one; clients are told the address of the
    /// listener they connected to (Metadata, FindCoordinator,
    /// DescribeCluster).
    pub listeners: Vec<ListenerConfig>,
    /// Largest request frame accepted; a larger size prefix closes the
    /// connection before anything is allocated for it.
    pub max_frame_bytes: usize,
    /// Connections beyond this (over all listeners) are closed as soon as
    /// they are accepted.
    pub max_connections: usize,
    /// Requests read from one connection and not yet answered; reading
    /// pauses at this many (pipelining, with back-pressure).
    pub max_in_flight_requests: usize,
    /// Bytes of request frames read and not yet answered, over all
    /// connections (Kafka's `queued.max.request.bytes`); reading pauses
    /// when it is used up. Never less than `max_frame_bytes`.
    pub max_request_bytes_in_flight: usize,
    /// Upper bound on a fetch's `max_wait_ms`.
    pub fetch_wait_max: Duration,
    /// How long shutdown waits for connections to finish their requests.
    pub shutdown_grace: Duration,
    /// The broker-wide limit on produce records in flight (off by
    /// default).
    pub flow_control: FlowControlConfig,
}

impl KafkaConfig {
    /// Defaults for one PLAINTEXT listener on `listen`, advertising the
    /// same address.
    pub fn new(listen: SocketAddr) -> Self {
        Self {
            listeners: vec![ListenerConfig::plaintext(listen)],
            max_frame_bytes: MAX_FRAME_BYTES_DEFAULT,
            max_connections: 10_000,
            max_in_flight_requests: 16,
            max_request_bytes_in_flight: 512 * 1024 * 1024,
            fetch_wait_max: Duration::from_secs(30),
            shutdown_grace: Duration::from_secs(10),
            flow_control: FlowControlConfig::default(),
        }
    }
}
