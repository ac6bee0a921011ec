//! Session timeouts, rebalance timeouts, and members that never sync.

mod support;

use herald_group::*;
use support::*;

#[test]
fn session_timeout_removes_a_silent_member_and_starts_a_rebalance() {
    let mut h = Harness::kafka_defaults();
    let members = h.stable_group(2);
    let (leader, silent) = (&members[0], &members[1]);
    for _ in 0..3 {
        h.advance(3_000);
        assert_eq!(h.heartbeat_error(leader, 1), ErrorCode::None);
    }
    let out = h.advance(1_000);
    assert_eq!(
        out,
        vec![
            member_removed(silent, RemovalReason::SessionTimeout),
            rebalance_started(1, RebalanceReason::SessionTimeout),
        ]
    );
    assert_eq!(h.heartbeat_error(leader, 1), ErrorCode::RebalanceInProgress);
    let (request, out) = h.join(consumer(leader));
    assert_eq!(out[0], generation_started(2, Some("range"), 1));
    assert_eq!(find_join(&out, request).map(|r| r.members.len()), Some(1));
}

#[test]
fn rebalance_timeout_removes_members_that_did_not_rejoin() {
    let mut h = Harness::kafka_defaults();
    let members = h.stable_group(2);
    let (leader, laggard) = (&members[0], &members[1]);
    let (leader_join, _) = h.join(consumer(leader));
    // The laggard keeps its session alive but never rejoins.
    for _ in 0..9 {
        h.advance(3_000);
        assert_eq!(
            h.heartbeat_error(laggard, 1),
            ErrorCode::RebalanceInProgress
        );
    }
    let out = h.advance(3_000);
    assert_eq!(out[0], member_removed(laggard, RemovalReason::NotRejoined));
    assert_eq!(out[1], generation_started(2, Some("range"), 1));
    assert_eq!(
        find_join(&out, leader_join).map(|r| r.generation_id),
        Some(2)
    );
    assert_eq!(out.len(), 3);
    assert_eq!(h.heartbeat_error(laggard, 1), ErrorCode::UnknownMemberId);
}

#[test]
fn a_member_that_never_syncs_or_heartbeats_is_removed_after_the_session_timeout() {
    let mut h = Harness::kafka_defaults();
    let (leader, _, _) = h.join_new(consumer(""));
    let (silent, _, _) = h.join_new(consumer(""));
    h.finish_initial_delay();
    h.sync(sync_request(
        &leader,
        1,
        vec![(&leader, assignment(&[("orders", &[0])]))],
    ));
    h.advance(5_000);
    assert_eq!(h.heartbeat_error(&leader, 1), ErrorCode::None);
    let out = h.advance(5_000);
    assert_eq!(
        out,
        vec![
            member_removed(&silent, RemovalReason::SessionTimeout),
            rebalance_started(1, RebalanceReason::SessionTimeout),
        ]
    );
}

#[test]
fn a_member_that_heartbeats_but_never_syncs_is_removed_after_the_rebalance_timeout() {
    let mut h = Harness::kafka_defaults();
    let (leader, _, _) = h.join_new(consumer(""));
    let (lazy, _, _) = h.join_new(consumer(""));
    h.finish_initial_delay();
    h.sync(sync_request(&leader, 1, vec![]));
    for _ in 0..9 {
        h.advance(3_000);
        assert_eq!(h.heartbeat_error(&leader, 1), ErrorCode::None);
        assert_eq!(h.heartbeat_error(&lazy, 1), ErrorCode::None);
    }
    let out = h.advance(3_000);
    assert_eq!(
        out,
        vec![
            member_removed(&lazy, RemovalReason::NeverSynced),
            rebalance_started(1, RebalanceReason::PendingSyncTimeout),
        ]
    );
}

#[test]
fn a_member_waiting_in_join_is_not_expired_by_its_session() {
    let mut h = Harness::kafka_defaults();
    let members = h.stable_group(2);
    let (leader_join, _) = h.join(consumer(&members[0]));
    // The follower rejoins 20 s later, long after the leader's last
    // heartbeat: the leader's held JoinGroup keeps it in the group.
    h.advance(9_000);
    assert_eq!(
        h.heartbeat_error(&members[1], 1),
        ErrorCode::RebalanceInProgress
    );
    h.advance(9_000);
    assert_eq!(
        h.heartbeat_error(&members[1], 1),
        ErrorCode::RebalanceInProgress
    );
    let (_, out) = h.join(consumer(&members[1]));
    assert_eq!(
        find_join(&out, leader_join).map(|r| r.members.len()),
        Some(2)
    );
}

#[test]
fn a_new_member_stuck_in_join_is_dropped_after_the_new_member_timeout() {
    let mut h = Harness::new(GroupConfig {
        new_member_join_timeout_ms: 7_000,
        ..config(3_000)
    });
    let members = h.stable_group(2);
    // A newcomer joins; the follower never rejoins, so the join phase lasts
    // the full rebalance timeout, longer than the newcomer may wait.
    h.join(consumer(&members[0]));
    let (newcomer, newcomer_join, _) = h.join_new(consumer(""));
    h.advance(3_000);
    h.heartbeat(&members[1], 1);
    let out = h.advance(4_000);
    assert_eq!(
        out,
        vec![
            join_answer(
                newcomer_join,
                JoinGroupResponse::error("", ErrorCode::UnknownMemberId)
            ),
            member_removed(&newcomer, RemovalReason::SessionTimeout),
        ]
    );
}

#[test]
fn the_last_member_leaving_empties_the_group() {
    let mut h = Harness::kafka_defaults();
    let members = h.stable_group(1);
    let (request, out) = h.leave(vec![identity(&members[0])]);
    assert_eq!(
        out,
        vec![
            member_removed(&members[0], RemovalReason::Left),
            rebalance_started(1, RebalanceReason::MemberLeft),
            generation_started(2, None, 0),
            Output::LeaveGroup {
                request,
                response: LeaveGroupResponse {
                    error: ErrorCode::None,
                    members: vec![LeaveGroupMemberResult {
                        member: identity(&members[0]),
                        error: ErrorCode::None,
                    }],
                },
            },
        ]
    );
    assert_eq!(h.coordinator.group_state(GROUP), Some(GroupState::Empty));
}

#[test]
fn the_next_deadline_is_the_earliest_session_expiry() {
    let mut h = Harness::kafka_defaults();
    let members = h.stable_group(1);
    let now = h.now_ms;
    h.heartbeat(&members[0], 1);
    assert_eq!(
        h.coordinator.next_deadline_ms(),
        Some(now + i64::from(SESSION_MS))
    );
}
