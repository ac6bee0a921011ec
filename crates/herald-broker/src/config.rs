//! Startup configuration of the broker core.

use std::path::PathBuf;
use std::time::Duration;

use herald_group::GroupConfig;
use herald_log::LogConfig;

/// Largest partition count accepted for one topic; bounds the files and
/// memory one request can make the broker create.
pub const PARTITIONS_MAX: u32 = 10_000;

pub use herald_group::GROUP_SIZE_MAX_DEFAULT;

/// How the broker core is set up. Built by the server binary from flags,
/// environment and file.
#[derive(Debug, Clone)]
pub struct BrokerConfig {
    /// Directory holding the metadata document and one directory per partition.
    pub data_dir: PathBuf,
    /// This node's id, as reported to clients.
    pub node_id: i32,
    /// Create a topic when a client asks for its metadata and it does not exist.
    pub auto_create_topics: bool,
    /// Whether a background thread keeps every embedded log's history
    /// index (key index, smallest timestamp per bucket) built behind the
    /// tail (the server starts it; see [`crate::history_indexer`]).
    pub history_index: bool,
    /// Partition count of topics created without one (Kafka's `num.partitions`).
    pub default_partitions: u32,
    /// Log settings every topic starts from (its overrides apply on top),
    /// including the flush policy.
    pub log_defaults: LogConfig,
    /// How often the maintenance task rolls, retains and flushes logs.
    pub maintenance_interval: Duration,
    /// Settings of the consumer-group coordinator. The member-id seed is
    /// replaced by a random value at every open.
    pub groups: GroupConfig,
    /// How long an idempotent producer's state outlives its latest batch
    /// (Kafka's `producer.id.expiration.ms`, default one day).
    pub producer_id_expiration: Duration,
    /// Most producer ids one partition keeps state for; past it the one
    /// unused the longest makes room.
    pub producers_per_partition_max: usize,
    /// Authorization: on or off, super users.
    pub security: crate::security::SecurityConfig,
    /// A relay's upstream and the topics it mirrors from there (see
    /// [`crate::relay`]); `None` for a node that mirrors nothing.
    pub relay: Option<crate::relay::RelayConfig>,
}

impl BrokerConfig {
    /// A configuration with production defaults and the given data directory.
    pub fn new(data_dir: impl Into<PathBuf>) -> Self {
        Self {
            data_dir: data_dir.into(),
            node_id: 1,
            auto_create_topics: true,
            history_index: true,
            default_partitions: 1,
            log_defaults: LogConfig::default(),
            maintenance_interval: Duration::from_secs(1),
            groups: GroupConfig::default(),
            producer_id_expiration: Duration::from_secs(24 * 60 * 60),
            producers_per_partition_max: crate::producer_state::PRODUCERS_PER_PARTITION_MAX,
            security: crate::security::SecurityConfig::default(),
            relay: None,
        }
    }
}
