//! A small Kafka client, written on the wire protocol with `kafka-protocol`
//! and tokio, for the CLI's subcommands. It talks to one broker (herald is
//! a single node): [`connection`] frames requests and checks the broker
//! serves the versions used, [`records`] encodes and decodes record batches
//! v2, [`admin`] wraps the topic APIs, [`data`] produce, fetch and list
//! offsets, [`groups`] consumer groups (admin and member side), [`member`]
//! a consumer group member for `consume --group`, [`errors`]
//! turns Kafka error codes into one-line reasons.

pub mod admin;
pub mod connection;
pub mod data;
pub mod errors;
pub mod groups;
pub mod member;
pub mod partitioner;
pub mod records;

pub use connection::Connection;

use kafka_protocol::messages::TopicName;
use kafka_protocol::protocol::StrBytes;

/// A topic name as the protocol types carry it.
pub(crate) fn topic_name(name: &str) -> TopicName {
    TopicName(wire_str(name))
}

/// A string as the protocol types carry it.
pub(crate) fn wire_str(value: &str) -> StrBytes {
    StrBytes::from_string(value.to_owned())
}
pub use records::{Header, Record};
