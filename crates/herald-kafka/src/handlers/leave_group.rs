//! LeaveGroup: one member by id (v0-2) or a batch of members, possibly
//! named by group.instance.id (v3+).

use herald_broker::{GroupCall, GroupReply};
use herald_group::MemberIdentity;
use kafka_protocol::messages::leave_group_response::MemberResponse;
use kafka_protocol::messages::{ApiKey, LeaveGroupRequest, LeaveGroupResponse};

use super::{group_call, unexpected_reply, wire_str, Context, Wait};
use crate::error_code;

/// Answers a LeaveGroup request.
pub async fn handle(ctx: &Context, request: LeaveGroupRequest, version: i16) -> LeaveGroupResponse {
    let members = if version <= 2 {
        vec![MemberIdentity {
            member_id: request.member_id.to_string(),
            group_instance_id: None,
        }]
    } else {
        request
            .members
            .into_iter()
            .map(|m| MemberIdentity {
                member_id: m.member_id.to_string(),
                group_instance_id: m.group_instance_id.map(|s| s.to_string()),
            })
            .collect()
    };
    let call = GroupCall::LeaveGroup(herald_group::LeaveGroupRequest {
        group_id: request.group_id.0.to_string(),
        members,
    });
    let r = match group_call(ctx, call, Wait::Short).await {
        GroupReply::LeaveGroup(r) => r,
        other => {
            let code = unexpected_reply(ApiKey::LeaveGroup, &other);
            return LeaveGroupResponse::default().with_error_code(code);
        }
    };
    if version <= 2 {
        // One member and no per-member results: its error is the answer.
        let error = match r.members.first() {
            Some(m) if r.error.is_ok() => m.error,
            _ => r.error,
        };
        return LeaveGroupResponse::default().with_error_code(error_code::group(error));
    }
    LeaveGroupResponse::default()
        .with_error_code(error_code::group(r.error))
        .with_members(
            r.members
                .into_iter()
                .map(|m| {
                    MemberResponse::default()
                        .with_member_id(wire_str(m.member.member_id))
                        .with_group_instance_id(m.member.group_instance_id.map(wire_str))
                        .with_error_code(error_code::group(m.error))
                })
                .collect(),
        )
}

/// How the guard walks this API's request body before `kafka-protocol`
/// decodes it, transcribed from Kafka's message definition (the registry's
/// tests check it consumes exactly the bytes of every served version).
pub(crate) mod layout {
    use crate::codec::guard::Ty::*;
    use crate::codec::guard::{all, between, since, Field, Schema};

    // Present from v3, the version that introduced the member list.
    const LEAVE_GROUP_MEMBER: &[Field] = &[all(Str), all(Str), since(5, Str)];
    pub(crate) const SCHEMA: Schema = Schema {
        flexible_from: 4,
        fields: &[
            all(Str),
            between(0, 2, Str),
            since(3, Array(LEAVE_GROUP_MEMBER)),
        ],
    };
}
