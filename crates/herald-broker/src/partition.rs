//! One partition: its [`Log`] and the idempotent-producer state guarding
//! appends to it.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use herald_log::batch::{self, BatchHeader};
use herald_log::{FlushPolicy, Log, LogConfig, ReadSlice};
use parking_lot::Mutex;

use crate::error::{BrokerError, FetchError, ProduceError};
use crate::producer_snapshot;
use crate::producer_state::{last_sequence, BatchMetadata, ProducerEntry, SequenceCheck};
use crate::records;

/// Bytes read at a time while rebuilding producer state from the log.
const REBUILD_READ_BYTES: usize = 8 * 1024 * 1024;

/// Result of a successful produce to one partition.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProduceOutcome {
    /// Offset of the batch's first record.
    pub base_offset: u64,
    /// Offset of the batch's last record.
    pub last_offset: u64,
    /// The partition's first stored offset after the append.
    pub log_start_offset: u64,
    /// True if the batch was a retry of one already stored (nothing appended).
    pub duplicate: bool,
}

/// Which offset a list-offsets lookup asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OffsetSpec {
    /// The first stored offset.
    Earliest,
    /// The next offset to be written (high watermark).
    Latest,
    /// The record with the largest timestamp.
    MaxTimestamp,
    /// The first record whose timestamp is at least this (ms since epoch).
    Timestamp(i64),
}

/// An offset and the timestamp of the record there (-1 when not applicable).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OffsetAndTimestamp {
    /// The offset.
    pub offset: u64,
    /// Its record's timestamp, or -1.
    pub timestamp: i64,
}

/// A partition of a topic.
pub struct Partition {
    index: u32,
    log: Arc<Log>,
    // The flush policy is broker-wide and fixed at start, so it is read once.
    append_blocks: bool,
    snapshot: PathBuf,
    producers: Mutex<HashMap<i64, Arc<Mutex<ProducerEntry>>>>,
}

impl std::fmt::Debug for Partition {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Partition")
            .field("index", &self.index)
            .finish_non_exhaustive()
    }
}

impl Partition {
    /// Opens (or creates) the log in `dir` and rebuilds producer state from it.
    pub(crate) fn open(
        dir: &Path,
        topic: &str,
        index: u32,
        config: LogConfig,
        snapshot: PathBuf,
    ) -> Result<Self, BrokerError> {
        let log = Log::open(dir, config).map_err(|source| BrokerError::Log {
            topic: topic.to_owned(),
            partition: index,
            source,
        })?;
        let producers = rebuild_producer_state(&log, producer_snapshot::load(&snapshot));
        if !producers.is_empty() {
            tracing::debug!(
                topic,
                partition = index,
                producers = producers.len(),
                "rebuilt producer state"
            );
        }
        let producers = producers
            .into_iter()
            .map(|(id, e)| (id, Arc::new(Mutex::new(e))))
            .collect();
        let append_blocks = matches!(log.config().flush, FlushPolicy::EveryAppend);
        Ok(Self {
            index,
            log: Arc::new(log),
            append_blocks,
            producers: Mutex::new(producers),
            snapshot,
        })
    }

    /// Writes the producer-state snapshot. Only valid while no append runs
    /// (at shutdown, after the listeners stopped): the state must be exactly
    /// that of the log up to its high watermark.
    pub(crate) fn save_producer_snapshot(&self) -> Result<(), BrokerError> {
        let next_offset = self.log.high_watermark();
        let producers: Vec<(i64, ProducerEntry)> = self
            .producers
            .lock()
            .iter()
            .map(|(id, entry)| (*id, entry.lock().clone()))
            .collect();
        if producers.is_empty() {
            return match std::fs::remove_file(&self.snapshot) {
                Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                    Err(BrokerError::io("remove", &self.snapshot, e))
                }
                _ => Ok(()),
            };
        }
        producer_snapshot::save(&self.snapshot, next_offset, &producers)
    }

    /// Removes the producer-state snapshot (the partition is being deleted).
    pub(crate) fn remove_producer_snapshot(&self) {
        let _ = std::fs::remove_file(&self.snapshot);
    }

    /// Partition index within its topic.
    pub fn index(&self) -> u32 {
        self.index
    }

    /// The partition's log (for reads, offsets and waiting for data).
    pub fn log(&self) -> &Arc<Log> {
        &self.log
    }

    /// True if an append blocks until durable (the flush policy is
    /// every-append), so async callers should run it on a blocking thread.
    pub fn append_blocks(&self) -> bool {
        self.append_blocks
    }

    /// Appends the records of one produce request to this partition. Kafka
    /// requires exactly one batch per partition in a request (v3+), which
    /// makes the answer (one base offset) and idempotence well defined.
    pub fn append(&self, records: &[u8]) -> Result<ProduceOutcome, ProduceError> {
        let mut split = batch::batches(records);
        let batch = split
            .next()
            .ok_or(ProduceError::InvalidRecords("no record batch"))??;
        if split.next().is_some() {
            return Err(ProduceError::InvalidRecords(
                "exactly one record batch per partition is allowed",
            ));
        }
        let header = BatchHeader::parse(batch)
            .ok_or(ProduceError::InvalidRecords("truncated batch header"))?;
        if header.producer_id() < 0 {
            // Not idempotent: the log validates and appends without any lock.
            let appended = self.log.append(batch)?;
            return Ok(self.outcome(appended.base_offset, appended.last_offset, false));
        }
        // Validate before the sequence check, so a damaged retry is refused
        // rather than answered as a duplicate.
        let valid = batch::ValidBatch::new(batch)?;
        if valid.header().is_transactional() {
            return Err(ProduceError::Transactional);
        }
        self.append_idempotent(valid)
    }

    fn append_idempotent(
        &self,
        valid: batch::ValidBatch<'_>,
    ) -> Result<ProduceOutcome, ProduceError> {
        let header = valid.header();
        let producer_id = header.producer_id();
        let entry = Arc::clone(self.producers.lock().entry(producer_id).or_default());
        // Held across the append so that this producer's batches are checked
        // and appended in one order; other producers are not blocked.
        let mut entry = entry.lock();
        let (epoch, first, count) = (
            header.producer_epoch(),
            header.base_sequence(),
            header.records_count(),
        );
        match entry.check(producer_id, epoch, first, count)? {
            SequenceCheck::Duplicate(meta) => {
                Ok(self.outcome(meta.base_offset, meta.last_offset, true))
            }
            SequenceCheck::Append => {
                let appended = self.log.append_valid(valid)?;
                entry.record(
                    epoch,
                    BatchMetadata {
                        first_sequence: first,
                        last_sequence: last_sequence(first, count),
                        base_offset: appended.base_offset,
                        last_offset: appended.last_offset,
                    },
                );
                Ok(self.outcome(appended.base_offset, appended.last_offset, false))
            }
        }
    }

    fn outcome(&self, base_offset: u64, last_offset: u64, duplicate: bool) -> ProduceOutcome {
        ProduceOutcome {
            base_offset,
            last_offset,
            log_start_offset: self.log.log_start_offset(),
            duplicate,
        }
    }

    /// Whole batches from `offset`, up to `max_bytes` (at least one batch if
    /// any exists there).
    pub fn read(&self, offset: u64, max_bytes: usize) -> Result<ReadSlice, FetchError> {
        Ok(self.log.read(offset, max_bytes)?)
    }

    /// Looks up an offset; `None` when no record matches (Kafka answers -1).
    pub fn list_offset(&self, spec: OffsetSpec) -> Option<OffsetAndTimestamp> {
        match spec {
            OffsetSpec::Earliest => Some(OffsetAndTimestamp {
                offset: self.log.log_start_offset(),
                timestamp: -1,
            }),
            OffsetSpec::Latest => Some(OffsetAndTimestamp {
                offset: self.log.high_watermark(),
                timestamp: -1,
            }),
            OffsetSpec::MaxTimestamp => self
                .log
                .max_timestamp()
                .map(|t| self.exact(t.offset, t.timestamp, t.timestamp)),
            OffsetSpec::Timestamp(ts) => self
                .log
                .offset_for_timestamp(ts)
                .map(|t| self.exact(t.offset, t.timestamp, ts)),
        }
    }

    /// The log answers timestamp lookups exactly for uncompressed batches,
    /// but with the containing batch for compressed ones; this finds the
    /// exact record (first with timestamp >= `target`) in that batch.
    fn exact(&self, offset: u64, timestamp: i64, target: i64) -> OffsetAndTimestamp {
        let found = OffsetAndTimestamp { offset, timestamp };
        let Ok(slice) = self.log.read(offset, 1) else {
            return found;
        };
        let Some(Ok(batch)) = batch::batches(&slice.bytes).next() else {
            return found;
        };
        if BatchHeader::parse(batch).is_none_or(|h| h.compression() == 0) {
            return found;
        }
        records::first_at_or_after(batch, target).map_or(found, |(offset, timestamp)| {
            OffsetAndTimestamp { offset, timestamp }
        })
    }

    /// Number of producers with state on this partition.
    pub fn producer_count(&self) -> usize {
        self.producers.lock().len()
    }
}

/// Replays the batch headers in the log to recover each producer's epoch and
/// last batches, so retries after a restart are still recognised. Starts
/// from a snapshot when one is valid for this log.
fn rebuild_producer_state(
    log: &Log,
    snapshot: Option<(u64, HashMap<i64, ProducerEntry>)>,
) -> HashMap<i64, ProducerEntry> {
    let (mut producers, start) = match snapshot {
        Some((next_offset, state)) if next_offset <= log.high_watermark() => (state, next_offset),
        _ => (HashMap::new(), 0),
    };
    let mut offset = start.max(log.log_start_offset());
    while offset < log.high_watermark() {
        // A read can only fail if retention moved the start past `offset`
        // meanwhile; nothing earlier matters then.
        let Ok(slice) = log.read(offset, REBUILD_READ_BYTES) else {
            break;
        };
        if slice.bytes.is_empty() || slice.next_offset <= offset {
            break;
        }
        for header in batch::batches(&slice.bytes)
            .map_while(Result::ok)
            .filter_map(BatchHeader::parse)
        {
            if header.producer_id() < 0 || header.base_offset() < 0 {
                continue;
            }
            let first = header.base_sequence();
            producers.entry(header.producer_id()).or_default().record(
                header.producer_epoch(),
                BatchMetadata {
                    first_sequence: first,
                    last_sequence: last_sequence(first, header.records_count()),
                    base_offset: header.base_offset() as u64,
                    last_offset: header.last_offset().max(0) as u64,
                },
            );
        }
        offset = slice.next_offset;
    }
    producers
}
