//! A cluster of herald nodes (feature `cluster`).
//!
//! Every node runs one Raft listener for all its groups. The cluster's
//! metadata is a Raft group of every node (group [`METADATA_GROUP`]), whose
//! log is a herald partition like any other: its entries are commands,
//! applied in order on every node. A topic is created by a command that
//! names each partition's replicas and Raft group; every node then opens
//! its own replicas (and initializes a group's membership if it is the
//! partition's first replica) and notes where the others are. When a
//! replica becomes its group's leader it announces so through the metadata
//! log, so that every node can tell clients where each partition's leader
//! is, as Kafka's controller does.
//!
//! The announcements also tell a node where to forward a write it does
//! not lead (a push publish: see `forwarding`).
//!
//! The metadata log also creates the cluster's replicated offsets
//! partitions, once, whose leaders coordinate the consumer groups (see
//! `offset_shards`).
//!
//! What the metadata log carries so far: topic creation, growth, config
//! changes and deletion, reassignments, the offsets partitions, nodes
//! added and removed while the cluster runs (`membership`), and leader
//! and in-sync announcements. ACLs and quotas stay node-local.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use herald_log::{FlushPolicy, LogConfig};
use herald_raft::network::{GroupRouter, MAX_FRAME_BYTES};
use herald_raft::openraft::{BasicNode, ChangeMembers};
use herald_raft::PartitionReplica;
pub use herald_raft::RaftTiming;
use herald_records::{BatchBuilder, RecordFields};
use serde::{Deserialize, Serialize};
use tokio::net::TcpListener;
use tokio::sync::{mpsc, oneshot};
use tokio_util::sync::CancellationToken;
use uuid::Uuid;

use crate::broker::{Broker, NodeAddress, TopicSummary};
pub use crate::cluster_nodes::ClusterNode;
use crate::cluster_nodes::{self, ClusterNodes};
use crate::error::BrokerError;
use crate::forwarding::Forwarder;
use crate::groups::OFFSETS_TOPIC;
use crate::in_sync::{FollowerProgress, InSyncTracker};
use crate::metadata_store::{ReplicaAssignment, TopicRecord};
use crate::offset_shards::OffsetShards;
use crate::partition::{LeaderHints, Partition, ReplicaSet};
use crate::producer_state::ProducerStates;
use crate::replicated_producers::{apply_hook, InFlight};
use crate::storage::{without_retention, RaftStorage};
use crate::topic::partition_dir;

mod image;
mod membership;
mod offsets_moves;
mod quorum;

pub use quorum::{QuorumMember, QuorumView};

/// The Raft group of the cluster's metadata.
pub const METADATA_GROUP: u64 = 0;

/// How long a metadata change may take to commit before it is reported
/// as failed (the cluster may have no quorum).
const METADATA_PATIENCE: Duration = Duration::from_secs(15);

/// How long a partition's leader works on one step of a reassignment
/// (adding and catching up the new replicas, changing the voters) before
/// it looks again at what is pending: a new replica still catching up
/// goes on doing so, and a cancelled move is undone.
const REASSIGNMENT_STEP: Duration = Duration::from_secs(10);

/// What a node needs to know to join its cluster.
#[derive(Debug, Clone)]
pub struct ClusterConfig {
    /// This node's id (its Kafka broker id too).
    pub node_id: u64,
    /// Where this node's Raft listener binds.
    pub listen: SocketAddr,
    /// The nodes configured: every node, this one included; for a node
    /// joining a running cluster, those it knows of (possibly none).
    pub nodes: BTreeMap<u64, ClusterNode>,
    /// This node joins a running cluster: it initializes nothing and
    /// waits to be added (`Cluster::add_node`, from any member).
    pub join: bool,
    /// Raft's heartbeat and election timing.
    pub timing: RaftTiming,
    /// Replicas of a topic created without a replication factor.
    pub default_replication_factor: u16,
    /// How long a follower may go without holding what its leader held
    /// (or without answering it) before it leaves the partition's in-sync
    /// replicas: Kafka's `replica.lag.time.max.ms`.
    pub replica_lag_max: Duration,
    /// Offsets partitions the cluster creates at its first start (Kafka's
    /// `offsets.topic.num.partitions`); the groups are spread over them.
    pub offsets_partitions: u32,
    /// Replicas of each offsets partition (Kafka's
    /// `offsets.topic.replication.factor`), at most the node count.
    pub offsets_replication_factor: u16,
    /// Bytes of commands the metadata log takes after its last image
    /// before the group's leader writes a new one and drops what precedes
    /// it (Kafka's `metadata.log.max.record.bytes.between.snapshots`);
    /// also never less than the last image's own size.
    pub metadata_image_bytes: u64,
}

/// Why the cluster could not start.
#[derive(Debug, thiserror::Error)]
pub enum ClusterError {
    /// The configuration does not describe a cluster this node is in.
    #[error("invalid cluster configuration: {0}")]
    Config(String),
    /// The Raft listener could not bind.
    #[error("binding the Raft listener on {addr}: {source}")]
    Bind {
        /// The address.
        addr: SocketAddr,
        /// Why.
        source: std::io::Error,
    },
    /// The metadata replica could not open.
    #[error("opening the cluster metadata: {0}")]
    Metadata(#[from] herald_raft::ReplicaError),
}

/// A change to the cluster's metadata, as its log stores it.
#[derive(Debug, Clone, Serialize, Deserialize)]
enum Command {
    /// A topic, with each partition's replicas.
    CreateTopic {
        /// Names the proposer's wait (not part of the state).
        request: u128,
        /// The topic.
        record: TopicRecord,
    },
    /// A topic deleted.
    DeleteTopic {
        /// Names the proposer's wait (not part of the state).
        request: u128,
        /// Its name.
        name: String,
        /// Its id (a topic of the same name created since is kept).
        id: Uuid,
    },
    /// Partitions added to a topic.
    AddPartitions {
        /// Names the proposer's wait (not part of the state).
        request: u128,
        /// The topic.
        name: String,
        /// Its id.
        id: Uuid,
        /// The partition count the proposer saw: applied only if the topic
        /// still has it, so two concurrent growths cannot both apply.
        from: u32,
        /// The new partitions' Raft groups and replicas, in order.
        replicas: Vec<ReplicaAssignment>,
    },
    /// A topic's config overrides replaced.
    AlterTopicConfig {
        /// Names the proposer's wait (not part of the state).
        request: u128,
        /// The topic.
        name: String,
        /// Its id.
        id: Uuid,
        /// Every override the topic has from now on.
        configs: BTreeMap<String, String>,
    },
    /// A partition's replicas are to become `target`: its group's leader
    /// adds the new ones as learners, then makes `target` the voters.
    Reassign {
        /// Names the proposer's wait (not part of the state).
        request: u128,
        /// The topic.
        name: String,
        /// Its id.
        id: Uuid,
        /// The partition.
        partition: u32,
        /// Its Raft group.
        group: u64,
        /// The replicas it is to have, the preferred leader first.
        target: Vec<u64>,
    },
    /// The reassignment of `group` in progress is cancelled: the
    /// partition's replicas are to be those it had before it (the
    /// replicas it added are dropped), as Kafka's AlterPartitionReassignments
    /// without replicas asks.
    ReassignCancel {
        /// Names the proposer's wait (not part of the state).
        request: u128,
        /// The topic.
        name: String,
        /// The partition.
        partition: u32,
        /// Its Raft group.
        group: u64,
    },
    /// A reassignment's membership change committed: `nodes` are the
    /// partition's replicas. Applied only while they are the pending
    /// reassignment's target (a membership change that completed as its
    /// reassignment was cancelled is undone by the next).
    ReassignDone {
        /// The topic.
        name: String,
        /// Its id.
        id: Uuid,
        /// The partition.
        partition: u32,
        /// Its Raft group.
        group: u64,
        /// Its replicas now.
        nodes: Vec<u64>,
    },
    /// A node is to be added: the metadata group's leader makes it a
    /// learner, waits for it to catch up, makes it a voter, then records
    /// `NodeAdded`.
    AddNode {
        /// Names the proposer's wait (not part of the state).
        request: u128,
        /// Its id.
        node_id: u64,
        /// Its addresses.
        node: ClusterNode,
    },
    /// A node became a voter of the metadata group.
    NodeAdded {
        /// The cluster's id, which the new node adopts.
        cluster_id: String,
        /// The node.
        node_id: u64,
        /// Every node from now on (the first nodes are recorded here too,
        /// so that the new node learns their Kafka addresses).
        nodes: BTreeMap<u64, ClusterNode>,
    },
    /// A node is to be removed: the metadata group's leader takes it out
    /// of the group's membership, then records `NodeRemoved`.
    RemoveNode {
        /// Names the proposer's wait (not part of the state).
        request: u128,
        /// Its id.
        node_id: u64,
    },
    /// A node left the metadata group: no node lists it any more.
    NodeRemoved {
        /// The node.
        node_id: u64,
    },
    /// A replica became its group's leader.
    LeaderChange {
        /// The group.
        group: u64,
        /// The leader's node id.
        leader: u64,
        /// Its term.
        term: u64,
    },
    /// The cluster's offsets partitions, in partition order (the first
    /// applied is kept).
    CreateOffsets {
        /// Names the proposer's wait (not part of the state).
        request: u128,
        /// Each partition's Raft group and replicas.
        partitions: Vec<ReplicaAssignment>,
    },
    /// Changes to who may do what (SCRAM credentials, ACLs, tenants,
    /// namespaces), applied as one on every node.
    Security {
        /// Names the proposer's wait (not part of the state).
        request: u128,
        /// The changes.
        commands: Vec<herald_auth::SecurityCommand>,
    },
    /// Client quota and tenant SLA changes, applied on every node.
    Quotas {
        /// Names the proposer's wait (not part of the state).
        request: u128,
        /// Each entity's changes.
        entries: Vec<(herald_flow::QuotaEntity, Vec<herald_flow::QuotaOp>)>,
    },
    /// A node's Kafka listeners, by name, with the address each tells its
    /// clients: a client of listener `L` on any node is told every node's
    /// `L` address, as Kafka's brokers register their endpoints.
    NodeEndpoints {
        /// The node.
        node_id: u64,
        /// Listener name to advertised `host:port`.
        endpoints: BTreeMap<String, String>,
    },
    /// A group's leader found its in-sync replicas changed.
    InSyncChange {
        /// The group.
        group: u64,
        /// The announcing leader's term.
        term: u64,
        /// The in-sync replicas, the leader included, sorted.
        replicas: Vec<u64>,
    },
    /// The whole state the commands up to entry `as_of` left (see
    /// `cluster/image.rs`): a node that starts applying the log here
    /// takes it; one that applied everything before passes over it.
    Image {
        /// The last metadata entry the image covers: valid only if no
        /// entry with commands lies between it and the image.
        as_of: u64,
        /// The state.
        image: Box<image::MetadataImage>,
    },
}

/// A metadata entry Raft applied, on its way to the applying task.
struct AppliedEntry {
    /// Its Raft index.
    index: u64,
    /// Where its batch starts in the metadata log.
    offset: Option<u64>,
    /// The batch.
    batch: Bytes,
}

/// What applying a proposer's command gave.
#[derive(Debug)]
enum Applied {
    /// A topic created.
    Created(TopicSummary),
    /// A topic deleted.
    Deleted(Uuid),
    /// The offsets partitions exist (created by this command or earlier).
    OffsetsCreated,
    /// A topic's partitions added (its new count) or config changed.
    Altered,
    /// Security changes applied, each with what it came to.
    Secured(Vec<herald_auth::Applied>),
    /// Quota changes applied, each entity's outcome.
    Quotas(Vec<Result<(), herald_flow::QuotaError>>),
}

/// A node's Kafka listeners: name to advertised host and port.
type Endpoints = BTreeMap<String, (String, u16)>;

/// This node's membership of a cluster.
pub struct Cluster {
    /// The cluster id every node reports: derived from the configured
    /// node list at the cluster's first start (so that nodes configured
    /// alike agree without talking) and kept; a joining node adopts it.
    /// Unset on a joining node until it is added.
    id: std::sync::OnceLock<String>,
    config: ClusterConfig,
    /// Every node, as configured and as the metadata log added them.
    nodes: Arc<ClusterNodes>,
    /// Nodes being added, not yet voters of the metadata group.
    joins: parking_lot::Mutex<BTreeMap<u64, ClusterNode>>,
    /// Nodes being removed from the metadata group.
    removals: parking_lot::Mutex<std::collections::BTreeSet<u64>>,
    /// Bumped each time a node is added or removed, or an addition or
    /// removal is recorded.
    node_changes: tokio::sync::watch::Sender<u64>,
    router: GroupRouter,
    metadata: PartitionReplica,
    hints: Arc<LeaderHints>,
    /// The replicated offsets partitions and their coordinators.
    offsets: Arc<OffsetShards>,
    /// Carries writes to partitions this node does not lead (push
    /// publishes) to their leaders.
    forwarder: Arc<Forwarder>,
    /// Reassignments started and not completed, by Raft group.
    reassignments: parking_lot::Mutex<BTreeMap<u64, Reassignment>>,
    /// The replica (by address) whose task drives each group's move here:
    /// one task per group, which a later replica of the group supersedes.
    /// Locked after `reassignments` where both are held.
    drivers: parking_lot::Mutex<HashMap<u64, usize>>,
    /// Proposers waiting for their command to be applied here.
    waiting: parking_lot::Mutex<HashMap<u128, oneshot::Sender<Result<Applied, BrokerError>>>>,
    /// Every node's Kafka listeners by name, as the nodes advertised them.
    endpoints: parking_lot::RwLock<BTreeMap<u64, Endpoints>>,
    /// The index of the last metadata entry whose commands this node
    /// applied.
    applied_through: tokio::sync::watch::Sender<u64>,
    /// The metadata log's commit index when this node started (none on a
    /// first start): applying the log again up to it restores what the
    /// node knew.
    committed_at_start: Option<u64>,
    /// The index of the last metadata entry Raft handed to the applying
    /// task.
    handed_over: Arc<std::sync::atomic::AtomicU64>,
    /// Held while one metadata entry's commands are applied, and while an
    /// image is taken: an image sees the state between two entries.
    applying: tokio::sync::Mutex<()>,
    /// The last image applied and what was applied since.
    images: parking_lot::Mutex<image::ImageProgress>,
    stop: CancellationToken,
}

impl std::fmt::Debug for Cluster {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Cluster")
            .field("node_id", &self.config.node_id)
            .field("nodes", &self.nodes.len())
            .finish_non_exhaustive()
    }
}

fn metadata_log_config() -> LogConfig {
    LogConfig {
        segment_bytes: 64 * 1024 * 1024,
        max_batch_bytes: (MAX_FRAME_BYTES / 2) as u32,
        preallocate_bytes: 1024 * 1024,
        flush: FlushPolicy::Never,
        retention_age: None,
        retention_bytes: None,
        ..LogConfig::default()
    }
}

fn raft_members(nodes: &[u64], all: &ClusterNodes) -> BTreeMap<u64, BasicNode> {
    nodes
        .iter()
        .filter_map(|id| all.raft_address(*id).map(|addr| (*id, BasicNode { addr })))
        .collect()
}

impl Cluster {
    /// Joins `broker` to the cluster `config` describes: binds the Raft
    /// listener, opens the metadata replica and starts applying its log.
    pub async fn start(
        broker: Arc<Broker>,
        config: ClusterConfig,
    ) -> Result<Arc<Cluster>, ClusterError> {
        if !config.join && !config.nodes.contains_key(&config.node_id) {
            return Err(ClusterError::Config(format!(
                "node {} is not among the cluster's nodes",
                config.node_id
            )));
        }
        if i32::try_from(config.node_id).ok() != Some(broker.node_id()) {
            return Err(ClusterError::Config(format!(
                "the cluster node id {} differs from the broker's node id {}",
                config.node_id,
                broker.node_id()
            )));
        }
        let listener =
            TcpListener::bind(config.listen)
                .await
                .map_err(|source| ClusterError::Bind {
                    addr: config.listen,
                    source,
                })?;
        let router = GroupRouter::with_source(config.listen.ip());
        let stop = CancellationToken::new();
        tokio::spawn(router.clone().serve(listener, stop.clone()));
        let (commands, mut applied) = mpsc::unbounded_channel::<AppliedEntry>();
        let handed_over = Arc::new(std::sync::atomic::AtomicU64::new(0));
        let handing = Arc::clone(&handed_over);
        let hook: herald_raft::state_machine::ApplyHook = Arc::new(move |id, batch, placed| {
            handing.store(id.index, std::sync::atomic::Ordering::Release);
            let _ = commands.send(AppliedEntry {
                index: id.index,
                offset: placed.map(|p| p.base_offset),
                batch: batch.bytes().clone(),
            });
        });
        let dir = broker.config().data_dir.join("__cluster").join("metadata");
        std::fs::create_dir_all(&dir)
            .map_err(|e| ClusterError::Config(format!("creating {}: {e}", dir.display())))?;
        let metadata = PartitionReplica::open_with_hook(
            config.node_id,
            METADATA_GROUP,
            &dir,
            metadata_log_config(),
            config.timing,
            &router,
            Some(hook),
        )
        .await?;
        let committed_at_start = metadata.committed_at_open();
        let nodes = Arc::new(ClusterNodes::new(config.nodes.clone()));
        let data_dir = broker.config().data_dir.clone();
        let stored_id =
            cluster_nodes::stored_id(&data_dir).map_err(|e| ClusterError::Config(e.to_string()))?;
        let id = std::sync::OnceLock::new();
        match stored_id {
            Some(stored) => {
                let _ = id.set(stored);
            }
            // A joining node is given the id when it is added.
            None if config.join => {}
            None => {
                let derived = cluster_nodes::derived_id(&config.nodes);
                cluster_nodes::store_id(&data_dir, &derived)
                    .map_err(|e| ClusterError::Config(e.to_string()))?;
                let _ = id.set(derived);
            }
        }
        if !config.join {
            // Every node proposes the same first membership; whichever
            // wins, the others find the group initialized.
            if let Err(e) = metadata
                .raft()
                .initialize(raft_members(&nodes.ids(), &nodes))
                .await
            {
                tracing::debug!(error = %e, "cluster metadata already initialized");
            }
        }
        let forwarder = Arc::new(Forwarder::new(Arc::clone(&nodes), router.source()));
        let hints = Arc::new(LeaderHints::default());
        let mut group_config = broker.config().groups.clone();
        group_config.member_id_seed =
            random_u64().map_err(|e| ClusterError::Config(format!("seeding member ids: {e}")))?;
        let offsets = Arc::new(OffsetShards::new(
            config.node_id,
            group_config,
            Arc::clone(&hints),
            stop.clone(),
        ));
        broker.groups().set_shards(Arc::clone(&offsets));
        let cluster = Arc::new(Cluster {
            id,
            config,
            nodes,
            joins: parking_lot::Mutex::new(BTreeMap::new()),
            removals: parking_lot::Mutex::new(std::collections::BTreeSet::new()),
            node_changes: tokio::sync::watch::Sender::new(0),
            router,
            metadata,
            hints,
            offsets,
            reassignments: parking_lot::Mutex::new(BTreeMap::new()),
            drivers: parking_lot::Mutex::new(HashMap::new()),
            forwarder,
            waiting: parking_lot::Mutex::new(HashMap::new()),
            endpoints: parking_lot::RwLock::new(BTreeMap::new()),
            applied_through: tokio::sync::watch::Sender::new(0),
            handed_over,
            committed_at_start,
            applying: tokio::sync::Mutex::new(()),
            images: parking_lot::Mutex::new(image::ImageProgress::default()),
            stop,
        });
        broker.set_cluster(Arc::clone(&cluster));
        tokio::spawn(Arc::clone(&cluster).write_images_while_leading(Arc::downgrade(&broker)));
        let applier = Arc::clone(&cluster);
        tokio::spawn(async move {
            while let Some(entry) = applied.recv().await {
                applier.apply_entry(&broker, entry).await;
            }
        });
        tokio::spawn(Arc::clone(&cluster).create_offsets_once());
        tokio::spawn(Arc::clone(&cluster).change_nodes_while_leading());
        tracing::info!(
            node_id = cluster.config.node_id,
            nodes = cluster.nodes.len(),
            raft = %cluster.config.listen,
            joining = cluster.config.join,
            "cluster node started"
        );
        Ok(cluster)
    }

    /// Creates the offsets partitions through the metadata log unless they
    /// exist: proposed by the metadata group's leader once it has applied
    /// an entry of its term (so a creation from an earlier start is known
    /// by then, or about to be applied, in which case a second one changes
    /// nothing).
    async fn create_offsets_once(self: Arc<Self>) {
        use herald_raft::openraft::async_runtime::WatchReceiver;
        let mut metrics = self.metadata.raft().metrics();
        loop {
            if self.offsets.installed() {
                return;
            }
            if self.metadata.is_leader() && self.metadata.caught_up() {
                match self.propose_offsets().await {
                    Ok(()) => return,
                    Err(e) => {
                        tracing::warn!(error = %e, "creating the offsets partitions failed; retrying")
                    }
                }
            }
            tokio::select! {
                _ = self.stop.cancelled() => return,
                _ = metrics.changed() => {}
                _ = tokio::time::sleep(Duration::from_millis(500)) => {}
            }
        }
    }

    async fn propose_offsets(&self) -> Result<(), BrokerError> {
        let nodes = self.placeable_nodes();
        let factor =
            usize::from(self.config.offsets_replication_factor).clamp(1, nodes.len().max(1));
        let partitions = place_replicas(&nodes, factor, 0..self.config.offsets_partitions.max(1))?;
        let request = Uuid::new_v4().as_u128();
        self.propose_and_wait(
            request,
            Command::CreateOffsets {
                request,
                partitions,
            },
        )
        .await
        .map(|_| ())
    }

    /// Opens this node's replicas of the offsets partitions and hands them
    /// to the coordinators' shards, unless partitions were created before.
    async fn install_offsets(
        self: &Arc<Self>,
        broker: &Broker,
        partitions: Vec<ReplicaAssignment>,
    ) -> Result<(), BrokerError> {
        if self.offsets.installed() {
            return Ok(());
        }
        let me = self.config.node_id;
        let mut replicas = Vec::with_capacity(partitions.len());
        let data_dir = &broker.config().data_dir;
        for (index, assignment) in partitions.iter().enumerate() {
            // A replica a reassignment moved away is not opened again when
            // the metadata log is applied from the start.
            if !assignment.nodes.contains(&me) || moved_away(data_dir, assignment.group).exists() {
                replicas.push(None);
                continue;
            }
            let replica = self
                .open_offsets_replica(data_dir, index, assignment, true)
                .await?;
            replicas.push(Some(replica));
        }
        if self.offsets.install(&partitions, replicas) {
            tracing::info!(
                partitions = partitions.len(),
                "the cluster's offsets partitions are open"
            );
        }
        Ok(())
    }

    /// The cluster id (empty on a node waiting to be added).
    pub fn id(&self) -> &str {
        self.id.get().map_or("", String::as_str)
    }

    /// Every node, with its Kafka address.
    pub fn nodes(&self) -> Vec<NodeAddress> {
        self.nodes_for(None)
    }

    /// Every node's address for clients of listener `listener`: the one
    /// the node advertised for a listener of that name, else its
    /// configured Kafka address.
    pub fn nodes_for(&self, listener: Option<&str>) -> Vec<NodeAddress> {
        let endpoints = self.endpoints.read();
        self.nodes
            .all()
            .iter()
            .map(|(id, n)| {
                let advertised = listener
                    .and_then(|name| endpoints.get(id).and_then(|e| e.get(name)))
                    .cloned();
                let (host, port) = advertised.unwrap_or((n.kafka_host.clone(), n.kafka_port));
                NodeAddress {
                    id: *id as i32,
                    host,
                    port,
                }
            })
            .collect()
    }

    /// Records this node's Kafka listeners in the metadata log (see
    /// `NodeEndpoints`), in the background and until it is done, unless
    /// the log holds them already.
    pub fn advertise_endpoints(self: &Arc<Self>, endpoints: Vec<(String, String, u16)>) {
        let me = self.config.node_id;
        let wanted: Endpoints = endpoints
            .into_iter()
            .map(|(name, host, port)| (name, (host, port)))
            .collect();
        let cluster = Arc::clone(self);
        tokio::spawn(async move {
            loop {
                if cluster.endpoints.read().get(&me) == Some(&wanted) {
                    return;
                }
                let command = Command::NodeEndpoints {
                    node_id: me,
                    endpoints: advertised(&wanted),
                };
                if let Err(e) = cluster.propose(&command).await {
                    tracing::debug!(error = %e, "advertising the listeners waits for the metadata log");
                }
                tokio::select! {
                    () = cluster.stop.cancelled() => return,
                    () = tokio::time::sleep(std::time::Duration::from_secs(1)) => {}
                }
            }
        });
    }

    /// The metadata group's leader as this node knows it: the cluster's
    /// controller, in Kafka's terms.
    pub fn controller(&self) -> Option<u64> {
        self.metadata.leader()
    }

    /// Creates a topic of `partitions` partitions, each with
    /// `replication_factor` replicas (-1: the default), through the
    /// metadata log; answers once this node has applied it.
    pub async fn create_topic(
        &self,
        broker: &Broker,
        name: &str,
        partitions: Option<u32>,
        replication_factor: i16,
        configs: &[(String, String)],
        validate_only: bool,
    ) -> Result<TopicSummary, BrokerError> {
        let summary = broker.create_topic(name, partitions, configs, true)?;
        let nodes = self.placeable_nodes();
        let factor = match replication_factor {
            -1 => usize::from(self.config.default_replication_factor).min(nodes.len()),
            n if n >= 1 && (n as usize) <= nodes.len() => n as usize,
            n => {
                return Err(BrokerError::InvalidReplicationFactor {
                    requested: n,
                    nodes: nodes.len(),
                })
            }
        };
        if validate_only {
            return Ok(summary);
        }
        let replicas = place_replicas(&nodes, factor, 0..summary.partitions)?;
        let record = TopicRecord {
            name: name.to_owned(),
            id: Uuid::new_v4(),
            partitions: summary.partitions,
            configs: summary.config.overrides().clone(),
            replicas: Some(replicas),
        };
        let request = Uuid::new_v4().as_u128();
        match self
            .propose_and_wait(request, Command::CreateTopic { request, record })
            .await?
        {
            Applied::Created(summary) => Ok(summary),
            _ => Err(BrokerError::ClusterUnavailable(
                "a creation was answered as something else".to_owned(),
            )),
        }
    }

    /// Deletes topic `name` through the metadata log; answers once this
    /// node has applied it (its replicas stopped, its data set aside).
    pub async fn delete_topic(&self, broker: &Broker, name: &str) -> Result<Uuid, BrokerError> {
        let topic = broker
            .topic(name)
            .ok_or_else(|| BrokerError::UnknownTopic {
                name: name.to_owned(),
            })?;
        let request = Uuid::new_v4().as_u128();
        let command = Command::DeleteTopic {
            request,
            name: name.to_owned(),
            id: topic.id(),
        };
        match self.propose_and_wait(request, command).await? {
            Applied::Deleted(id) => Ok(id),
            _ => Err(BrokerError::ClusterUnavailable(
                "a deletion was answered as something else".to_owned(),
            )),
        }
    }

    /// Grows topic `name` to `total` partitions through the metadata log,
    /// each new partition with as many replicas as the topic's first
    /// (Kafka keeps a topic's replication factor too); answers once this
    /// node has applied it.
    pub async fn create_partitions(
        &self,
        broker: &Broker,
        name: &str,
        total: u32,
        validate_only: bool,
    ) -> Result<(), BrokerError> {
        let record = broker.topic_growth(name, total)?;
        if validate_only {
            return Ok(());
        }
        let nodes = self.placeable_nodes();
        let factor = record
            .replicas
            .as_ref()
            .and_then(|r| r.first())
            .map_or(1, |a| a.nodes.len())
            .clamp(1, nodes.len().max(1));
        let replicas = place_replicas(&nodes, factor, record.partitions..total)?;
        let request = Uuid::new_v4().as_u128();
        let command = Command::AddPartitions {
            request,
            name: name.to_owned(),
            id: record.id,
            from: record.partitions,
            replicas,
        };
        self.propose_and_wait(request, command).await.map(|_| ())
    }

    /// Applies config `changes` to topic `name` through the metadata log
    /// (checked here first, as on a single node); answers once this node
    /// has applied them.
    pub async fn alter_topic_config(
        &self,
        broker: &Broker,
        name: &str,
        changes: &[crate::ConfigChange],
        replace_all: bool,
        validate_only: bool,
    ) -> Result<(), BrokerError> {
        let config = broker.altered_topic_config(name, changes, replace_all)?;
        if validate_only {
            return Ok(());
        }
        let id = broker
            .topic(name)
            .ok_or_else(|| BrokerError::UnknownTopic {
                name: name.to_owned(),
            })?
            .id();
        let request = Uuid::new_v4().as_u128();
        let command = Command::AlterTopicConfig {
            request,
            name: name.to_owned(),
            id,
            configs: config.overrides().clone(),
        };
        self.propose_and_wait(request, command).await.map(|_| ())
    }

    /// Starts moving partition `partition` of topic `name` to the replicas
    /// `target` (the preferred leader first) through the metadata log, as
    /// Kafka's AlterPartitionReassignments does: answers once the change
    /// is recorded, and the partition's leader carries it out (new
    /// replicas catch up as learners, then the voters change);
    /// [`Cluster::reassignments`] lists it until it completes.
    pub async fn reassign(
        &self,
        broker: &Broker,
        name: &str,
        partition: u32,
        target: Vec<u64>,
    ) -> Result<(), BrokerError> {
        if name == OFFSETS_TOPIC {
            return self.reassign_offsets(partition, target).await;
        }
        let topic = broker
            .topic(name)
            .ok_or_else(|| BrokerError::UnknownTopic {
                name: name.to_owned(),
            })?;
        let unknown = || BrokerError::UnknownPartition {
            topic: name.to_owned(),
            partition: partition as i32,
        };
        let set = topic
            .partition(partition as i32)
            .ok_or_else(unknown)?
            .replica_set()
            .cloned()
            .ok_or_else(unknown)?;
        check_target(&target, &self.placeable_nodes())?;
        // A move in progress is given the new target (Kafka replaces it);
        // the same target again changes nothing.
        let pending = self
            .reassignments
            .lock()
            .get(&set.group)
            .map(|p| p.target.clone());
        if pending.unwrap_or_else(|| set.nodes.get()) == target {
            return Ok(());
        }
        let request = Uuid::new_v4().as_u128();
        let command = Command::Reassign {
            request,
            name: name.to_owned(),
            id: topic.id(),
            partition,
            group: set.group,
            target,
        };
        self.propose_and_wait(request, command).await.map(|_| ())
    }

    /// Cancels the reassignment of partition `partition` of topic `name`
    /// in progress (an offsets partition's too, named as a partition of
    /// `__consumer_offsets`), through the metadata log: the partition goes
    /// back to the replicas it had, those the move added are dropped.
    /// Answers once recorded, as Kafka does; [`Cluster::reassignments`]
    /// lists it until the partition's leader has undone the move.
    pub async fn cancel_reassignment(&self, name: &str, partition: u32) -> Result<(), BrokerError> {
        let group = self
            .reassignments
            .lock()
            .values()
            .find(|r| r.topic == name && r.partition == partition)
            .map(|r| r.group)
            .ok_or_else(|| BrokerError::NoReassignmentInProgress {
                topic: name.to_owned(),
                partition,
            })?;
        let request = Uuid::new_v4().as_u128();
        let command = Command::ReassignCancel {
            request,
            name: name.to_owned(),
            partition,
            group,
        };
        self.propose_and_wait(request, command).await.map(|_| ())
    }

    /// The reassignments started and not completed.
    pub fn reassignments(&self) -> Vec<Reassignment> {
        self.reassignments.lock().values().cloned().collect()
    }

    /// Applies security changes on every node through the metadata log,
    /// all or none (a change one node refuses, every node refuses: they
    /// apply the same changes to the same state). Answers with what each
    /// came to, once applied here.
    pub async fn change_security(
        &self,
        commands: Vec<herald_auth::SecurityCommand>,
    ) -> Result<Vec<herald_auth::Applied>, BrokerError> {
        let request = Uuid::new_v4().as_u128();
        match self
            .propose_and_wait(request, Command::Security { request, commands })
            .await?
        {
            Applied::Secured(applied) => Ok(applied),
            other => Err(BrokerError::ClusterUnavailable(format!(
                "a security change was answered {other:?}"
            ))),
        }
    }

    /// Applies client quota and tenant SLA changes on every node through
    /// the metadata log; answers each entity's outcome once applied here.
    pub async fn change_quotas(
        &self,
        entries: Vec<(herald_flow::QuotaEntity, Vec<herald_flow::QuotaOp>)>,
    ) -> Result<Vec<Result<(), herald_flow::QuotaError>>, BrokerError> {
        let request = Uuid::new_v4().as_u128();
        match self
            .propose_and_wait(request, Command::Quotas { request, entries })
            .await?
        {
            Applied::Quotas(outcomes) => Ok(outcomes),
            other => Err(BrokerError::ClusterUnavailable(format!(
                "a quota change was answered {other:?}"
            ))),
        }
    }

    /// Waits until this node has applied the metadata log again up to
    /// where it was committed when the node started: before that, what
    /// it would serve is an earlier state (topics not yet reopened, ACLs
    /// since deleted). `serve` opens the client listeners after it.
    pub async fn wait_until_replayed(&self) {
        let Some(target) = self.committed_at_start else {
            return;
        };
        // Raft applies its own entries too, which carry no command: first
        // Raft's progress, then the commands it handed over by then.
        let _ = self
            .metadata
            .raft()
            .wait(None)
            .applied_index_at_least(Some(target), "the metadata log replayed")
            .await;
        let handed = self.handed_over.load(std::sync::atomic::Ordering::Acquire);
        let mut applied = self.applied_through.subscribe();
        let _ = applied.wait_for(|&index| index >= handed).await;
        tracing::info!(index = target, "metadata log replayed");
    }

    async fn propose_and_wait(
        &self,
        request: u128,
        command: Command,
    ) -> Result<Applied, BrokerError> {
        let (done, applied) = oneshot::channel();
        self.waiting.lock().insert(request, done);
        if let Err(e) = self.propose(&command).await {
            self.waiting.lock().remove(&request);
            return Err(e);
        }
        match tokio::time::timeout(METADATA_PATIENCE, applied).await {
            Ok(Ok(result)) => result,
            _ => {
                self.waiting.lock().remove(&request);
                Err(BrokerError::ClusterUnavailable(
                    "the change was written but not applied here in time".to_owned(),
                ))
            }
        }
    }

    async fn propose(&self, command: &Command) -> Result<(), BrokerError> {
        let json = serde_json::to_vec(command)
            .map_err(|e| BrokerError::ClusterUnavailable(e.to_string()))?;
        self.propose_json(&json).await
    }

    /// Writes one command, as JSON, to the metadata log (through its
    /// leader) and answers once it is committed.
    async fn propose_json(&self, json: &[u8]) -> Result<(), BrokerError> {
        let mut builder = BatchBuilder::new(now_ms());
        builder.push(RecordFields {
            timestamp_ms: now_ms(),
            key: None,
            value: Some(json),
            headers: &[],
        });
        let batch = builder
            .finish()
            .map_err(|e| BrokerError::ClusterUnavailable(e.to_string()))?;
        self.metadata
            .write(Bytes::from(batch), METADATA_PATIENCE)
            .await
            .map(|_| ())
            .map_err(|e| BrokerError::ClusterUnavailable(e.to_string()))
    }

    /// Applies one committed metadata entry's commands on this node.
    async fn apply_entry(self: &Arc<Self>, broker: &Arc<Broker>, entry: AppliedEntry) {
        let _applying = self.applying.lock().await;
        let previous = *self.applied_through.borrow();
        let mut imaged = false;
        let mut commands = false;
        for command in decode_commands(&entry.batch) {
            match command {
                Command::Image { as_of, image } => {
                    imaged |= self
                        .apply_image(broker, previous, as_of, &entry, *image)
                        .await;
                }
                command => {
                    commands = true;
                    self.apply(broker, command).await;
                }
            }
        }
        if !imaged {
            self.images
                .lock()
                .applied(entry.index, entry.batch.len() as u64, commands);
        }
        self.applied_through.send_replace(entry.index);
    }

    /// Applies one committed command on this node.
    async fn apply(self: &Arc<Self>, broker: &Arc<Broker>, command: Command) {
        match command {
            Command::CreateTopic { request, record } => {
                let result = self.install_topic(broker, record).await;
                if let Err(e) = &result {
                    tracing::warn!(error = %e, "a replicated topic could not be installed");
                }
                if let Some(waiter) = self.waiting.lock().remove(&request) {
                    let _ = waiter.send(result.map(Applied::Created));
                }
            }
            Command::DeleteTopic { request, name, id } => {
                let result = self.remove_topic(broker, &name, id).await;
                if let Some(waiter) = self.waiting.lock().remove(&request) {
                    let _ = waiter.send(result.map(|()| Applied::Deleted(id)));
                }
            }
            Command::AddPartitions {
                request,
                name,
                id,
                from,
                replicas,
            } => {
                let result = self.add_partitions(broker, &name, id, from, replicas).await;
                if let Err(e) = &result {
                    tracing::warn!(topic = name, error = %e, "replicated partitions could not be added");
                }
                if let Some(waiter) = self.waiting.lock().remove(&request) {
                    let _ = waiter.send(result.map(|_| Applied::Altered));
                }
            }
            Command::Reassign {
                request,
                name,
                id,
                partition,
                group,
                target,
            } => {
                let result = self
                    .start_reassignment(broker, &name, id, partition, group, target, &[])
                    .await;
                if let Err(e) = &result {
                    tracing::warn!(topic = name, partition, error = %e, "a reassignment could not start here");
                }
                if let Some(waiter) = self.waiting.lock().remove(&request) {
                    let _ = waiter.send(result.map(|()| Applied::Altered));
                }
            }
            Command::ReassignCancel {
                request,
                name,
                partition,
                group,
            } => {
                let result = match self.reassignments.lock().get_mut(&group) {
                    Some(pending) => {
                        tracing::info!(
                            topic = name,
                            partition,
                            replicas = ?pending.from,
                            "a reassignment is cancelled: the partition goes back to its replicas"
                        );
                        pending.target = pending.from.clone();
                        Ok(Applied::Altered)
                    }
                    None => Err(BrokerError::NoReassignmentInProgress {
                        topic: name.clone(),
                        partition,
                    }),
                };
                if let Some(waiter) = self.waiting.lock().remove(&request) {
                    let _ = waiter.send(result);
                }
            }
            Command::ReassignDone {
                group, ref nodes, ..
            } if self
                .reassignments
                .lock()
                .get(&group)
                .is_none_or(|pending| &pending.target != nodes) =>
            {
                tracing::debug!(
                    group,
                    "a reassignment's end for a target no longer pending is passed over"
                );
            }
            Command::ReassignDone {
                name,
                id,
                partition,
                group,
                nodes,
            } => {
                if let Err(e) = self
                    .finish_reassignment(broker, &name, id, partition, group, nodes)
                    .await
                {
                    tracing::warn!(topic = name, partition, error = %e, "a completed reassignment could not be applied here");
                }
            }
            Command::AlterTopicConfig {
                request,
                name,
                id,
                configs,
            } => {
                let result = broker.set_replicated_topic_config(&name, id, &configs);
                if let Err(e) = &result {
                    tracing::warn!(topic = name, error = %e, "a replicated topic config could not be applied");
                }
                if let Some(waiter) = self.waiting.lock().remove(&request) {
                    let _ = waiter.send(result.map(|()| Applied::Altered));
                }
            }
            Command::Security { request, commands } => {
                let result = broker.apply_security_all(commands);
                if let Err(e) = &result {
                    tracing::debug!(error = %e, "a security change was refused");
                }
                if let Some(waiter) = self.waiting.lock().remove(&request) {
                    let _ = waiter.send(result.map(Applied::Secured));
                }
            }
            Command::NodeEndpoints { node_id, endpoints } => {
                self.endpoints
                    .write()
                    .insert(node_id, parsed_endpoints(endpoints));
            }
            Command::Quotas { request, entries } => {
                let result = broker.alter_quotas(entries, false);
                if let Some(waiter) = self.waiting.lock().remove(&request) {
                    let _ = waiter.send(result.map(Applied::Quotas));
                }
            }
            Command::CreateOffsets {
                request,
                partitions,
            } => {
                let result = self.install_offsets(broker, partitions).await;
                if let Err(e) = &result {
                    tracing::error!(error = %e, "the offsets partitions could not be opened");
                }
                if let Some(waiter) = self.waiting.lock().remove(&request) {
                    let _ = waiter.send(result.map(|()| Applied::OffsetsCreated));
                }
            }
            Command::AddNode {
                request,
                node_id,
                node,
            } => {
                let result = self.record_addition(node_id, node);
                if let Some(waiter) = self.waiting.lock().remove(&request) {
                    let _ = waiter.send(result.map(|()| Applied::Altered));
                }
            }
            Command::NodeAdded {
                cluster_id,
                node_id,
                nodes,
            } => self.node_added(broker, &cluster_id, node_id, &nodes),
            Command::RemoveNode { request, node_id } => {
                let result = self.record_removal(node_id);
                if let Some(waiter) = self.waiting.lock().remove(&request) {
                    let _ = waiter.send(result.map(|()| Applied::Altered));
                }
            }
            Command::NodeRemoved { node_id } => self.node_removed(node_id),
            Command::LeaderChange {
                group,
                leader,
                term,
            } => self.hints.set(group, leader, term),
            Command::InSyncChange {
                group,
                term,
                replicas,
            } => self.hints.set_in_sync(group, term, replicas),
            Command::Image { .. } => {
                tracing::error!("a metadata image came apart from its entry; passed over");
            }
        }
    }

    async fn install_topic(
        self: &Arc<Self>,
        broker: &Arc<Broker>,
        record: TopicRecord,
    ) -> Result<TopicSummary, BrokerError> {
        if broker.topic(&record.name).is_some() {
            return Err(BrokerError::TopicExists {
                name: record.name.clone(),
            });
        }
        let assignments = record.replicas.clone().unwrap_or_default();
        let config = crate::topic_config::TopicConfig::from_pairs(
            record.configs.iter().map(|(k, v)| (k.as_str(), v.as_str())),
            &broker.config().log_defaults,
        )?;
        let mut partitions = Vec::with_capacity(assignments.len());
        for (index, assignment) in assignments.iter().enumerate() {
            partitions.push(
                self.open_partition(
                    broker,
                    &record.name,
                    record.id,
                    index as u32,
                    assignment,
                    &config,
                    Opening::Assigned,
                )
                .await?,
            );
        }
        broker.install_replicated_topic(record, partitions)
    }

    /// Opens this node's view of partition `index` of topic `name`: its
    /// replica if this node holds one, else a partition held elsewhere. A
    /// partition assigned at creation (or growth) is initialized by its
    /// first replica, unless a reassignment moved this node's replica away
    /// since (its tombstone says so: the metadata log is applied again from
    /// the start at every start); a replica a reassignment adds joins the
    /// group's existing membership instead.
    #[allow(clippy::too_many_arguments)]
    async fn open_partition(
        self: &Arc<Self>,
        broker: &Broker,
        name: &str,
        id: Uuid,
        index: u32,
        assignment: &ReplicaAssignment,
        config: &crate::topic_config::TopicConfig,
        opening: Opening,
    ) -> Result<Arc<Partition>, BrokerError> {
        let log_config = &config.log_config(&broker.config().log_defaults)?;
        let data_dir = &broker.config().data_dir;
        let me = self.config.node_id;
        let set = ReplicaSet {
            group: assignment.group,
            nodes: crate::partition::ReplicaNodes::new(assignment.nodes.clone()),
            hints: Arc::clone(&self.hints),
            forwarder: Arc::clone(&self.forwarder),
        };
        let snapshot = crate::producer_snapshot::path(data_dir, id, index);
        let tombstone = moved_away(data_dir, assignment.group);
        if opening == Opening::Joining {
            if let Err(e) = std::fs::remove_file(&tombstone) {
                if e.kind() != std::io::ErrorKind::NotFound {
                    return Err(BrokerError::io("remove", &tombstone, e));
                }
            }
        }
        if !assignment.nodes.contains(&me) || tombstone.exists() {
            return Ok(Arc::new(Partition::elsewhere(
                index,
                set,
                snapshot,
                log_config.max_batch_bytes as usize,
            )));
        }
        let dir: PathBuf = partition_dir(data_dir, name, index);
        // Kept at apply time, on every replica (see
        // `replicated_producers`).
        let producers = Arc::new(ProducerStates::new(
            HashMap::new(),
            broker.config().producers_per_partition_max,
        ));
        let in_flight = Arc::new(InFlight::default());
        let hook = apply_hook(Arc::clone(&producers), Arc::clone(&in_flight));
        let replica = PartitionReplica::open_with_hook(
            me,
            assignment.group,
            &dir,
            without_retention(log_config.clone()),
            self.config.timing,
            &self.router,
            Some(hook),
        )
        .await
        .map_err(|e| BrokerError::ClusterUnavailable(e.to_string()))?;
        replica.set_write_caching(config.write_caching());
        let replica = self
            .start_replica(replica, assignment, opening == Opening::Assigned)
            .await;
        Ok(Arc::new(Partition::replicated(
            index,
            RaftStorage::new(replica, log_config),
            set,
            snapshot,
            producers,
            in_flight,
        )))
    }

    /// Puts a just-opened replica to work: the group's first replica
    /// initializes its membership (when `may_initialize`: a replica a
    /// reassignment adds joins instead), and its leadership is announced.
    async fn start_replica(
        self: &Arc<Self>,
        replica: PartitionReplica,
        assignment: &ReplicaAssignment,
        may_initialize: bool,
    ) -> Arc<PartitionReplica> {
        if may_initialize && assignment.nodes.first() == Some(&self.config.node_id) {
            let members = raft_members(&assignment.nodes, &self.nodes);
            if let Err(e) = replica.raft().initialize(members).await {
                tracing::debug!(group = assignment.group, error = %e, "group already initialized");
            }
        }
        let replica = Arc::new(replica);
        self.announce_leadership(
            assignment.group,
            Arc::clone(&replica),
            assignment.nodes.clone(),
        );
        replica
    }

    /// Adds the partitions an `AddPartitions` command names, if topic
    /// `name` (of id `id`) still has `from` partitions.
    async fn add_partitions(
        self: &Arc<Self>,
        broker: &Arc<Broker>,
        name: &str,
        id: Uuid,
        from: u32,
        replicas: Vec<ReplicaAssignment>,
    ) -> Result<u32, BrokerError> {
        let topic = broker.topic(name).filter(|t| t.id() == id).ok_or_else(|| {
            BrokerError::UnknownTopic {
                name: name.to_owned(),
            }
        })?;
        if topic.partition_count() != from {
            return Err(BrokerError::InvalidPartitions {
                topic: name.to_owned(),
                requested: (from as usize + replicas.len()) as i64,
                reason: format!(
                    "the topic has {} partitions now, not the {from} this change was made for",
                    topic.partition_count()
                ),
            });
        }
        let config = topic.config();
        let mut partitions = Vec::with_capacity(replicas.len());
        for (offset, assignment) in replicas.iter().enumerate() {
            let index = from + offset as u32;
            partitions.push(
                self.open_partition(
                    broker,
                    name,
                    id,
                    index,
                    assignment,
                    &config,
                    Opening::Assigned,
                )
                .await?,
            );
        }
        broker.add_replicated_partitions(name, id, replicas, partitions)
    }

    /// Applies a `Reassign`: records it, opens this node's new replica if
    /// the target adds one here (or `added_before`, from a metadata
    /// image: the nodes earlier targets of the move added), and has every
    /// replica watch for the moment it leads the group, to carry the
    /// change out.
    #[allow(clippy::too_many_arguments)]
    async fn start_reassignment(
        self: &Arc<Self>,
        broker: &Arc<Broker>,
        name: &str,
        id: Uuid,
        partition: u32,
        group: u64,
        target: Vec<u64>,
        added_before: &[u64],
    ) -> Result<(), BrokerError> {
        if name == OFFSETS_TOPIC {
            return self
                .start_offsets_reassignment(broker, partition, group, target, added_before)
                .await;
        }
        let (topic, current) = replicated_partition(broker, name, id, partition)?;
        let from = current
            .replica_set()
            .map(|set| set.nodes.get())
            .unwrap_or_default();
        let added = moved_onto(&from, &target, added_before);
        self.record_move(Reassignment {
            topic: name.to_owned(),
            id,
            partition,
            group,
            from,
            target: target.clone(),
            added,
        });
        let me = self.config.node_id;
        let replica = match current.raft_replica() {
            Some(replica) => Arc::clone(replica),
            None if target.contains(&me) || added_before.contains(&me) => {
                let assignment = ReplicaAssignment {
                    group,
                    nodes: target.clone(),
                };
                let joined = self
                    .open_partition(
                        broker,
                        name,
                        id,
                        partition,
                        &assignment,
                        &topic.config(),
                        Opening::Joining,
                    )
                    .await?;
                let replica = joined.raft_replica().cloned();
                topic.replace_partition(joined);
                tracing::info!(
                    topic = name,
                    partition,
                    "a replica joins here (reassignment)"
                );
                match replica {
                    Some(replica) => replica,
                    None => return Ok(()),
                }
            }
            None => return Ok(()),
        };
        self.drive_reassignment(group, replica);
        Ok(())
    }

    /// Records `moving` as its group's pending move; a move already
    /// pending keeps the replicas it started from, takes the new target,
    /// and adds the nodes it names to those the move added.
    fn record_move(&self, moving: Reassignment) {
        let mut pending = self.reassignments.lock();
        match pending.get_mut(&moving.group) {
            Some(existing) => {
                tracing::info!(
                    topic = moving.topic,
                    partition = moving.partition,
                    from = ?existing.target,
                    to = ?moving.target,
                    "a reassignment in progress takes a new target"
                );
                existing.added = moved_onto(&existing.from, &moving.target, &[])
                    .union(&existing.added)
                    .copied()
                    .collect();
                existing.target = moving.target;
            }
            None => {
                pending.insert(moving.group, moving);
            }
        }
    }

    /// Carries out the reassignment of `group` whenever this replica leads
    /// it, until the reassignment is recorded complete.
    fn drive_reassignment(self: &Arc<Self>, group: u64, replica: Arc<PartitionReplica>) {
        let key = Arc::as_ptr(&replica) as usize;
        {
            let mut drivers = self.drivers.lock();
            if drivers.get(&group) == Some(&key) {
                // Its task is running and carries out whatever is pending.
                return;
            }
            drivers.insert(group, key);
        }
        let cluster = Arc::downgrade(self);
        let stop = self.stop.clone();
        tokio::spawn(async move {
            loop {
                let Some(this) = cluster.upgrade() else {
                    return;
                };
                let pending = {
                    // Under both locks, so that a move recorded after this
                    // look finds no task and starts one.
                    let reassignments = this.reassignments.lock();
                    let mut drivers = this.drivers.lock();
                    if drivers.get(&group) != Some(&key) {
                        return;
                    }
                    match reassignments.get(&group) {
                        Some(pending) => pending.clone(),
                        None => {
                            drivers.remove(&group);
                            return;
                        }
                    }
                };
                if replica.is_leader() {
                    // Bounded, so a cancellation (which changes the target)
                    // is taken up even while a new replica cannot catch up.
                    let step =
                        tokio::time::timeout(REASSIGNMENT_STEP, this.carry_out(&replica, &pending));
                    match step.await {
                        Ok(Ok(())) => {
                            let done = Command::ReassignDone {
                                name: pending.topic.clone(),
                                id: pending.id,
                                partition: pending.partition,
                                group,
                                nodes: pending.target.clone(),
                            };
                            // Once applied the reassignment is no longer
                            // pending and the loop ends; if it was
                            // cancelled meanwhile, the end is passed over
                            // and the loop undoes the move.
                            if let Err(e) = this.propose(&done).await {
                                tracing::debug!(group, error = %e, "recording a reassignment's end failed; retrying")
                            }
                        }
                        Ok(Err(e)) => {
                            tracing::info!(group, error = %e, "reassignment step failed; retrying")
                        }
                        Err(_) => {
                            tracing::info!(
                                group,
                                "reassignment step not done in time; trying again"
                            )
                        }
                    }
                }
                drop(this);
                // A fixed pause, not a wait for the replica's metrics: they
                // change at every heartbeat, and far more often while a
                // peer fails, which would spin this loop.
                tokio::select! {
                    _ = stop.cancelled() => return,
                    _ = tokio::time::sleep(Duration::from_millis(500)) => {}
                }
            }
        });
    }

    /// Makes the target the group's voters: each new replica added as a
    /// learner and caught up first, then one membership change (joint
    /// consensus, as Raft requires).
    async fn carry_out(
        &self,
        replica: &PartitionReplica,
        pending: &Reassignment,
    ) -> Result<(), String> {
        let (voters, learners) = group_members(replica);
        let target: BTreeSet<u64> = pending.target.iter().copied().collect();
        if voters == target && learners.is_subset(&target) {
            return Ok(());
        }
        if voters != target {
            self.change_voters(replica, pending, &target, &voters, &learners)
                .await?;
        }
        // Replacing the voters keeps every learner: one a replaced or
        // cancelled target added would be sent the log for good.
        let (_, learners) = group_members(replica);
        let stray: BTreeSet<u64> = learners.difference(&target).copied().collect();
        if !stray.is_empty() {
            replica
                .raft()
                .change_membership(ChangeMembers::RemoveNodes(stray.clone()), false)
                .await
                .map_err(|e| format!("dropping learners outside the target: {e}"))?;
            tracing::info!(
                topic = pending.topic,
                partition = pending.partition,
                learners = ?stray,
                "learners outside the reassignment's target dropped"
            );
        }
        Ok(())
    }

    /// Makes `target` the voters of `replica`'s group: its new nodes
    /// join as learners, catch up, and then the voters change at once.
    async fn change_voters(
        &self,
        replica: &PartitionReplica,
        pending: &Reassignment,
        target: &BTreeSet<u64>,
        voters: &BTreeSet<u64>,
        learners: &BTreeSet<u64>,
    ) -> Result<(), String> {
        let joining: BTreeSet<u64> = target.difference(voters).copied().collect();
        for node in joining.difference(learners) {
            let addr = self
                .nodes
                .raft_address(*node)
                .ok_or_else(|| format!("node {node} is not in the cluster"))?;
            replica
                .raft()
                .add_learner(*node, BasicNode { addr }, false)
                .await
                .map_err(|e| format!("adding node {node} as a learner: {e}"))?;
        }
        let still_pending = || {
            self.reassignments
                .lock()
                .get(&pending.group)
                .is_some_and(|now| now.target == pending.target)
        };
        caught_up(replica, &joining, still_pending).await?;
        replica
            .raft()
            .change_membership(target.clone(), false)
            .await
            .map_err(|e| format!("changing the voters: {e}"))?;
        Ok(())
    }

    /// Applies a `ReassignDone`: the partition's replicas are `nodes` on
    /// every node; a node left out stops its replica and discards its data
    /// (leaving a tombstone, so that applying the metadata log again at a
    /// start does not bring the replica back).
    async fn finish_reassignment(
        &self,
        broker: &Arc<Broker>,
        name: &str,
        id: Uuid,
        partition: u32,
        group: u64,
        nodes: Vec<u64>,
    ) -> Result<(), BrokerError> {
        self.reassignments.lock().remove(&group);
        if name == OFFSETS_TOPIC {
            return self
                .finish_offsets_reassignment(broker, partition, group, nodes)
                .await;
        }
        let (topic, current) = replicated_partition(broker, name, id, partition)?;
        broker.set_replica_nodes(name, id, partition, &nodes)?;
        let Some(set) = current.replica_set().cloned() else {
            return Ok(());
        };
        set.nodes.set(nodes.clone());
        let me = self.config.node_id;
        if nodes.contains(&me) {
            return Ok(());
        }
        let Some(replica) = current.raft_replica().cloned() else {
            return Ok(());
        };
        let data_dir = &broker.config().data_dir;
        leave_tombstone(data_dir, group)?;
        self.router.remove(group);
        if let Err(e) = replica.raft().shutdown().await {
            tracing::warn!(topic = name, partition, error = %e, "a moved replica did not stop cleanly");
        }
        let max_batch_bytes = topic
            .config()
            .log_config(&broker.config().log_defaults)?
            .max_batch_bytes as usize;
        let elsewhere = Arc::new(Partition::elsewhere(
            partition,
            set,
            crate::producer_snapshot::path(data_dir, id, partition),
            max_batch_bytes,
        ));
        topic.replace_partition(elsewhere);
        broker.discard(name, vec![current]);
        tracing::info!(
            topic = name,
            partition,
            "this node's replica moved away (reassignment)"
        );
        Ok(())
    }

    /// Removes a topic here: out of the registry, its replicas stopped
    /// (they leave their groups' routing first), its data set aside.
    async fn remove_topic(
        &self,
        broker: &Arc<Broker>,
        name: &str,
        id: Uuid,
    ) -> Result<(), BrokerError> {
        let partitions = broker.remove_replicated_topic(name, id)?;
        for partition in &partitions {
            if let Some(replica) = partition.raft_replica() {
                if let Some(set) = partition.replica_set() {
                    self.router.remove(set.group);
                }
                if let Err(e) = replica.raft().shutdown().await {
                    tracing::warn!(topic = name, error = %e, "a deleted partition's replica did not stop cleanly");
                }
            }
        }
        broker.discard(name, partitions);
        Ok(())
    }

    /// Announces through the metadata log each time the replica becomes
    /// its group's leader and, while it leads, each change of the group's
    /// in-sync replicas (see `in_sync`), checked every
    /// [`IN_SYNC_CHECK`].
    fn announce_leadership(
        self: &Arc<Self>,
        group: u64,
        replica: Arc<PartitionReplica>,
        replicas: Vec<u64>,
    ) {
        let cluster = Arc::downgrade(self);
        let mut metrics = replica.raft().metrics();
        let me = self.config.node_id;
        let lag_max_ms = self.config.replica_lag_max.as_millis() as u64;
        let stop = self.stop.clone();
        tokio::spawn(async move {
            use herald_raft::openraft::async_runtime::WatchReceiver;
            let started = tokio::time::Instant::now();
            let mut check = tokio::time::interval(IN_SYNC_CHECK);
            check.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            let mut announced = None;
            let mut tracker: Option<((u64, Vec<u64>), InSyncTracker)> = None;
            loop {
                let (leader, term, last, progress, voters) = {
                    let now = metrics.borrow_watched();
                    let voters: Vec<u64> = now.membership_config.membership().voter_ids().collect();
                    (
                        now.current_leader,
                        now.current_term,
                        now.last_log_index,
                        follower_progress(&now),
                        voters,
                    )
                };
                let leading = leader == Some(me);
                if leading {
                    let Some(cluster) = cluster.upgrade() else {
                        return;
                    };
                    if announced != Some(term) {
                        let command = Command::LeaderChange {
                            group,
                            leader: me,
                            term,
                        };
                        match cluster.propose(&command).await {
                            Ok(()) => announced = Some(term),
                            Err(e) => {
                                tracing::debug!(group, error = %e, "leader announcement failed; retrying");
                                tokio::time::sleep(Duration::from_millis(200)).await;
                                continue;
                            }
                        }
                    }
                    let now_ms = started.elapsed().as_millis() as u64;
                    // A reassignment changes the voters within a term.
                    let key = (term, voters);
                    if tracker.as_ref().is_none_or(|(k, _)| *k != key) {
                        let members = if key.1.is_empty() { &replicas } else { &key.1 };
                        let fresh = InSyncTracker::new(me, members, now_ms, lag_max_ms);
                        tracker = Some((key, fresh));
                    }
                    if let Some((_, tracker)) = tracker.as_mut() {
                        if let Some(in_sync) = tracker.observe(now_ms, last, &progress) {
                            let command = Command::InSyncChange {
                                group,
                                term,
                                replicas: in_sync.clone(),
                            };
                            match cluster.propose(&command).await {
                                Ok(()) => {
                                    tracing::info!(group, term, in_sync = ?in_sync, "in-sync replicas changed")
                                }
                                Err(e) => {
                                    tracing::debug!(group, error = %e, "in-sync announcement failed; retrying");
                                    tracker.retry();
                                }
                            }
                        }
                    }
                } else {
                    tracker = None;
                }
                // A leader looks again at every check; a follower whenever
                // Raft's state changes, to see when it leads.
                tokio::select! {
                    _ = stop.cancelled() => return,
                    _ = check.tick(), if leading => {}
                    changed = metrics.changed(), if !leading => if changed.is_err() { return },
                }
            }
        });
    }

    /// Stops the group coordinators, the offsets and metadata replicas and
    /// the Raft listener.
    pub async fn shutdown(&self) {
        self.stop.cancel();
        self.offsets.shutdown().await;
        if let Err(e) = self.metadata.raft().shutdown().await {
            tracing::warn!(error = %e, "the metadata replica did not stop cleanly");
        }
    }
}

/// How often a leader looks at its followers' progress for the in-sync
/// replicas: well under any useful `replica_lag_max`.
pub const IN_SYNC_CHECK: Duration = Duration::from_millis(500);

/// Each follower's progress as the leader's Raft reports it (empty on a
/// follower).
/// The voters and the learners of `replica`'s group, as it knows them.
fn group_members(replica: &PartitionReplica) -> (BTreeSet<u64>, BTreeSet<u64>) {
    use herald_raft::openraft::async_runtime::WatchReceiver;
    let metrics = replica.raft().metrics();
    let watched = metrics.borrow_watched();
    let membership = watched.membership_config.membership();
    (
        membership.voter_ids().collect(),
        membership.learner_ids().collect(),
    )
}

fn follower_progress(
    metrics: &herald_raft::openraft::RaftMetrics<herald_raft::PartitionRaft>,
) -> BTreeMap<u64, FollowerProgress> {
    use herald_raft::openraft::Instant as _;
    let Some(replication) = &metrics.replication else {
        return BTreeMap::new();
    };
    replication
        .iter()
        .map(|(&node, matched)| {
            let answered_ms_ago = metrics
                .heartbeat
                .as_ref()
                .and_then(|acks| acks.get(&node).copied().flatten())
                .map(|at| at.elapsed().as_millis() as u64);
            let progress = FollowerProgress {
                matched: matched.as_ref().map(|id| id.index),
                answered_ms_ago,
            };
            (node, progress)
        })
        .collect()
}

/// How a replica comes to be opened.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Opening {
    /// Assigned at the topic's creation or growth: the first replica
    /// initializes the group.
    Assigned,
    /// Added by a reassignment: it joins the group's membership as the
    /// leader adds it.
    Joining,
}

/// Resolves once every one of `nodes` (learners of `replica`'s group, which
/// this replica leads) holds the leader's log as it stood when the wait
/// began; fails once `still_pending` says the move changed (cancelled).
///
/// openraft's own blocking `add_learner` takes a learner within its
/// `replication_lag_threshold` (5,000 entries) as caught up, even one that
/// never answered: on a short log a new replica on a node that is down
/// would pass, and the joint configuration that follows, needing a
/// majority of the target too, would stop the partition's writes until
/// that node came back.
async fn caught_up(
    replica: &PartitionReplica,
    nodes: &BTreeSet<u64>,
    still_pending: impl Fn() -> bool,
) -> Result<(), String> {
    use herald_raft::openraft::async_runtime::WatchReceiver;
    let metrics = replica.raft().metrics();
    let goal = metrics.borrow_watched().last_log_index;
    loop {
        if !still_pending() {
            return Err("the reassignment changed while its new replicas caught up".to_owned());
        }
        {
            let watched = metrics.borrow_watched();
            let Some(progress) = &watched.replication else {
                return Err("this replica no longer leads the group".to_owned());
            };
            let holds_goal = |node: &u64| {
                progress
                    .get(node)
                    .and_then(|matched| matched.as_ref())
                    .map(|matched| matched.index)
                    >= goal
            };
            if nodes.iter().all(holds_goal) {
                return Ok(());
            }
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// A partition reassignment started and not completed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reassignment {
    /// The topic.
    pub topic: String,
    /// Its id.
    pub id: Uuid,
    /// The partition.
    pub partition: u32,
    /// Its Raft group.
    pub group: u64,
    /// Its replicas when the reassignment started.
    pub from: Vec<u64>,
    /// The replicas it is to have.
    pub target: Vec<u64>,
    /// Every node outside `from` that any target of this move named (a
    /// replaced or cancelled target's too): each may hold a replica the
    /// move opened, which its end discards unless the final target keeps
    /// it.
    pub added: BTreeSet<u64>,
}

/// Topic `name` (of id `id`, not a newer topic of that name) and its
/// partition `partition`.
fn replicated_partition(
    broker: &Broker,
    name: &str,
    id: Uuid,
    partition: u32,
) -> Result<(Arc<crate::topic::Topic>, Arc<Partition>), BrokerError> {
    let topic =
        broker
            .topic(name)
            .filter(|t| t.id() == id)
            .ok_or_else(|| BrokerError::UnknownTopic {
                name: name.to_owned(),
            })?;
    let current =
        topic
            .partition(partition as i32)
            .ok_or_else(|| BrokerError::UnknownPartition {
                topic: name.to_owned(),
                partition: partition as i32,
            })?;
    Ok((topic, current))
}

/// Replica sets for the partitions `indexes`: each a new random Raft
/// group of `factor` of `nodes`, round-robin from a random start, so that
/// partitions' preferred leaders spread over the nodes.
fn place_replicas(
    nodes: &[u64],
    factor: usize,
    indexes: std::ops::Range<u32>,
) -> Result<Vec<ReplicaAssignment>, BrokerError> {
    let first = random_u64()? as usize;
    indexes
        .map(|p| {
            Ok(ReplicaAssignment {
                group: random_u64()?.max(1),
                nodes: (0..factor)
                    .map(|i| nodes[(first + p as usize + i) % nodes.len()])
                    .collect(),
            })
        })
        .collect()
}

/// The tombstone that marks this node's replica of `group` as moved away
/// by a reassignment.
/// Marks this node's replica of `group` as moved away, for good.
/// The nodes a move from `from` to `target` adds, with `earlier` (nodes
/// earlier targets of the same move added).
fn moved_onto(from: &[u64], target: &[u64], earlier: &[u64]) -> BTreeSet<u64> {
    target
        .iter()
        .chain(earlier)
        .filter(|node| !from.contains(node))
        .copied()
        .collect()
}

fn leave_tombstone(data_dir: &std::path::Path, group: u64) -> Result<(), BrokerError> {
    let tombstone = moved_away(data_dir, group);
    if let Some(parent) = tombstone.parent() {
        std::fs::create_dir_all(parent).map_err(|e| BrokerError::io("create", parent, e))?;
    }
    std::fs::write(&tombstone, b"").map_err(|e| BrokerError::io("write", &tombstone, e))
}

fn moved_away(data_dir: &std::path::Path, group: u64) -> PathBuf {
    data_dir
        .join("__cluster")
        .join("moved")
        .join(format!("{group:016x}"))
}

/// Checks a reassignment's target: at least one replica, none twice,
/// every one a node of the cluster.
fn check_target(target: &[u64], nodes: &[u64]) -> Result<(), BrokerError> {
    if target.is_empty() {
        return Err(BrokerError::InvalidReplicaAssignment(
            "a partition needs at least one replica".to_owned(),
        ));
    }
    let mut seen = std::collections::BTreeSet::new();
    for node in target {
        if !seen.insert(node) {
            return Err(BrokerError::InvalidReplicaAssignment(format!(
                "node {node} is named twice"
            )));
        }
        if !nodes.contains(node) {
            return Err(BrokerError::InvalidReplicaAssignment(format!(
                "node {node} is not a node of the cluster"
            )));
        }
    }
    Ok(())
}

/// A node's listeners as a `NodeEndpoints` command carries them.
fn advertised(endpoints: &Endpoints) -> BTreeMap<String, String> {
    endpoints
        .iter()
        .map(|(name, (host, port))| (name.clone(), format!("{host}:{port}")))
        .collect()
}

/// The listeners a `NodeEndpoints` command carries (an address that is
/// not `host:port` is left out).
fn parsed_endpoints(endpoints: BTreeMap<String, String>) -> Endpoints {
    endpoints
        .into_iter()
        .filter_map(|(name, address)| {
            let (host, port) = address.rsplit_once(':')?;
            Some((name, (host.to_owned(), port.parse().ok()?)))
        })
        .collect()
}

fn decode_commands(batch: &[u8]) -> Vec<Command> {
    let Ok(parsed) = herald_records::RecordBatch::new(batch) else {
        tracing::error!("a metadata entry is not a record batch; skipped");
        return Vec::new();
    };
    if parsed.header().is_control() {
        // A DeleteRecords entry: Raft's, not a command.
        return Vec::new();
    }
    let mut scratch = Vec::new();
    let Ok(records) = parsed.records(&mut scratch) else {
        tracing::error!("a metadata entry's records cannot be read; skipped");
        return Vec::new();
    };
    records
        .filter_map(|r| r.ok())
        .filter_map(|r| {
            let value = r.value?;
            match serde_json::from_slice(value) {
                Ok(command) => Some(command),
                Err(e) => {
                    tracing::error!(error = %e, "an unknown metadata command; skipped");
                    None
                }
            }
        })
        .collect()
}

fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

fn random_u64() -> Result<u64, BrokerError> {
    let mut bytes = [0u8; 8];
    getrandom::fill(&mut bytes).map_err(|e| BrokerError::Random(e.to_string()))?;
    Ok(u64::from_le_bytes(bytes))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_moves_added_nodes_are_those_its_targets_named_outside_its_replicas() {
        assert_eq!(moved_onto(&[1, 2, 3], &[1, 2, 4], &[]), BTreeSet::from([4]));
        // A replaced target's node stays among them: it may hold a replica.
        assert_eq!(
            moved_onto(&[1, 2, 3], &[1, 2, 5], &[4]),
            BTreeSet::from([4, 5])
        );
        // Cancelled: back to its replicas, the nodes it added still named.
        assert_eq!(
            moved_onto(&[1, 2, 3], &[1, 2, 3], &[4]),
            BTreeSet::from([4])
        );
    }

    #[test]
    fn advertised_listeners_survive_the_metadata_log_and_a_malformed_one_is_left_out() {
        let listeners: Endpoints = [
            ("PLAIN".to_owned(), ("10.0.0.1".to_owned(), 9092)),
            ("SASL".to_owned(), ("::1".to_owned(), 9093)),
        ]
        .into_iter()
        .collect();
        assert_eq!(parsed_endpoints(advertised(&listeners)), listeners);
        let recorded: BTreeMap<String, String> = [
            ("PLAIN", "10.0.0.1:9092"),
            ("NO_PORT", "10.0.0.2"),
            ("BAD_PORT", "10.0.0.3:99999"),
            ("WORD_PORT", "10.0.0.4:kafka"),
        ]
        .into_iter()
        .map(|(name, address)| (name.to_owned(), address.to_owned()))
        .collect();
        let parsed = parsed_endpoints(recorded);
        assert_eq!(parsed.len(), 1);
        assert_eq!(parsed["PLAIN"], ("10.0.0.1".to_owned(), 9092));
    }
}
