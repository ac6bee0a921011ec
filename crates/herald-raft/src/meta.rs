//! The few facts a Raft replica keeps beside its log: the vote it cast,
//! the last log id it knows committed, the last one purged, and where its
//! first entry sits in the log. One small file, replaced atomically and
//! synced before any call that changed it returns (a vote must never be
//! forgotten across a crash).

use std::io;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::types::{log_id, LogId, Vote};

/// File name inside the partition's directory.
pub const FILE: &str = "raft-state.json";

/// A vote as stored.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct StoredVote {
    /// Term voted in.
    pub term: u64,
    /// Node voted for.
    pub node: u64,
    /// Whether a quorum granted it.
    pub committed: bool,
}

/// A log id as stored.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct StoredLogId {
    /// Its term.
    pub term: u64,
    /// Its index.
    pub index: u64,
}

impl From<&LogId> for StoredLogId {
    fn from(id: &LogId) -> Self {
        Self {
            term: id.leader_id.term,
            index: id.index,
        }
    }
}

impl StoredLogId {
    /// As openraft's log id.
    pub fn log_id(self) -> LogId {
        log_id(self.term, self.index)
    }
}

/// The Raft index of the entry stored at a log offset: with the entries
/// that follow it in the log, it numbers every entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Anchor {
    /// Raft index of the entry.
    pub index: u64,
    /// Offset of its batch in the partition's log.
    pub offset: u64,
}

/// Everything in the file.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RaftMeta {
    /// The vote last cast or granted.
    pub vote: Option<StoredVote>,
    /// The last log id known committed.
    pub committed: Option<StoredLogId>,
    /// The last log id purged.
    pub purged: Option<StoredLogId>,
    /// Where numbering starts; `None` before the first entry.
    pub anchor: Option<Anchor>,
    /// The log start a committed DeleteRecords entry asked for: readers
    /// see nothing below it, even while the batch holding it (or entries
    /// not yet purged) is still stored.
    #[serde(default)]
    pub deleted_before: Option<u64>,
}

impl RaftMeta {
    /// Reads the file in `dir`; a missing file is a replica that never
    /// voted nor stored an entry.
    pub fn read(dir: &Path) -> io::Result<RaftMeta> {
        match std::fs::read(path(dir)) {
            Ok(bytes) => serde_json::from_slice(&bytes)
                .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e)),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(RaftMeta::default()),
            Err(e) => Err(e),
        }
    }

    /// Replaces the file in `dir`, durably.
    pub fn write(&self, dir: &Path) -> io::Result<()> {
        let bytes = serde_json::to_vec(self).map_err(io::Error::other)?;
        herald_log::durable_file::write_atomically(&path(dir), &bytes).map_err(io::Error::other)
    }
}

/// A vote as openraft's.
pub fn vote_of(stored: StoredVote) -> Vote {
    let mut vote = Vote::new(stored.term, stored.node);
    vote.committed = stored.committed;
    vote
}

/// A vote as stored.
pub fn stored_vote(vote: &Vote) -> StoredVote {
    StoredVote {
        term: vote.leader_id.term,
        node: vote.leader_id.voted_for,
        committed: vote.committed,
    }
}

fn path(dir: &Path) -> PathBuf {
    dir.join(FILE)
}
