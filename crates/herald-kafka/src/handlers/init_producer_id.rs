//! InitProducerId: ids for idempotent producers, and epoch bumps (KIP-360).
//! Transactional ids are refused until the transaction APIs exist. A relay
//! asks its upstream.

use kafka_protocol::messages::{InitProducerIdRequest, InitProducerIdResponse, ProducerId};
use kafka_protocol::ResponseError;

use super::{cluster_allowed, Context};
use crate::error_code;
use crate::session::Session;
use herald_auth::Operation;
use herald_broker::relay::UpstreamError;

/// Answers an InitProducerId request: with an id of this node's, or on a
/// relay with one of its upstream's.
pub async fn handle(
    ctx: &Context,
    session: &Session,
    request: InitProducerIdRequest,
    _version: i16,
) -> InitProducerIdResponse {
    let failed = |code: i16| {
        InitProducerIdResponse::default()
            .with_error_code(code)
            .with_producer_id(ProducerId(-1))
            .with_producer_epoch(-1)
    };
    if request
        .transactional_id
        .as_ref()
        .is_some_and(|id| !id.0.is_empty())
    {
        tracing::info!(
            "InitProducerId with a transactional id refused: transactions are not supported"
        );
        return failed(error_code::code(ResponseError::InvalidRequest));
    }
    // An idempotent producer needs IDEMPOTENT_WRITE on the cluster, or
    // WRITE on some topic (Kafka since KIP-679).
    let security = ctx.broker.security();
    if !cluster_allowed(ctx, session, Operation::IdempotentWrite)
        && !session.authorize_any(security, Operation::Write, herald_auth::ResourceType::Topic)
    {
        return failed(error_code::code(ResponseError::ClusterAuthorizationFailed));
    }
    let current =
        (request.producer_id.0 >= 0).then_some((request.producer_id.0, request.producer_epoch));
    let issued = match &ctx.broker.config().relay {
        // A relay's producers write through to its upstream, whose leaders
        // judge their batches: the id must be the upstream's.
        Some(relay) => relay
            .upstream()
            .init_producer_id(current)
            .await
            .map_err(|e| {
                tracing::warn!(error = %e, "the relay could not get a producer id from its upstream");
                match e {
                    UpstreamError::Refused(code) => code,
                    // The client asks again after its backoff.
                    UpstreamError::Unreachable(_) => {
                        error_code::code(ResponseError::CoordinatorLoadInProgress)
                    }
                }
            }),
        None => ctx.broker.init_producer_id(current).map_err(|e| {
            tracing::warn!(error = %e, "InitProducerId failed");
            error_code::broker(&e)
        }),
    };
    match issued {
        Ok((id, epoch)) => InitProducerIdResponse::default()
            .with_producer_id(ProducerId(id))
            .with_producer_epoch(epoch),
        Err(code) => failed(code),
    }
}

/// How the guard walks this API's request body before `kafka-protocol`
/// decodes it, transcribed from Kafka's message definition (the registry's
/// tests check it consumes exactly the bytes of every served version).
pub(crate) mod layout {
    use crate::codec::guard::Ty::*;
    use crate::codec::guard::{all, since, Schema};

    pub(crate) const SCHEMA: Schema = Schema {
        flexible_from: 2,
        fields: &[all(Str), all(I32), since(3, I64), since(3, I16)],
    };
}
