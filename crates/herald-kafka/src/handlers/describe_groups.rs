//! DescribeGroups: state, protocol and members of each named group.

use herald_broker::{GroupCall, GroupReply};
use herald_group::ErrorCode;
use kafka_protocol::messages::describe_groups_response::{DescribedGroup, DescribedGroupMember};
use kafka_protocol::messages::{ApiKey, DescribeGroupsRequest, DescribeGroupsResponse, GroupId};

use super::{group_allowed, group_call, unexpected_reply, wire_str, Context, Wait};
use crate::error_code;
use crate::session::Session;
use herald_auth::Operation;

/// Answers a DescribeGroups request.
pub async fn handle(
    ctx: &Context,
    session: &Session,
    request: DescribeGroupsRequest,
    version: i16,
) -> DescribeGroupsResponse {
    let mut groups = Vec::with_capacity(request.groups.len());
    for group_id in request.groups {
        if !group_allowed(ctx, session, Operation::Describe, &group_id.0) {
            groups.push(
                DescribedGroup::default()
                    .with_group_id(group_id)
                    .with_error_code(error_code::code(
                        kafka_protocol::ResponseError::GroupAuthorizationFailed,
                    )),
            );
            continue;
        }
        let call = GroupCall::DescribeGroup(group_id.0.to_string());
        let described = match group_call(ctx, call, Wait::Short).await {
            GroupReply::DescribeGroup(d) => d,
            other => {
                let code = unexpected_reply(ApiKey::DescribeGroups, &other);
                groups.push(
                    DescribedGroup::default()
                        .with_group_id(group_id)
                        .with_error_code(code),
                );
                continue;
            }
        };
        // Before v6 an unknown group is reported Dead without an error.
        let error = if version < 6 && described.error == ErrorCode::GroupIdNotFound {
            ErrorCode::None
        } else {
            described.error
        };
        let members = described
            .members
            .into_iter()
            .map(|m| {
                DescribedGroupMember::default()
                    .with_member_id(wire_str(m.member_id))
                    .with_group_instance_id(m.group_instance_id.map(wire_str))
                    .with_client_id(wire_str(m.client_id))
                    .with_client_host(wire_str(m.client_host))
                    .with_member_metadata(m.metadata)
                    .with_member_assignment(m.assignment)
            })
            .collect();
        groups.push(
            DescribedGroup::default()
                .with_error_code(error_code::group(error))
                .with_group_id(GroupId(wire_str(described.group_id)))
                .with_group_state(wire_str(described.state.as_str()))
                .with_protocol_type(wire_str(described.protocol_type))
                .with_protocol_data(wire_str(described.protocol_name))
                .with_members(members),
        );
    }
    DescribeGroupsResponse::default().with_groups(groups)
}

/// How the guard walks this API's request body before `kafka-protocol`
/// decodes it, transcribed from Kafka's message definition (the registry's
/// tests check it consumes exactly the bytes of every served version).
pub(crate) mod layout {
    use crate::codec::guard::Ty::*;
    use crate::codec::guard::{all, since, Schema};

    pub(crate) const SCHEMA: Schema = Schema {
        flexible_from: 5,
        fields: &[all(StrArray), since(3, Bool)],
    };
}
