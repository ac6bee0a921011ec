//! The coordinator: all groups of this broker, driven by requests, by
//! completed appends and by the clock.
//!
//! Every call that may change state takes `now_ms` and first fires the
//! deadlines that are due by then, so the state a request sees is the state
//! at its arrival time whether or not the caller ticked in between. Each such
//! call returns the [`Output`]s to act on, in order.

mod admin;
mod expiration;
mod heartbeat;
mod join;
mod leave;
mod offset_commit;
mod offset_delete;
mod offset_fetch;
mod persistence;
mod snapshot;
mod sync;

use std::collections::BTreeMap;

use crate::api::{
    HeartbeatRequest, JoinGroupRequest, LeaveGroupRequest, OffsetCommitRequest,
    OffsetDeleteRequest, SyncGroupRequest, TopicPartition,
};
use crate::config::GroupConfig;
use crate::effects::Effects;
use crate::group::Group;
use crate::offsets::CommittedOffset;
use crate::output::{AppendId, AppendResult, Output, RequestId};
use crate::records::Record;
use crate::state::GroupState;
use crate::timers::TimerKey;

/// The group coordinator of one broker: the classic group protocol for
/// every group, and the groups' committed offsets. Sans-I/O: see the crate
/// documentation.
pub struct GroupCoordinator {
    groups: BTreeMap<String, Group>,
    fx: Effects,
}

impl GroupCoordinator {
    /// A coordinator with no groups. Rebuild the offsets with
    /// [`GroupCoordinator::replay`] before serving requests.
    pub fn new(config: GroupConfig) -> Self {
        GroupCoordinator {
            groups: BTreeMap::new(),
            fx: Effects::new(config),
        }
    }

    /// The settings.
    pub fn config(&self) -> &GroupConfig {
        &self.fx.config
    }

    /// When the coordinator next needs [`GroupCoordinator::tick`], as Unix
    /// milliseconds; None when nothing is pending. Ask again after every
    /// call: calls move deadlines.
    pub fn next_deadline_ms(&self) -> Option<i64> {
        self.fx.timers.next_deadline()
    }

    /// Fires every deadline due at `now_ms`: session and rebalance
    /// timeouts, the initial rebalance delay, offset expiration.
    pub fn tick(&mut self, now_ms: i64) -> Vec<Output> {
        self.advance(now_ms);
        self.take_outputs()
    }

    /// A JoinGroup. Its response usually comes in a later call's outputs,
    /// when the rebalance's join phase ends.
    pub fn join_group(
        &mut self,
        now_ms: i64,
        request: RequestId,
        req: JoinGroupRequest,
    ) -> Vec<Output> {
        self.advance(now_ms);
        self.handle_join_group(request, req);
        self.take_outputs()
    }

    /// A SyncGroup. A follower's response waits for the leader's SyncGroup.
    pub fn sync_group(
        &mut self,
        now_ms: i64,
        request: RequestId,
        req: SyncGroupRequest,
    ) -> Vec<Output> {
        self.advance(now_ms);
        self.handle_sync_group(request, req);
        self.take_outputs()
    }

    /// A Heartbeat; answered at once.
    pub fn heartbeat(
        &mut self,
        now_ms: i64,
        request: RequestId,
        req: HeartbeatRequest,
    ) -> Vec<Output> {
        self.advance(now_ms);
        self.handle_heartbeat(request, req);
        self.take_outputs()
    }

    /// A LeaveGroup; answered at once, but the departure may complete a
    /// rebalance and so answer other members' JoinGroups too.
    pub fn leave_group(
        &mut self,
        now_ms: i64,
        request: RequestId,
        req: LeaveGroupRequest,
    ) -> Vec<Output> {
        self.advance(now_ms);
        self.handle_leave_group(request, req);
        self.take_outputs()
    }

    /// An OffsetCommit. Accepted offsets come out as an [`Output::Persist`];
    /// the response follows from [`GroupCoordinator::append_completed`].
    pub fn offset_commit(
        &mut self,
        now_ms: i64,
        request: RequestId,
        req: OffsetCommitRequest,
    ) -> Vec<Output> {
        self.advance(now_ms);
        self.handle_offset_commit(request, req);
        self.take_outputs()
    }

    /// An OffsetDelete; like commits, answered once the deletion is durable.
    pub fn offset_delete(
        &mut self,
        now_ms: i64,
        request: RequestId,
        req: OffsetDeleteRequest,
    ) -> Vec<Output> {
        self.advance(now_ms);
        self.handle_offset_delete(request, req);
        self.take_outputs()
    }

    /// A DeleteGroups; answered once the deletions are durable.
    pub fn delete_groups(
        &mut self,
        now_ms: i64,
        request: RequestId,
        group_ids: Vec<String>,
    ) -> Vec<Output> {
        self.advance(now_ms);
        self.handle_delete_groups(request, group_ids);
        self.take_outputs()
    }

    /// Reports what became of an [`Output::Persist`] batch. Report batches
    /// in the order of their ids. A durable batch is applied and its request
    /// answered; a failed one is answered with COORDINATOR_NOT_AVAILABLE and
    /// leaves the state as it was.
    pub fn append_completed(
        &mut self,
        now_ms: i64,
        append: AppendId,
        result: AppendResult,
    ) -> Vec<Output> {
        self.advance(now_ms);
        self.handle_append_completed(append, result);
        self.take_outputs()
    }

    /// Applies one record read back from the offsets partition at start-up,
    /// in log order. Produces nothing.
    pub fn replay(&mut self, record: Record) {
        self.apply(record, false);
    }

    /// The committed offsets of a group, for tools (`herald group describe`)
    /// and tests.
    pub fn committed_offsets(
        &self,
        group_id: &str,
    ) -> Option<&BTreeMap<TopicPartition, CommittedOffset>> {
        self.groups.get(group_id).map(|g| &g.offsets.committed)
    }

    /// The state of a group, None if it does not exist.
    pub fn group_state(&self, group_id: &str) -> Option<GroupState> {
        self.groups.get(group_id).map(|g| g.state)
    }

    /// The current generation of a group.
    pub fn generation_id(&self, group_id: &str) -> Option<i32> {
        self.groups.get(group_id).map(|g| g.generation_id)
    }

    fn take_outputs(&mut self) -> Vec<Output> {
        std::mem::take(&mut self.fx.out)
    }

    /// Moves the clock (never backwards) and fires what is due.
    fn advance(&mut self, now_ms: i64) {
        self.fx.now_ms = self.fx.now_ms.max(now_ms);
        if !self.fx.timers.is_scheduled(&TimerKey::OffsetRetention) {
            let first_check_ms = self
                .fx
                .after_ms(self.fx.config.offsets_retention_check_interval_ms);
            self.fx
                .timers
                .schedule(TimerKey::OffsetRetention, first_check_ms);
        }
        while let Some(key) = self.fx.timers.pop_due(self.fx.now_ms) {
            self.fire(key);
        }
    }

    fn fire(&mut self, key: TimerKey) {
        let fx = &mut self.fx;
        match key {
            TimerKey::OffsetRetention => self.expire_offsets(),
            TimerKey::Join { group_id } => {
                if let Some(group) = self.groups.get_mut(&group_id) {
                    group.on_join_deadline(fx);
                }
            }
            TimerKey::PendingSync { group_id } => {
                if let Some(group) = self.groups.get_mut(&group_id) {
                    group.on_pending_sync_deadline(fx);
                }
            }
            TimerKey::Heartbeat {
                group_id,
                member_id,
            } => {
                if let Some(group) = self.groups.get_mut(&group_id) {
                    group.on_heartbeat_deadline(fx, &member_id);
                }
            }
            TimerKey::PendingMember {
                group_id,
                member_id,
            } => {
                if let Some(group) = self.groups.get_mut(&group_id) {
                    group.remove_pending_member(fx, &member_id);
                }
            }
        }
    }
}
