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
//!
//! Records are deleted through Raft, never behind its back. DeleteRecords
//! is an entry the leader proposes: once committed, every replica starts
//! its readers at the new log start and drops the entries below it.
//! Retention is each replica's own, as on Kafka's brokers: its log keeps
//! no retention of its own (it would delete Raft entries outside Raft);
//! maintenance finds where retention would cut and has the replica drop
//! the committed entries below. Either way the entries go through a
//! snapshot and openraft's purge, so a follower that needs them installs
//! the snapshot and restarts its log where the leader's starts.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::SystemTime;

use herald_log::{ConfigError, LogConfig, LogError};
use herald_raft::openraft::errors::ClientWriteError;

use super::local::{found, read_error, stored};
use herald_raft::{PartitionReplica, ReplicaError};

use super::{
    Acks, Appended, PartitionStorage, PendingAppend, StorageError, StorageStats, StoredBatches,
    TimestampOffset, ValidBatch, Watermarks,
};

/// One replica of a replicated partition.
#[derive(Debug, Clone)]
pub struct RaftStorage {
    replica: Arc<PartitionReplica>,
    /// The topic's retention, applied by [`RaftStorage::maintain`].
    retention: Arc<parking_lot::Mutex<Retention>>,
}

/// A topic's retention settings (`retention.ms`, `retention.bytes`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Retention {
    age: Option<std::time::Duration>,
    bytes: Option<u64>,
}

impl Retention {
    fn of(config: &LogConfig) -> Self {
        Self {
            age: config.retention_age,
            bytes: config.retention_bytes,
        }
    }
}

/// Completes an append to a replicated partition.
pub type RaftCompletion = super::RemoteCompletion;

impl RaftStorage {
    /// The backend over `replica` (opened with [`without_retention`] of
    /// `config`), applying `config`'s retention through Raft.
    pub fn new(replica: Arc<PartitionReplica>, config: &LogConfig) -> Self {
        Self {
            replica,
            retention: Arc::new(parking_lot::Mutex::new(Retention::of(config))),
        }
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

    /// Periodic upkeep of the log (rolls, interval flushes, index files,
    /// deleting purged segments), and retention: the committed entries
    /// below where it would cut are dropped through Raft (see the module
    /// docs).
    pub(crate) fn maintain(&self, now: SystemTime) -> Result<(), LogError> {
        let log = self.replica.log();
        log.maintain(now)?;
        let retention = *self.retention.lock();
        if let Some(cut) = log.retention_cut(now, retention.age, retention.bytes) {
            self.replica.compact_before(cut);
        }
        Ok(())
    }

    /// Applies a topic's changed settings; retention is kept here, not in
    /// the log.
    pub(crate) fn update_config(&self, config: LogConfig) -> Result<(), ConfigError> {
        let retention = Retention::of(&config);
        self.replica
            .log()
            .update_config(without_retention(config))?;
        *self.retention.lock() = retention;
        Ok(())
    }

    fn log_start(&self) -> u64 {
        self.replica.log_start()
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

/// A replicated partition's log configuration: the log's own retention
/// would delete entries outside Raft, so [`RaftStorage`] applies it
/// instead.
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
        let commit = self.commit_point();
        let start = self.log_start();
        if from_offset < start {
            return Err(StorageError::OffsetOutOfRange {
                requested: from_offset,
                log_start_offset: start.min(commit),
                high_watermark: commit,
            });
        }
        let slice = log
            .read_visible(from_offset, max_bytes, commit)
            .map_err(read_error)?;
        if slice.bytes.is_empty() && log.is_closed() {
            return Err(StorageError::Closed);
        }
        let mut read = stored(slice);
        read.watermarks.log_start_offset = start.min(read.watermarks.high_watermark);
        Ok(read)
    }

    async fn offset_for_timestamp(
        &self,
        timestamp: i64,
    ) -> Result<Option<TimestampOffset>, StorageError> {
        self.check_serving()?;
        let commit = self.commit_point();
        let start = self.log_start();
        Ok(self
            .replica
            .log()
            .offset_for_timestamp_from(timestamp, start)
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

    async fn truncate_before(&self, offset: u64) -> Result<u64, StorageError> {
        self.check_serving()?;
        let high_watermark = self.commit_point();
        if offset > high_watermark {
            return Err(StorageError::OffsetOutOfRange {
                requested: offset,
                log_start_offset: self.log_start().min(high_watermark),
                high_watermark,
            });
        }
        let start = self.log_start();
        if offset <= start {
            return Ok(start);
        }
        self.replica
            .delete_records(offset)
            .await
            .map_err(|e| match e {
                ReplicaError::NotLeader { .. } => StorageError::NotLeader,
                other => StorageError::Unavailable(other.to_string().into()),
            })
    }

    fn watermarks(&self) -> Watermarks {
        let high_watermark = self.commit_point();
        Watermarks {
            log_start_offset: self.log_start().min(high_watermark),
            high_watermark,
        }
    }

    fn log_start_offset(&self) -> u64 {
        self.log_start()
    }

    fn stats(&self) -> StorageStats {
        let log = self.replica.log();
        StorageStats {
            size_bytes: log.size_bytes(),
            segment_count: log.segment_count(),
            flushes: Some(log.flush_stats()),
            // The history indexer reads embedded logs only.
            history_lag_records: 0,
            key_copy_bytes: 0,
            key_copy_pending_segments: 0,
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
                    return RaftStorage::new(Arc::new(replica), &config());
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
        conformance::run_all(&mut h).await;
    }
}
