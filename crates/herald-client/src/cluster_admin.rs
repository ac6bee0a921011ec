//! Cluster administration: DescribeCluster (the nodes and the controller),
//! Add/RemoveRaftVoter (adding nodes to a running cluster and removing
//! them), and moving
//! partitions between nodes (Alter/ListPartitionReassignments).

use std::time::Duration;

use kafka_protocol::messages::add_raft_voter_request::Listener;
use kafka_protocol::messages::{AddRaftVoterRequest, DescribeClusterRequest};

use crate::connection::versions;
use crate::errors::check;
use crate::{wire_str, ClientError, Connection};

/// A node as DescribeCluster lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeInfo {
    /// Its id.
    pub id: i32,
    /// Its Kafka listener's host.
    pub host: String,
    /// That listener's port.
    pub port: i32,
}

/// The cluster as one of its nodes describes it.
#[derive(Debug, Clone)]
pub struct ClusterInfo {
    /// The cluster id.
    pub cluster_id: String,
    /// The controller (-1: none known).
    pub controller: i32,
    /// Every node, by id.
    pub nodes: Vec<NodeInfo>,
}

/// Describes the cluster the connected node is in.
pub async fn describe_cluster(connection: &mut Connection) -> Result<ClusterInfo, ClientError> {
    let response = connection
        .call(
            DescribeClusterRequest::default(),
            versions::DESCRIBE_CLUSTER,
            crate::connection::IO_TIMEOUT,
        )
        .await?;
    check(
        response.error_code,
        response.error_message.as_ref(),
        "cannot describe the cluster",
    )?;
    let mut nodes: Vec<NodeInfo> = response
        .brokers
        .iter()
        .map(|b| NodeInfo {
            id: b.broker_id.0,
            host: b.host.to_string(),
            port: b.port,
        })
        .collect();
    nodes.sort_by_key(|n| n.id);
    Ok(ClusterInfo {
        cluster_id: response.cluster_id.to_string(),
        controller: response.controller_id.0,
        nodes,
    })
}

/// A node to add: where its cluster peers and its clients reach it.
#[derive(Debug, Clone)]
pub struct NewNode {
    /// Its id.
    pub id: i32,
    /// Its Raft listener's host and port.
    pub raft: (String, u16),
    /// Its Kafka listener's host and port.
    pub kafka: (String, u16),
}

/// Adds `node` to the cluster the connected node is in, waiting up to
/// `patience` for it to become a member (the node must be running with
/// `--cluster-join`, or start meanwhile).
pub async fn add_node(
    connection: &mut Connection,
    node: &NewNode,
    patience: Duration,
) -> Result<(), ClientError> {
    let listeners = vec![
        Listener::default()
            .with_name(wire_str("RAFT"))
            .with_host(wire_str(&node.raft.0))
            .with_port(node.raft.1),
        Listener::default()
            .with_name(wire_str("KAFKA"))
            .with_host(wire_str(&node.kafka.0))
            .with_port(node.kafka.1),
    ];
    let request = AddRaftVoterRequest::default()
        .with_cluster_id(None)
        .with_timeout_ms(i32::try_from(patience.as_millis()).unwrap_or(i32::MAX))
        .with_voter_id(node.id)
        .with_listeners(listeners);
    // The broker answers within `patience`; the I/O timeout leaves room.
    let response = connection
        .call(
            request,
            versions::ADD_RAFT_VOTER,
            patience + Duration::from_secs(15),
        )
        .await?;
    check(
        response.error_code,
        response.error_message.as_ref(),
        &format!("cannot add node {}", node.id),
    )
}

/// Removes node `id` from the cluster the connected node is in (refused
/// while it holds replicas).
pub async fn remove_node(connection: &mut Connection, id: i32) -> Result<(), ClientError> {
    let request = kafka_protocol::messages::RemoveRaftVoterRequest::default()
        .with_cluster_id(None)
        .with_voter_id(id);
    let response = connection
        .call(
            request,
            versions::REMOVE_RAFT_VOTER,
            crate::connection::IO_TIMEOUT + Duration::from_secs(30),
        )
        .await?;
    check(
        response.error_code,
        response.error_message.as_ref(),
        &format!("cannot remove node {id}"),
    )
}

/// A reassignment in progress, as ListPartitionReassignments lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reassignment {
    /// The topic.
    pub topic: String,
    /// The partition.
    pub partition: i32,
    /// Its replicas during the move (old and new).
    pub replicas: Vec<i32>,
    /// Those being added.
    pub adding: Vec<i32>,
    /// Those being removed.
    pub removing: Vec<i32>,
}

/// Moves partition `partition` of `topic` to `replicas` (the preferred
/// leader first), or with `None` cancels its move in progress (it goes
/// back to the replicas it had). Answered once the change is recorded; it
/// completes in the background (see [`reassignments`]).
pub async fn reassign(
    connection: &mut Connection,
    topic: &str,
    partition: i32,
    replicas: Option<&[i32]>,
) -> Result<(), ClientError> {
    use kafka_protocol::messages::alter_partition_reassignments_request::{
        ReassignablePartition, ReassignableTopic,
    };
    use kafka_protocol::messages::{AlterPartitionReassignmentsRequest, BrokerId};
    let request = AlterPartitionReassignmentsRequest::default()
        .with_timeout_ms(30_000)
        .with_allow_replication_factor_change(true)
        .with_topics(vec![ReassignableTopic::default()
            .with_name(crate::topic_name(topic))
            .with_partitions(vec![ReassignablePartition::default()
                .with_partition_index(partition)
                .with_replicas(replicas.map(|replicas| {
                    replicas.iter().map(|&r| BrokerId(r)).collect()
                }))])]);
    let response = connection
        .call(
            request,
            versions::ALTER_PARTITION_REASSIGNMENTS,
            crate::connection::IO_TIMEOUT + Duration::from_secs(30),
        )
        .await?;
    let context = match replicas {
        Some(_) => format!("cannot reassign {topic}/{partition}"),
        None => format!("cannot cancel the reassignment of {topic}/{partition}"),
    };
    check(
        response.error_code,
        response.error_message.as_ref(),
        &context,
    )?;
    for topic_answer in &response.responses {
        for p in &topic_answer.partitions {
            check(p.error_code, p.error_message.as_ref(), &context)?;
        }
    }
    Ok(())
}

/// The reassignments in progress.
pub async fn reassignments(connection: &mut Connection) -> Result<Vec<Reassignment>, ClientError> {
    use kafka_protocol::messages::ListPartitionReassignmentsRequest;
    let request = ListPartitionReassignmentsRequest::default()
        .with_timeout_ms(30_000)
        .with_topics(None);
    let response = connection
        .call(
            request,
            versions::LIST_PARTITION_REASSIGNMENTS,
            crate::connection::IO_TIMEOUT,
        )
        .await?;
    check(
        response.error_code,
        response.error_message.as_ref(),
        "cannot list the reassignments",
    )?;
    let ids = |list: &[kafka_protocol::messages::BrokerId]| list.iter().map(|b| b.0).collect();
    let mut listed: Vec<Reassignment> = response
        .topics
        .iter()
        .flat_map(|t| {
            t.partitions.iter().map(move |p| Reassignment {
                topic: t.name.0.to_string(),
                partition: p.partition_index,
                replicas: ids(&p.replicas),
                adding: ids(&p.adding_replicas),
                removing: ids(&p.removing_replicas),
            })
        })
        .collect();
    listed.sort_by(|a, b| (&a.topic, a.partition).cmp(&(&b.topic, b.partition)));
    Ok(listed)
}
