//! Typed errors at the broker core's boundary. Front ends map these to their
//! own protocol's error codes in one place (for Kafka: `herald-kafka`'s
//! `error_code` module).

use std::path::PathBuf;

use herald_log::{BatchError, LogError};

use crate::storage::StorageError;

/// Why an administrative or lookup operation failed.
#[derive(Debug, thiserror::Error)]
pub enum BrokerError {
    /// A change to credentials, ACLs, tenants or namespaces was refused.
    #[error(transparent)]
    Security(#[from] herald_auth::SecurityError),
    /// The system's random source failed.
    #[error("no randomness available: {0}")]
    Random(String),
    /// No topic by this name (or id) exists, and it was not created.
    #[error("unknown topic {name}")]
    UnknownTopic {
        /// Topic name or id as given.
        name: String,
    },
    /// The topic exists but has no such partition.
    #[error("topic {topic} has no partition {partition}")]
    UnknownPartition {
        /// Topic name.
        topic: String,
        /// Partition index asked for.
        partition: i32,
    },
    /// A replication factor the cluster cannot give (below 1, or more
    /// replicas than nodes).
    #[error("replication factor {requested} is not possible with {nodes} nodes")]
    InvalidReplicationFactor {
        /// The factor asked for.
        requested: i16,
        /// Nodes in the cluster.
        nodes: usize,
    },
    /// The cluster could not commit a metadata change (no quorum, or no
    /// answer in time); the change may still take effect.
    #[error("the cluster did not commit the change: {0}")]
    ClusterUnavailable(String),
    /// The operation is not replicated through the cluster's metadata yet.
    #[error("{0} is not supported in a cluster yet")]
    NotInCluster(&'static str),
    /// A partition reassignment names replicas the cluster cannot give.
    #[error("invalid replica assignment: {0}")]
    InvalidReplicaAssignment(String),
    /// A node of this id is in the cluster already, at other addresses.
    #[error("node {id} is in the cluster already, at {known}")]
    NodeExists {
        /// The node id.
        id: u64,
        /// Where it is.
        known: String,
    },
    /// A node to add is described wrongly (its id, or its addresses), or
    /// a node cannot be removed now.
    #[error("invalid node change: {0}")]
    InvalidNode(String),
    /// No node of this id is in the cluster.
    #[error("node {0} is not in the cluster")]
    UnknownNode(u64),
    /// No reassignment of the partition is in progress (to cancel).
    #[error("no reassignment of partition {partition} of topic {topic} is in progress")]
    NoReassignmentInProgress {
        /// Topic name.
        topic: String,
        /// Partition index.
        partition: u32,
    },
    /// A topic of this name already exists.
    #[error("topic {name} already exists")]
    TopicExists {
        /// Topic name.
        name: String,
    },
    /// The topic's records are pinned by a snapshot, which must be deleted
    /// first.
    #[error("topic {topic} is pinned by snapshot {snapshot}; delete the snapshot first")]
    TopicPinned {
        /// The topic.
        topic: String,
        /// A snapshot pinning it.
        snapshot: String,
    },
    /// A backup could not be restored (it is inconsistent, or its records
    /// could not be written); nothing was created.
    #[error("cannot restore: {0}")]
    InvalidRestore(String),
    /// A snapshot operation was refused.
    #[error(transparent)]
    Snapshot(#[from] crate::snapshots::SnapshotError),
    /// The topic name is not a legal Kafka topic name.
    #[error("invalid topic name {name:?}: {reason}")]
    InvalidTopicName {
        /// The name given.
        name: String,
        /// What is wrong with it.
        reason: &'static str,
    },
    /// A partition count is out of range or would shrink the topic.
    #[error("invalid partition count {requested} for topic {topic}: {reason}")]
    InvalidPartitions {
        /// Topic name.
        topic: String,
        /// The count asked for.
        requested: i64,
        /// Why it is refused.
        reason: String,
    },
    /// A configuration key or value is refused.
    #[error("invalid config {key}={value}: {reason}")]
    InvalidConfig {
        /// Config name.
        key: String,
        /// The refused value.
        value: String,
        /// Why it is refused.
        reason: String,
    },
    /// The producer id or epoch given to `init_producer_id` is not current.
    #[error("producer {producer_id} epoch {epoch} is not the current epoch")]
    InvalidProducerEpoch {
        /// Producer id.
        producer_id: i64,
        /// Epoch given.
        epoch: i16,
    },
    /// Persisting metadata or touching the data directory failed.
    #[error("{op} {path}: {source}")]
    Io {
        /// What was being done.
        op: &'static str,
        /// File or directory concerned.
        path: PathBuf,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// Another process has the data directory open.
    #[error("data directory {path} is in use by another herald process")]
    DataDirInUse {
        /// The directory.
        path: PathBuf,
    },
    /// The metadata file exists but cannot be understood.
    #[error("corrupt metadata file {path}: {reason}")]
    CorruptMetadata {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        reason: String,
    },
    /// Opening, flushing or closing a partition log failed.
    #[error("partition log {topic}-{partition}: {source}")]
    Log {
        /// Topic name.
        topic: String,
        /// Partition index.
        partition: u32,
        /// The log's error.
        #[source]
        source: LogError,
    },
    /// The request would take a tenant past one of its caps.
    #[error(transparent)]
    TenantCap(#[from] crate::tenant_caps::CapExceeded),
}

impl From<herald_log::durable_file::DurableWriteError> for BrokerError {
    fn from(e: herald_log::durable_file::DurableWriteError) -> Self {
        BrokerError::Io {
            op: e.op,
            path: e.path,
            source: e.source,
        }
    }
}

impl BrokerError {
    pub(crate) fn io(op: &'static str, path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        BrokerError::Io {
            op,
            path: path.into(),
            source,
        }
    }

    pub(crate) fn invalid_config(key: &str, value: &str, reason: impl Into<String>) -> Self {
        BrokerError::InvalidConfig {
            key: key.to_owned(),
            value: value.to_owned(),
            reason: reason.into(),
        }
    }
}

/// Why a produced batch was refused. Nothing was written when this is returned.
#[derive(Debug, Clone, thiserror::Error)]
pub enum ProduceError {
    /// The records field is malformed, or holds other than exactly one batch.
    #[error("invalid records: {0}")]
    InvalidRecords(&'static str),
    /// The batch failed validation (framing, magic, CRC, record count).
    #[error(transparent)]
    InvalidBatch(#[from] BatchError),
    /// The batch is larger than the topic's `max.message.bytes`.
    #[error("record batch of {size} bytes exceeds max.message.bytes {max}")]
    TooLarge {
        /// Batch size.
        size: usize,
        /// The limit.
        max: usize,
    },
    /// Transactional batches need the transaction APIs, which herald does not offer yet.
    #[error("transactional record batches are not supported")]
    Transactional,
    /// An idempotent producer's batch for a partition whose storage
    /// cannot keep that producer's sequence bookkeeping (a backend that
    /// broke its word on placing batches at once, or a build without
    /// clustering asked to judge a replicated batch).
    #[error("this partition cannot take idempotent producers' batches")]
    IdempotenceUnavailable,
    /// A retry of an idempotent batch still being replicated: Kafka's
    /// clients take the answer as success (the original's carries the
    /// offsets).
    #[error("producer {producer_id} sent a batch still being replicated")]
    DuplicateSequence {
        /// Producer id.
        producer_id: i64,
    },
    /// The batch's sequence does not follow the producer's last one.
    #[error("out of order sequence {found} for producer {producer_id}: expected {expected}")]
    OutOfOrderSequence {
        /// Producer id.
        producer_id: i64,
        /// The next sequence the broker expects.
        expected: i32,
        /// The batch's first sequence.
        found: i32,
    },
    /// The batch carries an epoch older than the producer's current one.
    #[error("producer {producer_id} epoch {found} is older than the current epoch {current}")]
    InvalidProducerEpoch {
        /// Producer id.
        producer_id: i64,
        /// The current epoch.
        current: i16,
        /// The batch's epoch.
        found: i16,
    },
    /// The broker has no state for this producer and the batch does not start
    /// at sequence 0 (its earlier batches were removed by retention).
    #[error("unknown producer id {producer_id}")]
    UnknownProducerId {
        /// Producer id.
        producer_id: i64,
    },
    /// The partition's storage refused or failed the append (failed, full,
    /// closed, not the leader, timed out).
    #[error(transparent)]
    Storage(StorageError),
}

impl From<StorageError> for ProduceError {
    fn from(e: StorageError) -> Self {
        match e {
            StorageError::TooLarge { size, max } => ProduceError::TooLarge { size, max },
            other => ProduceError::Storage(other),
        }
    }
}
