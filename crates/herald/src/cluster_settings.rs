//! The `[cluster]` table and its flags: which node this is and where every
//! node of its cluster listens. Without them, herald is the embedded single
//! node.

use std::collections::BTreeMap;
use std::net::SocketAddr;

use anyhow::anyhow;
use serde::{Deserialize, Serialize};

/// `[cluster]` as read from the TOML file.
#[derive(Debug, Default, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct ClusterFile {
    /// This node's id.
    pub node_id: Option<u64>,
    /// Where this node's Raft listener binds.
    pub listen: Option<String>,
    /// Every node as `ID=RAFT_HOST:PORT=KAFKA_HOST:PORT`, this one included
    /// (with `join`, those known, if any).
    pub nodes: Option<Vec<String>>,
    /// This node joins a running cluster: it waits to be added.
    pub join: Option<bool>,
    /// Replicas of a topic created without a replication factor.
    pub default_replication_factor: Option<u16>,
    /// Ms a follower may lag (or stay silent) before it leaves a
    /// partition's in-sync replicas (Kafka's `replica.lag.time.max.ms`).
    pub replica_lag_time_max_ms: Option<u64>,
    /// Offsets partitions the cluster creates at its first start (Kafka's
    /// `offsets.topic.num.partitions`).
    pub offsets_partitions: Option<u32>,
    /// Replicas of each offsets partition (Kafka's
    /// `offsets.topic.replication.factor`).
    pub offsets_replication_factor: Option<u16>,
    /// Bytes the metadata log takes between two images of its state
    /// (Kafka's `metadata.log.max.record.bytes.between.snapshots`).
    pub metadata_image_bytes: Option<u64>,
}

/// One node as configured.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeSpec {
    /// Its Raft listener.
    pub raft: String,
    /// Its Kafka listener's host.
    pub kafka_host: String,
    /// Its Kafka listener's port.
    pub kafka_port: u16,
}

/// A node's cluster settings, checked.
#[derive(Debug, Clone)]
pub struct ClusterSettings {
    /// This node's id.
    pub node_id: u64,
    /// Where its Raft listener binds.
    pub listen: SocketAddr,
    /// Every node configured.
    pub nodes: BTreeMap<u64, NodeSpec>,
    /// This node joins a running cluster.
    pub join: bool,
    /// Replicas of a topic created without a replication factor.
    pub default_replication_factor: u16,
    /// Ms a follower may lag before it leaves the in-sync replicas.
    pub replica_lag_time_max_ms: u64,
    /// Offsets partitions created at the cluster's first start.
    pub offsets_partitions: u32,
    /// Replicas of each offsets partition.
    pub offsets_replication_factor: u16,
    /// Bytes the metadata log takes between two images of its state.
    pub metadata_image_bytes: u64,
}

/// Kafka's default `replica.lag.time.max.ms`.
pub const REPLICA_LAG_TIME_MAX_MS: u64 = 30_000;

/// Offsets partitions of a cluster by default: enough to spread the
/// groups' coordinators over a few nodes, few enough that a small cluster
/// runs few Raft groups for them (Kafka's default, 50, suits hundreds of
/// brokers).
pub const OFFSETS_PARTITIONS: u32 = 8;

/// Bytes the metadata log takes between two images by default: Kafka's
/// `metadata.log.max.record.bytes.between.snapshots`.
pub const METADATA_IMAGE_BYTES: u64 = 20 * 1024 * 1024;

/// Fewest bytes between two images: below, the leader would write images
/// of a small cluster's state over and over.
pub const METADATA_IMAGE_BYTES_MIN: u64 = 4096;

/// Most offsets partitions a cluster may have: each is a Raft group on
/// every one of its replicas.
pub const OFFSETS_PARTITIONS_MAX: u32 = 1024;

fn invalid(key: &str, value: impl std::fmt::Display, reason: &str) -> anyhow::Error {
    anyhow!(
        "invalid cluster.{key} = {value}: {reason} (set by --{}, HERALD_{} or `{key}` in the config file's [cluster])",
        key.replace('_', "-"),
        key.to_uppercase()
    )
}

/// Parses `ID=RAFT_HOST:PORT=KAFKA_HOST:PORT`.
fn node_spec(text: &str) -> anyhow::Result<(u64, NodeSpec)> {
    let mut parts = text.trim().split('=');
    let (Some(id), Some(raft), Some(kafka), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err(invalid(
            "nodes",
            text,
            "each node is ID=RAFT_HOST:PORT=KAFKA_HOST:PORT",
        ));
    };
    let id: u64 = id
        .parse()
        .map_err(|_| invalid("nodes", text, "the node id is not a number"))?;
    if id == 0 || id > i32::MAX as u64 {
        return Err(invalid(
            "nodes",
            text,
            "node ids are between 1 and 2147483647",
        ));
    }
    let host_port = |part: &str| -> anyhow::Result<(String, u16)> {
        let (host, port) = part
            .rsplit_once(':')
            .ok_or_else(|| invalid("nodes", text, "an address is HOST:PORT"))?;
        let port = port
            .parse()
            .map_err(|_| invalid("nodes", text, "a port is a number below 65536"))?;
        if host.is_empty() {
            return Err(invalid("nodes", text, "an address needs a host"));
        }
        Ok((host.to_owned(), port))
    };
    host_port(raft)?;
    let (kafka_host, kafka_port) = host_port(kafka)?;
    Ok((
        id,
        NodeSpec {
            raft: raft.to_owned(),
            kafka_host,
            kafka_port,
        },
    ))
}

/// Merges the flags (`flags`, as the settings they name; a flag's node
/// list is one comma-separated entry) with `[cluster]`; `None` when
/// neither names a cluster.
pub fn cluster(
    flags: ClusterFile,
    file: Option<&ClusterFile>,
) -> anyhow::Result<(Option<ClusterSettings>, Option<ClusterFile>)> {
    let file = file.cloned().unwrap_or_default();
    let node_id = flags.node_id.or(file.node_id);
    let listen_text = flags.listen.or(file.listen);
    let node_list: Option<Vec<String>> = flags
        .nodes
        .map(|texts| {
            texts
                .iter()
                .flat_map(|text| text.split(','))
                .map(str::to_owned)
                .collect()
        })
        .or(file.nodes);
    let factor = flags
        .default_replication_factor
        .or(file.default_replication_factor);
    let lag_max_ms = flags
        .replica_lag_time_max_ms
        .or(file.replica_lag_time_max_ms)
        .unwrap_or(REPLICA_LAG_TIME_MAX_MS);
    let offsets_partitions = flags
        .offsets_partitions
        .or(file.offsets_partitions)
        .unwrap_or(OFFSETS_PARTITIONS);
    let offsets_factor = flags
        .offsets_replication_factor
        .or(file.offsets_replication_factor);
    let image_bytes = flags
        .metadata_image_bytes
        .or(file.metadata_image_bytes)
        .unwrap_or(METADATA_IMAGE_BYTES);
    let join = flags.join.or(file.join).unwrap_or(false);
    // A joining node may know no node yet.
    let node_list = node_list.or_else(|| join.then(Vec::new));
    let (Some(node_id), Some(listen_text), Some(node_list)) =
        (node_id, listen_text.clone(), node_list.clone())
    else {
        if node_list.is_some() || listen_text.is_some() {
            return Err(anyhow!(
                "a cluster needs node_id, listen and nodes together (in [cluster], or --node-id, --cluster-listen and --cluster-nodes; a node joining a running one: --cluster-join instead of --cluster-nodes)"
            ));
        }
        return Ok((None, None));
    };
    let listen: SocketAddr = listen_text
        .parse()
        .map_err(|_| invalid("listen", &listen_text, "must be IP:PORT"))?;
    let mut nodes = BTreeMap::new();
    for text in &node_list {
        let (id, spec) = node_spec(text)?;
        if nodes.insert(id, spec).is_some() {
            return Err(invalid("nodes", text, "the node id appears twice"));
        }
    }
    if join {
        if let Some(spec) = nodes.get(&node_id) {
            if spec.raft != listen_text {
                return Err(invalid(
                    "nodes",
                    node_id,
                    "names this joining node at another Raft address than cluster.listen",
                ));
            }
        }
    } else if !nodes.contains_key(&node_id) {
        return Err(invalid(
            "node_id",
            node_id,
            "is not among the nodes (a node joining a running cluster sets cluster.join)",
        ));
    }
    // A joining node cannot tell how many nodes the cluster will have: its
    // factors are checked against the cluster's nodes when used.
    let node_count = if join { usize::MAX } else { nodes.len() };
    let default_count = if join { 3 } else { (nodes.len() as u16).min(3) };
    let default_replication_factor = factor.unwrap_or(default_count);
    if default_replication_factor == 0 || usize::from(default_replication_factor) > node_count {
        return Err(invalid(
            "default_replication_factor",
            default_replication_factor,
            "must be between 1 and the number of nodes",
        ));
    }
    if lag_max_ms == 0 {
        return Err(invalid(
            "replica_lag_time_max_ms",
            lag_max_ms,
            "must be at least 1",
        ));
    }
    if offsets_partitions == 0 || offsets_partitions > OFFSETS_PARTITIONS_MAX {
        return Err(invalid(
            "offsets_partitions",
            offsets_partitions,
            &format!("must be between 1 and {OFFSETS_PARTITIONS_MAX}"),
        ));
    }
    let offsets_replication_factor = offsets_factor.unwrap_or(default_count);
    if offsets_replication_factor == 0 || usize::from(offsets_replication_factor) > node_count {
        return Err(invalid(
            "offsets_replication_factor",
            offsets_replication_factor,
            "must be between 1 and the number of nodes",
        ));
    }
    if image_bytes < METADATA_IMAGE_BYTES_MIN {
        return Err(invalid(
            "metadata_image_bytes",
            image_bytes,
            &format!("must be at least {METADATA_IMAGE_BYTES_MIN}"),
        ));
    }
    let effective = ClusterFile {
        node_id: Some(node_id),
        listen: Some(listen_text),
        nodes: Some(node_list),
        join: Some(join),
        default_replication_factor: Some(default_replication_factor),
        replica_lag_time_max_ms: Some(lag_max_ms),
        offsets_partitions: Some(offsets_partitions),
        offsets_replication_factor: Some(offsets_replication_factor),
        metadata_image_bytes: Some(image_bytes),
    };
    Ok((
        Some(ClusterSettings {
            node_id,
            listen,
            nodes,
            join,
            default_replication_factor,
            replica_lag_time_max_ms: lag_max_ms,
            offsets_partitions,
            offsets_replication_factor,
            metadata_image_bytes: image_bytes,
        }),
        Some(effective),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cluster_needs_every_part_and_this_node_among_the_nodes() {
        let nodes = "1=127.0.0.1:9193=127.0.0.1:9092,2=127.0.0.2:9193=127.0.0.2:9092";
        let flags = |node_id: Option<u64>, nodes: &str| ClusterFile {
            node_id,
            listen: Some("127.0.0.2:9193".into()),
            nodes: Some(vec![nodes.to_owned()]),
            ..ClusterFile::default()
        };
        let (settings, _) = cluster(flags(Some(2), nodes), None).unwrap();
        let settings = settings.unwrap();
        assert_eq!(settings.nodes.len(), 2);
        assert_eq!(settings.default_replication_factor, 2);
        assert_eq!(settings.offsets_partitions, OFFSETS_PARTITIONS);
        assert_eq!(settings.offsets_replication_factor, 2);
        assert_eq!(settings.nodes[&1].kafka_host, "127.0.0.1");
        assert!(cluster(flags(Some(3), nodes), None).is_err());
        assert!(cluster(flags(None, nodes), None).is_err());
        assert!(cluster(flags(Some(1), "1=x"), None).is_err());
        let too_many = ClusterFile {
            default_replication_factor: Some(3),
            ..flags(Some(1), nodes)
        };
        assert!(cluster(too_many, None).is_err());
        assert!(cluster(ClusterFile::default(), None).unwrap().0.is_none());
    }

    #[test]
    fn a_joining_node_needs_no_node_list_and_is_not_required_in_one() {
        let joining = |nodes: Option<&str>| ClusterFile {
            node_id: Some(4),
            listen: Some("127.0.0.4:9193".into()),
            nodes: nodes.map(|n| vec![n.to_owned()]),
            join: Some(true),
            ..ClusterFile::default()
        };
        let (settings, effective) = cluster(joining(None), None).unwrap();
        let settings = settings.unwrap();
        assert!(settings.join && settings.nodes.is_empty());
        assert_eq!(settings.default_replication_factor, 3);
        assert_eq!(effective.unwrap().join, Some(true));
        let known = "1=127.0.0.1:9193=127.0.0.1:9092";
        assert_eq!(
            cluster(joining(Some(known)), None)
                .unwrap()
                .0
                .unwrap()
                .nodes
                .len(),
            1
        );
        let elsewhere = "4=127.0.0.9:9193=127.0.0.4:9092";
        assert!(cluster(joining(Some(elsewhere)), None).is_err());
        let not_joining = ClusterFile {
            join: Some(false),
            ..joining(Some(known))
        };
        let refused = cluster(not_joining, None).unwrap_err();
        assert!(refused.to_string().contains("join"), "{refused}");
    }

    #[test]
    fn the_offsets_partitions_take_the_flag_over_the_file_and_are_bounded() {
        let nodes = "1=127.0.0.1:9193=127.0.0.1:9092";
        let flags = |partitions: Option<u32>, factor: Option<u16>| ClusterFile {
            node_id: Some(1),
            listen: Some("127.0.0.1:9193".into()),
            nodes: Some(vec![nodes.to_owned()]),
            offsets_partitions: partitions,
            offsets_replication_factor: factor,
            ..ClusterFile::default()
        };
        let file = ClusterFile {
            offsets_partitions: Some(3),
            ..ClusterFile::default()
        };
        let (from_file, _) = cluster(flags(None, None), Some(&file)).unwrap();
        assert_eq!(from_file.unwrap().offsets_partitions, 3);
        let (from_flag, _) = cluster(flags(Some(5), None), Some(&file)).unwrap();
        assert_eq!(from_flag.unwrap().offsets_partitions, 5);
        let refused = cluster(flags(Some(0), None), None).unwrap_err();
        assert!(
            refused.to_string().contains("offsets_partitions"),
            "{refused}"
        );
        assert!(cluster(flags(Some(OFFSETS_PARTITIONS_MAX + 1), None), None).is_err());
        let refused = cluster(flags(None, Some(2)), None).unwrap_err();
        assert!(
            refused.to_string().contains("offsets_replication_factor"),
            "{refused}"
        );
    }

    #[test]
    fn the_bytes_between_metadata_images_default_to_kafkas_and_have_a_floor() {
        let flags = |bytes: Option<u64>| ClusterFile {
            node_id: Some(1),
            listen: Some("127.0.0.1:9193".into()),
            nodes: Some(vec!["1=127.0.0.1:9193=127.0.0.1:9092".to_owned()]),
            metadata_image_bytes: bytes,
            ..ClusterFile::default()
        };
        let (default, effective) = cluster(flags(None), None).unwrap();
        assert_eq!(default.unwrap().metadata_image_bytes, 20 * 1024 * 1024);
        assert_eq!(
            effective.unwrap().metadata_image_bytes,
            Some(20 * 1024 * 1024)
        );
        let (set, _) = cluster(flags(Some(65_536)), None).unwrap();
        assert_eq!(set.unwrap().metadata_image_bytes, 65_536);
        let refused = cluster(flags(Some(100)), None).unwrap_err();
        assert!(
            refused.to_string().contains("--metadata-image-bytes")
                && refused.to_string().contains("at least 4096"),
            "{refused}"
        );
    }
}
