//! Topic setup for a run: one topic with one partition, created with a
//! `max.message.bytes` large enough for 16384-record batches, deleted after.

use std::net::SocketAddr;
use std::time::Duration;

use kafka_protocol::messages::create_topics_request::{CreatableTopic, CreatableTopicConfig};
use kafka_protocol::messages::{
    ApiKey, CreateTopicsRequest, CreateTopicsResponse, DeleteTopicsRequest, DeleteTopicsResponse,
    TopicName,
};
use kafka_protocol::protocol::StrBytes;

use crate::conn::Conn;
use crate::LoadError;

const CREATE_TOPICS_VERSION: i16 = 5;
const DELETE_TOPICS_VERSION: i16 = 4;
/// Kafka's TOPIC_ALREADY_EXISTS.
const TOPIC_ALREADY_EXISTS: i16 = 36;
/// Kafka's UNKNOWN_TOPIC_OR_PARTITION.
const UNKNOWN_TOPIC: i16 = 3;
/// Large enough for a 16384-record batch of 64-byte values (about 1.2 MB).
pub const MAX_MESSAGE_BYTES: &str = "8388608";

/// Creates `topic` with one partition; an existing topic is kept.
pub async fn create_topic(addr: SocketAddr, topic: &str) -> Result<(), LoadError> {
    let mut conn = Conn::connect(addr, "herald-loadgen-admin").await?;
    let config = CreatableTopicConfig::default()
        .with_name(StrBytes::from_static_str("max.message.bytes"))
        .with_value(Some(StrBytes::from_static_str(MAX_MESSAGE_BYTES)));
    let request = CreateTopicsRequest::default()
        .with_timeout_ms(30_000)
        .with_topics(vec![CreatableTopic::default()
            .with_name(topic_name(topic))
            .with_num_partitions(1)
            .with_replication_factor(1)
            .with_configs(vec![config])]);
    let response: CreateTopicsResponse = conn
        .call(ApiKey::CreateTopics, CREATE_TOPICS_VERSION, &request)
        .await?;
    for result in &response.topics {
        if result.error_code != 0 && result.error_code != TOPIC_ALREADY_EXISTS {
            return Err(LoadError::Broker {
                api: "CreateTopics",
                code: result.error_code,
            });
        }
    }
    // Kafka answers once the controller committed the topic; its partition
    // may take a moment more to get a leader. Produce retries cover that.
    tokio::time::sleep(Duration::from_millis(200)).await;
    Ok(())
}

/// Deletes `topic`; a missing topic is not an error.
pub async fn delete_topic(addr: SocketAddr, topic: &str) -> Result<(), LoadError> {
    let mut conn = Conn::connect(addr, "herald-loadgen-admin").await?;
    let request = DeleteTopicsRequest::default()
        .with_timeout_ms(30_000)
        .with_topic_names(vec![topic_name(topic)]);
    let response: DeleteTopicsResponse = conn
        .call(ApiKey::DeleteTopics, DELETE_TOPICS_VERSION, &request)
        .await?;
    for result in &response.responses {
        if result.error_code != 0 && result.error_code != UNKNOWN_TOPIC {
            return Err(LoadError::Broker {
                api: "DeleteTopics",
                code: result.error_code,
            });
        }
    }
    Ok(())
}

/// A topic name for the codec.
pub fn topic_name(topic: &str) -> TopicName {
    TopicName(StrBytes::from_string(topic.to_owned()))
}
