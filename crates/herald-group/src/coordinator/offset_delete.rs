//! OffsetDelete, as Kafka's `handleDeleteOffsets`: an Empty group may drop
//! any offsets; an active consumer group only those of topics none of its
//! members subscribes to.

use crate::api::{OffsetDeleteRequest, OffsetDeleteResponse, PartitionResult};
use crate::effects::AppendPurpose;
use crate::error::ErrorCode;
use crate::group::CONSUMER_PROTOCOL_TYPE;
use crate::output::{Output, RequestId};
use crate::records::Record;
use crate::state::GroupState;

use super::GroupCoordinator;

impl GroupCoordinator {
    pub(super) fn handle_offset_delete(&mut self, request: RequestId, req: OffsetDeleteRequest) {
        let group_error = |error| OffsetDeleteResponse {
            error,
            partitions: Vec::new(),
        };
        let response = if req.group_id.is_empty() {
            group_error(ErrorCode::InvalidGroupId)
        } else {
            match self.groups.get_mut(&req.group_id) {
                None => group_error(ErrorCode::GroupIdNotFound),
                Some(group) if group.is(GroupState::Dead) => {
                    group_error(ErrorCode::GroupIdNotFound)
                }
                Some(group)
                    if !group.is(GroupState::Empty)
                        && group.protocol_type.as_deref() != Some(CONSUMER_PROTOCOL_TYPE) =>
                {
                    group_error(ErrorCode::NonEmptyGroup)
                }
                Some(group) => {
                    let mut records = Vec::new();
                    let mut partitions = Vec::with_capacity(req.partitions.len());
                    for tp in req.partitions {
                        let consumed =
                            !group.is(GroupState::Empty) && group.is_subscribed_to_topic(&tp.topic);
                        let error = if consumed {
                            ErrorCode::GroupSubscribedToTopic
                        } else {
                            if group.offsets.committed.contains_key(&tp) {
                                group.offsets.add_pending(&tp);
                                records.push(Record::OffsetDeleted {
                                    group_id: req.group_id.clone(),
                                    topic: tp.topic.clone(),
                                    partition: tp.partition,
                                });
                            }
                            ErrorCode::None
                        };
                        partitions.push(PartitionResult {
                            topic_partition: tp,
                            error,
                        });
                    }
                    if !records.is_empty() {
                        let purpose = AppendPurpose::OffsetDelete {
                            request,
                            results: partitions,
                        };
                        return self.fx.persist(records, purpose);
                    }
                    OffsetDeleteResponse {
                        error: ErrorCode::None,
                        partitions,
                    }
                }
            }
        };
        self.fx.out.push(Output::OffsetDelete { request, response });
    }
}
