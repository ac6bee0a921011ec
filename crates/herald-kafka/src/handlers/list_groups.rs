//! ListGroups: every group, optionally filtered by state (v4+) and type
//! (v5+; every herald group is "classic").

use herald_broker::{GroupCall, GroupReply};
use herald_group::GroupState;
use kafka_protocol::messages::list_groups_response::ListedGroup;
use kafka_protocol::messages::{ApiKey, GroupId, ListGroupsRequest, ListGroupsResponse};

use super::{
    cluster_allowed, group_allowed, group_call, unexpected_reply, wire_str, Context, Wait,
};
use crate::session::Session;
use herald_auth::Operation;

/// The type of every group herald coordinates (the classic protocol).
const GROUP_TYPE: &str = "classic";

/// Answers a ListGroups request.
pub async fn handle(
    ctx: &Context,
    session: &Session,
    request: ListGroupsRequest,
    version: i16,
) -> ListGroupsResponse {
    // DESCRIBE on the cluster lists every group; else the groups the
    // client may describe.
    let every = cluster_allowed(ctx, session, Operation::Describe);
    let type_matches = version < 5
        || request.types_filter.is_empty()
        || request
            .types_filter
            .iter()
            .any(|t| t.eq_ignore_ascii_case(GROUP_TYPE));
    let filter = if version >= 4 {
        request.states_filter.as_slice()
    } else {
        &[]
    };
    let states: Vec<GroupState> = filter.iter().filter_map(|s| GroupState::parse(s)).collect();
    // A filter naming only unknown states matches nothing.
    if !type_matches || (!filter.is_empty() && states.is_empty()) {
        return ListGroupsResponse::default();
    }
    match group_call(ctx, GroupCall::ListGroups(states), Wait::Short).await {
        GroupReply::ListGroups(groups) => ListGroupsResponse::default().with_groups(
            groups
                .into_iter()
                .filter(|g| every || group_allowed(ctx, session, Operation::Describe, &g.group_id))
                .map(|g| {
                    let listed = ListedGroup::default()
                        .with_group_id(GroupId(wire_str(g.group_id)))
                        .with_protocol_type(wire_str(g.protocol_type));
                    let listed = if version >= 4 {
                        listed.with_group_state(wire_str(g.state.as_str()))
                    } else {
                        listed
                    };
                    if version >= 5 {
                        listed.with_group_type(wire_str(GROUP_TYPE))
                    } else {
                        listed
                    }
                })
                .collect(),
        ),
        other => {
            let code = unexpected_reply(ApiKey::ListGroups, &other);
            ListGroupsResponse::default().with_error_code(code)
        }
    }
}

/// How the guard walks this API's request body before `kafka-protocol`
/// decodes it, transcribed from Kafka's message definition (the registry's
/// tests check it consumes exactly the bytes of every served version).
pub(crate) mod layout {
    use crate::codec::guard::Ty::*;
    use crate::codec::guard::{since, Schema};

    pub(crate) const SCHEMA: Schema = Schema {
        flexible_from: 3,
        fields: &[since(4, StrArray), since(5, StrArray)],
    };
}
