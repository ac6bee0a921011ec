//! A cluster's replicated offsets partitions and the coordinators on
//! their leaders (feature `cluster`).
//!
//! Kafka keeps committed offsets in the partitions of `__consumer_offsets`
//! and makes the leader of a group's partition its coordinator; herald
//! does the same. The cluster's metadata log creates the partitions once
//! (`offsets_partitions` of them, each a Raft group of
//! `offsets_replication_factor` nodes); a group belongs to partition
//! `xxh3(group id) mod count`, for good. On each node, a task per replica
//! watches its Raft state: when the replica leads and has applied an entry
//! of its term, it loads a coordinator from the partition
//! (`GroupService::open_replicated`); when leadership goes, or the term
//! moves on, it stops that coordinator, whose held calls are answered
//! COORDINATOR_NOT_AVAILABLE so clients look the coordinator up again. A
//! coordinator therefore moves with its partition's leader, and committed
//! offsets survive the loss of any minority of the replicas.
//!
//! Group membership is not replicated, as on a single node's restart:
//! after a move, members rejoin.

use std::path::Path;
use std::sync::{Arc, OnceLock};

use herald_group::GroupConfig;
use herald_log::{FlushPolicy, Log, LogConfig};
use herald_raft::network::MAX_FRAME_BYTES;
use herald_raft::PartitionReplica;
use parking_lot::Mutex;
use tokio_util::sync::CancellationToken;

use crate::groups::GroupService;
use crate::metadata_store::ReplicaAssignment;
use crate::partition::LeaderHints;

/// One offsets partition as this node sees it.
struct Shard {
    /// Its Raft group.
    group: u64,
    /// Its replicas (a reassignment changes them).
    nodes: Mutex<Vec<u64>>,
    /// This node's replica, if it holds one (a reassignment brings one or
    /// takes it away).
    replica: Mutex<Option<Arc<PartitionReplica>>>,
    /// Stops the task watching the replica's leadership.
    watching: Mutex<Option<CancellationToken>>,
    /// The coordinator loaded while the replica leads, with its term.
    service: Mutex<Option<(u64, Arc<GroupService>)>>,
}

/// The offsets partitions of a cluster; see the module documentation.
pub struct OffsetShards {
    node_id: u64,
    config: GroupConfig,
    hints: Arc<LeaderHints>,
    shards: OnceLock<Vec<Shard>>,
    stop: CancellationToken,
}

impl std::fmt::Debug for OffsetShards {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OffsetShards")
            .field("node_id", &self.node_id)
            .field("shards", &self.shards.get().map(Vec::len))
            .finish_non_exhaustive()
    }
}

/// The log settings of an offsets partition: small records, replayed
/// whole by each new leader. Raft's log store fsyncs what it reports
/// durable, so the log's own policy is never.
pub(crate) fn offsets_log_config() -> LogConfig {
    LogConfig {
        segment_bytes: 16 * 1024 * 1024,
        // A commit of many partitions at once; well below a Raft frame.
        max_batch_bytes: (8 * 1024 * 1024).min(MAX_FRAME_BYTES / 2) as u32,
        preallocate_bytes: 1024 * 1024,
        flush: FlushPolicy::Never,
        retention_age: None,
        retention_bytes: None,
        ..LogConfig::default()
    }
}

/// The directory of this node's replica of offsets partition `index`.
pub(crate) fn replica_dir(data_dir: &Path, index: usize) -> std::path::PathBuf {
    data_dir.join("__cluster").join(format!("offsets-{index}"))
}

/// Which offsets partition group `group_id` belongs to, of `count`.
pub fn shard_of(group_id: &str, count: usize) -> usize {
    (twox_hash::XxHash3_64::oneshot(group_id.as_bytes()) % count.max(1) as u64) as usize
}

impl OffsetShards {
    /// Node `node_id`'s view, before the partitions exist; coordinators
    /// it loads use `config`.
    pub(crate) fn new(
        node_id: u64,
        config: GroupConfig,
        hints: Arc<LeaderHints>,
        stop: CancellationToken,
    ) -> Self {
        Self {
            node_id,
            config,
            hints,
            shards: OnceLock::new(),
            stop,
        }
    }

    /// Whether the partitions exist (their creation was applied here).
    pub fn installed(&self) -> bool {
        self.shards.get().is_some()
    }

    /// Takes the partitions the metadata log created: `assignments` in
    /// partition order, with this node's replicas opened already (`None`
    /// where it holds none). The first creation applied wins; a later one
    /// changes nothing and is answered false.
    pub(crate) fn install(
        self: &Arc<Self>,
        assignments: &[ReplicaAssignment],
        replicas: Vec<Option<Arc<PartitionReplica>>>,
    ) -> bool {
        let shards = assignments
            .iter()
            .zip(replicas)
            .map(|(assignment, replica)| Shard {
                group: assignment.group,
                nodes: Mutex::new(assignment.nodes.clone()),
                replica: Mutex::new(replica),
                watching: Mutex::new(None),
                service: Mutex::new(None),
            })
            .collect();
        if self.shards.set(shards).is_err() {
            return false;
        }
        for index in 0..assignments.len() {
            self.watch(index);
        }
        true
    }

    /// The offsets partitions (by index) that have a replica on `node`.
    pub fn held_by(&self, node: u64) -> Vec<usize> {
        self.shards.get().map_or_else(Vec::new, |shards| {
            shards
                .iter()
                .enumerate()
                .filter(|(_, shard)| shard.nodes.lock().contains(&node))
                .map(|(index, _)| index)
                .collect()
        })
    }

    fn shard(&self, group_id: &str) -> Option<&Shard> {
        let shards = self.shards.get()?;
        shards.get(shard_of(group_id, shards.len()))
    }

    /// The node that coordinates `group_id`: its partition's leader as
    /// this node's replica knows it, else as last announced.
    pub fn leader_of(&self, group_id: &str) -> Option<u64> {
        let shard = self.shard(group_id)?;
        let replica = shard.replica.lock().clone();
        replica
            .and_then(|replica| replica.leader())
            .or_else(|| self.hints.get(shard.group).map(|(leader, _)| leader))
    }

    /// The coordinator of `group_id` if this node runs it now.
    pub fn service_for(&self, group_id: &str) -> Option<Arc<GroupService>> {
        let shard = self.shard(group_id)?;
        let loaded = shard.service.lock();
        loaded.as_ref().map(|(_, service)| Arc::clone(service))
    }

    /// Every coordinator this node runs now.
    pub fn led_services(&self) -> Vec<Arc<GroupService>> {
        self.shards
            .get()
            .into_iter()
            .flatten()
            .filter_map(|shard| {
                let loaded = shard.service.lock();
                loaded.as_ref().map(|(_, service)| Arc::clone(service))
            })
            .collect()
    }

    /// The logs of this node's replicas.
    pub fn replica_logs(&self) -> Vec<Arc<Log>> {
        self.shards
            .get()
            .into_iter()
            .flatten()
            .filter_map(|shard| shard.replica.lock().as_ref().map(|r| Arc::clone(r.log())))
            .collect()
    }

    /// Loads and stops the coordinator of partition `index` as its
    /// replica's leadership comes and goes.
    fn watch(self: &Arc<Self>, index: usize) {
        let Some(shard) = self.shards.get().and_then(|shards| shards.get(index)) else {
            return;
        };
        let Some(replica) = shard.replica.lock().clone() else {
            return;
        };
        let stop = self.stop.child_token();
        if let Some(previous) = shard.watching.lock().replace(stop.clone()) {
            previous.cancel();
        }
        let shards = Arc::downgrade(self);
        let me = self.node_id;
        let mut metrics = replica.raft().metrics();
        tokio::spawn(async move {
            use herald_raft::openraft::async_runtime::WatchReceiver;
            loop {
                let leading_term = {
                    let now = metrics.borrow_watched();
                    (now.current_leader == Some(me)).then_some(now.current_term)
                };
                // A leader serves once it has applied an entry of its term:
                // every earlier leader's commits are then in its replay.
                let wanted = leading_term.filter(|_| replica.caught_up());
                let Some(this) = shards.upgrade() else {
                    return;
                };
                this.settle(index, &replica, wanted).await;
                drop(this);
                tokio::select! {
                    _ = stop.cancelled() => return,
                    changed = metrics.changed() => if changed.is_err() { return },
                }
            }
        });
    }

    /// Makes partition `index` run a coordinator of term `wanted` (none
    /// for `None`).
    async fn settle(&self, index: usize, replica: &Arc<PartitionReplica>, wanted: Option<u64>) {
        let Some(shard) = self.shards.get().and_then(|shards| shards.get(index)) else {
            return;
        };
        let loaded = shard.service.lock().as_ref().map(|(term, _)| *term);
        if loaded == wanted {
            return;
        }
        let previous = shard.service.lock().take();
        if let Some((term, service)) = previous {
            tracing::info!(
                partition = index,
                term,
                "offsets partition leadership moved; its group coordinator stops here"
            );
            stop_service(service).await;
        }
        let Some(term) = wanted else {
            return;
        };
        let opened = {
            let replica = Arc::clone(replica);
            let config = self.config.clone();
            let handle = tokio::runtime::Handle::current();
            tokio::task::spawn_blocking(move || {
                let _entered = handle.enter();
                GroupService::open_replicated(replica, term, config)
            })
            .await
        };
        match opened {
            Ok(Ok(service)) => {
                tracing::info!(
                    partition = index,
                    term,
                    "this node now coordinates the groups of offsets partition"
                );
                *shard.service.lock() = Some((term, Arc::new(service)));
            }
            Ok(Err(e)) => {
                tracing::error!(partition = index, error = %e, "loading a group coordinator failed")
            }
            Err(e) => {
                tracing::error!(partition = index, error = %e, "loading a group coordinator panicked")
            }
        }
    }

    /// How many offsets partitions there are (0 before they exist).
    pub fn count(&self) -> usize {
        self.shards.get().map_or(0, Vec::len)
    }

    /// Offsets partition `index`'s Raft group and replicas.
    pub fn assignment(&self, index: usize) -> Option<ReplicaAssignment> {
        let shard = self.shards.get()?.get(index)?;
        Some(ReplicaAssignment {
            group: shard.group,
            nodes: shard.nodes.lock().clone(),
        })
    }

    /// This node's replica of offsets partition `index`, if it holds one.
    pub fn replica(&self, index: usize) -> Option<Arc<PartitionReplica>> {
        self.shards.get()?.get(index)?.replica.lock().clone()
    }

    /// Partition `index`'s replicas are `nodes` from now on.
    pub(crate) fn set_nodes(&self, index: usize, nodes: Vec<u64>) {
        if let Some(shard) = self.shards.get().and_then(|shards| shards.get(index)) {
            *shard.nodes.lock() = nodes;
        }
    }

    /// Gives partition `index` this node's new replica (a reassignment
    /// moved one here) and watches its leadership.
    pub(crate) fn adopt_replica(self: &Arc<Self>, index: usize, replica: Arc<PartitionReplica>) {
        let Some(shard) = self.shards.get().and_then(|shards| shards.get(index)) else {
            return;
        };
        *shard.replica.lock() = Some(replica);
        self.watch(index);
    }

    /// Takes this node's replica of partition `index` away (a reassignment
    /// moved it elsewhere): its coordinator stops, and the replica is
    /// handed back to be shut down.
    pub(crate) async fn release_replica(&self, index: usize) -> Option<Arc<PartitionReplica>> {
        let shard = self.shards.get()?.get(index)?;
        if let Some(watching) = shard.watching.lock().take() {
            watching.cancel();
        }
        let loaded = shard.service.lock().take();
        if let Some((_, service)) = loaded {
            stop_service(service).await;
        }
        shard.replica.lock().take()
    }

    /// Stops every coordinator and replica of this node.
    pub(crate) async fn shutdown(&self) {
        self.stop.cancel();
        for shard in self.shards.get().into_iter().flatten() {
            let loaded = shard.service.lock().take();
            if let Some((_, service)) = loaded {
                stop_service(service).await;
            }
            let replica = shard.replica.lock().clone();
            if let Some(replica) = replica {
                if let Err(e) = replica.raft().shutdown().await {
                    tracing::warn!(group = shard.group, error = %e, "an offsets replica did not stop cleanly");
                }
            }
        }
    }
}

/// Stops a coordinator off the runtime's threads (its worker is joined).
async fn stop_service(service: Arc<GroupService>) {
    let stopped = tokio::task::spawn_blocking(move || service.close()).await;
    if let Ok(Err(e)) = stopped {
        tracing::warn!(error = %e, "a group coordinator did not stop cleanly");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_group_always_maps_to_the_same_partition_and_groups_spread_over_all() {
        // Pinned: a different mapping would strand every group's committed
        // offsets in the partition it used to map to.
        let pinned: Vec<usize> = ["orders", "billing", "g"]
            .iter()
            .map(|g| shard_of(g, 8))
            .collect();
        assert_eq!(pinned, PINNED);
        let mut seen = [0usize; 8];
        for i in 0..1_000 {
            seen[shard_of(&format!("group-{i}"), 8)] += 1;
        }
        assert!(seen.iter().all(|&n| n > 60), "uneven spread: {seen:?}");
        assert_eq!(shard_of("anything", 1), 0);
    }

    const PINNED: [usize; 3] = [3, 2, 7];
}
