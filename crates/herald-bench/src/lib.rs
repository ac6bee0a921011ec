//! herald's partition-log benchmark: the in-process half of the Confluo
//! pub/sub experiment (`shared/seeds`), run against two baselines in the
//! same process.
//!
//! What it owns: the harness that measures write throughput (N publishers
//! appending to one partition) and read throughput (N subscribers each
//! reading the whole partition in fetch-sized chunks) for three systems:
//!
//! - herald's lock-free [`herald_log::Log`], on disk in a temporary directory;
//! - [`baselines::MutexLog`], an append path that takes a mutex, as Kafka's does;
//! - plain memcpy of the same bytes, the bound no log can beat.
//!
//! What it must not do: assert timings (the numbers go to a report, never to
//! a test verdict), or touch the log's internals (it uses the public API only).
//!
//! The path of a run: [`runner::run`] walks the [`settings::Settings`] plan,
//! the [`write`](mod@write) and [`read`] modules measure one [`threads::Sample`] per
//! repetition, [`report`] turns the samples into median rows, a table, a CSV
//! and the target verdicts, and [`chart`] draws the PNG.

pub mod baselines;
pub mod batches;
pub mod chart;
pub mod error;
pub mod figure;
pub mod herald;
pub mod machine;
pub mod read;
pub mod region;
pub mod report;
pub mod runner;
pub mod settings;
pub mod summary;
pub mod targets;
pub mod threads;
pub mod write;

pub use error::BenchError;
pub use settings::{BaselineMemory, Settings, System, Workload};
