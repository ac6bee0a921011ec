//! FindCoordinator: this broker coordinates every group. Single key in
//! v0-3, a batch of keys in v4+.

use kafka_protocol::messages::find_coordinator_response::Coordinator;
use kafka_protocol::messages::{BrokerId, FindCoordinatorRequest, FindCoordinatorResponse};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::ResponseError;

use super::{group_allowed, wire_str, Context};
use crate::error_code;
use crate::session::Session;
use herald_auth::Operation;

/// `key_type` of a consumer group.
const KEY_TYPE_GROUP: i8 = 0;
/// `key_type` of a transactional id.
const KEY_TYPE_TRANSACTION: i8 = 1;

/// Answers a FindCoordinator request.
pub fn handle(
    ctx: &Context,
    session: &Session,
    request: FindCoordinatorRequest,
    version: i16,
) -> FindCoordinatorResponse {
    let node = BrokerId(ctx.broker.node_id());
    let host = wire_str(session.listener().advertised_host.clone());
    let port = i32::from(session.listener().advertised_port);
    let refusal = refusal(request.key_type);
    if version >= 4 {
        let coordinators = request
            .coordinator_keys
            .into_iter()
            .map(|key| {
                let refusal = refusal.or_else(|| denied(ctx, session, &key));
                coordinator(key, refusal, node, &host, port)
            })
            .collect();
        return FindCoordinatorResponse::default().with_coordinators(coordinators);
    }
    let refusal = refusal.or_else(|| denied(ctx, session, &request.key));
    match refusal {
        None => FindCoordinatorResponse::default()
            .with_node_id(node)
            .with_host(host)
            .with_port(port),
        Some((code, message)) => {
            let response = FindCoordinatorResponse::default()
                .with_error_code(code)
                .with_node_id(BrokerId(-1))
                .with_port(-1);
            if version >= 1 {
                response.with_error_message(Some(wire_str(message)))
            } else {
                response
            }
        }
    }
}

fn coordinator(
    key: StrBytes,
    refusal: Option<(i16, &str)>,
    node: BrokerId,
    host: &StrBytes,
    port: i32,
) -> Coordinator {
    let found = Coordinator::default().with_key(key);
    match refusal {
        None => found
            .with_node_id(node)
            .with_host(host.clone())
            .with_port(port),
        Some((code, message)) => found
            .with_error_code(code)
            .with_error_message(Some(wire_str(message)))
            .with_node_id(BrokerId(-1))
            .with_port(-1),
    }
}

/// Why a key type is not served: transactions do not exist yet (the
/// client retries, as it does while a coordinator is elected), and other
/// types are invalid.
/// GROUP_AUTHORIZATION_FAILED unless the client may describe group `key`.
fn denied(ctx: &Context, session: &Session, key: &str) -> Option<(i16, &'static str)> {
    (!group_allowed(ctx, session, Operation::Describe, key)).then(|| {
        (
            error_code::code(ResponseError::GroupAuthorizationFailed),
            "not authorized to describe this group",
        )
    })
}

fn refusal(key_type: i8) -> Option<(i16, &'static str)> {
    match key_type {
        KEY_TYPE_GROUP => None,
        KEY_TYPE_TRANSACTION => Some((
            error_code::code(ResponseError::CoordinatorNotAvailable),
            "transactions are not supported",
        )),
        _ => Some((
            error_code::code(ResponseError::InvalidRequest),
            "unknown coordinator key type",
        )),
    }
}

/// How the guard walks this API's request body before `kafka-protocol`
/// decodes it, transcribed from Kafka's message definition (the registry's
/// tests check it consumes exactly the bytes of every served version).
pub(crate) mod layout {
    use crate::codec::guard::Ty::*;
    use crate::codec::guard::{between, since, Schema};

    pub(crate) const SCHEMA: Schema = Schema {
        flexible_from: 3,
        fields: &[between(0, 3, Str), since(1, I8), since(4, StrArray)],
    };
}
