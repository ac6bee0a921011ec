//! Topic setup for a run, through herald's Kafka client (`herald-client`):
//! one topic with one partition, created with a `max.message.bytes` large
//! enough for 16384-record batches, deleted after.

use std::net::SocketAddr;
use std::time::Duration;

use herald_client::{admin, ClientError, Connection};
use kafka_protocol::messages::TopicName;
use kafka_protocol::protocol::StrBytes;

use crate::LoadError;

/// Kafka's TOPIC_ALREADY_EXISTS.
const TOPIC_ALREADY_EXISTS: i16 = 36;
/// Large enough for a 16384-record batch of 64-byte values (about 1.2 MB).
pub const MAX_MESSAGE_BYTES: &str = "8388608";

/// Creates `topic` with one partition; an existing topic is kept.
pub async fn create_topic(addr: SocketAddr, topic: &str) -> Result<(), LoadError> {
    let mut connection = Connection::connect(&addr.to_string()).await?;
    let configs = [("max.message.bytes".to_owned(), MAX_MESSAGE_BYTES.to_owned())];
    match admin::create_topic(&mut connection, topic, Some(1), &configs).await {
        Ok(_) => {}
        Err(ClientError::Broker {
            code: TOPIC_ALREADY_EXISTS,
            ..
        }) => {}
        Err(e) => return Err(e.into()),
    }
    // Kafka answers once the controller committed the topic; its partition
    // may take a moment more to get a leader. Produce retries cover that.
    tokio::time::sleep(Duration::from_millis(200)).await;
    Ok(())
}

/// Deletes `topic`; a missing topic is not an error.
pub async fn delete_topic(addr: SocketAddr, topic: &str) -> Result<(), LoadError> {
    let mut connection = Connection::connect(&addr.to_string()).await?;
    match admin::delete_topic(&mut connection, topic).await {
        Ok(()) | Err(ClientError::Refused(_)) => Ok(()),
        Err(e) => Err(e.into()),
    }
}

/// A topic name for the codec.
pub fn topic_name(topic: &str) -> TopicName {
    TopicName(StrBytes::from_string(topic.to_owned()))
}
