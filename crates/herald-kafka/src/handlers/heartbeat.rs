//! Heartbeat: keeps a member's session alive and tells it when the group
//! is rebalancing.

use herald_broker::{GroupCall, GroupReply};
use kafka_protocol::messages::{ApiKey, HeartbeatRequest, HeartbeatResponse};

use super::{group_call, unexpected_reply, Context, Wait};
use crate::error_code;

/// Answers a Heartbeat request.
pub async fn handle(ctx: &Context, request: HeartbeatRequest, _version: i16) -> HeartbeatResponse {
    let call = GroupCall::Heartbeat(herald_group::HeartbeatRequest {
        group_id: request.group_id.0.to_string(),
        generation_id: request.generation_id,
        member_id: request.member_id.to_string(),
        group_instance_id: request.group_instance_id.map(|s| s.to_string()),
    });
    let code = match group_call(ctx, call, Wait::Short).await {
        GroupReply::Heartbeat(error) => error_code::group(error),
        other => unexpected_reply(ApiKey::Heartbeat, &other),
    };
    HeartbeatResponse::default().with_error_code(code)
}

/// How the guard walks this API's request body before `kafka-protocol`
/// decodes it, transcribed from Kafka's message definition (the registry's
/// tests check it consumes exactly the bytes of every served version).
pub(crate) mod layout {
    use crate::codec::guard::Ty::*;
    use crate::codec::guard::{all, since, Schema};

    pub(crate) const SCHEMA: Schema = Schema {
        flexible_from: 4,
        fields: &[all(Str), all(I32), all(Str), since(3, Str)],
    };
}
