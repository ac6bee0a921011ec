//! The metadata log's compaction. Every leader change, in-sync change and
//! admin request adds a command to the metadata log, and a node applies
//! the log from its start at every start. So once enough commands have
//! been applied since the last image (`ClusterConfig::metadata_image_bytes`,
//! and never less than that image's own size), the metadata group's
//! leader writes the whole state as one command, an image, and then has
//! the log start there on every node (a DeleteRecords, which each replica
//! carries out through a snapshot and openraft's purge). Kafka's KRaft
//! snapshots its metadata the same way, as the records that rebuild it.
//!
//! An image is taken between two entries, under the applying lock, and
//! says which entry it follows (`as_of`). It is valid only where no entry
//! with commands lies between that entry and the image. A node that has
//! applied `as_of` passes over the image: it holds that state already (or,
//! if a command got in between, the image is stale). A node that has not
//! starts applying at the image (a restart after compaction, or a new node
//! sent the leader's snapshot) and takes the image as its state.
//!
//! The log is cut at an image only once every member of the metadata group
//! holds the image, and while no node is being added, so a running node is
//! never sent a snapshot that would skip commands it has not applied: only
//! a node starting from nothing (or from its own copy of the image) begins
//! at one. A member that is down holds compaction back until it returns or
//! is removed.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Weak};
use std::time::Duration;

use serde::{Deserialize, Serialize};
use uuid::Uuid;

use super::{advertised, parsed_endpoints, AppliedEntry, Cluster, Command};
use crate::broker::Broker;
use crate::cluster_nodes::ClusterNode;
use crate::metadata_store::{ReplicaAssignment, TopicRecord};

/// How often the metadata group's leader looks whether an image is due,
/// or whether the log can be cut at the last one.
const IMAGE_CHECK: Duration = Duration::from_secs(1);

/// The cluster's state as the metadata commands up to some entry left it:
/// everything a node needs to go on applying the log after that entry.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub(super) struct MetadataImage {
    /// The cluster id (none before any node recorded it).
    cluster_id: Option<String>,
    /// Every node.
    nodes: BTreeMap<u64, ClusterNode>,
    /// Nodes the log removed.
    removed: BTreeSet<u64>,
    /// Nodes being added.
    joins: BTreeMap<u64, ClusterNode>,
    /// Nodes being removed.
    removals: BTreeSet<u64>,
    /// Every node's advertised Kafka listeners, name to `host:port`.
    endpoints: BTreeMap<u64, BTreeMap<String, String>>,
    /// Each group's announced leader: (group, leader, term).
    leaders: Vec<(u64, u64, u64)>,
    /// Each group's announced in-sync replicas: (group, term, replicas).
    in_sync: Vec<(u64, u64, Vec<u64>)>,
    /// Credentials, ACLs, tenants and namespaces.
    security: herald_auth::SecurityState,
    /// Client quotas and tenant SLAs.
    quotas: herald_flow::QuotaState,
    /// The offsets partitions' replicas, once they exist.
    offsets: Option<Vec<ReplicaAssignment>>,
    /// Every topic, with its partitions' replicas as they are.
    topics: Vec<TopicRecord>,
    /// Reassignments in progress.
    moves: Vec<PendingMove>,
}

/// A reassignment in progress, as an image keeps it: the partition's
/// replicas are in its topic's record; what it is to become is here.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct PendingMove {
    topic: String,
    id: Uuid,
    partition: u32,
    group: u64,
    target: Vec<u64>,
    /// Nodes the move's targets added (replaced or cancelled ones too):
    /// each may hold a replica the move opened, which its end discards.
    added: Vec<u64>,
}

/// Where the last image is, and how much the log took since.
#[derive(Debug, Default)]
pub(super) struct ImageProgress {
    /// The last valid image applied.
    latest: Option<WrittenImage>,
    /// Bytes of entries applied since it (or since this node started).
    since: u64,
    /// The last entry applied that carried commands (an image, or a
    /// DeleteRecords, changes no state).
    last_command: u64,
    /// Its own size.
    size: u64,
    /// Images passed over (overtaken) since the last valid one: each
    /// doubles what the log must take before the next try, so a leader
    /// under a steady stream of commands does not fill the log with
    /// images that never hold.
    passed_over: u32,
}

/// A valid image's place in the metadata log.
#[derive(Debug, Clone, Copy)]
struct WrittenImage {
    /// Its Raft index.
    index: u64,
    /// Its offset: where the log is cut.
    offset: u64,
}

impl ImageProgress {
    /// Counts entry `index` of `bytes` applied, `commands` if it carried
    /// any.
    pub(super) fn applied(&mut self, index: u64, bytes: u64, commands: bool) {
        self.since += bytes;
        if commands {
            self.last_command = index;
        }
    }

    /// Whether a new image is due, with `between` bytes wanted between two.
    fn due(&self, between: u64) -> bool {
        let wanted = between
            .max(self.size)
            .saturating_mul(1 << self.passed_over.min(MAX_DOUBLINGS));
        self.since >= wanted
    }
}

/// The most an image's threshold doubles after images passed over.
const MAX_DOUBLINGS: u32 = 6;

/// Why the metadata log is not compacted yet.
#[derive(Debug, thiserror::Error)]
enum CompactionWait {
    #[error("member {0} does not hold the image yet")]
    NotHeld(u64),
    #[error("the image ({0} bytes) is larger than a metadata entry may be")]
    TooLarge(usize),
    #[error("a node is being added")]
    Joining,
    #[error("{0}")]
    Metadata(String),
}

impl Cluster {
    /// Applies an image found in entry `entry`, `previous` being the last
    /// entry applied before it here: taken as this node's state when it
    /// starts applying there, passed over otherwise. Answers whether it
    /// was valid (it then counts as the log's latest image).
    pub(super) async fn apply_image(
        self: &Arc<Self>,
        broker: &Arc<Broker>,
        previous: u64,
        as_of: u64,
        entry: &AppliedEntry,
        image: MetadataImage,
    ) -> bool {
        let last_command = self.images.lock().last_command;
        if previous >= as_of && last_command > as_of {
            tracing::debug!(
                index = entry.index,
                as_of,
                "a metadata image overtaken by later commands is passed over"
            );
            self.images.lock().passed_over += 1;
            return false;
        }
        if previous < as_of {
            if previous != 0 {
                // Compaction waits for every member and every addition, so
                // only a node added as it happened should get here.
                tracing::warn!(
                    previous,
                    as_of,
                    "this node applied part of the metadata log before the leader's snapshot reached it: it takes the image over its state"
                );
            }
            let topics = image.topics.len();
            self.restore(broker, image).await;
            tracing::info!(
                index = entry.index,
                topics,
                "metadata restored from the log's image"
            );
        }
        let mut progress = self.images.lock();
        progress.latest = entry.offset.map(|offset| WrittenImage {
            index: entry.index,
            offset,
        });
        progress.since = 0;
        progress.size = entry.batch.len() as u64;
        progress.passed_over = 0;
        true
    }

    /// Makes `image` this node's state: the commands it stands for are
    /// applied as if this node had applied each (its topics' replicas are
    /// opened, its moves carried on).
    async fn restore(self: &Arc<Self>, broker: &Arc<Broker>, image: MetadataImage) {
        let me = self.config.node_id;
        if let Some(cluster_id) = &image.cluster_id {
            // A joining node is a member only once its own addition is
            // applied, which may come after the image.
            if image.nodes.contains_key(&me) {
                self.adopt_cluster_id(broker, cluster_id);
            }
        }
        self.nodes.restore(&image.nodes, &image.removed);
        *self.joins.lock() = image.joins;
        *self.removals.lock() = image.removals;
        self.node_changes.send_modify(|n| *n += 1);
        *self.endpoints.write() = image
            .endpoints
            .into_iter()
            .map(|(node, endpoints)| (node, parsed_endpoints(endpoints)))
            .collect();
        for (group, leader, term) in image.leaders {
            self.hints.set(group, leader, term);
        }
        for (group, term, replicas) in image.in_sync {
            self.hints.set_in_sync(group, term, replicas);
        }
        if let Err(e) = broker.restore_replicated_state(image.security, image.quotas) {
            tracing::error!(error = %e, "the image's users, ACLs and quotas could not be stored");
        }
        if let Some(partitions) = image.offsets {
            if self.offsets.installed() {
                // Applied over a state: the replicas as the image has them,
                // where this node holds none (those it holds move through
                // their own groups' ends).
                for (index, assignment) in partitions.into_iter().enumerate() {
                    if self.offsets.replica(index).is_none() {
                        self.offsets.set_nodes(index, assignment.nodes);
                    }
                }
            } else if let Err(e) = self.install_offsets(broker, partitions).await {
                tracing::error!(error = %e, "the offsets partitions could not be opened");
            }
        }
        let held: BTreeMap<String, TopicRecord> = broker
            .replicated_topic_records()
            .into_iter()
            .map(|record| (record.name.clone(), record))
            .collect();
        self.drop_topics_the_image_lacks(broker, &held, &image.topics)
            .await;
        for record in image.topics {
            if held.get(&record.name) == Some(&record) {
                continue;
            }
            let name = record.name.clone();
            if let Err(e) = self.install_topic(broker, record).await {
                tracing::warn!(topic = name, error = %e, "a replicated topic could not be installed");
            }
        }
        let moving: BTreeSet<u64> = image.moves.iter().map(|m| m.group).collect();
        self.reassignments
            .lock()
            .retain(|group, _| moving.contains(group));
        for moving in image.moves {
            if let Err(e) = self
                .start_reassignment(
                    broker,
                    &moving.topic,
                    moving.id,
                    moving.partition,
                    moving.group,
                    moving.target,
                    &moving.added,
                )
                .await
            {
                tracing::warn!(topic = moving.topic, partition = moving.partition, error = %e, "a reassignment could not start here");
            }
        }
    }

    /// Where an image is applied over a state (a node that applied part of
    /// the log before it was sent the leader's snapshot): drops each topic
    /// `held` here that the image lacks or has otherwise, so that the
    /// image's is installed in its place. A topic with a replica here is
    /// kept as it is (only a node that holds none, one being added, can
    /// get here: compaction waits for every member and every addition).
    async fn drop_topics_the_image_lacks(
        self: &Arc<Self>,
        broker: &Arc<Broker>,
        held: &BTreeMap<String, TopicRecord>,
        wanted: &[TopicRecord],
    ) {
        for (name, record) in held {
            if wanted.iter().any(|w| w == record) {
                continue;
            }
            let replicas_here = broker.topic(name).is_some_and(|topic| {
                topic
                    .partitions()
                    .iter()
                    .any(|p| p.raft_replica().is_some())
            });
            if replicas_here {
                tracing::warn!(
                    topic = name,
                    "this node holds replicas of a topic the metadata image has otherwise: kept as it is; restart the node to take the image"
                );
                continue;
            }
            if let Err(e) = self.remove_topic(broker, name, record.id).await {
                tracing::warn!(topic = name, error = %e, "a topic the metadata image lacks could not be dropped");
            }
        }
    }

    /// The state as the entries applied so far left it. The caller holds
    /// the applying lock.
    fn take_image(&self, broker: &Broker) -> MetadataImage {
        let offsets = self.offsets.installed().then(|| {
            (0..self.offsets.count())
                .filter_map(|index| self.offsets.assignment(index))
                .collect()
        });
        MetadataImage {
            cluster_id: self.id.get().cloned(),
            nodes: self.nodes.all(),
            removed: self.nodes.removed(),
            joins: self.joins.lock().clone(),
            removals: self.removals.lock().clone(),
            endpoints: self
                .endpoints
                .read()
                .iter()
                .map(|(node, endpoints)| (*node, advertised(endpoints)))
                .collect(),
            leaders: self.hints.all_leaders(),
            in_sync: self.hints.all_in_sync(),
            security: (*broker.security().state()).clone(),
            quotas: (*broker.quotas()).clone(),
            offsets,
            topics: broker.replicated_topic_records(),
            moves: self
                .reassignments
                .lock()
                .values()
                .map(|pending| PendingMove {
                    topic: pending.topic.clone(),
                    id: pending.id,
                    partition: pending.partition,
                    group: pending.group,
                    target: pending.target.clone(),
                    added: pending.added.iter().copied().collect(),
                })
                .collect(),
        }
    }

    /// While this node leads the metadata group: writes an image when one
    /// is due, and cuts the log at the latest once every member holds it.
    pub(super) async fn write_images_while_leading(self: Arc<Self>, broker: Weak<Broker>) {
        loop {
            tokio::select! {
                () = self.stop.cancelled() => return,
                () = tokio::time::sleep(IMAGE_CHECK) => {}
            }
            if !self.metadata.is_leader() || !self.metadata.caught_up() {
                continue;
            }
            let Some(broker) = broker.upgrade() else {
                return;
            };
            if let Err(e) = self.compact_metadata(&broker).await {
                tracing::debug!(error = %e, "the metadata log's compaction waits");
            }
        }
    }

    /// One step of the metadata log's compaction.
    async fn compact_metadata(&self, broker: &Broker) -> Result<(), CompactionWait> {
        if !self.joins.lock().is_empty() {
            // A node being added may have applied part of the log: were
            // it cut now, that node would be sent a snapshot over what it
            // holds.
            return Err(CompactionWait::Joining);
        }
        let (latest, due, since) = {
            let progress = self.images.lock();
            (
                progress.latest,
                progress.due(self.config.metadata_image_bytes),
                progress.since,
            )
        };
        if let Some(image) = latest.filter(|i| i.offset > self.metadata.log_start()) {
            if let Some(member) = self.member_without(image.index) {
                return Err(CompactionWait::NotHeld(member));
            }
            let start = self
                .metadata
                .delete_records(image.offset)
                .await
                .map_err(|e| CompactionWait::Metadata(e.to_string()))?;
            tracing::info!(
                index = image.index,
                log_start = start,
                "metadata log compacted: it starts at its latest image"
            );
            return Ok(());
        }
        if !due {
            return Ok(());
        }
        if self.applying_behind() {
            // Entries not applied yet would land before the image and
            // make it stale.
            return Ok(());
        }
        let (as_of, image) = {
            let _applying = self.applying.lock().await;
            (*self.applied_through.borrow(), self.take_image(broker))
        };
        let command = Command::Image {
            as_of,
            image: Box::new(image),
        };
        let json =
            serde_json::to_vec(&command).map_err(|e| CompactionWait::Metadata(e.to_string()))?;
        if json.len() > super::metadata_log_config().max_batch_bytes as usize - IMAGE_FRAMING {
            // Not tried again until the log has grown as much again.
            self.images.lock().size = since.saturating_mul(2);
            return Err(CompactionWait::TooLarge(json.len()));
        }
        let bytes = json.len();
        self.propose_json(&json)
            .await
            .map_err(|e| CompactionWait::Metadata(e.to_string()))?;
        tracing::info!(as_of, bytes, "metadata image written");
        Ok(())
    }

    /// Whether this node's log holds entries its applying task has not
    /// applied yet.
    fn applying_behind(&self) -> bool {
        use herald_raft::openraft::async_runtime::WatchReceiver;
        let metrics = self.metadata.raft().metrics();
        let now = metrics.borrow_watched();
        let applied = now.last_applied.map(|id| id.index);
        now.last_log_index != applied
            || self.handed_over.load(std::sync::atomic::Ordering::Acquire)
                > *self.applied_through.borrow()
    }

    /// A member of the metadata group (voter or learner) whose log does
    /// not reach entry `index` yet, as this leader knows it.
    fn member_without(&self, index: u64) -> Option<u64> {
        use herald_raft::openraft::async_runtime::WatchReceiver;
        let me = self.config.node_id;
        let metrics = self.metadata.raft().metrics();
        let now = metrics.borrow_watched();
        let replication = now.replication.as_ref();
        let lagging = now
            .membership_config
            .membership()
            .nodes()
            .map(|(id, _)| *id)
            .find(|id| {
                *id != me
                    && replication
                        .and_then(|r| r.get(id))
                        .and_then(|matched| matched.as_ref())
                        .is_none_or(|matched| matched.index < index)
            });
        lagging
    }
}

/// Room a batch's header and its one record's framing take around a
/// command's JSON.
const IMAGE_FRAMING: usize = 256;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_image_is_due_after_the_configured_bytes_or_its_own_size_whichever_is_more() {
        let mut progress = ImageProgress::default();
        progress.applied(1, 4095, true);
        assert!(!progress.due(4096));
        progress.applied(2, 1, true);
        assert!(progress.due(4096));
        // A large state: the log takes as much again before the next image.
        progress.size = 10_000;
        assert!(!progress.due(4096));
        progress.applied(3, 5_904, true);
        assert!(progress.due(4096));
    }

    #[test]
    fn only_entries_with_commands_move_the_last_command() {
        let mut progress = ImageProgress::default();
        progress.applied(7, 100, true);
        progress.applied(8, 100, false);
        assert_eq!(progress.last_command, 7);
        assert_eq!(progress.since, 200);
    }

    #[test]
    fn each_image_passed_over_doubles_the_wait_up_to_a_bound() {
        let mut progress = ImageProgress {
            since: 8_192,
            ..ImageProgress::default()
        };
        assert!(progress.due(8_192));
        progress.passed_over = 1;
        assert!(!progress.due(8_192));
        progress.applied(1, 8_192, false);
        assert!(progress.due(8_192));
        progress.passed_over = 40;
        progress.since = 8_192 << MAX_DOUBLINGS;
        assert!(progress.due(8_192));
        progress.since -= 1;
        assert!(!progress.due(8_192));
    }
}
