//! LeaveGroup, single and batched.

mod support;

use herald_group::*;
use support::*;

fn result(member: MemberIdentity, error: ErrorCode) -> LeaveGroupMemberResult {
    LeaveGroupMemberResult { member, error }
}

#[test]
fn a_batch_leave_removes_each_member_and_reports_each_result() {
    let mut h = Harness::kafka_defaults();
    let members = h.stable_group(3);
    let (request, out) = h.leave(vec![
        identity(&members[1]),
        identity("stranger"),
        identity(&members[2]),
    ]);
    assert_eq!(
        out,
        vec![
            member_removed(&members[1], RemovalReason::Left),
            rebalance_started(1, RebalanceReason::MemberLeft),
            member_removed(&members[2], RemovalReason::Left),
            Output::LeaveGroup {
                request,
                response: LeaveGroupResponse {
                    error: ErrorCode::None,
                    members: vec![
                        result(identity(&members[1]), ErrorCode::None),
                        result(identity("stranger"), ErrorCode::UnknownMemberId),
                        result(identity(&members[2]), ErrorCode::None),
                    ],
                },
            },
        ]
    );
}

#[test]
fn the_leader_leaving_hands_leadership_to_the_next_member() {
    let mut h = Harness::kafka_defaults();
    let members = h.stable_group(3);
    h.leave(vec![identity(&members[0])]);
    let (b_join, _) = h.join(consumer(&members[1]));
    let (_, out) = h.join(consumer(&members[2]));
    let response = find_join(&out, b_join).expect("answered");
    assert_eq!(response.leader, members[1]);
    assert_eq!(response.members.len(), 2);
}

#[test]
fn leaving_a_rebalance_can_complete_it() {
    let mut h = Harness::kafka_defaults();
    let members = h.stable_group(2);
    let (leader_join, _) = h.join(consumer(&members[0]));
    let (_, out) = h.leave(vec![identity(&members[1])]);
    assert_eq!(
        find_join(&out, leader_join).map(|r| r.generation_id),
        Some(2)
    );
}

#[test]
fn leaving_an_unknown_group_reports_unknown_member_id() {
    let mut h = Harness::quick();
    let (request, out) = h.leave(vec![identity("m")]);
    assert_eq!(
        out,
        vec![Output::LeaveGroup {
            request,
            response: LeaveGroupResponse {
                error: ErrorCode::None,
                members: vec![result(identity("m"), ErrorCode::UnknownMemberId)],
            },
        }]
    );
}

#[test]
fn a_pending_member_may_leave_before_joining() {
    let mut h = Harness::quick();
    let (_, out) = h.join(consumer(""));
    let Some(Output::JoinGroup { response, .. }) = out.first() else {
        panic!("{out:?}");
    };
    let pending = response.member_id.clone();
    let (_, out) = h.leave(vec![identity(&pending)]);
    let Some(Output::LeaveGroup { response, .. }) = out.last() else {
        panic!("{out:?}");
    };
    assert_eq!(response.members[0].error, ErrorCode::None);
}
