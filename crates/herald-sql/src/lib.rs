//! SQL over history (seed 000's offline queries, seed 003's message
//! history) with Apache DataFusion: every topic, and every snapshot's view
//! topic, is a table with the columns of [`COLUMNS`]; the JSON functions
//! of `datafusion-functions-json` read fields of values (`json_get_str(value,
//! 'region')`, `value->>'region'`). A query runs at a cut, so its results
//! are repeatable: over a snapshot it names, or over one taken when it
//! starts. Comparisons of `partition`, `offset` and `timestamp` with
//! constants narrow what is read (only those partitions, from the offset
//! the time index gives). Each query has limits (memory, bytes read,
//! time), runs on threads of its own at a lower CPU priority than produce
//! and fetch, and is cancelled when its reader goes away.
//!
//! Built only with the `sql` feature of the `herald` binary: DataFusion
//! is large (see the README).

mod engine;
mod error;
mod output;
mod pushdown;
mod scan;
mod schema;
mod table;

pub use engine::{SqlAnswer, SqlEngine, SqlLimits, SqlRequest, TopicAccess};
pub use error::SqlError;
pub use output::OutputFormat;
pub use schema::{topic_schema, COLUMNS};
