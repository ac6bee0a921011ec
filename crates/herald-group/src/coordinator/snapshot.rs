//! The coordinator's durable state as records, for compacting the internal
//! partition: the partition only ever grows (every commit is a record), but
//! what a restart needs is just the last committed offset of each partition
//! of each group.

use crate::records::Record;

use super::GroupCoordinator;

impl GroupCoordinator {
    /// Records that rebuild today's committed offsets: one `OffsetCommitted`
    /// per group and partition, with its metadata, leader epoch and commit
    /// time (so expiration runs as if nothing had been rewritten). Replaying
    /// them into a new coordinator gives the same offsets as replaying every
    /// record appended so far.
    ///
    /// Commits whose append has not completed are not included (they are not
    /// applied yet); the caller appends them after these records, as it
    /// would have anyway.
    pub fn snapshot_records(&self) -> Vec<Record> {
        let mut records = Vec::new();
        for (group_id, group) in &self.groups {
            for (topic_partition, committed) in &group.offsets.committed {
                records.push(Record::OffsetCommitted {
                    group_id: group_id.clone(),
                    topic: topic_partition.topic.clone(),
                    partition: topic_partition.partition,
                    offset: committed.offset,
                    leader_epoch: committed.leader_epoch,
                    metadata: committed.metadata.clone(),
                    commit_timestamp_ms: committed.commit_timestamp_ms,
                });
            }
        }
        records
    }
}

#[cfg(test)]
mod tests {
    use crate::config::GroupConfig;
    use crate::records::Record;
    use crate::GroupCoordinator;

    fn committed(group: &str, partition: i32, offset: i64) -> Record {
        Record::OffsetCommitted {
            group_id: group.into(),
            topic: "t".into(),
            partition,
            offset,
            leader_epoch: Some(3),
            metadata: format!("m{offset}"),
            commit_timestamp_ms: 1_000 + offset,
        }
    }

    #[test]
    fn replaying_the_snapshot_gives_the_same_offsets_as_the_whole_history() {
        let history = vec![
            committed("a", 0, 5),
            committed("a", 0, 9),
            committed("a", 1, 2),
            committed("b", 0, 7),
            Record::OffsetDeleted {
                group_id: "a".into(),
                topic: "t".into(),
                partition: 1,
            },
            committed("c", 0, 1),
            Record::GroupDeleted {
                group_id: "c".into(),
            },
        ];
        let mut original = GroupCoordinator::new(GroupConfig::default());
        for record in history {
            original.replay(record);
        }
        let snapshot = original.snapshot_records();
        assert_eq!(snapshot.len(), 2, "{snapshot:?}");
        let mut rebuilt = GroupCoordinator::new(GroupConfig::default());
        for record in snapshot {
            rebuilt.replay(record);
        }
        for group in ["a", "b", "c"] {
            assert_eq!(
                original.committed_offsets(group).cloned(),
                rebuilt.committed_offsets(group).cloned(),
                "group {group}"
            );
        }
        assert!(rebuilt.committed_offsets("c").is_none());
        let a = rebuilt.committed_offsets("a").expect("group a");
        let only = a.values().next().expect("one offset");
        assert_eq!((only.offset, only.metadata.as_str()), (9, "m9"));
    }
}
