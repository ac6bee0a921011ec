//! ListGroups, DescribeGroups and DeleteGroups.

use crate::api::{DeleteGroupResult, DeleteGroupsResponse, GroupDescription, ListedGroup};
use crate::effects::AppendPurpose;
use crate::error::ErrorCode;
use crate::output::{Output, RequestId};
use crate::records::Record;
use crate::state::GroupState;

use super::GroupCoordinator;

impl GroupCoordinator {
    /// Groups, sorted by id, whose state is in `states` (all groups when
    /// `states` is empty).
    pub fn list_groups(&self, states: &[GroupState]) -> Vec<ListedGroup> {
        self.groups
            .values()
            .filter(|g| states.is_empty() || states.contains(&g.state))
            .map(|g| ListedGroup {
                group_id: g.group_id.clone(),
                protocol_type: g.protocol_type.clone().unwrap_or_default(),
                state: g.state,
            })
            .collect()
    }

    /// One group as DescribeGroups shows it. An unknown group is Dead with
    /// no members and GROUP_ID_NOT_FOUND, as DescribeGroups v6+ answers;
    /// handlers of v0-5 write no error instead, as Kafka does.
    pub fn describe_group(&self, group_id: &str) -> GroupDescription {
        match self.groups.get(group_id) {
            Some(group) => group.describe(),
            None => GroupDescription {
                group_id: group_id.to_owned(),
                error: ErrorCode::GroupIdNotFound,
                state: GroupState::Dead,
                protocol_type: String::new(),
                protocol_name: String::new(),
                members: Vec::new(),
            },
        }
    }

    pub(super) fn handle_delete_groups(&mut self, request: RequestId, group_ids: Vec<String>) {
        let mut records = Vec::new();
        let mut results = Vec::with_capacity(group_ids.len());
        for group_id in group_ids {
            let error = match self.groups.get_mut(&group_id) {
                None => ErrorCode::GroupIdNotFound,
                Some(group) => match group.state {
                    GroupState::Dead => ErrorCode::GroupIdNotFound,
                    GroupState::Empty => {
                        // Dead until the deletion is durable: no member can
                        // join and no offset be committed meanwhile.
                        group.transition(GroupState::Dead, self.fx.now_ms);
                        records.push(Record::GroupDeleted {
                            group_id: group_id.clone(),
                        });
                        ErrorCode::None
                    }
                    GroupState::PreparingRebalance
                    | GroupState::CompletingRebalance
                    | GroupState::Stable => ErrorCode::NonEmptyGroup,
                },
            };
            results.push(DeleteGroupResult { group_id, error });
        }
        if records.is_empty() {
            self.fx.out.push(Output::DeleteGroups {
                request,
                response: DeleteGroupsResponse { results },
            });
        } else {
            self.fx
                .persist(records, AppendPurpose::DeleteGroups { request, results });
        }
    }
}
