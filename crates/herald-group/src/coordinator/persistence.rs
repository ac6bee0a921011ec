//! Applying durable records: at start-up by replay, and while running when
//! the caller reports an append durable. Both go through one function, so
//! the state after a restart is the state before it.

use crate::api::{
    DeleteGroupsResponse, OffsetCommitResponse, OffsetDeleteResponse, PartitionResult,
    TopicPartition,
};
use crate::effects::{AppendPurpose, PendingAppend};
use crate::error::ErrorCode;
use crate::group::Group;
use crate::offsets::CommittedOffset;
use crate::output::{AppendId, AppendResult, GroupEvent, Output};
use crate::records::Record;
use crate::state::GroupState;

use super::GroupCoordinator;

/// A persisted change that did not make it to disk is answered with this:
/// clients retry (after finding the coordinator again).
const PERSIST_FAILED: ErrorCode = ErrorCode::CoordinatorNotAvailable;

impl GroupCoordinator {
    pub(super) fn handle_append_completed(&mut self, append: AppendId, result: AppendResult) {
        let Some(PendingAppend { records, purpose }) = self.fx.appends.remove(&append) else {
            return;
        };
        for record in &records {
            self.clear_pending(record);
        }
        let durable = result == AppendResult::Durable;
        if durable {
            for record in records {
                self.apply(record, true);
            }
        }
        let fail = |results: Vec<PartitionResult>| -> Vec<PartitionResult> {
            results
                .into_iter()
                .map(|mut r| {
                    if r.error.is_ok() && !durable {
                        r.error = PERSIST_FAILED;
                    }
                    r
                })
                .collect()
        };
        match purpose {
            AppendPurpose::OffsetCommit { request, results } => {
                self.fx.out.push(Output::OffsetCommit {
                    request,
                    response: OffsetCommitResponse {
                        partitions: fail(results),
                    },
                })
            }
            AppendPurpose::OffsetDelete { request, results } => {
                self.fx.out.push(Output::OffsetDelete {
                    request,
                    response: OffsetDeleteResponse {
                        error: ErrorCode::None,
                        partitions: fail(results),
                    },
                })
            }
            AppendPurpose::DeleteGroups {
                request,
                mut results,
            } => {
                if !durable {
                    for result in results.iter_mut().filter(|r| r.error.is_ok()) {
                        result.error = PERSIST_FAILED;
                        if let Some(group) = self.groups.get_mut(&result.group_id) {
                            group.transition(GroupState::Empty, self.fx.now_ms);
                        }
                    }
                }
                self.fx.out.push(Output::DeleteGroups {
                    request,
                    response: DeleteGroupsResponse { results },
                })
            }
            // Expired offsets that failed to persist stay, and are tried
            // again at the next retention check.
            AppendPurpose::Expiration => {}
        }
    }

    fn clear_pending(&mut self, record: &Record) {
        let (group_id, topic, partition) = match record {
            Record::OffsetCommitted {
                group_id,
                topic,
                partition,
                ..
            }
            | Record::OffsetDeleted {
                group_id,
                topic,
                partition,
            } => (group_id, topic, *partition),
            Record::GroupDeleted { .. } => return,
        };
        if let Some(group) = self.groups.get_mut(group_id) {
            group
                .offsets
                .remove_pending(&TopicPartition::new(topic.clone(), partition));
        }
    }

    /// Applies one durable record. `live` is false during replay, when there
    /// is nobody to tell.
    pub(super) fn apply(&mut self, record: Record, live: bool) {
        match record {
            Record::OffsetCommitted {
                group_id,
                topic,
                partition,
                offset,
                leader_epoch,
                metadata,
                commit_timestamp_ms,
            } => {
                let group = self
                    .groups
                    .entry(group_id.clone())
                    .or_insert_with(|| Group::new(group_id, None));
                group.offsets.committed.insert(
                    TopicPartition::new(topic, partition),
                    CommittedOffset {
                        offset,
                        leader_epoch,
                        metadata,
                        commit_timestamp_ms,
                    },
                );
            }
            Record::OffsetDeleted {
                group_id,
                topic,
                partition,
            } => {
                let Some(group) = self.groups.get_mut(&group_id) else {
                    return;
                };
                group
                    .offsets
                    .committed
                    .remove(&TopicPartition::new(topic, partition));
                if group.is_removable() {
                    self.remove_group(&group_id, live);
                }
            }
            Record::GroupDeleted { group_id } => self.remove_group(&group_id, live),
        }
    }

    /// Forgets a group and its deadlines.
    pub(super) fn remove_group(&mut self, group_id: &str, live: bool) {
        let Some(group) = self.groups.remove(group_id) else {
            return;
        };
        for key in group.timer_keys() {
            self.fx.timers.cancel(&key);
        }
        if live {
            self.fx.event(GroupEvent::GroupRemoved {
                group_id: group_id.to_owned(),
            });
        }
    }
}
