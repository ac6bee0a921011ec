//! The client subcommands, one file each. Each returns `Ok` on success and
//! an error whose one-line chain `main` prints on failure.

pub mod acl;
pub mod bench;
pub mod cluster;
pub mod consume;
pub mod flow_control;
pub mod group;
pub mod partition;
pub mod produce;
pub mod publish;
pub mod push_client;
pub mod query;
pub mod snapshot;
pub mod sql;
pub mod subscribe;
pub mod tenant;
pub mod topic;
pub mod user;

use std::time::{SystemTime, UNIX_EPOCH};

/// Milliseconds since the Unix epoch.
pub fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}
