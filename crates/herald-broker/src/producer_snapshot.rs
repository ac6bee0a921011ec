//! Snapshots of a partition's idempotent-producer state, written at clean
//! shutdown so a restart replays only the batches after the snapshot instead
//! of every batch header in the log. A snapshot is a base, never the truth:
//! state = snapshot at `next_offset` + batches replayed from `next_offset`.
//! One that cannot be read, or claims an offset the log does not reach, is
//! ignored and the whole log is replayed.

use std::collections::HashMap;
use std::fs;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use uuid::Uuid;

use herald_log::durable_file::write_atomically;

use crate::error::BrokerError;
use crate::producer_state::{BatchMetadata, ProducerEntry};

/// Directory of the snapshots inside the data directory.
pub const SNAPSHOT_DIR: &str = ".producer-state";
const FORMAT: u32 = 1;

#[derive(Serialize, Deserialize)]
struct Snapshot {
    format: u32,
    next_offset: u64,
    producers: Vec<ProducerRecord>,
}

#[derive(Serialize, Deserialize)]
struct ProducerRecord {
    id: i64,
    epoch: i16,
    /// first sequence, last sequence, base offset, last offset.
    batches: Vec<(i32, i32, u64, u64)>,
    /// Largest record timestamp of the latest batch, for expiration
    /// (absent in snapshots written before it was kept: the producer then
    /// counts as used at the epoch and expires at the first maintenance
    /// unless it produces again).
    #[serde(default)]
    last_timestamp: i64,
}

/// Snapshot file of a partition. Named by topic id, so a re-created topic
/// of the same name never picks up an old snapshot.
pub(crate) fn path(data_dir: &Path, topic_id: Uuid, partition: u32) -> PathBuf {
    data_dir
        .join(SNAPSHOT_DIR)
        .join(format!("{}-{partition}.json", topic_id.simple()))
}

/// Reads a snapshot: the offset it is valid at and the state. `None` if
/// there is none or it cannot be used.
pub(crate) fn load(path: &Path) -> Option<(u64, HashMap<i64, ProducerEntry>)> {
    let bytes = match fs::read(path) {
        Ok(bytes) => bytes,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return None,
        Err(e) => {
            tracing::warn!(path = %path.display(), error = %e, "producer snapshot unreadable; replaying the log");
            return None;
        }
    };
    let snapshot: Snapshot = match serde_json::from_slice(&bytes) {
        Ok(s) => s,
        Err(e) => {
            tracing::warn!(path = %path.display(), error = %e, "producer snapshot corrupt; replaying the log");
            return None;
        }
    };
    if snapshot.format != FORMAT {
        return None;
    }
    let mut producers = HashMap::with_capacity(snapshot.producers.len());
    for p in snapshot.producers {
        let entry: &mut ProducerEntry = producers.entry(p.id).or_default();
        for (first_sequence, last_sequence, base_offset, last_offset) in p.batches {
            entry.record(
                p.epoch,
                BatchMetadata {
                    first_sequence,
                    last_sequence,
                    base_offset,
                    last_offset,
                },
                p.last_timestamp,
            );
        }
    }
    Some((snapshot.next_offset, producers))
}

/// Writes a snapshot valid at `next_offset` durably (tmp file, fsync,
/// rename, fsync of the directory).
pub(crate) fn save(
    path: &Path,
    next_offset: u64,
    producers: &[(i64, ProducerEntry)],
) -> Result<(), BrokerError> {
    let snapshot = Snapshot {
        format: FORMAT,
        next_offset,
        producers: producers
            .iter()
            .filter_map(|(id, entry)| {
                let epoch = entry.epoch()?;
                let batches = entry
                    .batches()
                    .map(|b| {
                        (
                            b.first_sequence,
                            b.last_sequence,
                            b.base_offset,
                            b.last_offset,
                        )
                    })
                    .collect();
                Some(ProducerRecord {
                    id: *id,
                    epoch,
                    batches,
                    last_timestamp: entry.last_timestamp(),
                })
            })
            .collect(),
    };
    let bytes = serde_json::to_vec(&snapshot).map_err(|e| BrokerError::CorruptMetadata {
        path: path.to_owned(),
        reason: e.to_string(),
    })?;
    if let Some(dir) = path.parent() {
        fs::create_dir_all(dir).map_err(|e| BrokerError::io("create directory", dir, e))?;
    }
    write_atomically(path, &bytes).map_err(BrokerError::from)
}

/// Removes snapshots of topics that no longer exist.
pub(crate) fn sweep(data_dir: &Path, live: &[Uuid]) {
    let Ok(entries) = fs::read_dir(data_dir.join(SNAPSHOT_DIR)) else {
        return;
    };
    let live: Vec<String> = live.iter().map(|id| format!("{}-", id.simple())).collect();
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        if !live.iter().any(|prefix| name.starts_with(prefix)) {
            let _ = fs::remove_file(entry.path());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::producer_state::last_sequence;

    #[test]
    fn saved_state_loads_back_identically() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = path(dir.path(), Uuid::new_v4(), 3);
        let mut entry = ProducerEntry::default();
        for i in 0..7u64 {
            let first = (i * 2) as i32;
            entry.record(
                4,
                BatchMetadata {
                    first_sequence: first,
                    last_sequence: last_sequence(first, 2),
                    base_offset: i * 2,
                    last_offset: i * 2 + 1,
                },
                1_700_000_000_000 + i as i64,
            );
        }
        save(&path, 14, &[(9, entry.clone())]).expect("save");
        let (next, loaded) = load(&path).expect("load");
        assert_eq!(next, 14);
        assert_eq!(loaded.get(&9), Some(&entry));
    }

    #[test]
    fn corrupt_snapshot_is_ignored() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = path(dir.path(), Uuid::new_v4(), 0);
        fs::create_dir_all(path.parent().expect("parent")).expect("dir");
        fs::write(&path, b"{ torn").expect("write");
        assert!(load(&path).is_none());
    }
}
