//! Adding nodes to a running cluster, and removing them.
//!
//! The new node starts with `--cluster-join`: it opens an empty metadata
//! replica, initializes nothing and waits. Any member takes the request to
//! add it (Kafka's AddRaftVoter, which `herald cluster add-node` sends) and
//! records it in the metadata log as `AddNode`. The metadata group's leader
//! then makes the node a learner, waits until it holds the log as it was,
//! makes it a voter (joint consensus) and records `NodeAdded` with every
//! node's addresses and the cluster's id. Applying that, every node lists
//! the new one (Metadata, placement, reassignment targets, forwarding), and
//! the new node learns the others and its cluster id. A leader lost half-way
//! leaves the addition to the next one: each step is idempotent.
//!
//! Removing a node (Kafka's RemoveRaftVoter, `herald cluster remove-node`)
//! is refused while it holds a replica of any partition: its partitions
//! are reassigned first. Once `RemoveNode` is recorded, no new replica is
//! placed on it; the leader takes it out of the metadata group's
//! membership and records `NodeRemoved`, after which no node lists it.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use herald_raft::openraft::async_runtime::WatchReceiver;
use herald_raft::openraft::{BasicNode, ChangeMembers};
use uuid::Uuid;

use super::{Cluster, ClusterNode, Command};
use crate::broker::Broker;
use crate::cluster_nodes;
use crate::error::BrokerError;
use crate::groups::OFFSETS_TOPIC;

/// How long the leader waits, each try, for a new node to catch up before
/// it looks again (the node may not be running yet).
const CATCH_UP_TRY: Duration = Duration::from_secs(10);

/// How long a new node's Raft listener may take to accept a connection.
const REACH_PATIENCE: Duration = Duration::from_secs(2);

/// How often a node waiting to be added says so.
const WAITING_NOTICE: Duration = Duration::from_secs(15);

impl Cluster {
    /// Adds node `node_id` at `node`'s addresses: records the addition
    /// through the metadata log, then waits up to `patience` for the
    /// metadata group's leader to have made it a voter. The node must be
    /// running with `--cluster-join` (or start meanwhile); past
    /// `patience` the cluster keeps trying and the answer says so. A node
    /// already in the cluster at the same addresses is added at once.
    pub async fn add_node(
        &self,
        node_id: u64,
        node: ClusterNode,
        patience: Duration,
    ) -> Result<(), BrokerError> {
        check_node(node_id, &node)?;
        if let Some(known) = self.nodes.get(node_id) {
            return same_node(node_id, &known, &node);
        }
        let mut changes = self.node_changes.subscribe();
        let request = Uuid::new_v4().as_u128();
        self.propose_and_wait(
            request,
            Command::AddNode {
                request,
                node_id,
                node,
            },
        )
        .await?;
        let deadline = tokio::time::Instant::now() + patience;
        while self.nodes.get(node_id).is_none() {
            match tokio::time::timeout_at(deadline, changes.changed()).await {
                Ok(Ok(())) => {}
                Ok(Err(_)) | Err(_) => {
                    return Err(BrokerError::ClusterUnavailable(format!(
                        "node {node_id} is recorded but has not caught up with the cluster yet \
                         (is it running with --cluster-join?); the cluster keeps adding it"
                    )))
                }
            }
        }
        Ok(())
    }

    /// Applies an `AddNode`: the addition is pending until the metadata
    /// group's leader records `NodeAdded`. A later request for the same
    /// node replaces its addresses while it is pending.
    pub(super) fn record_addition(
        &self,
        node_id: u64,
        node: ClusterNode,
    ) -> Result<(), BrokerError> {
        if let Some(known) = self.nodes.get(node_id) {
            return same_node(node_id, &known, &node);
        }
        self.joins.lock().insert(node_id, node);
        self.node_changes.send_modify(|n| *n += 1);
        Ok(())
    }

    /// Applies a `NodeAdded`: every node lists the new one; the new node
    /// adopts the cluster id and learns the others.
    pub(super) fn node_added(
        &self,
        broker: &Broker,
        cluster_id: &str,
        node_id: u64,
        nodes: &BTreeMap<u64, ClusterNode>,
    ) {
        self.joins.lock().remove(&node_id);
        self.nodes.merge(node_id, nodes);
        self.adopt_cluster_id(broker, cluster_id);
        self.node_changes.send_modify(|n| *n += 1);
        tracing::info!(
            node_id,
            nodes = self.nodes.len(),
            "node added to the cluster"
        );
    }

    /// Takes `cluster_id`, as the metadata log records it, unless this
    /// node has one (a joining node keeps it from then on).
    pub(super) fn adopt_cluster_id(&self, broker: &Broker, cluster_id: &str) {
        match self.id.get() {
            None => {
                if let Err(e) = cluster_nodes::store_id(&broker.config().data_dir, cluster_id) {
                    tracing::error!(error = %e, "keeping the cluster id failed; it is learned again at the next start");
                }
                let _ = self.id.set(cluster_id.to_owned());
            }
            Some(mine) if mine != cluster_id => tracing::warn!(
                mine,
                recorded = cluster_id,
                "the metadata log names another cluster id than this node's"
            ),
            Some(_) => {}
        }
    }

    /// Returns once this node is a member with a cluster id: at once for
    /// a configured node or one added before; a node joining for the first
    /// time waits to be added (`herald cluster add-node`), saying so now
    /// and then.
    pub async fn wait_until_added(&self) {
        let mut changes = self.node_changes.subscribe();
        let mut next_notice = tokio::time::Instant::now();
        while self.id.get().is_none() {
            if tokio::time::Instant::now() >= next_notice {
                tracing::info!(
                    node_id = self.config.node_id,
                    raft = %self.config.listen,
                    "waiting to be added to a cluster: run `herald cluster add-node` against one of its nodes"
                );
                next_notice += WAITING_NOTICE;
            }
            let _ = tokio::time::timeout_at(next_notice, changes.changed()).await;
        }
    }

    /// Removes node `node_id`: refused while it holds a replica of any
    /// partition (reassign them first) or if it is the last node; else
    /// records the removal and waits up to `patience` for the metadata
    /// group's leader to have taken it out. Stop the node afterwards.
    pub async fn remove_node(
        &self,
        broker: &Broker,
        node_id: u64,
        patience: Duration,
    ) -> Result<(), BrokerError> {
        let pending = self.joins.lock().contains_key(&node_id);
        if self.nodes.get(node_id).is_none() && !pending {
            return Err(BrokerError::UnknownNode(node_id));
        }
        if self.nodes.ids().iter().all(|&n| n == node_id) {
            return Err(BrokerError::InvalidNode(format!(
                "node {node_id} is the cluster's last node"
            )));
        }
        let held = self.replicas_on(broker, node_id);
        if !held.is_empty() {
            return Err(BrokerError::InvalidNode(format!(
                "node {node_id} still holds replicas of {}; reassign them to other nodes first",
                summarize(&held)
            )));
        }
        let mut changes = self.node_changes.subscribe();
        let request = Uuid::new_v4().as_u128();
        self.propose_and_wait(request, Command::RemoveNode { request, node_id })
            .await?;
        let deadline = tokio::time::Instant::now() + patience;
        while self.nodes.get(node_id).is_some() || self.removals.lock().contains(&node_id) {
            match tokio::time::timeout_at(deadline, changes.changed()).await {
                Ok(Ok(())) => {}
                Ok(Err(_)) | Err(_) => {
                    return Err(BrokerError::ClusterUnavailable(format!(
                        "node {node_id}'s removal is recorded but not carried out yet; the cluster keeps at it"
                    )))
                }
            }
        }
        Ok(())
    }

    /// The partitions (`topic/partition`, or the offsets partitions) with
    /// a replica on `node`, or moving onto it.
    fn replicas_on(&self, broker: &Broker, node: u64) -> Vec<String> {
        let mut held = Vec::new();
        for topic in broker.topics() {
            for (index, partition) in topic.partitions().iter().enumerate() {
                if partition
                    .replica_set()
                    .is_some_and(|set| set.nodes.get().contains(&node))
                {
                    held.push(format!("{}/{index}", topic.name()));
                }
            }
        }
        for moving in self.reassignments.lock().values() {
            if moving.target.contains(&node) {
                held.push(format!(
                    "{}/{} (moving there)",
                    moving.topic, moving.partition
                ));
            }
        }
        for index in self.offsets.held_by(node) {
            held.push(format!("{OFFSETS_TOPIC}/{index}"));
        }
        held
    }

    /// Applies a `RemoveNode`: no new replica is placed on the node, and
    /// the metadata group's leader takes it out.
    pub(super) fn record_removal(&self, node_id: u64) -> Result<(), BrokerError> {
        self.joins.lock().remove(&node_id);
        self.removals.lock().insert(node_id);
        self.node_changes.send_modify(|n| *n += 1);
        Ok(())
    }

    /// Applies a `NodeRemoved`.
    pub(super) fn node_removed(&self, node_id: u64) {
        self.removals.lock().remove(&node_id);
        self.joins.lock().remove(&node_id);
        self.nodes.remove(node_id);
        self.node_changes.send_modify(|n| *n += 1);
        if node_id == self.config.node_id {
            tracing::warn!(node_id, "this node was removed from the cluster: stop it");
        } else {
            tracing::info!(
                node_id,
                nodes = self.nodes.len(),
                "node removed from the cluster"
            );
        }
    }

    /// The nodes new replicas may go to: every node but those being
    /// removed.
    pub(super) fn placeable_nodes(&self) -> Vec<u64> {
        let removals = self.removals.lock().clone();
        self.nodes
            .ids()
            .into_iter()
            .filter(|id| !removals.contains(id))
            .collect()
    }

    /// While this node leads the metadata group, carries out the recorded
    /// removals, then the additions, one at a time.
    pub(super) async fn change_nodes_while_leading(self: Arc<Self>) {
        let mut metrics = self.metadata.raft().metrics();
        let mut changes = self.node_changes.subscribe();
        // The last step taken (a node, and whether it was a removal) and
        // when: not taken again for a while, as its record is on its way
        // or the node is not up yet. A removal recorded meanwhile is not
        // held back by an addition's wait.
        let mut last_step: Option<(u64, bool, tokio::time::Instant)> = None;
        loop {
            let fresh = |id: u64, removal: bool| {
                last_step.is_some_and(|(n, r, at)| {
                    n == id && r == removal && at.elapsed() < Duration::from_secs(5)
                })
            };
            let leading = self.metadata.is_leader() && self.metadata.caught_up();
            let removal = self.removals.lock().iter().next().copied();
            let addition = self
                .joins
                .lock()
                .iter()
                .next()
                .map(|(id, node)| (*id, node.clone()));
            let step = match (removal, addition) {
                (Some(node_id), _) if leading && !fresh(node_id, true) => {
                    Some((node_id, true, self.carry_out_removal(node_id).await))
                }
                (None, Some((node_id, node))) if leading && !fresh(node_id, false) => {
                    Some((node_id, false, self.carry_out_addition(node_id, node).await))
                }
                _ => None,
            };
            if let Some((node_id, removal, outcome)) = step {
                last_step = Some((node_id, removal, tokio::time::Instant::now()));
                if let Err(e) = outcome {
                    tracing::info!(node_id, error = %e, "changing the cluster's nodes: not yet");
                }
            }
            tokio::select! {
                _ = self.stop.cancelled() => return,
                _ = metrics.changed() => {}
                _ = changes.changed() => {}
                _ = tokio::time::sleep(Duration::from_secs(1)) => {}
            }
        }
    }

    /// Makes `node_id` a voter, then records `NodeAdded`.
    async fn carry_out_addition(&self, node_id: u64, node: ClusterNode) -> Result<(), String> {
        self.make_voter(node_id, &node).await?;
        let mut nodes = self.nodes.all();
        nodes.insert(node_id, node);
        let added = Command::NodeAdded {
            cluster_id: self.id().to_owned(),
            node_id,
            nodes,
        };
        self.propose(&added)
            .await
            .map_err(|e| format!("recording the addition: {e}"))
    }

    /// Takes `node_id` out of the metadata group's membership (a voter or
    /// a learner), then records `NodeRemoved`.
    async fn carry_out_removal(&self, node_id: u64) -> Result<(), String> {
        let raft = self.metadata.raft();
        let (voter, member) = {
            let metrics = raft.metrics();
            let metrics = metrics.borrow_watched();
            let membership = metrics.membership_config.membership();
            let voter = membership.voter_ids().any(|id| id == node_id);
            (voter, membership.get_node(&node_id).is_some())
        };
        if voter {
            raft.change_membership(
                ChangeMembers::RemoveVoters(BTreeSet::from([node_id])),
                false,
            )
            .await
            .map_err(|e| format!("removing voter {node_id}: {e}"))?;
        } else if member {
            raft.change_membership(ChangeMembers::RemoveNodes(BTreeSet::from([node_id])), false)
                .await
                .map_err(|e| format!("removing learner {node_id}: {e}"))?;
        }
        self.propose(&Command::NodeRemoved { node_id })
            .await
            .map_err(|e| format!("recording the removal: {e}"))
    }

    /// Makes `node_id` a voter of the metadata group: a learner first,
    /// then a voter once it holds the log as it was when it became one.
    async fn make_voter(&self, node_id: u64, node: &ClusterNode) -> Result<(), String> {
        let raft = self.metadata.raft();
        let (voter, known_at) = {
            let metrics = raft.metrics();
            let metrics = metrics.borrow_watched();
            let membership = metrics.membership_config.membership();
            let voter = membership.voter_ids().any(|id| id == node_id);
            let known_at = membership.get_node(&node_id).map(|n| n.addr.clone());
            (voter, known_at)
        };
        if voter {
            return Ok(());
        }
        let learner = BasicNode {
            addr: node.raft.clone(),
        };
        match known_at {
            None => {
                // Not a learner before it answers: the leader would send
                // it every heartbeat in vain.
                reachable(&node.raft).await.map_err(|e| {
                    format!(
                        "node {node_id} is not reachable at {} ({e}): is it running with --cluster-join?",
                        node.raft
                    )
                })?;
                raft.add_learner(node_id, learner, false)
                    .await
                    .map_err(|e| format!("adding node {node_id} as a learner: {e}"))?;
            }
            Some(addr) if addr != node.raft => {
                // A pending addition whose addresses were corrected: only
                // a learner's address is changed, never a voter's.
                raft.change_membership(
                    ChangeMembers::SetNodes(BTreeMap::from([(node_id, learner)])),
                    true,
                )
                .await
                .map_err(|e| format!("correcting learner {node_id}'s address: {e}"))?;
            }
            Some(_) => {}
        }
        self.wait_for_catch_up(node_id).await?;
        raft.change_membership(ChangeMembers::AddVoterIds(BTreeSet::from([node_id])), true)
            .await
            .map_err(|e| format!("making node {node_id} a voter: {e}"))?;
        Ok(())
    }

    /// Waits (one try's worth) until learner `node_id` holds the metadata
    /// log up to where the leader's log ended when the wait began.
    async fn wait_for_catch_up(&self, node_id: u64) -> Result<(), String> {
        let mut metrics = self.metadata.raft().metrics();
        let target = metrics.borrow_watched().last_log_index.unwrap_or(0);
        let caught_up = tokio::time::timeout(CATCH_UP_TRY, async {
            loop {
                {
                    let now = metrics.borrow_watched();
                    let Some(replication) = &now.replication else {
                        return Err("this node no longer leads the metadata group".to_owned());
                    };
                    let matched = replication
                        .get(&node_id)
                        .and_then(|m| m.as_ref().map(|id| id.index));
                    if matched.is_some_and(|index| index >= target) {
                        return Ok(());
                    }
                }
                if metrics.changed().await.is_err() {
                    return Err("the metadata group stopped".to_owned());
                }
            }
        })
        .await;
        caught_up.unwrap_or_else(|_| {
            Err(format!(
                "node {node_id} has not caught up within {CATCH_UP_TRY:?} (is it running with --cluster-join?)"
            ))
        })
    }
}

/// Whether something listens at `addr` (a node's Raft listener).
async fn reachable(addr: &str) -> std::io::Result<()> {
    match tokio::time::timeout(REACH_PATIENCE, tokio::net::TcpStream::connect(addr)).await {
        Ok(connected) => connected.map(drop),
        Err(_) => Err(std::io::Error::new(
            std::io::ErrorKind::TimedOut,
            "no answer to a connection",
        )),
    }
}

/// Refuses an id or addresses no node can have.
fn check_node(node_id: u64, node: &ClusterNode) -> Result<(), BrokerError> {
    if node_id == 0 || node_id > i32::MAX as u64 {
        return Err(BrokerError::InvalidNode(format!(
            "node ids are between 1 and {}, not {node_id}",
            i32::MAX
        )));
    }
    let raft_ok = node
        .raft
        .rsplit_once(':')
        .is_some_and(|(host, port)| !host.is_empty() && port.parse::<u16>().is_ok_and(|p| p > 0));
    if !raft_ok {
        return Err(BrokerError::InvalidNode(format!(
            "node {node_id}'s Raft listener must be HOST:PORT, not {:?}",
            node.raft
        )));
    }
    if node.kafka_host.is_empty() || node.kafka_port == 0 {
        return Err(BrokerError::InvalidNode(format!(
            "node {node_id}'s Kafka listener must be HOST:PORT"
        )));
    }
    Ok(())
}

/// `held`, shortened for a message.
fn summarize(held: &[String]) -> String {
    const SHOWN: usize = 5;
    if held.len() <= SHOWN {
        return held.join(", ");
    }
    format!(
        "{} and {} more",
        held[..SHOWN].join(", "),
        held.len() - SHOWN
    )
}

/// Adding a node that is there: fine at the same addresses, refused at
/// others (a second node cannot take an id).
fn same_node(node_id: u64, known: &ClusterNode, asked: &ClusterNode) -> Result<(), BrokerError> {
    if known == asked {
        return Ok(());
    }
    Err(BrokerError::NodeExists {
        id: node_id,
        known: format!(
            "Raft {} and Kafka {}:{}",
            known.raft, known.kafka_host, known.kafka_port
        ),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(raft: &str) -> ClusterNode {
        ClusterNode {
            raft: raft.to_owned(),
            kafka_host: "127.0.0.4".to_owned(),
            kafka_port: 9092,
        }
    }

    #[test]
    fn a_node_to_add_needs_a_valid_id_and_addresses() {
        assert!(check_node(4, &node("127.0.0.4:9193")).is_ok());
        assert!(matches!(
            check_node(0, &node("127.0.0.4:9193")),
            Err(BrokerError::InvalidNode(_))
        ));
        assert!(check_node(1 << 31, &node("127.0.0.4:9193")).is_err());
        assert!(check_node(4, &node("127.0.0.4")).is_err());
        assert!(check_node(4, &node(":9193")).is_err());
        assert!(check_node(4, &node("127.0.0.4:0")).is_err());
        let mut no_kafka = node("127.0.0.4:9193");
        no_kafka.kafka_host.clear();
        assert!(check_node(4, &no_kafka).is_err());
    }

    #[tokio::test]
    async fn a_node_is_reachable_only_where_something_listens() {
        let listening = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listening.local_addr().unwrap().to_string();
        assert!(reachable(&addr).await.is_ok());
        drop(listening);
        assert!(
            reachable(&addr).await.is_err(),
            "nothing listens there any more"
        );
    }

    #[test]
    fn adding_a_known_node_again_is_fine_at_the_same_addresses_only() {
        let known = node("127.0.0.4:9193");
        assert!(same_node(4, &known, &known.clone()).is_ok());
        assert!(matches!(
            same_node(4, &known, &node("127.0.0.5:9193")),
            Err(BrokerError::NodeExists { id: 4, .. })
        ));
    }
}
