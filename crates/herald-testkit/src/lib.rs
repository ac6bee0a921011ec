//! herald's test kit: what the integration tests of every crate share.
//!
//! - [`Server`] starts the real `herald serve` on `127.0.0.1:0` (Kafka and
//!   admin listeners both on free ports), in a data directory of the
//!   caller's, and returns once both listeners report they are ready (read
//!   from the broker's own log lines: no sleeps, no polling of the port).
//!   It is killed on drop; [`Server::terminate`] stops it with SIGTERM.
//! - [`Client`] is a blocking raw Kafka connection: whole request frames
//!   encoded by `kafka-protocol`, and bytes of the test's own choosing for
//!   the bad-input tests.
//! - [`requests`] builds the requests the tests share (create a topic,
//!   produce, fetch) and the batches they send.
//!
//! What it must not do: reach into the broker's process. Everything goes
//! over the wire, as a user's client would.

pub mod client;
pub mod requests;
pub mod server;

pub use client::{request_frame, Client, IO_TIMEOUT};
pub use server::{herald_binary, Server};
