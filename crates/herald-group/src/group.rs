//! One group's state and the bookkeeping of its membership. The rules of the
//! protocol (when to rebalance, whom to answer) live in `rebalance.rs` and
//! the coordinator's handlers; this file only keeps the data consistent.

use std::collections::BTreeSet;

use bytes::Bytes;

use crate::api::{GroupDescription, JoinGroupMember, MemberDescription};
use crate::error::ErrorCode;
use crate::member::Member;
use crate::offsets::GroupOffsets;
use crate::protocol_selection;
use crate::state::GroupState;
use crate::subscription::Subscription;

/// The protocol type of Kafka consumers, whose metadata herald can read.
pub(crate) const CONSUMER_PROTOCOL_TYPE: &str = "consumer";

/// How the current join phase ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum JoinPhase {
    /// The first rebalance of an Empty group: it only ends at its deadline,
    /// and is extended while new members keep arriving, by at most
    /// `remaining_ms` in total (Kafka's `InitialDelayedJoin`).
    Initial { remaining_ms: i64 },
    /// Ends when every member has rejoined, or at the rebalance timeout.
    Normal,
}

#[derive(Debug)]
pub(crate) struct Group {
    pub(crate) group_id: String,
    pub(crate) state: GroupState,
    /// When the state last changed; None for a group rebuilt by replay,
    /// whose offsets then expire by their own commit time, as Kafka does for
    /// groups without a state timestamp.
    pub(crate) state_timestamp_ms: Option<i64>,
    pub(crate) generation_id: i32,
    pub(crate) protocol_type: Option<String>,
    pub(crate) protocol_name: Option<String>,
    pub(crate) leader_id: Option<String>,
    /// In join order, which decides the next leader when the leader leaves.
    pub(crate) members: Vec<Member>,
    /// Ids handed out with MEMBER_ID_REQUIRED, not yet joined.
    pub(crate) pending_members: BTreeSet<String>,
    /// Members of the current generation that have not sent SyncGroup.
    pub(crate) pending_sync_members: BTreeSet<String>,
    /// A member joined during the initial delay, so the delay is extended.
    pub(crate) new_member_added: bool,
    pub(crate) join_phase: Option<JoinPhase>,
    /// Topics the members subscribe to; None when unknown (not a consumer
    /// group, or metadata that does not parse), which counts as "every
    /// topic".
    pub(crate) subscribed_topics: Option<BTreeSet<String>>,
    pub(crate) offsets: GroupOffsets,
}

impl Group {
    pub(crate) fn new(group_id: String, now_ms: Option<i64>) -> Self {
        Group {
            group_id,
            state: GroupState::Empty,
            state_timestamp_ms: now_ms,
            generation_id: 0,
            protocol_type: None,
            protocol_name: None,
            leader_id: None,
            members: Vec::new(),
            pending_members: BTreeSet::new(),
            pending_sync_members: BTreeSet::new(),
            new_member_added: false,
            join_phase: None,
            subscribed_topics: None,
            offsets: GroupOffsets::default(),
        }
    }

    pub(crate) fn is(&self, state: GroupState) -> bool {
        self.state == state
    }

    pub(crate) fn transition(&mut self, next: GroupState, now_ms: i64) {
        debug_assert!(
            self.state.can_transition_to(next),
            "group {} cannot go from {:?} to {:?}",
            self.group_id,
            self.state,
            next
        );
        self.state = next;
        self.state_timestamp_ms = Some(now_ms);
    }

    pub(crate) fn member(&self, member_id: &str) -> Option<&Member> {
        self.members.iter().find(|m| m.member_id == member_id)
    }

    pub(crate) fn member_mut(&mut self, member_id: &str) -> Option<&mut Member> {
        self.members.iter_mut().find(|m| m.member_id == member_id)
    }

    pub(crate) fn has_member(&self, member_id: &str) -> bool {
        self.member(member_id).is_some()
    }

    pub(crate) fn is_leader(&self, member_id: &str) -> bool {
        self.leader_id.as_deref() == Some(member_id)
    }

    pub(crate) fn static_member_id(&self, group_instance_id: &str) -> Option<&str> {
        self.members
            .iter()
            .find(|m| m.group_instance_id.as_deref() == Some(group_instance_id))
            .map(|m| m.member_id.as_str())
    }

    /// A request naming a static instance whose current member id is another
    /// one comes from a stale (replaced) member.
    pub(crate) fn is_static_member_fenced(
        &self,
        group_instance_id: Option<&str>,
        member_id: &str,
    ) -> bool {
        group_instance_id
            .and_then(|instance| self.static_member_id(instance))
            .is_some_and(|current| current != member_id)
    }

    /// Where a request's member checks end, in Kafka's order: fenced
    /// instance, unknown member, wrong generation.
    pub(crate) fn check_member(
        &self,
        member_id: &str,
        group_instance_id: Option<&str>,
        generation_id: i32,
    ) -> Result<(), ErrorCode> {
        if self.is_static_member_fenced(group_instance_id, member_id) {
            Err(ErrorCode::FencedInstanceId)
        } else if !self.has_member(member_id) {
            Err(ErrorCode::UnknownMemberId)
        } else if generation_id != self.generation_id {
            Err(ErrorCode::IllegalGeneration)
        } else {
            Ok(())
        }
    }

    pub(crate) fn add_member(&mut self, member: Member) {
        if self.members.is_empty() {
            self.protocol_type = Some(member.protocol_type.clone());
        }
        if self.leader_id.is_none() {
            self.leader_id = Some(member.member_id.clone());
        }
        self.pending_members.remove(&member.member_id);
        self.members.push(member);
    }

    /// Removes a member, choosing the next member in join order as leader
    /// if it led.
    pub(crate) fn remove_member(&mut self, member_id: &str) -> Option<Member> {
        let index = self.members.iter().position(|m| m.member_id == member_id);
        let removed = index.map(|index| self.members.remove(index));
        if self.is_leader(member_id) {
            self.leader_id = self.members.first().map(|m| m.member_id.clone());
        }
        self.pending_members.remove(member_id);
        self.pending_sync_members.remove(member_id);
        removed
    }

    /// Gives a static member its new member id (a restarted instance).
    pub(crate) fn rename_member(&mut self, old_member_id: &str, new_member_id: &str) {
        if let Some(member) = self.member_mut(old_member_id) {
            member.member_id = new_member_id.to_owned();
        }
        if self.is_leader(old_member_id) {
            self.leader_id = Some(new_member_id.to_owned());
        }
        if self.pending_sync_members.remove(old_member_id) {
            self.pending_sync_members.insert(new_member_id.to_owned());
        }
    }

    pub(crate) fn num_awaiting_join(&self) -> usize {
        self.members
            .iter()
            .filter(|m| m.awaiting_join.is_some())
            .count()
    }

    pub(crate) fn has_all_members_joined(&self) -> bool {
        self.num_awaiting_join() == self.members.len() && self.pending_members.is_empty()
    }

    /// The longest rebalance timeout of any member: the join phase waits
    /// that long.
    pub(crate) fn rebalance_timeout_ms(&self) -> i64 {
        self.members
            .iter()
            .map(|m| i64::from(m.rebalance_timeout_ms))
            .max()
            .unwrap_or(0)
    }

    pub(crate) fn supports_protocols(&self, protocol_type: &str, names: &[&str]) -> bool {
        let members = if self.is(GroupState::Empty) {
            &[][..]
        } else {
            &self.members[..]
        };
        protocol_selection::supports_protocols(
            members,
            self.protocol_type.as_deref(),
            protocol_type,
            names,
        )
    }

    /// The protocol the next generation would use; the leader breaks ties.
    pub(crate) fn select_protocol(&self) -> Option<String> {
        let mut ordered: Vec<Member> = Vec::with_capacity(self.members.len());
        ordered.extend(
            self.members
                .iter()
                .filter(|m| self.is_leader(&m.member_id))
                .cloned(),
        );
        ordered.extend(
            self.members
                .iter()
                .filter(|m| !self.is_leader(&m.member_id))
                .cloned(),
        );
        protocol_selection::select_protocol(&ordered)
    }

    /// Starts the next generation: CompletingRebalance with members, Empty
    /// without.
    pub(crate) fn init_next_generation(&mut self, now_ms: i64) {
        self.generation_id = self.generation_id.wrapping_add(1);
        if self.members.is_empty() {
            self.protocol_name = None;
            self.transition(GroupState::Empty, now_ms);
        } else {
            self.protocol_name = self.select_protocol();
            self.transition(GroupState::CompletingRebalance, now_ms);
        }
        self.subscribed_topics = self.compute_subscribed_topics();
        self.pending_sync_members.clear();
    }

    fn compute_subscribed_topics(&self) -> Option<BTreeSet<String>> {
        if self.protocol_type.as_deref() != Some(CONSUMER_PROTOCOL_TYPE) {
            return None;
        }
        if self.members.is_empty() {
            return Some(BTreeSet::new());
        }
        let protocol_name = self.protocol_name.as_deref()?;
        let mut topics = BTreeSet::new();
        for member in &self.members {
            let subscription = Subscription::decode(&member.metadata(protocol_name)).ok()?;
            topics.extend(subscription.topics);
        }
        Some(topics)
    }

    pub(crate) fn is_subscribed_to_topic(&self, topic: &str) -> bool {
        self.subscribed_topics
            .as_ref()
            .is_none_or(|topics| topics.contains(topic))
    }

    /// Members with their metadata for the selected protocol, as the leader
    /// receives them.
    pub(crate) fn current_member_metadata(&self) -> Vec<JoinGroupMember> {
        let protocol_name = self.protocol_name.as_deref().unwrap_or_default();
        self.members
            .iter()
            .map(|m| JoinGroupMember {
                member_id: m.member_id.clone(),
                group_instance_id: m.group_instance_id.clone(),
                metadata: m.metadata(protocol_name),
            })
            .collect()
    }

    /// Nothing left worth keeping: no members, no pending ids, no offsets.
    pub(crate) fn is_removable(&self) -> bool {
        self.is(GroupState::Empty)
            && self.members.is_empty()
            && self.pending_members.is_empty()
            && self.offsets.is_empty()
    }

    pub(crate) fn describe(&self) -> GroupDescription {
        let stable = self.is(GroupState::Stable);
        let protocol_name = if stable {
            self.protocol_name.clone().unwrap_or_default()
        } else {
            String::new()
        };
        let members = self
            .members
            .iter()
            .map(|m| MemberDescription {
                member_id: m.member_id.clone(),
                group_instance_id: m.group_instance_id.clone(),
                client_id: m.client_id.clone(),
                client_host: m.client_host.clone(),
                metadata: if stable {
                    m.metadata(&protocol_name)
                } else {
                    Bytes::new()
                },
                assignment: if stable {
                    m.assignment.clone()
                } else {
                    Bytes::new()
                },
            })
            .collect();
        GroupDescription {
            group_id: self.group_id.clone(),
            error: ErrorCode::None,
            state: self.state,
            protocol_type: self.protocol_type.clone().unwrap_or_default(),
            protocol_name,
            members,
        }
    }
}
