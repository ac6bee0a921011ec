//! DescribeCluster: every node of the cluster (this one alone when it is
//! not one of a cluster) and the controller.

use kafka_protocol::messages::describe_cluster_response::DescribeClusterBroker;
use kafka_protocol::messages::{BrokerId, DescribeClusterRequest, DescribeClusterResponse};
use kafka_protocol::ResponseError;

use super::{wire_str, Context};
use crate::error_code;
use crate::session::Session;

/// `endpoint_type` for brokers (the only kind herald has).
const ENDPOINT_BROKERS: i8 = 1;

/// Answers a DescribeCluster request.
pub fn handle(
    ctx: &Context,
    session: &Session,
    request: DescribeClusterRequest,
    version: i16,
) -> DescribeClusterResponse {
    let response = DescribeClusterResponse::default()
        .with_cluster_id(wire_str(ctx.broker.cluster_id()))
        .with_controller_id(BrokerId(ctx.broker.controller_id()));
    if version >= 1 && request.endpoint_type != ENDPOINT_BROKERS {
        return response
            .with_error_code(error_code::code(ResponseError::UnsupportedEndpointType))
            .with_error_message(Some(wire_str("only broker endpoints exist")))
            .with_endpoint_type(request.endpoint_type);
    }
    let brokers = super::metadata::brokers(ctx, session)
        .into_iter()
        .map(|b| {
            DescribeClusterBroker::default()
                .with_broker_id(b.node_id)
                .with_host(b.host)
                .with_port(b.port)
        })
        .collect();
    response.with_brokers(brokers)
}

/// How the guard walks this API's request body before `kafka-protocol`
/// decodes it, transcribed from Kafka's message definition (the registry's
/// tests check it consumes exactly the bytes of every served version).
pub(crate) mod layout {
    use crate::codec::guard::Ty::*;
    use crate::codec::guard::{all, since, Schema};

    pub(crate) const SCHEMA: Schema = Schema {
        flexible_from: 0,
        fields: &[all(Bool), since(1, I8), since(2, Bool)],
    };
}
