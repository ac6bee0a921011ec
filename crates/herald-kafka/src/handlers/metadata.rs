//! Metadata: brokers (this node), cluster id, and topics with their ids and
//! partitions; creates requested topics when auto creation is on.

use herald_broker::{BrokerError, Topic, ViewTopic};
use kafka_protocol::messages::metadata_response::{
    MetadataResponseBroker, MetadataResponsePartition, MetadataResponseTopic,
};
use kafka_protocol::messages::{BrokerId, MetadataRequest, MetadataResponse, TopicName};
use kafka_protocol::ResponseError;
use uuid::Uuid;

use super::{cluster_allowed, topic_allowed, wire_str, Context};
use crate::error_code;
use crate::session::Session;
use herald_auth::Operation;

/// Answers a Metadata request.
pub fn handle(
    ctx: &Context,
    session: &Session,
    request: MetadataRequest,
    version: i16,
) -> MetadataResponse {
    let node = BrokerId(ctx.broker.node_id());
    // Before v4 there is no flag and clients rely on the broker's setting.
    let allow_create = version < 4 || request.allow_auto_topic_creation;
    let topics = match request.topics {
        // v0 spells "all topics" as an empty list, later versions as null.
        Some(list) if !(version == 0 && list.is_empty()) => list
            .into_iter()
            .map(|t| match t.name {
                Some(name) => by_name(ctx, session, &name.0, allow_create),
                None => by_id(ctx, session, t.topic_id),
            })
            .collect(),
        // Every topic the client may describe; the others are not named.
        _ => ctx
            .broker
            .topics()
            .iter()
            .filter(|t| topic_allowed(ctx, session, Operation::Describe, t.name()))
            .map(|t| describe(t, node))
            .collect(),
    };
    MetadataResponse::default()
        .with_brokers(brokers(ctx, session))
        .with_cluster_id(Some(wire_str(ctx.broker.cluster_id())))
        .with_controller_id(BrokerId(ctx.broker.controller_id()))
        .with_topics(topics)
}

/// Every broker of the cluster; this one alone, at the listener's
/// advertised address, when it is not one of a cluster.
pub(crate) fn brokers(ctx: &Context, session: &Session) -> Vec<MetadataResponseBroker> {
    let nodes = ctx.broker.nodes_for_listener(&session.listener().name);
    if nodes.is_empty() {
        return vec![MetadataResponseBroker::default()
            .with_node_id(BrokerId(ctx.broker.node_id()))
            .with_host(wire_str(session.listener().advertised_host.clone()))
            .with_port(i32::from(session.listener().advertised_port))];
    }
    nodes
        .into_iter()
        .map(|n| {
            MetadataResponseBroker::default()
                .with_node_id(BrokerId(n.id))
                .with_host(wire_str(n.host))
                .with_port(i32::from(n.port))
        })
        .collect()
}

fn by_name(
    ctx: &Context,
    session: &Session,
    name: &str,
    allow_create: bool,
) -> MetadataResponseTopic {
    let node = BrokerId(ctx.broker.node_id());
    let refused = |error: ResponseError| {
        MetadataResponseTopic::default()
            .with_error_code(error_code::code(error))
            .with_name(Some(TopicName(wire_str(name))))
    };
    if let Some(view) = ctx.broker.snapshots().view(name) {
        // A view is described to whoever may describe its topic.
        if !topic_allowed(ctx, session, Operation::Describe, view.topic().name()) {
            return refused(ResponseError::TopicAuthorizationFailed);
        }
        return describe_view(&view, node);
    }
    // Authorized before its existence is told, as Kafka does.
    if !topic_allowed(ctx, session, Operation::Describe, name) {
        return refused(ResponseError::TopicAuthorizationFailed);
    }
    // Creating it needs CREATE on the cluster or on the topic.
    let allow_create =
        allow_create && ctx.broker.topic(name).is_none() && ctx.broker.config().auto_create_topics;
    if allow_create
        && !cluster_allowed(ctx, session, Operation::Create)
        && !topic_allowed(ctx, session, Operation::Create, name)
    {
        return refused(ResponseError::TopicAuthorizationFailed);
    }
    let found = if allow_create {
        ctx.broker.topic_or_auto_create(name)
    } else {
        ctx.broker
            .topic(name)
            .ok_or_else(|| BrokerError::UnknownTopic {
                name: name.to_owned(),
            })
    };
    match found {
        Ok(topic) => describe(&topic, node),
        Err(e) => {
            if !matches!(e, BrokerError::UnknownTopic { .. }) {
                tracing::warn!(topic = name, error = %e, "auto topic creation failed");
            }
            MetadataResponseTopic::default()
                .with_error_code(error_code::broker(&e))
                .with_name(Some(TopicName(wire_str(name))))
        }
    }
}

fn by_id(ctx: &Context, session: &Session, id: Uuid) -> MetadataResponseTopic {
    match ctx.broker.topic_by_id(id) {
        Some(topic) if !topic_allowed(ctx, session, Operation::Describe, topic.name()) => {
            MetadataResponseTopic::default()
                .with_error_code(error_code::code(ResponseError::TopicAuthorizationFailed))
                .with_topic_id(id)
        }
        Some(topic) => describe(&topic, BrokerId(ctx.broker.node_id())),
        None => match ctx.broker.snapshots().view_by_id(id) {
            Some(view) if topic_allowed(ctx, session, Operation::Describe, view.topic().name()) => {
                describe_view(&view, BrokerId(ctx.broker.node_id()))
            }
            Some(_) => MetadataResponseTopic::default()
                .with_error_code(error_code::code(ResponseError::TopicAuthorizationFailed))
                .with_topic_id(id),
            None => MetadataResponseTopic::default()
                .with_error_code(error_code::code(ResponseError::UnknownTopicId))
                .with_topic_id(id),
        },
    }
}

/// A snapshot's view topic: its partitions, each led by this node (the
/// one that holds the snapshot).
fn describe_view(view: &ViewTopic, node: BrokerId) -> MetadataResponseTopic {
    let partitions = view
        .partitions()
        .iter()
        .map(|p| {
            MetadataResponsePartition::default()
                .with_partition_index(p.index() as i32)
                .with_leader_id(node)
                .with_leader_epoch(0)
                .with_replica_nodes(vec![node])
                .with_isr_nodes(vec![node])
        })
        .collect();
    MetadataResponseTopic::default()
        .with_name(Some(TopicName(wire_str(view.name()))))
        .with_topic_id(view.id())
        .with_partitions(partitions)
}

fn describe(topic: &Topic, node: BrokerId) -> MetadataResponseTopic {
    let partitions = topic
        .partitions()
        .iter()
        .map(|p| {
            let view = p.replica_view(node.0);
            let described = MetadataResponsePartition::default()
                .with_partition_index(p.index() as i32)
                .with_leader_id(BrokerId(view.leader.unwrap_or(-1)))
                .with_leader_epoch(view.leader_epoch)
                .with_replica_nodes(view.replicas.into_iter().map(BrokerId).collect())
                .with_isr_nodes(view.isr.into_iter().map(BrokerId).collect());
            if view.leader.is_none() {
                // An election is under way: the client asks again.
                described.with_error_code(error_code::code(ResponseError::LeaderNotAvailable))
            } else {
                described
            }
        })
        .collect();
    MetadataResponseTopic::default()
        .with_name(Some(TopicName(wire_str(topic.name()))))
        .with_topic_id(topic.id())
        .with_partitions(partitions)
}

/// How the guard walks this API's request body before `kafka-protocol`
/// decodes it, transcribed from Kafka's message definition (the registry's
/// tests check it consumes exactly the bytes of every served version).
pub(crate) mod layout {
    use crate::codec::guard::Ty::*;
    use crate::codec::guard::{all, between, since, Field, Schema};

    const METADATA_TOPIC: &[Field] = &[since(10, Uuid), all(Str)];
    pub(crate) const SCHEMA: Schema = Schema {
        flexible_from: 9,
        fields: &[
            all(Array(METADATA_TOPIC)),
            since(4, Bool),
            between(8, 10, Bool),
            since(8, Bool),
        ],
    };
}
