//! DeleteGroups: removes empty groups with their committed offsets.

use herald_broker::{GroupCall, GroupReply};
use kafka_protocol::messages::delete_groups_response::DeletableGroupResult;
use kafka_protocol::messages::{ApiKey, DeleteGroupsRequest, DeleteGroupsResponse, GroupId};
use kafka_protocol::ResponseError;

use super::{group_allowed, group_call, unexpected_reply, wire_str, Context, Wait};
use crate::error_code;
use crate::session::Session;
use herald_auth::Operation;

/// Answers a DeleteGroups request.
pub async fn handle(
    ctx: &Context,
    session: &Session,
    mut request: DeleteGroupsRequest,
    _version: i16,
) -> DeleteGroupsResponse {
    let (allowed, denied): (Vec<GroupId>, Vec<GroupId>) = std::mem::take(&mut request.groups_names)
        .into_iter()
        .partition(|g| group_allowed(ctx, session, Operation::Delete, &g.0));
    let denied = denied.into_iter().map(|g| {
        DeletableGroupResult::default()
            .with_group_id(g)
            .with_error_code(error_code::code(ResponseError::GroupAuthorizationFailed))
    });
    if allowed.is_empty() {
        return DeleteGroupsResponse::default().with_results(denied.collect());
    }
    request.groups_names = allowed;
    let names: Vec<String> = request
        .groups_names
        .iter()
        .map(|g| g.0.to_string())
        .collect();
    let results = match group_call(ctx, GroupCall::DeleteGroups(names), Wait::Short).await {
        GroupReply::DeleteGroups(r) => r
            .results
            .into_iter()
            .map(|g| {
                DeletableGroupResult::default()
                    .with_group_id(GroupId(wire_str(g.group_id)))
                    .with_error_code(error_code::group(g.error))
            })
            .collect(),
        other => {
            let code = unexpected_reply(ApiKey::DeleteGroups, &other);
            request
                .groups_names
                .into_iter()
                .map(|g| {
                    DeletableGroupResult::default()
                        .with_group_id(g)
                        .with_error_code(code)
                })
                .collect()
        }
    };
    let mut results: Vec<DeletableGroupResult> = results;
    results.extend(denied);
    DeleteGroupsResponse::default().with_results(results)
}

/// How the guard walks this API's request body before `kafka-protocol`
/// decodes it, transcribed from Kafka's message definition (the registry's
/// tests check it consumes exactly the bytes of every served version).
pub(crate) mod layout {
    use crate::codec::guard::Ty::*;
    use crate::codec::guard::{all, Schema};

    pub(crate) const SCHEMA: Schema = Schema {
        flexible_from: 2,
        fields: &[all(StrArray)],
    };
}
