//! OffsetCommit, OffsetFetch, OffsetDelete, expiration and replay.

mod support;

use herald_group::*;
use support::*;

fn fetch(
    h: &Harness,
    partitions: Option<Vec<TopicPartition>>,
    require_stable: bool,
) -> OffsetFetchResponse {
    h.coordinator.offset_fetch(&OffsetFetchRequest {
        group_id: GROUP.into(),
        partitions,
        require_stable,
    })
}

fn fetched_offset(h: &Harness, topic: &str, partition: i32) -> i64 {
    fetch(h, Some(vec![TopicPartition::new(topic, partition)]), false).partitions[0].offset
}

fn simple_commit(offsets: &[(&str, i32, i64)]) -> OffsetCommitRequest {
    commit_request("", -1, offsets)
}

fn committed(offset: i64, at_ms: i64) -> Record {
    Record::OffsetCommitted {
        group_id: GROUP.into(),
        topic: "orders".into(),
        partition: 0,
        offset,
        leader_epoch: None,
        metadata: String::new(),
        commit_timestamp_ms: at_ms,
    }
}

#[test]
fn a_commit_is_applied_and_acknowledged_only_once_durable() {
    let mut h = Harness::kafka_defaults();
    let members = h.stable_group(1);
    let (request, out) = h.commit(commit_request(&members[0], 1, &[("orders", 0, 42)]));
    assert_eq!(
        out,
        vec![Output::Persist {
            append: AppendId(0),
            records: vec![committed(42, h.now_ms)],
        }]
    );
    assert_eq!(fetched_offset(&h, "orders", 0), -1);
    assert_eq!(
        fetch(&h, Some(vec![TopicPartition::new("orders", 0)]), true).partitions[0].error,
        ErrorCode::UnstableOffsetCommit
    );

    let out = h
        .coordinator
        .append_completed(h.now_ms, AppendId(0), AppendResult::Durable);
    assert_eq!(
        out,
        vec![Output::OffsetCommit {
            request,
            response: OffsetCommitResponse {
                partitions: vec![PartitionResult {
                    topic_partition: TopicPartition::new("orders", 0),
                    error: ErrorCode::None,
                }],
            },
        }]
    );
    assert_eq!(fetched_offset(&h, "orders", 0), 42);
}

#[test]
fn a_failed_append_answers_coordinator_not_available_and_changes_nothing() {
    let mut h = Harness::kafka_defaults();
    let members = h.stable_group(1);
    let (request, _) = h.commit(commit_request(&members[0], 1, &[("orders", 0, 42)]));
    let out = h
        .coordinator
        .append_completed(h.now_ms, AppendId(0), AppendResult::Failed);
    assert_eq!(
        out,
        vec![Output::OffsetCommit {
            request,
            response: OffsetCommitResponse {
                partitions: vec![PartitionResult {
                    topic_partition: TopicPartition::new("orders", 0),
                    error: ErrorCode::CoordinatorNotAvailable,
                }],
            },
        }]
    );
    assert_eq!(fetched_offset(&h, "orders", 0), -1);
    assert_eq!(fetch(&h, None, true).partitions, vec![]);
}

#[test]
fn a_commit_with_an_old_generation_is_illegal_generation() {
    let mut h = Harness::kafka_defaults();
    let members = h.stable_group(1);
    let errors = h.commit_durably(commit_request(
        &members[0],
        0,
        &[("orders", 0, 1), ("orders", 1, 1)],
    ));
    assert_eq!(errors, vec![ErrorCode::IllegalGeneration; 2]);
}

#[test]
fn a_commit_from_an_unknown_member_is_unknown_member_id() {
    let mut h = Harness::kafka_defaults();
    h.stable_group(1);
    let errors = h.commit_durably(commit_request("stranger", 1, &[("orders", 0, 1)]));
    assert_eq!(errors, vec![ErrorCode::UnknownMemberId]);
}

#[test]
fn a_commit_to_an_unknown_group_with_a_generation_is_illegal_generation() {
    let mut h = Harness::quick();
    let errors = h.commit_durably(commit_request("m", 3, &[("orders", 0, 1)]));
    assert_eq!(errors, vec![ErrorCode::IllegalGeneration]);
    assert_eq!(h.coordinator.group_state(GROUP), None);
}

#[test]
fn a_commit_while_completing_rebalance_is_rebalance_in_progress() {
    let mut h = Harness::kafka_defaults();
    let (member, _, _) = h.join_new(consumer(""));
    h.finish_initial_delay();
    let errors = h.commit_durably(commit_request(&member, 1, &[("orders", 0, 1)]));
    assert_eq!(errors, vec![ErrorCode::RebalanceInProgress]);
}

#[test]
fn a_commit_during_preparing_rebalance_is_accepted() {
    let mut h = Harness::kafka_defaults();
    let members = h.stable_group(2);
    h.join(consumer(&members[0]));
    let errors = h.commit_durably(commit_request(&members[1], 1, &[("orders", 1, 7)]));
    assert_eq!(errors, vec![ErrorCode::None]);
}

#[test]
fn a_simple_consumer_commits_to_a_group_without_members() {
    let mut h = Harness::quick();
    let errors = h.commit_durably(simple_commit(&[("orders", 0, 5)]));
    assert_eq!(errors, vec![ErrorCode::None]);
    assert_eq!(h.coordinator.group_state(GROUP), Some(GroupState::Empty));
    assert_eq!(fetched_offset(&h, "orders", 0), 5);
    assert_eq!(
        h.coordinator.list_groups(&[]),
        vec![ListedGroup {
            group_id: GROUP.into(),
            protocol_type: String::new(),
            state: GroupState::Empty,
        }]
    );
}

#[test]
fn a_simple_consumer_commit_to_an_active_group_is_unknown_member_id() {
    let mut h = Harness::kafka_defaults();
    h.stable_group(1);
    let errors = h.commit_durably(simple_commit(&[("orders", 0, 5)]));
    assert_eq!(errors, vec![ErrorCode::UnknownMemberId]);
}

#[test]
fn metadata_longer_than_the_limit_is_refused_per_partition() {
    let mut h = Harness::new(GroupConfig {
        offset_metadata_bytes_max: 4,
        ..config(0)
    });
    let mut req = simple_commit(&[("orders", 0, 5), ("orders", 1, 6)]);
    req.partitions[0].metadata = Some("too long".into());
    req.partitions[1].metadata = Some("ok".into());
    req.partitions[1].leader_epoch = Some(3);
    let errors = h.commit_durably(req);
    assert_eq!(
        errors,
        vec![ErrorCode::OffsetMetadataTooLarge, ErrorCode::None]
    );
    let response = fetch(&h, None, false);
    assert_eq!(
        response.partitions,
        vec![OffsetFetchPartition {
            topic_partition: TopicPartition::new("orders", 1),
            offset: 6,
            leader_epoch: Some(3),
            metadata: "ok".into(),
            error: ErrorCode::None,
        }]
    );
}

#[test]
fn fetching_an_unknown_group_returns_no_offsets_without_error() {
    let h = Harness::quick();
    let response = fetch(&h, Some(vec![TopicPartition::new("orders", 0)]), false);
    assert_eq!(response.error, ErrorCode::None);
    assert_eq!(response.partitions[0].offset, -1);
    assert_eq!(fetch(&h, None, false).partitions, vec![]);
}

#[test]
fn offsets_expire_once_the_group_has_been_empty_for_the_retention_time() {
    let hour_ms = 3_600_000;
    let mut h = Harness::new(GroupConfig {
        offsets_retention_ms: hour_ms,
        offsets_retention_check_interval_ms: 60_000,
        ..config(3_000)
    });
    let members = h.stable_group(1);
    h.commit_durably(commit_request(&members[0], 1, &[("orders", 0, 9)]));
    // Active for two hours, heartbeating: nothing expires.
    for _ in 0..(2 * hour_ms / 3_000) {
        h.advance(3_000);
        h.heartbeat(&members[0], 1);
    }
    assert_eq!(fetched_offset(&h, "orders", 0), 9);
    h.leave(vec![identity(&members[0])]);
    let empty_since_ms = h.now_ms;
    // Just under an hour of emptiness: still there.
    h.advance(hour_ms - 60_000);
    assert_eq!(fetched_offset(&h, "orders", 0), 9);
    // The first check after an hour expires them.
    let out = h.advance(60_000);
    assert!(h.now_ms - empty_since_ms >= hour_ms);
    let [Output::Persist { append, records }] = out.as_slice() else {
        panic!("{out:?}");
    };
    assert_eq!(
        records,
        &vec![Record::OffsetDeleted {
            group_id: GROUP.into(),
            topic: "orders".into(),
            partition: 0,
        }]
    );
    let out = h
        .coordinator
        .append_completed(h.now_ms, *append, AppendResult::Durable);
    assert_eq!(
        out,
        vec![Output::Event(GroupEvent::GroupRemoved {
            group_id: GROUP.into()
        })]
    );
    assert_eq!(h.coordinator.group_state(GROUP), None);
}

#[test]
fn a_simple_consumers_offsets_expire_by_their_commit_time() {
    let mut h = Harness::new(GroupConfig {
        offsets_retention_ms: 600_000,
        offsets_retention_check_interval_ms: 60_000,
        ..config(0)
    });
    h.commit_durably(simple_commit(&[("orders", 0, 1)]));
    h.advance(300_000);
    h.commit_durably(simple_commit(&[("orders", 1, 1)]));
    let mut expired = Vec::new();
    for _ in 0..5 {
        for output in h.advance(60_000) {
            if let Output::Persist { records, .. } = output {
                expired.extend(records);
            }
        }
    }
    assert_eq!(
        expired,
        vec![Record::OffsetDeleted {
            group_id: GROUP.into(),
            topic: "orders".into(),
            partition: 0,
        }]
    );
}

#[test]
fn replaying_the_records_rebuilds_identical_offsets() {
    let mut h = Harness::kafka_defaults();
    let mut log = Vec::new();
    let mut run = |h: &mut Harness, out: Vec<Output>| {
        for output in out {
            if let Output::Persist { append, records } = output {
                log.extend(records.iter().map(Record::encode));
                h.coordinator
                    .append_completed(h.now_ms, append, AppendResult::Durable);
            }
        }
    };
    let members = h.stable_group(1);
    let (_, out) = h.commit(commit_request(
        &members[0],
        1,
        &[("orders", 0, 10), ("orders", 1, 20)],
    ));
    run(&mut h, out);
    h.advance(1_000);
    h.heartbeat(&members[0], 1);
    let (_, out) = h.commit(commit_request(
        &members[0],
        1,
        &[("orders", 0, 15), ("audit", 0, 3)],
    ));
    run(&mut h, out);
    let request = h.request();
    let out = h.coordinator.offset_delete(
        h.now_ms,
        request,
        OffsetDeleteRequest {
            group_id: GROUP.into(),
            partitions: vec![TopicPartition::new("audit", 0)],
        },
    );
    run(&mut h, out);

    let mut rebuilt = GroupCoordinator::new(config(3_000));
    for bytes in &log {
        rebuilt.replay(Record::decode(bytes).expect("valid record"));
    }
    assert_eq!(
        rebuilt.committed_offsets(GROUP),
        h.coordinator.committed_offsets(GROUP)
    );
    assert_eq!(rebuilt.committed_offsets(GROUP).map(|o| o.len()), Some(2));
    assert_eq!(rebuilt.group_state(GROUP), Some(GroupState::Empty));
}

#[test]
fn offset_delete_refuses_topics_an_active_consumer_group_subscribes_to() {
    let mut h = Harness::kafka_defaults();
    let members = h.stable_group(1);
    h.commit_durably(commit_request(
        &members[0],
        1,
        &[("orders", 0, 1), ("audit", 0, 2)],
    ));
    let request = h.request();
    let out = h.coordinator.offset_delete(
        h.now_ms,
        request,
        OffsetDeleteRequest {
            group_id: GROUP.into(),
            partitions: vec![
                TopicPartition::new("orders", 0),
                TopicPartition::new("audit", 0),
            ],
        },
    );
    let [Output::Persist { append, records }] = out.as_slice() else {
        panic!("{out:?}");
    };
    assert_eq!(records.len(), 1);
    let out = h
        .coordinator
        .append_completed(h.now_ms, *append, AppendResult::Durable);
    assert_eq!(
        out,
        vec![Output::OffsetDelete {
            request,
            response: OffsetDeleteResponse {
                error: ErrorCode::None,
                partitions: vec![
                    PartitionResult {
                        topic_partition: TopicPartition::new("orders", 0),
                        error: ErrorCode::GroupSubscribedToTopic,
                    },
                    PartitionResult {
                        topic_partition: TopicPartition::new("audit", 0),
                        error: ErrorCode::None,
                    },
                ],
            },
        }]
    );
    assert_eq!(fetched_offset(&h, "audit", 0), -1);
    assert_eq!(fetched_offset(&h, "orders", 0), 1);
}

#[test]
fn offset_delete_of_an_unknown_group_is_group_id_not_found() {
    let mut h = Harness::quick();
    let request = h.request();
    let out = h.coordinator.offset_delete(
        h.now_ms,
        request,
        OffsetDeleteRequest {
            group_id: GROUP.into(),
            partitions: vec![TopicPartition::new("orders", 0)],
        },
    );
    assert_eq!(
        out,
        vec![Output::OffsetDelete {
            request,
            response: OffsetDeleteResponse {
                error: ErrorCode::GroupIdNotFound,
                partitions: vec![],
            },
        }]
    );
}
