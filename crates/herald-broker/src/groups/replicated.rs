//! The coordinator of a replicated offsets partition (feature `cluster`).
//!
//! In a cluster, committed offsets live in Raft-replicated offsets
//! partitions (see `offset_shards`), and a group's coordinator is the
//! leader of its partition. The leader runs an ordinary [`GroupService`]
//! whose records go through Raft instead of a local fsync: each
//! `Output::Persist` batch is proposed to the group's Raft and reported to
//! the coordinator once a quorum holds it durably, so an acknowledged
//! commit survives the loss of any minority of the replicas. Proposals
//! commit in the order they were made, and a task reports them in that
//! order, as the coordinator requires, while the worker goes on with other
//! calls: a slow quorum delays only the commits waiting for it.
//!
//! A service is bound to the term it was loaded in. It replays the
//! partition up to the commit point once its replica leads and has applied
//! an entry of that term (so every earlier leader's commits are in the
//! replay), and it proposes nothing once the replica's term moved on:
//! another leader may have written since, and the shard loads a fresh
//! service instead.
//!
//! Compaction: every commit adds a record, but a new leader needs only the
//! last offset per group and partition. Once the batches proposed since
//! the last compaction (or the load) reach 64 MiB and the size of the
//! state then, the worker waits for its batches in flight, proposes the
//! coordinator's whole state as new batches, and once they are committed a
//! DeleteRecords moves the partition's log start to the first of them, on
//! every replica (through Raft: a snapshot and a purge). A coordinator
//! loads from the log start, so it replays the state and what followed.
//! A leader lost half-way leaves the state written twice at worst, which
//! replays to the same offsets.

use std::sync::mpsc;
use std::sync::Arc;

use bytes::Bytes;
use herald_group::{AppendId, AppendResult, GroupConfig, GroupCoordinator, Record};
use herald_raft::{PartitionReplica, Proposal};
use herald_records::EncodeError;

use super::{offsets_log, Command, GroupService, Persistence, StoreView};
use crate::error::BrokerError;

/// The worker's side of a replicated offsets partition.
pub(crate) struct ReplicatedStore {
    replica: Arc<PartitionReplica>,
    /// The term the coordinator was loaded in.
    term: u64,
    /// Proposed batches, awaited (in order) by the reporting task.
    completions: tokio::sync::mpsc::UnboundedSender<(AppendId, Proposal)>,
    /// Batches proposed and not yet reported to the coordinator.
    in_flight: usize,
    /// Bytes proposed since the last compaction (or stored at the load).
    written: u64,
    /// Bytes of the state the last compaction wrote.
    compacted: u64,
    /// Below this much written, no compaction.
    compact_min_bytes: u64,
    /// Where the compaction's tail (awaiting commits, then the delete)
    /// runs: the worker is a thread of its own.
    runtime: tokio::runtime::Handle,
}

/// Records per batch when writing the state.
const STATE_BATCH_RECORDS: usize = 1024;

impl ReplicatedStore {
    /// Proposes `records` as one batch; `None` when the outcome will come
    /// as a `Command::Persisted`, `Some` when it is known at once.
    pub(super) fn persist(
        &mut self,
        append: AppendId,
        records: &[Record],
        now_ms: i64,
    ) -> Option<AppendResult> {
        if !self.replica.is_leader() || self.replica.term() != self.term {
            tracing::debug!(
                term = self.term,
                "offsets partition leadership moved; the commit is refused"
            );
            return Some(AppendResult::Failed);
        }
        let values: Vec<Vec<u8>> = records.iter().map(Record::encode).collect();
        let batch = match offsets_log::encode_batch(&values, now_ms) {
            Ok(batch) => batch,
            Err(EncodeError::Empty) => return Some(AppendResult::Durable),
            Err(e) => {
                tracing::error!(error = %e, "encoding group records failed");
                return Some(AppendResult::Failed);
            }
        };
        let max = self.replica.log().max_batch_bytes();
        if batch.len() > max {
            tracing::error!(
                size = batch.len(),
                max,
                "group records exceed the offsets partition's batch limit"
            );
            return Some(AppendResult::Failed);
        }
        self.written += batch.len() as u64;
        let proposal = self.replica.propose(Bytes::from(batch));
        match self.completions.send((append, proposal)) {
            Ok(()) => {
                self.in_flight += 1;
                None
            }
            Err(_) => Some(AppendResult::Failed),
        }
    }

    /// A proposed batch's outcome reached the worker.
    pub(super) fn reported(&mut self) {
        self.in_flight = self.in_flight.saturating_sub(1);
    }

    /// Batches proposed whose outcome the coordinator has not been told.
    pub(super) fn in_flight(&self) -> usize {
        self.in_flight
    }

    /// Whether the partition has grown enough since the last compaction.
    pub(super) fn compaction_due(&self) -> bool {
        self.written >= self.compact_min_bytes.max(self.compacted)
    }

    /// Proposes `records` (the coordinator's whole state, with no batch in
    /// flight before it) and, once they are committed, deletes everything
    /// before them. Returns at once; the rest runs on the runtime.
    pub(super) fn compact(&mut self, records: &[Record], now_ms: i64) {
        self.written = 0;
        if !self.replica.is_leader() || self.replica.term() != self.term {
            return;
        }
        let max = self.replica.log().max_batch_bytes();
        let mut proposals = Vec::new();
        let mut bytes = 0u64;
        for chunk in records.chunks(STATE_BATCH_RECORDS) {
            let values: Vec<Vec<u8>> = chunk.iter().map(Record::encode).collect();
            match offsets_log::encode_batch(&values, now_ms) {
                Ok(batch) if batch.len() <= max => {
                    bytes += batch.len() as u64;
                    proposals.push(self.replica.propose(Bytes::from(batch)));
                }
                Ok(batch) => {
                    tracing::error!(
                        size = batch.len(),
                        max,
                        "offsets partition compaction abandoned: a batch of its state exceeds the batch limit"
                    );
                    return;
                }
                Err(e) => {
                    tracing::error!(error = %e, "offsets partition compaction abandoned: encoding its state failed");
                    return;
                }
            }
        }
        self.compacted = bytes;
        // With no state at all, everything committed so far can go.
        let empty_until = *self.replica.commit_point().borrow();
        let replica = Arc::clone(&self.replica);
        let count = records.len();
        self.runtime.spawn(async move {
            let mut state_start = (proposals.is_empty()).then_some(empty_until);
            for proposal in proposals {
                let placed = proposal.placed.await.ok();
                if state_start.is_none() {
                    state_start = placed.map(|p| p.base_offset);
                }
                if !matches!(proposal.committed.await, Ok(Ok(_))) {
                    tracing::info!("offsets partition compaction stopped: leadership moved");
                    return;
                }
            }
            let Some(start) = state_start else {
                return;
            };
            match replica.delete_records(start).await {
                Ok(log_start) => tracing::info!(
                    records = count,
                    state_bytes = bytes,
                    log_start,
                    dir = %replica.log().dir().display(),
                    "offsets partition compacted"
                ),
                Err(e) => tracing::info!(error = %e, "offsets partition compaction stopped before its delete"),
            }
        });
    }
}

impl GroupService {
    /// The coordinator of a replicated offsets partition that `replica`
    /// leads in `term`: replays the partition up to its commit point, then
    /// serves. Call it once the replica has applied an entry of `term`
    /// (`PartitionReplica::caught_up`), within a Tokio runtime (a task
    /// reports the commits).
    pub(crate) fn open_replicated(
        replica: Arc<PartitionReplica>,
        term: u64,
        config: GroupConfig,
    ) -> Result<GroupService, BrokerError> {
        Self::open_replicated_with_compaction(replica, term, config, super::COMPACT_MIN_BYTES)
    }

    /// [`GroupService::open_replicated`], compacting the partition once
    /// `compact_min_bytes` were written since the last compaction.
    pub(crate) fn open_replicated_with_compaction(
        replica: Arc<PartitionReplica>,
        term: u64,
        config: GroupConfig,
        compact_min_bytes: u64,
    ) -> Result<GroupService, BrokerError> {
        let mut coordinator = GroupCoordinator::new(config);
        let commit = *replica.commit_point().borrow();
        // From where readers start: a compaction's state, not what it
        // deleted (possibly still stored, awaiting the purge).
        let replayed =
            offsets_log::replay_between(replica.log(), replica.log_start(), commit, |record| {
                coordinator.replay(record)
            })?;
        tracing::info!(
            records = replayed,
            term,
            dir = %replica.log().dir().display(),
            "group coordinator loaded from its replicated offsets partition"
        );
        let (sender, receiver) = mpsc::channel();
        let (completions, mut proposed) =
            tokio::sync::mpsc::unbounded_channel::<(AppendId, Proposal)>();
        let reporter = sender.clone();
        tokio::spawn(async move {
            while let Some((append, proposal)) = proposed.recv().await {
                let result = match proposal.committed.await {
                    Ok(Ok(_)) => AppendResult::Durable,
                    // Refused (leadership lost) or Raft stopped.
                    _ => AppendResult::Failed,
                };
                if reporter.send(Command::Persisted(append, result)).is_err() {
                    break;
                }
            }
        });
        let dir = replica.log().dir().to_path_buf();
        let store = Persistence::Replicated(ReplicatedStore {
            replica: Arc::clone(&replica),
            term,
            completions,
            in_flight: 0,
            written: replica.log().size_bytes(),
            compacted: 0,
            compact_min_bytes,
            runtime: tokio::runtime::Handle::current(),
        });
        Self::start(
            coordinator,
            store,
            StoreView::Replicated(replica),
            sender,
            receiver,
            &dir,
        )
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;
    use std::time::Duration;

    use herald_group::{ErrorCode, OffsetFetchRequest, TopicPartition};
    use herald_raft::network::{node, GroupRouter};
    use herald_raft::RaftTiming;

    use super::*;
    use crate::groups::{test_calls, GroupCall, GroupReply};

    async fn ask(service: &GroupService, call: GroupCall) -> GroupReply {
        tokio::time::timeout(
            Duration::from_secs(10),
            super::super::routing::ask(service, call),
        )
        .await
        .expect("answered in time")
    }

    async fn commit(service: &GroupService, offset: i64) -> ErrorCode {
        let call = test_calls::commit("g", 1, offset, String::new());
        match ask(service, call).await {
            GroupReply::OffsetCommit(response) => response.partitions[0].error,
            other => panic!("not a commit answer: {other:?}"),
        }
    }

    async fn fetched(service: &GroupService) -> i64 {
        let call = GroupCall::OffsetFetch(OffsetFetchRequest {
            group_id: "g".into(),
            partitions: Some(vec![TopicPartition::new("orders", 1)]),
            require_stable: false,
        });
        match ask(service, call).await {
            GroupReply::OffsetFetch(response) => response.partitions[0].offset,
            other => panic!("not a fetch answer: {other:?}"),
        }
    }

    /// A one-replica offsets partition (a quorum of one), leading and
    /// caught up.
    async fn leading_replica(dir: &std::path::Path, router: &GroupRouter) -> Arc<PartitionReplica> {
        let timing = RaftTiming {
            heartbeat: Duration::from_millis(20),
            election_min: Duration::from_millis(100),
            election_max: Duration::from_millis(200),
            seed: None,
        };
        let replica = PartitionReplica::open(
            1,
            7,
            dir,
            crate::offset_shards::offsets_log_config(),
            timing,
            router,
        )
        .await
        .expect("replica opens");
        let members = BTreeMap::from([(1, node("127.0.0.1:9".parse().expect("address")))]);
        replica
            .raft()
            .initialize(members)
            .await
            .expect("initialized");
        for _ in 0..500 {
            if replica.is_leader() && replica.caught_up() {
                return Arc::new(replica);
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        panic!("a single replica did not become a caught-up leader");
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn commits_are_committed_through_raft_and_a_reloaded_coordinator_replays_them() {
        let dir = tempfile::tempdir().expect("tempdir");
        let router = GroupRouter::default();
        let replica = leading_replica(dir.path(), &router).await;
        let term = replica.term();
        let before = *replica.commit_point().borrow();
        let service = GroupService::open_replicated(Arc::clone(&replica), term, Default::default())
            .expect("coordinator loads");
        for offset in [5, 9, 42] {
            assert_eq!(commit(&service, offset).await, ErrorCode::None);
        }
        assert_eq!(fetched(&service).await, 42);
        assert!(
            *replica.commit_point().borrow() >= before + 3,
            "each commit is a committed Raft entry"
        );
        tokio::task::block_in_place(|| service.close()).expect("close");

        // The next leader (here the same replica) loads what was committed,
        // skipping Raft's own entries.
        let reloaded =
            GroupService::open_replicated(Arc::clone(&replica), term, Default::default())
                .expect("coordinator reloads");
        assert_eq!(fetched(&reloaded).await, 42);
        tokio::task::block_in_place(|| reloaded.close()).expect("close");
    }

    async fn commit_to(service: &GroupService, group: &str, partition: i32, offset: i64) {
        let call = test_calls::commit(group, partition, offset, format!("at {offset}"));
        match ask(service, call).await {
            GroupReply::OffsetCommit(response) => {
                assert_eq!(response.partitions[0].error, ErrorCode::None)
            }
            other => panic!("not a commit answer: {other:?}"),
        }
    }

    async fn fetched_from(service: &GroupService, group: &str, partition: i32) -> (i64, String) {
        let call = GroupCall::OffsetFetch(OffsetFetchRequest {
            group_id: group.into(),
            partitions: Some(vec![TopicPartition::new("orders", partition)]),
            require_stable: false,
        });
        match ask(service, call).await {
            GroupReply::OffsetFetch(response) => {
                let p = &response.partitions[0];
                (p.offset, p.metadata.clone())
            }
            other => panic!("not a fetch answer: {other:?}"),
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_partition_is_compacted_through_raft_and_a_reloaded_coordinator_has_every_last_commit(
    ) {
        const COMPACT_AT: u64 = 16 * 1024;
        let dir = tempfile::tempdir().expect("tempdir");
        let router = GroupRouter::default();
        let replica = leading_replica(dir.path(), &router).await;
        let term = replica.term();
        let service = GroupService::open_replicated_with_compaction(
            Arc::clone(&replica),
            term,
            Default::default(),
            COMPACT_AT,
        )
        .expect("coordinator loads");
        // About 100 bytes a commit: several compactions on the way, and
        // the last commit of each (group, partition) somewhere in between.
        let mut last = BTreeMap::new();
        for i in 0..1500i64 {
            let (group, partition) = (format!("g{}", i % 5), (i % 3) as i32);
            commit_to(&service, &group, partition, i).await;
            last.insert((group, partition), i);
        }
        for _ in 0..200 {
            if replica.log().log_start_offset() > 0 {
                break;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        assert!(
            replica.log().log_start_offset() > 0,
            "the records before a compaction's state are purged"
        );
        tokio::task::block_in_place(|| service.close()).expect("close");

        let mut replayed = 0u64;
        offsets_log::replay_between(
            replica.log(),
            replica.log_start(),
            *replica.commit_point().borrow(),
            |_| replayed += 1,
        )
        .expect("replays");
        assert!(
            replayed < 1000,
            "a load replays the state and what followed, not every commit: {replayed}"
        );
        let reloaded =
            GroupService::open_replicated(Arc::clone(&replica), term, Default::default())
                .expect("coordinator reloads");
        for ((group, partition), offset) in &last {
            assert_eq!(
                fetched_from(&reloaded, group, *partition).await,
                (*offset, format!("at {offset}")),
                "{group}/{partition}"
            );
        }
        tokio::task::block_in_place(|| reloaded.close()).expect("close");
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_coordinator_of_an_earlier_term_refuses_commits() {
        let dir = tempfile::tempdir().expect("tempdir");
        let router = GroupRouter::default();
        let replica = leading_replica(dir.path(), &router).await;
        let stale_term = replica.term().saturating_sub(1);
        let service =
            GroupService::open_replicated(Arc::clone(&replica), stale_term, Default::default())
                .expect("coordinator loads");
        let end = replica.log().high_watermark();
        assert_eq!(
            commit(&service, 7).await,
            ErrorCode::CoordinatorNotAvailable,
            "another leader may have written since its term"
        );
        assert_eq!(replica.log().high_watermark(), end, "nothing was proposed");
        tokio::task::block_in_place(|| service.close()).expect("close");
    }
}
