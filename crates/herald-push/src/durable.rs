//! Durable named subscriptions: a subscription given a name keeps its
//! acknowledged positions in the broker, as committed offsets of the
//! consumer group `herald-push.<name>` (so they are fsynced, survive
//! restarts, and Kafka's tools show their lag). A later subscribe with the
//! same name and no start continues from them.
//!
//! Commits are coalesced: at most one is in flight per subscription, and
//! the latest positions replace any not yet sent, so a client acking every
//! delivery costs one commit per commit latency, not one per ack.
//!
//! In a cluster the group's coordinator may be another node (the leader of
//! the group's offsets partition). Its positions are then read and stored
//! there, through that node's Kafka listener as a Kafka client would
//! (`herald-client`, plaintext: a cluster whose listeners all require TLS
//! or SASL cannot be reached this way, and the subscription is refused
//! with the reason).

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use herald_broker::{Broker, CoordinatorLocation, GroupCall, GroupReply};
use herald_client::groups::{commit_offsets, committed_offsets, Committer};
use herald_client::Connection;
use herald_group::{ErrorCode, OffsetCommitPartition, OffsetCommitRequest, OffsetFetchRequest};
use parking_lot::Mutex;

/// The consumer group a named subscription's positions are kept under.
pub const GROUP_PREFIX: &str = "herald-push.";

/// Longest subscription name accepted.
pub const NAME_BYTES_MAX: usize = 200;

/// Checks a subscription name: 1 to 200 of ASCII letters, digits, `.`,
/// `_` and `-` (what a consumer group id may safely hold everywhere).
pub fn check_name(name: &str) -> Result<(), String> {
    if name.is_empty() || name.len() > NAME_BYTES_MAX {
        return Err(format!(
            "a subscription name is 1 to {NAME_BYTES_MAX} bytes, not {}",
            name.len()
        ));
    }
    if let Some(bad) = name
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-')))
    {
        return Err(format!(
            "a subscription name holds letters, digits, '.', '_' and '-', not {bad:?}"
        ));
    }
    Ok(())
}

/// Why stored positions could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("the group coordinator could not answer for subscription {name}: {reason}")]
pub struct StoreError {
    /// The subscription's name.
    pub name: String,
    /// What went wrong.
    pub reason: String,
}

async fn call(broker: &Broker, request: GroupCall) -> GroupReply {
    let (tx, rx) = tokio::sync::oneshot::channel();
    broker
        .groups()
        .call(
            request,
            Box::new(move |reply| {
                let _ = tx.send(reply);
            }),
        )
        .await;
    rx.await.unwrap_or(GroupReply::Unavailable)
}

/// The Kafka address of the node coordinating `group` when it is another
/// node of this node's cluster.
fn remote_coordinator(broker: &Broker, group: &str) -> Result<String, String> {
    let CoordinatorLocation::Node(id) = broker.groups().locate(group) else {
        return Err("its coordinator is being elected".to_owned());
    };
    broker
        .nodes()
        .into_iter()
        .find(|node| node.id == id && id != broker.node_id())
        .map(|node| format!("{}:{}", node.host, node.port))
        .ok_or_else(|| format!("its coordinator, node {id}, has no known address"))
}

/// The positions stored for `group` and `topic` on its coordinator at
/// `address`.
async fn remote_positions(
    address: &str,
    group: &str,
    topic: &str,
) -> Result<HashMap<u32, u64>, String> {
    let mut connection = Connection::connect(address)
        .await
        .map_err(|e| format!("reaching its coordinator at {address}: {e}"))?;
    let offsets = committed_offsets(&mut connection, group, None)
        .await
        .map_err(|e| format!("asking its coordinator at {address}: {e}"))?;
    Ok(offsets
        .into_iter()
        .filter(|c| c.topic == topic && c.offset >= 0)
        .filter_map(|c| Some((u32::try_from(c.partition).ok()?, c.offset as u64)))
        .collect())
}

/// The stored positions of subscription `name` for `topic`, by partition.
pub async fn stored_positions(
    broker: &Broker,
    name: &str,
    topic: &str,
) -> Result<HashMap<u32, u64>, StoreError> {
    let group = format!("{GROUP_PREFIX}{name}");
    let request = GroupCall::OffsetFetch(OffsetFetchRequest {
        group_id: group.clone(),
        partitions: None,
        require_stable: false,
    });
    let failed = |reason: String| StoreError {
        name: name.to_owned(),
        reason,
    };
    match call(broker, request).await {
        GroupReply::OffsetFetch(response) if response.error == ErrorCode::None => Ok(response
            .partitions
            .into_iter()
            .filter(|p| p.topic_partition.topic == topic && p.offset >= 0)
            .filter_map(|p| {
                let partition = u32::try_from(p.topic_partition.partition).ok()?;
                Some((partition, p.offset as u64))
            })
            .collect()),
        GroupReply::OffsetFetch(response) => Err(failed(format!("{:?}", response.error))),
        GroupReply::NotCoordinator => {
            let address = remote_coordinator(broker, &group).map_err(failed)?;
            remote_positions(&address, &group, topic)
                .await
                .map_err(failed)
        }
        other => Err(failed(format!("unexpected answer {other:?}"))),
    }
}

/// The durable side of one named subscription.
pub(crate) struct Durable {
    name: String,
    topic: String,
    /// Positions waiting to be committed (the latest only).
    pending: Mutex<Option<Vec<(u32, u64)>>>,
    committing: AtomicBool,
    /// A connection to the group's coordinator on another node, with its
    /// address, kept between commits (one commit runs at a time).
    remote: tokio::sync::Mutex<Option<(String, Connection)>>,
}

impl Durable {
    pub(crate) fn new(name: String, topic: String) -> Self {
        Self {
            name,
            topic,
            pending: Mutex::new(None),
            committing: AtomicBool::new(false),
            remote: tokio::sync::Mutex::new(None),
        }
    }

    /// Stores `positions` soon: now if no commit is in flight, else right
    /// after it (replacing positions queued before).
    pub(crate) fn save(self: &Arc<Self>, broker: &Arc<Broker>, positions: Vec<(u32, u64)>) {
        *self.pending.lock() = Some(positions);
        if self.committing.swap(true, Ordering::AcqRel) {
            return;
        }
        let durable = Arc::clone(self);
        let broker = Arc::clone(broker);
        tokio::spawn(async move {
            loop {
                let next = durable.pending.lock().take();
                match next {
                    Some(positions) => durable.commit(&broker, positions).await,
                    None => {
                        durable.committing.store(false, Ordering::Release);
                        // A save between the take and the store found the
                        // flag still set: pick its positions up.
                        if durable.pending.lock().is_none()
                            || durable.committing.swap(true, Ordering::AcqRel)
                        {
                            return;
                        }
                    }
                }
            }
        });
    }

    async fn commit(&self, broker: &Broker, positions: Vec<(u32, u64)>) {
        let group = format!("{GROUP_PREFIX}{}", self.name);
        let request = GroupCall::OffsetCommit(OffsetCommitRequest {
            group_id: group.clone(),
            generation_id: -1,
            member_id: String::new(),
            group_instance_id: None,
            partitions: positions
                .iter()
                .copied()
                .map(|(partition, offset)| OffsetCommitPartition {
                    topic: self.topic.clone(),
                    partition: partition as i32,
                    offset: offset as i64,
                    leader_epoch: None,
                    metadata: Some("herald push subscription".into()),
                })
                .collect(),
        });
        match call(broker, request).await {
            GroupReply::OffsetCommit(response)
                if response
                    .partitions
                    .iter()
                    .all(|p| p.error == ErrorCode::None) => {}
            GroupReply::NotCoordinator => {
                if let Err(reason) = self.commit_remotely(broker, &group, &positions).await {
                    tracing::warn!(
                        subscription = %self.name,
                        %reason,
                        "storing a named subscription's position on its coordinator failed; the next ack retries"
                    );
                }
            }
            other => tracing::warn!(
                subscription = %self.name,
                answer = ?other,
                "storing a named subscription's position failed; the next ack retries"
            ),
        }
    }

    /// Commits `positions` on the group's coordinator, another node,
    /// through the connection kept to it (opened again after a failure or
    /// when the coordinator moved).
    async fn commit_remotely(
        &self,
        broker: &Broker,
        group: &str,
        positions: &[(u32, u64)],
    ) -> Result<(), String> {
        let address = remote_coordinator(broker, group)?;
        let mut remote = self.remote.lock().await;
        if remote.as_ref().is_none_or(|(kept, _)| *kept != address) {
            let connection = Connection::connect(&address)
                .await
                .map_err(|e| format!("reaching the coordinator at {address}: {e}"))?;
            *remote = Some((address.clone(), connection));
        }
        let Some((_, connection)) = remote.as_mut() else {
            return Err("no connection to the coordinator".to_owned());
        };
        let offsets: Vec<(String, i32, i64)> = positions
            .iter()
            .map(|&(partition, offset)| (self.topic.clone(), partition as i32, offset as i64))
            .collect();
        match commit_offsets(connection, group, &Committer::SIMPLE, &offsets).await {
            Ok(0) => Ok(()),
            Ok(code) => {
                // NOT_COORDINATOR and the like: ask afresh next time.
                *remote = None;
                Err(format!(
                    "the coordinator at {address} answered error {code}"
                ))
            }
            Err(e) => {
                *remote = None;
                Err(format!("committing at {address}: {e}"))
            }
        }
    }
}
