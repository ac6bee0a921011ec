//! The replicated backend: one replica of a partition whose replicas form a
//! Raft group (`herald-raft`), the partition's log being the Raft log.
//!
//! Appends go to the group's leader only (elsewhere they are refused with
//! [`StorageError::NotLeader`], so the client looks the leader up again)
//! and are queued for its Raft core, which decides their offsets: the
//! backend does not place synchronously. acks=1 completes once the
//! leader's log holds the batch, acks=all once a quorum has it durably
//! and the leader applied it. Readers never see past the commit point (the
//! high watermark), so a tail a new leader cuts was never served.
//!
//! Not yet replicated, and refused here rather than done on one replica:
//! moving the log start (DeleteRecords) and retention, which would delete
//! entries outside Raft.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::SystemTime;

use herald_log::{ConfigError, LogConfig, LogError};
use herald_raft::openraft::errors::ClientWriteError;

use super::local::{found, read_error, stored};
use herald_raft::PartitionReplica;

use super::{
    Acks, Appended, PartitionStorage, PendingAppend, StorageError, StorageStats, StoredBatches,
    TimestampOffset, ValidBatch, Watermarks,
};

/// One replica of a replicated partition.
#[derive(Debug, Clone)]
pub struct RaftStorage {
    replica: Arc<PartitionReplica>,
}

/// Completes an append to a replicated partition.
pub type RaftCompletion = super::RemoteCompletion;

impl RaftStorage {
    /// The backend over `replica`.
    pub fn new(replica: Arc<PartitionReplica>) -> Self {
        Self { replica }
    }

    /// The replica, for the cluster's own calls (membership, leadership).
    pub fn replica(&self) -> &Arc<PartitionReplica> {
        &self.replica
    }

    /// The leader this replica knows of, and its term.
    pub fn leader_and_term(&self) -> Option<(u64, u64)> {
        let leader = self.replica.leader()?;
        Some((leader, self.replica.term()))
    }

    fn commit_point(&self) -> u64 {
        *self.replica.commit_point().borrow()
    }

    /// Periodic upkeep of the log (rolls, interval flushes, index files);
    /// its retention is off (see the module docs).
    pub(crate) fn maintain(&self, now: SystemTime) -> Result<(), LogError> {
        self.replica.log().maintain(now)
    }

    /// Applies a topic's changed settings, retention excepted.
    pub(crate) fn update_config(&self, config: LogConfig) -> Result<(), ConfigError> {
        self.replica.log().update_config(without_retention(config))
    }

    /// Flushes and closes the log; the replica stops answering appends.
    pub(crate) fn close(&self) -> Result<(), LogError> {
        self.replica.log().close()
    }

    fn check_serving(&self) -> Result<(), StorageError> {
        match self.replica.log().poisoned() {
            Some(reason) => Err(StorageError::Failed(reason)),
            None => Ok(()),
        }
    }
}

/// A replicated partition's log configuration: retention would delete
/// entries outside Raft, so it is off until it is replicated.
pub fn without_retention(config: LogConfig) -> LogConfig {
    LogConfig {
        retention_age: None,
        retention_bytes: None,
        ..config
    }
}

fn write_error(e: &ClientWriteError<herald_raft::PartitionRaft>) -> StorageError {
    match e {
        ClientWriteError::ForwardToLeader(_) => StorageError::NotLeader,
        other => StorageError::Unavailable(other.to_string().into()),
    }
}

impl PartitionStorage for RaftStorage {
    type Completion = RaftCompletion;

    fn places_synchronously(&self) -> bool {
        false
    }

    fn max_batch_bytes(&self) -> usize {
        self.replica.log().max_batch_bytes()
    }

    fn append(
        &self,
        batch: ValidBatch<'_>,
        acks: Acks,
    ) -> Result<PendingAppend<RaftCompletion>, StorageError> {
        self.check_serving()?;
        let max = self.max_batch_bytes();
        if batch.bytes().len() > max {
            return Err(StorageError::TooLarge {
                size: batch.bytes().len(),
                max,
            });
        }
        if !self.replica.is_leader() {
            return Err(StorageError::NotLeader);
        }
        let max_timestamp = batch.header().max_timestamp();
        // The request's buffer is borrowed; the entry outlives it.
        let proposal = self
            .replica
            .propose(bytes::Bytes::copy_from_slice(batch.bytes()));
        let appended = move |base_offset, last_offset| Appended {
            base_offset,
            last_offset,
            max_timestamp,
        };
        let completion: Pin<Box<dyn Future<Output = _> + Send>> = match acks {
            Acks::All => Box::pin(async move {
                match proposal.committed.await {
                    Ok(Ok(response)) => response
                        .data
                        .map(|p| appended(p.base_offset, p.last_offset))
                        .ok_or_else(|| {
                            StorageError::Unavailable("the entry was not placed".into())
                        }),
                    Ok(Err(e)) => Err(write_error(&e)),
                    // Raft stopped before answering: leadership is gone.
                    Err(_) => Err(StorageError::NotLeader),
                }
            }),
            Acks::Leader | Acks::None => Box::pin(async move {
                match proposal.placed.await {
                    Ok(p) => Ok(appended(p.base_offset, p.last_offset)),
                    // Never placed: the commit answer says why.
                    Err(_) => match proposal.committed.await {
                        Ok(Err(e)) => Err(write_error(&e)),
                        _ => Err(StorageError::NotLeader),
                    },
                }
            }),
        };
        Ok(PendingAppend {
            appended: None,
            completion: RaftCompletion::from_box(completion),
        })
    }

    async fn read(
        &self,
        from_offset: u64,
        max_bytes: usize,
    ) -> Result<StoredBatches, StorageError> {
        self.check_serving()?;
        let log = self.replica.log();
        let slice = log
            .read_visible(from_offset, max_bytes, self.commit_point())
            .map_err(read_error)?;
        if slice.bytes.is_empty() && log.is_closed() {
            return Err(StorageError::Closed);
        }
        Ok(stored(slice))
    }

    async fn offset_for_timestamp(
        &self,
        timestamp: i64,
    ) -> Result<Option<TimestampOffset>, StorageError> {
        self.check_serving()?;
        let commit = self.commit_point();
        Ok(self
            .replica
            .log()
            .offset_for_timestamp(timestamp)
            .filter(|t| t.offset < commit)
            .map(found))
    }

    async fn max_timestamp(&self) -> Result<Option<TimestampOffset>, StorageError> {
        self.check_serving()?;
        let commit = self.commit_point();
        // The largest timestamp may lie in the uncommitted tail for a
        // moment; then none is answered rather than an uncommitted one.
        Ok(self
            .replica
            .log()
            .max_timestamp()
            // Raft's own entries carry no timestamp (-1).
            .filter(|t| t.offset < commit && t.timestamp >= 0)
            .map(found))
    }

    fn wait_for_data(&self, offset: u64) -> impl Future<Output = ()> + Send {
        let mut commit = self.replica.commit_point();
        async move {
            // Resolves once the commit point passes `offset`, or the
            // replica stops (the sender dropped): the caller re-checks.
            let _ = commit.wait_for(|&point| point > offset).await;
        }
    }

    async fn truncate_before(&self, _offset: u64) -> Result<u64, StorageError> {
        Err(StorageError::Unavailable(
            "moving the log start of a replicated partition is not supported yet".into(),
        ))
    }

    fn watermarks(&self) -> Watermarks {
        let high_watermark = self.commit_point();
        Watermarks {
            log_start_offset: self.replica.log().log_start_offset().min(high_watermark),
            high_watermark,
        }
    }

    fn log_start_offset(&self) -> u64 {
        self.replica.log().log_start_offset()
    }

    fn stats(&self) -> StorageStats {
        let log = self.replica.log();
        StorageStats {
            size_bytes: log.size_bytes(),
            segment_count: log.segment_count(),
            flushes: Some(log.flush_stats()),
        }
    }

    fn failure(&self) -> Option<Arc<str>> {
        self.replica.log().poisoned()
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;
    use std::time::Duration;

    use herald_log::FlushPolicy;
    use herald_raft::network::{node, GroupRouter};
    use herald_raft::{PartitionReplica, RaftTiming};

    use super::*;
    use crate::storage::conformance::{self, Harness};

    /// Single-replica groups (a quorum of one) in temporary directories.
    struct RaftHarness {
        root: tempfile::TempDir,
        next: u64,
        router: GroupRouter,
        open: BTreeMap<u64, std::path::PathBuf>,
    }

    fn config() -> LogConfig {
        LogConfig {
            segment_bytes: 1024 * 1024,
            index_interval_bytes: 1024,
            preallocate_bytes: 64 * 1024,
            max_batch_bytes: 64 * 1024,
            flush: FlushPolicy::Never,
            ..LogConfig::default()
        }
    }

    fn timing() -> RaftTiming {
        RaftTiming {
            heartbeat: Duration::from_millis(20),
            election_min: Duration::from_millis(100),
            election_max: Duration::from_millis(200),
            seed: None,
        }
    }

    fn block_on<T>(future: impl Future<Output = T>) -> T {
        tokio::task::block_in_place(|| tokio::runtime::Handle::current().block_on(future))
    }

    impl RaftHarness {
        async fn open(&self, group: u64, initialize: bool) -> RaftStorage {
            let dir = &self.open[&group];
            let replica = PartitionReplica::open(1, group, dir, config(), timing(), &self.router)
                .await
                .expect("replica opens");
            if initialize {
                let members = BTreeMap::from([(1, node("127.0.0.1:9".parse().unwrap()))]);
                replica
                    .raft()
                    .initialize(members)
                    .await
                    .expect("initialized");
            }
            // Leading, with everything in its log committed (a new
            // leader's blank entry commits what came before).
            for _ in 0..500 {
                if replica.is_leader()
                    && *replica.commit_point().borrow() == replica.log().high_watermark()
                {
                    return RaftStorage::new(Arc::new(replica));
                }
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
            panic!("a single replica did not become a leader");
        }
    }

    impl Harness for RaftHarness {
        type Storage = RaftStorage;

        fn create(&mut self) -> RaftStorage {
            self.next += 1;
            let group = self.next;
            self.open
                .insert(group, self.root.path().join(format!("group-{group}")));
            block_on(self.open(group, true))
        }

        fn reopen(&mut self, storage: RaftStorage) -> RaftStorage {
            let group = *self
                .open
                .iter()
                .find(|(_, dir)| storage.replica.log().dir().starts_with(dir))
                .expect("a partition of this harness")
                .0;
            storage.close().expect("closes cleanly");
            let replica =
                Arc::try_unwrap(storage.replica).expect("the harness holds the only handle");
            block_on(async {
                replica.shutdown().await;
                self.open(group, false).await
            })
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_replicated_partition_keeps_the_partition_contract() {
        let mut h = RaftHarness {
            root: tempfile::tempdir().unwrap(),
            next: 0,
            router: GroupRouter::default(),
            open: BTreeMap::new(),
        };
        // Every check but moving the log start, which is refused until it
        // is replicated (see the module docs).
        conformance::appends_get_consecutive_offsets_and_read_back_as_stored(&mut h).await;
        conformance::reads_are_bounded_by_their_own_high_watermark(&mut h).await;
        conformance::reads_outside_the_stored_range_are_out_of_range(&mut h).await;
        conformance::a_read_returns_whole_batches_and_at_least_one(&mut h).await;
        conformance::waiting_for_data_resolves_when_an_append_lands(&mut h).await;
        conformance::timestamps_find_the_first_record_at_or_after(&mut h).await;
        conformance::acknowledged_appends_survive_a_reopen(&mut h).await;
        conformance::an_oversized_batch_is_refused_and_nothing_is_placed(&mut h).await;
    }
}
