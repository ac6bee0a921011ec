//! The Kafka wire-protocol front end of herald. It owns the TCP listener
//! (accept loop with a connection cap, one task per connection), framing
//! (size checked before any allocation), request decoding (with a guard
//! that makes `kafka-protocol` safe against hostile counts), one handler per
//! API under [`handlers`], and the mapping of broker errors to Kafka error
//! codes ([`error_code`]). It turns requests into `herald-broker` calls and
//! nothing more: no storage or coordination logic lives here.
//!
//! A request's path: [`server`] accepts → `connection` reads a frame
//! (bounded in-flight, pipelined) → [`codec::decode_request`] (the API's
//! row in [`registry`] gives its versions, body layout and type) → the
//! handler the row names → [`codec::encode_response`] (record bytes
//! spliced, not copied) → the connection writes responses in request order.
//! [`registry`] is the one list of served APIs.

pub mod codec;
pub mod config;
mod connection;
pub mod error_code;
pub mod flow_gate;
mod frame_buffers;
pub mod handlers;
pub mod listener;
pub mod quota;
pub mod registry;
pub mod server;
pub mod session;
#[cfg(test)]
mod test_support;

pub use config::KafkaConfig;
pub use listener::{ListenerConfig, SaslMechanism, SecurityProtocol};
pub use server::KafkaServer;
pub use session::Session;
