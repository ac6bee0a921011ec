//! A replica's compaction: dropping the entries below the offset it is
//! asked to (a committed DeleteRecords, retention) through openraft, never
//! behind its back. A snapshot ends at the last entry wholly below that
//! offset and openraft then purges up to it; a follower that needs purged
//! entries is sent that snapshot instead and restarts its log at its end,
//! holding exactly what the leader still holds.

use std::sync::Arc;
use std::time::Duration;

use openraft::async_runtime::WatchReceiver;
use tokio::sync::watch;

use crate::network::{GroupId, PartitionRaftHandle};
use crate::raft_log::RaftLog;

/// How long a snapshot may take to build (it writes one small file).
const SNAPSHOT_PATIENCE: Duration = Duration::from_secs(10);
/// How soon a compaction that could not finish (entries not yet applied,
/// a snapshot already being built) is tried again.
const RETRY_AFTER: Duration = Duration::from_secs(1);

/// Why a compaction step did not finish.
#[derive(Debug, thiserror::Error)]
enum CompactionError {
    #[error("Raft stopped: {0}")]
    Stopped(String),
    #[error("the snapshot to purge up to index {0} was not built in time")]
    SnapshotLate(u64),
    #[error("entry {0} is not applied yet")]
    NotApplied(u64),
}

/// Compacts `raft_log` whenever its compaction target moves, until
/// aborted (when the replica shuts down).
pub(crate) async fn run(
    group: GroupId,
    raft: PartitionRaftHandle,
    raft_log: Arc<RaftLog>,
    commit: watch::Receiver<u64>,
) {
    let mut target = raft_log.compaction_target();
    loop {
        let wanted = *target.borrow_and_update();
        let finished = match compact(&raft, &raft_log, &commit, wanted).await {
            Ok(()) => true,
            Err(CompactionError::Stopped(_)) => return,
            Err(e) => {
                tracing::debug!(group, error = %e, "compaction waits");
                false
            }
        };
        if finished {
            if target.changed().await.is_err() {
                return;
            }
        } else {
            tokio::select! {
                changed = target.changed() => if changed.is_err() { return },
                _ = tokio::time::sleep(RETRY_AFTER) => {}
            }
        }
    }
}

/// Drops the entries wholly below `wanted` (and below the commit point).
async fn compact(
    raft: &PartitionRaftHandle,
    raft_log: &RaftLog,
    commit: &watch::Receiver<u64>,
    wanted: u64,
) -> Result<(), CompactionError> {
    let wanted = wanted.min(*commit.borrow());
    if wanted <= raft_log.log().log_start_offset() {
        return Ok(());
    }
    let Some(upto) = raft_log.last_entry_ending_by(wanted) else {
        return Ok(());
    };
    let (applied, snapshot) = {
        let metrics = raft.metrics();
        let now = metrics.borrow_watched();
        (now.last_applied, now.snapshot)
    };
    if applied.is_none_or(|a| a.index < upto.index) {
        return Err(CompactionError::NotApplied(upto.index));
    }
    if snapshot.is_none_or(|s| s.index < upto.index) {
        raft_log.set_snapshot_upto(Some(upto));
        let built = build_snapshot(raft, upto.index).await;
        raft_log.set_snapshot_upto(None);
        built?;
    }
    // openraft purges once no replication stream reads those entries.
    raft.trigger()
        .purge_log(upto.index)
        .await
        .map_err(|e| CompactionError::Stopped(e.to_string()))
}

async fn build_snapshot(raft: &PartitionRaftHandle, index: u64) -> Result<(), CompactionError> {
    raft.trigger()
        .snapshot()
        .await
        .map_err(|e| CompactionError::Stopped(e.to_string()))?;
    raft.wait(Some(SNAPSHOT_PATIENCE))
        .metrics(
            |m| m.snapshot.is_some_and(|s| s.index >= index),
            "a snapshot for compaction",
        )
        .await
        .map(|_| ())
        .map_err(|_| CompactionError::SnapshotLate(index))
}
