//! SyncGroup, as Kafka's `handleSyncGroup`: followers wait for the leader's
//! assignment; the leader's request carries it and makes the group Stable.

use crate::api::{SyncGroupRequest, SyncGroupResponse};
use crate::error::ErrorCode;
use crate::output::RequestId;
use crate::state::GroupState;

use super::GroupCoordinator;

impl GroupCoordinator {
    pub(super) fn handle_sync_group(&mut self, request: RequestId, req: SyncGroupRequest) {
        let fx = &mut self.fx;
        if req.group_id.is_empty() {
            return fx.sync_response(request, SyncGroupResponse::error(ErrorCode::InvalidGroupId));
        }
        let Some(group) = self.groups.get_mut(&req.group_id) else {
            return fx.sync_response(
                request,
                SyncGroupResponse::error(ErrorCode::UnknownMemberId),
            );
        };
        if group.is(GroupState::Dead) {
            return fx.sync_response(
                request,
                SyncGroupResponse::error(ErrorCode::CoordinatorNotAvailable),
            );
        }
        if let Err(error) = group.check_member(
            &req.member_id,
            req.group_instance_id.as_deref(),
            req.generation_id,
        ) {
            return fx.sync_response(request, SyncGroupResponse::error(error));
        }
        let type_mismatch = req
            .protocol_type
            .as_ref()
            .is_some_and(|t| group.protocol_type.as_ref() != Some(t));
        let name_mismatch = req
            .protocol_name
            .as_ref()
            .is_some_and(|n| group.protocol_name.as_ref() != Some(n));
        if type_mismatch || name_mismatch {
            return fx.sync_response(
                request,
                SyncGroupResponse::error(ErrorCode::InconsistentGroupProtocol),
            );
        }
        match group.state {
            GroupState::Empty => fx.sync_response(
                request,
                SyncGroupResponse::error(ErrorCode::UnknownMemberId),
            ),
            GroupState::PreparingRebalance => fx.sync_response(
                request,
                SyncGroupResponse::error(ErrorCode::RebalanceInProgress),
            ),
            GroupState::CompletingRebalance => {
                if let Some(member) = group.member_mut(&req.member_id) {
                    if let Some(previous) = member.awaiting_sync.replace(request) {
                        // A repeated SyncGroup replaces the earlier one, which
                        // Kafka would leave unanswered.
                        fx.sync_response(
                            previous,
                            SyncGroupResponse::error(ErrorCode::RebalanceInProgress),
                        );
                    }
                }
                group.mark_synced(fx, &req.member_id);
                if group.is_leader(&req.member_id) {
                    group.complete_sync(fx, req.assignments);
                }
            }
            GroupState::Stable => {
                group.mark_synced(fx, &req.member_id);
                if let Some(member) = group.member(&req.member_id) {
                    let response = SyncGroupResponse {
                        error: ErrorCode::None,
                        protocol_type: group.protocol_type.clone(),
                        protocol_name: group.protocol_name.clone(),
                        assignment: member.assignment.clone(),
                    };
                    let session_timeout_ms = member.session_timeout_ms;
                    fx.sync_response(request, response);
                    fx.schedule_heartbeat(&req.group_id, &req.member_id, session_timeout_ms);
                }
            }
            GroupState::Dead => fx.sync_response(
                request,
                SyncGroupResponse::error(ErrorCode::CoordinatorNotAvailable),
            ),
        }
    }
}
