//! What is kept of each snapshot, and the file that keeps it:
//! `<data-dir>/herald-snapshots.json`, replaced atomically on every change.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use uuid::Uuid;

use herald_log::durable_file::write_atomically;

use super::SnapshotError;

/// File name of the snapshot list inside the data directory.
pub const SNAPSHOTS_FILE: &str = "herald-snapshots.json";
const FORMAT_VERSION: u32 = 1;

/// One snapshot: a cut of one or more topics, pinned until deleted or
/// expired.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SnapshotRecord {
    /// Its id: 1 to 64 characters from `[A-Za-z0-9_-]`.
    pub id: String,
    /// When it was taken, in milliseconds since the Unix epoch.
    pub created_at_ms: i64,
    /// When it is deleted by itself, if it expires.
    pub expires_at_ms: Option<i64>,
    /// How long the cut kept answers waiting, in nanoseconds.
    pub cut_nanos: u64,
    /// The topics cut, in the order asked.
    pub topics: Vec<TopicCut>,
}

/// One topic of a snapshot.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TopicCut {
    /// The topic's name.
    pub name: String,
    /// The topic's id when cut (a topic of the same name created later is
    /// another topic).
    pub topic_id: Uuid,
    /// Id of the read-only view topic that serves the cut.
    pub view_id: Uuid,
    /// Each partition's range, by partition index.
    pub partitions: Vec<PartitionCut>,
}

/// What a snapshot holds of one partition: the offsets `start..end`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct PartitionCut {
    /// First offset held (the log start when the snapshot was taken).
    pub start: u64,
    /// The cut: the offset after the last record held.
    pub end: u64,
    /// Bytes of the batches held.
    pub bytes: u64,
    /// Timestamp of the first batch's first record, if any is held.
    pub first_timestamp: Option<i64>,
    /// Largest timestamp of the last batch held, if any is held.
    pub last_timestamp: Option<i64>,
}

impl SnapshotRecord {
    /// Records held, over every topic and partition.
    pub fn records(&self) -> u64 {
        self.partition_cuts().map(|p| p.end - p.start).sum()
    }

    /// Bytes held, over every topic and partition.
    pub fn bytes(&self) -> u64 {
        self.partition_cuts().map(|p| p.bytes).sum()
    }

    /// The earliest first and latest last timestamp held.
    pub fn time_range(&self) -> Option<(i64, i64)> {
        let first = self
            .partition_cuts()
            .filter_map(|p| p.first_timestamp)
            .min()?;
        let last = self
            .partition_cuts()
            .filter_map(|p| p.last_timestamp)
            .max()?;
        Some((first, last))
    }

    fn partition_cuts(&self) -> impl Iterator<Item = &PartitionCut> {
        self.topics.iter().flat_map(|t| t.partitions.iter())
    }
}

#[derive(Serialize, Deserialize)]
struct SnapshotsDocument {
    format_version: u32,
    snapshots: Vec<SnapshotRecord>,
}

/// The snapshot list's file.
#[derive(Debug)]
pub(crate) struct SnapshotsFile {
    path: PathBuf,
}

impl SnapshotsFile {
    pub(crate) fn new(data_dir: &Path) -> Self {
        Self {
            path: data_dir.join(SNAPSHOTS_FILE),
        }
    }

    /// Every snapshot kept; none when the file does not exist yet.
    pub(crate) fn load(&self) -> Result<Vec<SnapshotRecord>, SnapshotError> {
        let bytes = match std::fs::read(&self.path) {
            Ok(bytes) => bytes,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => return Err(self.error("read", e.to_string())),
        };
        let document: SnapshotsDocument =
            serde_json::from_slice(&bytes).map_err(|e| self.error("parse", e.to_string()))?;
        if document.format_version != FORMAT_VERSION {
            return Err(self.error(
                "parse",
                format!("format version {} is unknown", document.format_version),
            ));
        }
        for snapshot in &document.snapshots {
            super::validate_id(&snapshot.id).map_err(|e| self.invalid(e.to_string()))?;
            let reversed = snapshot
                .topics
                .iter()
                .flat_map(|t| &t.partitions)
                .any(|p| p.end < p.start);
            if reversed {
                return Err(self.invalid(format!(
                    "snapshot {} holds a range that ends before it starts",
                    snapshot.id
                )));
            }
        }
        Ok(document.snapshots)
    }

    /// The file holds something no snapshot can be.
    pub(crate) fn invalid(&self, reason: String) -> SnapshotError {
        self.error("parse", reason)
    }

    /// Replaces the file with `snapshots`, durably.
    pub(crate) fn save(&self, snapshots: Vec<SnapshotRecord>) -> Result<(), SnapshotError> {
        let document = SnapshotsDocument {
            format_version: FORMAT_VERSION,
            snapshots,
        };
        let bytes = serde_json::to_vec_pretty(&document)
            .map_err(|e| self.error("encode", e.to_string()))?;
        write_atomically(&self.path, &bytes).map_err(|e| self.error("write", e.to_string()))
    }

    fn error(&self, op: &'static str, reason: String) -> SnapshotError {
        SnapshotError::Storage {
            op,
            path: self.path.clone(),
            reason,
        }
    }
}
