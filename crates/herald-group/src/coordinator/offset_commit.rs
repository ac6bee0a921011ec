//! OffsetCommit, as Kafka's `handleCommitOffsets`: members commit with their
//! generation; simple consumers (generation -1, no member id) commit to a
//! group without members. Accepted offsets are persisted first and applied
//! and acknowledged when the append is durable.

use crate::api::{OffsetCommitRequest, OffsetCommitResponse, PartitionResult, TopicPartition};
use crate::effects::AppendPurpose;
use crate::error::ErrorCode;
use crate::group::Group;
use crate::output::{Output, RequestId};
use crate::records::Record;
use crate::state::GroupState;

use super::GroupCoordinator;

impl GroupCoordinator {
    pub(super) fn handle_offset_commit(&mut self, request: RequestId, req: OffsetCommitRequest) {
        let respond_all = |fx: &mut crate::effects::Effects, error: ErrorCode| {
            let partitions = req
                .partitions
                .iter()
                .map(|p| PartitionResult {
                    topic_partition: TopicPartition::new(p.topic.clone(), p.partition),
                    error,
                })
                .collect();
            fx.out.push(Output::OffsetCommit {
                request,
                response: OffsetCommitResponse { partitions },
            });
        };
        if !self.groups.contains_key(&req.group_id) {
            if req.generation_id >= 0 {
                // A member of a generation this coordinator never saw (for
                // example from before a restart): it must rejoin.
                return respond_all(&mut self.fx, ErrorCode::IllegalGeneration);
            }
            let group = Group::new(req.group_id.clone(), Some(self.fx.now_ms));
            self.groups.insert(req.group_id.clone(), group);
        }
        let Some(group) = self.groups.get_mut(&req.group_id) else {
            return respond_all(&mut self.fx, ErrorCode::UnknownServerError);
        };
        if let Err(error) = validate_commit(group, &req) {
            return respond_all(&mut self.fx, error);
        }
        match group.state {
            GroupState::Empty => {}
            // While preparing, commits are still taken: the member learns of
            // the rebalance from its next heartbeat.
            GroupState::Stable | GroupState::PreparingRebalance => {
                if let Some(member) = group.member(&req.member_id) {
                    let session_timeout_ms = member.session_timeout_ms;
                    self.fx
                        .schedule_heartbeat(&req.group_id, &req.member_id, session_timeout_ms);
                }
            }
            // The member has its new generation but not its assignment yet.
            GroupState::CompletingRebalance | GroupState::Dead => {
                return respond_all(&mut self.fx, ErrorCode::RebalanceInProgress);
            }
        }
        let metadata_bytes_max = self.fx.config.offset_metadata_bytes_max;
        let commit_timestamp_ms = self.fx.now_ms;
        let mut records = Vec::new();
        let mut results = Vec::with_capacity(req.partitions.len());
        for partition in req.partitions {
            let topic_partition = TopicPartition::new(partition.topic.clone(), partition.partition);
            let metadata = partition.metadata.unwrap_or_default();
            let error = if metadata.len() > metadata_bytes_max {
                ErrorCode::OffsetMetadataTooLarge
            } else {
                group.offsets.add_pending(&topic_partition);
                records.push(Record::OffsetCommitted {
                    group_id: req.group_id.clone(),
                    topic: partition.topic,
                    partition: partition.partition,
                    offset: partition.offset,
                    leader_epoch: partition.leader_epoch.filter(|epoch| *epoch >= 0),
                    metadata,
                    commit_timestamp_ms,
                });
                ErrorCode::None
            };
            results.push(PartitionResult {
                topic_partition,
                error,
            });
        }
        if records.is_empty() {
            self.fx.out.push(Output::OffsetCommit {
                request,
                response: OffsetCommitResponse {
                    partitions: results,
                },
            });
        } else {
            self.fx
                .persist(records, AppendPurpose::OffsetCommit { request, results });
        }
    }
}

/// Kafka's `validateOffsetCommit`: a request naming a member (generation,
/// member id or instance id) is checked as a member; an anonymous one is
/// only taken while the group has no members.
fn validate_commit(group: &Group, req: &OffsetCommitRequest) -> Result<(), ErrorCode> {
    if group.is(GroupState::Dead) {
        return Err(ErrorCode::CoordinatorNotAvailable);
    }
    let names_a_member =
        req.generation_id >= 0 || !req.member_id.is_empty() || req.group_instance_id.is_some();
    if names_a_member {
        group.check_member(
            &req.member_id,
            req.group_instance_id.as_deref(),
            req.generation_id,
        )
    } else if !group.is(GroupState::Empty) {
        Err(ErrorCode::UnknownMemberId)
    } else {
        Ok(())
    }
}
