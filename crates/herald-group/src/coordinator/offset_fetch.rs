//! OffsetFetch, as Kafka's `handleFetchOffsets`: a read of committed
//! offsets, -1 where none is committed.

use crate::api::{OffsetFetchPartition, OffsetFetchRequest, OffsetFetchResponse, TopicPartition};
use crate::error::ErrorCode;
use crate::state::GroupState;

use super::GroupCoordinator;

fn no_offset(topic_partition: TopicPartition, error: ErrorCode) -> OffsetFetchPartition {
    OffsetFetchPartition {
        topic_partition,
        offset: -1,
        leader_epoch: None,
        metadata: String::new(),
        error,
    }
}

impl GroupCoordinator {
    /// Committed offsets of a group (OffsetFetch). An unknown group has no
    /// offsets, which is not an error.
    pub fn offset_fetch(&self, req: &OffsetFetchRequest) -> OffsetFetchResponse {
        let group = self
            .groups
            .get(&req.group_id)
            .filter(|g| !g.is(GroupState::Dead));
        let Some(group) = group else {
            let partitions = req
                .partitions
                .iter()
                .flatten()
                .map(|tp| no_offset(tp.clone(), ErrorCode::None))
                .collect();
            return OffsetFetchResponse {
                error: ErrorCode::None,
                partitions,
            };
        };
        let requested: Vec<TopicPartition> = match &req.partitions {
            Some(partitions) => partitions.clone(),
            None => group.offsets.committed.keys().cloned().collect(),
        };
        let partitions = requested
            .into_iter()
            .map(|tp| {
                if req.require_stable && group.offsets.has_pending(&tp) {
                    return no_offset(tp, ErrorCode::UnstableOffsetCommit);
                }
                match group.offsets.committed.get(&tp) {
                    Some(committed) => OffsetFetchPartition {
                        topic_partition: tp,
                        offset: committed.offset,
                        leader_epoch: committed.leader_epoch,
                        metadata: committed.metadata.clone(),
                        error: ErrorCode::None,
                    },
                    None => no_offset(tp, ErrorCode::None),
                }
            })
            .collect();
        OffsetFetchResponse {
            error: ErrorCode::None,
            partitions,
        }
    }
}
