//! The coordinator's inputs and outputs: plain request and response types,
//! one pair per Kafka group API, with Kafka's field names but no wire
//! encoding. The Kafka handlers translate to and from these.

use bytes::Bytes;

use crate::error::ErrorCode;
use crate::state::GroupState;

/// A partition of a topic.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct TopicPartition {
    /// The topic name.
    pub topic: String,
    /// The partition index.
    pub partition: i32,
}

impl TopicPartition {
    /// Builds a topic-partition.
    pub fn new(topic: impl Into<String>, partition: i32) -> Self {
        TopicPartition {
            topic: topic.into(),
            partition,
        }
    }
}

/// One protocol (assignor) a member supports, with its metadata (for
/// protocol type "consumer", an encoded [`crate::Subscription`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Protocol {
    /// The protocol name, e.g. "range", "cooperative-sticky".
    pub name: String,
    /// The member's metadata for this protocol.
    pub metadata: Bytes,
}

/// A JoinGroup request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JoinGroupRequest {
    /// The group.
    pub group_id: String,
    /// The member id, or "" for a member joining for the first time.
    pub member_id: String,
    /// The static member's group.instance.id.
    pub group_instance_id: Option<String>,
    /// The client's client.id.
    pub client_id: String,
    /// The client's address, as shown by DescribeGroups.
    pub client_host: String,
    /// How long the member may go without a heartbeat.
    pub session_timeout_ms: i32,
    /// How long the group waits for the member to rejoin in a rebalance
    /// (JoinGroup v0 has none: pass the session timeout, as Kafka does).
    pub rebalance_timeout_ms: i32,
    /// The protocol type, e.g. "consumer".
    pub protocol_type: String,
    /// Supported protocols, most preferred first.
    pub protocols: Vec<Protocol>,
    /// True from JoinGroup v4: a new dynamic member first receives
    /// MEMBER_ID_REQUIRED with its id and must join again with it.
    pub require_known_member_id: bool,
    /// True from JoinGroup v9: a rejoining static leader may be told to skip
    /// the assignment.
    pub supports_skip_assignment: bool,
}

/// A member as the leader sees it in the JoinGroup response.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JoinGroupMember {
    /// The member id.
    pub member_id: String,
    /// The static member's group.instance.id.
    pub group_instance_id: Option<String>,
    /// The member's metadata for the selected protocol.
    pub metadata: Bytes,
}

/// A JoinGroup response.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JoinGroupResponse {
    /// The error, or [`ErrorCode::None`].
    pub error: ErrorCode,
    /// The generation, -1 on error.
    pub generation_id: i32,
    /// The group's protocol type.
    pub protocol_type: Option<String>,
    /// The selected protocol.
    pub protocol_name: Option<String>,
    /// The leader's member id ("" on error).
    pub leader: String,
    /// Tells a rejoining static leader not to run the assignor (v9+).
    pub skip_assignment: bool,
    /// The member's id (also set with MEMBER_ID_REQUIRED).
    pub member_id: String,
    /// All members with their metadata, for the leader only.
    pub members: Vec<JoinGroupMember>,
}

impl JoinGroupResponse {
    /// An error response, as Kafka's `JoinGroupResult(memberId, error)`.
    pub fn error(member_id: impl Into<String>, error: ErrorCode) -> Self {
        JoinGroupResponse {
            error,
            generation_id: -1,
            protocol_type: None,
            protocol_name: None,
            leader: String::new(),
            skip_assignment: false,
            member_id: member_id.into(),
            members: Vec::new(),
        }
    }
}

/// One member's assignment, as the leader sends it in SyncGroup.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemberAssignment {
    /// The member id.
    pub member_id: String,
    /// The assignment (for "consumer", an encoded [`crate::Assignment`]).
    pub assignment: Bytes,
}

/// A SyncGroup request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SyncGroupRequest {
    /// The group.
    pub group_id: String,
    /// The generation the member joined.
    pub generation_id: i32,
    /// The member id.
    pub member_id: String,
    /// The static member's group.instance.id.
    pub group_instance_id: Option<String>,
    /// The protocol type (v5+), checked against the group's.
    pub protocol_type: Option<String>,
    /// The protocol name (v5+), checked against the group's.
    pub protocol_name: Option<String>,
    /// The assignments; only the leader sends any.
    pub assignments: Vec<MemberAssignment>,
}

/// A SyncGroup response.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SyncGroupResponse {
    /// The error, or [`ErrorCode::None`].
    pub error: ErrorCode,
    /// The group's protocol type (None on error).
    pub protocol_type: Option<String>,
    /// The group's protocol (None on error).
    pub protocol_name: Option<String>,
    /// The member's assignment (empty on error).
    pub assignment: Bytes,
}

impl SyncGroupResponse {
    /// An error response.
    pub fn error(error: ErrorCode) -> Self {
        SyncGroupResponse {
            error,
            protocol_type: None,
            protocol_name: None,
            assignment: Bytes::new(),
        }
    }
}

/// A Heartbeat request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HeartbeatRequest {
    /// The group.
    pub group_id: String,
    /// The member's generation.
    pub generation_id: i32,
    /// The member id.
    pub member_id: String,
    /// The static member's group.instance.id.
    pub group_instance_id: Option<String>,
}

/// A member named in LeaveGroup: by member id, or (admin removal of a
/// static member) by group.instance.id with an empty member id.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemberIdentity {
    /// The member id, or "".
    pub member_id: String,
    /// The group.instance.id.
    pub group_instance_id: Option<String>,
}

/// A LeaveGroup request (v0-2 name one member, v3+ a batch).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeaveGroupRequest {
    /// The group.
    pub group_id: String,
    /// The leaving members.
    pub members: Vec<MemberIdentity>,
}

/// The result for one leaving member.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeaveGroupMemberResult {
    /// The member as named in the request.
    pub member: MemberIdentity,
    /// Its error.
    pub error: ErrorCode,
}

/// A LeaveGroup response. For v0-2 the handler reports the single member's
/// error as the top-level error when the top-level error is None.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeaveGroupResponse {
    /// The top-level error.
    pub error: ErrorCode,
    /// Per-member results.
    pub members: Vec<LeaveGroupMemberResult>,
}

/// One partition of an OffsetCommit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OffsetCommitPartition {
    /// The topic.
    pub topic: String,
    /// The partition.
    pub partition: i32,
    /// The offset to commit.
    pub offset: i64,
    /// The leader epoch, if the client sent one (v6+, -1 means none).
    pub leader_epoch: Option<i32>,
    /// The metadata string (null is stored as "").
    pub metadata: Option<String>,
}

/// An OffsetCommit request. A simple (non-group) consumer sends generation
/// -1, member id "" and no instance id.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OffsetCommitRequest {
    /// The group.
    pub group_id: String,
    /// The member's generation, or -1.
    pub generation_id: i32,
    /// The member id, or "".
    pub member_id: String,
    /// The static member's group.instance.id.
    pub group_instance_id: Option<String>,
    /// The offsets.
    pub partitions: Vec<OffsetCommitPartition>,
}

/// The error of one partition.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PartitionResult {
    /// The partition.
    pub topic_partition: TopicPartition,
    /// Its error.
    pub error: ErrorCode,
}

/// An OffsetCommit response: one result per requested partition, in request
/// order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OffsetCommitResponse {
    /// Per-partition results.
    pub partitions: Vec<PartitionResult>,
}

/// An OffsetFetch request for one group.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OffsetFetchRequest {
    /// The group.
    pub group_id: String,
    /// The partitions, or None for every partition with a committed offset.
    pub partitions: Option<Vec<TopicPartition>>,
    /// v7+: answer UNSTABLE_OFFSET_COMMIT for partitions with a commit still
    /// being persisted.
    pub require_stable: bool,
}

/// One partition of an OffsetFetch response.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OffsetFetchPartition {
    /// The partition.
    pub topic_partition: TopicPartition,
    /// The committed offset, or -1 for none.
    pub offset: i64,
    /// The committed leader epoch.
    pub leader_epoch: Option<i32>,
    /// The committed metadata ("" for none).
    pub metadata: String,
    /// The partition's error.
    pub error: ErrorCode,
}

/// An OffsetFetch response for one group.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OffsetFetchResponse {
    /// The group-level error.
    pub error: ErrorCode,
    /// Per-partition results (sorted by topic and partition when all were
    /// asked for, in request order otherwise).
    pub partitions: Vec<OffsetFetchPartition>,
}

/// An OffsetDelete request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OffsetDeleteRequest {
    /// The group.
    pub group_id: String,
    /// The partitions whose offsets to delete.
    pub partitions: Vec<TopicPartition>,
}

/// An OffsetDelete response.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OffsetDeleteResponse {
    /// The group-level error.
    pub error: ErrorCode,
    /// Per-partition results (empty when the group-level error is set).
    pub partitions: Vec<PartitionResult>,
}

/// The result of deleting one group.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeleteGroupResult {
    /// The group.
    pub group_id: String,
    /// Its error.
    pub error: ErrorCode,
}

/// A DeleteGroups response.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeleteGroupsResponse {
    /// One result per requested group, in request order.
    pub results: Vec<DeleteGroupResult>,
}

/// A group as ListGroups shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListedGroup {
    /// The group.
    pub group_id: String,
    /// Its protocol type ("" when none).
    pub protocol_type: String,
    /// Its state.
    pub state: GroupState,
}

/// A member as DescribeGroups shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemberDescription {
    /// The member id.
    pub member_id: String,
    /// The static member's group.instance.id.
    pub group_instance_id: Option<String>,
    /// The client's client.id.
    pub client_id: String,
    /// The client's address.
    pub client_host: String,
    /// Metadata for the selected protocol (empty unless Stable, as in Kafka).
    pub metadata: Bytes,
    /// The member's assignment (empty unless Stable, as in Kafka).
    pub assignment: Bytes,
}

/// A group as DescribeGroups shows it. An unknown group is described as Dead
/// with no members and GROUP_ID_NOT_FOUND (DescribeGroups v6+; older versions
/// report it without an error).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupDescription {
    /// The group.
    pub group_id: String,
    /// The error: GROUP_ID_NOT_FOUND for an unknown group, else None.
    pub error: ErrorCode,
    /// The state.
    pub state: GroupState,
    /// The protocol type ("" when none).
    pub protocol_type: String,
    /// The selected protocol ("" unless Stable).
    pub protocol_name: String,
    /// The members.
    pub members: Vec<MemberDescription>,
}
