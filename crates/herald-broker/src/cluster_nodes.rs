//! The nodes of a cluster as this node knows them (feature `cluster`):
//! those its configuration names, then whatever the metadata log records
//! as nodes are added and removed while the cluster runs. Every view of the cluster
//! (Metadata's brokers, replica placement, where a write is forwarded)
//! reads this one list, so a node added on the fly is seen everywhere at
//! once.
//!
//! Also keeps the cluster's id in `<data_dir>/__cluster/cluster.id`, so that
//! it outlives later changes to the configured node list, and so that a
//! node that joined a running cluster reports the id it was given.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use parking_lot::RwLock;
use serde::{Deserialize, Serialize};

use crate::error::BrokerError;

/// One node of the cluster.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClusterNode {
    /// Its Raft listener (`host:port`).
    pub raft: String,
    /// The host its Kafka listener is reached at.
    pub kafka_host: String,
    /// That listener's port.
    pub kafka_port: u16,
}

/// The cluster's nodes, shared by every part of this node that needs them.
#[derive(Debug, Default)]
pub struct ClusterNodes {
    known: RwLock<Known>,
}

#[derive(Debug, Default)]
struct Known {
    nodes: BTreeMap<u64, ClusterNode>,
    /// Nodes the metadata log removed: kept out even where this node's
    /// configuration still names them.
    removed: BTreeSet<u64>,
}

impl ClusterNodes {
    /// The nodes `configured`.
    pub fn new(configured: BTreeMap<u64, ClusterNode>) -> Self {
        Self {
            known: RwLock::new(Known {
                nodes: configured,
                removed: BTreeSet::new(),
            }),
        }
    }

    /// Every node, by id.
    pub fn all(&self) -> BTreeMap<u64, ClusterNode> {
        self.known.read().nodes.clone()
    }

    /// The ids of every node, ascending.
    pub fn ids(&self) -> Vec<u64> {
        self.known.read().nodes.keys().copied().collect()
    }

    /// How many nodes there are.
    pub fn len(&self) -> usize {
        self.known.read().nodes.len()
    }

    /// Whether no node is known (a node waiting to join).
    pub fn is_empty(&self) -> bool {
        self.known.read().nodes.is_empty()
    }

    /// Node `id`, if it is in the cluster.
    pub fn get(&self, id: u64) -> Option<ClusterNode> {
        self.known.read().nodes.get(&id).cloned()
    }

    /// Where node `id`'s Raft listener is, if it is in the cluster.
    pub fn raft_address(&self, id: u64) -> Option<String> {
        self.known.read().nodes.get(&id).map(|n| n.raft.clone())
    }

    /// Takes `recorded`, the whole list as the metadata log has it after
    /// node `added` was added (which may be one removed before). Nodes
    /// configured here and absent from it stay: a node's configuration may
    /// name one the log has not recorded yet (the first nodes are recorded
    /// only when a later one is added).
    pub fn merge(&self, added: u64, recorded: &BTreeMap<u64, ClusterNode>) {
        let mut known = self.known.write();
        known.removed.remove(&added);
        for (id, node) in recorded {
            if !known.removed.contains(id) {
                known.nodes.insert(*id, node.clone());
            }
        }
    }

    /// Takes node `id` out, for good unless it is added again.
    pub fn remove(&self, id: u64) {
        let mut known = self.known.write();
        known.nodes.remove(&id);
        known.removed.insert(id);
    }

    /// The nodes the metadata log removed.
    pub fn removed(&self) -> BTreeSet<u64> {
        self.known.read().removed.clone()
    }

    /// Takes a metadata image's lists: every node `recorded` (unless
    /// `removed`), and every `removed` one out. Nodes configured here and
    /// in neither list stay, as [`ClusterNodes::merge`] keeps them.
    pub fn restore(&self, recorded: &BTreeMap<u64, ClusterNode>, removed: &BTreeSet<u64>) {
        let mut known = self.known.write();
        for id in removed {
            known.nodes.remove(id);
            known.removed.insert(*id);
        }
        for (id, node) in recorded {
            if !known.removed.contains(id) {
                known.nodes.insert(*id, node.clone());
            }
        }
    }
}

/// Where the cluster id is kept.
fn id_path(data_dir: &Path) -> PathBuf {
    data_dir.join("__cluster").join("cluster.id")
}

/// The cluster id kept in `data_dir`, if one was written there.
pub fn stored_id(data_dir: &Path) -> Result<Option<String>, BrokerError> {
    let path = id_path(data_dir);
    match std::fs::read_to_string(&path) {
        Ok(text) => {
            let id = text.trim();
            if id.is_empty() {
                return Err(BrokerError::io(
                    "read",
                    &path,
                    std::io::Error::new(std::io::ErrorKind::InvalidData, "the cluster id is empty"),
                ));
            }
            Ok(Some(id.to_owned()))
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(BrokerError::io("read", &path, e)),
    }
}

/// Keeps `id` as the cluster id of `data_dir` (written to a temporary file
/// and renamed, so a crash leaves the old id or the new one).
pub fn store_id(data_dir: &Path, id: &str) -> Result<(), BrokerError> {
    let path = id_path(data_dir);
    let temporary = path.with_extension("id.tmp");
    std::fs::write(&temporary, format!("{id}\n"))
        .map_err(|e| BrokerError::io("write", &temporary, e))?;
    std::fs::rename(&temporary, &path).map_err(|e| BrokerError::io("rename", &path, e))
}

/// The id nodes configured with `nodes` derive for their cluster at its
/// first start: the same on every node configured alike, without talking.
pub fn derived_id(nodes: &BTreeMap<u64, ClusterNode>) -> String {
    let described: String = nodes
        .iter()
        .map(|(id, n)| format!("{id}={};", n.raft))
        .collect();
    format!(
        "herald-{:016x}",
        twox_hash::XxHash3_64::oneshot(described.as_bytes())
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(n: u8) -> ClusterNode {
        ClusterNode {
            raft: format!("127.0.0.{n}:9193"),
            kafka_host: format!("127.0.0.{n}"),
            kafka_port: 9092,
        }
    }

    #[test]
    fn a_recorded_list_adds_nodes_and_keeps_configured_ones() {
        let nodes = ClusterNodes::new(BTreeMap::from([(1, node(1)), (2, node(2))]));
        nodes.merge(3, &BTreeMap::from([(1, node(1)), (3, node(3))]));
        assert_eq!(nodes.ids(), vec![1, 2, 3]);
        assert_eq!(nodes.raft_address(3).as_deref(), Some("127.0.0.3:9193"));
        assert_eq!(nodes.raft_address(4), None);
    }

    #[test]
    fn a_removed_node_stays_out_until_it_is_added_again() {
        let nodes = ClusterNodes::new(BTreeMap::from([(1, node(1)), (2, node(2))]));
        nodes.remove(2);
        assert_eq!(nodes.ids(), vec![1]);
        // A later addition's list, recorded before the removal, does not
        // bring it back; adding it again does.
        nodes.merge(
            3,
            &BTreeMap::from([(1, node(1)), (2, node(2)), (3, node(3))]),
        );
        assert_eq!(nodes.ids(), vec![1, 3]);
        nodes.merge(2, &BTreeMap::from([(2, node(2))]));
        assert_eq!(nodes.ids(), vec![1, 2, 3]);
    }

    #[test]
    fn the_stored_id_outlives_the_configuration() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("__cluster")).unwrap();
        assert_eq!(stored_id(dir.path()).unwrap(), None);
        let first = derived_id(&BTreeMap::from([(1, node(1)), (2, node(2))]));
        store_id(dir.path(), &first).unwrap();
        assert_eq!(stored_id(dir.path()).unwrap(), Some(first.clone()));
        let grown = derived_id(&BTreeMap::from([(1, node(1)), (2, node(2)), (3, node(3))]));
        assert_ne!(first, grown, "the list derives the id");
        std::fs::write(dir.path().join("__cluster/cluster.id"), "\n").unwrap();
        assert!(stored_id(dir.path()).is_err(), "an empty id is refused");
    }
}
