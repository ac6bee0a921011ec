//! The indexer of one partition for one query: follows the partition's
//! read tail from where the query has read to, feeding every record to the
//! query's state, evaluating its triggers after each record (so an alert
//! is raised exactly where its condition comes to hold), and appending
//! alerts to [`ALERTS_TOPIC`]. It runs on the async runtime, off the
//! produce path: a publisher never waits for it; how far behind it is,
//! is [`RunningQuery::lag`].

use std::sync::atomic::Ordering;
use std::sync::{Arc, Weak};
use std::time::Duration;

use herald_query::Alert;
use herald_records::{batches, BatchBuilder, RecordBatch, RecordFields};

use super::{RunningQuery, ALERTS_TOPIC};
use crate::broker::Broker;
use crate::partition::Partition;
use crate::storage::{Acks, StorageError};

/// Bytes read from a partition at a time.
const READ_BYTES: usize = 1 << 20;
/// Pause after a read the storage refused (a failed partition).
const RETRY_PAUSE: Duration = Duration::from_secs(1);

/// Starts an indexer for each partition of `query`'s topic.
pub(super) fn start(broker: &Arc<Broker>, query: &Arc<RunningQuery>) {
    for (index, partition) in query.topic.partitions().iter().enumerate() {
        tokio::spawn(run(
            Arc::downgrade(broker),
            Arc::clone(query),
            Arc::clone(partition),
            index,
        ));
    }
}

async fn run(
    broker: Weak<Broker>,
    query: Arc<RunningQuery>,
    partition: Arc<Partition>,
    index: usize,
) {
    let Some(progress) = query.indexed.get(index) else {
        return;
    };
    let mut offset = progress.load(Ordering::Acquire);
    let mut scratch = Vec::new();
    let triggers = !query.spec.triggers.is_empty();
    loop {
        let stop = query.stop.notified();
        tokio::pin!(stop);
        stop.as_mut().enable();
        if query.stopped.load(Ordering::Acquire) {
            return;
        }
        let read = match partition.read(offset, READ_BYTES).await {
            Ok(read) => read,
            Err(StorageError::OffsetOutOfRange {
                log_start_offset, ..
            }) if offset < log_start_offset => {
                // Retention passed the indexer: what it had not read is gone.
                offset = log_start_offset;
                progress.store(offset, Ordering::Release);
                continue;
            }
            Err(StorageError::Closed) => return,
            Err(e) => {
                tracing::warn!(query = %query.spec.id, partition = index, error = %e, "the query's indexer cannot read; retrying");
                tokio::select! {
                    _ = tokio::time::sleep(RETRY_PAUSE) => {}
                    _ = &mut stop => return,
                }
                continue;
            }
        };
        if read.bytes.is_empty() {
            tokio::select! {
                _ = partition.wait_for_data(offset) => {}
                _ = &mut stop => return,
            }
            continue;
        }
        let mut alerts = Vec::new();
        {
            let mut state = query.state.lock();
            for batch in batches(&read.bytes).map_while(Result::ok) {
                let Ok(batch) = RecordBatch::new(batch) else {
                    break;
                };
                if batch.header().is_control() {
                    continue;
                }
                let Ok(records) = batch.records(&mut scratch) else {
                    tracing::warn!(query = %query.spec.id, partition = index, "a batch the query cannot read was passed over");
                    continue;
                };
                for record in records.map_while(Result::ok) {
                    // A truncation inside the batch: those are not served.
                    if record.offset < offset as i64 {
                        continue;
                    }
                    state.observe(&record, record.timestamp);
                    if triggers {
                        alerts.extend(state.evaluate_triggers());
                    }
                }
            }
        }
        // Alerts go out before the progress moves: once the lag is 0, every
        // alert of what was indexed is on the alerts topic.
        if !alerts.is_empty() {
            match broker.upgrade() {
                Some(broker) => publish(&broker, &alerts).await,
                None => return,
            }
            query
                .alerts
                .fetch_add(alerts.len() as u64, Ordering::Relaxed);
        }
        offset = offset.max(read.next_offset);
        progress.store(offset, Ordering::Release);
    }
}

/// Appends `alerts` to [`ALERTS_TOPIC`] (created with one partition if it
/// does not exist), each keyed by its query's id.
async fn publish(broker: &Broker, alerts: &[Alert]) {
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
