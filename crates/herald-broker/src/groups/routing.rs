//! Which coordinator answers a group call.
//!
//! A single node coordinates every group itself, with its own offsets
//! partition. A cluster node (feature `cluster`) coordinates the groups
//! whose replicated offsets partition it leads (`offset_shards`): a call
//! for any other group is answered [`GroupReply::NotCoordinator`], and
//! FindCoordinator names the partition's leader, as Kafka's brokers do.
//! Calls that span groups are split: ListGroups lists the groups this
//! node coordinates (Kafka's admin clients ask every broker), and
//! DeleteGroups answers NOT_COORDINATOR for each group coordinated
//! elsewhere.

use std::sync::Arc;
use std::time::Duration;

use herald_log::{FlushStatsSnapshot, Log};

#[cfg(feature = "cluster")]
use super::GroupReply;
use super::{CommittedOffsetEntry, GroupCall, GroupService, ReplyFn};
use crate::error::BrokerError;

/// Where the coordinator of a group is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CoordinatorLocation {
    /// On the node with this id (this node, on a single node).
    Node(i32),
    /// Not known now: its offsets partition is electing a leader, or the
    /// cluster has not created its offsets partitions yet. The client
    /// retries.
    Unknown,
}

/// Every coordinator this node runs, and where the others are.
pub struct Groups {
    /// The node's own coordinator: every group's on a single node; unused
    /// in a cluster.
    local: GroupService,
    node_id: i32,
    /// The cluster's replicated offsets partitions, once this node joined
    /// a cluster.
    #[cfg(feature = "cluster")]
    shards: std::sync::OnceLock<Arc<crate::offset_shards::OffsetShards>>,
}

impl std::fmt::Debug for Groups {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Groups")
            .field("local", &self.local)
            .finish_non_exhaustive()
    }
}

impl Groups {
    /// The groups of node `node_id`, coordinated by `local` until the node
    /// joins a cluster.
    pub(crate) fn new(local: GroupService, node_id: i32) -> Self {
        Self {
            local,
            node_id,
            #[cfg(feature = "cluster")]
            shards: std::sync::OnceLock::new(),
        }
    }

    /// From now on, groups are coordinated by the leaders of `shards`.
    #[cfg(feature = "cluster")]
    pub(crate) fn set_shards(&self, shards: Arc<crate::offset_shards::OffsetShards>) {
        let _ = self.shards.set(shards);
    }

    /// Where the coordinator of `group_id` is.
    pub fn locate(&self, group_id: &str) -> CoordinatorLocation {
        #[cfg(feature = "cluster")]
        if let Some(shards) = self.shards.get() {
            return match shards.leader_of(group_id) {
                Some(node) => i32::try_from(node)
                    .map_or(CoordinatorLocation::Unknown, CoordinatorLocation::Node),
                None => CoordinatorLocation::Unknown,
            };
        }
        let _ = group_id;
        CoordinatorLocation::Node(self.node_id)
    }

    /// Submits a call to the coordinator of its group (waiting, not
    /// growing, while that coordinator's queue is full); `reply` is called
    /// exactly once with its answer.
    pub async fn call(&self, call: GroupCall, reply: ReplyFn) {
        #[cfg(feature = "cluster")]
        if let Some(shards) = self.shards.get() {
            return routed(shards, call, reply).await;
        }
        self.local.call(call, reply).await
    }

    /// Every committed offset of every group this node coordinates; `None`
    /// if a coordinator is stopped or slower than `timeout` to answer.
    pub fn committed_offsets_snapshot(
        &self,
        timeout: Duration,
    ) -> Option<Vec<CommittedOffsetEntry>> {
        #[cfg(feature = "cluster")]
        if let Some(shards) = self.shards.get() {
            let mut all = Vec::new();
            for service in shards.led_services() {
                all.extend(service.committed_offsets_snapshot(timeout)?);
            }
            return Some(all);
        }
        self.local.committed_offsets_snapshot(timeout)
    }

    /// Flush counts and latencies of the offsets partitions this node
    /// writes (its own, and its replicas of a cluster's).
    pub fn offsets_log_flush_stats(&self) -> FlushStatsSnapshot {
        self.replica_logs()
            .iter()
            .fold(self.local.offsets_log_flush_stats(), |mut stats, log| {
                stats.merge(&log.flush_stats());
                stats
            })
    }

    /// Bytes of the offsets partitions this node keeps.
    pub fn offsets_log_size_bytes(&self) -> u64 {
        self.local.offsets_log_size_bytes()
            + self
                .replica_logs()
                .iter()
                .map(|log| log.size_bytes())
                .sum::<u64>()
    }

    /// This node's replicas of a cluster's offsets partitions.
    fn replica_logs(&self) -> Vec<Arc<Log>> {
        #[cfg(feature = "cluster")]
        if let Some(shards) = self.shards.get() {
            return shards.replica_logs();
        }
        Vec::new()
    }

    /// Stops the node's own coordinator and closes its offsets partition
    /// (a cluster's coordinators stop with the cluster).
    pub fn close(&self) -> Result<(), BrokerError> {
        self.local.close()
    }
}

/// Answers `call` in a cluster: by the coordinator of its group if this
/// node is it, split by group for the calls that span groups.
#[cfg(feature = "cluster")]
async fn routed(shards: &crate::offset_shards::OffsetShards, call: GroupCall, reply: ReplyFn) {
    let group = match &call {
        GroupCall::JoinGroup(r) => &r.group_id,
        GroupCall::SyncGroup(r) => &r.group_id,
        GroupCall::Heartbeat(r) => &r.group_id,
        GroupCall::LeaveGroup(r) => &r.group_id,
        GroupCall::OffsetCommit(r) => &r.group_id,
        GroupCall::OffsetFetch(r) => &r.group_id,
        GroupCall::OffsetDelete(r) => &r.group_id,
        GroupCall::DescribeGroup(id) => id,
        GroupCall::ListGroups(states) => {
            let mut listed = Vec::new();
            for service in shards.led_services() {
                match ask(&service, GroupCall::ListGroups(states.clone())).await {
                    GroupReply::ListGroups(groups) => listed.extend(groups),
                    other => return reply(other),
                }
            }
            listed.sort_by(|a, b| a.group_id.cmp(&b.group_id));
            return reply(GroupReply::ListGroups(listed));
        }
        GroupCall::DeleteGroups(ids) => return reply(delete_groups(shards, ids).await),
    };
    match shards.service_for(group) {
        Some(service) => service.call(call, reply).await,
        None => reply(GroupReply::NotCoordinator),
    }
}

/// DeleteGroups in a cluster: each group by its coordinator, in request
/// order; NOT_COORDINATOR for the groups another node coordinates.
#[cfg(feature = "cluster")]
async fn delete_groups(shards: &crate::offset_shards::OffsetShards, ids: &[String]) -> GroupReply {
    use herald_group::{DeleteGroupResult, DeleteGroupsResponse, ErrorCode};
    let mut results = Vec::with_capacity(ids.len());
    for id in ids {
        let error = match shards.service_for(id) {
            None => ErrorCode::NotCoordinator,
            Some(service) => match ask(&service, GroupCall::DeleteGroups(vec![id.clone()])).await {
                GroupReply::DeleteGroups(mut answer) if answer.results.len() == 1 => {
                    answer.results.remove(0).error
                }
                _ => ErrorCode::CoordinatorNotAvailable,
            },
        };
        results.push(DeleteGroupResult {
            group_id: id.clone(),
            error,
        });
    }
    GroupReply::DeleteGroups(DeleteGroupsResponse { results })
}

/// One call to one coordinator, awaited.
#[cfg(feature = "cluster")]
pub(crate) async fn ask(service: &GroupService, call: GroupCall) -> GroupReply {
    let (sender, answer) = tokio::sync::oneshot::channel();
    service
        .call(
            call,
            Box::new(move |reply| {
                let _ = sender.send(reply);
            }),
        )
        .await;
    answer.await.unwrap_or(GroupReply::Unavailable)
}
