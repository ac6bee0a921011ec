//! DescribeCluster: this node as the only broker and the controller.

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
    let node = BrokerId(ctx.broker.node_id());
    let response = DescribeClusterResponse::default()
        .with_cluster_id(wire_str(ctx.broker.cluster_id()))
        .with_controller_id(node);
    if version >= 1 && request.endpoint_type != ENDPOINT_BROKERS {
        return response
            .with_error_code(error_code::code(ResponseError::UnsupportedEndpointType))
            .with_error_message(Some(wire_str("only broker endpoints exist")))
            .with_endpoint_type(request.endpoint_type);
    }
    response.with_brokers(vec![DescribeClusterBroker::default()
        .with_broker_id(node)
        .with_host(wire_str(session.listener().advertised_host.clone()))
        .with_port(i32::from(session.listener().advertised_port))])
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
