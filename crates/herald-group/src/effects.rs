//! Everything a group's logic may touch besides the group itself: settings,
//! the clock, deadlines, the outputs being collected, the member-id
//! generator and the batches waiting to be persisted. Kept apart from the
//! map of groups so a handler can hold one group and these at the same time.

use std::collections::BTreeMap;

use crate::api::{DeleteGroupResult, JoinGroupResponse, PartitionResult, SyncGroupResponse};
use crate::config::GroupConfig;
use crate::member_id::MemberIdGenerator;
use crate::output::{AppendId, GroupEvent, Output, RequestId};
use crate::records::Record;
use crate::timers::{TimerKey, Timers};

/// A batch handed out in [`Output::Persist`] and what to do once it is
/// durable (or failed).
#[derive(Debug)]
pub(crate) struct PendingAppend {
    pub(crate) records: Vec<Record>,
    pub(crate) purpose: AppendPurpose,
}

#[derive(Debug)]
pub(crate) enum AppendPurpose {
    /// An OffsetCommit. `results` holds every requested partition in
    /// request order; the ones with [`crate::ErrorCode::None`] are those in
    /// `records`.
    OffsetCommit {
        request: RequestId,
        results: Vec<PartitionResult>,
    },
    /// An OffsetDelete; `results` as for commits.
    OffsetDelete {
        request: RequestId,
        results: Vec<PartitionResult>,
    },
    /// A DeleteGroups; the groups with no error are Dead until durable.
    DeleteGroups {
        request: RequestId,
        results: Vec<DeleteGroupResult>,
    },
    /// Offsets that expired; nobody waits for it.
    Expiration,
}

pub(crate) struct Effects {
    pub(crate) config: GroupConfig,
    /// The largest `now` seen: time never goes back, even if the caller's
    /// wall clock does.
    pub(crate) now_ms: i64,
    pub(crate) timers: Timers,
    pub(crate) out: Vec<Output>,
    pub(crate) member_ids: MemberIdGenerator,
    pub(crate) appends: BTreeMap<AppendId, PendingAppend>,
    pub(crate) next_append_id: u64,
}

impl Effects {
    pub(crate) fn new(config: GroupConfig) -> Self {
        let member_ids = MemberIdGenerator::new(config.member_id_seed);
        Effects {
            config,
            now_ms: i64::MIN,
            timers: Timers::default(),
            out: Vec::new(),
            member_ids,
            appends: BTreeMap::new(),
            next_append_id: 0,
        }
    }

    pub(crate) fn after_ms(&self, delay_ms: i64) -> i64 {
        self.now_ms.saturating_add(delay_ms)
    }

    pub(crate) fn event(&mut self, event: GroupEvent) {
        self.out.push(Output::Event(event));
    }

    pub(crate) fn join_response(&mut self, request: RequestId, response: JoinGroupResponse) {
        self.out.push(Output::JoinGroup { request, response });
    }

    pub(crate) fn sync_response(&mut self, request: RequestId, response: SyncGroupResponse) {
        self.out.push(Output::SyncGroup { request, response });
    }

    /// Emits `records` for persisting and remembers what to do when the
    /// caller reports back.
    pub(crate) fn persist(&mut self, records: Vec<Record>, purpose: AppendPurpose) {
        let append = AppendId(self.next_append_id);
        self.next_append_id += 1;
        self.out.push(Output::Persist {
            append,
            records: records.clone(),
        });
        self.appends
            .insert(append, PendingAppend { records, purpose });
    }

    pub(crate) fn schedule_heartbeat(&mut self, group_id: &str, member_id: &str, timeout_ms: i32) {
        let deadline_ms = self.after_ms(i64::from(timeout_ms));
        self.timers.schedule(
            TimerKey::Heartbeat {
                group_id: group_id.to_owned(),
                member_id: member_id.to_owned(),
            },
            deadline_ms,
        );
    }

    pub(crate) fn cancel_heartbeat(&mut self, group_id: &str, member_id: &str) {
        self.timers.cancel(&TimerKey::Heartbeat {
            group_id: group_id.to_owned(),
            member_id: member_id.to_owned(),
        });
    }
}
