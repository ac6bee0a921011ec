//! Topic administration: Metadata, CreateTopics, DeleteTopics,
//! CreatePartitions, DescribeConfigs and IncrementalAlterConfigs.

use crate::error::{ClientError, Context as _};
use kafka_protocol::messages::{
    create_partitions_request, create_topics_request, delete_topics_request,
    describe_configs_request, incremental_alter_configs_request, metadata_request,
    CreatePartitionsRequest, CreateTopicsRequest, DeleteTopicsRequest, DescribeConfigsRequest,
    IncrementalAlterConfigsRequest, MetadataRequest,
};

use crate::connection::{versions, IO_TIMEOUT};
use crate::errors::{check, UNKNOWN_TOPIC_OR_PARTITION};
use crate::{topic_name, wire_str, Connection};

/// Kafka's resource type for topics in config APIs.
const RESOURCE_TOPIC: i8 = 2;
/// Broker-side timeout asked for admin operations.
const OPERATION_TIMEOUT_MS: i32 = 10_000;

/// A topic as Metadata describes it.
#[derive(Debug, Clone)]
pub struct TopicInfo {
    /// Name.
    pub name: String,
    /// Topic id.
    pub id: String,
    /// Partition indexes with their leader.
    pub partitions: Vec<(i32, i32)>,
}

/// One config entry of a topic.
#[derive(Debug, Clone)]
pub struct ConfigValue {
    /// Kafka's config name.
    pub name: String,
    /// Value (`None` if sensitive or unset).
    pub value: Option<String>,
    /// True if set on the topic rather than a default.
    pub is_override: bool,
    /// True if it cannot be altered.
    pub read_only: bool,
}

/// A change to one config key.
#[derive(Debug, Clone)]
pub enum ConfigChange {
    /// Set the key to a value.
    Set(String, String),
    /// Remove the override (back to the default).
    Delete(String),
}

/// Metadata of `topics` (all topics if `None`). With `auto_create`, the
/// broker may create a missing topic (as producers ask); without it, a
/// missing topic is an "unknown topic" error.
pub async fn metadata(
    connection: &mut Connection,
    topics: Option<&[&str]>,
    auto_create: bool,
) -> Result<Vec<TopicInfo>, ClientError> {
    let request = MetadataRequest::default()
        .with_topics(topics.map(|names| {
            names
                .iter()
                .map(|n| {
                    metadata_request::MetadataRequestTopic::default().with_name(Some(topic_name(n)))
                })
                .collect()
        }))
        .with_allow_auto_topic_creation(auto_create);
    let response = connection
        .call(request, versions::METADATA, IO_TIMEOUT)
        .await?;
    let mut out = Vec::with_capacity(response.topics.len());
    for topic in response.topics {
        let topic_name = topic.name.map(|n| n.0.to_string()).unwrap_or_default();
        if topic.error_code == UNKNOWN_TOPIC_OR_PARTITION {
            return Err(ClientError::refused(format!(
                "unknown topic '{topic_name}'"
            )));
        }
        check(topic.error_code, None, &format!("topic '{topic_name}'"))?;
        let mut partitions: Vec<(i32, i32)> = topic
            .partitions
            .iter()
            .map(|p| (p.partition_index, p.leader_id.0))
            .collect();
        partitions.sort_unstable();
        out.push(TopicInfo {
            name: topic_name,
            id: topic.topic_id.to_string(),
            partitions,
        });
    }
    out.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(out)
}

/// Metadata of one existing topic.
pub async fn topic(connection: &mut Connection, topic: &str) -> Result<TopicInfo, ClientError> {
    metadata(connection, Some(&[topic]), false)
        .await?
        .into_iter()
        .next()
        .with_context(|| format!("unknown topic '{topic}'"))
}

/// Creates `topic` with `partitions` (broker default if `None`) and configs.
pub async fn create_topic(
    connection: &mut Connection,
    topic: &str,
    partitions: Option<i32>,
    configs: &[(String, String)],
) -> Result<i32, ClientError> {
    let request = CreateTopicsRequest::default()
        .with_timeout_ms(OPERATION_TIMEOUT_MS)
        .with_topics(vec![create_topics_request::CreatableTopic::default()
            .with_name(topic_name(topic))
            .with_num_partitions(partitions.unwrap_or(-1))
            .with_replication_factor(-1)
            .with_configs(
                configs
                    .iter()
                    .map(|(k, v)| {
                        create_topics_request::CreatableTopicConfig::default()
                            .with_name(wire_str(k))
                            .with_value(Some(wire_str(v)))
                    })
                    .collect(),
            )]);
    let response = connection
        .call(request, versions::CREATE_TOPICS, IO_TIMEOUT)
        .await?;
    let result = response
        .topics
        .into_iter()
        .next()
        .context("CreateTopics answered no topic")?;
    check(
        result.error_code,
        result.error_message.as_ref(),
        &format!("cannot create topic '{topic}'"),
    )?;
    Ok(result.num_partitions)
}

/// Deletes `topic`.
pub async fn delete_topic(connection: &mut Connection, topic: &str) -> Result<(), ClientError> {
    let request = DeleteTopicsRequest::default()
        .with_timeout_ms(OPERATION_TIMEOUT_MS)
        .with_topics(vec![
            delete_topics_request::DeleteTopicState::default().with_name(Some(topic_name(topic)))
        ]);
    let response = connection
        .call(request, versions::DELETE_TOPICS, IO_TIMEOUT)
        .await?;
    let result = response
        .responses
        .into_iter()
        .next()
        .context("DeleteTopics answered no topic")?;
    if result.error_code == UNKNOWN_TOPIC_OR_PARTITION {
        return Err(ClientError::refused(format!("unknown topic '{topic}'")));
    }
    check(
        result.error_code,
        result.error_message.as_ref(),
        &format!("cannot delete topic '{topic}'"),
    )
}

/// Raises `topic`'s partition count to `count`.
pub async fn create_partitions(
    connection: &mut Connection,
    topic: &str,
    count: i32,
) -> Result<(), ClientError> {
    let request = CreatePartitionsRequest::default()
        .with_timeout_ms(OPERATION_TIMEOUT_MS)
        .with_topics(vec![
            create_partitions_request::CreatePartitionsTopic::default()
                .with_name(topic_name(topic))
                .with_count(count),
        ]);
    let response = connection
        .call(request, versions::CREATE_PARTITIONS, IO_TIMEOUT)
        .await?;
    let result = response
        .results
        .into_iter()
        .next()
        .context("CreatePartitions answered no topic")?;
    if result.error_code == UNKNOWN_TOPIC_OR_PARTITION {
        return Err(ClientError::refused(format!("unknown topic '{topic}'")));
    }
    check(
        result.error_code,
        result.error_message.as_ref(),
        &format!("cannot set topic '{topic}' to {count} partitions"),
    )
}

/// Every config of `topic`, sorted by name.
pub async fn describe_configs(
    connection: &mut Connection,
    topic: &str,
) -> Result<Vec<ConfigValue>, ClientError> {
    let request = DescribeConfigsRequest::default().with_resources(vec![
        describe_configs_request::DescribeConfigsResource::default()
            .with_resource_type(RESOURCE_TOPIC)
            .with_resource_name(wire_str(topic))
            .with_configuration_keys(None),
    ]);
    let response = connection
        .call(request, versions::DESCRIBE_CONFIGS, IO_TIMEOUT)
        .await?;
    let result = response
        .results
        .into_iter()
        .next()
        .context("DescribeConfigs answered no resource")?;
    if result.error_code == UNKNOWN_TOPIC_OR_PARTITION {
        return Err(ClientError::refused(format!("unknown topic '{topic}'")));
    }
    check(
        result.error_code,
        result.error_message.as_ref(),
        &format!("cannot describe the configs of topic '{topic}'"),
    )?;
    /// Kafka's config source DYNAMIC_TOPIC_CONFIG.
    const SOURCE_TOPIC: i8 = 1;
    let mut configs: Vec<ConfigValue> = result
        .configs
        .into_iter()
        .map(|c| ConfigValue {
            name: c.name.to_string(),
            value: c.value.map(|v| v.to_string()),
            is_override: c.config_source == SOURCE_TOPIC,
            read_only: c.read_only,
        })
        .collect();
    configs.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(configs)
}

/// Applies `changes` to `topic`'s configs.
pub async fn alter_configs(
    connection: &mut Connection,
    topic: &str,
    changes: &[ConfigChange],
) -> Result<(), ClientError> {
    /// IncrementalAlterConfigs operations.
    const OP_SET: i8 = 0;
    const OP_DELETE: i8 = 1;
    let configs = changes
        .iter()
        .map(|change| {
            let config = incremental_alter_configs_request::AlterableConfig::default();
            match change {
                ConfigChange::Set(key, value) => config
                    .with_name(wire_str(key))
                    .with_config_operation(OP_SET)
                    .with_value(Some(wire_str(value))),
                ConfigChange::Delete(key) => config
                    .with_name(wire_str(key))
                    .with_config_operation(OP_DELETE)
                    .with_value(None),
            }
        })
        .collect();
    let request = IncrementalAlterConfigsRequest::default().with_resources(vec![
        incremental_alter_configs_request::AlterConfigsResource::default()
            .with_resource_type(RESOURCE_TOPIC)
            .with_resource_name(wire_str(topic))
            .with_configs(configs),
    ]);
    let response = connection
        .call(request, versions::INCREMENTAL_ALTER_CONFIGS, IO_TIMEOUT)
        .await?;
    let result = response
        .responses
        .into_iter()
        .next()
        .context("IncrementalAlterConfigs answered no resource")?;
    if result.error_code == UNKNOWN_TOPIC_OR_PARTITION {
        return Err(ClientError::refused(format!("unknown topic '{topic}'")));
    }
    check(
        result.error_code,
        result.error_message.as_ref(),
        &format!("cannot alter the configs of topic '{topic}'"),
    )
}
