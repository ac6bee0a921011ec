//! A topic: its name, id, partitions and config overrides.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicU8, Ordering};
use std::sync::Arc;

use parking_lot::RwLock;
use uuid::Uuid;

use crate::error::BrokerError;
use crate::partition::Partition;
use crate::topic_config::{SubjectFilters, TopicConfig};

/// Longest legal topic name (Kafka's limit, which keeps `<topic>-<partition>`
/// directory names under the usual 255-byte file-name limit).
pub const TOPIC_NAME_MAX: usize = 249;

/// A topic with its open partitions.
#[derive(Debug)]
pub struct Topic {
    name: String,
    id: Uuid,
    // Replaced wholesale when partitions are added, so readers take a cheap
    // snapshot and never hold the lock while using a partition.
    partitions: RwLock<Arc<Vec<Arc<Partition>>>>,
    config: RwLock<TopicConfig>,
    /// `message.ttl.ms` of `config`, [`NO_TTL`] for none: read per batch on
    /// the push path, so without the lock and the map.
    message_ttl_ms: AtomicU64,
    /// `message.priority` of `config` is `high`; read as the TTL is.
    message_priority_high: AtomicBool,
    /// `subject.filters` of `config`, as [`SubjectFilters`] in order;
    /// read by the indexer's passes.
    subject_filters: AtomicU8,
}

/// `message_ttl_ms` when records do not expire.
const NO_TTL: u64 = u64::MAX;

impl Topic {
    pub(crate) fn new(
        name: String,
        id: Uuid,
        partitions: Vec<Arc<Partition>>,
        config: TopicConfig,
    ) -> Self {
        Self {
            name,
            id,
            partitions: RwLock::new(Arc::new(partitions)),
            message_ttl_ms: AtomicU64::new(config.message_ttl_ms().unwrap_or(NO_TTL)),
            message_priority_high: AtomicBool::new(config.message_priority_high()),
            subject_filters: AtomicU8::new(config.subject_filters() as u8),
            config: RwLock::new(config),
        }
    }

    /// Topic name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Topic id, assigned at creation.
    pub fn id(&self) -> Uuid {
        self.id
    }

    /// The partition with this index, if it exists.
    pub fn partition(&self, index: i32) -> Option<Arc<Partition>> {
        let index = usize::try_from(index).ok()?;
        self.partitions.read().get(index).cloned()
    }

    /// A snapshot of all partitions, in index order.
    pub fn partitions(&self) -> Arc<Vec<Arc<Partition>>> {
        Arc::clone(&self.partitions.read())
    }

    /// Number of partitions.
    pub fn partition_count(&self) -> u32 {
        self.partitions.read().len() as u32
    }

    /// The topic's config overrides.
    pub fn config(&self) -> TopicConfig {
        self.config.read().clone()
    }

    pub(crate) fn set_config(&self, config: TopicConfig) {
        self.message_ttl_ms
            .store(config.message_ttl_ms().unwrap_or(NO_TTL), Ordering::Relaxed);
        self.message_priority_high
            .store(config.message_priority_high(), Ordering::Relaxed);
        self.subject_filters
            .store(config.subject_filters() as u8, Ordering::Relaxed);
        *self.config.write() = config;
    }

    /// `message.priority` is `high`: records without a priority header are
    /// pushed ahead of normal ones.
    pub fn message_priority_high(&self) -> bool {
        self.message_priority_high.load(Ordering::Relaxed)
    }

    /// `subject.filters`: when the partitions' key filters are kept up to
    /// date (filters already built stay valid and in use either way).
    pub fn subject_filters(&self) -> SubjectFilters {
        match self.subject_filters.load(Ordering::Relaxed) {
            x if x == SubjectFilters::Always as u8 => SubjectFilters::Always,
            x if x == SubjectFilters::Never as u8 => SubjectFilters::Never,
            _ => SubjectFilters::Auto,
        }
    }

    /// `message.ttl.ms`: how long after its timestamp a record is still
    /// delivered by push, unless it says otherwise (`None`: forever).
    pub fn message_ttl_ms(&self) -> Option<u64> {
        Some(self.message_ttl_ms.load(Ordering::Relaxed)).filter(|&ms| ms != NO_TTL)
    }

    pub(crate) fn add_partitions(&self, more: Vec<Arc<Partition>>) {
        let mut guard = self.partitions.write();
        let mut all = Vec::clone(&guard);
        all.extend(more);
        *guard = Arc::new(all);
    }

    /// Puts `partition` in place of the partition of its index (a cluster
    /// node gaining or losing its replica in a reassignment); `false` if
    /// there is no such partition.
    #[cfg(feature = "cluster")]
    pub(crate) fn replace_partition(&self, partition: Arc<Partition>) -> bool {
        let mut guard = self.partitions.write();
        let index = partition.index() as usize;
        if index >= guard.len() {
            return false;
        }
        let mut all = Vec::clone(&guard);
        all[index] = partition;
        *guard = Arc::new(all);
        true
    }
}

/// Checks a topic name against Kafka's rules: 1 to 249 characters from
/// `[a-zA-Z0-9._-]`, and not `.` or `..`; `__consumer_offsets` is reserved
/// for the internal partition of committed offsets.
pub fn validate_topic_name(name: &str) -> Result<(), BrokerError> {
    let invalid = |reason| {
        Err(BrokerError::InvalidTopicName {
            name: name.to_owned(),
            reason,
        })
    };
    if name.is_empty() {
        return invalid("the name is empty");
    }
    if name.len() > TOPIC_NAME_MAX {
        return invalid("the name is longer than 249 characters");
    }
    if name == "." || name == ".." {
        return invalid("'.' and '..' are not allowed");
    }
    if name == crate::groups::OFFSETS_TOPIC {
        return invalid("the name is reserved for committed offsets");
    }
    if name.starts_with(crate::snapshots::VIEW_PREFIX) {
        return invalid(
            "names starting with '__snapshot.' are reserved for snapshots' view topics",
        );
    }
    if !name
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
    {
        return invalid("only ASCII letters, digits, '.', '_' and '-' are allowed");
    }
    Ok(())
}

/// Directory of a partition's log: `<data-dir>/<topic>-<partition>`.
pub fn partition_dir(data_dir: &Path, topic: &str, partition: u32) -> PathBuf {
    data_dir.join(format!("{topic}-{partition}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn legal_names_pass_and_others_are_refused() {
        assert!(validate_topic_name("orders.v2_eu-1").is_ok());
        for bad in [
            "",
            ".",
            "..",
            "__consumer_offsets",
            "__snapshot.s1.orders",
            "a/b",
            "naïve",
            "sp ace",
            &"x".repeat(250),
        ] {
            assert!(validate_topic_name(bad).is_err(), "{bad:?}");
        }
    }
}
