//! # herald-client: herald's Kafka client
//!
//! A small Kafka client on the wire protocol (`kafka-protocol` and tokio),
//! used by the CLI's subcommands and the load generator's topic setup. It
//! talks to one broker (herald is a single node): [`connection`] frames
//! requests and checks that the broker serves the versions used, [`records`]
//! encodes and decodes records (with `herald-records`), [`admin`] wraps the
//! topic APIs, [`data`] produce, fetch and list offsets, [`groups`] consumer
//! groups (admin and member side), [`member`] a consumer group member for
//! `consume --group`, [`partitioner`] Kafka's murmur2 key partitioner, and
//! [`errors`] turns Kafka error codes into one-line reasons. Failures are
//! [`ClientError`]s.
//!
//! What it must not do: know anything of the broker's internals; it speaks
//! only the Kafka protocol, as any client would.

pub mod admin;
pub mod cluster_admin;
pub mod connection;
pub mod data;
pub mod error;
pub mod errors;
pub mod groups;
pub mod member;
pub mod partitioner;
pub mod records;
pub mod security;
pub mod security_admin;

pub use connection::Connection;
pub use error::ClientError;
pub use security::{ConnectOptions, SaslLogin, Stream};

use kafka_protocol::messages::TopicName;
use kafka_protocol::protocol::StrBytes;

/// A topic name as the protocol types carry it.
pub fn topic_name(name: &str) -> TopicName {
    TopicName(wire_str(name))
}

/// A string as the protocol types carry it.
pub fn wire_str(value: &str) -> StrBytes {
    StrBytes::from_string(value.to_owned())
}
pub use records::{Header, Record};
