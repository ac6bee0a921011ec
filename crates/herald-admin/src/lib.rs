//! The admin HTTP listener of herald: `GET /metrics` (Prometheus text
//! format), `GET /health` (200 while the process runs) and `GET /ready`
//! (200 once the broker serves, 503 before that and while shutting down).
//! Under `/v1/` it serves the admin API (JSON): snapshots of topics
//! ([`api::snapshots`]). It is the operator's interface: bind it where
//! only operators reach it (the default is 127.0.0.1).
//!
//! A request's path: [`AdminServer::run`] accepts (at most
//! [`CONNECTIONS_MAX`] at once) → hyper parses one HTTP/1.1 request at a
//! time (headers within [`HEADER_READ_TIMEOUT`]) → [`routes::respond`];
//! a `/metrics` scrape, which samples the broker, then runs on tokio's
//! blocking pool ([`routes::scrape`]) so a slow sample never stalls the
//! runtime.

pub mod api;
mod readiness;
pub mod routes;
mod server;

pub use readiness::{HealthCheck, Readiness, ReadyState};
pub use server::{AdminServer, ScrapeRefresh, CONNECTIONS_MAX, HEADER_READ_TIMEOUT};
