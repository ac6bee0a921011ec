//! DescribeConfigs: topic configs (overrides and defaults) and the broker's
//! static settings under the names Kafka tools expect. Also holds the
//! config-related wire constants the other config handlers share.

use herald_broker::FlushPolicy;
use herald_broker::{ConfigEntry, ConfigSource, ConfigType};
use kafka_protocol::messages::describe_configs_response::{
    DescribeConfigsResourceResult, DescribeConfigsResult,
};
use kafka_protocol::messages::{DescribeConfigsRequest, DescribeConfigsResponse};
use kafka_protocol::ResponseError;

use super::{cluster_allowed, topic_allowed, wire_str, Context};
use crate::error_code;
use crate::session::Session;
use herald_auth::Operation;

/// `ConfigResource.Type.TOPIC`.
pub(crate) const RESOURCE_TOPIC: i8 = 2;
/// `ConfigResource.Type.BROKER`.
pub(crate) const RESOURCE_BROKER: i8 = 4;

/// Kafka's `ConfigSource` code.
pub(crate) fn source_code(source: ConfigSource) -> i8 {
    match source {
        ConfigSource::TopicOverride => 1,
        // DYNAMIC_DEFAULT_BROKER_CONFIG: a default set at run time above
        // the topic, which is what a namespace's config is.
        ConfigSource::Namespace => 3,
        ConfigSource::Static => 4,
        ConfigSource::Default => 5,
    }
}

/// Kafka's `ConfigType` code.
pub(crate) fn type_code(t: ConfigType) -> i8 {
    match t {
        ConfigType::Boolean => 1,
        ConfigType::String => 2,
        ConfigType::Int => 3,
        ConfigType::Long => 5,
        ConfigType::List => 7,
    }
}

/// Answers a DescribeConfigs request.
pub fn handle(
    ctx: &Context,
    session: &Session,
    request: DescribeConfigsRequest,
    version: i16,
) -> DescribeConfigsResponse {
    let results = request
        .resources
        .into_iter()
        .map(|r| {
            let result = DescribeConfigsResult::default()
                .with_resource_type(r.resource_type)
                .with_resource_name(r.resource_name.clone());
            let refused = |error: ResponseError, what: &str| {
                DescribeConfigsResult::default()
                    .with_resource_type(r.resource_type)
                    .with_resource_name(r.resource_name.clone())
                    .with_error_code(error_code::code(error))
                    .with_error_message(Some(wire_str(format!(
                        "not authorized to describe the configs of this {what}"
                    ))))
            };
            let entries = match r.resource_type {
                RESOURCE_TOPIC
                    if !topic_allowed(
                        ctx,
                        session,
                        Operation::DescribeConfigs,
                        &r.resource_name,
                    ) =>
                {
                    return refused(ResponseError::TopicAuthorizationFailed, "topic");
                }
                RESOURCE_BROKER if !cluster_allowed(ctx, session, Operation::DescribeConfigs) => {
                    return refused(ResponseError::ClusterAuthorizationFailed, "broker");
                }
                RESOURCE_TOPIC => match ctx.broker.topic(&r.resource_name) {
                    Some(topic) => topic.config().describe(&ctx.broker.config().log_defaults),
                    None => {
                        return result
                            .with_error_code(error_code::code(
                                ResponseError::UnknownTopicOrPartition,
                            ))
                            .with_error_message(Some(wire_str(format!(
                                "unknown topic {}",
                                &*r.resource_name
                            ))));
                    }
                },
                RESOURCE_BROKER if is_this_broker(ctx, &r.resource_name) => broker_entries(ctx),
                RESOURCE_BROKER => {
                    return result
                        .with_error_code(error_code::code(ResponseError::InvalidRequest))
                        .with_error_message(Some(wire_str(format!(
                            "unknown broker {}",
                            &*r.resource_name
                        ))));
                }
                other => {
                    return result
                        .with_error_code(error_code::code(ResponseError::InvalidRequest))
                        .with_error_message(Some(wire_str(format!(
                            "resource type {other} is not supported"
                        ))));
                }
            };
            let keys = r
                .configuration_keys
                .map(|k| k.into_iter().map(|s| s.to_string()).collect::<Vec<_>>());
            let configs = entries
                .into_iter()
                .filter(|e| keys.as_ref().is_none_or(|k| k.contains(&e.name)))
                .map(|e| wire_entry(e, version, request.include_documentation))
                .collect();
            result.with_configs(configs)
        })
        .collect();
    DescribeConfigsResponse::default().with_results(results)
}

/// An empty name means the cluster-wide default, which on one node is the
/// node's own configuration.
fn is_this_broker(ctx: &Context, name: &str) -> bool {
    name.is_empty()
        || name
            .parse::<i32>()
            .is_ok_and(|id| id == ctx.broker.node_id())
}

fn wire_entry(e: ConfigEntry, version: i16, documentation: bool) -> DescribeConfigsResourceResult {
    let result = DescribeConfigsResourceResult::default()
        .with_name(wire_str(e.name))
        .with_value(e.value.map(wire_str))
        .with_read_only(e.read_only)
        .with_config_source(source_code(e.source))
        .with_is_sensitive(false);
    if version >= 3 {
        let doc = documentation.then(|| wire_str(e.documentation));
        result
            .with_config_type(type_code(e.config_type))
            .with_documentation(doc)
    } else {
        result
    }
}

/// The node's settings, read-only, under Kafka's broker config names.
pub(crate) fn broker_entries(ctx: &Context) -> Vec<ConfigEntry> {
    let config = ctx.broker.config();
    let log = &config.log_defaults;
    let listener = ctx
        .config
        .listeners
        .iter()
        .map(|l| format!("{}://{}", l.name, l.listen))
        .collect::<Vec<_>>()
        .join(",");
    let advertised = ctx
        .config
        .listeners
        .iter()
        .map(|l| format!("{}://{}:{}", l.name, l.advertised_host, l.advertised_port))
        .collect::<Vec<_>>()
        .join(",");
    let protocols = ctx
        .config
        .listeners
        .iter()
        .map(|l| format!("{}:{}", l.name, l.protocol))
        .collect::<Vec<_>>()
        .join(",");
    let (flush_messages, flush_ms) = match log.flush {
        FlushPolicy::EveryAppend => ("1".to_owned(), "-1".to_owned()),
        FlushPolicy::Interval(every) => (i64::MAX.to_string(), every.as_millis().to_string()),
        FlushPolicy::Never => (i64::MAX.to_string(), "-1".to_owned()),
    };
    let millis =
        |d: Option<std::time::Duration>| d.map_or("-1".to_owned(), |d| d.as_millis().to_string());
    let entry = |name: &str, value: String, config_type, documentation| ConfigEntry {
        name: name.to_owned(),
        value: Some(value),
        source: ConfigSource::Static,
        read_only: true,
        config_type,
        documentation,
    };
    vec![
        entry(
            "node.id",
            config.node_id.to_string(),
            ConfigType::Int,
            "This node's id.",
        ),
        entry(
            "broker.id",
            config.node_id.to_string(),
            ConfigType::Int,
            "This node's id.",
        ),
        entry(
            "listeners",
            listener,
            ConfigType::List,
            "Addresses the Kafka listeners bind, by listener name.",
        ),
        entry(
            "listener.security.protocol.map",
            protocols,
            ConfigType::List,
            "Each listener's security protocol.",
        ),
        entry(
            "advertised.listeners",
            advertised,
            ConfigType::List,
            "Address clients are told to use.",
        ),
        entry(
            "log.dirs",
            config.data_dir.display().to_string(),
            ConfigType::List,
            "The data directory.",
        ),
        entry(
            "num.partitions",
            config.default_partitions.to_string(),
            ConfigType::Int,
            "Partitions of new topics.",
        ),
        entry(
            "auto.create.topics.enable",
            config.auto_create_topics.to_string(),
            ConfigType::Boolean,
            "Create unknown topics on metadata requests.",
        ),
        entry(
            "default.replication.factor",
            "1".into(),
            ConfigType::Int,
            "A single node keeps one replica.",
        ),
        entry(
            "min.insync.replicas",
            "1".into(),
            ConfigType::Int,
            "A single node is its own in-sync set.",
        ),
        entry(
            "log.cleanup.policy",
            "delete".into(),
            ConfigType::List,
            "Only delete is supported.",
        ),
        entry(
            "log.retention.ms",
            millis(log.retention_age),
            ConfigType::Long,
            "Default retention time.",
        ),
        entry(
            "log.retention.bytes",
            log.retention_bytes
                .map_or("-1".to_owned(), |b| b.to_string()),
            ConfigType::Long,
            "Default retention size per partition.",
        ),
        entry(
            "log.segment.bytes",
            log.segment_bytes.to_string(),
            ConfigType::Int,
            "Default segment size.",
        ),
        entry(
            "log.roll.ms",
            millis(log.segment_age),
            ConfigType::Long,
            "Default segment age before a roll.",
        ),
        entry(
            "message.max.bytes",
            log.max_batch_bytes.to_string(),
            ConfigType::Int,
            "Default largest batch.",
        ),
        entry(
            "log.flush.interval.messages",
            flush_messages,
            ConfigType::Long,
            "1 means fsync every append.",
        ),
        entry(
            "log.flush.interval.ms",
            flush_ms,
            ConfigType::Long,
            "Interval between fsyncs, if any.",
        ),
        entry(
            "compression.type",
            "producer".into(),
            ConfigType::String,
            "Batches are stored as produced.",
        ),
        entry(
            "socket.request.max.bytes",
            ctx.config.max_frame_bytes.to_string(),
            ConfigType::Int,
            "Largest request frame.",
        ),
        entry(
            "max.connections",
            ctx.config.max_connections.to_string(),
            ConfigType::Int,
            "Connection limit.",
        ),
    ]
}

/// How the guard walks this API's request body before `kafka-protocol`
/// decodes it, transcribed from Kafka's message definition (the registry's
/// tests check it consumes exactly the bytes of every served version).
pub(crate) mod layout {
    use crate::codec::guard::Ty::*;
    use crate::codec::guard::{all, since, Field, Schema};

    const DESCRIBE_CONFIGS_RESOURCE: &[Field] = &[all(I8), all(Str), all(StrArray)];
    pub(crate) const SCHEMA: Schema = Schema {
        flexible_from: 4,
        fields: &[
            all(Array(DESCRIBE_CONFIGS_RESOURCE)),
            all(Bool),
            since(3, Bool),
        ],
    };
}
