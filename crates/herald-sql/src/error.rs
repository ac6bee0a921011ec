//! Why a SQL query was refused or stopped.

use datafusion::error::DataFusionError;
use herald_broker::snapshots::SnapshotError;

/// Why a SQL query was refused or stopped.
#[derive(Debug, thiserror::Error)]
pub enum SqlError {
    /// As many queries as allowed are running.
    #[error("{max} SQL queries are running already; try again when one is done")]
    Busy {
        /// Queries allowed at once.
        max: usize,
    },
    /// A table that is neither a topic nor a snapshot's view.
    #[error("unknown table {name:?}: tables are topics (quote names with dots or dashes: \"my.topic\") or snapshot views (\"__snapshot.<id>.<topic>\")")]
    UnknownTable {
        /// The name as written.
        name: String,
    },
    /// The caller may not read a topic the query names.
    #[error("not authorized to read topic {topic}")]
    Denied {
        /// The topic.
        topic: String,
    },
    /// The snapshot named does not exist (or does not hold the topic).
    #[error("snapshot {id} does not hold topic {topic}")]
    NotInSnapshot {
        /// The snapshot's id.
        id: String,
        /// The topic named.
        topic: String,
    },
    /// The text is not SQL herald runs: a syntax error, an unknown column
    /// or function, a statement that is not a query.
    #[error("{0}")]
    Invalid(String),
    /// The query needed more than its limits allow (memory, bytes read).
    #[error("{0}")]
    OverLimit(String),
    /// The query ran longer than its time limit and was stopped.
    #[error("the query ran longer than its limit of {seconds} s and was stopped")]
    TimeLimit {
        /// The limit.
        seconds: u64,
    },
    /// The cut of the topics named could not be taken.
    #[error("cannot take the cut the query runs at: {0}")]
    Cut(#[from] SnapshotError),
    /// The query failed while it ran.
    #[error("the query failed: {0}")]
    Execution(String),
    /// The results could not be written in the format asked for.
    #[error("cannot write the results: {0}")]
    Output(String),
}

impl SqlError {
    /// A DataFusion error, by what it means for the caller.
    pub(crate) fn from_datafusion(e: DataFusionError) -> Self {
        let message = e.to_string();
        match e.find_root() {
            DataFusionError::ResourcesExhausted(_) => Self::OverLimit(message),
            DataFusionError::SQL(..)
            | DataFusionError::Plan(_)
            | DataFusionError::SchemaError(..)
            | DataFusionError::NotImplemented(_)
            | DataFusionError::Configuration(_) => Self::Invalid(message),
            _ => Self::Execution(message),
        }
    }

    /// Whether the caller can mend the query (an HTTP 4xx), as opposed to
    /// the broker failing it.
    pub fn is_caller_error(&self) -> bool {
        !matches!(self, Self::Execution(_) | Self::Output(_))
    }
}
