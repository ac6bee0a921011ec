//! Publishing one record through the push API: encoded as a Kafka batch
//! and appended through the partition contract, exactly as a Kafka
//! producer's record would be.

use herald_auth::acl::CLUSTER_NAME;
use herald_auth::{Operation, ResourceType};

use crate::identity::Identity;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

use herald_broker::ProduceError;
use herald_flow::{OverRate, Verdict};
use herald_records::{BatchBuilder, RecordFields};

use crate::engine::PushEngine;
use crate::error::PublishError;

/// A record to publish.
#[derive(Debug, Clone, Default)]
pub struct PublishRecord {
    /// The topic (created if the broker creates topics on first use).
    pub topic: String,
    /// The subject (`None`: no key).
    pub key: Option<Vec<u8>>,
    /// The value (`None`: a tombstone).
    pub value: Option<Vec<u8>>,
    /// Headers in order.
    pub headers: Vec<(Vec<u8>, Option<Vec<u8>>)>,
    /// The partition; `None`: from the key, as Kafka's default partitioner
    /// chooses, or round robin without a key.
    pub partition: Option<u32>,
    /// Ms since the Unix epoch; `None`: now.
    pub timestamp_ms: Option<i64>,
}

/// Where a record was stored.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Published {
    /// Its partition.
    pub partition: u32,
    /// Its offset.
    pub offset: u64,
}

/// Round-robin position for records without a key.
static NEXT_UNKEYED: AtomicU32 = AtomicU32::new(0);

impl PushEngine {
    /// Stores one record; resolves once it is as durable as a Kafka
    /// producer's acks=all would make it. In a cluster, a record for a
    /// partition this node does not lead is forwarded to its leader and
    /// answered once committed there.
    /// `identity` must hold WRITE on the topic (and, for a topic that does
    /// not exist yet and is created automatically, CREATE on it or on the
    /// cluster), as a Kafka producer must.
    pub async fn publish(
        &self,
        identity: &mut Identity,
        record: PublishRecord,
    ) -> Result<Published, PublishError> {
        let security = self.broker.security();
        if !identity.may(
            security,
            Operation::Write,
            ResourceType::Topic,
            &record.topic,
        ) {
            return Err(PublishError::NotAuthorized(format!(
                "{} may not write to topic {}",
                identity.principal(),
                record.topic
            )));
        }
        if self.broker.topic(&record.topic).is_none()
            && !identity.may(
                security,
                Operation::Create,
                ResourceType::Cluster,
                CLUSTER_NAME,
            )
            && !identity.may(
                security,
                Operation::Create,
                ResourceType::Topic,
                &record.topic,
            )
        {
            return Err(PublishError::UnknownTopic(record.topic.clone()));
        }
        let topic = self
            .broker
            .topic_or_auto_create(&record.topic)
            .map_err(|_| PublishError::UnknownTopic(record.topic.clone()))?;
        let count = topic.partition_count();
        let partition = match (record.partition, &record.key) {
            (Some(p), _) => p,
            (None, Some(key)) => herald_client::partitioner::partition_for_key(key, count),
            (None, None) => NEXT_UNKEYED.fetch_add(1, Ordering::Relaxed) % count.max(1),
        };
        let target =
            topic
                .partition(partition as i32)
                .ok_or_else(|| PublishError::UnknownPartition {
                    topic: record.topic.clone(),
                    partition,
                })?;
        let timestamp_ms = record.timestamp_ms.unwrap_or_else(|| {
            SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map_or(0, |d| d.as_millis() as i64)
        });
        let headers: Vec<(&[u8], Option<&[u8]>)> = record
            .headers
            .iter()
            .map(|(k, v)| (k.as_slice(), v.as_deref()))
            .collect();
        let mut builder = BatchBuilder::new(timestamp_ms);
        builder.push(RecordFields {
            timestamp_ms,
            key: record.key.as_deref(),
            value: record.value.as_deref(),
            headers: &headers,
        });
        let batch = builder
            .finish()
            .map_err(|_| ProduceError::InvalidRecords("the record could not be encoded"))?;
        self.broker
            .check_tenant_storage(topic.name(), batch.len() as u64)?;
        if let Some(rates) = identity.tenant_rates(&self.broker) {
            let now = self.broker.quota_buckets().now_ns();
            // Always refused, never throttled: a session carries other
            // requests, and its client can hold the record and retry.
            if let Verdict::Refuse(refusal) =
                rates.charge_input(OverRate::Reject, batch.len() as u64, 1, now)
            {
                return Err(PublishError::OverRate(refusal));
            }
        }
        // Through the leader wherever it is: a publisher may be connected
        // to any node of a cluster.
        let outcome = target.append_through_leader(&batch).await?;
        Ok(Published {
            partition,
            offset: outcome.base_offset,
        })
    }
}
