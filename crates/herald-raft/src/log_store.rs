//! openraft's log storage over a partition's log.

use std::fmt::Debug;
use std::io;
use std::ops::{Bound, RangeBounds};
use std::sync::Arc;

use openraft::storage::{IOFlushed, LogState, RaftLogReader, RaftLogStorage};

use crate::raft_log::RaftLog;
use crate::types::{Entry, LogId, PartitionRaft, Vote};

/// The Raft log of one partition: appends land in the partition's
/// segment log (one write), and complete once flushed (or at once, with
/// write caching on).
#[derive(Debug, Clone)]
pub struct PartitionLogStore {
    raft_log: Arc<RaftLog>,
}

impl PartitionLogStore {
    /// The log storage over `raft_log`.
    pub fn new(raft_log: Arc<RaftLog>) -> Self {
        Self { raft_log }
    }
}

fn index_range(range: &impl RangeBounds<u64>) -> (u64, u64) {
    let start = match range.start_bound() {
        Bound::Included(&i) => i,
        Bound::Excluded(&i) => i.saturating_add(1),
        Bound::Unbounded => 0,
    };
    let end = match range.end_bound() {
        Bound::Included(&i) => i.saturating_add(1),
        Bound::Excluded(&i) => i,
        Bound::Unbounded => u64::MAX,
    };
    (start, end)
}

impl RaftLogReader<PartitionRaft> for PartitionLogStore {
    async fn try_get_log_entries<RB: RangeBounds<u64> + Clone + Debug + Send>(
        &mut self,
        range: RB,
    ) -> Result<Vec<Entry>, io::Error> {
        let (start, end) = index_range(&range);
        self.raft_log.entries(start, end)
    }

    async fn read_vote(&mut self) -> Result<Option<Vote>, io::Error> {
        Ok(self.raft_log.vote())
    }
}

impl RaftLogStorage<PartitionRaft> for PartitionLogStore {
    type LogReader = Self;

    async fn get_log_state(&mut self) -> Result<LogState<PartitionRaft>, io::Error> {
        let (last_purged_log_id, last_log_id) = self.raft_log.log_state();
        Ok(LogState {
            last_purged_log_id,
            last_log_id,
        })
    }

    async fn get_log_reader(&mut self) -> Self::LogReader {
        self.clone()
    }

    async fn save_vote(&mut self, vote: &Vote) -> Result<(), io::Error> {
        self.raft_log.save_vote(vote)
    }

    async fn save_committed(&mut self, committed: Option<LogId>) -> Result<(), io::Error> {
        self.raft_log.save_committed(committed)
    }

    async fn read_committed(&mut self) -> Result<Option<LogId>, io::Error> {
        Ok(self.raft_log.committed())
    }

    async fn append<I>(
        &mut self,
        entries: I,
        callback: IOFlushed<PartitionRaft>,
    ) -> Result<(), io::Error>
    where
        I: IntoIterator<Item = Entry> + Send,
        I::IntoIter: Send,
    {
        let end = self.raft_log.append(entries)?;
        if self.raft_log.write_caching() {
            // Counted as stored once written; flushed later by the log's
            // own policy (the weaker mode, documented as such).
            callback.io_completed(Ok(()));
            return Ok(());
        }
        // Readable now; durable once flushed, off the Raft core's task so
        // that the next appends are written meanwhile (and share the
        // fsync: the log's flushes are group commits).
        let log = Arc::clone(self.raft_log.log());
        tokio::task::spawn_blocking(move || {
            // A truncation since may have cut the log below `end`: what
            // was cut needs no flush, and waiting for it would never end.
            let end = end.min(log.high_watermark());
            let flushed = log.flush_through(end).map_err(io::Error::other);
            callback.io_completed(flushed);
        });
        Ok(())
    }

    async fn truncate_after(&mut self, last_log_id: Option<LogId>) -> Result<(), io::Error> {
        self.raft_log.truncate_after(last_log_id.map(|id| id.index))
    }

    async fn purge(&mut self, log_id: LogId) -> Result<(), io::Error> {
        self.raft_log.purge(log_id)
    }
}
