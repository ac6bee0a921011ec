//! FindCoordinator: a single node coordinates every group; a cluster node
//! names the leader of the group's offsets partition (COORDINATOR_NOT_AVAILABLE
//! while it has none, and the client asks again). Single key in v0-3, a
//! batch of keys in v4+.

use kafka_protocol::messages::find_coordinator_response::Coordinator;
use kafka_protocol::messages::{BrokerId, FindCoordinatorRequest, FindCoordinatorResponse};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::ResponseError;

use super::{group_allowed, wire_str, Context};
use crate::error_code;
use crate::session::Session;
use herald_auth::Operation;
use herald_broker::CoordinatorLocation;

/// Where a coordinator is reached.
struct Address {
    node: BrokerId,
    host: StrBytes,
    port: i32,
}

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
    let refusal = refusal(request.key_type);
    if version >= 4 {
        let coordinators = request
            .coordinator_keys
            .into_iter()
            .map(|key| {
                let found = refusal
                    .or_else(|| denied(ctx, session, &key))
                    .map_or_else(|| locate(ctx, session, &key), Err);
                coordinator(key, found)
            })
            .collect();
        return FindCoordinatorResponse::default().with_coordinators(coordinators);
    }
    let found = refusal
        .or_else(|| denied(ctx, session, &request.key))
        .map_or_else(|| locate(ctx, session, &request.key), Err);
    match found {
        Ok(address) => FindCoordinatorResponse::default()
            .with_node_id(address.node)
            .with_host(address.host)
            .with_port(address.port),
        Err((code, message)) => {
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

/// The address of the coordinator of group `key`: this listener's when
/// this node is it and not one of a cluster, else the node's as Metadata
/// lists it.
fn locate(ctx: &Context, session: &Session, key: &str) -> Result<Address, (i16, &'static str)> {
    let unknown = (
        error_code::code(ResponseError::CoordinatorNotAvailable),
        "the group's coordinator is being elected",
    );
    let CoordinatorLocation::Node(id) = ctx.broker.groups().locate(key) else {
        return Err(unknown);
    };
    let nodes = ctx.broker.nodes_for_listener(&session.listener().name);
    if nodes.is_empty() {
        return Ok(Address {
            node: BrokerId(id),
            host: wire_str(session.listener().advertised_host.clone()),
            port: i32::from(session.listener().advertised_port),
        });
    }
    nodes
        .into_iter()
        .find(|n| n.id == id)
        .map(|n| Address {
            node: BrokerId(id),
            host: wire_str(n.host),
            port: i32::from(n.port),
        })
        .ok_or(unknown)
}

fn coordinator(key: StrBytes, found: Result<Address, (i16, &str)>) -> Coordinator {
    let coordinator = Coordinator::default().with_key(key);
    match found {
        Ok(address) => coordinator
            .with_node_id(address.node)
            .with_host(address.host)
            .with_port(address.port),
        Err((code, message)) => coordinator
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
