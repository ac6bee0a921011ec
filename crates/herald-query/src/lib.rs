//! Online queries over topics (seed 000's "rich online queries on message
//! streams"): a registered query names a topic, a filter in herald's
//! filter language, aggregates computed per time bucket of record
//! timestamps (count, sum, min, max, approximate distinct), and triggers
//! (an aggregate against a threshold over a window of buckets) that raise
//! alerts when their condition comes to hold.
//!
//! Sans I/O: [`QueryState`] is fed records (anything implementing
//! `herald_filter::Fields`, or whole stored batches through
//! [`feed_batches`]) and answers results and alerts; following the log,
//! keeping the queries and sending alerts is the caller's.

mod feed;
mod hll;
mod spec;
mod state;

pub use feed::{feed_batches, FeedOutcome, Follower};
pub use hll::Hll;
pub use spec::{
    id_problem, validate_id, AggregateSpec, Comparison, CompiledQuery, Function, QuerySpec,
    SpecError, TriggerSpec, AGGREGATES_MAX, QUERY_ID_MAX, RETAIN_BUCKETS_DEFAULT,
    RETAIN_BUCKETS_MAX, TRIGGERS_MAX,
};
pub use state::{Alert, BucketRow, QueryState, RecordHashes, Results, CHUNK_RECORDS};
