//! SyncGroup and Heartbeat.

mod support;

use herald_group::*;
use support::*;

/// Two members through the join phase of generation 1, nobody synced yet.
fn completing_group(h: &mut Harness) -> (String, String) {
    let (leader, _, _) = h.join_new(consumer(""));
    let (follower, _, _) = h.join_new(consumer(""));
    h.finish_initial_delay();
    assert_eq!(
        h.coordinator.group_state(GROUP),
        Some(GroupState::CompletingRebalance)
    );
    (leader, follower)
}

#[test]
fn followers_wait_for_the_leaders_assignment() {
    let mut h = Harness::kafka_defaults();
    let (leader, follower) = completing_group(&mut h);
    let (follower_sync, out) = h.sync(sync_request(&follower, 1, vec![]));
    assert_eq!(out, vec![]);

    let leader_part = assignment(&[("orders", &[0])]);
    let follower_part = assignment(&[("orders", &[1])]);
    let (leader_sync, out) = h.sync(sync_request(
        &leader,
        1,
        vec![
            (&leader, leader_part.clone()),
            (&follower, follower_part.clone()),
        ],
    ));
    assert_eq!(
        out,
        vec![
            sync_answer(leader_sync, sync_ok(leader_part)),
            sync_answer(follower_sync, sync_ok(follower_part)),
            stable(1),
        ]
    );
}

#[test]
fn a_member_missing_from_the_leaders_assignment_gets_an_empty_one() {
    let mut h = Harness::kafka_defaults();
    let (leader, follower) = completing_group(&mut h);
    h.sync(sync_request(
        &leader,
        1,
        vec![(&leader, assignment(&[("orders", &[0, 1])]))],
    ));
    let (request, out) = h.sync(sync_request(&follower, 1, vec![]));
    assert_eq!(out, vec![sync_answer(request, sync_ok(Default::default()))]);
}

#[test]
fn sync_after_the_group_is_stable_returns_the_stored_assignment() {
    let mut h = Harness::kafka_defaults();
    let members = h.stable_group(2);
    let (request, out) = h.sync(sync_request(&members[1], 1, vec![]));
    assert_eq!(
        out,
        vec![sync_answer(
            request,
            sync_ok(assignment(&[("orders", &[1])]))
        )]
    );
}

#[test]
fn sync_with_an_old_generation_is_illegal_generation() {
    let mut h = Harness::kafka_defaults();
    let (leader, _) = completing_group(&mut h);
    let (request, out) = h.sync(sync_request(&leader, 0, vec![]));
    assert_eq!(
        out,
        vec![sync_answer(
            request,
            SyncGroupResponse::error(ErrorCode::IllegalGeneration)
        )]
    );
}

#[test]
fn sync_from_an_unknown_member_is_unknown_member_id() {
    let mut h = Harness::kafka_defaults();
    completing_group(&mut h);
    let (request, out) = h.sync(sync_request("stranger", 1, vec![]));
    assert_eq!(
        out,
        vec![sync_answer(
            request,
            SyncGroupResponse::error(ErrorCode::UnknownMemberId)
        )]
    );
}

#[test]
fn sync_naming_another_protocol_is_inconsistent_group_protocol() {
    let mut h = Harness::kafka_defaults();
    let (leader, _) = completing_group(&mut h);
    let (request, out) = h.sync(SyncGroupRequest {
        protocol_name: Some("roundrobin".into()),
        ..sync_request(&leader, 1, vec![])
    });
    assert_eq!(
        out,
        vec![sync_answer(
            request,
            SyncGroupResponse::error(ErrorCode::InconsistentGroupProtocol)
        )]
    );
}

#[test]
fn sync_during_preparing_rebalance_is_rebalance_in_progress() {
    let mut h = Harness::kafka_defaults();
    let members = h.stable_group(2);
    h.join(consumer(&members[0]));
    let (request, out) = h.sync(sync_request(&members[1], 1, vec![]));
    assert_eq!(
        out,
        vec![sync_answer(
            request,
            SyncGroupResponse::error(ErrorCode::RebalanceInProgress)
        )]
    );
}

#[test]
fn a_join_while_completing_answers_waiting_syncs_with_rebalance_in_progress() {
    let mut h = Harness::kafka_defaults();
    let (_, follower) = completing_group(&mut h);
    let (follower_sync, _) = h.sync(sync_request(&follower, 1, vec![]));
    let (_, _, out) = h.join_new(consumer(""));
    assert_eq!(
        out,
        vec![
            sync_answer(
                follower_sync,
                SyncGroupResponse::error(ErrorCode::RebalanceInProgress)
            ),
            rebalance_started(1, RebalanceReason::MemberJoined),
        ]
    );
}

#[test]
fn heartbeat_in_a_stable_group_is_accepted() {
    let mut h = Harness::kafka_defaults();
    let members = h.stable_group(2);
    assert_eq!(h.heartbeat_error(&members[1], 1), ErrorCode::None);
}

#[test]
fn heartbeat_before_sync_is_accepted() {
    let mut h = Harness::kafka_defaults();
    let (_, follower) = completing_group(&mut h);
    assert_eq!(h.heartbeat_error(&follower, 1), ErrorCode::None);
}

#[test]
fn heartbeat_during_a_rebalance_is_rebalance_in_progress() {
    let mut h = Harness::kafka_defaults();
    let members = h.stable_group(2);
    h.join(consumer(&members[0]));
    assert_eq!(
        h.heartbeat_error(&members[1], 1),
        ErrorCode::RebalanceInProgress
    );
}

#[test]
fn heartbeat_with_an_old_generation_is_illegal_generation() {
    let mut h = Harness::kafka_defaults();
    let members = h.stable_group(2);
    assert_eq!(
        h.heartbeat_error(&members[1], 0),
        ErrorCode::IllegalGeneration
    );
}

#[test]
fn heartbeat_from_an_unknown_member_or_group_is_unknown_member_id() {
    let mut h = Harness::kafka_defaults();
    assert_eq!(h.heartbeat_error("nobody", 1), ErrorCode::UnknownMemberId);
    h.stable_group(1);
    assert_eq!(h.heartbeat_error("nobody", 1), ErrorCode::UnknownMemberId);
}
