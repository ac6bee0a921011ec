//! JoinGroup: a member joins (or rejoins) a group. The answer is usually
//! held until the rebalance's join phase ends; the connection waits for it,
//! which is what classic-protocol clients expect (they send nothing else to
//! the coordinator meanwhile).

use std::net::SocketAddr;

use herald_broker::{GroupCall, GroupReply};
use herald_group::Protocol;
use kafka_protocol::messages::join_group_response::JoinGroupResponseMember;
use kafka_protocol::messages::{ApiKey, JoinGroupRequest, JoinGroupResponse};

use super::{group_call, unexpected_reply, wire_str, Context, Wait};
use crate::error_code;

/// Answers a JoinGroup request from the client named `client_id`,
/// connected from `peer`.
pub async fn handle(
    ctx: &Context,
    request: JoinGroupRequest,
    version: i16,
    client_id: String,
    peer: Option<SocketAddr>,
) -> JoinGroupResponse {
    let call = GroupCall::JoinGroup(herald_group::JoinGroupRequest {
        group_id: request.group_id.0.to_string(),
        member_id: request.member_id.to_string(),
        group_instance_id: request.group_instance_id.map(|s| s.to_string()),
        client_id,
        // Kafka's form: the address as Java's InetAddress prints it.
        client_host: peer.map(|p| format!("/{}", p.ip())).unwrap_or_default(),
        session_timeout_ms: request.session_timeout_ms,
        // v0 has no rebalance timeout: Kafka uses the session timeout.
        rebalance_timeout_ms: if version == 0 {
            request.session_timeout_ms
        } else {
            request.rebalance_timeout_ms
        },
        protocol_type: request.protocol_type.to_string(),
        protocols: request
            .protocols
            .into_iter()
            .map(|p| Protocol {
                name: p.name.to_string(),
                metadata: p.metadata,
            })
            .collect(),
        require_known_member_id: version >= 4,
        supports_skip_assignment: version >= 9,
    });
    match group_call(ctx, call, Wait::UntilRebalance).await {
        GroupReply::JoinGroup(r) => JoinGroupResponse::default()
            .with_error_code(error_code::group(r.error))
            .with_generation_id(r.generation_id)
            .with_protocol_type(r.protocol_type.map(wire_str))
            .with_protocol_name(r.protocol_name.map(wire_str))
            .with_leader(wire_str(r.leader))
            .with_skip_assignment(version >= 9 && r.skip_assignment)
            .with_member_id(wire_str(r.member_id))
            .with_members(
                r.members
                    .into_iter()
                    .map(|m| {
                        JoinGroupResponseMember::default()
                            .with_member_id(wire_str(m.member_id))
                            .with_group_instance_id(m.group_instance_id.map(wire_str))
                            .with_metadata(m.metadata)
                    })
                    .collect(),
            ),
        other => {
            let code = unexpected_reply(ApiKey::JoinGroup, &other);
            JoinGroupResponse::default()
                .with_error_code(code)
                .with_generation_id(-1)
        }
    }
}

/// How the guard walks this API's request body before `kafka-protocol`
/// decodes it, transcribed from Kafka's message definition (the registry's
/// tests check it consumes exactly the bytes of every served version).
pub(crate) mod layout {
    use crate::codec::guard::Ty::*;
    use crate::codec::guard::{all, since, Field, Schema};

    const JOIN_GROUP_PROTOCOL: &[Field] = &[all(Str), all(Bytes)];
    pub(crate) const SCHEMA: Schema = Schema {
        flexible_from: 6,
        fields: &[
            all(Str),
            all(I32),
            since(1, I32),
            all(Str),
            since(5, Str),
            all(Str),
            all(Array(JOIN_GROUP_PROTOCOL)),
            since(8, Str),
        ],
    };
}
