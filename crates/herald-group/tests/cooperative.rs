//! The two-phase cooperative rebalance as librdkafka's cooperative-sticky
//! (and the Java CooperativeStickyAssignor) drive it over the classic
//! protocol: the coordinator needs nothing special, but members must keep
//! their ids across generations and a rejoin with changed owned partitions
//! must start the second rebalance.

mod support;

use bytes::Bytes;
use herald_group::*;
use support::*;

const ASSIGNOR: &str = "cooperative-sticky";

fn cooperative(member_id: &str, owned: &[i32]) -> JoinGroupRequest {
    join_request(
        member_id,
        vec![protocol(
            ASSIGNOR,
            subscription(&["orders"], &[("orders", owned)]),
        )],
    )
}

fn sync(member_id: &str, generation_id: i32, assignments: Vec<(&str, Bytes)>) -> SyncGroupRequest {
    SyncGroupRequest {
        protocol_name: Some(ASSIGNOR.into()),
        ..sync_request(member_id, generation_id, assignments)
    }
}

fn owned_by_member(response: &JoinGroupResponse) -> Vec<(String, Vec<i32>)> {
    response
        .members
        .iter()
        .map(|m| {
            let subscription = Subscription::decode(&m.metadata).expect("consumer metadata");
            let owned = subscription
                .owned_partitions
                .iter()
                .flat_map(|tp| tp.partitions.clone())
                .collect();
            (m.member_id.clone(), owned)
        })
        .collect()
}

fn assigned(response: &SyncGroupResponse) -> Vec<i32> {
    Assignment::decode(&response.assignment)
        .expect("assignment")
        .assigned_partitions
        .iter()
        .flat_map(|tp| tp.partitions.clone())
        .collect()
}

#[test]
fn cooperative_two_phase_rebalance_moves_only_revoked_partitions() {
    let mut h = Harness::kafka_defaults();

    // Generation 1: a owns 0,1 and b owns 2,3.
    let (a, a_join, _) = h.join_new(cooperative("", &[]));
    let (b, _, _) = h.join_new(cooperative("", &[]));
    h.finish_initial_delay();
    assert_eq!(h.coordinator.generation_id(GROUP), Some(1));
    h.sync(sync(&b, 1, vec![]));
    h.sync(sync(
        &a,
        1,
        vec![
            (&a, assignment(&[("orders", &[0, 1])])),
            (&b, assignment(&[("orders", &[2, 3])])),
        ],
    ));
    let _ = a_join;

    // c joins the Stable group: a rebalance starts.
    let (c, c_join, out) = h.join_new(cooperative("", &[]));
    assert_eq!(
        out,
        vec![rebalance_started(1, RebalanceReason::MemberJoined)]
    );

    // Phase 1: a and b learn of it by heartbeat and rejoin owning what they
    // own, keeping their member ids.
    assert_eq!(h.heartbeat_error(&a, 1), ErrorCode::RebalanceInProgress);
    assert_eq!(h.heartbeat_error(&b, 1), ErrorCode::RebalanceInProgress);
    let (a_join, out) = h.join(cooperative(&a, &[0, 1]));
    assert_eq!(out, vec![]);
    let (b_join, out) = h.join(cooperative(&b, &[2, 3]));
    let leader = find_join(&out, a_join).expect("a answered");
    assert_eq!(leader.generation_id, 2);
    assert_eq!(leader.leader, a);
    assert_eq!(
        owned_by_member(&leader),
        vec![
            (a.clone(), vec![0, 1]),
            (b.clone(), vec![2, 3]),
            (c.clone(), vec![])
        ]
    );
    assert_eq!(
        find_join(&out, b_join).map(|r| r.member_id),
        Some(b.clone())
    );
    assert_eq!(
        find_join(&out, c_join).map(|r| r.member_id),
        Some(c.clone())
    );

    // The leader revokes 1 and 3 without handing them to c yet.
    let (b_sync, _) = h.sync(sync(&b, 2, vec![]));
    let (c_sync, _) = h.sync(sync(&c, 2, vec![]));
    let (a_sync, out) = h.sync(sync(
        &a,
        2,
        vec![
            (&a, assignment(&[("orders", &[0])])),
            (&b, assignment(&[("orders", &[2])])),
            (&c, assignment(&[])),
        ],
    ));
    assert_eq!(assigned(&find_sync(&out, a_sync).unwrap()), vec![0]);
    assert_eq!(assigned(&find_sync(&out, b_sync).unwrap()), vec![2]);
    assert_eq!(
        assigned(&find_sync(&out, c_sync).unwrap()),
        Vec::<i32>::new()
    );
    assert_eq!(h.coordinator.group_state(GROUP), Some(GroupState::Stable));

    // Phase 2: b revoked partition 3 and rejoins with its smaller owned set;
    // that changed metadata starts the second rebalance.
    let (b_join, out) = h.join(cooperative(&b, &[2]));
    assert_eq!(
        out,
        vec![rebalance_started(2, RebalanceReason::MemberMetadataChanged)]
    );
    assert_eq!(h.heartbeat_error(&a, 2), ErrorCode::RebalanceInProgress);
    assert_eq!(h.heartbeat_error(&c, 2), ErrorCode::RebalanceInProgress);
    let (a_join, _) = h.join(cooperative(&a, &[0]));
    let (c_join, out) = h.join(cooperative(&c, &[]));
    let leader = find_join(&out, a_join).expect("a answered");
    assert_eq!(leader.generation_id, 3);
    assert_eq!(
        owned_by_member(&leader),
        vec![
            (a.clone(), vec![0]),
            (b.clone(), vec![2]),
            (c.clone(), vec![])
        ]
    );
    for (request, member) in [(b_join, &b), (c_join, &c)] {
        assert_eq!(
            find_join(&out, request).map(|r| r.member_id),
            Some(member.clone())
        );
    }

    // Now the revoked partitions go to c; a and b keep theirs throughout.
    let (b_sync, _) = h.sync(sync(&b, 3, vec![]));
    let (c_sync, _) = h.sync(sync(&c, 3, vec![]));
    let (a_sync, out) = h.sync(sync(
        &a,
        3,
        vec![
            (&a, assignment(&[("orders", &[0])])),
            (&b, assignment(&[("orders", &[2])])),
            (&c, assignment(&[("orders", &[1, 3])])),
        ],
    ));
    assert_eq!(assigned(&find_sync(&out, a_sync).unwrap()), vec![0]);
    assert_eq!(assigned(&find_sync(&out, b_sync).unwrap()), vec![2]);
    assert_eq!(assigned(&find_sync(&out, c_sync).unwrap()), vec![1, 3]);
    assert_eq!(out.last(), Some(&stable(3)));
}
