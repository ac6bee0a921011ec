//! The indexers of one topic: a task per partition that follows the
//! partition's read tail from the lowest offset any of the topic's
//! queries has still to count, decodes each record once and offers it to
//! every query that has not counted it (`herald_query::feed_batches`),
//! and appends the alerts raised to [`ALERTS_TOPIC`]. The tasks run on the
//! indexer thread (`runtime.rs`), off the produce path: a publisher never
//! waits for them; how far behind a query is, is [`RunningQuery::lag`].

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Weak};
use std::time::Duration;

use herald_query::{feed_batches, Alert, Follower};
use herald_records::{BatchBuilder, RecordFields};
use parking_lot::RwLock;

use super::{RunningQuery, ALERTS_TOPIC};
use crate::broker::Broker;
use crate::partition::Partition;
use crate::storage::{Acks, StorageError};
use crate::topic::Topic;

/// Bytes read from a partition at a time.
const READ_BYTES: usize = 1 << 20;
/// Pause after a read the storage refused (a failed partition).
const RETRY_PAUSE: Duration = Duration::from_secs(1);
/// Rest after catching up with the tail, before waiting for more: records
/// arriving meanwhile are indexed together, so a steady trickle of
/// produces wakes the indexer thread a hundred times a second at most
/// rather than once per append (each wake-up is a context switch on a
/// core that serves produce and fetch). Results and alerts come this much
/// later at worst.
const TAIL_REST: Duration = Duration::from_millis(10);

/// The queries following one topic and the tasks indexing its partitions
/// for them.
pub(super) struct TopicIndexer {
    topic: Arc<Topic>,
    /// Replaced whole on every change, so a task reads a consistent list
    /// without holding the lock while it indexes.
    members: RwLock<Arc<Vec<Arc<RunningQuery>>>>,
    /// Wakes the tasks when the members change (a new query starts from
    /// the log start, behind where they wait) or the indexer closes.
    changed: tokio::sync::Notify,
    closed: AtomicBool,
}

impl TopicIndexer {
    /// Starts a task per partition of `topic` on `runtime`, indexing for
    /// no query until one joins.
    pub(super) fn start(
        runtime: &tokio::runtime::Handle,
        broker: &Arc<Broker>,
        topic: Arc<Topic>,
    ) -> Arc<Self> {
        let indexer = Arc::new(Self {
            topic,
            members: RwLock::new(Arc::new(Vec::new())),
            changed: tokio::sync::Notify::new(),
            closed: AtomicBool::new(false),
        });
        for (index, partition) in indexer.topic.partitions().iter().enumerate() {
            runtime.spawn(run(
                Arc::downgrade(broker),
                Arc::clone(&indexer),
                Arc::clone(partition),
                index,
            ));
        }
        indexer
    }

    /// The topic indexed (the instance: a topic deleted and created again
    /// under its name is another).
    pub(super) fn topic(&self) -> &Arc<Topic> {
        &self.topic
    }

    /// Adds `query`, which is indexed from its own progress on.
    pub(super) fn join(&self, query: Arc<RunningQuery>) {
        let mut members = self.members.write();
        let mut next = Vec::clone(&members);
        next.push(query);
        *members = Arc::new(next);
        drop(members);
        self.changed.notify_waiters();
    }

    /// Removes the query `id`; answers whether no query is left.
    pub(super) fn leave(&self, id: &str) -> bool {
        let mut members = self.members.write();
        let next: Vec<_> = members
            .iter()
            .filter(|q| q.spec.id != id)
            .cloned()
            .collect();
        let empty = next.is_empty();
        *members = Arc::new(next);
        empty
    }

    /// Ends every task of this indexer.
    pub(super) fn close(&self) {
        self.closed.store(true, Ordering::Release);
        self.changed.notify_waiters();
    }

    fn members(&self) -> Arc<Vec<Arc<RunningQuery>>> {
        Arc::clone(&self.members.read())
    }
}

async fn run(
    broker: Weak<Broker>,
    indexer: Arc<TopicIndexer>,
    partition: Arc<Partition>,
    index: usize,
) {
    let mut scratch = Vec::new();
    loop {
        let changed = indexer.changed.notified();
        tokio::pin!(changed);
        changed.as_mut().enable();
        if indexer.closed.load(Ordering::Acquire) {
            return;
        }
        let members = indexer.members();
        let progress = |q: &RunningQuery| q.indexed.get(index).map(|p| p.load(Ordering::Acquire));
        let Some(from) = members
            .iter()
            .filter(|q| !q.stopped.load(Ordering::Acquire))
            .filter_map(|q| progress(q))
            .min()
        else {
            changed.await;
            continue;
        };
        let read = match partition.read(from, READ_BYTES).await {
            Ok(read) => read,
            Err(StorageError::OffsetOutOfRange {
                log_start_offset, ..
            }) if from < log_start_offset => {
                // Retention passed the indexer: what it had not read is gone.
                for query in members.iter() {
                    if let Some(done) = query.indexed.get(index) {
                        done.fetch_max(log_start_offset, Ordering::AcqRel);
                    }
                }
                continue;
            }
            Err(StorageError::Closed) => return,
            Err(e) => {
                tracing::warn!(topic = %indexer.topic.name(), partition = index, error = %e, "the query indexer cannot read; retrying");
                tokio::select! {
                    _ = tokio::time::sleep(RETRY_PAUSE) => {}
                    _ = &mut changed => {}
                }
                continue;
            }
        };
        if read.bytes.is_empty() {
            tokio::select! {
                _ = partition.wait_for_data(from) => {}
                _ = &mut changed => {}
            }
            continue;
        }
        let alerts = index_read(&members, index, &read.bytes, &mut scratch);
        // Alerts go out before the progress moves: once the lag is 0, every
        // alert of what was indexed is on the alerts topic.
        if alerts.iter().any(|(_, a)| !a.is_empty()) {
            let Some(broker) = broker.upgrade() else {
                return;
            };
            let all: Vec<&Alert> = alerts.iter().flat_map(|(_, a)| a).collect();
            publish(&broker, &all).await;
        }
        for (query, raised) in alerts {
            query
                .alerts
                .fetch_add(raised.len() as u64, Ordering::Relaxed);
        }
        for query in members.iter() {
            if let Some(done) = query.indexed.get(index) {
                done.fetch_max(read.next_offset, Ordering::AcqRel);
            }
        }
        if read.next_offset >= partition.watermarks().high_watermark {
            tokio::select! {
                _ = tokio::time::sleep(TAIL_REST) => {}
                _ = &mut changed => {}
            }
        }
    }
}

/// Feeds one read to every member that has not counted it, each under
/// its state's lock; answers the alerts each raised.
fn index_read<'m>(
    members: &'m [Arc<RunningQuery>],
    index: usize,
    bytes: &[u8],
    scratch: &mut Vec<u8>,
) -> Vec<(&'m RunningQuery, Vec<Alert>)> {
    let active: Vec<(&RunningQuery, u64)> = members
        .iter()
        .filter(|q| !q.stopped.load(Ordering::Acquire))
        .filter_map(|q| Some((&**q, q.indexed.get(index)?.load(Ordering::Acquire))))
        .collect();
    // Locked in the members' order; nothing else holds two at once.
    let mut states: Vec<_> = active.iter().map(|(q, _)| q.state.lock()).collect();
    let mut followers: Vec<Follower<'_>> = states
        .iter_mut()
        .zip(&active)
        .map(|(state, (_, from))| Follower::new(*from, state))
        .collect();
    let outcome = feed_batches(bytes, &mut followers, scratch);
    if outcome.unreadable_batches > 0 {
        tracing::warn!(
            partition = index,
            batches = outcome.unreadable_batches,
            "batches the queries cannot read were passed over"
        );
    }
    let raised: Vec<(u64, Vec<Alert>)> = followers
        .into_iter()
        .map(|f| (f.records, f.alerts))
        .collect();
    drop(states);
    active
        .iter()
        .zip(raised)
        .map(|((query, _), (records, alerts))| {
            query.records.fetch_add(records, Ordering::Relaxed);
            (*query, alerts)
        })
        .collect()
}

/// Appends `alerts` to [`ALERTS_TOPIC`] (created with one partition if it
/// does not exist), each keyed by its query's id.
async fn publish(broker: &Broker, alerts: &[&Alert]) {
    let topic = match broker.topic(ALERTS_TOPIC) {
        Some(topic) => topic,
        None => {
            let _ = broker.create_topic(ALERTS_TOPIC, Some(1), &[], false);
            match broker.topic(ALERTS_TOPIC) {
                Some(topic) => topic,
                None => {
                    tracing::error!("the alerts topic cannot be created; alerts are counted only");
                    return;
                }
            }
        }
    };
    let Some(partition) = topic.partition(0) else {
        return;
    };
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX));
    let mut builder = BatchBuilder::new(now);
    let values: Vec<Vec<u8>> = alerts
        .iter()
        .map(|a| serde_json::to_vec(a).unwrap_or_default())
        .collect();
    for (alert, value) in alerts.iter().zip(&values) {
        let headers: [(&[u8], Option<&[u8]>); 1] =
            [(b"herald.trigger", Some(alert.trigger.as_bytes()))];
        builder.push(RecordFields {
            timestamp_ms: now,
            key: Some(alert.query.as_bytes()),
            value: Some(value),
            headers: &headers,
        });
    }
    let Ok(batch) = builder.finish() else {
        return;
    };
    if let Err(e) = partition.append(&batch, Acks::All).await {
        tracing::error!(error = %e, "alerts could not be appended to {ALERTS_TOPIC}");
    }
}
