//! Per-log configuration: segment sizing, durability and retention.

use std::time::Duration;

use crate::error::ConfigError;

/// Largest segment a log accepts. Byte positions inside a segment are 31-bit
/// (as in Kafka, where `segment.bytes` is an `int`), which keeps a position and
/// a relative offset packed together in one 64-bit reservation word.
pub const SEGMENT_BYTES_MAX: u32 = i32::MAX as u32;

/// Smallest segment a log accepts; anything smaller would roll on every batch.
pub const SEGMENT_BYTES_MIN: u32 = 4 * 1024;

/// When appended bytes are forced to stable storage.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FlushPolicy {
    /// Leave write-back to the operating system. A crash of the process loses
    /// nothing; a crash of the machine can lose what the OS had not written.
    Never,
    /// Flush at most this often, from [`crate::Log::maintain`].
    Interval(Duration),
    /// Every append returns only once it (and everything before it) is on
    /// stable storage. Concurrent appenders share one fsync (group commit).
    EveryAppend,
}

/// Configuration of one partition log. Every field has a production default.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogConfig {
    /// A segment is sealed and a new one started once it holds this many bytes
    /// (Kafka's `segment.bytes`). Address space is reserved for it up front;
    /// disk space is allocated in `preallocate_bytes` steps.
    pub segment_bytes: u32,
    /// A non-empty active segment older than this is rolled by
    /// [`crate::Log::maintain`] (Kafka's `segment.ms`).
    pub segment_age: Option<Duration>,
    /// Bytes between two entries of the sparse offset and time indexes (Kafka's
    /// `index.interval.bytes`).
    pub index_interval_bytes: u32,
    /// Largest batch accepted (Kafka's `max.message.bytes`).
    pub max_batch_bytes: u32,
    /// Disk space is allocated (and mapped) ahead of writers in steps of this
    /// size, so a full disk is reported as an error instead of a fault.
    pub preallocate_bytes: u32,
    /// When appended bytes reach stable storage.
    pub flush: FlushPolicy,
    /// Sealed segments whose newest record is older than this are deleted
    /// (Kafka's `retention.ms`). `None` keeps them forever.
    pub retention_age: Option<Duration>,
    /// Oldest sealed segments are deleted while the log is larger than this
    /// (Kafka's `retention.bytes`). `None` means no size limit.
    pub retention_bytes: Option<u64>,
    /// Keep a key-sorted copy of every sealed segment (`.kcopy` beside
    /// it, built in the background by [`crate::Log::build_key_copy`]), so
    /// that a lookup by key reads a block or two per segment instead of
    /// every batch holding the key; costs disk (the keyed records again,
    /// lz4-compressed).
    pub key_copy: bool,
}

impl Default for LogConfig {
    fn default() -> Self {
        Self {
            segment_bytes: 1024 * 1024 * 1024,
            segment_age: Some(Duration::from_secs(7 * 24 * 3600)),
            index_interval_bytes: 4096,
            max_batch_bytes: 1024 * 1024 + 12,
            preallocate_bytes: 8 * 1024 * 1024,
            flush: FlushPolicy::Never,
            retention_age: Some(Duration::from_secs(7 * 24 * 3600)),
            retention_bytes: None,
            key_copy: false,
        }
    }
}

impl LogConfig {
    /// Checks that the values are usable together; the log refuses to open
    /// with a configuration that fails this.
    pub fn validate(&self) -> Result<(), ConfigError> {
        let invalid = |key: &'static str, value: u64, why: &'static str| {
            Err(ConfigError {
                key,
                value,
                reason: why,
            })
        };
        if !(SEGMENT_BYTES_MIN..=SEGMENT_BYTES_MAX).contains(&self.segment_bytes) {
            return invalid(
                "segment_bytes",
                self.segment_bytes.into(),
                "must be between 4 KiB and 2 GiB - 1",
            );
        }
        if !self.index_interval_bytes.is_power_of_two() || self.index_interval_bytes < 64 {
            return invalid(
                "index_interval_bytes",
                self.index_interval_bytes.into(),
                "must be a power of two of at least 64",
            );
        }
        if self.max_batch_bytes < herald_records::BATCH_BYTES_MIN as u32 {
            return invalid(
                "max_batch_bytes",
                self.max_batch_bytes.into(),
                "is smaller than the smallest possible record batch",
            );
        }
        if self.max_batch_bytes > self.segment_bytes {
            return invalid(
                "max_batch_bytes",
                self.max_batch_bytes.into(),
                "must not exceed segment_bytes (a batch never spans segments)",
            );
        }
        if self.preallocate_bytes < 4096 {
            return invalid(
                "preallocate_bytes",
                self.preallocate_bytes.into(),
                "must be at least one page (4096)",
            );
        }
        if let FlushPolicy::Interval(every) = self.flush {
            if every.is_zero() {
                return invalid("flush", 0, "an interval flush needs a non-zero interval");
            }
        }
        Ok(())
    }
}
