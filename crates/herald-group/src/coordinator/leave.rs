//! LeaveGroup, as Kafka's `handleLeaveGroup`: members leave by member id, a
//! static member can be removed by an admin by its group.instance.id alone,
//! and each member of a batch gets its own result.

use crate::api::{LeaveGroupMemberResult, LeaveGroupRequest, LeaveGroupResponse, MemberIdentity};
use crate::effects::Effects;
use crate::error::ErrorCode;
use crate::group::Group;
use crate::output::{Output, RebalanceReason, RemovalReason, RequestId};
use crate::state::GroupState;

use super::GroupCoordinator;

impl GroupCoordinator {
    pub(super) fn handle_leave_group(&mut self, request: RequestId, req: LeaveGroupRequest) {
        let response = self.leave(req);
        self.fx.out.push(Output::LeaveGroup { request, response });
    }

    fn leave(&mut self, req: LeaveGroupRequest) -> LeaveGroupResponse {
        let all = |error| LeaveGroupResponse {
            error: ErrorCode::None,
            members: req
                .members
                .iter()
                .map(|member| LeaveGroupMemberResult {
                    member: member.clone(),
                    error,
                })
                .collect(),
        };
        if req.group_id.is_empty() {
            return LeaveGroupResponse {
                error: ErrorCode::InvalidGroupId,
                members: Vec::new(),
            };
        }
        let Some(group) = self.groups.get_mut(&req.group_id) else {
            return all(ErrorCode::UnknownMemberId);
        };
        if group.is(GroupState::Dead) {
            return LeaveGroupResponse {
                error: ErrorCode::CoordinatorNotAvailable,
                members: Vec::new(),
            };
        }
        let members = req
            .members
            .iter()
            .map(|member| LeaveGroupMemberResult {
                member: member.clone(),
                error: leave_one(group, &mut self.fx, member),
            })
            .collect();
        LeaveGroupResponse {
            error: ErrorCode::None,
            members,
        }
    }
}

fn leave_one(group: &mut Group, fx: &mut Effects, leaving: &MemberIdentity) -> ErrorCode {
    let instance = leaving.group_instance_id.as_deref();
    if leaving.member_id.is_empty() {
        let Some(member_id) = instance
            .and_then(|i| group.static_member_id(i))
            .map(str::to_owned)
        else {
            return ErrorCode::UnknownMemberId;
        };
        remove(group, fx, &member_id);
        ErrorCode::None
    } else if group.pending_members.contains(&leaving.member_id) {
        group.remove_pending_member(fx, &leaving.member_id);
        ErrorCode::None
    } else if group.is_static_member_fenced(instance, &leaving.member_id) {
        ErrorCode::FencedInstanceId
    } else if group.has_member(&leaving.member_id) {
        remove(group, fx, &leaving.member_id);
        ErrorCode::None
    } else {
        ErrorCode::UnknownMemberId
    }
}

fn remove(group: &mut Group, fx: &mut Effects, member_id: &str) {
    group.remove_member_and_update(
        fx,
        member_id,
        RemovalReason::Left,
        RebalanceReason::MemberLeft,
    );
}
