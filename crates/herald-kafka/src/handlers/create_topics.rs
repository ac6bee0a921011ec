//! CreateTopics: partitions, configs, validate-only. One node means a
//! replication factor of 1 (or -1 for the default) and assignments that
//! name only this node.

use herald_broker::{BrokerError, TopicSummary};
use kafka_protocol::messages::create_topics_request::CreatableTopic;
use kafka_protocol::messages::create_topics_response::{
    CreatableTopicConfigs, CreatableTopicResult,
};
use kafka_protocol::messages::{CreateTopicsRequest, CreateTopicsResponse};
use kafka_protocol::ResponseError;

use super::describe_configs::source_code;
use super::{cluster_allowed, topic_allowed, wire_str, Context};
use crate::error_code;
use crate::quota::Mutations;
use crate::session::Session;
use herald_auth::Operation;

/// Answers a CreateTopics request.
pub async fn handle(
    ctx: &Context,
    session: &Session,
    request: CreateTopicsRequest,
    version: i16,
    client_id: String,
) -> CreateTopicsResponse {
    let mutations = Mutations::new(ctx, session, client_id, version >= 6);
    // CREATE on the cluster covers every topic; else each needs its own.
    let on_cluster = cluster_allowed(ctx, session, Operation::Create);
    let validate_only = request.validate_only;
    let mut seen = std::collections::HashSet::new();
    let duplicates: std::collections::HashSet<String> = request
        .topics
        .iter()
        .filter(|t| !seen.insert(t.name.0.to_string()))
        .map(|t| t.name.0.to_string())
        .collect();
    let mut topics = Vec::with_capacity(request.topics.len());
    for t in request.topics {
        let answer = if duplicates.contains(&*t.name.0) {
            let message = "the topic appears more than once in the request".to_owned();
            failed(t, error_code::code(ResponseError::InvalidRequest), message)
        } else if !on_cluster && !topic_allowed(ctx, session, Operation::Create, &t.name.0) {
            let message = "not authorized to create this topic".to_owned();
            failed(
                t,
                error_code::code(ResponseError::TopicAuthorizationFailed),
                message,
            )
        } else {
            create(ctx, t, validate_only, version, &mutations).await
        };
        topics.push(answer);
    }
    CreateTopicsResponse::default()
        .with_topics(topics)
        .with_throttle_time_ms(mutations.throttle_time_ms())
}

async fn create(
    ctx: &Context,
    t: CreatableTopic,
    validate_only: bool,
    version: i16,
    mutations: &Mutations<'_>,
) -> CreatableTopicResult {
    let node = ctx.broker.node_id();
    if !ctx.broker.clustered()
        && !matches!(t.replication_factor, -1 | 1)
        && t.assignments.is_empty()
    {
        let message = format!(
            "replication factor {} is larger than the 1 available broker",
            t.replication_factor
        );
        return failed(
            t,
            error_code::code(ResponseError::InvalidReplicationFactor),
            message,
        );
    }
    let partitions = if t.assignments.is_empty() {
        match t.num_partitions {
            -1 => None,
            n => match u32::try_from(n) {
                Ok(n) => Some(n),
                Err(_) => {
                    let message = format!("invalid partition count {n}");
                    return failed(
                        t,
                        error_code::code(ResponseError::InvalidPartitions),
                        message,
                    );
                }
            },
        }
    } else {
        if t.assignments
            .iter()
            .any(|a| a.broker_ids.iter().any(|b| b.0 != node) || a.broker_ids.is_empty())
        {
            let message = format!("assignments may only name broker {node}");
            return failed(
                t,
                error_code::code(ResponseError::InvalidReplicaAssignment),
                message,
            );
        }
        Some(t.assignments.len() as u32)
    };
    let configs: Vec<(String, String)> = t
        .configs
        .iter()
        .filter_map(|c| {
            c.value
                .as_ref()
                .map(|v| (c.name.to_string(), v.to_string()))
        })
        .collect();
    if !validate_only {
        let count = partitions.unwrap_or(ctx.broker.config().default_partitions);
        if let Err(message) = mutations.admit(count.into()) {
            return failed(
                t,
                error_code::code(ResponseError::ThrottlingQuotaExceeded),
                message,
            );
        }
    }
    let outcome = match replicated(ctx, &t, partitions, &configs, validate_only).await {
        Some(outcome) => outcome,
        None => ctx
            .broker
            .create_topic(&t.name.0, partitions, &configs, validate_only),
    };
    match outcome {
        Ok(summary) => created(ctx, t, summary, version),
        Err(e) => {
            if !matches!(e, BrokerError::TopicExists { .. }) {
                tracing::info!(topic = &*t.name.0, error = %e, "create topic refused");
            }
            let message = e.to_string();
            failed(t, error_code::broker(&e), message)
        }
    }
}

/// Creates the topic through the cluster's metadata, in a cluster; `None`
/// when this node is not one of a cluster.
async fn replicated(
    ctx: &Context,
    t: &CreatableTopic,
    partitions: Option<u32>,
    configs: &[(String, String)],
    validate_only: bool,
) -> Option<Result<TopicSummary, BrokerError>> {
    #[cfg(feature = "cluster")]
    if let Some(cluster) = ctx.broker.cluster() {
        if !t.assignments.is_empty() {
            return Some(Err(BrokerError::NotInCluster("manual replica assignment")));
        }
        return Some(
            cluster
                .create_topic(
                    &ctx.broker,
                    &t.name.0,
                    partitions,
                    t.replication_factor,
                    configs,
                    validate_only,
                )
                .await,
        );
    }
    let _ = (ctx, t, partitions, configs, validate_only);
    None
}

fn created(
    ctx: &Context,
    t: CreatableTopic,
    summary: TopicSummary,
    version: i16,
) -> CreatableTopicResult {
    let result = CreatableTopicResult::default()
        .with_name(t.name)
        .with_topic_id(summary.id)
        .with_num_partitions(summary.partitions as i32)
        .with_replication_factor(1);
    if version < 5 {
        return result;
    }
    let configs = summary
        .config
        .describe(&ctx.broker.config().log_defaults)
        .into_iter()
        .map(|e| {
            CreatableTopicConfigs::default()
                .with_name(wire_str(e.name))
                .with_value(e.value.map(wire_str))
                .with_read_only(e.read_only)
                .with_config_source(source_code(e.source))
        })
        .collect();
    result.with_configs(Some(configs))
}

fn failed(t: CreatableTopic, code: i16, message: String) -> CreatableTopicResult {
    CreatableTopicResult::default()
        .with_name(t.name)
        .with_error_code(code)
        .with_error_message(Some(wire_str(message)))
        .with_num_partitions(-1)
        .with_replication_factor(-1)
}

/// How the guard walks this API's request body before `kafka-protocol`
/// decodes it, transcribed from Kafka's message definition (the registry's
/// tests check it consumes exactly the bytes of every served version).
pub(crate) mod layout {
    use crate::codec::guard::Ty::*;
    use crate::codec::guard::{all, Field, Schema};

    const CREATABLE_ASSIGNMENT: &[Field] = &[all(I32), all(I32Array)];
    const CREATABLE_CONFIG: &[Field] = &[all(Str), all(Str)];
    const CREATABLE_TOPIC: &[Field] = &[
        all(Str),
        all(I32),
        all(I16),
        all(Array(CREATABLE_ASSIGNMENT)),
        all(Array(CREATABLE_CONFIG)),
    ];
    pub(crate) const SCHEMA: Schema = Schema {
        flexible_from: 5,
        fields: &[all(Array(CREATABLE_TOPIC)), all(I32), all(Bool)],
    };
}
