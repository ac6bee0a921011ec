//! herald's push listener: the session protocol of
//! `proto/herald/v1/herald.proto` over gRPC and WebSocket, and a read-only
//! Server-Sent Events endpoint, all on one port, in front of the push
//! engine (`herald-push`).
//!
//! | path | transport |
//! |---|---|
//! | `/herald.v1.Herald/*` | gRPC (HTTP/2): `Session`, `Publish`, `PublishStream` |
//! | `/herald.v1.HeraldAdmin/*` | gRPC: tenants and namespaces |
//! | `/v1/session` | WebSocket: one encoded message per binary frame |
//! | `/v1/events` | Server-Sent Events, one subject or pattern, `Last-Event-ID` resume |
//! | `/v1/token` | `POST`: an access token for a user's name and password (OAuth 2.0 client credentials) |
//!
//! The listener is plaintext or TLS, and either lets anyone in (as
//! `User:ANONYMOUS` unless they log in) or requires a login (SASL
//! protocols): a token in the request, or a SASL exchange in the session's
//! hello. Subscribes and publishes are checked against the broker's ACLs.

mod admin_service;
mod auth;
mod codec;
mod config;
mod convert;
mod driver;
mod encode;
mod grpc;
mod publishes;
mod server;
mod sse;
mod token_endpoint;
mod websocket;

pub use codec::SessionCodec;
pub use config::{
    GatewayConfig, MAX_MESSAGE_BYTES_DEFAULT, PUSH_LISTEN_DEFAULT, TOKEN_LIFETIME_DEFAULT,
};
pub use server::{GatewayCounters, GatewayServer};

/// The session protocol's messages and the gRPC service, generated from
/// `proto/herald/v1/herald.proto` at build time (by protox and prost: no
/// system `protoc`).
pub mod proto {
    #![allow(missing_docs, clippy::all, clippy::pedantic)]
    tonic::include_proto!("herald.v1");
}
