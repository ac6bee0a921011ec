//! ListGroups, DescribeGroups, DeleteGroups.

mod support;

use herald_group::*;
use support::*;

fn delete(h: &mut Harness, groups: &[&str]) -> (RequestId, Vec<Output>) {
    let request = h.request();
    let out = h.coordinator.delete_groups(
        h.now_ms,
        request,
        groups.iter().map(|g| g.to_string()).collect(),
    );
    (request, out)
}

#[test]
fn list_groups_filters_by_state() {
    let mut h = Harness::kafka_defaults();
    h.stable_group(1);
    let request = h.request();
    h.coordinator.offset_commit(
        h.now_ms,
        request,
        OffsetCommitRequest {
            group_id: "simple".into(),
            ..commit_request("", -1, &[("orders", 0, 1)])
        },
    );
    let all: Vec<String> = h
        .coordinator
        .list_groups(&[])
        .into_iter()
        .map(|g| g.group_id)
        .collect();
    assert_eq!(all, vec![GROUP.to_string(), "simple".to_string()]);
    assert_eq!(
        h.coordinator.list_groups(&[GroupState::Stable]),
        vec![ListedGroup {
            group_id: GROUP.into(),
            protocol_type: "consumer".into(),
            state: GroupState::Stable,
        }]
    );
}

#[test]
fn describe_shows_members_metadata_and_assignments_when_stable() {
    let mut h = Harness::kafka_defaults();
    let members = h.stable_group(1);
    let description = h.coordinator.describe_group(GROUP);
    assert_eq!(
        description,
        GroupDescription {
            group_id: GROUP.into(),
            error: ErrorCode::None,
            state: GroupState::Stable,
            protocol_type: "consumer".into(),
            protocol_name: "range".into(),
            members: vec![MemberDescription {
                member_id: members[0].clone(),
                group_instance_id: None,
                client_id: "client".into(),
                client_host: "/127.0.0.1".into(),
                metadata: subscription(&["orders"], &[]),
                assignment: assignment(&[("orders", &[0])]),
            }],
        }
    );
}

#[test]
fn describe_hides_metadata_while_rebalancing_and_reports_unknown_groups_dead() {
    let mut h = Harness::kafka_defaults();
    let members = h.stable_group(2);
    h.join(consumer(&members[0]));
    let description = h.coordinator.describe_group(GROUP);
    assert_eq!(description.state, GroupState::PreparingRebalance);
    assert_eq!(description.protocol_name, "");
    assert!(description
        .members
        .iter()
        .all(|m| m.metadata.is_empty() && m.assignment.is_empty()));
    let unknown = h.coordinator.describe_group("nope");
    assert_eq!(
        (unknown.state, unknown.error),
        (GroupState::Dead, ErrorCode::GroupIdNotFound)
    );
}

#[test]
fn delete_groups_refuses_active_and_unknown_groups() {
    let mut h = Harness::kafka_defaults();
    h.stable_group(1);
    let (request, out) = delete(&mut h, &[GROUP, "nope"]);
    assert_eq!(
        out,
        vec![Output::DeleteGroups {
            request,
            response: DeleteGroupsResponse {
                results: vec![
                    DeleteGroupResult {
                        group_id: GROUP.into(),
                        error: ErrorCode::NonEmptyGroup,
                    },
                    DeleteGroupResult {
                        group_id: "nope".into(),
                        error: ErrorCode::GroupIdNotFound,
                    },
                ],
            },
        }]
    );
}

#[test]
fn deleting_an_empty_group_is_durable_before_it_is_acknowledged() {
    let mut h = Harness::quick();
    h.commit_durably(commit_request("", -1, &[("orders", 0, 1)]));
    let (request, out) = delete(&mut h, &[GROUP]);
    assert_eq!(
        out,
        vec![Output::Persist {
            append: AppendId(1),
            records: vec![Record::GroupDeleted {
                group_id: GROUP.into()
            }],
        }]
    );
    // Meanwhile the group is Dead: nobody may join it.
    let (join, out) = h.join(consumer(""));
    assert_eq!(
        out,
        vec![join_answer(
            join,
            JoinGroupResponse::error("", ErrorCode::CoordinatorNotAvailable)
        )]
    );
    let out = h
        .coordinator
        .append_completed(h.now_ms, AppendId(1), AppendResult::Durable);
    assert_eq!(
        out,
        vec![
            Output::Event(GroupEvent::GroupRemoved {
                group_id: GROUP.into()
            }),
            Output::DeleteGroups {
                request,
                response: DeleteGroupsResponse {
                    results: vec![DeleteGroupResult {
                        group_id: GROUP.into(),
                        error: ErrorCode::None,
                    }],
                },
            },
        ]
    );
    assert_eq!(h.coordinator.group_state(GROUP), None);
}

#[test]
fn a_failed_group_deletion_leaves_the_group_empty() {
    let mut h = Harness::quick();
    h.commit_durably(commit_request("", -1, &[("orders", 0, 1)]));
    let (_, out) = delete(&mut h, &[GROUP]);
    let [Output::Persist { append, .. }] = out.as_slice() else {
        panic!("{out:?}");
    };
    let out = h
        .coordinator
        .append_completed(h.now_ms, *append, AppendResult::Failed);
    let [Output::DeleteGroups { response, .. }] = out.as_slice() else {
        panic!("{out:?}");
    };
    assert_eq!(
        response.results[0].error,
        ErrorCode::CoordinatorNotAvailable
    );
    assert_eq!(h.coordinator.group_state(GROUP), Some(GroupState::Empty));
    assert_eq!(
        h.coordinator.committed_offsets(GROUP).map(|o| o.len()),
        Some(1)
    );
}
