//! The broker core of herald: the topic registry and its durable metadata
//! (name, id, partition count, config overrides), partitions each backed by a
//! [`herald_log::Log`] under `<data-dir>/<topic>-<partition>/`, the
//! idempotent-producer state that guards appends, producer-id allocation, and
//! periodic log maintenance, and the consumer-group coordinator
//! ([`GroupService`]) with its committed offsets in the internal partition
//! `<data-dir>/__consumer_offsets-0/`, and the security state (credentials,
//! ACLs, tenants, namespaces: [`Security`]) kept in the same metadata.
//!
//! It is transport-agnostic: front ends (the Kafka wire protocol in
//! `herald-kafka`, later others) turn requests into plain calls here and map
//! the typed errors back to their protocol. No wire types appear in this API,
//! and nothing here depends on an async runtime.
//!
//! A produce goes `Broker::topic` → `Topic::partition` → `Partition::append`
//! (exactly one batch: the sequence check for idempotent producers, then the
//! partition contract's two-step append); a push publish goes to
//! `Partition::append_through_leader`, which in a cluster carries it to the
//! partition's leader (`forwarding`); a fetch goes to `Partition::read`
//! and `Partition::wait_for_data`. [`Partition`] is the only door to a
//! partition's records: behind it, [`storage::PartitionStorage`] is the
//! contract every backend honours (today the embedded [`herald_log::Log`]).

pub mod broker;
#[cfg(feature = "cluster")]
pub mod cluster;
#[cfg(feature = "cluster")]
pub mod cluster_nodes;
pub mod config;
mod dir_lock;
pub mod disk_space;
pub mod error;
#[cfg(feature = "cluster")]
pub mod forwarding;
pub mod groups;
pub mod history_indexer;
#[cfg(feature = "cluster")]
pub mod in_sync;
pub mod maintenance;
pub mod metadata_store;
#[cfg(feature = "cluster")]
pub mod offset_shards;
pub mod partition;
mod partition_dirs;
pub mod producer_ids;
mod producer_snapshot;
pub mod producer_state;
pub mod queries;
pub mod relay;
#[cfg(feature = "cluster")]
mod replicated_producers;
pub mod security;
pub mod snapshots;
pub mod storage;
pub mod subject_index;
pub mod tenant_caps;
pub mod thread_priority;
pub mod topic;
pub mod topic_config;

pub use broker::{Broker, ConfigChange, NodeAddress, TopicRestore, TopicSummary};
pub use config::BrokerConfig;
pub use error::{BrokerError, ProduceError};
pub use groups::{CoordinatorLocation, GroupCall, GroupReply, GroupService, Groups, OFFSETS_TOPIC};
pub use herald_log::{
    BatchError, CopiedRecords, CopiedRun, FlushPolicy, KeyBatches, KeyCopyDamaged,
};
pub use history_indexer::HistoryIndexer;
pub use maintenance::Maintenance;
pub use partition::{
    LeaderHints, OffsetAndTimestamp, OffsetSpec, Partition, ProduceOutcome, ReplicaSet, ReplicaView,
};
pub use security::{Security, SecurityConfig};
pub use snapshots::{
    SnapshotError, SnapshotRecord, SnapshotSpec, Snapshots, ViewPartition, ViewTopic,
};
pub use storage::{Acks, ProducerRefusal, StorageError, StoredBatches, Watermarks};
pub use tenant_caps::{CapExceeded, TenantConnection};
pub use topic::Topic;
pub use topic_config::{ConfigEntry, ConfigSource, ConfigType, TopicConfig};
