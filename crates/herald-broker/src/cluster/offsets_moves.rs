//! Reassigning the offsets partitions: what moves a consumer group's
//! coordinator between nodes for good, and frees a node of them before it
//! is removed. AlterPartitionReassignments names them as partitions of
//! `__consumer_offsets`, as Kafka does. The move itself is a topic
//! partition's (the new replicas catch up as learners, then the voters
//! change, driven by the group's leader); what differs is where the
//! replica lives: in `OffsetShards`, whose coordinator follows the
//! replica's leadership.

use std::path::Path;
use std::sync::Arc;

use herald_raft::PartitionReplica;
use uuid::Uuid;

use super::{check_target, leave_tombstone, moved_away, Cluster, Command, Reassignment};
use crate::broker::Broker;
use crate::error::BrokerError;
use crate::groups::OFFSETS_TOPIC;
use crate::metadata_store::ReplicaAssignment;
use crate::offset_shards;

impl Cluster {
    /// Opens this node's replica of offsets partition `index` and starts
    /// announcing its leadership; `may_initialize` when it is created
    /// with the partition (a replica a reassignment brings joins instead).
    pub(super) async fn open_offsets_replica(
        self: &Arc<Self>,
        data_dir: &Path,
        index: usize,
        assignment: &ReplicaAssignment,
        may_initialize: bool,
    ) -> Result<Arc<PartitionReplica>, BrokerError> {
        let dir = offset_shards::replica_dir(data_dir, index);
        std::fs::create_dir_all(&dir).map_err(|e| BrokerError::io("create directory", &dir, e))?;
        let replica = PartitionReplica::open(
            self.config.node_id,
            assignment.group,
            &dir,
            offset_shards::offsets_log_config(),
            self.config.timing,
            &self.router,
        )
        .await
        .map_err(|e| BrokerError::ClusterUnavailable(e.to_string()))?;
        Ok(self
            .start_replica(replica, assignment, may_initialize)
            .await)
    }

    /// Proposes moving offsets partition `partition` to `target`.
    pub(super) async fn reassign_offsets(
        &self,
        partition: u32,
        target: Vec<u64>,
    ) -> Result<(), BrokerError> {
        let assignment = self.offsets.assignment(partition as usize).ok_or_else(|| {
            BrokerError::UnknownPartition {
                topic: OFFSETS_TOPIC.to_owned(),
                partition: partition as i32,
            }
        })?;
        check_target(&target, &self.placeable_nodes())?;
        let pending = self
            .reassignments
            .lock()
            .get(&assignment.group)
            .map(|p| p.target.clone());
        if pending.unwrap_or(assignment.nodes) == target {
            return Ok(());
        }
        let request = Uuid::new_v4().as_u128();
        let command = Command::Reassign {
            request,
            name: OFFSETS_TOPIC.to_owned(),
            id: Uuid::nil(),
            partition,
            group: assignment.group,
            target,
        };
        self.propose_and_wait(request, command).await.map(|_| ())
    }

    /// The replicas of offsets partition `partition`, if it exists.
    pub fn offsets_replicas(&self, partition: u32) -> Option<Vec<u64>> {
        self.offsets
            .assignment(partition as usize)
            .map(|assignment| assignment.nodes)
    }

    /// Applies a `Reassign` of an offsets partition: recorded; a node the
    /// target adds opens a replica that joins the group; the replica here
    /// (old or new) drives the move whenever it leads.
    pub(super) async fn start_offsets_reassignment(
        self: &Arc<Self>,
        broker: &Broker,
        partition: u32,
        group: u64,
        target: Vec<u64>,
        added_before: &[u64],
    ) -> Result<(), BrokerError> {
        let index = partition as usize;
        let from = self.offsets_replicas(partition).unwrap_or_default();
        let added = super::moved_onto(&from, &target, added_before);
        self.record_move(Reassignment {
            topic: OFFSETS_TOPIC.to_owned(),
            id: Uuid::nil(),
            partition,
            group,
            from,
            target: target.clone(),
            added,
        });
        let me = self.config.node_id;
        let replica = match self.offsets.replica(index) {
            Some(replica) => replica,
            None if target.contains(&me) || added_before.contains(&me) => {
                let data_dir = &broker.config().data_dir;
                let tombstone = moved_away(data_dir, group);
                if let Err(e) = std::fs::remove_file(&tombstone) {
                    if e.kind() != std::io::ErrorKind::NotFound {
                        return Err(BrokerError::io("remove", &tombstone, e));
                    }
                }
                let assignment = ReplicaAssignment {
                    group,
                    nodes: target.clone(),
                };
                let replica = self
                    .open_offsets_replica(data_dir, index, &assignment, false)
                    .await?;
                self.offsets.adopt_replica(index, Arc::clone(&replica));
                tracing::info!(partition, "an offsets replica joins here (reassignment)");
                replica
            }
            None => return Ok(()),
        };
        self.drive_reassignment(group, replica);
        Ok(())
    }

    /// Applies a `ReassignDone` of an offsets partition: its replicas are
    /// `nodes`; a node left out stops its coordinator and replica,
    /// discards the data and leaves a tombstone (see `finish_reassignment`).
    pub(super) async fn finish_offsets_reassignment(
        &self,
        broker: &Broker,
        partition: u32,
        group: u64,
        nodes: Vec<u64>,
    ) -> Result<(), BrokerError> {
        let index = partition as usize;
        self.offsets.set_nodes(index, nodes.clone());
        if nodes.contains(&self.config.node_id) {
            return Ok(());
        }
        let Some(replica) = self.offsets.release_replica(index).await else {
            return Ok(());
        };
        let data_dir = &broker.config().data_dir;
        leave_tombstone(data_dir, group)?;
        self.router.remove(group);
        if let Err(e) = replica.raft().shutdown().await {
            tracing::warn!(partition, error = %e, "a moved offsets replica did not stop cleanly");
        }
        drop(replica);
        let dir = offset_shards::replica_dir(data_dir, index);
        let removed = tokio::task::spawn_blocking(move || std::fs::remove_dir_all(&dir)).await;
        if let Ok(Err(e)) = removed {
            tracing::warn!(partition, error = %e, "a moved offsets replica's data stayed");
        }
        tracing::info!(
            partition,
            "this node's offsets replica moved away (reassignment)"
        );
        Ok(())
    }
}
