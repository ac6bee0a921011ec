//! Heartbeat, as Kafka's `handleHeartbeat`: keeps a member's session alive
//! and tells it, with REBALANCE_IN_PROGRESS, that it must rejoin.

use crate::api::HeartbeatRequest;
use crate::error::ErrorCode;
use crate::output::{Output, RequestId};
use crate::state::GroupState;

use super::GroupCoordinator;

impl GroupCoordinator {
    pub(super) fn handle_heartbeat(&mut self, request: RequestId, req: HeartbeatRequest) {
        let error = self.heartbeat_error(&req);
        self.fx.out.push(Output::Heartbeat { request, error });
    }

    fn heartbeat_error(&mut self, req: &HeartbeatRequest) -> ErrorCode {
        if req.group_id.is_empty() {
            return ErrorCode::InvalidGroupId;
        }
        let Some(group) = self.groups.get(&req.group_id) else {
            return ErrorCode::UnknownMemberId;
        };
        if group.is(GroupState::Dead) {
            return ErrorCode::CoordinatorNotAvailable;
        }
        if let Err(error) = group.check_member(
            &req.member_id,
            req.group_instance_id.as_deref(),
            req.generation_id,
        ) {
            return error;
        }
        let session_timeout_ms = group
            .member(&req.member_id)
            .map_or(0, |m| m.session_timeout_ms);
        match group.state {
            GroupState::Empty => ErrorCode::UnknownMemberId,
            GroupState::Dead => ErrorCode::CoordinatorNotAvailable,
            // Members may heartbeat as soon as they have their JoinGroup
            // response, before their SyncGroup.
            GroupState::CompletingRebalance | GroupState::Stable => {
                self.fx
                    .schedule_heartbeat(&req.group_id, &req.member_id, session_timeout_ms);
                ErrorCode::None
            }
            GroupState::PreparingRebalance => {
                self.fx
                    .schedule_heartbeat(&req.group_id, &req.member_id, session_timeout_ms);
                ErrorCode::RebalanceInProgress
            }
        }
    }
}
