//! # herald-log: the partition log
//!
//! The storage of one partition: an append-only sequence of Kafka RecordBatch
//! v2 batches, stored verbatim in segment files, that many threads append to
//! without a lock while readers read committed batches without blocking
//! anyone.
//!
//! What it owns: batch validation, offset assignment, the lock-free append
//! protocol, segments and their indexes, durability (fsync policy, poisoning
//! on I/O failure, flush counts and latencies in [`FlushStats`]), crash
//! recovery and retention; and the history index (each key's batches, each
//! bucket's smallest timestamp), which [`Log::index_history`] builds behind
//! the tail, off the append path.
//!
//! What it must not do: know about sockets, Kafka requests, topics or an async
//! runtime. The broker above it calls [`Log`] directly.
//!
//! ## The path of an append
//!
//! 1. [`herald_records::validate`](fn@herald_records::validate) checks magic, length, CRC-32C and record
//!    count (the format is `herald-records`'; the log stores and indexes
//!    batches without decoding records).
//! 2. One compare-and-swap on the active segment's reservation word reserves
//!    the batch's offset range and byte range together; if the batch does
//!    not fit, the same compare-and-swap seals the segment and the writer
//!    creates or finds the next segment (the roll is part of the protocol).
//! 3. The writer copies the batch into the memory-mapped segment, writes its
//!    base offset in place (outside the CRC), fills the index buckets it
//!    covers, and sets its completion bit.
//! 4. Whichever writer finds the batch at the committed tail complete moves
//!    the tail past every contiguous completed batch, and wakes readers.
//!
//! A reader loads the high watermark, finds the segment and the batch through
//! the sparse index, and gets a zero-copy [`bytes::Bytes`] of whole batches.

#![warn(missing_docs)]
// Under loom only the protocol modules are built, for the models to use.
#![cfg_attr(herald_loom, allow(dead_code))]

mod commit;
mod config;
pub mod durable_file;
mod error;
mod extent;
mod flush_stats;
mod index;
mod reserve;
mod sync;

#[cfg(not(herald_loom))]
mod file_region;
#[cfg(not(herald_loom))]
mod history;
#[cfg(not(herald_loom))]
mod key_copy;
#[cfg(not(herald_loom))]
mod log;
#[cfg(not(herald_loom))]
mod mapped_file;
#[cfg(not(herald_loom))]
mod persist;
#[cfg(not(herald_loom))]
mod provisioner;
#[cfg(not(herald_loom))]
mod recovery;
#[cfg(not(herald_loom))]
mod segment;

#[cfg(all(test, herald_loom))]
mod loom_tests;

pub use config::{FlushPolicy, LogConfig, SEGMENT_BYTES_MAX, SEGMENT_BYTES_MIN};
pub use error::{AppendError, ConfigError, LogError, ReadError, RewriteError, TruncateError};
#[cfg(not(herald_loom))]
pub use file_region::FileRegion;
pub use flush_stats::{
    FlushStats, FlushStatsSnapshot, FLUSH_LATENCY_BOUNDS_NANOS, FLUSH_LATENCY_BUCKETS,
};
pub use herald_records::{BatchError, ValidBatch};
#[cfg(not(herald_loom))]
pub use key_copy::{CopiedRecord, CopiedRecords, CopiedRun, KeyCopyDamaged};
#[cfg(not(herald_loom))]
pub use log::{
    Appended, HistoryProgress, KeyBatches, KeyCopyStats, Log, ReadSlice, TimestampOffset,
};
#[cfg(not(herald_loom))]
pub use provisioner::start as start_provisioner;
#[cfg(not(herald_loom))]
pub use recovery::RecoveryReport;
