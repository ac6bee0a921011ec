//! Publishing one record through the push API: encoded as a Kafka batch
//! and appended through the partition contract, exactly as a Kafka
//! producer's record would be.

use herald_auth::acl::CLUSTER_NAME;
use herald_auth::{Operation, ResourceType};

use crate::identity::Identity;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

use std::sync::Arc;

use herald_broker::{Partition, ProduceError};
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
        self.prepare_publish(identity, record)?.append().await
    }

    /// Everything of [`PushEngine::publish`] up to the append: the
    /// authorization, the partition, the encoded batch, the tenant's
    /// storage and input rate charged. What is left needs neither the
    /// engine nor the identity, so a session may keep several appends in
    /// flight (see [`PreparedPublish::keeps_order`]).
    pub fn prepare_publish(
        &self,
        identity: &mut Identity,
        record: PublishRecord,
    ) -> Result<PreparedPublish, PublishError> {
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
        Ok(PreparedPublish {
            target,
            partition,
            batch,
            gate: self.broker.snapshots().shared_gate(),
        })
    }
}

/// A publish authorized, encoded and charged, with only its append left.
pub struct PreparedPublish {
    target: Arc<Partition>,
    partition: u32,
    batch: Vec<u8>,
    /// Passed before the acknowledgement, which must not overtake a
    /// snapshot's cut (see `herald_broker::snapshots::CutGate`).
    gate: Arc<herald_broker::snapshots::CutGate>,
}

impl std::fmt::Debug for PreparedPublish {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PreparedPublish")
            .field("partition", &self.partition)
            .field("batch_bytes", &self.batch.len())
            .finish()
    }
}

impl PreparedPublish {
    /// Whether [`PreparedPublish::append`] places the record in its
    /// partition's order when first polled (the partition is led here, or
    /// is not replicated). While it holds, appends started one after the
    /// other, each polled once as it starts, are stored in the order they
    /// were started even when they complete together; otherwise each must
    /// be awaited before the next starts to keep their order.
    pub fn keeps_order(&self) -> bool {
        self.target.appends_in_order_here()
    }

    /// Appends the record and resolves once it is as durable as a Kafka
    /// producer's acks=all would make it.
    pub async fn append(self) -> Result<Published, PublishError> {
        // Through the leader wherever it is: a publisher may be connected
        // to any node of a cluster.
        let outcome = self.target.append_through_leader(&self.batch).await?;
        self.gate.pass().await;
        Ok(Published {
            partition: self.partition,
            offset: outcome.base_offset,
        })
    }
}
