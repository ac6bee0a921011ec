//! JoinGroup, as Kafka's `handleJoinGroup`: new members get an id (and with
//! v4+ first MEMBER_ID_REQUIRED), static members replace their previous
//! incarnation, known members rejoin; the response is held until the
//! rebalance's join phase completes.

use crate::api::{JoinGroupRequest, JoinGroupResponse, SyncGroupResponse};
use crate::effects::Effects;
use crate::error::ErrorCode;
use crate::group::Group;
use crate::member::Member;
use crate::output::{RebalanceReason, RequestId};
use crate::state::GroupState;
use crate::timers::TimerKey;

use super::GroupCoordinator;

impl GroupCoordinator {
    pub(super) fn handle_join_group(&mut self, request: RequestId, req: JoinGroupRequest) {
        let fx = &mut self.fx;
        if req.group_id.is_empty() {
            return fx.join_response(
                request,
                JoinGroupResponse::error(req.member_id, ErrorCode::InvalidGroupId),
            );
        }
        if req.session_timeout_ms < fx.config.session_timeout_ms_min
            || req.session_timeout_ms > fx.config.session_timeout_ms_max
        {
            return fx.join_response(
                request,
                JoinGroupResponse::error(req.member_id, ErrorCode::InvalidSessionTimeout),
            );
        }
        let is_unknown_member = req.member_id.is_empty();
        if is_unknown_member && !self.groups.contains_key(&req.group_id) {
            let group = Group::new(req.group_id.clone(), Some(fx.now_ms));
            self.groups.insert(req.group_id.clone(), group);
        }
        let Some(group) = self.groups.get_mut(&req.group_id) else {
            return fx.join_response(
                request,
                JoinGroupResponse::error(req.member_id, ErrorCode::UnknownMemberId),
            );
        };
        if !accepts_joining_member(group, &req.member_id, fx.config.group_size_max) {
            // Kafka drops a refused existing member too, so that the last
            // members to rejoin a group that shrank its limit are the ones
            // kicked out.
            if group.remove_member(&req.member_id).is_some() {
                fx.cancel_heartbeat(&group.group_id, &req.member_id);
            }
            fx.join_response(
                request,
                JoinGroupResponse::error("", ErrorCode::GroupMaxSizeReached),
            );
        } else if is_unknown_member {
            join_new_member(group, fx, request, req);
        } else {
            join_current_member(group, fx, request, req);
        }
        group.try_complete_join(fx);
    }
}

/// Kafka's `acceptJoiningMember`: while preparing, count members that have
/// rejoined (the group may be above a lowered limit); otherwise count all.
fn accepts_joining_member(group: &Group, member_id: &str, group_size_max: usize) -> bool {
    match group.state {
        GroupState::Empty | GroupState::Dead => true,
        GroupState::PreparingRebalance => {
            group
                .member(member_id)
                .is_some_and(|m| m.awaiting_join.is_some())
                || group.num_awaiting_join() < group_size_max
        }
        GroupState::CompletingRebalance | GroupState::Stable => {
            group.has_member(member_id) || group.members.len() < group_size_max
        }
    }
}

fn protocol_names(req: &JoinGroupRequest) -> Vec<&str> {
    req.protocols.iter().map(|p| p.name.as_str()).collect()
}

fn join_new_member(group: &mut Group, fx: &mut Effects, request: RequestId, req: JoinGroupRequest) {
    if group.is(GroupState::Dead) {
        return fx.join_response(
            request,
            JoinGroupResponse::error("", ErrorCode::CoordinatorNotAvailable),
        );
    }
    if !group.supports_protocols(&req.protocol_type, &protocol_names(&req)) {
        return fx.join_response(
            request,
            JoinGroupResponse::error("", ErrorCode::InconsistentGroupProtocol),
        );
    }
    let prefix = req.group_instance_id.as_deref().unwrap_or(&req.client_id);
    let member_id = fx.member_ids.generate(prefix);
    match req.group_instance_id.as_deref() {
        Some(instance) => match group.static_member_id(instance).map(str::to_owned) {
            Some(old_member_id) => {
                replace_static_member(group, fx, request, req, &old_member_id, member_id)
            }
            None => add_member_and_rebalance(group, fx, request, req, member_id),
        },
        None if req.require_known_member_id => {
            // The id is only reserved: the member must come back with it, so
            // that a client retrying a lost response does not leave a
            // second, defunct member behind.
            group.pending_members.insert(member_id.clone());
            let deadline_ms = fx.after_ms(i64::from(req.session_timeout_ms));
            fx.timers.schedule(
                TimerKey::PendingMember {
                    group_id: group.group_id.clone(),
                    member_id: member_id.clone(),
                },
                deadline_ms,
            );
            fx.join_response(
                request,
                JoinGroupResponse::error(member_id, ErrorCode::MemberIdRequired),
            );
        }
        None => add_member_and_rebalance(group, fx, request, req, member_id),
    }
}

fn join_current_member(
    group: &mut Group,
    fx: &mut Effects,
    request: RequestId,
    req: JoinGroupRequest,
) {
    let member_id = req.member_id.clone();
    if group.is(GroupState::Dead) {
        return fx.join_response(
            request,
            JoinGroupResponse::error(member_id, ErrorCode::CoordinatorNotAvailable),
        );
    }
    if !group.supports_protocols(&req.protocol_type, &protocol_names(&req)) {
        return fx.join_response(
            request,
            JoinGroupResponse::error(member_id, ErrorCode::InconsistentGroupProtocol),
        );
    }
    if group.pending_members.contains(&member_id) {
        fx.timers.cancel(&TimerKey::PendingMember {
            group_id: group.group_id.clone(),
            member_id: member_id.clone(),
        });
        return add_member_and_rebalance(group, fx, request, req, member_id);
    }
    let instance = req.group_instance_id.as_deref();
    if group.is_static_member_fenced(instance, &member_id) {
        return fx.join_response(
            request,
            JoinGroupResponse::error(member_id, ErrorCode::FencedInstanceId),
        );
    }
    let instance_unknown = instance.is_some_and(|i| group.static_member_id(i).is_none());
    let Some(member) = group.member(&member_id) else {
        return fx.join_response(
            request,
            JoinGroupResponse::error(member_id, ErrorCode::UnknownMemberId),
        );
    };
    if instance_unknown {
        return fx.join_response(
            request,
            JoinGroupResponse::error(member_id, ErrorCode::UnknownMemberId),
        );
    }
    let unchanged = member.matches(&req.protocols);
    match group.state {
        GroupState::PreparingRebalance => update_member_and_rebalance(
            group,
            fx,
            request,
            req,
            RebalanceReason::MemberMetadataChanged,
        ),
        GroupState::CompletingRebalance if unchanged => {
            // Same metadata: the member probably lost the JoinGroup response;
            // hand it the current generation again.
            let response =
                current_generation_response(group, &member_id, group.is_leader(&member_id));
            fx.join_response(request, response);
        }
        GroupState::CompletingRebalance => update_member_and_rebalance(
            group,
            fx,
            request,
            req,
            RebalanceReason::MemberMetadataChanged,
        ),
        GroupState::Stable if group.is_leader(&member_id) => {
            // The leader rejoins when it sees a change that affects the
            // assignment but not its metadata (e.g. new partitions).
            update_member_and_rebalance(group, fx, request, req, RebalanceReason::LeaderRejoined)
        }
        GroupState::Stable if !unchanged => update_member_and_rebalance(
            group,
            fx,
            request,
            req,
            RebalanceReason::MemberMetadataChanged,
        ),
        GroupState::Stable => {
            let response = current_generation_response(group, &member_id, false);
            fx.join_response(request, response);
        }
        GroupState::Empty | GroupState::Dead => fx.join_response(
            request,
            JoinGroupResponse::error(member_id, ErrorCode::UnknownMemberId),
        ),
    }
}

fn current_generation_response(
    group: &Group,
    member_id: &str,
    with_members: bool,
) -> JoinGroupResponse {
    JoinGroupResponse {
        error: ErrorCode::None,
        generation_id: group.generation_id,
        protocol_type: group.protocol_type.clone(),
        protocol_name: group.protocol_name.clone(),
        leader: group.leader_id.clone().unwrap_or_default(),
        skip_assignment: false,
        member_id: member_id.to_owned(),
        members: if with_members {
            group.current_member_metadata()
        } else {
            Vec::new()
        },
    }
}

fn add_member_and_rebalance(
    group: &mut Group,
    fx: &mut Effects,
    request: RequestId,
    req: JoinGroupRequest,
    member_id: String,
) {
    let member = Member {
        member_id: member_id.clone(),
        group_instance_id: req.group_instance_id,
        client_id: req.client_id,
        client_host: req.client_host,
        rebalance_timeout_ms: req.rebalance_timeout_ms,
        session_timeout_ms: req.session_timeout_ms,
        protocol_type: req.protocol_type,
        protocols: req.protocols,
        assignment: Default::default(),
        awaiting_join: Some(request),
        awaiting_sync: None,
        is_new: true,
    };
    if group.is(GroupState::PreparingRebalance) && group.generation_id == 0 {
        group.new_member_added = true;
    }
    group.add_member(member);
    // A new member cannot heartbeat while its JoinGroup is held, so it gets
    // the new-member join timeout instead of its session timeout.
    fx.schedule_heartbeat(
        &group.group_id,
        &member_id,
        fx.config.new_member_join_timeout_ms,
    );
    group.maybe_prepare_rebalance(fx, RebalanceReason::MemberJoined);
}

fn update_member_and_rebalance(
    group: &mut Group,
    fx: &mut Effects,
    request: RequestId,
    req: JoinGroupRequest,
    reason: RebalanceReason,
) {
    if let Some(member) = group.member_mut(&req.member_id) {
        member.protocols = req.protocols;
        member.rebalance_timeout_ms = req.rebalance_timeout_ms;
        member.session_timeout_ms = req.session_timeout_ms;
        // Kafka silently drops a JoinGroup replaced by a newer one from the
        // same member; herald answers it so no request is left hanging.
        if let Some(previous) = member.awaiting_join.replace(request) {
            fx.join_response(
                previous,
                JoinGroupResponse::error(req.member_id.clone(), ErrorCode::RebalanceInProgress),
            );
        }
    }
    group.maybe_prepare_rebalance(fx, reason);
}

/// A static member restarted and joins with no member id: its previous
/// incarnation is fenced and replaced. In Stable, if the group's protocol
/// stays the same, nobody rebalances: the member gets the current
/// generation and its old assignment in SyncGroup.
fn replace_static_member(
    group: &mut Group,
    fx: &mut Effects,
    request: RequestId,
    req: JoinGroupRequest,
    old_member_id: &str,
    new_member_id: String,
) {
    let previous_leader = group.leader_id.clone().unwrap_or_default();
    if let Some(old) = group.member_mut(old_member_id) {
        if let Some(pending) = old.awaiting_join.take() {
            fx.join_response(
                pending,
                JoinGroupResponse::error(old_member_id, ErrorCode::FencedInstanceId),
            );
        }
        if let Some(pending) = old.awaiting_sync.take() {
            fx.sync_response(
                pending,
                SyncGroupResponse::error(ErrorCode::FencedInstanceId),
            );
        }
    }
    group.rename_member(old_member_id, &new_member_id);
    fx.cancel_heartbeat(&group.group_id, old_member_id);
    let group_id = group.group_id.clone();
    if let Some(member) = group.member_mut(&new_member_id) {
        fx.schedule_heartbeat(&group_id, &new_member_id, member.session_timeout_ms);
        member.protocols = req.protocols;
        member.rebalance_timeout_ms = req.rebalance_timeout_ms;
        member.session_timeout_ms = req.session_timeout_ms;
        member.client_id = req.client_id;
        member.client_host = req.client_host;
        member.awaiting_join = Some(request);
    }
    match group.state {
        GroupState::Stable if group.select_protocol() == group.protocol_name => {
            let is_leader = group.is_leader(&new_member_id);
            let response = if req.supports_skip_assignment {
                // v9+: a static leader is told it leads but must not run the
                // assignor, whose output a Stable group would ignore.
                JoinGroupResponse {
                    skip_assignment: is_leader,
                    ..current_generation_response(group, &new_member_id, is_leader)
                }
            } else {
                // Before v9 the old leader id is returned, so a restarted
                // leader does not think it leads and run a useless
                // assignment.
                JoinGroupResponse {
                    leader: previous_leader,
                    ..current_generation_response(group, &new_member_id, false)
                }
            };
            if let Some(member) = group.member_mut(&new_member_id) {
                member.awaiting_join = None;
            }
            fx.join_response(request, response);
        }
        GroupState::Stable => {
            group.maybe_prepare_rebalance(fx, RebalanceReason::StaticMemberReplaced)
        }
        // The leader may already be assigning with the old member id, which
        // the new one would never match: start over.
        GroupState::CompletingRebalance => {
            group.prepare_rebalance(fx, RebalanceReason::StaticMemberReplaced)
        }
        GroupState::PreparingRebalance | GroupState::Empty | GroupState::Dead => {}
    }
}
