//! What the coordinator hands back: responses addressed to the requests
//! they answer, batches of records to persist, and events for metrics.

use crate::api::{
    DeleteGroupsResponse, JoinGroupResponse, LeaveGroupResponse, OffsetCommitResponse,
    OffsetDeleteResponse, SyncGroupResponse,
};
use crate::error::ErrorCode;
use crate::records::Record;

/// Identifies one request that may be answered later (a JoinGroup held until
/// the rebalance completes, a SyncGroup waiting for the leader, a commit
/// waiting for its fsync). Chosen by the caller, unique among the requests
/// it has in flight; the coordinator only hands it back in [`Output`]s.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct RequestId(pub u64);

/// Identifies one batch of records to persist; see [`Output::Persist`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct AppendId(pub u64);

/// What became of an [`Output::Persist`] batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AppendResult {
    /// The records are in the log and fsynced.
    Durable,
    /// The append or fsync failed; nothing of the batch may be assumed stored.
    Failed,
}

/// Why a rebalance started; for logs and metrics.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RebalanceReason {
    /// A new member joined.
    MemberJoined,
    /// A member rejoined with changed metadata.
    MemberMetadataChanged,
    /// The leader rejoined (it may have seen a metadata change).
    LeaderRejoined,
    /// A member left with LeaveGroup.
    MemberLeft,
    /// A member's session expired.
    SessionTimeout,
    /// Members never sent SyncGroup within the rebalance timeout.
    PendingSyncTimeout,
    /// A static member restarted and its rejoin changes the group's protocol
    /// or came during CompletingRebalance.
    StaticMemberReplaced,
}

/// Why a member was removed; for logs and metrics.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RemovalReason {
    /// It sent LeaveGroup (or an admin removed it).
    Left,
    /// Its session timeout passed without a heartbeat.
    SessionTimeout,
    /// It did not rejoin within the rebalance timeout.
    NotRejoined,
    /// It never sent SyncGroup within the rebalance timeout.
    NeverSynced,
}

/// Something that happened to a group, for metrics and logs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GroupEvent {
    /// The group entered PreparingRebalance.
    RebalanceStarted {
        /// The group.
        group_id: String,
        /// The generation being replaced.
        generation_id: i32,
        /// Why.
        reason: RebalanceReason,
    },
    /// A member was removed.
    MemberRemoved {
        /// The group.
        group_id: String,
        /// The member.
        member_id: String,
        /// Why.
        reason: RemovalReason,
    },
    /// A new generation began: CompletingRebalance, or Empty when nobody
    /// rejoined.
    GenerationStarted {
        /// The group.
        group_id: String,
        /// The new generation.
        generation_id: i32,
        /// The selected protocol (None when Empty).
        protocol_name: Option<String>,
        /// How many members it has.
        member_count: usize,
    },
    /// The leader's assignment was received: the group is Stable.
    Stable {
        /// The group.
        group_id: String,
        /// The generation.
        generation_id: i32,
    },
    /// The group no longer exists (deleted, or empty without offsets).
    GroupRemoved {
        /// The group.
        group_id: String,
    },
}

/// Everything the coordinator asks its caller to do. Every public call
/// returns these, in the order they must be acted on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Output {
    /// Send a JoinGroup response.
    JoinGroup {
        /// The request it answers.
        request: RequestId,
        /// The response.
        response: JoinGroupResponse,
    },
    /// Send a SyncGroup response.
    SyncGroup {
        /// The request it answers.
        request: RequestId,
        /// The response.
        response: SyncGroupResponse,
    },
    /// Send a Heartbeat response.
    Heartbeat {
        /// The request it answers.
        request: RequestId,
        /// Its error.
        error: ErrorCode,
    },
    /// Send a LeaveGroup response.
    LeaveGroup {
        /// The request it answers.
        request: RequestId,
        /// The response.
        response: LeaveGroupResponse,
    },
    /// Send an OffsetCommit response.
    OffsetCommit {
        /// The request it answers.
        request: RequestId,
        /// The response.
        response: OffsetCommitResponse,
    },
    /// Send an OffsetDelete response.
    OffsetDelete {
        /// The request it answers.
        request: RequestId,
        /// The response.
        response: OffsetDeleteResponse,
    },
    /// Send a DeleteGroups response.
    DeleteGroups {
        /// The request it answers.
        request: RequestId,
        /// The response.
        response: DeleteGroupsResponse,
    },
    /// Append these records to the offsets partition as one batch, fsync, and
    /// report with [`crate::GroupCoordinator::append_completed`]. Batches
    /// must be appended, and reported, in the order of their ids: the
    /// coordinator applies them in that order, which is also the order replay
    /// will see them in.
    Persist {
        /// The batch's id.
        append: AppendId,
        /// The records.
        records: Vec<Record>,
    },
    /// Something happened, for metrics and logs.
    Event(GroupEvent),
}
