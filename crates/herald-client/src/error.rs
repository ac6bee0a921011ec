//! The client's typed error: what failed, with the broker's address, the
//! request, or the broker's own error code, as one line a CLI can print.

use std::fmt::Display;
use std::time::Duration;

/// Why a client call failed.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// The broker could not be connected to.
    #[error("cannot reach broker {address}")]
    Unreachable {
        /// HOST:PORT tried.
        address: String,
        /// The OS error, or the timeout.
        #[source]
        source: Option<std::io::Error>,
    },
    /// The broker did not answer in time.
    #[error("broker {address} did not answer {what} within {timeout:?}")]
    TimedOut {
        /// HOST:PORT of the broker.
        address: String,
        /// The request.
        what: String,
        /// How long the client waited.
        timeout: Duration,
    },
    /// Sending or receiving failed.
    #[error(transparent)]
    Io(#[from] std::io::Error),
    /// The broker answered with an error code.
    #[error("{context}: {reason}")]
    Broker {
        /// What was being done.
        context: String,
        /// Kafka's error code.
        code: i16,
        /// The broker's message, or the code's description.
        reason: String,
    },
    /// The request cannot be made: an unknown topic or group, a group with
    /// members, a version the broker does not serve.
    #[error("{0}")]
    Refused(String),
    /// Records could not be encoded into a batch.
    #[error("encoding records: {0}")]
    Encode(#[from] herald_records::EncodeError),
    /// Fetched records could not be read.
    #[error("reading fetched records: {0}")]
    Records(#[from] herald_records::RecordError),
    /// An answer or payload could not be understood, or a request encoded.
    #[error("{what}: {reason}")]
    Protocol {
        /// What was being read or written.
        what: String,
        /// What went wrong.
        reason: String,
    },
}

impl ClientError {
    /// A refusal with this reason.
    pub fn refused(reason: impl Into<String>) -> Self {
        ClientError::Refused(reason.into())
    }
}

/// Adds what was being done to a failure, as one line.
pub(crate) trait Context<T> {
    /// Fails with `what` and the underlying reason.
    fn context(self, what: &str) -> Result<T, ClientError>;

    /// [`Context::context`] with a description made only on failure.
    fn with_context(self, what: impl FnOnce() -> String) -> Result<T, ClientError>;
}

impl<T, E: Display> Context<T> for Result<T, E> {
    fn context(self, what: &str) -> Result<T, ClientError> {
        self.with_context(|| what.to_owned())
    }

    fn with_context(self, what: impl FnOnce() -> String) -> Result<T, ClientError> {
        self.map_err(|e| ClientError::Protocol {
            what: what(),
            reason: e.to_string(),
        })
    }
}

impl<T> Context<T> for Option<T> {
    fn context(self, what: &str) -> Result<T, ClientError> {
        self.ok_or_else(|| ClientError::refused(what))
    }

    fn with_context(self, what: impl FnOnce() -> String) -> Result<T, ClientError> {
        self.ok_or_else(|| ClientError::refused(what()))
    }
}
