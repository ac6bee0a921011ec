//! The committed offsets of one group, and the commits still being
//! persisted.

use std::collections::BTreeMap;

use crate::api::TopicPartition;

/// A committed offset.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommittedOffset {
    /// The offset of the next record the group will read.
    pub offset: i64,
    /// The leader epoch the client saw.
    pub leader_epoch: Option<i32>,
    /// The client's metadata string.
    pub metadata: String,
    /// When the commit was accepted, Unix milliseconds.
    pub commit_timestamp_ms: i64,
}

/// A group's offsets.
#[derive(Debug, Clone, Default)]
pub(crate) struct GroupOffsets {
    pub(crate) committed: BTreeMap<TopicPartition, CommittedOffset>,
    /// Partitions with a commit appended but not yet durable, and how many:
    /// they are neither expired nor reported as stable meanwhile.
    pub(crate) pending: BTreeMap<TopicPartition, u32>,
}

impl GroupOffsets {
    pub(crate) fn is_empty(&self) -> bool {
        self.committed.is_empty() && self.pending.is_empty()
    }

    pub(crate) fn add_pending(&mut self, partition: &TopicPartition) {
        *self.pending.entry(partition.clone()).or_default() += 1;
    }

    pub(crate) fn remove_pending(&mut self, partition: &TopicPartition) {
        if let Some(count) = self.pending.get_mut(partition) {
            *count -= 1;
            if *count == 0 {
                self.pending.remove(partition);
            }
        }
    }

    pub(crate) fn has_pending(&self, partition: &TopicPartition) -> bool {
        self.pending.contains_key(partition)
    }
}
