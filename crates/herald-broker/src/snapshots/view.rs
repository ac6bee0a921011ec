//! Read-only view topics: a snapshot's topic served to stock Kafka clients
//! as a topic of its own, `__snapshot.<id>.<topic>`, whose end is the cut.
//! ListOffsets answers the cut as the latest offset, Fetch stops there,
//! Produce is refused; so kcat, Spark, Flink or Connect read exactly the
//! snapshot with nothing herald-specific.

use std::sync::{Arc, OnceLock};

use herald_log::{KeyBatches, Log};
use herald_records::{batches, BatchHeader};
use uuid::Uuid;

use super::record::PartitionCut;
use crate::partition::{OffsetAndTimestamp, OffsetSpec, Partition};
use crate::storage::{read_error, stored, StorageError, StoredBatches, Watermarks};
use crate::topic::Topic;

/// What every view topic's name starts with.
pub const VIEW_PREFIX: &str = "__snapshot.";

/// The view topic of `topic` in snapshot `snapshot`.
pub fn view_name(snapshot: &str, topic: &str) -> String {
    format!("{VIEW_PREFIX}{snapshot}.{topic}")
}

/// The snapshot id and topic a view topic's name stands for, if it is one.
/// Snapshot ids hold no `.`, so the first one after the prefix ends it.
pub fn parse_view_name(name: &str) -> Option<(&str, &str)> {
    let rest = name.strip_prefix(VIEW_PREFIX)?;
    let (snapshot, topic) = rest.split_once('.')?;
    (!snapshot.is_empty() && !topic.is_empty()).then_some((snapshot, topic))
}

/// One topic of a snapshot, served as a read-only topic.
#[derive(Debug)]
pub struct ViewTopic {
    name: String,
    id: Uuid,
    snapshot: String,
    topic: Arc<Topic>,
    partitions: Vec<ViewPartition>,
}

impl ViewTopic {
    /// The view of `topic` at `cuts` (by partition index); `None` when one
    /// of the cut partitions is not stored in an embedded log here.
    pub(crate) fn new(
        snapshot: &str,
        id: Uuid,
        topic: Arc<Topic>,
        cuts: &[PartitionCut],
    ) -> Option<Self> {
        let live = topic.partitions();
        let partitions = cuts
            .iter()
            .enumerate()
            .map(|(index, cut)| {
                let partition = Arc::clone(live.get(index)?);
                let log = partition.local_log()?;
                // A cut past what the log holds (its tail lost in a crash)
                // would be filled by later records: not served.
                if cut.end > log.high_watermark() {
                    return None;
                }
                Some(ViewPartition {
                    partition,
                    log,
                    start: cut.start,
                    end: cut.end,
                    max_timestamp: Arc::default(),
                })
            })
            .collect::<Option<Vec<_>>>()?;
        Some(Self {
            name: view_name(snapshot, topic.name()),
            id,
            snapshot: snapshot.to_owned(),
            topic,
            partitions,
        })
    }

    /// The view topic's name, `__snapshot.<id>.<topic>`.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The view topic's id (not the topic's own: a client that fetches by
    /// id must reach the view).
    pub fn id(&self) -> Uuid {
        self.id
    }

    /// The snapshot's id.
    pub fn snapshot(&self) -> &str {
        &self.snapshot
    }

    /// The topic the view shows; authorization is checked against it.
    pub fn topic(&self) -> &Arc<Topic> {
        &self.topic
    }

    /// The partition with this index, if the snapshot holds it.
    pub fn partition(&self, index: i32) -> Option<&ViewPartition> {
        self.partitions.get(usize::try_from(index).ok()?)
    }

    /// Every partition, in index order.
    pub fn partitions(&self) -> &[ViewPartition] {
        &self.partitions
    }
}

/// One partition of a view: the partition's records `start..end`.
#[derive(Debug, Clone)]
pub struct ViewPartition {
    partition: Arc<Partition>,
    log: Arc<Log>,
    start: u64,
    end: u64,
    /// The answer of the max-timestamp lookup, once computed.
    max_timestamp: Arc<OnceLock<Option<OffsetAndTimestamp>>>,
}

impl ViewPartition {
    /// Its partition index.
    pub fn index(&self) -> u32 {
        self.partition.index()
    }

    /// The partition the view reads.
    pub fn partition(&self) -> &Arc<Partition> {
        &self.partition
    }

    /// The snapshot's range: its first offset and the cut.
    pub fn range(&self) -> (u64, u64) {
        (self.start, self.end)
    }

    /// The view's watermarks: it starts where the snapshot does and ends
    /// at the cut (sooner only while appends placed before the cut are
    /// still being written, which taking the snapshot waited for).
    pub fn watermarks(&self) -> Watermarks {
        Watermarks {
            log_start_offset: self.start,
            high_watermark: self.end.min(self.log.high_watermark()),
        }
    }

    /// Whole batches from `offset` up to `max_bytes`, never past the cut.
    pub fn read(&self, offset: u64, max_bytes: usize) -> Result<StoredBatches, StorageError> {
        self.read_before(offset, max_bytes, self.end)
    }

    /// [`ViewPartition::read`] that also stops after the batch holding the
    /// offset before `end`, for a reader that needs no more.
    pub fn read_before(
        &self,
        offset: u64,
        max_bytes: usize,
        end: u64,
    ) -> Result<StoredBatches, StorageError> {
        if let Some(reason) = self.log.poisoned() {
            return Err(StorageError::Failed(reason));
        }
        if offset < self.start {
            return Err(StorageError::OffsetOutOfRange {
                requested: offset,
                log_start_offset: self.start,
                high_watermark: self.watermarks().high_watermark,
            });
        }
        let read = if end < self.end {
            self.log.read_until(offset, max_bytes, end)
        } else {
            self.log.read_visible(offset, max_bytes, self.end)
        };
        let mut read = read.map(stored).map_err(read_error).map_err(|e| match e {
            StorageError::OffsetOutOfRange {
                requested,
                high_watermark,
                ..
            } => StorageError::OffsetOutOfRange {
                requested,
                log_start_offset: self.start,
                high_watermark,
            },
            other => other,
        })?;
        read.watermarks.log_start_offset = self.start;
        // `read_until` states the log's end; the view ends at the cut.
        read.watermarks.high_watermark = read.watermarks.high_watermark.min(self.end);
        Ok(read)
    }

    /// The batches of `from..to` (within the view) that may hold records
    /// with `key`, through the log's key index, at most `max_batches` of
    /// them, and where the part left to a bulk read begins (see
    /// [`Log::key_batches`]).
    pub fn key_batches(&self, key: &[u8], from: u64, to: u64, max_batches: usize) -> KeyBatches {
        self.log
            .key_batches(key, from.max(self.start), to.min(self.end), max_batches)
    }

    /// [`ViewPartition::key_batches`] for several keys at once, with the
    /// runs of the log's key-sorted copies that hold them (see
    /// [`Log::keys_batches`]).
    pub fn keys_batches(
        &self,
        keys: &[&[u8]],
        from: u64,
        to: u64,
        max_batches: usize,
    ) -> KeyBatches {
        self.log
            .keys_batches(keys, from.max(self.start), to.min(self.end), max_batches)
    }

    /// Where in `from..to` (within the view) records stop being able to be
    /// stamped at or before `latest`, through the smallest timestamps the
    /// history index keeps (see [`Log::end_for_timestamps_up_to`]).
    pub fn end_for_timestamps_up_to(&self, latest: i64, from: u64, to: u64) -> u64 {
        let (from, to) = (from.max(self.start), to.min(self.end));
        if from >= to {
            return from.min(to);
        }
        self.log.end_for_timestamps_up_to(latest, from, to)
    }

    /// Resolves once the view has records at or past `offset`: only while
    /// appends placed before the cut are still being written; at the cut
    /// it never resolves (nothing more will come), so wrap it in a
    /// timeout as a long poll does.
    pub async fn wait_for_data(&self, offset: u64) {
        if offset < self.end {
            self.log.wait_for_data(offset).await;
        } else {
            std::future::pending::<()>().await;
        }
    }

    /// Looks an offset up within the view, as [`Partition::list_offset`]
    /// does within the partition; `None` when no record matches.
    pub async fn list_offset(
        &self,
        spec: OffsetSpec,
    ) -> Result<Option<OffsetAndTimestamp>, StorageError> {
        if let Some(reason) = self.log.poisoned() {
            return Err(StorageError::Failed(reason));
        }
        let at = |offset| OffsetAndTimestamp {
            offset,
            timestamp: -1,
        };
        Ok(match spec {
            OffsetSpec::Earliest => Some(at(self.start)),
            // As Fetch states it: the cut, once the appends before it are
            // written (taking the snapshot waited for them).
            OffsetSpec::Latest => Some(at(self.watermarks().high_watermark)),
            OffsetSpec::Timestamp(target) => {
                match self.log.offset_for_timestamp_from(target, self.start) {
                    Some(t) if t.offset < self.end => Some(
                        self.partition
                            .exact(t.offset, t.timestamp, target, Some(self.start))
                            .await,
                    ),
                    _ => None,
                }
            }
            OffsetSpec::MaxTimestamp => match self.max_timestamp() {
                Some(t) => Some(
                    self.partition
                        .exact(t.offset, t.timestamp, t.timestamp, Some(self.start))
                        .await,
                ),
                None => None,
            },
        })
    }

    /// The record with the largest timestamp within the view (the first
    /// such batch, found from batch headers; the exact record is looked
    /// up as for a timestamp). A first batch that starts below the view
    /// has its records from the view's start read one by one. Computed
    /// once: a view never changes.
    fn max_timestamp(&self) -> Option<OffsetAndTimestamp> {
        *self.max_timestamp.get_or_init(|| self.scan_max_timestamp())
    }

    fn scan_max_timestamp(&self) -> Option<OffsetAndTimestamp> {
        const CHUNK: usize = 1 << 20;
        let mut best: Option<(i64, u64)> = None;
        let mut offer = |timestamp: i64, offset: u64| {
            if best.is_none_or(|(t, _)| timestamp > t) {
                best = Some((timestamp, offset));
            }
        };
        let mut scratch = Vec::new();
        let mut offset = self.start;
        while offset < self.end {
            let read = self.log.read_visible(offset, CHUNK, self.end).ok()?;
            if read.bytes.is_empty() {
                break;
            }
            for batch in batches(&read.bytes).map_while(Result::ok) {
                let Some(header) = BatchHeader::parse(batch) else {
                    break;
                };
                let base = u64::try_from(header.base_offset()).unwrap_or(0);
                if base >= self.start {
                    offer(header.max_timestamp(), base);
                    continue;
                }
                // Straddles the view's start: only its records from there.
                let Ok(records) = herald_records::RecordBatch::new(batch)
                    .map_err(|_| ())
                    .and_then(|b| b.records(&mut scratch).map_err(|_| ()))
                else {
                    continue;
                };
                for record in records.map_while(Result::ok) {
                    if let Ok(at) = u64::try_from(record.offset) {
                        if at >= self.start {
                            offer(record.timestamp, at);
                        }
                    }
                }
            }
            offset = read.next_offset;
        }
        best.map(|(timestamp, offset)| OffsetAndTimestamp { offset, timestamp })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn view_names_round_trip() {
        let name = view_name("nightly-1", "orders.eu");
        assert_eq!(name, "__snapshot.nightly-1.orders.eu");
        assert_eq!(parse_view_name(&name), Some(("nightly-1", "orders.eu")));
        assert_eq!(parse_view_name("orders"), None);
        assert_eq!(parse_view_name("__snapshot.x"), None);
        assert_eq!(parse_view_name("__snapshot..t"), None);
        assert_eq!(parse_view_name("__snapshot.x."), None);
    }
}
