//! One replica of a partition: its log, its Raft numbering, its state
//! machine and openraft's `Raft` over them, answering its peers through a
//! [`GroupRouter`].

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use herald_log::{Log, LogConfig};
use openraft::errors::{ClientWriteError, RaftError};
use openraft::impls::ProgressResponder;
use openraft::raft::ClientWriteResult;
use openraft::{Config, SnapshotPolicy};
use tokio::sync::{mpsc, oneshot, watch};

use crate::network::{
    GroupId, GroupNetwork, GroupRouter, PartitionRaftHandle, RaftRequest, RaftResponse,
};
use crate::raft_log::RaftLog;
use crate::state_machine::{ApplyHook, PartitionStateMachine};
use crate::types::{PartitionRaft, Placed, PlacementTicket, RecordBatch};

/// Raft's timing for a node's groups.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RaftTiming {
    /// How often a leader reminds followers it is alive.
    pub heartbeat: Duration,
    /// A follower that hears nothing for a random time in
    /// `election_min..election_max` stands for election.
    pub election_min: Duration,
    /// See `election_min`.
    pub election_max: Duration,
    /// Where Raft's random draws (election timeouts, tick phases) come
    /// from: `None` for the operating system's randomness, as in
    /// production; a seed to replay a run exactly (see [`crate::runtime`]).
    pub seed: Option<u64>,
}

impl Default for RaftTiming {
    /// Failover within a couple of seconds, while a loaded two-core
    /// machine's scheduling hiccups (tens of milliseconds) do not trigger
    /// needless elections.
    fn default() -> Self {
        Self {
            heartbeat: Duration::from_millis(150),
            election_min: Duration::from_millis(1_000),
            election_max: Duration::from_millis(2_000),
            seed: None,
        }
    }
}

/// Why a replica could not be opened or written.
#[derive(Debug, thiserror::Error)]
pub enum ReplicaError {
    /// The partition's log could not be opened.
    #[error("opening the partition log: {0}")]
    Log(#[from] herald_log::LogError),
    /// Its Raft files could not be read.
    #[error("opening the partition's Raft state: {0}")]
    State(#[from] std::io::Error),
    /// openraft refused the configuration.
    #[error("Raft configuration: {0}")]
    Config(#[from] openraft::ConfigError),
    /// openraft stopped.
    #[error("Raft stopped: {0}")]
    Fatal(String),
    /// This replica does not lead the group; the leader is named when
    /// known.
    #[error("not the leader (leader: {leader:?})")]
    NotLeader {
        /// The leader's node id, if known.
        leader: Option<u64>,
    },
    /// The write failed otherwise.
    #[error("write failed: {0}")]
    Write(String),
}

/// One replica of a partition.
pub struct PartitionReplica {
    group: GroupId,
    raft: PartitionRaftHandle,
    raft_log: Arc<RaftLog>,
    commit: watch::Receiver<u64>,
    router: GroupRouter,
    proposals: mpsc::UnboundedSender<(RecordBatch, CommitResponder)>,
    /// The task dropping entries below the log start (`compaction`).
    compaction: tokio::task::AbortHandle,
    /// The commit index stored when the replica was opened.
    committed_at_open: Option<u64>,
}

/// How a proposal's commit is answered.
type CommitResponder = ProgressResponder<PartitionRaft, ClientWriteResult<PartitionRaft>>;

/// A batch proposed to the group: learn where the leader placed it, then
/// whether the quorum committed it.
pub struct Proposal {
    /// Where the leader's log placed the batch (acks=1); dropped unsent if
    /// this replica is not the leader or stopped.
    pub placed: oneshot::Receiver<Placed>,
    /// The commit (acks=all).
    pub committed:
        openraft::alias::OneshotReceiverOf<PartitionRaft, ClientWriteResult<PartitionRaft>>,
}

impl PartitionReplica {
    /// Opens (or creates) the replica kept in `dir` as node `node_id` of
    /// `group`, and serves its peers' requests through `router`.
    pub async fn open(
        node_id: u64,
        group: GroupId,
        dir: &Path,
        log_config: LogConfig,
        timing: RaftTiming,
        router: &GroupRouter,
    ) -> Result<PartitionReplica, ReplicaError> {
        Self::open_with_hook(node_id, group, dir, log_config, timing, router, None).await
    }

    /// [`PartitionReplica::open`], calling `hook` with every data entry
    /// applied (a group whose entries are commands).
    pub async fn open_with_hook(
        node_id: u64,
        group: GroupId,
        dir: &Path,
        log_config: LogConfig,
        timing: RaftTiming,
        router: &GroupRouter,
        hook: Option<ApplyHook>,
    ) -> Result<PartitionReplica, ReplicaError> {
        let log = Arc::new(Log::open(dir.join("log"), log_config)?);
        let raft_log = Arc::new(RaftLog::open(log, dir)?);
        let committed_at_open = raft_log.committed().map(|id| id.index);
        let mut state_machine = PartitionStateMachine::open(Arc::clone(&raft_log), dir)?;
        if let Some(hook) = hook {
            state_machine = state_machine.with_hook(hook);
        }
        let commit = state_machine.commit_point();
        let config = Config {
            cluster_name: format!("herald-group-{group}"),
            heartbeat_interval: timing.heartbeat.as_millis() as u64,
            election_timeout_min: timing.election_min.as_millis() as u64,
            election_timeout_max: timing.election_max.as_millis() as u64,
            // A partition's snapshots follow its retention, never a count
            // of entries: the log is the state.
            snapshot_policy: SnapshotPolicy::Never,
            // A snapshot is built where compaction wants the log to
            // start: everything it covers goes.
            max_in_snapshot_log_to_keep: 0,
            ..Config::default()
        }
        .validate()?;
        let starting = PartitionRaftHandle::new(
            node_id,
            Arc::new(config),
            GroupNetwork::new(group, router),
            crate::PartitionLogStore::new(Arc::clone(&raft_log)),
            state_machine,
        );
        // Raft's tasks are spawned here: seeding this call seeds them all.
        let raft = match timing.seed {
            Some(seed) => crate::runtime::seeded(seed, starting).await,
            None => starting.await,
        }
        .map_err(|e| ReplicaError::Fatal(e.to_string()))?;
        router.add(group, raft.clone(), Arc::clone(raft_log.log()));
        // Proposals reach Raft in the order they were made: a connection's
        // produce requests land in the partition in the order it sent them.
        let (proposals, mut queue) = mpsc::unbounded_channel::<(RecordBatch, CommitResponder)>();
        let proposer = raft.clone();
        tokio::spawn(async move {
            while let Some((batch, responder)) = queue.recv().await {
                if proposer
                    .client_write_ff(batch, Some(responder))
                    .await
                    .is_err()
                {
                    // Raft stopped: what is queued is answered by dropping
                    // its responders.
                    break;
                }
            }
        });
        let compaction = tokio::spawn(crate::compaction::run(
            group,
            raft.clone(),
            Arc::clone(&raft_log),
            commit.clone(),
        ))
        .abort_handle();
        Ok(PartitionReplica {
            group,
            raft,
            raft_log,
            commit,
            router: router.clone(),
            proposals,
            compaction,
            committed_at_open,
        })
    }

    /// openraft's handle: membership, metrics, leadership.
    pub fn raft(&self) -> &PartitionRaftHandle {
        &self.raft
    }

    /// Turns write caching on or off for this replica (see
    /// [`RaftLog::set_write_caching`]); appends from now on follow it.
    pub fn set_write_caching(&self, on: bool) {
        self.raft_log.set_write_caching(on);
    }

    /// The partition's log. Readers must stay below the commit point.
    pub fn log(&self) -> &Arc<Log> {
        self.raft_log.log()
    }

    /// The commit point: offsets below it are committed by a quorum.
    pub fn commit_point(&self) -> watch::Receiver<u64> {
        self.commit.clone()
    }

    /// The index the group had committed when this replica was opened, as
    /// stored then: what it applies again on opening.
    pub fn committed_at_open(&self) -> Option<u64> {
        self.committed_at_open
    }

    /// Where readers start: the log's start, or past it where a committed
    /// DeleteRecords moved it.
    pub fn log_start(&self) -> u64 {
        self.raft_log.log_start()
    }

    /// Has this replica drop its committed entries wholly below `offset`
    /// (retention), through a snapshot and openraft's purge, in the
    /// background. Only this replica's copy: each replica applies
    /// retention to its own log, as Kafka's brokers do.
    pub fn compact_before(&self, offset: u64) {
        self.raft_log
            .compact_before(offset.min(*self.commit.borrow()));
    }

    /// Moves the partition's log start to `offset` on every replica
    /// (Kafka's DeleteRecords): proposes the entry that says so, after
    /// every batch proposed before it, and answers the log start once it
    /// is committed and applied here. Only the leader takes it.
    pub async fn delete_records(&self, offset: u64) -> Result<u64, ReplicaError> {
        if !self.is_leader() {
            return Err(ReplicaError::NotLeader {
                leader: self.leader(),
            });
        }
        let proposal = self.propose(crate::entry_codec::delete_records(offset)?);
        match proposal.committed.await {
            Ok(Ok(_)) => Ok(self.raft_log.log_start()),
            Ok(Err(ClientWriteError::ForwardToLeader(forward))) => Err(ReplicaError::NotLeader {
                leader: forward.leader_id,
            }),
            Ok(Err(e)) => Err(ReplicaError::Write(e.to_string())),
            Err(_) => Err(ReplicaError::NotLeader { leader: None }),
        }
    }

    /// Proposes `batch` (a validated client batch, or an entry of
    /// herald's own such as a DeleteRecords), after every batch
    /// proposed before it; see [`Proposal`] for what it answers.
    pub fn propose(&self, batch: Bytes) -> Proposal {
        let (ticket, placed) = PlacementTicket::new();
        let (responder, committed) = CommitResponder::complete_only();
        // A stopped proposer drops the pair, which answers both receivers.
        let _ = self
            .proposals
            .send((RecordBatch::with_ticket(batch, ticket), responder));
        Proposal { placed, committed }
    }

    /// Whether this replica has applied an entry of its current term: a
    /// leader's first entry of a term (its blank entry) follows everything
    /// earlier leaders wrote, so once it is applied, state kept at apply
    /// time covers all of that. Entries of its own term it judges itself.
    pub fn caught_up(&self) -> bool {
        use openraft::async_runtime::WatchReceiver;
        let metrics = self.raft.metrics();
        let now = metrics.borrow_watched();
        now.last_applied
            .is_some_and(|applied| applied.leader_id.term == now.current_term)
    }

    /// Whether this replica leads its group now (it may stop any moment).
    pub fn is_leader(&self) -> bool {
        self.raft.is_leader()
    }

    /// The current term as this replica knows it.
    pub fn term(&self) -> u64 {
        use openraft::async_runtime::WatchReceiver;
        self.raft.metrics().borrow_watched().current_term
    }

    /// The group's leader as this replica knows it.
    pub fn leader(&self) -> Option<u64> {
        use openraft::async_runtime::WatchReceiver;
        self.raft.metrics().borrow_watched().current_leader
    }

    /// Writes `batch` through the group's leader wherever it is (here, or
    /// forwarded to it) and answers once it is committed and applied
    /// there; retries while leadership settles, for up to `patience`.
    pub async fn write(&self, batch: Bytes, patience: Duration) -> Result<Placed, ReplicaError> {
        let deadline = tokio::time::Instant::now() + patience;
        loop {
            let attempt = match self.leader() {
                Some(leader) if leader == *self.raft.node_id() => self.append(batch.clone()).await,
                Some(leader) => {
                    let remaining = deadline.saturating_duration_since(tokio::time::Instant::now());
                    // A leader that stops answering (frozen, cut off) is
                    // replaced by an election: the write then goes to the
                    // new one rather than wait out its patience here.
                    tokio::select! {
                        forwarded = self.forward(leader, batch.clone(), remaining) => forwarded,
                        () = self.leader_moves_from(leader) => {
                            Err(ReplicaError::NotLeader { leader: self.leader() })
                        }
                    }
                }
                None => Err(ReplicaError::NotLeader { leader: None }),
            };
            match attempt {
                Ok(placed) => return Ok(placed),
                Err(e @ (ReplicaError::NotLeader { .. } | ReplicaError::Write(_)))
                    if tokio::time::Instant::now() < deadline =>
                {
                    tracing::debug!(group = self.group, error = %e, "write waits for a leader");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
                Err(e) => return Err(e),
            }
        }
    }

    /// Resolves once this replica knows of a leader other than `leader`
    /// (never, if its Raft stops).
    async fn leader_moves_from(&self, leader: u64) {
        use openraft::async_runtime::WatchReceiver;
        let mut metrics = self.raft.metrics();
        loop {
            if metrics
                .borrow_watched()
                .current_leader
                .is_some_and(|current| current != leader)
            {
                return;
            }
            if metrics.changed().await.is_err() {
                return std::future::pending().await;
            }
        }
    }

    async fn forward(
        &self,
        leader: u64,
        batch: Bytes,
        patience: Duration,
    ) -> Result<Placed, ReplicaError> {
        use openraft::async_runtime::WatchReceiver;
        let addr = self
            .raft
            .metrics()
            .borrow_watched()
            .membership_config
            .membership()
            .get_node(&leader)
            .map(|node| node.addr.clone())
            .ok_or(ReplicaError::NotLeader { leader: None })?;
        let mut client = self.router.client(self.group, addr);
        match client
            .call(&RaftRequest::Propose(RecordBatch::new(batch)), patience)
            .await
        {
            Ok(RaftResponse::Proposed(Some(placed))) => Ok(placed),
            Ok(RaftResponse::Proposed(None)) => {
                Err(ReplicaError::Write("the entry was not placed".to_owned()))
            }
            Ok(RaftResponse::NotLeader(leader)) => Err(ReplicaError::NotLeader { leader }),
            Ok(_) => Err(ReplicaError::Write(
                "unexpected answer to a write".to_owned(),
            )),
            Err(e) => Err(ReplicaError::Write(e.to_string())),
        }
    }

    /// Replicates `batch` (a validated client batch) and answers once a
    /// quorum has it durably and it is applied: acks=all.
    pub async fn append(&self, batch: Bytes) -> Result<Placed, ReplicaError> {
        match self.raft.client_write(RecordBatch::new(batch)).await {
            Ok(response) => response
                .data
                .ok_or_else(|| ReplicaError::Write("the entry was not placed".to_owned())),
            Err(RaftError::APIError(ClientWriteError::ForwardToLeader(forward))) => {
                Err(ReplicaError::NotLeader {
                    leader: forward.leader_id,
                })
            }
            Err(e) => Err(ReplicaError::Write(e.to_string())),
        }
    }

    /// Stops this replica: its Raft stops and its peers' requests are
    /// refused. Its files stay, for a later open.
    pub async fn shutdown(self) {
        self.compaction.abort();
        self.router.remove(self.group);
        if let Err(e) = self.raft.shutdown().await {
            tracing::warn!(group = self.group, error = %e, "Raft did not stop cleanly");
        }
    }
}

impl Drop for PartitionReplica {
    fn drop(&mut self) {
        self.compaction.abort();
    }
}

impl std::fmt::Debug for PartitionReplica {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PartitionReplica")
            .field("group", &self.group)
            .field("commit", &*self.commit.borrow())
            .finish()
    }
}
