//! # herald-raft: a partition replicated by Raft
//!
//! A partition of a herald cluster is a Raft group whose voters are its
//! replicas, run by openraft (never a consensus protocol of our own). Its
//! Raft log *is* the partition's segment log (`herald-log`), the design
//! Redpanda uses: a record batch is written once, as one Raft entry, and
//! every replica holds the same batches at the same offsets.
//!
//! - [`RaftLog`] numbers the partition's batches as Raft entries and keeps
//!   the vote, the committed and purged log ids and the numbering's anchor
//!   in a small file beside the log.
//! - [`PartitionLogStore`] is openraft's log storage over it; an append is
//!   readable at once and reported flushed once the log's group-commit
//!   fsync covers it.
//! - [`PartitionStateMachine`] is openraft's state machine: the state is
//!   the log itself, so applying moves the commit point readers may read
//!   up to, and a snapshot is the offset where the log resumes.
//! - Compaction (DeleteRecords, which is replicated as an entry, and each
//!   replica's retention) drops entries through a snapshot and openraft's
//!   purge; a follower that needs purged entries installs the snapshot and
//!   restarts its log where the leader's now starts.
//!
//! Raft's own entries (a new leader's blank entry, membership changes) are
//! stored as Kafka control batches, which Kafka consumers skip
//! ([`entry_codec`]); a batch's `partitionLeaderEpoch` holds the term of
//! the leader that appended it.

#![warn(missing_docs)]

mod compaction;
pub mod entry_codec;
pub mod log_store;
pub mod meta;
pub mod network;
pub mod raft_log;
pub mod replica;
pub mod runtime;
pub mod state_machine;
pub mod types;

pub use log_store::PartitionLogStore;
/// The Raft engine, re-exported so that users name its types at the
/// version herald pins.
pub use openraft;
pub use raft_log::RaftLog;
pub use replica::{PartitionReplica, Proposal, RaftTiming, ReplicaError};
pub use state_machine::{PartitionSnapshot, PartitionStateMachine};
pub use types::{Entry, LogId, PartitionRaft, Placed, RecordBatch, Vote};
