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
//! Not done yet: a replicated offsets partition is never compacted (each
//! commit adds a record until snapshots of replicated partitions exist),
//! so a new leader's replay grows with the commits since the cluster
//! started.

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
}

impl ReplicatedStore {
    /// Proposes `records` as one batch; `None` when the outcome will come
    /// as a `Command::Persisted`, `Some` when it is known at once.
    pub(super) fn persist(
        &self,
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
        let proposal = self.replica.propose(Bytes::from(batch));
        match self.completions.send((append, proposal)) {
            Ok(()) => None,
            Err(_) => Some(AppendResult::Failed),
        }
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
        let mut coordinator = GroupCoordinator::new(config);
        let commit = *replica.commit_point().borrow();
        let replayed =
            offsets_log::replay_until(replica.log(), commit, |record| coordinator.replay(record))?;
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

    use herald_group::{
        ErrorCode, OffsetCommitPartition, OffsetCommitRequest, OffsetFetchRequest, TopicPartition,
    };
    use herald_raft::network::{node, GroupRouter};
    use herald_raft::RaftTiming;

    use super::*;
    use crate::groups::{GroupCall, GroupReply};

    async fn ask(service: &GroupService, call: GroupCall) -> GroupReply {
        tokio::time::timeout(
            Duration::from_secs(10),
            super::super::routing::ask(service, call),
        )
        .await
        .expect("answered in time")
    }

    async fn commit(service: &GroupService, offset: i64) -> ErrorCode {
        let call = GroupCall::OffsetCommit(OffsetCommitRequest {
            group_id: "g".into(),
            generation_id: -1,
            member_id: String::new(),
            group_instance_id: None,
            partitions: vec![OffsetCommitPartition {
                topic: "orders".into(),
                partition: 1,
                offset,
                leader_epoch: None,
                metadata: None,
            }],
        });
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
