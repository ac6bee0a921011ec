//! The relay's side of its upstream: which node leads each mirrored
//! partition, connections to it, forwarded produces and raw fetches.
//!
//! The upstream is known by a list of Kafka listener addresses. A Metadata
//! request to the first that answers names each partition's leader and
//! where it listens; when a call to a leader fails, the leader is
//! forgotten and the next call asks again, trying the addresses in turn
//! from the last that answered. So the death of one upstream node costs
//! its partitions one failed call and one Metadata round trip.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use bytes::Bytes;
use herald_client::connection::versions;
use herald_client::{topic_name, ClientError, Connection};
use kafka_protocol::messages::{
    describe_configs_request, fetch_request, metadata_request, DescribeConfigsRequest,
    FetchRequest, InitProducerIdRequest, MetadataRequest, ProducerId,
};
use kafka_protocol::protocol::{Request, StrBytes};
use parking_lot::Mutex;

use super::RelayError;
use crate::storage::{Acks, ProducerRefusal, StorageError};

/// How long a relay waits for its upstream to answer one call (a fetch
/// adds its own wait).
const CALL_TIMEOUT: Duration = Duration::from_secs(10);
/// How long connecting to an upstream address may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(3);
/// Idle connections kept per upstream node for forwarded produces.
const IDLE_PER_NODE: usize = 4;

/// Kafka error codes the relay acts on.
mod code {
    pub const NONE: i16 = 0;
    pub const OFFSET_OUT_OF_RANGE: i16 = 1;
    pub const UNKNOWN_TOPIC_OR_PARTITION: i16 = 3;
    pub const LEADER_NOT_AVAILABLE: i16 = 5;
    pub const NOT_LEADER_OR_FOLLOWER: i16 = 6;
    pub const REQUEST_TIMED_OUT: i16 = 7;
    pub const NOT_ENOUGH_REPLICAS: i16 = 19;
    pub const NOT_ENOUGH_REPLICAS_AFTER_APPEND: i16 = 20;
    pub const OUT_OF_ORDER_SEQUENCE_NUMBER: i16 = 45;
    pub const DUPLICATE_SEQUENCE_NUMBER: i16 = 46;
    pub const INVALID_PRODUCER_EPOCH: i16 = 47;
    pub const KAFKA_STORAGE_ERROR: i16 = 56;
    pub const UNKNOWN_PRODUCER_ID: i16 = 59;
}

/// The refusal an upstream's produce error code stands for, when it is
/// about the producer's id, epoch or sequence.
fn producer_refusal(code: i16) -> Option<ProducerRefusal> {
    Some(match code {
        code::OUT_OF_ORDER_SEQUENCE_NUMBER => ProducerRefusal::OutOfOrderSequence,
        code::DUPLICATE_SEQUENCE_NUMBER => ProducerRefusal::DuplicateSequence,
        code::INVALID_PRODUCER_EPOCH => ProducerRefusal::InvalidProducerEpoch,
        code::UNKNOWN_PRODUCER_ID => ProducerRefusal::UnknownProducerId,
        _ => return None,
    })
}

/// Whether an upstream error code means "ask again who leads".
fn leadership_moved(code: i16) -> bool {
    matches!(
        code,
        code::NOT_LEADER_OR_FOLLOWER
            | code::LEADER_NOT_AVAILABLE
            | code::UNKNOWN_TOPIC_OR_PARTITION
    )
}

/// How a call to the upstream other than a forwarded produce failed.
#[derive(Debug, thiserror::Error)]
pub enum UpstreamError {
    /// No upstream address answered.
    #[error("the upstream cannot be reached: {0}")]
    Unreachable(ClientError),
    /// The upstream answered with this Kafka error code.
    #[error("the upstream refused the call (error {0})")]
    Refused(i16),
}

/// A topic as the upstream describes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UpstreamTopic {
    /// Each partition's leader's address (`None` while it has none), by
    /// partition index.
    pub partitions: Vec<Option<String>>,
}

/// The upstream of a relay (see the module documentation).
#[derive(Debug)]
pub struct Upstream {
    bootstrap: Vec<String>,
    /// The bootstrap address that answered last: asked first.
    preferred: AtomicUsize,
    /// Leaders as last described, by (topic, partition).
    leaders: Mutex<HashMap<(String, i32), String>>,
    /// Idle connections for forwarded produces, by address.
    idle: Mutex<HashMap<String, Vec<Connection>>>,
}

/// What a raw fetch from the upstream returned for one partition.
#[derive(Debug)]
pub(crate) struct Fetched {
    /// The upstream's error code for the partition.
    pub error_code: i16,
    /// Whole batches as the upstream stores them (a cut batch may end it).
    pub records: Bytes,
    /// The upstream's high watermark.
    pub high_watermark: i64,
    /// The upstream's log start offset.
    pub log_start_offset: i64,
}

impl Upstream {
    /// An upstream reached at any of `bootstrap` (HOST:PORT each).
    pub fn new(bootstrap: Vec<String>) -> Result<Self, RelayError> {
        if bootstrap.is_empty() {
            return Err(RelayError::NoUpstream);
        }
        for address in &bootstrap {
            let valid = address
                .rsplit_once(':')
                .is_some_and(|(host, port)| !host.is_empty() && port.parse::<u16>().is_ok());
            if !valid {
                return Err(RelayError::BadAddress(address.clone()));
            }
        }
        Ok(Self {
            bootstrap,
            preferred: AtomicUsize::new(0),
            leaders: Mutex::default(),
            idle: Mutex::default(),
        })
    }

    /// The addresses the upstream is known by.
    pub fn bootstrap(&self) -> &[String] {
        &self.bootstrap
    }

    pub(crate) async fn connect(address: &str) -> Result<Connection, ClientError> {
        match tokio::time::timeout(CONNECT_TIMEOUT, Connection::connect(address)).await {
            Ok(connected) => connected,
            Err(_) => Err(ClientError::TimedOut {
                address: address.to_owned(),
                what: "connect".into(),
                timeout: CONNECT_TIMEOUT,
            }),
        }
    }

    /// Describes `topic`, asking the bootstrap addresses in turn (from the
    /// last that answered) until one does; remembers its partitions'
    /// leaders.
    pub async fn describe(&self, topic: &str) -> Result<UpstreamTopic, ClientError> {
        let first = self.preferred.load(Ordering::Relaxed);
        let mut last_error = None;
        for step in 0..self.bootstrap.len() {
            let at = (first + step) % self.bootstrap.len();
            match self.describe_at(&self.bootstrap[at], topic).await {
                Ok(described) => {
                    self.preferred.store(at, Ordering::Relaxed);
                    let mut leaders = self.leaders.lock();
                    for (index, leader) in described.partitions.iter().enumerate() {
                        let key = (topic.to_owned(), index as i32);
                        match leader {
                            Some(address) => leaders.insert(key, address.clone()),
                            None => leaders.remove(&key),
                        };
                    }
                    return Ok(described);
                }
                Err(e) => {
                    tracing::debug!(address = %self.bootstrap[at], topic, error = %e, "upstream address did not describe the topic");
                    last_error = Some(e);
                }
            }
        }
        Err(last_error.unwrap_or_else(|| ClientError::refused("no upstream address")))
    }

    async fn describe_at(&self, address: &str, topic: &str) -> Result<UpstreamTopic, ClientError> {
        let mut connection = Self::connect(address).await?;
        let request = MetadataRequest::default()
            .with_topics(Some(vec![metadata_request::MetadataRequestTopic::default(
            )
            .with_name(Some(topic_name(topic)))]))
            .with_allow_auto_topic_creation(false);
        let response = connection
            .call(request, versions::METADATA, CALL_TIMEOUT)
            .await?;
        let nodes: HashMap<i32, String> = response
            .brokers
            .iter()
            .map(|b| (b.node_id.0, format!("{}:{}", b.host, b.port)))
            .collect();
        let found = response
            .topics
            .into_iter()
            .find(|t| t.name.as_ref().is_some_and(|n| n.0.as_str() == topic))
            .ok_or_else(|| ClientError::refused(format!("upstream has no topic '{topic}'")))?;
        if found.error_code != code::NONE {
            return Err(ClientError::refused(format!(
                "upstream answered error {} for topic '{topic}'",
                found.error_code
            )));
        }
        let mut partitions = vec![None; found.partitions.len()];
        for p in found.partitions {
            if let Some(slot) = usize::try_from(p.partition_index)
                .ok()
                .and_then(|i| partitions.get_mut(i))
            {
                *slot = nodes.get(&p.leader_id.0).cloned();
            }
        }
        Ok(UpstreamTopic { partitions })
    }

    /// Sends `request` to the upstream at the first bootstrap address that
    /// answers (from the last that did), on a pooled connection.
    async fn call_any<R: Request + Clone>(
        &self,
        request: R,
        version: i16,
    ) -> Result<R::Response, ClientError> {
        let first = self.preferred.load(Ordering::Relaxed);
        let mut last_error = None;
        for step in 0..self.bootstrap.len() {
            let at = (first + step) % self.bootstrap.len();
            let address = &self.bootstrap[at];
            let idle = self.idle.lock().get_mut(address).and_then(Vec::pop);
            let connected = match idle {
                Some(connection) => Ok(connection),
                None => Self::connect(address).await,
            };
            let answer = match connected {
                Ok(mut connection) => connection
                    .call(request.clone(), version, CALL_TIMEOUT)
                    .await
                    .map(|response| (response, connection)),
                Err(e) => Err(e),
            };
            match answer {
                Ok((response, connection)) => {
                    self.preferred.store(at, Ordering::Relaxed);
                    self.keep_idle(address, connection);
                    return Ok(response);
                }
                Err(e) => {
                    tracing::debug!(%address, error = %e, "upstream address did not answer");
                    last_error = Some(e);
                }
            }
        }
        Err(last_error.unwrap_or_else(|| ClientError::refused("no upstream address")))
    }

    /// Keeps `connection` to `address` for a later call, up to the pool's
    /// bound.
    fn keep_idle(&self, address: &str, connection: Connection) {
        let mut idle = self.idle.lock();
        let pool = idle.entry(address.to_owned()).or_default();
        if pool.len() < IDLE_PER_NODE {
            pool.push(connection);
        }
    }

    /// A producer id and epoch from the upstream (KIP-360's bump of
    /// `current` when given), for an idempotent producer of the relay: the
    /// upstream's leaders judge its batches, so the id must be theirs.
    pub async fn init_producer_id(
        &self,
        current: Option<(i64, i16)>,
    ) -> Result<(i64, i16), UpstreamError> {
        let (id, epoch) = current.unwrap_or((-1, -1));
        let request = InitProducerIdRequest::default()
            .with_transaction_timeout_ms(-1)
            .with_producer_id(ProducerId(id))
            .with_producer_epoch(epoch);
        let response = self
            .call_any(request, versions::INIT_PRODUCER_ID)
            .await
            .map_err(UpstreamError::Unreachable)?;
        if response.error_code != code::NONE {
            return Err(UpstreamError::Refused(response.error_code));
        }
        Ok((response.producer_id.0, response.producer_epoch))
    }

    /// The configs of `topic` the upstream sets on it rather than leaves
    /// at its own defaults (a topic override, or what the topic inherits
    /// from the upstream's broker or namespace), by key.
    pub async fn topic_configs(
        &self,
        topic: &str,
    ) -> Result<BTreeMap<String, String>, UpstreamError> {
        /// Kafka's config source DEFAULT_CONFIG: the upstream's built-in default.
        const SOURCE_DEFAULT: i8 = 5;
        /// Kafka's resource type for a topic.
        const RESOURCE_TOPIC: i8 = 2;
        let request = DescribeConfigsRequest::default().with_resources(vec![
            describe_configs_request::DescribeConfigsResource::default()
                .with_resource_type(RESOURCE_TOPIC)
                .with_resource_name(StrBytes::from_string(topic.to_owned()))
                .with_configuration_keys(None),
        ]);
        let response = self
            .call_any(request, versions::DESCRIBE_CONFIGS)
            .await
            .map_err(UpstreamError::Unreachable)?;
        let result = response
            .results
            .into_iter()
            .next()
            .ok_or(UpstreamError::Refused(code::UNKNOWN_TOPIC_OR_PARTITION))?;
        if result.error_code != code::NONE {
            return Err(UpstreamError::Refused(result.error_code));
        }
        Ok(result
            .configs
            .into_iter()
            .filter(|c| c.config_source != SOURCE_DEFAULT && !c.read_only)
            .filter_map(|c| Some((c.name.to_string(), c.value?.to_string())))
            .collect())
    }

    /// The address of the upstream node leading `topic`/`partition`,
    /// asking the upstream when it is not known.
    pub(crate) async fn leader(&self, topic: &str, partition: i32) -> Result<String, ClientError> {
        if let Some(known) = self.leaders.lock().get(&(topic.to_owned(), partition)) {
            return Ok(known.clone());
        }
        let described = self.describe(topic).await?;
        usize::try_from(partition)
            .ok()
            .and_then(|i| described.partitions.get(i).cloned().flatten())
            .ok_or_else(|| {
                ClientError::refused(format!("upstream has no leader for {topic}/{partition}"))
            })
    }

    /// Forgets who leads `topic`/`partition`: the next call asks again.
    pub(crate) fn forget_leader(&self, topic: &str, partition: i32) {
        self.leaders.lock().remove(&(topic.to_owned(), partition));
    }

    /// Forwards one batch (a client's produce or publish) to the upstream's
    /// leader of `topic`/`partition` with the client's `acks`, and answers
    /// with the upstream's base offset. Leadership moving is retried once
    /// through a fresh Metadata; anything else is the upstream's answer.
    pub(crate) async fn produce(
        &self,
        topic: &str,
        partition: i32,
        batch: Bytes,
        acks: Acks,
    ) -> Result<i64, StorageError> {
        let acks = match acks {
            Acks::All => -1,
            // The client waits for nothing; the relay still wants to know
            // the batch reached the upstream.
            Acks::Leader | Acks::None => 1,
        };
        let mut outcome = Err(StorageError::TimedOut);
        for _attempt in 0..3 {
            let leader = match self.leader(topic, partition).await {
                Ok(leader) => leader,
                Err(e) => {
                    outcome = Err(unreachable(&e));
                    continue;
                }
            };
            match self
                .produce_at(&leader, topic, partition, batch.clone(), acks)
                .await
            {
                Ok(base_offset) => return Ok(base_offset),
                Err(Forward::Moved(e)) => {
                    self.forget_leader(topic, partition);
                    outcome = Err(e);
                }
                Err(Forward::Final(e)) => return Err(e),
            }
        }
        outcome
    }

    async fn produce_at(
        &self,
        address: &str,
        topic: &str,
        partition: i32,
        batch: Bytes,
        acks: i16,
    ) -> Result<i64, Forward> {
        let idle = self.idle.lock().get_mut(address).and_then(Vec::pop);
        let mut connection = match idle {
            Some(connection) => connection,
            None => Self::connect(address)
                .await
                .map_err(|e| Forward::Moved(unreachable(&e)))?,
        };
        let request = herald_client::data::single_batch_request(
            topic,
            partition,
            batch,
            acks,
            CALL_TIMEOUT.as_millis() as i32,
        );
        let response = match connection
            .call(request, versions::PRODUCE, CALL_TIMEOUT)
            .await
        {
            Ok(response) => response,
            // The outcome is unknown: the client decides whether to retry.
            Err(ClientError::TimedOut { .. }) => {
                return Err(Forward::Final(StorageError::TimedOut))
            }
            Err(e) => return Err(Forward::Moved(unreachable(&e))),
        };
        self.keep_idle(address, connection);
        let answer = response
            .responses
            .into_iter()
            .flat_map(|t| t.partition_responses)
            .next()
            .ok_or_else(|| {
                Forward::Final(StorageError::Unavailable(
                    "the upstream answered no partition".into(),
                ))
            })?;
        if let Some(refusal) = producer_refusal(answer.error_code) {
            return Err(Forward::Final(StorageError::ProducerRefused(refusal)));
        }
        match answer.error_code {
            code::NONE => Ok(answer.base_offset),
            moved if leadership_moved(moved) => Err(Forward::Moved(StorageError::NotLeader)),
            code::REQUEST_TIMED_OUT => Err(Forward::Final(StorageError::TimedOut)),
            code::NOT_ENOUGH_REPLICAS
            | code::NOT_ENOUGH_REPLICAS_AFTER_APPEND
            | code::KAFKA_STORAGE_ERROR => Err(Forward::Final(StorageError::Unavailable(
                format!(
                    "the upstream could not store the batch (error {})",
                    answer.error_code
                )
                .into(),
            ))),
            other => Err(Forward::Final(StorageError::Unavailable(
                format!(
                    "the upstream refused the batch (error {other}{})",
                    answer
                        .error_message
                        .map(|m| format!(": {m}"))
                        .unwrap_or_default()
                )
                .into(),
            ))),
        }
    }

    /// One fetch of `topic`/`partition` from `offset` on `connection` (to
    /// its leader), waiting up to `max_wait` for data; the raw batches.
    pub(crate) async fn fetch(
        connection: &mut Connection,
        topic: &str,
        partition: i32,
        offset: u64,
        max_wait: Duration,
        max_bytes: i32,
    ) -> Result<Fetched, ClientError> {
        let request = FetchRequest::default()
            .with_replica_id((-1).into())
            .with_max_wait_ms(max_wait.as_millis() as i32)
            .with_min_bytes(1)
            .with_max_bytes(max_bytes)
            .with_session_epoch(-1)
            .with_topics(vec![fetch_request::FetchTopic::default()
                .with_topic(topic_name(topic))
                .with_partitions(vec![fetch_request::FetchPartition::default()
                    .with_partition(partition)
                    .with_current_leader_epoch(-1)
                    .with_fetch_offset(offset as i64)
                    .with_partition_max_bytes(max_bytes)])]);
        let response = connection
            .call(request, versions::FETCH, CALL_TIMEOUT + max_wait)
            .await?;
        if response.error_code != code::NONE {
            return Err(ClientError::refused(format!(
                "upstream fetch failed with error {}",
                response.error_code
            )));
        }
        let answer = response
            .responses
            .into_iter()
            .flat_map(|t| t.partitions)
            .find(|p| p.partition_index == partition)
            .ok_or_else(|| ClientError::refused("the upstream answered no partition"))?;
        Ok(Fetched {
            error_code: answer.error_code,
            records: answer.records.unwrap_or_default(),
            high_watermark: answer.high_watermark,
            log_start_offset: answer.log_start_offset,
        })
    }
}

/// How a forwarded produce failed.
enum Forward {
    /// The leader moved or could not be reached: ask again who leads.
    Moved(StorageError),
    /// The upstream's answer, or an unknown outcome: give it to the client.
    Final(StorageError),
}

fn unreachable(e: &ClientError) -> StorageError {
    StorageError::Unavailable(format!("the upstream cannot be reached: {e}").into())
}

/// Whether `code` is the upstream saying the fetch offset is outside its
/// log.
pub(crate) fn out_of_range(code: i16) -> bool {
    code == code::OFFSET_OUT_OF_RANGE
}

/// Whether a fetch error `code` means the leader moved.
pub(crate) fn moved(code: i16) -> bool {
    leadership_moved(code)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn addresses_must_be_host_and_port() {
        assert!(matches!(Upstream::new(vec![]), Err(RelayError::NoUpstream)));
        assert!(matches!(
            Upstream::new(vec!["localhost".into()]),
            Err(RelayError::BadAddress(_))
        ));
        assert!(matches!(
            Upstream::new(vec!["127.0.0.1:notaport".into()]),
            Err(RelayError::BadAddress(_))
        ));
        assert!(Upstream::new(vec!["127.0.0.1:9092".into(), "[::1]:9093".into()]).is_ok());
    }

    #[test]
    fn the_upstreams_sequence_refusals_reach_the_client_as_such() {
        assert_eq!(
            producer_refusal(45),
            Some(ProducerRefusal::OutOfOrderSequence)
        );
        assert_eq!(
            producer_refusal(46),
            Some(ProducerRefusal::DuplicateSequence)
        );
        assert_eq!(
            producer_refusal(47),
            Some(ProducerRefusal::InvalidProducerEpoch)
        );
        assert_eq!(
            producer_refusal(59),
            Some(ProducerRefusal::UnknownProducerId)
        );
        // Anything else is the forward's own business (leader moves,
        // storage errors).
        for other in [0, 6, 7, 19, 56] {
            assert_eq!(producer_refusal(other), None);
        }
    }
}
