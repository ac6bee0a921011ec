//! `herald cluster describe|add-node|remove-node`: the cluster's nodes,
//! over DescribeCluster and Add/RemoveRaftVoter.

use std::time::Duration;

use anyhow::{anyhow, Context as _};
use herald_client::cluster_admin::{self, NewNode};

use crate::cli_client::ClusterCommand;

/// Splits `HOST:PORT` (IPv6 hosts in brackets).
fn host_port(flag: &str, text: &str) -> anyhow::Result<(String, u16)> {
    let invalid = || anyhow!("invalid --{flag} {text:?}: expected HOST:PORT");
    let (host, port) = text.rsplit_once(':').ok_or_else(invalid)?;
    let host = host.trim_start_matches('[').trim_end_matches(']');
    let port: u16 = port.parse().map_err(|_| invalid())?;
    if host.is_empty() || port == 0 {
        return Err(invalid());
    }
    Ok((host.to_owned(), port))
}

/// Runs one cluster subcommand.
pub async fn run(command: ClusterCommand) -> anyhow::Result<()> {
    match command {
        ClusterCommand::Describe { broker } => {
            let mut connection = broker.connect().await?;
            let cluster = cluster_admin::describe_cluster(&mut connection).await?;
            println!("cluster id: {}", cluster.cluster_id);
            match cluster.controller {
                -1 => println!("controller: none known"),
                id => println!("controller: {id}"),
            }
            println!("{:<8} KAFKA", "NODE");
            for node in cluster.nodes {
                println!("{:<8} {}:{}", node.id, node.host, node.port);
            }
        }
        ClusterCommand::AddNode {
            id,
            raft,
            kafka,
            timeout_ms,
            broker,
        } => {
            let node = NewNode {
                id,
                raft: host_port("raft", &raft)?,
                kafka: host_port("kafka", &kafka)?,
            };
            let mut connection = broker.connect().await?;
            cluster_admin::add_node(&mut connection, &node, Duration::from_millis(timeout_ms))
                .await
                .with_context(|| format!("adding node {id} through {}", broker.bootstrap))?;
            println!("node {id} is a member of the cluster (Raft {raft}, Kafka {kafka})");
        }
        ClusterCommand::RemoveNode { id, broker } => {
            let mut connection = broker.connect().await?;
            cluster_admin::remove_node(&mut connection, id)
                .await
                .with_context(|| format!("removing node {id} through {}", broker.bootstrap))?;
            println!("node {id} is no longer a member of the cluster: stop it");
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn addresses_are_host_and_port() {
        assert_eq!(
            host_port("raft", "10.0.0.4:9193").unwrap(),
            ("10.0.0.4".to_owned(), 9193)
        );
        assert_eq!(
            host_port("raft", "[::1]:9193").unwrap(),
            ("::1".to_owned(), 9193)
        );
        assert!(host_port("raft", "10.0.0.4").is_err());
        assert!(host_port("kafka", ":9092").is_err());
        assert!(host_port("kafka", "h:0").is_err());
        assert!(host_port("kafka", "h:99999").is_err());
    }
}
