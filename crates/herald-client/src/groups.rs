//! Consumer groups on the wire: the admin side (ListGroups, DescribeGroups,
//! OffsetFetch, OffsetCommit, DeleteGroups) and the member side (JoinGroup,
//! SyncGroup, Heartbeat, LeaveGroup), plus the consumer protocol's
//! subscription and assignment payloads that travel inside them.

use std::time::Duration;

use crate::error::{ClientError, Context as _};
use bytes::{Buf, BufMut, Bytes, BytesMut};
use kafka_protocol::messages::{
    consumer_protocol_assignment, join_group_request, leave_group_request, offset_commit_request,
    offset_fetch_request, sync_group_request, ConsumerProtocolAssignment,
    ConsumerProtocolSubscription, DeleteGroupsRequest, DescribeGroupsRequest, GroupId,
    HeartbeatRequest, JoinGroupRequest, LeaveGroupRequest, ListGroupsRequest, OffsetCommitRequest,
    OffsetFetchRequest, SyncGroupRequest,
};
use kafka_protocol::protocol::{Decodable, Encodable, StrBytes};

use crate::connection::{versions, IO_TIMEOUT};
use crate::errors::{check, describe};
use crate::{topic_name, wire_str, Connection};

/// Protocol type of consumer groups.
pub const CONSUMER_PROTOCOL_TYPE: &str = "consumer";
/// Version of the subscription and assignment payloads written.
const CONSUMER_PROTOCOL_VERSION: i16 = 1;
/// Highest payload version decoded (newer ones start with the same fields).
const CONSUMER_PROTOCOL_VERSION_MAX: i16 = 3;

/// Kafka's error codes a group member reacts to.
pub mod codes {
    /// The coordinator is loading or moving: retry.
    pub const COORDINATOR_NOT_AVAILABLE: i16 = 15;
    /// The generation is over: rejoin.
    pub const ILLEGAL_GENERATION: i16 = 22;
    /// The member is unknown (expired or fenced): rejoin as a new member.
    pub const UNKNOWN_MEMBER_ID: i16 = 25;
    /// A rebalance is under way: rejoin.
    pub const REBALANCE_IN_PROGRESS: i16 = 27;
    /// The group is not empty (DeleteGroups on an active group).
    pub const NON_EMPTY_GROUP: i16 = 68;
    /// The group does not exist.
    pub const GROUP_ID_NOT_FOUND: i16 = 69;
    /// First JoinGroup of a member: join again with the id given.
    pub const MEMBER_ID_REQUIRED: i16 = 79;
}

fn group_id(text: &str) -> GroupId {
    GroupId(wire_str(text))
}

/// A group as ListGroups shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListedGroup {
    /// Group id.
    pub group_id: String,
    /// State (Empty, Stable, PreparingRebalance, ...).
    pub state: String,
    /// Protocol type (`consumer` for consumer groups, empty if none yet).
    pub protocol_type: String,
}

/// One member as DescribeGroups shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemberInfo {
    /// Member id given by the coordinator.
    pub member_id: String,
    /// Static membership id, if any.
    pub instance_id: Option<String>,
    /// Client id of the member's connection.
    pub client_id: String,
    /// Address the member connected from.
    pub client_host: String,
    /// Partitions assigned to the member, `(topic, partition)`, sorted.
    pub assignment: Vec<(String, i32)>,
}

/// A group as DescribeGroups shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupInfo {
    /// Group id.
    pub group_id: String,
    /// State; `Dead` if the group does not exist.
    pub state: String,
    /// Protocol type.
    pub protocol_type: String,
    /// Chosen protocol (the assignor, for consumer groups).
    pub protocol: String,
    /// Members, sorted by member id.
    pub members: Vec<MemberInfo>,
}

impl GroupInfo {
    /// True when members are in the group (it is not Empty or Dead), so its
    /// offsets belong to running consumers.
    pub fn is_active(&self) -> bool {
        !matches!(self.state.as_str(), "Empty" | "Dead")
    }
}

/// A committed offset.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommittedOffset {
    /// Topic.
    pub topic: String,
    /// Partition.
    pub partition: i32,
    /// Offset of the next record to consume.
    pub offset: i64,
    /// Metadata stored with the commit.
    pub metadata: Option<String>,
}

/// Every group the broker knows.
pub async fn list_groups(connection: &mut Connection) -> Result<Vec<ListedGroup>, ClientError> {
    let response = connection
        .call(
            ListGroupsRequest::default(),
            versions::LIST_GROUPS,
            IO_TIMEOUT,
        )
        .await?;
    check(response.error_code, None, "listing groups")?;
    let mut groups: Vec<ListedGroup> = response
        .groups
        .into_iter()
        .map(|g| ListedGroup {
            group_id: g.group_id.0.to_string(),
            state: g.group_state.to_string(),
            protocol_type: g.protocol_type.to_string(),
        })
        .collect();
    groups.sort_by(|a, b| a.group_id.cmp(&b.group_id));
    Ok(groups)
}

/// Describes `group`; a group the broker does not know is `Dead` with no
/// members, as Kafka answers.
pub async fn describe_group(
    connection: &mut Connection,
    group: &str,
) -> Result<GroupInfo, ClientError> {
    let request = DescribeGroupsRequest::default().with_groups(vec![group_id(group)]);
    let response = connection
        .call(request, versions::DESCRIBE_GROUPS, IO_TIMEOUT)
        .await?;
    let described = response
        .groups
        .into_iter()
        .next()
        .context("DescribeGroups answered no group")?;
    check(
        described.error_code,
        described.error_message.as_ref(),
        &format!("describing group '{group}'"),
    )?;
    let mut members = Vec::with_capacity(described.members.len());
    for member in described.members {
        let member_id = member.member_id.to_string();
        let assignment = decode_assignment(&member.member_assignment)
            .with_context(|| format!("assignment of member {member_id}"))?;
        members.push(MemberInfo {
            member_id,
            instance_id: member.group_instance_id.map(|s| s.to_string()),
            client_id: member.client_id.to_string(),
            client_host: member.client_host.to_string(),
            assignment,
        });
    }
    members.sort_by(|a, b| a.member_id.cmp(&b.member_id));
    Ok(GroupInfo {
        group_id: described.group_id.0.to_string(),
        state: described.group_state.to_string(),
        protocol_type: described.protocol_type.to_string(),
        protocol: described.protocol_data.to_string(),
        members,
    })
}

/// The committed offsets of `group`: of every partition when `topics` is
/// `None`, else of the given `(topic, partitions)` (a partition with no
/// commit is left out).
pub async fn committed_offsets(
    connection: &mut Connection,
    group: &str,
    topics: Option<&[(String, Vec<i32>)]>,
) -> Result<Vec<CommittedOffset>, ClientError> {
    let request = OffsetFetchRequest::default().with_groups(vec![
        offset_fetch_request::OffsetFetchRequestGroup::default()
            .with_group_id(group_id(group))
            .with_topics(topics.map(|topics| {
                topics
                    .iter()
                    .map(|(topic, partitions)| {
                        offset_fetch_request::OffsetFetchRequestTopics::default()
                            .with_name(topic_name(topic))
                            .with_partition_indexes(partitions.clone())
                    })
                    .collect()
            })),
    ]);
    let response = connection
        .call(request, versions::OFFSET_FETCH, IO_TIMEOUT)
        .await?;
    let answer = response
        .groups
        .into_iter()
        .next()
        .context("OffsetFetch answered no group")?;
    check(
        answer.error_code,
        None,
        &format!("fetching offsets of group '{group}'"),
    )?;
    let mut out = Vec::new();
    for topic in answer.topics {
        let name = topic.name.0.to_string();
        for partition in topic.partitions {
            check(
                partition.error_code,
                None,
                &format!(
                    "committed offset of {name}/{} in group '{group}'",
                    partition.partition_index
                ),
            )?;
            if partition.committed_offset < 0 {
                continue;
            }
            out.push(CommittedOffset {
                topic: name.clone(),
                partition: partition.partition_index,
                offset: partition.committed_offset,
                metadata: partition.metadata.map(|m| m.to_string()),
            });
        }
    }
    out.sort_by(|a, b| (&a.topic, a.partition).cmp(&(&b.topic, b.partition)));
    Ok(out)
}

/// Who commits: a group member of a generation, or nobody in particular
/// (an administrator or a simple consumer, allowed only while the group has
/// no members).
#[derive(Debug, Clone)]
pub struct Committer<'a> {
    /// Generation of the member, -1 for a simple commit.
    pub generation_id: i32,
    /// Member id, empty for a simple commit.
    pub member_id: &'a str,
}

impl Committer<'static> {
    /// A commit from outside the group's membership.
    pub const SIMPLE: Committer<'static> = Committer {
        generation_id: -1,
        member_id: "",
    };
}

/// Commits `offsets` (`(topic, partition, offset)`) for `group`. Returns the
/// first partition error code (0 when every partition was committed), so
/// that a member can react to a rebalance.
pub async fn commit_offsets(
    connection: &mut Connection,
    group: &str,
    committer: &Committer<'_>,
    offsets: &[(String, i32, i64)],
) -> Result<i16, ClientError> {
    let mut topics: Vec<offset_commit_request::OffsetCommitRequestTopic> = Vec::new();
    for (topic, partition, offset) in offsets {
        let entry = offset_commit_request::OffsetCommitRequestPartition::default()
            .with_partition_index(*partition)
            .with_committed_offset(*offset)
            .with_committed_leader_epoch(-1)
            .with_committed_metadata(Some(StrBytes::from_static_str("")));
        match topics.iter_mut().find(|t| t.name.0.as_str() == topic) {
            Some(existing) => existing.partitions.push(entry),
            None => topics.push(
                offset_commit_request::OffsetCommitRequestTopic::default()
                    .with_name(topic_name(topic))
                    .with_partitions(vec![entry]),
            ),
        }
    }
    let request = OffsetCommitRequest::default()
        .with_group_id(group_id(group))
        .with_generation_id_or_member_epoch(committer.generation_id)
        .with_member_id(wire_str(committer.member_id))
        .with_retention_time_ms(-1)
        .with_topics(topics);
    let response = connection
        .call(request, versions::OFFSET_COMMIT, IO_TIMEOUT)
        .await?;
    Ok(response
        .topics
        .iter()
        .flat_map(|t| t.partitions.iter())
        .map(|p| p.error_code)
        .find(|code| *code != 0)
        .unwrap_or(0))
}

/// Deletes `group` (it must have no members) and its committed offsets.
pub async fn delete_group(connection: &mut Connection, group: &str) -> Result<(), ClientError> {
    let request = DeleteGroupsRequest::default().with_groups_names(vec![group_id(group)]);
    let response = connection
        .call(request, versions::DELETE_GROUPS, IO_TIMEOUT)
        .await?;
    let result = response
        .results
        .into_iter()
        .next()
        .context("DeleteGroups answered no group")?;
    match result.error_code {
        0 => Ok(()),
        codes::GROUP_ID_NOT_FOUND => Err(ClientError::refused(format!("unknown group '{group}'"))),
        codes::NON_EMPTY_GROUP => Err(ClientError::refused(format!(
            "group '{group}' has members: stop its consumers first"
        ))),
        code => check(code, None, &format!("deleting group '{group}'")),
    }
}

/// What a member sends to join.
#[derive(Debug, Clone)]
pub struct JoinRequest<'a> {
    /// Group id.
    pub group: &'a str,
    /// Member id from an earlier join (empty the first time).
    pub member_id: &'a str,
    /// Session timeout.
    pub session_timeout: Duration,
    /// Rebalance timeout.
    pub rebalance_timeout: Duration,
    /// Assignor name and subscription payload, in order of preference.
    pub protocols: Vec<(String, Bytes)>,
}

/// The coordinator's answer to a join.
#[derive(Debug, Clone)]
pub struct JoinOutcome {
    /// Error code (0, or MEMBER_ID_REQUIRED, REBALANCE_IN_PROGRESS, ...).
    pub error_code: i16,
    /// Generation joined.
    pub generation_id: i32,
    /// Chosen protocol (assignor).
    pub protocol: String,
    /// Member id of the leader.
    pub leader: String,
    /// This member's id.
    pub member_id: String,
    /// For the leader: every member's id and subscription payload.
    pub members: Vec<(String, Bytes)>,
}

/// JoinGroup; waits up to the rebalance timeout for the join phase to end.
pub async fn join_group(
    connection: &mut Connection,
    join: &JoinRequest<'_>,
) -> Result<JoinOutcome, ClientError> {
    let millis = |d: Duration| i32::try_from(d.as_millis()).unwrap_or(i32::MAX);
    let request = JoinGroupRequest::default()
        .with_group_id(group_id(join.group))
        .with_session_timeout_ms(millis(join.session_timeout))
        .with_rebalance_timeout_ms(millis(join.rebalance_timeout))
        .with_member_id(wire_str(join.member_id))
        .with_protocol_type(StrBytes::from_static_str(CONSUMER_PROTOCOL_TYPE))
        .with_protocols(
            join.protocols
                .iter()
                .map(|(name, metadata)| {
                    join_group_request::JoinGroupRequestProtocol::default()
                        .with_name(wire_str(name))
                        .with_metadata(metadata.clone())
                })
                .collect(),
        );
    let response = connection
        .call(
            request,
            versions::JOIN_GROUP,
            join.rebalance_timeout + IO_TIMEOUT,
        )
        .await?;
    Ok(JoinOutcome {
        error_code: response.error_code,
        generation_id: response.generation_id,
        protocol: response
            .protocol_name
            .map(|p| p.to_string())
            .unwrap_or_default(),
        leader: response.leader.to_string(),
        member_id: response.member_id.to_string(),
        members: response
            .members
            .into_iter()
            .map(|m| (m.member_id.to_string(), m.metadata))
            .collect(),
    })
}

/// SyncGroup: the leader sends every member's assignment payload, the
/// others send none; each gets its own back (or an error code).
pub async fn sync_group(
    connection: &mut Connection,
    group: &str,
    joined: &JoinOutcome,
    assignments: Vec<(String, Bytes)>,
    rebalance_timeout: Duration,
) -> Result<Result<Bytes, i16>, ClientError> {
    let request = SyncGroupRequest::default()
        .with_group_id(group_id(group))
        .with_generation_id(joined.generation_id)
        .with_member_id(wire_str(&joined.member_id))
        .with_protocol_type(Some(StrBytes::from_static_str(CONSUMER_PROTOCOL_TYPE)))
        .with_protocol_name(Some(wire_str(&joined.protocol)))
        .with_assignments(
            assignments
                .into_iter()
                .map(|(member, assignment)| {
                    sync_group_request::SyncGroupRequestAssignment::default()
                        .with_member_id(wire_str(&member))
                        .with_assignment(assignment)
                })
                .collect(),
        );
    let response = connection
        .call(
            request,
            versions::SYNC_GROUP,
            rebalance_timeout + IO_TIMEOUT,
        )
        .await?;
    Ok(match response.error_code {
        0 => Ok(response.assignment),
        code => Err(code),
    })
}

/// Heartbeat; returns the error code (0 while the generation is current).
pub async fn heartbeat(
    connection: &mut Connection,
    group: &str,
    generation_id: i32,
    member_id: &str,
) -> Result<i16, ClientError> {
    let request = HeartbeatRequest::default()
        .with_group_id(group_id(group))
        .with_generation_id(generation_id)
        .with_member_id(wire_str(member_id));
    let response = connection
        .call(request, versions::HEARTBEAT, IO_TIMEOUT)
        .await?;
    Ok(response.error_code)
}

/// LeaveGroup of one member, so the others take its partitions at once
/// instead of after its session timeout.
pub async fn leave_group(
    connection: &mut Connection,
    group: &str,
    member_id: &str,
) -> Result<(), ClientError> {
    let request = LeaveGroupRequest::default()
        .with_group_id(group_id(group))
        .with_members(vec![leave_group_request::MemberIdentity::default()
            .with_member_id(wire_str(member_id))
            .with_reason(Some(StrBytes::from_static_str(
                "herald consume stopped",
            )))]);
    let response = connection
        .call(request, versions::LEAVE_GROUP, IO_TIMEOUT)
        .await?;
    match response.error_code {
        0 => Ok(()),
        code => Err(ClientError::refused(format!(
            "leaving group '{group}': {}",
            describe(code)
        ))),
    }
}

fn encode_versioned(message: &impl Encodable) -> Result<Bytes, ClientError> {
    let mut buf = BytesMut::new();
    buf.put_i16(CONSUMER_PROTOCOL_VERSION);
    message
        .encode(&mut buf, CONSUMER_PROTOCOL_VERSION)
        .context("encoding a consumer protocol payload")?;
    Ok(buf.freeze())
}

/// The payload version of `bytes`, and the rest to decode at that version.
fn versioned(bytes: &Bytes) -> Result<(Bytes, i16), ClientError> {
    let mut rest = bytes.clone();
    if rest.remaining() < 2 {
        return Err(ClientError::refused(
            "consumer protocol payload shorter than its version".to_string(),
        ));
    }
    let version = rest.get_i16();
    if version < 0 {
        return Err(ClientError::refused(format!(
            "consumer protocol payload version {version}"
        )));
    }
    Ok((rest, version.min(CONSUMER_PROTOCOL_VERSION_MAX)))
}

/// The subscription payload of a consumer subscribed to `topics`.
pub fn encode_subscription(topics: &[String]) -> Result<Bytes, ClientError> {
    encode_versioned(
        &ConsumerProtocolSubscription::default()
            .with_topics(topics.iter().map(|t| wire_str(t)).collect()),
    )
}

/// The topics a subscription payload subscribes to.
pub fn decode_subscription(bytes: &Bytes) -> Result<Vec<String>, ClientError> {
    let (mut rest, version) = versioned(bytes)?;
    let subscription = ConsumerProtocolSubscription::decode(&mut rest, version)
        .context("decoding a subscription")?;
    Ok(subscription.topics.iter().map(|t| t.to_string()).collect())
}

/// The assignment payload giving `partitions` (`(topic, partition)`).
pub fn encode_assignment(partitions: &[(String, i32)]) -> Result<Bytes, ClientError> {
    let mut topics: Vec<consumer_protocol_assignment::TopicPartition> = Vec::new();
    for (topic, partition) in partitions {
        match topics.iter_mut().find(|t| t.topic.0.as_str() == topic) {
            Some(existing) => existing.partitions.push(*partition),
            None => topics.push(
                consumer_protocol_assignment::TopicPartition::default()
                    .with_topic(topic_name(topic))
                    .with_partitions(vec![*partition]),
            ),
        }
    }
    encode_versioned(&ConsumerProtocolAssignment::default().with_assigned_partitions(topics))
}

/// The partitions of an assignment payload, sorted; an empty payload (a
/// member not yet assigned, or not a consumer) assigns nothing.
pub fn decode_assignment(bytes: &Bytes) -> Result<Vec<(String, i32)>, ClientError> {
    if bytes.is_empty() {
        return Ok(Vec::new());
    }
    let (mut rest, version) = versioned(bytes)?;
    let assignment =
        ConsumerProtocolAssignment::decode(&mut rest, version).context("decoding an assignment")?;
    let mut out: Vec<(String, i32)> = assignment
        .assigned_partitions
        .iter()
        .flat_map(|t| {
            let topic = t.topic.0.to_string();
            t.partitions.iter().map(move |p| (topic.clone(), *p))
        })
        .collect();
    out.sort();
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn assignment_payload_round_trips_grouped_by_topic() {
        let partitions = vec![
            ("a".to_owned(), 2),
            ("b".to_owned(), 0),
            ("a".to_owned(), 0),
        ];
        let bytes = encode_assignment(&partitions).expect("encode");
        let mut expected = partitions;
        expected.sort();
        assert_eq!(decode_assignment(&bytes).expect("decode"), expected);
        assert!(decode_assignment(&Bytes::new()).expect("empty").is_empty());
    }

    #[test]
    fn subscription_payload_round_trips() {
        let topics = vec!["orders".to_owned(), "payments".to_owned()];
        let bytes = encode_subscription(&topics).expect("encode");
        assert_eq!(decode_subscription(&bytes).expect("decode"), topics);
    }

    #[test]
    fn truncated_payloads_are_errors_not_panics() {
        let bytes = encode_assignment(&[("a".to_owned(), 1)]).expect("encode");
        for cut in 0..bytes.len() {
            let _ = decode_assignment(&bytes.slice(..cut));
        }
        assert!(decode_assignment(&Bytes::from_static(&[0])).is_err());
    }
}
