//! herald's wire benchmark load generator: drives any broker that speaks
//! the Kafka protocol (herald, Apache Kafka) with the seed experiment's
//! load, cheaply enough that the broker, not the client, is the bottleneck.
//!
//! What it owns: Kafka framing over TCP with the `kafka-protocol` crate's
//! message types for the hot paths ([`wire`], [`fetch`]; topic setup goes
//! through herald's client, [`admin`]), the produce, consume and
//! end-to-end latency loads ([`produce`], [`consume`], [`latency`]), broker
//! CPU accounting ([`cpu`]), the loopback bound ([`loopback`]), the kernel
//! floors any broker pays per message ([`floor`]), the suite that walks the
//! plan ([`suite`], [`plan`]) and the report ([`report`]).
//!
//! What it must not do: allocate per message (batches are encoded once per
//! batch size and request frames once per publisher, with only the
//! correlation id patched), wait without a bound, or assert timings.
//!
//! The path of a run: [`suite::Suite::run`] creates a fresh topic, runs a
//! load between two [`cpu`] samples of the broker, and appends a
//! [`row::Row`] per point to a JSON-lines file; [`report`] reads the rows of
//! both brokers and writes the Markdown tables, the CSV and the chart.

pub mod admin;
pub mod clock;
pub mod connect;
pub mod consume;
pub mod cpu;
pub mod cpu_quota;
pub mod disk_hog;
pub mod error;
pub mod fetch;
pub mod floor;
pub mod flow_cli;
pub mod flow_eval;
pub mod flow_interleave;
pub mod histogram;
pub mod latency;
pub mod loopback;
pub mod plan;
pub mod produce;
pub mod progress;
pub mod push;
pub mod records;
pub mod report;
pub mod row;
pub mod security_bench;
pub mod security_cli;
pub mod suite;
pub mod wire;

pub use error::LoadError;
