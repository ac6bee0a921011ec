//! Static membership (group.instance.id).

mod support;

use herald_group::*;
use support::*;

/// A Stable group of static members "a" (leader) and "b"; returns their
/// member ids.
fn static_group(h: &mut Harness) -> (String, String) {
    let (a_join, _) = h.join(static_consumer("", "a"));
    let (b_join, _) = h.join(static_consumer("", "b"));
    let out = h.finish_initial_delay();
    let a = find_join(&out, a_join).expect("a answered").member_id;
    let b = find_join(&out, b_join).expect("b answered").member_id;
    assert!(a.starts_with("a-") && b.starts_with("b-"));
    h.sync(sync_request(
        &a,
        1,
        vec![
            (&a, assignment(&[("orders", &[0])])),
            (&b, assignment(&[("orders", &[1])])),
        ],
    ));
    h.sync(sync_request(&b, 1, vec![]));
    (a, b)
}

fn static_heartbeat(h: &mut Harness, member_id: &str, instance: &str) -> ErrorCode {
    let request = h.request();
    let out = h.coordinator.heartbeat(
        h.now_ms,
        request,
        HeartbeatRequest {
            group_instance_id: Some(instance.into()),
            ..heartbeat_request(member_id, 1)
        },
    );
    assert_eq!(out.len(), 1);
    match &out[0] {
        Output::Heartbeat { error, .. } => *error,
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_static_member_joins_without_member_id_required() {
    let mut h = Harness::quick();
    let (_, out) = h.join(static_consumer("", "a"));
    assert_eq!(
        out,
        vec![rebalance_started(0, RebalanceReason::MemberJoined)]
    );
}

#[test]
fn a_restarted_static_member_rejoins_without_a_rebalance_and_keeps_its_assignment() {
    let mut h = Harness::kafka_defaults();
    let (a, b) = static_group(&mut h);
    let (request, out) = h.join(static_consumer("", "b"));
    let [Output::JoinGroup {
        request: r,
        response,
    }] = out.as_slice()
    else {
        panic!("expected only the JoinGroup answer: {out:?}");
    };
    assert_eq!(*r, request);
    let b2 = response.member_id.clone();
    assert_ne!(b2, b);
    assert_eq!(
        *response,
        JoinGroupResponse {
            error: ErrorCode::None,
            generation_id: 1,
            protocol_type: Some("consumer".into()),
            protocol_name: Some("range".into()),
            leader: a.clone(),
            skip_assignment: false,
            member_id: b2.clone(),
            members: vec![],
        }
    );
    assert_eq!(h.coordinator.group_state(GROUP), Some(GroupState::Stable));
    let (sync, out) = h.sync(SyncGroupRequest {
        group_instance_id: Some("b".into()),
        ..sync_request(&b2, 1, vec![])
    });
    assert_eq!(
        out,
        vec![sync_answer(sync, sync_ok(assignment(&[("orders", &[1])])))]
    );
    assert_eq!(static_heartbeat(&mut h, &a, "a"), ErrorCode::None);
}

#[test]
fn the_old_incarnation_of_a_static_member_is_fenced() {
    let mut h = Harness::kafka_defaults();
    let (_, b) = static_group(&mut h);
    h.join(static_consumer("", "b"));
    assert_eq!(
        static_heartbeat(&mut h, &b, "b"),
        ErrorCode::FencedInstanceId
    );
    let (request, out) = h.join(static_consumer(&b, "b"));
    assert_eq!(
        out,
        vec![join_answer(
            request,
            JoinGroupResponse::error(b.clone(), ErrorCode::FencedInstanceId)
        )]
    );
    let errors = h.commit_durably(OffsetCommitRequest {
        group_instance_id: Some("b".into()),
        ..commit_request(&b, 1, &[("orders", 1, 10)])
    });
    assert_eq!(errors, vec![ErrorCode::FencedInstanceId]);
}

#[test]
fn a_restarted_static_leader_on_v9_is_told_to_skip_the_assignment() {
    let mut h = Harness::kafka_defaults();
    let (_, b) = static_group(&mut h);
    let (_, out) = h.join(JoinGroupRequest {
        supports_skip_assignment: true,
        ..static_consumer("", "a")
    });
    let [Output::JoinGroup { response, .. }] = out.as_slice() else {
        panic!("{out:?}");
    };
    assert!(response.skip_assignment);
    assert_eq!(response.leader, response.member_id);
    let ids: Vec<&str> = response
        .members
        .iter()
        .map(|m| m.member_id.as_str())
        .collect();
    assert_eq!(ids, vec![response.member_id.as_str(), b.as_str()]);
}

#[test]
fn a_restarted_static_leader_before_v9_is_given_the_old_leader_id() {
    let mut h = Harness::kafka_defaults();
    let (a, _) = static_group(&mut h);
    let (_, out) = h.join(static_consumer("", "a"));
    let [Output::JoinGroup { response, .. }] = out.as_slice() else {
        panic!("{out:?}");
    };
    assert_eq!(response.leader, a);
    assert_ne!(response.member_id, a);
    assert_eq!(response.members, vec![]);
}

#[test]
fn a_static_rejoin_that_changes_the_selected_protocol_rebalances() {
    let mut h = Harness::quick();
    let both = |first: &str, second: &str| JoinGroupRequest {
        group_instance_id: Some("a".into()),
        ..join_request(
            "",
            vec![
                protocol(first, subscription(&["orders"], &[])),
                protocol(second, subscription(&["orders"], &[])),
            ],
        )
    };
    let (first, _) = h.join(both("range", "roundrobin"));
    let out = h.advance(0);
    let a = find_join(&out, first).expect("answered").member_id;
    h.sync(sync_request(&a, 1, vec![]));
    let (request, out) = h.join(both("roundrobin", "range"));
    assert_eq!(
        out[0],
        rebalance_started(1, RebalanceReason::StaticMemberReplaced)
    );
    assert_eq!(out[1], generation_started(2, Some("roundrobin"), 1));
    assert_eq!(find_join(&out, request).map(|r| r.generation_id), Some(2));
}

#[test]
fn a_static_member_that_does_not_rejoin_is_kept_through_the_rebalance_timeout() {
    let mut h = Harness::kafka_defaults();
    let (a, b) = static_group(&mut h);
    h.join(static_consumer(&a, "a"));
    for _ in 0..9 {
        h.advance(3_000);
        assert_eq!(
            static_heartbeat(&mut h, &b, "b"),
            ErrorCode::RebalanceInProgress
        );
    }
    let out = h.advance(3_000);
    assert_eq!(out[0], generation_started(2, Some("range"), 2));
    assert_eq!(out.len(), 2, "{out:?}");
}

#[test]
fn a_static_member_can_be_removed_by_instance_id() {
    let mut h = Harness::kafka_defaults();
    let (_, b) = static_group(&mut h);
    let by_instance = MemberIdentity {
        member_id: String::new(),
        group_instance_id: Some("b".into()),
    };
    let (request, out) = h.leave(vec![by_instance.clone()]);
    assert_eq!(
        out,
        vec![
            member_removed(&b, RemovalReason::Left),
            rebalance_started(1, RebalanceReason::MemberLeft),
            Output::LeaveGroup {
                request,
                response: LeaveGroupResponse {
                    error: ErrorCode::None,
                    members: vec![LeaveGroupMemberResult {
                        member: by_instance,
                        error: ErrorCode::None,
                    }],
                },
            },
        ]
    );
}
