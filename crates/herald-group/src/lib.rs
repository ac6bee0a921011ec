//! The consumer-group coordinator of herald: Kafka's classic group protocol
//! (JoinGroup, SyncGroup, Heartbeat, LeaveGroup), committed offsets
//! (OffsetCommit, OffsetFetch, OffsetDelete, expiration), and group
//! administration (ListGroups, DescribeGroups, DeleteGroups), behaving as
//! Apache Kafka's `GroupCoordinator` does so that Kafka clients see no
//! difference.
//!
//! # What it must not do
//!
//! It is a sans-I/O core: no sockets, no files, no threads, no sleeping, no
//! reading of the system clock, no Kafka wire types. Every input carries the
//! time (`now_ms`, Unix milliseconds); deadlines are reported by
//! [`GroupCoordinator::next_deadline_ms`] and fired by
//! [`GroupCoordinator::tick`]; everything the caller must do comes back as
//! [`Output`]s: responses to deliver (possibly to requests made long
//! before), [`Record`]s to persist, and events for metrics. Persisting is the
//! caller's job: it appends each [`Output::Persist`] batch to the offsets
//! partition, fsyncs, and reports back with
//! [`GroupCoordinator::append_completed`]; only then is a commit applied and
//! acknowledged. At start-up the caller feeds the partition's records to
//! [`GroupCoordinator::replay`].
//!
//! # The path of a JoinGroup
//!
//! `join_group` → due deadlines fire → `coordinator/join.rs` validates it and
//! either answers at once (an error, MEMBER_ID_REQUIRED with a fresh id, or
//! the current generation for an unchanged rejoin) or records the member as
//! waiting and starts a rebalance (`rebalance.rs`: PreparingRebalance, with
//! the initial delay for an Empty group and the rebalance timeout
//! otherwise). When every member has rejoined, or the deadline passes in a
//! later call, the join phase completes: members that did not rejoin are
//! removed, a protocol is selected (`protocol_selection.rs`), the generation
//! advances to CompletingRebalance, and every held JoinGroup is answered in
//! that call's outputs, the leader's with all members' metadata. The
//! leader's SyncGroup then carries the assignment, which answers the held
//! SyncGroups and makes the group Stable.

#![warn(missing_docs)]

mod api;
mod config;
mod coordinator;
mod effects;
mod error;
mod group;
mod member;
mod member_id;
mod offsets;
mod output;
mod protocol_selection;
mod rebalance;
mod records;
mod state;
mod subscription;
mod timers;
mod wire;

pub use api::{
    DeleteGroupResult, DeleteGroupsResponse, GroupDescription, HeartbeatRequest, JoinGroupMember,
    JoinGroupRequest, JoinGroupResponse, LeaveGroupMemberResult, LeaveGroupRequest,
    LeaveGroupResponse, ListedGroup, MemberAssignment, MemberDescription, MemberIdentity,
    OffsetCommitPartition, OffsetCommitRequest, OffsetCommitResponse, OffsetDeleteRequest,
    OffsetDeleteResponse, OffsetFetchPartition, OffsetFetchRequest, OffsetFetchResponse,
    PartitionResult, Protocol, SyncGroupRequest, SyncGroupResponse, TopicPartition,
};
pub use config::{GroupConfig, GROUP_SIZE_MAX_DEFAULT};
pub use coordinator::GroupCoordinator;
pub use error::ErrorCode;
pub use offsets::CommittedOffset;
pub use output::{
    AppendId, AppendResult, GroupEvent, Output, RebalanceReason, RemovalReason, RequestId,
};
pub use records::{Record, RECORD_FORMAT_VERSION};
pub use state::GroupState;
pub use subscription::{Assignment, Subscription, TopicPartitions, SUBSCRIPTION_VERSION_MAX};
pub use wire::DecodeError;
