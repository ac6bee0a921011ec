//! Writes sent to a node that does not lead the partition, carried to its
//! leader (feature `cluster`).
//!
//! A Kafka producer finds the leader itself (a follower answers
//! NOT_LEADER_OR_FOLLOWER and the client asks for metadata again), but a
//! push publisher talks to whichever node it connected to: seed 003's
//! "every node handles subscribes, publishes go to the leader". The node
//! sends the batch to the leader's Raft listener as herald-raft's
//! `Propose`, which the leader answers once the batch is committed and
//! applied there: acks=all, as a publish asks.
//!
//! A write is sent again only when it cannot have been written: the node
//! named as leader could not be reached (no connection), or answered that
//! it does not lead. Then the forwarder waits for the cluster to name a
//! leader (the leader announcements that update [`LeaderHints`], no
//! polling), for at most [`LEADER_PATIENCE_MS`]. A connection that fails
//! once the batch was sent, or an answer that does not come within
//! [`CALL_TIMEOUT_MS`], leaves the outcome unknown and is reported as
//! [`StorageError::TimedOut`], never retried (that could store it twice).
//!
//! Bounded: at most [`FORWARDS_IN_FLIGHT_MAX`] forwarded writes wait for
//! their leader at a time (others queue for a permit), and at most
//! [`IDLE_CLIENTS_MAX`] connections to leaders stay open between writes,
//! so a steady stream of publishes reuses connections rather than opening
//! one each.

use std::collections::VecDeque;
use std::net::IpAddr;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use herald_raft::network::{CallError, PeerClient, RaftRequest, RaftResponse};
use herald_raft::{Placed, RecordBatch};
use parking_lot::Mutex;
use tokio::sync::Semaphore;

use crate::cluster_nodes::ClusterNodes;
use crate::partition::{LeaderHints, ReplicaSet};
use crate::storage::StorageError;

/// Forwarded writes waiting for their leader's answer at once, per node.
pub const FORWARDS_IN_FLIGHT_MAX: usize = 64;
/// Connections to leaders kept open between forwarded writes, per node.
pub const IDLE_CLIENTS_MAX: usize = 32;
/// How long a forwarded write waits for the cluster to name a leader it
/// can reach: a couple of elections (1-2 s each by default) and the
/// announcement's commit.
pub const LEADER_PATIENCE_MS: u64 = 10_000;
/// How long a leader may take to commit a forwarded write, as a Kafka
/// producer's default `request.timeout.ms`.
pub const CALL_TIMEOUT_MS: u64 = 30_000;
/// Leaders tried on the word of others (a node answering that another
/// leads) before waiting for the cluster's own announcement.
const REDIRECTS_MAX: usize = 3;

/// Carries writes to partition leaders on other nodes (or this one).
pub struct Forwarder {
    /// The cluster's nodes, with their Raft listeners.
    nodes: Arc<ClusterNodes>,
    /// Where this node's connections leave from.
    source: Option<IpAddr>,
    in_flight: Semaphore,
    idle: Mutex<VecDeque<IdleClient>>,
}

/// A connection to a leader, kept for the next write to its group.
struct IdleClient {
    group: u64,
    node: u64,
    client: PeerClient,
}

impl std::fmt::Debug for Forwarder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Forwarder")
            .field("nodes", &self.nodes.len())
            .field("idle", &self.idle.lock().len())
            .finish_non_exhaustive()
    }
}

/// What one try at the leader came to.
enum Attempt {
    /// Committed there.
    Done(Placed),
    /// The node does not lead the group (it names the one it knows of):
    /// nothing was written.
    NotLeader(Option<u64>),
    /// No connection could be made: nothing was sent.
    Unreached,
    /// Failed, or the outcome is unknown: not to be tried again.
    Failed(StorageError),
}

impl Forwarder {
    /// A forwarder to `nodes` (as they are at each write, so a node added
    /// later is reached too), connecting from `source` if set.
    pub fn new(nodes: Arc<ClusterNodes>, source: Option<IpAddr>) -> Self {
        Self {
            nodes,
            source,
            in_flight: Semaphore::new(FORWARDS_IN_FLIGHT_MAX),
            idle: Mutex::new(VecDeque::with_capacity(IDLE_CLIENTS_MAX)),
        }
    }

    /// Writes `batch` (a validated, non-idempotent batch) through the
    /// leader of `set`'s group and answers where it was placed once it is
    /// committed there. `first_hand` names the leader as a replica on this
    /// node knows it, if there is one; otherwise the cluster's
    /// announcements do.
    pub(crate) async fn write(
        &self,
        set: &ReplicaSet,
        first_hand: impl Fn() -> Option<u64>,
        batch: Bytes,
    ) -> Result<Placed, StorageError> {
        let deadline = tokio::time::Instant::now() + Duration::from_millis(LEADER_PATIENCE_MS);
        // Taken before the first look, so no announcement is missed.
        let mut announcements = set.hints.changes();
        let mut named: Option<u64> = None;
        let mut redirects = 0;
        loop {
            let leader = named
                .take()
                .or_else(&first_hand)
                .or_else(|| set.hints.get(set.group).map(|(leader, _term)| leader));
            if let Some(leader) = leader {
                match self.try_leader(set.group, leader, &batch).await {
                    Attempt::Done(placed) => return Ok(placed),
                    Attempt::Failed(e) => return Err(e),
                    Attempt::NotLeader(Some(other))
                        if other != leader && redirects < REDIRECTS_MAX =>
                    {
                        redirects += 1;
                        named = Some(other);
                        continue;
                    }
                    Attempt::NotLeader(_) | Attempt::Unreached => {}
                }
            }
            // Wait for the cluster to announce a leader (again).
            redirects = 0;
            match tokio::time::timeout_at(deadline, announcements.changed()).await {
                Ok(Ok(())) => {}
                // Out of patience, or the cluster is stopping.
                Ok(Err(_)) | Err(_) => return Err(no_leader(&set.hints, set.group)),
            }
        }
    }

    /// One try at `leader`, on a kept connection if there is one.
    async fn try_leader(&self, group: u64, leader: u64, batch: &Bytes) -> Attempt {
        let Some(addr) = self.nodes.raft_address(leader) else {
            return Attempt::Failed(StorageError::Unavailable(
                format!(
                    "node {leader}, named as the partition's leader, is not a node of the cluster"
                )
                .into(),
            ));
        };
        let Ok(_permit) = self.in_flight.acquire().await else {
            return Attempt::Failed(StorageError::Closed);
        };
        let mut client = self
            .take_idle(group, leader)
            .unwrap_or_else(|| PeerClient::new(group, addr.clone()).from_source(self.source));
        let request = RaftRequest::Propose(RecordBatch::new(batch.clone()));
        let answer = client
            .call(&request, Duration::from_millis(CALL_TIMEOUT_MS))
            .await;
        let attempt = match answer {
            Ok(RaftResponse::Proposed(Some(placed))) => Attempt::Done(placed),
            Ok(RaftResponse::Proposed(None)) => Attempt::Failed(StorageError::Unavailable(
                "the leader did not place the batch".into(),
            )),
            Ok(RaftResponse::NotLeader(other)) => Attempt::NotLeader(other),
            Ok(_) => Attempt::Failed(StorageError::Unavailable(
                "the leader answered a forwarded write with something else".into(),
            )),
            Err(CallError::Connect { .. }) => Attempt::Unreached,
            Err(CallError::Refused { reason, .. }) => {
                Attempt::Failed(StorageError::Unavailable(reason.into()))
            }
            // Sent, and no answer: it may or may not have been written.
            Err(e) => {
                tracing::debug!(group, leader, error = %e, "a forwarded write's outcome is unknown");
                Attempt::Failed(StorageError::TimedOut)
            }
        };
        match attempt {
            Attempt::Done(_) | Attempt::NotLeader(_) => self.keep_idle(group, leader, client),
            // Connections to that node are likely broken too.
            _ => self.forget(leader),
        }
        attempt
    }

    fn take_idle(&self, group: u64, node: u64) -> Option<PeerClient> {
        let mut idle = self.idle.lock();
        let at = idle
            .iter()
            .position(|c| c.group == group && c.node == node)?;
        idle.remove(at).map(|c| c.client)
    }

    fn keep_idle(&self, group: u64, node: u64, client: PeerClient) {
        let mut idle = self.idle.lock();
        if idle.len() == IDLE_CLIENTS_MAX {
            // The longest unused goes (its connection closes).
            idle.pop_front();
        }
        idle.push_back(IdleClient {
            group,
            node,
            client,
        });
    }

    fn forget(&self, node: u64) {
        self.idle.lock().retain(|c| c.node != node);
    }
}

fn no_leader(hints: &LeaderHints, group: u64) -> StorageError {
    let known = match hints.get(group) {
        Some((leader, term)) => format!("node {leader} (term {term}) was last announced"),
        None => "none was announced".to_owned(),
    };
    StorageError::Unavailable(
        format!(
            "no leader of the partition could be reached within {LEADER_PATIENCE_MS} ms; {known}"
        )
        .into(),
    )
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;
    use std::sync::Arc;

    use herald_log::{FlushPolicy, LogConfig};
    use herald_raft::network::{node, GroupRouter};
    use herald_raft::{PartitionReplica, RaftTiming};
    use herald_records::{BatchBuilder, RecordFields};
    use tokio::net::TcpListener;

    use crate::partition::ReplicaNodes;
    use tokio_util::sync::CancellationToken;

    use super::*;

    const GROUP: u64 = 7;

    fn batch(value: &[u8]) -> Bytes {
        let mut builder = BatchBuilder::new(1_000);
        builder.push(RecordFields {
            timestamp_ms: 1_000,
            key: Some(b"subject"),
            value: Some(value),
            headers: &[],
        });
        Bytes::from(builder.finish().expect("a batch"))
    }

    /// A single-replica group (a quorum of one) of node 1, served on a
    /// TCP listener, leading.
    async fn lone_leader(dir: &std::path::Path) -> (PartitionReplica, String, CancellationToken) {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let router = GroupRouter::default();
        let stop = CancellationToken::new();
        tokio::spawn(router.clone().serve(listener, stop.clone()));
        let config = LogConfig {
            segment_bytes: 1024 * 1024,
            preallocate_bytes: 64 * 1024,
            max_batch_bytes: 64 * 1024,
            flush: FlushPolicy::Never,
            ..LogConfig::default()
        };
        let timing = RaftTiming {
            heartbeat: Duration::from_millis(20),
            election_min: Duration::from_millis(100),
            election_max: Duration::from_millis(200),
            ..RaftTiming::default()
        };
        let replica = PartitionReplica::open(1, GROUP, dir, config, timing, &router)
            .await
            .expect("replica opens");
        replica
            .raft()
            .initialize(BTreeMap::from([(1, node(addr))]))
            .await
            .expect("initialized");
        let mut metrics = replica.raft().metrics();
        loop {
            use herald_raft::openraft::async_runtime::WatchReceiver;
            if metrics.borrow_watched().current_leader == Some(1) {
                break;
            }
            metrics.changed().await.expect("Raft runs");
        }
        (replica, addr.to_string(), stop)
    }

    /// Nodes whose Raft listeners are `raft`.
    fn nodes_at<const N: usize>(raft: [(u64, String); N]) -> Arc<ClusterNodes> {
        Arc::new(ClusterNodes::new(
            raft.into_iter()
                .map(|(id, raft)| {
                    let node = crate::cluster_nodes::ClusterNode {
                        raft,
                        kafka_host: "127.0.0.1".to_owned(),
                        kafka_port: 9092,
                    };
                    (id, node)
                })
                .collect(),
        ))
    }

    fn unreachable_address() -> String {
        // Bound, then closed: nothing listens there.
        let socket = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        socket.local_addr().unwrap().to_string()
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_write_waits_for_a_reachable_leader_to_be_announced_and_commits_there() {
        let dir = tempfile::tempdir().unwrap();
        let (replica, addr, stop) = lone_leader(dir.path()).await;
        let forwarder = Arc::new(Forwarder::new(
            nodes_at([(1, addr), (2, unreachable_address())]),
            None,
        ));
        let set = ReplicaSet {
            group: GROUP,
            nodes: ReplicaNodes::new(vec![1, 2]),
            hints: Arc::new(LeaderHints::default()),
            forwarder: Arc::clone(&forwarder),
        };
        // Node 2, where nothing listens, was the last leader announced.
        set.hints.set(GROUP, 2, 1);
        let writer = {
            let set = set.clone();
            tokio::spawn(async move { set.forwarder.write(&set, || None, batch(b"one")).await })
        };
        set.hints.set(GROUP, 1, 2);
        let placed = writer.await.unwrap().expect("committed on the leader");
        let second = forwarder
            .write(&set, || None, batch(b"two"))
            .await
            .expect("committed on the leader");
        assert_eq!(second.base_offset, placed.last_offset + 1);
        // Both are committed there: below the leader's commit point.
        assert!(*replica.commit_point().borrow() > second.last_offset);
        assert_eq!(forwarder.idle.lock().len(), 1, "one connection, kept");
        stop.cancel();
        replica.shutdown().await;
    }

    #[tokio::test(start_paused = true)]
    async fn a_write_no_leader_takes_is_refused_once_patience_runs_out() {
        let forwarder = Arc::new(Forwarder::new(nodes_at([(2, unreachable_address())]), None));
        let set = ReplicaSet {
            group: GROUP,
            nodes: ReplicaNodes::new(vec![2]),
            hints: Arc::new(LeaderHints::default()),
            forwarder: Arc::clone(&forwarder),
        };
        let refused = forwarder.write(&set, || None, batch(b"lost")).await;
        assert!(
            matches!(&refused, Err(StorageError::Unavailable(why)) if why.contains("no leader")),
            "{refused:?}"
        );
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_leader_refuses_forwarded_batches_a_producer_could_not_have_sent_and_serves_on() {
        let dir = tempfile::tempdir().unwrap();
        let (replica, addr, stop) = lone_leader(dir.path()).await;
        let forwarder = Forwarder::new(nodes_at([(1, addr)]), None);
        let set = ReplicaSet {
            group: GROUP,
            nodes: ReplicaNodes::new(vec![1]),
            hints: Arc::new(LeaderHints::default()),
            forwarder: Arc::new(Forwarder::new(nodes_at([]), None)),
        };
        let good = batch(b"fine");
        let mut bad_crc = good.to_vec();
        let last = bad_crc.len() - 1;
        bad_crc[last] ^= 0xff;
        // The same batch as an idempotent producer's: producer id 42 (at
        // byte 43 of the header), the CRC (over bytes 21 on) made again.
        let mut idempotent = good.to_vec();
        idempotent[43..51].copy_from_slice(&42i64.to_be_bytes());
        let crc = crc32c::crc32c(&idempotent[21..]);
        idempotent[17..21].copy_from_slice(&crc.to_be_bytes());
        let too_large = batch(&vec![b'x'; 100 * 1024]);
        let forged = [
            ("a damaged CRC", Bytes::from(bad_crc), "invalid"),
            (
                "garbage",
                Bytes::from_static(b"not a batch at all"),
                "invalid",
            ),
            (
                "an idempotent batch",
                Bytes::from(idempotent),
                "plain client batch",
            ),
            ("a batch over the limit", too_large, "exceeds"),
        ];
        for (what, bytes, says) in forged {
            match forwarder.try_leader(GROUP, 1, &bytes).await {
                Attempt::Failed(StorageError::Unavailable(why)) => {
                    assert!(why.to_string().contains(says), "{what}: {why}")
                }
                Attempt::Done(placed) => panic!("{what} was placed at {}", placed.base_offset),
                _ => panic!("{what} was not refused"),
            }
        }
        // The group goes on: nothing of the above reached its log.
        let placed = set_write(&forwarder, &set, good).await;
        assert_eq!(placed.base_offset, placed.last_offset);
        assert!(*replica.commit_point().borrow() > placed.last_offset);
        stop.cancel();
        replica.shutdown().await;
    }

    async fn set_write(forwarder: &Forwarder, set: &ReplicaSet, batch: Bytes) -> Placed {
        set.hints.set(GROUP, 1, 1);
        forwarder
            .write(set, || None, batch)
            .await
            .expect("committed on the leader")
    }
}
