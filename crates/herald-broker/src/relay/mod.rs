//! Relay nodes: seed 003's master-slave mode, on the Kafka protocol.
//!
//! A relay is a herald node configured with an *upstream* (the addresses of
//! a herald cluster, a single node, or another relay) and the topics it
//! mirrors from there. It does not vote in the upstream's Raft groups: it
//! is a **fetch-based mirror**, not an openraft learner. Three reasons:
//!
//! - a learner would tie the relay to one Raft group per partition and to
//!   the cluster's internal protocol and membership; a fetch mirror needs
//!   only what any Kafka client sees, so a relay can hang below a cluster,
//!   a single node or another relay alike, which is what makes a tree;
//! - the upstream's leaders need no state for it (a learner is a member
//!   every leader replicates to and tracks), so a tree can grow without
//!   loading the cluster's consensus;
//! - when its upstream dies it asks any other address it knows for the
//!   partition's leader and carries on from its own log end: every node of
//!   a Raft cluster holds the same batches at the same offsets, and so does
//!   every relay below it.
//!
//! Each mirrored partition copies the upstream's committed batches verbatim
//! (Raft's control batches included), so offsets are the same on every node
//! of the tree and a consumer's position is valid on any of them
//! (`mirror`). Its subscribers (Kafka consumers, push subscriptions) read
//! the relay's own copy. A produce or a push publish to a mirrored
//! partition is forwarded to the upstream's leader and answered with the
//! upstream's answer (`Upstream::produce`, through the partition's
//! [`MirrorStorage`](crate::storage::MirrorStorage) backend); the record
//! then reaches the relay's copy like any other.
//!
//! Partitions the upstream adds to a mirrored topic are added here too
//! (asked every 2 s), each with its copier.
//!
//! Idempotent producers work through a relay: it asks its upstream for
//! their producer ids (InitProducerId), and their batches reach the
//! upstream's leader as they were sent, where that producer's state is
//! kept; its verdict (a duplicate, a sequence or epoch refusal) comes back
//! to the client unchanged. A relay below a relay asks its own upstream,
//! so every id comes from the tree's root.
//!
//! A mirrored topic takes its upstream's topic configs (asked with the
//! partitions every 2 s; see `ConfigFollower`).

mod mirror;
mod upstream;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

pub use upstream::{Upstream, UpstreamError, UpstreamTopic};

use crate::broker::{Broker, ConfigChange};
use crate::error::BrokerError;

/// Why a relay could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum RelayError {
    /// No upstream address was given.
    #[error("a relay needs at least one upstream address")]
    NoUpstream,
    /// An upstream address is not HOST:PORT.
    #[error("upstream address '{0}' is not HOST:PORT")]
    BadAddress(String),
    /// No topic to mirror was given.
    #[error("a relay needs at least one topic to mirror")]
    NoTopics,
}

/// What a relay mirrors, and from where.
#[derive(Debug, Clone)]
pub struct RelayConfig {
    upstream: Arc<Upstream>,
    topics: BTreeSet<String>,
}

impl RelayConfig {
    /// Mirrors `topics` from the upstream reached at any of `upstream`
    /// (HOST:PORT of its Kafka listeners; the first that answers is used,
    /// the others when it fails).
    pub fn new(upstream: Vec<String>, topics: Vec<String>) -> Result<Self, RelayError> {
        if topics.is_empty() {
            return Err(RelayError::NoTopics);
        }
        Ok(Self {
            upstream: Arc::new(Upstream::new(upstream)?),
            topics: topics.into_iter().collect(),
        })
    }

    /// Whether `topic` is mirrored from the upstream.
    pub fn mirrors(&self, topic: &str) -> bool {
        self.topics.contains(topic)
    }

    /// The topics mirrored.
    pub fn topics(&self) -> impl Iterator<Item = &str> {
        self.topics.iter().map(String::as_str)
    }

    /// The upstream.
    pub fn upstream(&self) -> &Arc<Upstream> {
        &self.upstream
    }
}

/// How long a relay waits before asking again for a topic its upstream
/// does not have (yet), or after its upstream could not be reached.
const TOPIC_RETRY: Duration = Duration::from_secs(1);

/// Starts mirroring every topic of `broker`'s relay configuration, on the
/// current tokio runtime: each topic is created here (with the upstream's
/// partition count) once the upstream has it, then each partition is
/// mirrored by a task of its own until the broker closes it.
pub fn start(broker: &Arc<Broker>) {
    let Some(relay) = broker.config().relay.clone() else {
        return;
    };
    for topic in relay.topics() {
        let (broker, upstream, topic) = (
            Arc::clone(broker),
            Arc::clone(relay.upstream()),
            topic.to_owned(),
        );
        tokio::spawn(async move {
            match adopt_topic(&broker, &upstream, &topic).await {
                Ok(partitions) => {
                    for index in 0..partitions {
                        tokio::spawn(mirror::run(
                            Arc::clone(&broker),
                            Arc::clone(&upstream),
                            topic.clone(),
                            index,
                        ));
                    }
                    follow_growth(&broker, &upstream, &topic, partitions).await;
                }
                Err(e) => {
                    tracing::error!(topic, error = %e, "the relay cannot mirror this topic");
                }
            }
        });
    }
}

/// How often a relay asks its upstream whether a mirrored topic grew or
/// its configs changed.
const GROWTH_CHECK: Duration = Duration::from_secs(2);

/// Adds here the partitions the upstream adds to a mirrored topic (Kafka's
/// CreatePartitions there), each with a copier, and follows its configs
/// (see [`ConfigFollower`]), for as long as the topic lives here;
/// `mirrored` partitions are copied already.
async fn follow_growth(
    broker: &Arc<Broker>,
    upstream: &Arc<Upstream>,
    topic: &str,
    mut mirrored: u32,
) {
    let Some(id) = broker.topic(topic).map(|t| t.id()) else {
        return;
    };
    let mut configs = ConfigFollower::default();
    loop {
        configs.follow(broker, upstream, topic).await;
        tokio::time::sleep(GROWTH_CHECK).await;
        let Some(here) = broker.topic(topic).filter(|t| t.id() == id) else {
            return;
        };
        let Ok(described) = upstream.describe(topic).await else {
            continue;
        };
        let wanted = described.partitions.len() as u32;
        if wanted > here.partition_count() {
            match broker.create_partitions(topic, wanted, false) {
                Ok(()) => tracing::info!(
                    topic,
                    partitions = wanted,
                    "the relay follows the upstream's new partitions"
                ),
                Err(e) => {
                    tracing::warn!(topic, error = %e, "the relay could not add the upstream's new partitions");
                    continue;
                }
            }
        }
        let copyable = here.partition_count().min(wanted);
        for index in mirrored..copyable {
            tokio::spawn(mirror::run(
                Arc::clone(broker),
                Arc::clone(upstream),
                topic.to_owned(),
                index,
            ));
        }
        mirrored = mirrored.max(copyable);
    }
}

/// Gives the relay's copy of a topic the configs its upstream sets on it
/// (retention, size limits, and herald's own such as subject filters and
/// message expiry), so the copy keeps and serves what the upstream's
/// does. They replace the relay's own overrides of that topic: a mirrored
/// topic is configured upstream. Keys herald does not know (an upstream's
/// newer or Kafka-only settings) are left out.
#[derive(Debug, Default)]
struct ConfigFollower {
    /// Configs this relay refused (invalid here): not tried again, nor
    /// warned about, until the upstream's change.
    refused: Option<BTreeMap<String, String>>,
}

impl ConfigFollower {
    async fn follow(&mut self, broker: &Broker, upstream: &Upstream, topic: &str) {
        let wanted: BTreeMap<String, String> = match upstream.topic_configs(topic).await {
            Ok(configs) => configs
                .into_iter()
                .filter(|(key, _)| crate::topic_config::settable(key))
                .collect(),
            Err(e) => {
                tracing::debug!(topic, error = %e, "the relay could not read the upstream's topic configs");
                return;
            }
        };
        let Some(here) = broker.topic(topic) else {
            return;
        };
        if here.config().overrides() == &wanted || self.refused.as_ref() == Some(&wanted) {
            return;
        }
        let changes: Vec<ConfigChange> = wanted
            .iter()
            .map(|(key, value)| ConfigChange::Set {
                key: key.clone(),
                value: value.clone(),
            })
            .collect();
        match broker.alter_topic_config(topic, &changes, true, false) {
            Ok(()) => {
                tracing::info!(topic, configs = ?wanted, "the relay's copy takes the upstream's topic configs");
                self.refused = None;
            }
            Err(e) => {
                tracing::warn!(topic, configs = ?wanted, error = %e, "the relay cannot take the upstream's topic configs");
                self.refused = Some(wanted);
            }
        }
    }
}

/// Makes sure `topic` exists here as a mirror of the upstream's; returns
/// its partition count. Waits (retrying) while the upstream lacks it.
async fn adopt_topic(
    broker: &Arc<Broker>,
    upstream: &Upstream,
    topic: &str,
) -> Result<u32, BrokerError> {
    let upstream_partitions = loop {
        match upstream.describe(topic).await {
            Ok(described) => break described.partitions.len() as u32,
            Err(e) => {
                tracing::debug!(topic, error = %e, "the relay waits for the topic upstream");
                tokio::time::sleep(TOPIC_RETRY).await;
            }
        }
    };
    if let Some(existing) = broker.topic(topic) {
        let here = existing.partition_count();
        if here != upstream_partitions {
            tracing::warn!(
                topic,
                here,
                upstream = upstream_partitions,
                "the mirrored topic's partition count differs from the upstream's; mirroring the partitions both have"
            );
        }
        return Ok(here.min(upstream_partitions));
    }
    match broker.create_topic(topic, Some(upstream_partitions), &[], false) {
        Ok(summary) => {
            tracing::info!(
                topic,
                partitions = summary.partitions,
                "the relay mirrors a topic"
            );
            Ok(summary.partitions)
        }
        // Created meanwhile (a client's auto-creation raced this).
        Err(BrokerError::TopicExists { .. }) => Ok(broker
            .topic(topic)
            .map_or(0, |t| t.partition_count().min(upstream_partitions))),
        Err(e) => Err(e),
    }
}
