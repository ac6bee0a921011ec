//! The rebalance protocol of one group: starting a rebalance, ending its
//! join phase, handing out the assignment, and removing members, each as
//! Kafka's GroupCoordinator does it. Every answer to a waiting member goes
//! out through [`Effects`].

use std::collections::BTreeMap;

use bytes::Bytes;

use crate::api::{JoinGroupResponse, MemberAssignment, SyncGroupResponse};
use crate::effects::Effects;
use crate::error::ErrorCode;
use crate::group::{Group, JoinPhase};
use crate::output::{GroupEvent, RebalanceReason, RemovalReason};
use crate::state::GroupState;
use crate::timers::TimerKey;

impl Group {
    fn join_timer(&self) -> TimerKey {
        TimerKey::Join {
            group_id: self.group_id.clone(),
        }
    }

    fn pending_sync_timer(&self) -> TimerKey {
        TimerKey::PendingSync {
            group_id: self.group_id.clone(),
        }
    }

    /// Starts a rebalance if the state allows one (not already preparing,
    /// not Dead).
    pub(crate) fn maybe_prepare_rebalance(&mut self, fx: &mut Effects, reason: RebalanceReason) {
        if matches!(
            self.state,
            GroupState::Stable | GroupState::CompletingRebalance | GroupState::Empty
        ) {
            self.prepare_rebalance(fx, reason);
        }
    }

    /// Enters PreparingRebalance: members waiting for an assignment are told
    /// to rejoin, and the join phase gets its deadline (the initial delay for
    /// an Empty group, the rebalance timeout otherwise).
    pub(crate) fn prepare_rebalance(&mut self, fx: &mut Effects, reason: RebalanceReason) {
        if self.is(GroupState::CompletingRebalance) {
            self.reset_and_propagate_assignment_error(fx, ErrorCode::RebalanceInProgress);
        }
        fx.timers.cancel(&self.pending_sync_timer());
        let rebalance_timeout_ms = self.rebalance_timeout_ms();
        let delay_ms = if self.is(GroupState::Empty) {
            let initial_delay_ms = i64::from(fx.config.initial_rebalance_delay_ms);
            self.join_phase = Some(JoinPhase::Initial {
                remaining_ms: (rebalance_timeout_ms - initial_delay_ms).max(0),
            });
            initial_delay_ms
        } else {
            self.join_phase = Some(JoinPhase::Normal);
            rebalance_timeout_ms
        };
        fx.event(GroupEvent::RebalanceStarted {
            group_id: self.group_id.clone(),
            generation_id: self.generation_id,
            reason,
        });
        self.transition(GroupState::PreparingRebalance, fx.now_ms);
        fx.timers.schedule(self.join_timer(), fx.after_ms(delay_ms));
        self.try_complete_join(fx);
    }

    /// Ends the join phase early once every member has rejoined (never
    /// during the initial delay, which only ends at its deadline).
    pub(crate) fn try_complete_join(&mut self, fx: &mut Effects) {
        if self.is(GroupState::PreparingRebalance)
            && self.join_phase == Some(JoinPhase::Normal)
            && self.has_all_members_joined()
        {
            self.complete_join(fx);
        }
    }

    /// The join phase's deadline passed.
    pub(crate) fn on_join_deadline(&mut self, fx: &mut Effects) {
        if !self.is(GroupState::PreparingRebalance) {
            return;
        }
        match self.join_phase {
            Some(JoinPhase::Initial { remaining_ms })
                if self.new_member_added && remaining_ms > 0 =>
            {
                // More members arrived during the delay: wait a little longer
                // for the rest of a group that is starting up together.
                self.new_member_added = false;
                let delay_ms = i64::from(fx.config.initial_rebalance_delay_ms).min(remaining_ms);
                self.join_phase = Some(JoinPhase::Initial {
                    remaining_ms: (remaining_ms - delay_ms).max(0),
                });
                fx.timers.schedule(self.join_timer(), fx.after_ms(delay_ms));
            }
            _ => self.complete_join(fx),
        }
    }

    /// Ends the join phase: dynamic members that did not rejoin are removed,
    /// the next generation starts, and every waiting JoinGroup is answered
    /// (the leader gets all members' metadata).
    fn complete_join(&mut self, fx: &mut Effects) {
        fx.timers.cancel(&self.join_timer());
        self.join_phase = None;
        let not_rejoined: Vec<String> = self
            .members
            .iter()
            .filter(|m| m.awaiting_join.is_none() && !m.is_static())
            .map(|m| m.member_id.clone())
            .collect();
        for member_id in not_rejoined {
            self.remove_member(&member_id);
            fx.cancel_heartbeat(&self.group_id, &member_id);
            fx.event(GroupEvent::MemberRemoved {
                group_id: self.group_id.clone(),
                member_id,
                reason: RemovalReason::NotRejoined,
            });
        }
        if !self.maybe_elect_new_joined_leader() && !self.members.is_empty() {
            // Only static members that have not rejoined are left: keep
            // waiting until they rejoin or their sessions expire.
            self.join_phase = Some(JoinPhase::Normal);
            let deadline_ms = fx.after_ms(self.rebalance_timeout_ms());
            fx.timers.schedule(self.join_timer(), deadline_ms);
            return;
        }
        self.init_next_generation(fx.now_ms);
        fx.event(GroupEvent::GenerationStarted {
            group_id: self.group_id.clone(),
            generation_id: self.generation_id,
            protocol_name: self.protocol_name.clone(),
            member_count: self.members.len(),
        });
        if self.is(GroupState::Empty) {
            return;
        }
        let leader_members = self.current_member_metadata();
        let leader = self.leader_id.clone().unwrap_or_default();
        for index in 0..self.members.len() {
            let is_leader = self.is_leader(&self.members[index].member_id);
            let member = &mut self.members[index];
            if let Some(request) = member.awaiting_join.take() {
                fx.join_response(
                    request,
                    JoinGroupResponse {
                        error: ErrorCode::None,
                        generation_id: self.generation_id,
                        protocol_type: self.protocol_type.clone(),
                        protocol_name: self.protocol_name.clone(),
                        leader: leader.clone(),
                        skip_assignment: false,
                        member_id: member.member_id.clone(),
                        members: if is_leader {
                            leader_members.clone()
                        } else {
                            Vec::new()
                        },
                    },
                );
            }
            member.is_new = false;
            let (member_id, session_timeout_ms) =
                (member.member_id.clone(), member.session_timeout_ms);
            fx.schedule_heartbeat(&self.group_id, &member_id, session_timeout_ms);
            self.pending_sync_members.insert(member_id);
        }
        let deadline_ms = fx.after_ms(self.rebalance_timeout_ms());
        fx.timers.schedule(self.pending_sync_timer(), deadline_ms);
    }

    /// Keeps the leader if it rejoined, else promotes any rejoined member;
    /// false when nobody rejoined.
    fn maybe_elect_new_joined_leader(&mut self) -> bool {
        let Some(leader_id) = self.leader_id.clone() else {
            return false;
        };
        if self
            .member(&leader_id)
            .is_some_and(|leader| leader.awaiting_join.is_some())
        {
            return true;
        }
        match self.members.iter().find(|m| m.awaiting_join.is_some()) {
            Some(member) => {
                self.leader_id = Some(member.member_id.clone());
                true
            }
            None => false,
        }
    }

    /// Answers every waiting SyncGroup with the member's assignment (or the
    /// error), and restarts the session of each answered member.
    fn propagate_assignment(&mut self, fx: &mut Effects, error: ErrorCode) {
        let (protocol_type, protocol_name) = if error.is_ok() {
            (self.protocol_type.clone(), self.protocol_name.clone())
        } else {
            (None, None)
        };
        for member in &mut self.members {
            if let Some(request) = member.awaiting_sync.take() {
                fx.sync_response(
                    request,
                    SyncGroupResponse {
                        error,
                        protocol_type: protocol_type.clone(),
                        protocol_name: protocol_name.clone(),
                        assignment: member.assignment.clone(),
                    },
                );
                fx.schedule_heartbeat(&self.group_id, &member.member_id, member.session_timeout_ms);
            }
        }
    }

    pub(crate) fn reset_and_propagate_assignment_error(
        &mut self,
        fx: &mut Effects,
        error: ErrorCode,
    ) {
        for member in &mut self.members {
            member.assignment = Bytes::new();
        }
        self.propagate_assignment(fx, error);
    }

    /// The leader's SyncGroup: store each member's assignment (missing ones
    /// empty, unknown member ids ignored), answer the waiting members, and
    /// become Stable.
    pub(crate) fn complete_sync(&mut self, fx: &mut Effects, assignments: Vec<MemberAssignment>) {
        let mut by_member: BTreeMap<String, Bytes> = assignments
            .into_iter()
            .map(|a| (a.member_id, a.assignment))
            .collect();
        for member in &mut self.members {
            member.assignment = by_member.remove(&member.member_id).unwrap_or_default();
        }
        self.propagate_assignment(fx, ErrorCode::None);
        self.transition(GroupState::Stable, fx.now_ms);
        fx.event(GroupEvent::Stable {
            group_id: self.group_id.clone(),
            generation_id: self.generation_id,
        });
    }

    /// A member sent SyncGroup: it is no longer awaited.
    pub(crate) fn mark_synced(&mut self, fx: &mut Effects, member_id: &str) {
        self.pending_sync_members.remove(member_id);
        if self.pending_sync_members.is_empty() {
            fx.timers.cancel(&self.pending_sync_timer());
        }
    }

    /// Members of the generation that never sent SyncGroup are removed, and
    /// the group rebalances without them.
    pub(crate) fn on_pending_sync_deadline(&mut self, fx: &mut Effects) {
        if !matches!(
            self.state,
            GroupState::CompletingRebalance | GroupState::Stable
        ) || self.pending_sync_members.is_empty()
        {
            return;
        }
        let never_synced: Vec<String> = self.pending_sync_members.iter().cloned().collect();
        for member_id in never_synced {
            self.remove_and_answer(fx, &member_id, RemovalReason::NeverSynced);
        }
        self.prepare_rebalance(fx, RebalanceReason::PendingSyncTimeout);
    }

    /// A member's session deadline passed. Members waiting in a JoinGroup or
    /// SyncGroup count as alive (their session restarts when answered); a
    /// new member that never completed a join, or any other member, is
    /// removed.
    pub(crate) fn on_heartbeat_deadline(&mut self, fx: &mut Effects, member_id: &str) {
        let Some(member) = self.member(member_id) else {
            return;
        };
        let waiting = member.awaiting_join.is_some() || member.awaiting_sync.is_some();
        if self.is(GroupState::Dead) || (!member.is_new && waiting) {
            return;
        }
        self.remove_member_and_update(
            fx,
            member_id,
            RemovalReason::SessionTimeout,
            RebalanceReason::SessionTimeout,
        );
    }

    /// Removes a member, answering its waiting requests with
    /// UNKNOWN_MEMBER_ID so that a live client rejoins.
    fn remove_and_answer(&mut self, fx: &mut Effects, member_id: &str, reason: RemovalReason) {
        let Some(member) = self.remove_member(member_id) else {
            return;
        };
        if let Some(request) = member.awaiting_join {
            fx.join_response(
                request,
                JoinGroupResponse::error("", ErrorCode::UnknownMemberId),
            );
        }
        // Kafka drops such a SyncGroup unanswered; herald answers it so the
        // caller never keeps a request that nobody will complete.
        if let Some(request) = member.awaiting_sync {
            fx.sync_response(
                request,
                SyncGroupResponse::error(ErrorCode::UnknownMemberId),
            );
        }
        fx.cancel_heartbeat(&self.group_id, member_id);
        fx.event(GroupEvent::MemberRemoved {
            group_id: self.group_id.clone(),
            member_id: member_id.to_owned(),
            reason,
        });
    }

    /// Removes a member and lets the group react: a rebalance from Stable or
    /// CompletingRebalance, a possibly complete join phase when preparing.
    pub(crate) fn remove_member_and_update(
        &mut self,
        fx: &mut Effects,
        member_id: &str,
        reason: RemovalReason,
        rebalance_reason: RebalanceReason,
    ) {
        self.remove_and_answer(fx, member_id, reason);
        match self.state {
            GroupState::Dead | GroupState::Empty => {}
            GroupState::Stable | GroupState::CompletingRebalance => {
                self.maybe_prepare_rebalance(fx, rebalance_reason)
            }
            GroupState::PreparingRebalance => self.try_complete_join(fx),
        }
    }

    /// Forgets a member id handed out with MEMBER_ID_REQUIRED; the join phase
    /// may have been waiting only for it.
    pub(crate) fn remove_pending_member(&mut self, fx: &mut Effects, member_id: &str) {
        self.pending_members.remove(member_id);
        fx.timers.cancel(&TimerKey::PendingMember {
            group_id: self.group_id.clone(),
            member_id: member_id.to_owned(),
        });
        self.try_complete_join(fx);
    }

    /// Every deadline this group owns, to cancel when it goes away.
    pub(crate) fn timer_keys(&self) -> Vec<TimerKey> {
        let mut keys = vec![self.join_timer(), self.pending_sync_timer()];
        keys.extend(self.members.iter().map(|m| TimerKey::Heartbeat {
            group_id: self.group_id.clone(),
            member_id: m.member_id.clone(),
        }));
        keys.extend(
            self.pending_members
                .iter()
                .map(|id| TimerKey::PendingMember {
                    group_id: self.group_id.clone(),
                    member_id: id.clone(),
                }),
        );
        keys
    }
}
