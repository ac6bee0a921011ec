//! The durable metadata of a node: cluster id, topics (name, id, partition
//! count, config overrides) and the producer-id high mark. Kept as one small
//! JSON document in the data directory, replaced atomically (write a temp
//! file, fsync it, rename over the old one, fsync the directory), so a crash
//! at any point leaves either the old or the new document, never a mix.

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use uuid::Uuid;

use herald_log::durable_file::write_atomically;

use crate::error::BrokerError;

/// File name of the document inside the data directory.
pub const METADATA_FILE: &str = "herald-metadata.json";
const FORMAT_VERSION: u32 = 1;

/// Persisted description of one topic.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TopicRecord {
    /// Topic name.
    pub name: String,
    /// Topic id, assigned at creation and never reused.
    pub id: Uuid,
    /// Number of partitions.
    pub partitions: u32,
    /// Config overrides by Kafka key.
    pub configs: BTreeMap<String, String>,
    /// The replicas of each partition, for a topic of a cluster (whose
    /// metadata log, not this document, brings it back on a restart).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replicas: Option<Vec<ReplicaAssignment>>,
}

/// Where one partition of a cluster's topic is replicated.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReplicaAssignment {
    /// The partition's Raft group.
    pub group: u64,
    /// Its replicas' node ids, the preferred leader first.
    pub nodes: Vec<u64>,
}

/// The whole persisted document.
// Not Eq: quota values are floating point, as Kafka's are.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Metadata {
    /// Format of the document, for later migrations.
    pub format_version: u32,
    /// Cluster id, generated on first start.
    pub cluster_id: String,
    /// Producer ids below this may have been handed out; allocation resumes here.
    pub producer_id_high_mark: i64,
    /// Topics by name.
    pub topics: BTreeMap<String, TopicRecord>,
    /// Credentials, ACLs, tenants and namespaces (absent before herald
    /// kept them: empty).
    #[serde(default)]
    pub security: herald_auth::SecurityState,
    /// Base64 of the secret unknown users' decoy credentials are made
    /// from; made on first open.
    #[serde(default)]
    pub security_secret: Option<String>,
    /// Client quotas and tenant SLAs (absent before herald kept them:
    /// none).
    #[serde(default)]
    pub quotas: herald_flow::QuotaState,
}

impl Metadata {
    fn fresh() -> Self {
        Self {
            format_version: FORMAT_VERSION,
            cluster_id: cluster_id_from(Uuid::new_v4()),
            producer_id_high_mark: 0,
            topics: BTreeMap::new(),
            security: herald_auth::SecurityState::default(),
            security_secret: None,
            quotas: herald_flow::QuotaState::default(),
        }
    }
}

/// Kafka's cluster ids are 22 characters of URL-safe base64 from a UUID
/// (6 bits per character, the last one taking the 2 remaining bits).
fn cluster_id_from(id: Uuid) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    let v = id.as_u128();
    (0..22)
        .map(|i| ALPHABET[((v >> (6 * i)) & 0x3f) as usize] as char)
        .collect()
}

/// Reads and atomically rewrites the metadata document.
#[derive(Debug)]
pub struct MetadataStore {
    dir: PathBuf,
}

impl MetadataStore {
    /// Opens the store in `dir`, creating the directory and a fresh document
    /// if none exists. Returns the store and the current document.
    pub fn open(dir: &Path) -> Result<(Self, Metadata), BrokerError> {
        fs::create_dir_all(dir).map_err(|e| BrokerError::io("create directory", dir, e))?;
        let store = Self {
            dir: dir.to_owned(),
        };
        let path = store.path();
        let metadata = match fs::read(&path) {
            Ok(bytes) => serde_json::from_slice::<Metadata>(&bytes).map_err(|e| {
                BrokerError::CorruptMetadata {
                    path: path.clone(),
                    reason: e.to_string(),
                }
            })?,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                let fresh = Metadata::fresh();
                store.save(&fresh)?;
                fresh
            }
            Err(e) => return Err(BrokerError::io("read", path, e)),
        };
        if metadata.format_version != FORMAT_VERSION {
            return Err(BrokerError::CorruptMetadata {
                path,
                reason: format!(
                    "format version {} is not {FORMAT_VERSION}",
                    metadata.format_version
                ),
            });
        }
        Ok((store, metadata))
    }

    fn path(&self) -> PathBuf {
        self.dir.join(METADATA_FILE)
    }

    /// Replaces the document durably.
    pub fn save(&self, metadata: &Metadata) -> Result<(), BrokerError> {
        let path = self.path();
        let bytes =
            serde_json::to_vec_pretty(metadata).map_err(|e| BrokerError::CorruptMetadata {
                path: path.clone(),
                reason: e.to_string(),
            })?;
        write_atomically(&path, &bytes).map_err(BrokerError::from)
    }
}

/// Makes a rename or removal inside `dir` durable.
pub(crate) fn sync_dir(dir: &Path) -> Result<(), BrokerError> {
    herald_log::durable_file::sync_dir(dir).map_err(|e| BrokerError::io("fsync directory", dir, e))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fresh_store_survives_reopen_with_same_cluster_id() {
        let dir = tempfile::tempdir().expect("tempdir");
        let (store, mut m) = MetadataStore::open(dir.path()).expect("open");
        m.topics.insert(
            "t".into(),
            TopicRecord {
                name: "t".into(),
                id: Uuid::new_v4(),
                partitions: 3,
                configs: BTreeMap::new(),
                replicas: None,
            },
        );
        m.producer_id_high_mark = 1000;
        store.save(&m).expect("save");
        let (_, again) = MetadataStore::open(dir.path()).expect("reopen");
        assert_eq!(again, m);
        assert_eq!(again.cluster_id.len(), 22);
    }

    #[test]
    fn garbage_document_is_reported_not_replaced() {
        let dir = tempfile::tempdir().expect("tempdir");
        fs::write(dir.path().join(METADATA_FILE), b"{not json").expect("write");
        assert!(matches!(
            MetadataStore::open(dir.path()),
            Err(BrokerError::CorruptMetadata { .. })
        ));
    }
}
