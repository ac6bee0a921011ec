//! The broker core: the topic registry over the durable metadata store, and
//! the operations front ends call (topic admin, producer ids, maintenance).

mod restore;

pub use restore::TopicRestore;

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;
use std::time::SystemTime;

use parking_lot::{Mutex, RwLock};
use uuid::Uuid;

use crate::config::{BrokerConfig, PARTITIONS_MAX};
use crate::dir_lock::DirLock;
use crate::error::BrokerError;
use crate::groups::{GroupService, Groups};
use crate::metadata_store::{Metadata, MetadataStore, TopicRecord};
use crate::partition_dirs::{discard_partitions, open_new_partitions, open_topic, sweep_deleted};
use crate::producer_ids::ProducerIdAllocator;
use crate::producer_snapshot;
use crate::security::Security;
use crate::snapshots::Snapshots;
use crate::tenant_caps::{self, CapExceeded, TenantCaps, TenantConnection};
use crate::topic::{validate_topic_name, Topic};
use crate::topic_config::TopicConfig;
use arc_swap::ArcSwap;
use herald_auth::{Applied, SecurityCommand, SecurityState};
use herald_flow::{QuotaBuckets, QuotaEntity, QuotaError, QuotaOp, QuotaState};

/// What a created (or validated) topic looks like.
#[derive(Debug, Clone)]
pub struct TopicSummary {
    /// Topic name.
    pub name: String,
    /// Topic id (nil for a validate-only request).
    pub id: Uuid,
    /// Partition count.
    pub partitions: u32,
    /// Config overrides.
    pub config: TopicConfig,
}

/// One change to a topic's config.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ConfigChange {
    /// Set `key` to `value`.
    Set {
        /// Kafka config name.
        key: String,
        /// New value.
        value: String,
    },
    /// Remove the override of `key` (back to the default).
    Delete {
        /// Kafka config name.
        key: String,
    },
}

/// State changed only by admin operations, under one lock so that each
/// change is persisted before the next starts.
struct AdminState {
    store: MetadataStore,
    metadata: Metadata,
    producer_ids: ProducerIdAllocator,
}

#[derive(Default)]
struct Registry {
    by_name: HashMap<String, Arc<Topic>>,
    by_id: HashMap<Uuid, Arc<Topic>>,
}

/// The broker core of one node.
pub struct Broker {
    config: BrokerConfig,
    cluster_id: String,
    // Lock order: `admin` before `registry`.
    admin: Mutex<AdminState>,
    registry: RwLock<Registry>,
    producer_epochs: Mutex<HashMap<i64, i16>>,
    groups: Groups,
    security: Security,
    /// Client quotas and tenant SLAs, published for lock-free reading.
    quotas: ArcSwap<QuotaState>,
    quota_buckets: QuotaBuckets,
    tenant_caps: TenantCaps,
    /// Snapshots of topics, their view topics and the cut gate.
    snapshots: Snapshots,
    /// Names of topics being restored from a backup (reserved until done).
    restoring: Mutex<HashSet<String>>,
    /// Registered online queries.
    queries: crate::queries::Queries,
    /// The cluster this node belongs to, once started.
    #[cfg(feature = "cluster")]
    cluster: std::sync::OnceLock<Arc<crate::cluster::Cluster>>,
    _lock: DirLock,
}

/// Where a cluster node's id sits in the producer ids it hands out: below
/// it, 2^40 ids per node.
const PRODUCER_ID_NODE_SHIFT: u32 = 40;

/// A node of the cluster, as Kafka's metadata names it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeAddress {
    /// Its node (broker) id.
    pub id: i32,
    /// The host its Kafka listener is reached at.
    pub host: String,
    /// That listener's port.
    pub port: u16,
}

impl std::fmt::Debug for Broker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Broker")
            .field("data_dir", &self.config.data_dir)
            .finish_non_exhaustive()
    }
}

impl Broker {
    /// Opens the data directory: reads the metadata, sweeps half-deleted
    /// partitions, and opens (recovering) every partition log.
    pub fn open(config: BrokerConfig) -> Result<Arc<Self>, BrokerError> {
        config
            .log_defaults
            .validate()
            .map_err(|e| BrokerError::InvalidConfig {
                key: e.key.to_owned(),
                value: e.value.to_string(),
                reason: e.reason.to_owned(),
            })?;
        std::fs::create_dir_all(&config.data_dir)
            .map_err(|e| BrokerError::io("create directory", &config.data_dir, e))?;
        let lock = DirLock::acquire(&config.data_dir)?;
        let (store, mut metadata) = MetadataStore::open(&config.data_dir)?;
        let secret = security_secret(&store, &mut metadata)?;
        sweep_deleted(&config.data_dir)?;
        let mut registry = Registry::default();
        // A cluster's topics come back from its metadata log, not from
        // this document.
        metadata
            .topics
            .retain(|_, record| record.replicas.is_none());
        for record in metadata.topics.values() {
            let inherited = inherited_configs(&metadata.security, &record.name);
            let topic = open_topic(&config, record, inherited)?;
            registry.by_id.insert(topic.id(), Arc::clone(&topic));
            registry.by_name.insert(record.name.clone(), topic);
        }
        let live: Vec<Uuid> = registry.by_id.keys().copied().collect();
        producer_snapshot::sweep(&config.data_dir, &live);
        let mut group_config = config.groups.clone();
        group_config.member_id_seed = Uuid::new_v4().as_u64_pair().0;
        let groups = Groups::new(
            GroupService::open(&config.data_dir, group_config)?,
            config.node_id,
        );
        tracing::info!(
            data_dir = %config.data_dir.display(),
            topics = registry.by_name.len(),
            cluster_id = %metadata.cluster_id,
            "broker opened"
        );
        let security = Security::new(config.security.clone(), metadata.security.clone(), secret);
        let snapshots = Snapshots::open(&config.data_dir, &|name| {
            registry.by_name.get(name).cloned()
        })?;
        Ok(Arc::new(Self {
            snapshots,
            restoring: Mutex::new(HashSet::new()),
            queries: crate::queries::Queries::new(&config.data_dir),
            cluster_id: metadata.cluster_id.clone(),
            security,
            quotas: ArcSwap::from_pointee(metadata.quotas.clone()),
            quota_buckets: QuotaBuckets::default(),
            tenant_caps: TenantCaps::default(),
            admin: Mutex::new(AdminState {
                store,
                producer_ids: ProducerIdAllocator::new(metadata.producer_id_high_mark),
                metadata,
            }),
            registry: RwLock::new(registry),
            producer_epochs: Mutex::new(HashMap::new()),
            groups,
            config,
            #[cfg(feature = "cluster")]
            cluster: std::sync::OnceLock::new(),
            _lock: lock,
        }))
    }

    /// Snapshots of topics: listing and deleting them, their view topics,
    /// and the gate answers that show records pass.
    pub fn snapshots(&self) -> &Snapshots {
        &self.snapshots
    }

    /// Registered online queries (see `queries`).
    pub fn queries(&self) -> &crate::queries::Queries {
        &self.queries
    }

    /// Takes a snapshot of `spec.topics` at `now` (see [`Snapshots`]). The
    /// topics are held against deletion from the moment they are checked
    /// to still be registered (under the lock deletion takes) until the
    /// snapshot is kept or refused.
    pub async fn take_snapshot(
        &self,
        spec: crate::snapshots::SnapshotSpec,
        now: SystemTime,
    ) -> Result<Arc<crate::snapshots::SnapshotRecord>, crate::snapshots::SnapshotError> {
        let _held = {
            let _admin = self.admin.lock();
            let registry = self.registry.read();
            for topic in &spec.topics {
                let registered = registry
                    .by_id
                    .get(&topic.id())
                    .is_some_and(|t| Arc::ptr_eq(t, topic));
                if !registered {
                    return Err(crate::snapshots::SnapshotError::UnknownTopic {
                        name: topic.name().to_owned(),
                    });
                }
            }
            self.snapshots.hold(&spec.topics)
        };
        self.snapshots.create(spec, now).await
    }

    /// The configuration the broker was opened with.
    pub fn config(&self) -> &BrokerConfig {
        &self.config
    }

    /// Cluster id, stable across restarts.
    pub fn cluster_id(&self) -> &str {
        #[cfg(feature = "cluster")]
        if let Some(cluster) = self.cluster.get() {
            return cluster.id();
        }
        &self.cluster_id
    }

    /// This node's id.
    pub fn node_id(&self) -> i32 {
        self.config.node_id
    }

    /// The topic of this name.
    pub fn topic(&self, name: &str) -> Option<Arc<Topic>> {
        self.registry.read().by_name.get(name).cloned()
    }

    /// The topic of this id.
    pub fn topic_by_id(&self, id: Uuid) -> Option<Arc<Topic>> {
        self.registry.read().by_id.get(&id).cloned()
    }

    /// All topics, by name.
    pub fn topics(&self) -> Vec<Arc<Topic>> {
        let mut all: Vec<_> = self.registry.read().by_name.values().cloned().collect();
        all.sort_by(|a, b| a.name().cmp(b.name()));
        all
    }

    /// The topic, created with defaults if it does not exist and auto
    /// creation is on.
    pub fn topic_or_auto_create(&self, name: &str) -> Result<Arc<Topic>, BrokerError> {
        if let Some(topic) = self.topic(name) {
            return Ok(topic);
        }
        // A cluster creates topics through its metadata log only, which
        // this synchronous path cannot wait for: as with Kafka's
        // auto.create.topics.enable=false, the client is told the topic is
        // unknown.
        if !self.config.auto_create_topics || self.clustered() {
            return Err(BrokerError::UnknownTopic {
                name: name.to_owned(),
            });
        }
        match self.create_topic(name, None, &[], false) {
            Ok(_) | Err(BrokerError::TopicExists { .. }) => {
                self.topic(name).ok_or_else(|| BrokerError::UnknownTopic {
                    name: name.to_owned(),
                })
            }
            Err(e) => Err(e),
        }
    }

    /// Creates a topic with `partitions` (or the default count) and config
    /// overrides; with `validate_only`, checks everything and creates nothing.
    pub fn create_topic(
        &self,
        name: &str,
        partitions: Option<u32>,
        configs: &[(String, String)],
        validate_only: bool,
    ) -> Result<TopicSummary, BrokerError> {
        validate_topic_name(name)?;
        if self.clustered() && !validate_only {
            return Err(BrokerError::NotInCluster(
                "creating a topic other than through the cluster's metadata",
            ));
        }
        let count = partitions.unwrap_or(self.config.default_partitions);
        check_partition_count(name, count)?;
        let mut admin = self.admin.lock();
        let (config, _) = self.check_new_topic(&admin, name, count, configs)?;
        if validate_only {
            return Ok(TopicSummary {
                name: name.to_owned(),
                id: Uuid::nil(),
                partitions: count,
                config,
            });
        }
        let id = Uuid::new_v4();
        let log_config = config.log_config(&self.config.log_defaults)?;
        let opened = open_new_partitions(&self.config, name, id, 0..count, &log_config)?;
        let record = TopicRecord {
            name: name.to_owned(),
            id,
            partitions: count,
            configs: config.overrides().clone(),
            replicas: None,
        };
        let mut next = admin.metadata.clone();
        next.topics.insert(name.to_owned(), record);
        if let Err(e) = admin.store.save(&next) {
            discard_partitions(&self.config.data_dir, name, opened);
            return Err(e);
        }
        admin.metadata = next;
        let topic = Arc::new(Topic::new(name.to_owned(), id, opened, config.clone()));
        let mut registry = self.registry.write();
        registry.by_id.insert(id, Arc::clone(&topic));
        registry.by_name.insert(name.to_owned(), topic);
        tracing::info!(topic = name, %id, partitions = count, "topic created");
        Ok(TopicSummary {
            name: name.to_owned(),
            id,
            partitions: count,
            config,
        })
    }

    /// What a new topic `name` of `count` partitions with `configs` would
    /// be configured as (its namespace's configs inherited), or why it
    /// cannot be created: invalid configs, the name taken (or being
    /// restored), the tenant's partition cap.
    fn check_new_topic(
        &self,
        admin: &AdminState,
        name: &str,
        count: u32,
        configs: &[(String, String)],
    ) -> Result<(TopicConfig, herald_log::LogConfig), BrokerError> {
        let config = TopicConfig::from_pairs(
            configs.iter().map(|(k, v)| (k.as_str(), v.as_str())),
            &self.config.log_defaults,
        )?
        .inheriting(inherited_configs(&admin.metadata.security, name));
        let log_config = config.log_config(&self.config.log_defaults)?;
        if admin.metadata.topics.contains_key(name) || self.restoring.lock().contains(name) {
            return Err(BrokerError::TopicExists {
                name: name.to_owned(),
            });
        }
        tenant_caps::check_partitions(
            &admin.metadata.security,
            &admin.metadata.quotas,
            name,
            count.into(),
            partition_counts(&admin.metadata),
        )?;
        Ok((config, log_config))
    }

    /// The cluster this node belongs to, if it is one of a cluster.
    #[cfg(feature = "cluster")]
    pub fn cluster(&self) -> Option<&Arc<crate::cluster::Cluster>> {
        self.cluster.get()
    }

    /// Joins this broker to `cluster` (once).
    #[cfg(feature = "cluster")]
    pub(crate) fn set_cluster(&self, cluster: Arc<crate::cluster::Cluster>) {
        let _ = self.cluster.set(cluster);
    }

    /// Whether this node is one of a cluster.
    pub fn clustered(&self) -> bool {
        #[cfg(feature = "cluster")]
        if self.cluster.get().is_some() {
            return true;
        }
        false
    }

    /// The node that answers as the cluster's controller: the metadata
    /// group's leader, or this node while none is known (or when it is
    /// alone). Any node takes admin requests (a cluster forwards their
    /// changes to the metadata leader), and clients wait for a controller
    /// before they send one, so a node never answers "no controller".
    pub fn controller_id(&self) -> i32 {
        #[cfg(feature = "cluster")]
        if let Some(cluster) = self.cluster.get() {
            return cluster.controller().map_or(self.node_id(), |id| id as i32);
        }
        self.node_id()
    }

    /// Every node of the cluster with its Kafka address; empty when this
    /// node is not one of a cluster (it then answers for itself alone).
    pub fn nodes(&self) -> Vec<NodeAddress> {
        #[cfg(feature = "cluster")]
        if let Some(cluster) = self.cluster.get() {
            return cluster.nodes();
        }
        Vec::new()
    }

    /// [`Broker::nodes`] as clients of Kafka listener `listener` are to
    /// reach them: each node's listener of that name where it advertised
    /// one.
    pub fn nodes_for_listener(&self, listener: &str) -> Vec<NodeAddress> {
        #[cfg(feature = "cluster")]
        if let Some(cluster) = self.cluster.get() {
            return cluster.nodes_for(Some(listener));
        }
        let _ = listener;
        Vec::new()
    }

    /// Adds a topic of the cluster, as its metadata log decided, with this
    /// node's view of its partitions (replicas here, the rest elsewhere).
    #[cfg(feature = "cluster")]
    pub(crate) fn install_replicated_topic(
        &self,
        record: TopicRecord,
        partitions: Vec<Arc<crate::partition::Partition>>,
    ) -> Result<TopicSummary, BrokerError> {
        let mut admin = self.admin.lock();
        if admin.metadata.topics.contains_key(&record.name) {
            return Err(BrokerError::TopicExists {
                name: record.name.clone(),
            });
        }
        let config = TopicConfig::from_pairs(
            record.configs.iter().map(|(k, v)| (k.as_str(), v.as_str())),
            &self.config.log_defaults,
        )?
        .inheriting(inherited_configs(&admin.metadata.security, &record.name));
        let mut next = admin.metadata.clone();
        next.topics.insert(record.name.clone(), record.clone());
        admin.store.save(&next)?;
        admin.metadata = next;
        let topic = Arc::new(Topic::new(
            record.name.clone(),
            record.id,
            partitions,
            config.clone(),
        ));
        let mut registry = self.registry.write();
        registry.by_id.insert(record.id, Arc::clone(&topic));
        registry.by_name.insert(record.name.clone(), topic);
        tracing::info!(topic = %record.name, id = %record.id, partitions = record.partitions, "replicated topic installed");
        Ok(TopicSummary {
            name: record.name,
            id: record.id,
            partitions: record.partitions,
            config,
        })
    }

    /// Every topic of the cluster this node has installed, with its
    /// partitions' replicas as they are now: what a metadata image keeps.
    #[cfg(feature = "cluster")]
    pub(crate) fn replicated_topic_records(&self) -> Vec<TopicRecord> {
        self.admin
            .lock()
            .metadata
            .topics
            .values()
            .filter(|record| record.replicas.is_some())
            .cloned()
            .collect()
    }

    /// Replaces the security and quota state with a metadata image's, as
    /// the commands applied before the image would have left them:
    /// persisted, then published (topics whose namespace configs change
    /// take them, as [`Broker::apply_security_all`] does).
    #[cfg(feature = "cluster")]
    pub(crate) fn restore_replicated_state(
        &self,
        security: SecurityState,
        quotas: QuotaState,
    ) -> Result<(), BrokerError> {
        let mut admin = self.admin.lock();
        let mut next = admin.metadata.clone();
        next.security = security;
        next.quotas = quotas;
        let inheriting = if next.security.namespaces != admin.metadata.security.namespaces {
            self.check_inheritance(&next.security)?
        } else {
            Vec::new()
        };
        admin.store.save(&next)?;
        self.security.publish(next.security.clone());
        self.quotas.store(Arc::new(next.quotas.clone()));
        admin.metadata = next;
        for (topic, config) in inheriting {
            self.set_topic_config(&topic, config);
        }
        Ok(())
    }

    /// Removes a topic of the cluster, as its metadata log decided: out of
    /// the registry and the metadata document; returns its partitions,
    /// whose replicas the caller stops before their data is discarded.
    #[cfg(feature = "cluster")]
    pub(crate) fn remove_replicated_topic(
        &self,
        name: &str,
        id: Uuid,
    ) -> Result<Vec<Arc<crate::partition::Partition>>, BrokerError> {
        let mut admin = self.admin.lock();
        if admin.metadata.topics.get(name).map(|r| r.id) != Some(id) {
            return Err(BrokerError::UnknownTopic {
                name: name.to_owned(),
            });
        }
        let topic = self.unregister_topic(&mut admin, name, id)?;
        tracing::info!(topic = name, %id, "replicated topic deleted");
        Ok(topic.map_or_else(Vec::new, |t| t.partitions().as_ref().clone()))
    }

    /// Takes topic `name` (of id `id`) out of the metadata document, durably,
    /// and out of the registry; returns it, for its partitions.
    fn unregister_topic(
        &self,
        admin: &mut AdminState,
        name: &str,
        id: Uuid,
    ) -> Result<Option<Arc<Topic>>, BrokerError> {
        let mut next = admin.metadata.clone();
        next.topics.remove(name);
        admin.store.save(&next)?;
        admin.metadata = next;
        let mut registry = self.registry.write();
        registry.by_id.remove(&id);
        Ok(registry.by_name.remove(name))
    }

    /// Sets a deleted topic's partitions aside and removes their data in
    /// the background.
    #[cfg(feature = "cluster")]
    pub(crate) fn discard(&self, name: &str, partitions: Vec<Arc<crate::partition::Partition>>) {
        discard_partitions(&self.config.data_dir, name, partitions);
    }

    /// Deletes a topic and its data. Returns its id.
    pub fn delete_topic(&self, name: &str) -> Result<Uuid, BrokerError> {
        if self.clustered() {
            return Err(BrokerError::NotInCluster(
                "deleting a topic other than through the cluster's metadata",
            ));
        }
        let mut admin = self.admin.lock();
        let Some(record) = admin.metadata.topics.get(name).cloned() else {
            return Err(BrokerError::UnknownTopic {
                name: name.to_owned(),
            });
        };
        if let Some(snapshot) = self.snapshots.pinning(record.id) {
            return Err(BrokerError::TopicPinned {
                topic: name.to_owned(),
                snapshot,
            });
        }
        let topic = self.unregister_topic(&mut admin, name, record.id)?;
        if let Some(topic) = topic {
            let partitions = topic.partitions().as_ref().clone();
            // Without the topic, the discarding thread holds the last
            // references (unless a request still uses a partition).
            drop(topic);
            discard_partitions(&self.config.data_dir, name, partitions);
        }
        tracing::info!(topic = name, id = %record.id, "topic deleted");
        Ok(record.id)
    }

    /// Grows a topic to `total` partitions.
    pub fn create_partitions(
        &self,
        name: &str,
        total: u32,
        validate_only: bool,
    ) -> Result<(), BrokerError> {
        if self.clustered() {
            return Err(BrokerError::NotInCluster(
                "adding partitions other than through the cluster's metadata",
            ));
        }
        let mut admin = self.admin.lock();
        let record = self.check_partition_growth(&admin, name, total)?;
        let Some(topic) = self.topic(name) else {
            return Err(BrokerError::UnknownTopic {
                name: name.to_owned(),
            });
        };
        if validate_only {
            return Ok(());
        }
        let log_config = topic.config().log_config(&self.config.log_defaults)?;
        let opened = open_new_partitions(
            &self.config,
            name,
            record.id,
            record.partitions..total,
            &log_config,
        )?;
        let mut next = admin.metadata.clone();
        if let Some(r) = next.topics.get_mut(name) {
            r.partitions = total;
        }
        if let Err(e) = admin.store.save(&next) {
            discard_partitions(&self.config.data_dir, name, opened);
            return Err(e);
        }
        admin.metadata = next;
        topic.add_partitions(opened);
        tracing::info!(topic = name, partitions = total, "partitions added");
        Ok(())
    }

    /// The record of topic `name` if it may grow to `total` partitions
    /// (more than it has, within the limits and its tenant's caps).
    #[cfg(feature = "cluster")]
    pub(crate) fn topic_growth(&self, name: &str, total: u32) -> Result<TopicRecord, BrokerError> {
        let admin = self.admin.lock();
        self.check_partition_growth(&admin, name, total)
    }

    fn check_partition_growth(
        &self,
        admin: &AdminState,
        name: &str,
        total: u32,
    ) -> Result<TopicRecord, BrokerError> {
        let Some(record) = admin.metadata.topics.get(name).cloned() else {
            return Err(BrokerError::UnknownTopic {
                name: name.to_owned(),
            });
        };
        check_partition_count(name, total)?;
        if total <= record.partitions {
            return Err(BrokerError::InvalidPartitions {
                topic: name.to_owned(),
                requested: total.into(),
                reason: format!(
                    "the topic already has {} partitions; the count can only grow",
                    record.partitions
                ),
            });
        }
        tenant_caps::check_partitions(
            &admin.metadata.security,
            &admin.metadata.quotas,
            name,
            (total - record.partitions).into(),
            partition_counts(&admin.metadata),
        )?;
        Ok(record)
    }

    /// Adds partitions to a topic of the cluster, as its metadata log
    /// decided: `assignments` are the new partitions' replicas, from the
    /// topic's current count on, and `partitions` this node's view of them.
    #[cfg(feature = "cluster")]
    pub(crate) fn add_replicated_partitions(
        &self,
        name: &str,
        id: Uuid,
        assignments: Vec<crate::metadata_store::ReplicaAssignment>,
        partitions: Vec<Arc<crate::partition::Partition>>,
    ) -> Result<u32, BrokerError> {
        let mut admin = self.admin.lock();
        let unknown = || BrokerError::UnknownTopic {
            name: name.to_owned(),
        };
        let record = admin
            .metadata
            .topics
            .get(name)
            .filter(|r| r.id == id)
            .ok_or_else(unknown)?;
        let topic = self.topic(name).ok_or_else(unknown)?;
        let total = record.partitions + assignments.len() as u32;
        let mut next = admin.metadata.clone();
        if let Some(r) = next.topics.get_mut(name) {
            r.partitions = total;
            r.replicas.get_or_insert_with(Vec::new).extend(assignments);
        }
        admin.store.save(&next)?;
        admin.metadata = next;
        topic.add_partitions(partitions);
        tracing::info!(
            topic = name,
            partitions = total,
            "replicated partitions added"
        );
        Ok(total)
    }

    /// Applies config changes to a topic. With `replace_all`, every override
    /// not set by `changes` is removed (Kafka's non-incremental AlterConfigs).
    pub fn alter_topic_config(
        &self,
        name: &str,
        changes: &[ConfigChange],
        replace_all: bool,
        validate_only: bool,
    ) -> Result<(), BrokerError> {
        if self.clustered() {
            return Err(BrokerError::NotInCluster(
                "changing a topic's configs other than through the cluster's metadata",
            ));
        }
        let mut admin = self.admin.lock();
        let topic = self.topic(name).ok_or_else(|| BrokerError::UnknownTopic {
            name: name.to_owned(),
        })?;
        let config = self.altered_config(&topic, changes, replace_all)?;
        if validate_only {
            return Ok(());
        }
        self.apply_topic_config(&mut admin, name, &topic, config)
    }

    /// The config topic `name` would have after `changes` (with
    /// `replace_all`, only those), checked, but not applied.
    pub fn altered_topic_config(
        &self,
        name: &str,
        changes: &[ConfigChange],
        replace_all: bool,
    ) -> Result<TopicConfig, BrokerError> {
        let topic = self.topic(name).ok_or_else(|| BrokerError::UnknownTopic {
            name: name.to_owned(),
        })?;
        self.altered_config(&topic, changes, replace_all)
    }

    fn altered_config(
        &self,
        topic: &Topic,
        changes: &[ConfigChange],
        replace_all: bool,
    ) -> Result<TopicConfig, BrokerError> {
        let defaults = &self.config.log_defaults;
        let mut config = if replace_all {
            topic.config().without_overrides()
        } else {
            topic.config()
        };
        for change in changes {
            config = match change {
                ConfigChange::Set { key, value } => config.with(key, Some(value), defaults)?,
                ConfigChange::Delete { key } => config.with(key, None, defaults)?,
            };
        }
        config.log_config(defaults)?;
        Ok(config)
    }

    /// Records that partition `partition` of topic `name` (of id `id`) is
    /// replicated on `nodes` now (a completed reassignment).
    #[cfg(feature = "cluster")]
    pub(crate) fn set_replica_nodes(
        &self,
        name: &str,
        id: Uuid,
        partition: u32,
        nodes: &[u64],
    ) -> Result<(), BrokerError> {
        let mut admin = self.admin.lock();
        let mut next = admin.metadata.clone();
        let assignment = next
            .topics
            .get_mut(name)
            .filter(|r| r.id == id)
            .and_then(|r| r.replicas.as_mut())
            .and_then(|replicas| replicas.get_mut(partition as usize))
            .ok_or_else(|| BrokerError::UnknownPartition {
                topic: name.to_owned(),
                partition: partition as i32,
            })?;
        assignment.nodes = nodes.to_vec();
        admin.store.save(&next)?;
        admin.metadata = next;
        Ok(())
    }

    /// Gives a topic of the cluster the config overrides its metadata log
    /// decided (the topic's namespace's settings still inherited).
    #[cfg(feature = "cluster")]
    pub(crate) fn set_replicated_topic_config(
        &self,
        name: &str,
        id: Uuid,
        overrides: &BTreeMap<String, String>,
    ) -> Result<(), BrokerError> {
        let mut admin = self.admin.lock();
        let topic =
            self.topic(name)
                .filter(|t| t.id() == id)
                .ok_or_else(|| BrokerError::UnknownTopic {
                    name: name.to_owned(),
                })?;
        let config = TopicConfig::from_pairs(
            overrides.iter().map(|(k, v)| (k.as_str(), v.as_str())),
            &self.config.log_defaults,
        )?
        .inheriting(inherited_configs(&admin.metadata.security, name));
        self.apply_topic_config(&mut admin, name, &topic, config)
    }

    /// Makes `config` topic `name`'s: durably in the metadata document,
    /// then in its partitions' logs and the registry.
    fn apply_topic_config(
        &self,
        admin: &mut AdminState,
        name: &str,
        topic: &Topic,
        config: TopicConfig,
    ) -> Result<(), BrokerError> {
        let log_config = config.log_config(&self.config.log_defaults)?;
        let mut next = admin.metadata.clone();
        if let Some(r) = next.topics.get_mut(name) {
            r.configs = config.overrides().clone();
        }
        admin.store.save(&next)?;
        admin.metadata = next;
        for partition in topic.partitions().iter() {
            partition
                .update_config(log_config.clone())
                .map_err(|e| BrokerError::invalid_config(e.key, &e.value.to_string(), e.reason))?;
            partition.set_write_caching(config.write_caching());
        }
        topic.set_config(config);
        tracing::info!(topic = name, "topic config altered");
        Ok(())
    }

    /// Hands out a producer id and epoch. With `current` (a producer asking
    /// to bump its epoch, KIP-360), returns the same id with the next epoch,
    /// or a fresh id once the epoch is exhausted.
    pub fn init_producer_id(&self, current: Option<(i64, i16)>) -> Result<(i64, i16), BrokerError> {
        // In a cluster every node hands out ids of its own: the node id in
        // the high bits keeps them apart (two producers sharing an id would
        // have each other's batches taken for duplicates).
        let node_bits = if self.clustered() {
            i64::from(self.node_id()) << PRODUCER_ID_NODE_SHIFT
        } else {
            0
        };
        let local_mask = (1i64 << PRODUCER_ID_NODE_SHIFT) - 1;
        let mut admin = self.admin.lock();
        let mut epochs = self.producer_epochs.lock();
        if let Some((producer_id, epoch)) = current {
            let known = epochs.get(&producer_id).copied();
            let ours = producer_id & !local_mask == node_bits
                && admin.producer_ids.was_issued(producer_id & local_mask);
            match known {
                Some(e) if e != epoch => {
                    return Err(BrokerError::InvalidProducerEpoch { producer_id, epoch })
                }
                None if !ours || epoch < 0 => {
                    return Err(BrokerError::InvalidProducerEpoch { producer_id, epoch })
                }
                _ if epoch < i16::MAX - 1 => {
                    epochs.insert(producer_id, epoch + 1);
                    return Ok((producer_id, epoch + 1));
                }
                _ => {}
            }
        }
        let AdminState {
            store,
            metadata,
            producer_ids,
        } = &mut *admin;
        let id = producer_ids.allocate(|high_mark| {
            let mut next = metadata.clone();
            next.producer_id_high_mark = high_mark;
            store.save(&next)?;
            *metadata = next;
            Ok::<_, BrokerError>(())
        })?;
        let id = node_bits | id;
        epochs.insert(id, 0);
        Ok((id, 0))
    }

    /// Runs periodic upkeep on every partition: log upkeep (segment roll by
    /// age, retention, interval flush) and the expiration of idle
    /// idempotent-producer state. Errors are logged: one failing partition
    /// must not stop the upkeep of others.
    pub fn maintain(&self, now: SystemTime) {
        let now_ms = now
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX));
        let expiration_ms =
            i64::try_from(self.config.producer_id_expiration.as_millis()).unwrap_or(i64::MAX);
        self.snapshots.expire(now);
        for topic in self.topics() {
            for partition in topic.partitions().iter() {
                if let Err(e) = partition.maintain(now) {
                    tracing::error!(topic = topic.name(), partition = partition.index(), error = %e, "log maintenance failed");
                }
                let expired = partition.expire_producers(now_ms, expiration_ms);
                if expired > 0 {
                    tracing::debug!(
                        topic = topic.name(),
                        partition = partition.index(),
                        expired,
                        "idle producer state expired"
                    );
                }
            }
        }
    }

    /// Every partition whose storage failed (a failed fsync, a damaged
    /// log) and refuses requests, as (topic, partition, reason). Cheap: one
    /// flag per partition, for health checks and metrics.
    pub fn failed_partitions(&self) -> Vec<(String, u32, Arc<str>)> {
        let mut failed = Vec::new();
        for topic in self.topics() {
            for partition in topic.partitions().iter() {
                if let Some(reason) = partition.failure() {
                    failed.push((topic.name().to_owned(), partition.index(), reason));
                }
            }
        }
        failed
    }

    /// The consumer-group coordinators: this node's own, or in a cluster
    /// the ones it runs for the offsets partitions it leads.
    pub fn groups(&self) -> &Groups {
        &self.groups
    }

    /// Client quotas and tenant SLAs as last persisted.
    pub fn quotas(&self) -> Arc<QuotaState> {
        self.quotas.load_full()
    }

    /// Whether any client quota or tenant SLA is set: the check every
    /// request makes before it charges anything, without the reference
    /// count [`Broker::quotas`] takes.
    pub fn has_quotas(&self) -> bool {
        !self.quotas.load().entries.is_empty()
    }

    /// The token buckets every front end charges quotas and tenant rates
    /// to: one set per broker, so a tenant's rate holds across its Kafka
    /// and push connections.
    pub fn quota_buckets(&self) -> &QuotaBuckets {
        &self.quota_buckets
    }

    /// Counts a connection of `principal` against its tenant's
    /// `max_connections` (dropping the answer uncounts it); `None` when
    /// the principal is in no tenant.
    pub fn admit_tenant_connection(
        &self,
        principal: &str,
    ) -> Result<Option<TenantConnection>, CapExceeded> {
        self.tenant_caps
            .admit_connection(&self.security.state(), &self.quotas.load(), principal)
    }

    /// Refuses a produce of `adding` bytes to `topic` while its tenant
    /// stores its `max_stored_bytes` or more (see
    /// [`TenantCaps::check_storage`]).
    pub fn check_tenant_storage(&self, topic: &str, adding: u64) -> Result<(), CapExceeded> {
        let quotas = self.quotas.load();
        if quotas.entries.is_empty() {
            return Ok(());
        }
        let now = std::time::Instant::now();
        self.tenant_caps.check_storage(
            &self.security.state(),
            &quotas,
            topic,
            adding,
            now,
            |tenant| self.stored_bytes_of(tenant),
        )
    }

    /// Bytes the topics in `tenant`'s namespaces store.
    fn stored_bytes_of(&self, tenant: &herald_auth::Tenant) -> u64 {
        self.registry
            .read()
            .by_name
            .iter()
            .filter(|(name, _)| {
                tenant
                    .namespaces
                    .iter()
                    .any(|p| name.starts_with(p.as_str()))
            })
            .flat_map(|(_, topic)| {
                topic
                    .partitions()
                    .iter()
                    .map(|p| p.stats().size_bytes)
                    .collect::<Vec<_>>()
            })
            .sum()
    }

    /// [`Broker::alter_quotas`] where it belongs: on a cluster's node,
    /// through the metadata log, on every node alike (a validation alone
    /// stays here).
    pub async fn change_quotas(
        &self,
        entries: Vec<(QuotaEntity, Vec<QuotaOp>)>,
        validate_only: bool,
    ) -> Result<Vec<Result<(), QuotaError>>, BrokerError> {
        #[cfg(feature = "cluster")]
        if let Some(cluster) = self.cluster.get() {
            if !validate_only {
                return cluster.change_quotas(entries).await;
            }
        }
        self.alter_quotas(entries, validate_only)
    }

    /// AlterClientQuotas: each entry's changes are checked on their own
    /// (as Kafka does); the valid ones are persisted together, unless
    /// `validate_only`. Answers each entry's outcome, in order. On a
    /// cluster's node, only the metadata log calls it.
    pub fn alter_quotas(
        &self,
        entries: Vec<(QuotaEntity, Vec<QuotaOp>)>,
        validate_only: bool,
    ) -> Result<Vec<Result<(), QuotaError>>, BrokerError> {
        let mut admin = self.admin.lock();
        let mut next = admin.metadata.clone();
        let outcomes: Vec<Result<(), QuotaError>> = entries
            .iter()
            .map(|(entity, ops)| next.quotas.alter(entity, ops))
            .collect();
        if validate_only || outcomes.iter().all(Result::is_err) {
            return Ok(outcomes);
        }
        admin.store.save(&next)?;
        self.quotas.store(Arc::new(next.quotas.clone()));
        admin.metadata = next;
        Ok(outcomes)
    }

    /// Who may do what: credentials, ACLs, tenants, namespaces.
    pub fn security(&self) -> &Security {
        &self.security
    }

    /// Applies a change to the security state: persisted in the metadata
    /// before it is published (and before the authorizer sees it), or
    /// refused with nothing changed.
    pub fn apply_security(&self, command: SecurityCommand) -> Result<Applied, BrokerError> {
        self.apply_security_all(vec![command])
            .map(|mut applied| applied.remove(0))
    }

    /// Applies security changes where they belong: on a cluster's node,
    /// through the metadata log, on every node alike; otherwise here
    /// ([`Broker::apply_security_all`]). All or none.
    pub async fn change_security(
        &self,
        commands: Vec<SecurityCommand>,
    ) -> Result<Vec<Applied>, BrokerError> {
        #[cfg(feature = "cluster")]
        if let Some(cluster) = self.cluster.get() {
            return cluster.change_security(commands).await;
        }
        self.apply_security_all(commands)
    }

    /// Applies several changes as one: all persisted together, or none
    /// when one is refused. On a cluster's node, only the metadata log
    /// calls it (see [`Broker::change_security`]).
    pub fn apply_security_all(
        &self,
        commands: Vec<SecurityCommand>,
    ) -> Result<Vec<Applied>, BrokerError> {
        let mut admin = self.admin.lock();
        let mut next = admin.metadata.clone();
        let applied = commands
            .into_iter()
            .map(|c| next.security.apply(c))
            .collect::<Result<Vec<_>, _>>()?;
        let namespaces_changed = next.security.namespaces != admin.metadata.security.namespaces;
        let inheriting = if namespaces_changed {
            self.check_inheritance(&next.security)?
        } else {
            Vec::new()
        };
        admin.store.save(&next)?;
        self.security.publish(next.security.clone());
        admin.metadata = next;
        for (topic, config) in inheriting {
            self.set_topic_config(&topic, config);
        }
        Ok(applied)
    }

    /// The topics whose inherited configs `state`'s namespaces change,
    /// with their configs under it; refused if a namespace's configs are
    /// not valid, or do not fit one of its topics.
    fn check_inheritance(
        &self,
        state: &SecurityState,
    ) -> Result<Vec<(Arc<Topic>, TopicConfig)>, BrokerError> {
        let defaults = &self.config.log_defaults;
        for namespace in state.namespaces.values() {
            TopicConfig::from_pairs(
                namespace
                    .configs
                    .iter()
                    .map(|(k, v)| (k.as_str(), v.as_str())),
                defaults,
            )
            .map_err(|e| in_namespace(&namespace.prefix, e))?;
        }
        let mut changed = Vec::new();
        for topic in self.topics() {
            let now = topic.config();
            let next = now.inheriting(inherited_configs(state, topic.name()));
            if next != now {
                next.log_config(defaults)
                    .map_err(|e| BrokerError::InvalidConfig {
                        key: "namespace".into(),
                        value: topic.name().to_owned(),
                        reason: format!(
                            "the namespace's configs do not fit topic {}: {e}",
                            topic.name()
                        ),
                    })?;
                changed.push((topic, next));
            }
        }
        Ok(changed)
    }

    /// Puts a checked config in force on a topic and its partitions.
    fn set_topic_config(&self, topic: &Topic, config: TopicConfig) {
        match config.log_config(&self.config.log_defaults) {
            Ok(log_config) => {
                for partition in topic.partitions().iter() {
                    if let Err(e) = partition.update_config(log_config.clone()) {
                        tracing::error!(topic = topic.name(), error = %e, "partition refused the namespace's configs");
                    }
                }
                topic.set_config(config);
                tracing::info!(topic = topic.name(), "topic configs follow its namespace");
            }
            Err(e) => {
                tracing::error!(topic = topic.name(), error = %e, "the namespace's configs do not fit the topic");
            }
        }
    }

    /// Stops the group coordinator, then flushes and closes every partition
    /// log. Appends fail afterwards.
    pub fn close(&self) -> Result<(), BrokerError> {
        let mut first_error = None;
        if let Err(e) = self.groups.close() {
            tracing::error!(error = %e, "closing the group coordinator failed");
            first_error = Some(e);
        }
        for topic in self.topics() {
            for partition in topic.partitions().iter() {
                if let Err(e) = partition.save_producer_snapshot() {
                    // Only costs restart time: the log is replayed instead.
                    tracing::warn!(topic = topic.name(), partition = partition.index(), error = %e, "producer snapshot not written");
                }
                if let Err(source) = partition.close() {
                    tracing::error!(topic = topic.name(), partition = partition.index(), error = %source, "closing log failed");
                    first_error.get_or_insert(BrokerError::Log {
                        topic: topic.name().to_owned(),
                        partition: partition.index(),
                        source,
                    });
                }
            }
        }
        first_error.map_or(Ok(()), Err)
    }
}

fn check_partition_count(topic: &str, count: u32) -> Result<(), BrokerError> {
    if count == 0 || count > PARTITIONS_MAX {
        return Err(BrokerError::InvalidPartitions {
            topic: topic.to_owned(),
            requested: count.into(),
            reason: format!("must be between 1 and {PARTITIONS_MAX}"),
        });
    }
    Ok(())
}

/// The metadata's secret for decoy credentials, made (and saved) on the
/// first open that has none.
/// The configs a topic named `name` inherits: its namespace's, if any.
fn inherited_configs(state: &SecurityState, name: &str) -> BTreeMap<String, String> {
    state
        .namespace_of(name)
        .map(|n| n.configs.clone())
        .unwrap_or_default()
}

/// A namespace config refused, named as the namespace's.
fn in_namespace(prefix: &str, error: BrokerError) -> BrokerError {
    match error {
        BrokerError::InvalidConfig { key, value, reason } => BrokerError::InvalidConfig {
            key,
            value,
            reason: format!("{reason} (in namespace {prefix})"),
        },
        other => other,
    }
}

fn security_secret(store: &MetadataStore, metadata: &mut Metadata) -> Result<Vec<u8>, BrokerError> {
    use base64::engine::general_purpose::STANDARD;
    use base64::Engine as _;
    if let Some(secret) = metadata
        .security_secret
        .as_deref()
        .and_then(|s| STANDARD.decode(s).ok())
        .filter(|s| !s.is_empty())
    {
        return Ok(secret);
    }
    let mut secret = vec![0u8; 32];
    getrandom::fill(&mut secret).map_err(|e| BrokerError::Random(e.to_string()))?;
    metadata.security_secret = Some(STANDARD.encode(&secret));
    store.save(metadata)?;
    Ok(secret)
}

/// Each topic's name and partition count, as the metadata records them.
fn partition_counts(metadata: &Metadata) -> impl Iterator<Item = (&str, u64)> {
    metadata
        .topics
        .values()
        .map(|t| (t.name.as_str(), u64::from(t.partitions)))
}
