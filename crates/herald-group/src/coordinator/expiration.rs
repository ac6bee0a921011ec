//! Offset expiration, as Kafka's `removeExpiredOffsets`: offsets of a group
//! that has been Empty for the retention time go; so do offsets of a simple
//! consumer's group, and offsets of topics a Stable consumer group no longer
//! subscribes to, once they are that old. Groups left with nothing are
//! removed.

use crate::api::TopicPartition;
use crate::effects::AppendPurpose;
use crate::group::{Group, CONSUMER_PROTOCOL_TYPE};
use crate::records::Record;
use crate::state::GroupState;
use crate::timers::TimerKey;

use super::GroupCoordinator;

impl GroupCoordinator {
    pub(super) fn expire_offsets(&mut self) {
        let now_ms = self.fx.now_ms;
        let retention_ms = self.fx.config.offsets_retention_ms;
        let mut records = Vec::new();
        let mut removable = Vec::new();
        for group in self.groups.values_mut() {
            for tp in expired_offsets(group, now_ms, retention_ms) {
                group.offsets.add_pending(&tp);
                records.push(Record::OffsetDeleted {
                    group_id: group.group_id.clone(),
                    topic: tp.topic,
                    partition: tp.partition,
                });
            }
            if group.is_removable() {
                removable.push(group.group_id.clone());
            }
        }
        for group_id in removable {
            self.remove_group(&group_id, true);
        }
        if !records.is_empty() {
            self.fx.persist(records, AppendPurpose::Expiration);
        }
        let next_ms = self
            .fx
            .after_ms(self.fx.config.offsets_retention_check_interval_ms);
        self.fx.timers.schedule(TimerKey::OffsetRetention, next_ms);
    }
}

fn expired_offsets(group: &Group, now_ms: i64, retention_ms: i64) -> Vec<TopicPartition> {
    // Which clock each offset's age is measured from, or None to keep all.
    let since = |commit_timestamp_ms: i64| -> Option<i64> {
        match (group.protocol_type.as_deref(), group.state) {
            (Some(_), GroupState::Empty) => {
                Some(group.state_timestamp_ms.unwrap_or(commit_timestamp_ms))
            }
            (Some(CONSUMER_PROTOCOL_TYPE), GroupState::Stable)
                if group.subscribed_topics.is_some() =>
            {
                Some(commit_timestamp_ms)
            }
            (None, _) => Some(commit_timestamp_ms),
            _ => None,
        }
    };
    group
        .offsets
        .committed
        .iter()
        .filter(|(tp, committed)| {
            let subscribed = group.is(GroupState::Stable)
                && group
                    .subscribed_topics
                    .as_ref()
                    .is_some_and(|topics| topics.contains(&tp.topic));
            !subscribed
                && !group.offsets.has_pending(tp)
                && since(committed.commit_timestamp_ms)
                    .is_some_and(|since_ms| now_ms.saturating_sub(since_ms) >= retention_ms)
        })
        .map(|(tp, _)| tp.clone())
        .collect()
}
