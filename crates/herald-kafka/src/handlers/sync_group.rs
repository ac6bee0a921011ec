//! SyncGroup: the leader hands in the assignment; every member receives its
//! own (held until the leader's arrives).

use herald_broker::{GroupCall, GroupReply};
use herald_group::MemberAssignment;
use kafka_protocol::messages::{ApiKey, SyncGroupRequest, SyncGroupResponse};

use super::{group_call, unexpected_reply, wire_str, Context, Wait};
use crate::error_code;

/// Answers a SyncGroup request.
pub async fn handle(ctx: &Context, request: SyncGroupRequest, _version: i16) -> SyncGroupResponse {
    let call = GroupCall::SyncGroup(herald_group::SyncGroupRequest {
        group_id: request.group_id.0.to_string(),
        generation_id: request.generation_id,
        member_id: request.member_id.to_string(),
        group_instance_id: request.group_instance_id.map(|s| s.to_string()),
        protocol_type: request.protocol_type.map(|s| s.to_string()),
        protocol_name: request.protocol_name.map(|s| s.to_string()),
        assignments: request
            .assignments
            .into_iter()
            .map(|a| MemberAssignment {
                member_id: a.member_id.to_string(),
                assignment: a.assignment,
            })
            .collect(),
    });
    match group_call(ctx, call, Wait::UntilRebalance).await {
        GroupReply::SyncGroup(r) => SyncGroupResponse::default()
            .with_error_code(error_code::group(r.error))
            .with_protocol_type(r.protocol_type.map(wire_str))
            .with_protocol_name(r.protocol_name.map(wire_str))
            .with_assignment(r.assignment),
        other => {
            let code = unexpected_reply(ApiKey::SyncGroup, &other);
            SyncGroupResponse::default().with_error_code(code)
        }
    }
}

/// How the guard walks this API's request body before `kafka-protocol`
/// decodes it, transcribed from Kafka's message definition (the registry's
/// tests check it consumes exactly the bytes of every served version).
pub(crate) mod layout {
    use crate::codec::guard::Ty::*;
    use crate::codec::guard::{all, since, Field, Schema};

    const SYNC_GROUP_ASSIGNMENT: &[Field] = &[all(Str), all(Bytes)];
    pub(crate) const SCHEMA: Schema = Schema {
        flexible_from: 4,
        fields: &[
            all(Str),
            all(I32),
            all(Str),
            since(3, Str),
            since(5, Str),
            since(5, Str),
            all(Array(SYNC_GROUP_ASSIGNMENT)),
        ],
    };
}
