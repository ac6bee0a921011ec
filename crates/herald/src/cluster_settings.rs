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
    /// Every node as `ID=RAFT_HOST:PORT=KAFKA_HOST:PORT`, this one included.
    pub nodes: Option<Vec<String>>,
    /// Replicas of a topic created without a replication factor.
    pub default_replication_factor: Option<u16>,
    /// Ms a follower may lag (or stay silent) before it leaves a
    /// partition's in-sync replicas (Kafka's `replica.lag.time.max.ms`).
    pub replica_lag_time_max_ms: Option<u64>,
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
    /// Every node.
    pub nodes: BTreeMap<u64, NodeSpec>,
    /// Replicas of a topic created without a replication factor.
    pub default_replication_factor: u16,
    /// Ms a follower may lag before it leaves the in-sync replicas.
    pub replica_lag_time_max_ms: u64,
}

/// Kafka's default `replica.lag.time.max.ms`.
pub const REPLICA_LAG_TIME_MAX_MS: u64 = 30_000;

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

/// Merges the flags with `[cluster]`; `None` when neither names a cluster.
pub fn cluster(
    node_id: Option<u64>,
    listen: Option<String>,
    nodes: Option<String>,
    replication_factor: Option<u16>,
    replica_lag_time_max_ms: Option<u64>,
    file: Option<&ClusterFile>,
) -> anyhow::Result<(Option<ClusterSettings>, Option<ClusterFile>)> {
    let file = file.cloned().unwrap_or_default();
    let node_id = node_id.or(file.node_id);
    let listen_text = listen.or(file.listen);
    let node_list: Option<Vec<String>> = nodes
        .map(|text| text.split(',').map(str::to_owned).collect())
        .or(file.nodes);
    let factor = replication_factor.or(file.default_replication_factor);
    let lag_max_ms = replica_lag_time_max_ms
        .or(file.replica_lag_time_max_ms)
        .unwrap_or(REPLICA_LAG_TIME_MAX_MS);
    let (Some(node_id), Some(listen_text), Some(node_list)) =
        (node_id, listen_text.clone(), node_list.clone())
    else {
        if node_list.is_some() || listen_text.is_some() {
            return Err(anyhow!(
                "a cluster needs node_id, listen and nodes together (in [cluster], or --node-id, --cluster-listen and --cluster-nodes)"
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
    if !nodes.contains_key(&node_id) {
        return Err(invalid("node_id", node_id, "is not among the nodes"));
    }
    let default_replication_factor = factor.unwrap_or((nodes.len() as u16).min(3));
    if default_replication_factor == 0 || usize::from(default_replication_factor) > nodes.len() {
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
    let effective = ClusterFile {
        node_id: Some(node_id),
        listen: Some(listen_text),
        nodes: Some(node_list),
        default_replication_factor: Some(default_replication_factor),
        replica_lag_time_max_ms: Some(lag_max_ms),
    };
    Ok((
        Some(ClusterSettings {
            node_id,
            listen,
            nodes,
            default_replication_factor,
            replica_lag_time_max_ms: lag_max_ms,
        }),
        Some(effective),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cluster_needs_every_part_and_this_node_among_the_nodes() {
        let nodes = "1=127.0.0.1:9193=127.0.0.1:9092,2=127.0.0.2:9193=127.0.0.2:9092".to_owned();
        let (settings, _) = cluster(
            Some(2),
            Some("127.0.0.2:9193".into()),
            Some(nodes.clone()),
            None,
            None,
            None,
        )
        .unwrap();
        let settings = settings.unwrap();
        assert_eq!(settings.nodes.len(), 2);
        assert_eq!(settings.default_replication_factor, 2);
        assert_eq!(settings.nodes[&1].kafka_host, "127.0.0.1");
        assert!(cluster(
            Some(3),
            Some("127.0.0.1:1".into()),
            Some(nodes.clone()),
            None,
            None,
            None
        )
        .is_err());
        assert!(cluster(
            None,
            Some("127.0.0.1:1".into()),
            Some(nodes.clone()),
            None,
            None,
            None
        )
        .is_err());
        assert!(cluster(
            Some(1),
            Some("127.0.0.1:1".into()),
            Some("1=x".into()),
            None,
            None,
            None
        )
        .is_err());
        assert!(cluster(
            Some(1),
            Some("127.0.0.1:1".into()),
            Some(nodes),
            Some(3),
            None,
            None
        )
        .is_err());
        assert!(cluster(None, None, None, None, None, None)
            .unwrap()
            .0
            .is_none());
    }
}
