//! Partition directories on disk: opening a topic's logs, creating fresh
//! ones for new partitions, and removing them safely (renamed aside first,
//! swept at the next start if a crash interrupts the removal).

use std::collections::BTreeMap;
use std::fs;
use std::path::Path;
use std::sync::Arc;

use herald_log::{LogConfig, LogError};
use uuid::Uuid;

use crate::config::BrokerConfig;
use crate::error::BrokerError;
use crate::metadata_store::{sync_dir, TopicRecord};
use crate::partition::Partition;
use crate::producer_snapshot;
use crate::topic::{partition_dir, Topic};
use crate::topic_config::TopicConfig;

/// Suffix of a partition directory being removed; swept on start.
const DELETE_SUFFIX: &str = "-delete";

/// Opens every partition of a persisted topic.
pub(crate) fn open_topic(
    config: &BrokerConfig,
    record: &TopicRecord,
    inherited: BTreeMap<String, String>,
) -> Result<Arc<Topic>, BrokerError> {
    let own = TopicConfig::from_pairs(
        record.configs.iter().map(|(k, v)| (k.as_str(), v.as_str())),
        &config.log_defaults,
    )?;
    // A namespace's configs were checked against its topics when set;
    // should they no longer fit (the broker's defaults changed since),
    // the topic opens with its own and says so.
    let with_namespace = own.inheriting(inherited);
    let topic_config = match with_namespace.log_config(&config.log_defaults) {
        Ok(_) => with_namespace,
        Err(e) => {
            tracing::error!(topic = %record.name, error = %e, "the topic's namespace configs do not fit it; opened without them");
            own.clone()
        }
    };
    let log_config = topic_config.log_config(&config.log_defaults)?;
    let mut partitions = Vec::with_capacity(record.partitions as usize);
    for p in 0..record.partitions {
        let dir = partition_dir(&config.data_dir, &record.name, p);
        let snapshot = producer_snapshot::path(&config.data_dir, record.id, p);
        let partition = match open_partition(
            config,
            &dir,
            &record.name,
            p,
            log_config.clone(),
            snapshot.clone(),
        ) {
            Ok(partition) => partition,
            // A damaged or unreadable log fails its partition, not the
            // broker: the others start and serve, and this one answers
            // every request with a storage error until it is repaired.
            Err(BrokerError::Log {
                source: source @ (LogError::Corrupt { .. } | LogError::Io { .. }),
                ..
            }) => {
                tracing::error!(topic = %record.name, partition = p, error = %source, "partition storage failed to open; it refuses requests until repaired");
                Partition::failed(p, source.to_string(), snapshot)
            }
            Err(e) => return Err(e),
        };
        partitions.push(Arc::new(partition));
    }
    Ok(Arc::new(Topic::new(
        record.name.clone(),
        record.id,
        partitions,
        topic_config,
    )))
}

/// Opens one partition's log: a relay's copy of an upstream partition
/// when this node mirrors the topic, the embedded log otherwise.
fn open_partition(
    config: &BrokerConfig,
    dir: &Path,
    topic: &str,
    index: u32,
    log_config: LogConfig,
    snapshot: std::path::PathBuf,
) -> Result<Partition, BrokerError> {
    match &config.relay {
        Some(relay) if relay.mirrors(topic) => Partition::open_mirror(
            dir,
            topic,
            index,
            log_config,
            snapshot,
            std::sync::Arc::clone(relay.upstream()),
        ),
        _ => Partition::open(
            dir,
            topic,
            index,
            log_config,
            snapshot,
            config.producers_per_partition_max,
        ),
    }
}

/// Opens fresh logs for new partitions. A directory already there belongs to
/// no known topic (left by a crash mid-create or mid-delete) and is removed
/// first so stale data can never reappear. On failure, nothing is left.
pub(crate) fn open_new_partitions(
    broker: &BrokerConfig,
    topic: &str,
    id: Uuid,
    range: std::ops::Range<u32>,
    config: &LogConfig,
) -> Result<Vec<Arc<Partition>>, BrokerError> {
    let data_dir = broker.data_dir.as_path();
    let mut opened = Vec::with_capacity(range.len());
    for p in range {
        let dir = partition_dir(data_dir, topic, p);
        let snapshot = producer_snapshot::path(data_dir, id, p);
        let result = remove_if_present(&dir)
            .and_then(|()| open_partition(broker, &dir, topic, p, config.clone(), snapshot));
        match result {
            Ok(partition) => opened.push(Arc::new(partition)),
            Err(e) => {
                discard_partitions(data_dir, topic, opened);
                let _ = remove_if_present(&dir);
                return Err(e);
            }
        }
    }
    sync_dir(data_dir)?;
    Ok(opened)
}

/// Removes `dir` and everything in it; a directory already gone is fine.
pub(crate) fn remove_if_present(dir: &Path) -> Result<(), BrokerError> {
    match fs::remove_dir_all(dir) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(BrokerError::io("remove stale directory", dir, e)),
    }
}

/// Retires the logs and removes their directories: first renamed aside (so
/// a crash mid-removal leaves a directory the next start sweeps, never a
/// half-deleted partition under a live name), then removed.
///
/// The renames happen before this returns, so the names are free for a new
/// topic at once. Removing the files and dropping the logs (unmapping and
/// freeing every page of their data, which takes seconds for gigabytes)
/// happens on a thread of its own: the caller is a request handler, and
/// every connection served by its runtime thread would wait.
pub(crate) fn discard_partitions(data_dir: &Path, topic: &str, partitions: Vec<Arc<Partition>>) {
    let mut aside_dirs = Vec::with_capacity(partitions.len());
    for partition in &partitions {
        partition.remove_producer_snapshot();
        partition.retire();
        let dir = partition_dir(data_dir, topic, partition.index());
        let aside = data_dir.join(format!(
            "{topic}-{}.{}{DELETE_SUFFIX}",
            partition.index(),
            Uuid::new_v4().simple()
        ));
        match fs::rename(&dir, &aside) {
            Ok(()) => aside_dirs.push(aside),
            Err(e) => {
                tracing::warn!(dir = %dir.display(), error = %e, "setting a deleted partition aside failed; it is swept on next start")
            }
        }
    }
    if let Err(e) = sync_dir(data_dir) {
        tracing::warn!(error = %e, "fsync of data directory failed");
    }
    // The thread owns the only copies of the list, so the last drop happens
    // there even when it finishes before this function returns.
    let spawned = std::thread::Builder::new()
        .name("herald-discard".into())
        .spawn(move || {
            for aside in &aside_dirs {
                if let Err(e) = fs::remove_dir_all(aside) {
                    tracing::warn!(dir = %aside.display(), error = %e, "removing a deleted partition failed; it is swept on next start");
                }
            }
            // Usually the last references to the logs: their pages are
            // freed here, off the request path.
            drop(partitions);
        });
    if let Err(e) = spawned {
        tracing::warn!(error = %e, "no thread to remove deleted partitions; they are swept on next start");
    }
}

/// Removes partition directories whose deletion a crash interrupted.
pub(crate) fn sweep_deleted(data_dir: &Path) -> Result<(), BrokerError> {
    let entries = fs::read_dir(data_dir).map_err(|e| BrokerError::io("list", data_dir, e))?;
    for entry in entries.flatten() {
        let name = entry.file_name();
        if name.to_string_lossy().ends_with(DELETE_SUFFIX) && entry.path().is_dir() {
            fs::remove_dir_all(entry.path())
                .map_err(|e| BrokerError::io("remove", entry.path(), e))?;
        }
    }
    Ok(())
}
