//! RemoveRaftVoter: removes a node from a running cluster (what
//! `herald cluster remove-node` sends; Kafka's `Admin.removeRaftVoter`).
//! Refused (INVALID_REQUEST) while the node holds a replica of any
//! partition, VOTER_NOT_FOUND for a node the cluster does not have. The
//! answer comes once no node lists it; the node is then stopped.

use std::time::Duration;

use kafka_protocol::messages::{RemoveRaftVoterRequest, RemoveRaftVoterResponse};
use kafka_protocol::ResponseError;

use super::{wire_str, Context};
use crate::error_code;
use crate::session::Session;

/// How long the removal may take before REQUEST_TIMED_OUT (it goes on).
const PATIENCE: Duration = Duration::from_secs(30);

/// Answers a RemoveRaftVoter request.
pub async fn handle(
    ctx: &Context,
    session: &Session,
    request: RemoveRaftVoterRequest,
    _version: i16,
) -> RemoveRaftVoterResponse {
    let refuse = |error: ResponseError, message: String| {
        RemoveRaftVoterResponse::default()
            .with_error_code(error_code::code(error))
            .with_error_message(Some(wire_str(message)))
    };
    if let Some((error, message)) = super::add_raft_voter::voter_change_refusal(
        ctx,
        session,
        request.cluster_id.as_ref(),
        "remove",
    ) {
        return refuse(error, message);
    }
    let Ok(node_id) = u64::try_from(request.voter_id) else {
        return refuse(
            ResponseError::VoterNotFound,
            format!("no node has id {}", request.voter_id),
        );
    };
    #[cfg(feature = "cluster")]
    if let Some(cluster) = ctx.broker.cluster() {
        return match cluster.remove_node(&ctx.broker, node_id, PATIENCE).await {
            Ok(()) => RemoveRaftVoterResponse::default(),
            Err(e) => RemoveRaftVoterResponse::default()
                .with_error_code(error_code::broker(&e))
                .with_error_message(Some(wire_str(e.to_string()))),
        };
    }
    let _ = (node_id, PATIENCE);
    refuse(
        ResponseError::InvalidRequest,
        "this node is not part of a cluster".to_owned(),
    )
}

/// How the guard walks this API's request body before `kafka-protocol`
/// decodes it, transcribed from Kafka's message definition (the registry's
/// tests check it consumes exactly the bytes of every served version).
pub(crate) mod layout {
    use crate::codec::guard::Ty::*;
    use crate::codec::guard::{all, Schema};

    pub(crate) const SCHEMA: Schema = Schema {
        flexible_from: 0,
        fields: &[all(Str), all(I32), all(Uuid)],
    };
}
