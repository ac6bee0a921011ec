//! openraft's state machine for a partition. The partition's state is its
//! log, which the log store already holds: applying an entry only moves
//! the commit point, the offset below which readers may read, and answers
//! where a data entry's records are.
//!
//! A snapshot is therefore metadata: the last entry it covers, the
//! membership then, and the offset where the log resumes after it. A
//! follower that installs one restarts its log at that offset, unless it
//! already holds the entry the snapshot ends at.

use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use futures_util::{Stream, TryStreamExt};
use openraft::storage::{EntryResponder, RaftSnapshotBuilder, RaftStateMachine};
use openraft::{EntryPayload, StoredMembership};
use serde::{Deserialize, Serialize};
use tokio::sync::watch;

use crate::entry_codec::{membership_from_json, membership_to_json};
use crate::meta::StoredLogId;
use crate::raft_log::RaftLog;
use crate::types::{LogId, PartitionRaft};

/// The membership a state machine last applied.
pub type AppliedMembership = openraft::alias::StoredMembershipOf<PartitionRaft>;
/// A snapshot's metadata.
pub type SnapshotMeta = openraft::alias::SnapshotMetaOf<PartitionRaft>;
/// A snapshot with its data.
pub type Snapshot = openraft::alias::SnapshotOf<PartitionRaft, PartitionSnapshot>;

/// File name of the last snapshot, inside the partition's directory.
pub const SNAPSHOT_FILE: &str = "raft-snapshot.json";

/// What a partition's snapshot carries besides openraft's metadata.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct PartitionSnapshot {
    /// The offset following the snapshot's last entry: where a follower
    /// that installs it restarts its log.
    pub next_offset: u64,
}

/// A snapshot as stored in its file.
#[derive(Serialize, Deserialize)]
struct StoredSnapshot {
    last_log_id: Option<StoredLogId>,
    membership_log_id: Option<StoredLogId>,
    membership: serde_json::Value,
    next_offset: u64,
}

impl StoredSnapshot {
    fn of(snapshot: &Snapshot) -> io::Result<StoredSnapshot> {
        let membership: serde_json::Value = serde_json::from_slice(&membership_to_json(
            snapshot.meta.last_membership.membership(),
        )?)
        .map_err(io::Error::other)?;
        Ok(StoredSnapshot {
            last_log_id: snapshot.meta.last_log_id.as_ref().map(StoredLogId::from),
            membership_log_id: snapshot
                .meta
                .last_membership
                .log_id()
                .as_ref()
                .map(StoredLogId::from),
            membership,
            next_offset: snapshot.snapshot.next_offset,
        })
    }

    fn into_snapshot(self) -> io::Result<Snapshot> {
        let json = serde_json::to_vec(&self.membership).map_err(io::Error::other)?;
        let membership = membership_from_json(&json)?;
        Ok(Snapshot {
            meta: SnapshotMeta {
                last_log_id: self.last_log_id.map(StoredLogId::log_id),
                last_membership: StoredMembership::new(
                    self.membership_log_id.map(StoredLogId::log_id),
                    membership,
                ),
            },
            snapshot: PartitionSnapshot {
                next_offset: self.next_offset,
            },
        })
    }
}

/// Called with every data entry a state machine applies, in log order, on
/// every replica, with where its records are: how a group whose entries
/// are commands (the cluster's metadata) acts on them, and how a
/// partition keeps its idempotent producers' state. Runs on the state machine's task: it must not
/// wait on the group itself.
pub type ApplyHook = Arc<dyn Fn(&LogId, &crate::RecordBatch, Option<crate::Placed>) + Send + Sync>;

/// The state machine of one partition.
pub struct PartitionStateMachine {
    hook: Option<ApplyHook>,
    raft_log: Arc<RaftLog>,
    applied: Option<LogId>,
    membership: AppliedMembership,
    /// Memberships applied since the current snapshot, oldest first, the
    /// last being `membership`: a snapshot may end before the last
    /// applied entry, and carries the membership as of its end.
    memberships: Vec<AppliedMembership>,
    /// The last snapshot built or installed, shared with the builders.
    current: Arc<CurrentSnapshot>,
    commit: watch::Sender<u64>,
}

/// The last snapshot, kept in its file and in memory.
struct CurrentSnapshot {
    path: PathBuf,
    snapshot: parking_lot::Mutex<Option<Snapshot>>,
}

impl CurrentSnapshot {
    fn store(&self, snapshot: Snapshot) -> io::Result<()> {
        let bytes =
            serde_json::to_vec(&StoredSnapshot::of(&snapshot)?).map_err(io::Error::other)?;
        herald_log::durable_file::write_atomically(&self.path, &bytes).map_err(io::Error::other)?;
        *self.snapshot.lock() = Some(snapshot);
        Ok(())
    }
}

impl PartitionStateMachine {
    /// The state machine over `raft_log`, resuming from the snapshot kept
    /// in `dir` if any (openraft applies the committed entries after it
    /// again: applying is idempotent).
    pub fn open(raft_log: Arc<RaftLog>, dir: &Path) -> io::Result<PartitionStateMachine> {
        let snapshot = match std::fs::read(dir.join(SNAPSHOT_FILE)) {
            Ok(bytes) => Some(
                serde_json::from_slice::<StoredSnapshot>(&bytes)
                    .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))?
                    .into_snapshot()?,
            ),
            Err(e) if e.kind() == io::ErrorKind::NotFound => None,
            Err(e) => return Err(e),
        };
        let start = raft_log.log().log_start_offset();
        let (applied, membership, commit) = match &snapshot {
            Some(s) => (
                s.meta.last_log_id,
                s.meta.last_membership.clone(),
                s.snapshot.next_offset.max(start),
            ),
            None => (None, AppliedMembership::default(), start),
        };
        Ok(PartitionStateMachine {
            hook: None,
            raft_log,
            applied,
            memberships: vec![membership.clone()],
            membership,
            current: Arc::new(CurrentSnapshot {
                path: dir.join(SNAPSHOT_FILE),
                snapshot: parking_lot::Mutex::new(snapshot),
            }),
            commit: watch::Sender::new(commit),
        })
    }

    /// Calls `hook` with every data entry applied from now on (on open,
    /// openraft applies again every committed entry after the snapshot).
    pub fn with_hook(mut self, hook: ApplyHook) -> Self {
        self.hook = Some(hook);
        self
    }

    /// The commit point: every offset below it is committed by a quorum
    /// and may be read. Readers wait on the receiver for it to move.
    pub fn commit_point(&self) -> watch::Receiver<u64> {
        self.commit.subscribe()
    }

    fn advance_commit(&self, end: u64) {
        self.commit.send_if_modified(|point| {
            let moved = end > *point;
            *point = (*point).max(end);
            moved
        });
    }
}

/// Builds a snapshot of what a state machine has applied: it becomes the
/// current snapshot once built.
pub struct PartitionSnapshotBuilder {
    snapshot: Snapshot,
    current: Arc<CurrentSnapshot>,
}

impl RaftSnapshotBuilder<PartitionRaft> for PartitionSnapshotBuilder {
    type SnapshotData = PartitionSnapshot;

    async fn build_snapshot(&mut self) -> Result<Snapshot, io::Error> {
        self.current.store(self.snapshot.clone())?;
        Ok(self.snapshot.clone())
    }
}

impl RaftStateMachine<PartitionRaft> for PartitionStateMachine {
    type SnapshotData = PartitionSnapshot;
    type SnapshotBuilder = PartitionSnapshotBuilder;

    async fn applied_state(&mut self) -> Result<(Option<LogId>, AppliedMembership), io::Error> {
        Ok((self.applied, self.membership.clone()))
    }

    async fn apply<Strm>(&mut self, mut entries: Strm) -> Result<(), io::Error>
    where
        Strm: Stream<Item = Result<EntryResponder<PartitionRaft>, io::Error>> + Unpin + Send,
    {
        while let Some((entry, responder)) = entries.try_next().await? {
            let index = entry.log_id.index;
            self.applied = Some(entry.log_id);
            let placed = match &entry.payload {
                EntryPayload::Membership(membership) => {
                    self.membership = StoredMembership::new(Some(entry.log_id), membership.clone());
                    self.memberships.push(self.membership.clone());
                    None
                }
                EntryPayload::Normal(batch) => {
                    if let Some(offset) = crate::entry_codec::deleted_before(batch.bytes()) {
                        self.raft_log.delete_before(offset)?;
                    }
                    let placed = self.raft_log.placed(index);
                    if let Some(hook) = &self.hook {
                        hook(&entry.log_id, batch, placed);
                    }
                    placed
                }
                EntryPayload::Blank => None,
            };
            if let Some(end) = self.raft_log.end_offset_of(index) {
                self.advance_commit(end);
            }
            if let Some(responder) = responder {
                responder.send(placed);
            }
        }
        Ok(())
    }

    async fn get_snapshot_builder(&mut self) -> Self::SnapshotBuilder {
        // A snapshot ends where compaction asked (never past what is
        // applied), so that the purge it allows keeps every entry above.
        let last = match (self.raft_log.snapshot_upto(), self.applied) {
            (Some(upto), Some(applied)) if upto.index <= applied.index => Some(upto),
            (_, applied) => applied,
        };
        let current = self.current.snapshot.lock().clone();
        let snapshot = match current {
            // Nothing newer to cover: the current one stays current.
            Some(current) if current.meta.last_log_id >= last => current,
            _ => {
                let next_offset = match last {
                    Some(id) => self
                        .raft_log
                        .end_offset_of(id.index)
                        .unwrap_or_else(|| *self.commit.borrow()),
                    None => self.raft_log.log().log_start_offset(),
                };
                let keep_from = self
                    .memberships
                    .iter()
                    .rposition(|m| m.log_id().as_ref() <= last.as_ref())
                    .unwrap_or(0);
                self.memberships.drain(..keep_from);
                let membership = self
                    .memberships
                    .first()
                    .cloned()
                    .unwrap_or_else(|| self.membership.clone());
                Snapshot {
                    meta: SnapshotMeta {
                        last_log_id: last,
                        last_membership: membership,
                    },
                    snapshot: PartitionSnapshot { next_offset },
                }
            }
        };
        PartitionSnapshotBuilder {
            snapshot,
            current: Arc::clone(&self.current),
        }
    }

    async fn install_snapshot(
        &mut self,
        meta: &SnapshotMeta,
        snapshot: PartitionSnapshot,
    ) -> Result<(), io::Error> {
        if let Some(last) = meta.last_log_id {
            if !self.raft_log.contains(&last) {
                self.raft_log.restart_after(last, snapshot.next_offset)?;
                tracing::info!(
                    dir = %self.raft_log.log().dir().display(),
                    offset = snapshot.next_offset,
                    index = last.index,
                    "replica restarted its log from the leader's snapshot: the entries it lacked were deleted"
                );
            }
            self.advance_commit(snapshot.next_offset);
        }
        self.applied = meta.last_log_id;
        self.membership = meta.last_membership.clone();
        self.memberships = vec![self.membership.clone()];
        self.current.store(Snapshot {
            meta: meta.clone(),
            snapshot,
        })
    }

    async fn get_current_snapshot(&mut self) -> Result<Option<Snapshot>, io::Error> {
        Ok(self.current.snapshot.lock().clone())
    }
}
