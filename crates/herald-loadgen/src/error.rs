//! The load generator's one error type: what went wrong talking to a broker
//! or reading a result file, with the facts needed to act on it.

use std::io;
use std::path::PathBuf;

/// Every failure of a run.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    /// An admin call through herald's client failed.
    #[error(transparent)]
    Client(#[from] herald_client::ClientError),
    /// A socket or file operation failed.
    #[error("{what}: {source}")]
    Io {
        /// What was being done.
        what: &'static str,
        /// The cause.
        #[source]
        source: io::Error,
    },
    /// A request could not be encoded (a bug in the generator).
    #[error("encoding {api} failed: {detail}")]
    Encode {
        /// The API being encoded.
        api: &'static str,
        /// What the codec said.
        detail: String,
    },
    /// A response could not be decoded.
    #[error("decoding the {api} response failed: {detail}")]
    Decode {
        /// The API whose response was bad.
        api: &'static str,
        /// What the codec said.
        detail: String,
    },
    /// A response frame was larger than allowed or empty.
    #[error("response frame of {size} bytes (allowed 4..={max})")]
    FrameSize {
        /// The size the peer announced.
        size: i64,
        /// The largest frame accepted.
        max: usize,
    },
    /// A response answered another request than the one expected.
    #[error("response correlation id {found}, expected {expected}")]
    Correlation {
        /// The id expected next.
        expected: i32,
        /// The id received.
        found: i32,
    },
    /// The broker answered with a Kafka error code.
    #[error("{api} failed with Kafka error code {code}")]
    Broker {
        /// The API that failed.
        api: &'static str,
        /// The Kafka error code.
        code: i16,
    },
    /// The broker did not answer in time.
    #[error("no answer to {what} within {timeout_ms} ms")]
    Timeout {
        /// What was awaited.
        what: &'static str,
        /// The bound that passed.
        timeout_ms: u64,
    },
    /// A result file line is not a result row.
    #[error("result line {line}: {detail}")]
    Results {
        /// The 1-based line number.
        line: usize,
        /// What was wrong.
        detail: String,
    },
    /// The broker's admin API refused a call or answered nonsense.
    #[error("admin API, {what}: {detail}")]
    Admin {
        /// The call.
        what: &'static str,
        /// The status and what the broker said.
        detail: String,
    },
    /// The disk capacity step could not use its directory or files
    /// ([`crate::disk_hog`]).
    #[error("disk capacity step: {action} {}: {source}", .path.display())]
    DiskHog {
        /// What was being done.
        action: &'static str,
        /// The directory or file.
        path: PathBuf,
        /// The cause.
        #[source]
        source: io::Error,
    },
    /// The CPU quota capacity step could not use the broker's cgroup
    /// ([`crate::cpu_quota`]).
    #[error("CPU quota step: {action} {}: {source}", .path.display())]
    CpuQuota {
        /// What was being done.
        action: &'static str,
        /// The cgroup directory or file.
        path: PathBuf,
        /// The cause.
        #[source]
        source: io::Error,
    },
    /// The chart could not be drawn.
    #[error("chart: {0}")]
    Chart(#[from] herald_bench::figure::FigureError),
}

impl LoadError {
    /// An I/O error with what was being done.
    pub fn io(what: &'static str, source: io::Error) -> Self {
        Self::Io { what, source }
    }
}
