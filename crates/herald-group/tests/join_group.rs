//! JoinGroup: member ids, the initial delay, protocol checks, rejoins.

mod support;

use herald_group::*;
use support::*;

#[test]
fn first_join_with_v4_answers_member_id_required_with_a_generated_id() {
    let mut h = Harness::quick();
    let (request, out) = h.join(consumer(""));
    let [Output::JoinGroup {
        request: r,
        response,
    }] = out.as_slice()
    else {
        panic!("{out:?}");
    };
    assert_eq!(*r, request);
    assert_eq!(response.error, ErrorCode::MemberIdRequired);
    assert!(response.member_id.starts_with("client-"));
    assert_eq!(response.generation_id, -1);
    assert_eq!(h.coordinator.group_state(GROUP), Some(GroupState::Empty));
}

#[test]
fn join_before_v4_gets_its_member_id_without_a_second_round() {
    let mut h = Harness::quick();
    let (request, out) = h.join(JoinGroupRequest {
        require_known_member_id: false,
        ..consumer("")
    });
    assert_eq!(
        out,
        vec![rebalance_started(0, RebalanceReason::MemberJoined)]
    );
    let out = h.advance(0);
    let response = find_join(&out, request).expect("answered");
    assert_eq!(response.error, ErrorCode::None);
    assert!(response.member_id.starts_with("client-"));
    assert_eq!(response.leader, response.member_id);
}

#[test]
fn single_member_walks_empty_preparing_completing_stable() {
    let mut h = Harness::quick();
    let metadata = subscription(&["orders"], &[]);
    let (member_id, request, out) = h.join_new(consumer(""));
    assert_eq!(
        out,
        vec![rebalance_started(0, RebalanceReason::MemberJoined)]
    );
    assert_eq!(
        h.coordinator.group_state(GROUP),
        Some(GroupState::PreparingRebalance)
    );

    let out = h.advance(0);
    assert_eq!(
        out,
        vec![
            generation_started(1, Some("range"), 1),
            join_answer(
                request,
                JoinGroupResponse {
                    error: ErrorCode::None,
                    generation_id: 1,
                    protocol_type: Some("consumer".into()),
                    protocol_name: Some("range".into()),
                    leader: member_id.clone(),
                    skip_assignment: false,
                    member_id: member_id.clone(),
                    members: vec![JoinGroupMember {
                        member_id: member_id.clone(),
                        group_instance_id: None,
                        metadata,
                    }],
                }
            ),
        ]
    );
    assert_eq!(
        h.coordinator.group_state(GROUP),
        Some(GroupState::CompletingRebalance)
    );

    let mine = assignment(&[("orders", &[0, 1])]);
    let (sync, out) = h.sync(sync_request(
        &member_id,
        1,
        vec![(&member_id, mine.clone())],
    ));
    assert_eq!(out, vec![sync_answer(sync, sync_ok(mine)), stable(1)]);
    assert_eq!(h.coordinator.group_state(GROUP), Some(GroupState::Stable));
}

#[test]
fn empty_group_waits_the_initial_rebalance_delay() {
    let mut h = Harness::new(config(3_000));
    let (_, request, _) = h.join_new(consumer(""));
    assert_eq!(h.coordinator.next_deadline_ms(), Some(START_MS + 3_000));
    assert_eq!(h.advance(2_999), vec![]);
    let out = h.advance(1);
    assert!(find_join(&out, request).is_some(), "{out:?}");
}

#[test]
fn initial_delay_is_extended_while_new_members_arrive() {
    let mut h = Harness::new(config(3_000));
    let (_, first, _) = h.join_new(consumer(""));
    h.advance(1_000);
    let (_, second, out) = h.join_new(consumer(""));
    assert_eq!(out, vec![]);
    // The delay ends at 3 s, sees a newcomer, and waits another 3 s.
    assert_eq!(h.advance(2_000), vec![]);
    assert_eq!(h.coordinator.next_deadline_ms(), Some(START_MS + 6_000));
    let out = h.advance(3_000);
    assert_eq!(find_join(&out, first).map(|r| r.generation_id), Some(1));
    assert_eq!(find_join(&out, second).map(|r| r.generation_id), Some(1));
}

#[test]
fn initial_delay_never_exceeds_the_rebalance_timeout() {
    let mut h = Harness::new(config(3_000));
    let (_, first, _) = h.join_new(JoinGroupRequest {
        rebalance_timeout_ms: 4_000,
        ..consumer("")
    });
    h.advance(1_000);
    h.join_new(consumer("")); // rebalance timeout 30 s, but the delay was set at the start
                              // 3 s delay, then min(3 s, 4 s - 3 s remaining) = 1 s more.
    assert_eq!(h.advance(2_000), vec![]);
    let out = h.advance(1_000);
    assert!(find_join(&out, first).is_some(), "{out:?}");
}

#[test]
fn members_joining_during_a_rebalance_are_in_the_next_generation() {
    let mut h = Harness::kafka_defaults();
    let members = h.stable_group(2);
    // The leader rejoins: a rebalance starts and waits for the follower.
    let (leader_join, out) = h.join(consumer(&members[0]));
    assert_eq!(
        out,
        vec![rebalance_started(1, RebalanceReason::LeaderRejoined)]
    );
    // Meanwhile a third consumer joins; still waiting for the follower.
    let (newcomer, newcomer_join, out) = h.join_new(consumer(""));
    assert_eq!(out, vec![]);
    let (follower_join, out) = h.join(consumer(&members[1]));
    let leader_response = find_join(&out, leader_join).expect("leader answered");
    let follower_response = find_join(&out, follower_join).expect("follower answered");
    let newcomer_response = find_join(&out, newcomer_join).expect("newcomer answered");
    assert_eq!(leader_response.generation_id, 2);
    assert_eq!(leader_response.members.len(), 3);
    assert_eq!(follower_response.members, vec![]);
    assert_eq!(newcomer_response.leader, members[0]);
    assert_eq!(newcomer_response.members, vec![]);
    assert_eq!(newcomer_response.member_id, newcomer);
}

#[test]
fn join_with_an_unknown_member_id_is_unknown_member_id() {
    let mut h = Harness::quick();
    let (request, out) = h.join(consumer("nobody"));
    assert_eq!(
        out,
        vec![join_answer(
            request,
            JoinGroupResponse::error("nobody", ErrorCode::UnknownMemberId)
        )]
    );
    h.stable_group(1);
    let (request, out) = h.join(consumer("nobody"));
    assert_eq!(
        out,
        vec![join_answer(
            request,
            JoinGroupResponse::error("nobody", ErrorCode::UnknownMemberId)
        )]
    );
}

#[test]
fn another_protocol_type_is_inconsistent_group_protocol() {
    let mut h = Harness::quick();
    h.stable_group(1);
    let (request, out) = h.join(JoinGroupRequest {
        protocol_type: "connect".into(),
        ..consumer("")
    });
    assert_eq!(
        out,
        vec![join_answer(
            request,
            JoinGroupResponse::error("", ErrorCode::InconsistentGroupProtocol)
        )]
    );
}

#[test]
fn no_protocol_in_common_is_inconsistent_group_protocol() {
    let mut h = Harness::quick();
    h.stable_group(1);
    let (request, out) = h.join(join_request(
        "",
        vec![protocol(
            "cooperative-sticky",
            subscription(&["orders"], &[]),
        )],
    ));
    assert_eq!(
        out,
        vec![join_answer(
            request,
            JoinGroupResponse::error("", ErrorCode::InconsistentGroupProtocol)
        )]
    );
}

#[test]
fn session_timeout_out_of_bounds_is_invalid_session_timeout() {
    let mut h = Harness::quick();
    let (request, out) = h.join(JoinGroupRequest {
        session_timeout_ms: 1_000,
        ..consumer("")
    });
    assert_eq!(
        out,
        vec![join_answer(
            request,
            JoinGroupResponse::error("", ErrorCode::InvalidSessionTimeout)
        )]
    );
    assert_eq!(h.coordinator.group_state(GROUP), None);
}

#[test]
fn empty_group_id_is_invalid_group_id() {
    let mut h = Harness::quick();
    let (request, out) = h.join(JoinGroupRequest {
        group_id: String::new(),
        ..consumer("")
    });
    assert_eq!(
        out,
        vec![join_answer(
            request,
            JoinGroupResponse::error("", ErrorCode::InvalidGroupId)
        )]
    );
}

#[test]
fn a_full_group_refuses_new_members_with_group_max_size_reached() {
    let mut h = Harness::new(GroupConfig {
        group_size_max: 1,
        ..config(3_000)
    });
    h.stable_group(1);
    let (request, out) = h.join(consumer(""));
    assert_eq!(
        out,
        vec![join_answer(
            request,
            JoinGroupResponse::error("", ErrorCode::GroupMaxSizeReached)
        )]
    );
}

#[test]
fn follower_rejoining_a_stable_group_unchanged_gets_the_current_generation() {
    let mut h = Harness::kafka_defaults();
    let members = h.stable_group(2);
    let (request, out) = h.join(consumer(&members[1]));
    assert_eq!(
        out,
        vec![join_answer(
            request,
            JoinGroupResponse {
                error: ErrorCode::None,
                generation_id: 1,
                protocol_type: Some("consumer".into()),
                protocol_name: Some("range".into()),
                leader: members[0].clone(),
                skip_assignment: false,
                member_id: members[1].clone(),
                members: vec![],
            }
        )]
    );
    assert_eq!(h.coordinator.group_state(GROUP), Some(GroupState::Stable));
}

#[test]
fn follower_rejoining_a_stable_group_with_new_metadata_starts_a_rebalance() {
    let mut h = Harness::kafka_defaults();
    let members = h.stable_group(2);
    let (_, out) = h.join(join_request(
        &members[1],
        vec![protocol(
            "range",
            subscription(&["orders", "payments"], &[]),
        )],
    ));
    assert_eq!(
        out,
        vec![rebalance_started(1, RebalanceReason::MemberMetadataChanged)]
    );
    assert_eq!(
        h.heartbeat_error(&members[0], 1),
        ErrorCode::RebalanceInProgress
    );
}

#[test]
fn the_protocol_most_members_prefer_is_selected() {
    let mut h = Harness::kafka_defaults();
    let both = |first: &str, second: &str| {
        join_request(
            "",
            vec![
                protocol(first, subscription(&["orders"], &[])),
                protocol(second, subscription(&["orders"], &[])),
            ],
        )
    };
    let (_, a, _) = h.join_new(both("range", "roundrobin"));
    let (_, b, _) = h.join_new(both("roundrobin", "range"));
    let (_, c, _) = h.join_new(both("roundrobin", "range"));
    let out = h.finish_initial_delay();
    for request in [a, b, c] {
        assert_eq!(
            find_join(&out, request)
                .and_then(|r| r.protocol_name)
                .as_deref(),
            Some("roundrobin")
        );
    }
}

#[test]
fn a_pending_member_id_is_forgotten_after_the_session_timeout() {
    let mut h = Harness::quick();
    let (_, out) = h.join(consumer(""));
    let Some(Output::JoinGroup { response, .. }) = out.first() else {
        panic!("{out:?}");
    };
    let member_id = response.member_id.clone();
    h.advance(i64::from(SESSION_MS));
    let (request, out) = h.join(consumer(&member_id));
    assert_eq!(
        out,
        vec![join_answer(
            request,
            JoinGroupResponse::error(member_id, ErrorCode::UnknownMemberId)
        )]
    );
}

#[test]
fn a_repeated_join_from_a_waiting_member_answers_the_older_request() {
    let mut h = Harness::kafka_defaults();
    let members = h.stable_group(2);
    let (first, _) = h.join(consumer(&members[0]));
    let (second, out) = h.join(consumer(&members[0]));
    assert_eq!(
        find_join(&out, first).map(|r| r.error),
        Some(ErrorCode::RebalanceInProgress)
    );
    assert_eq!(find_join(&out, second), None);
}
