//! Reading one partition of a cut for a query: whole batches from the log
//! a megabyte at a time, between the offsets the pushed filters allow,
//! turned into Arrow batches of the columns the query reads. Batches whose
//! records all lie before the earliest timestamp allowed are skipped
//! without being decoded. A query on keys reads first, one by one, the
//! batches the key index names, then in full the part of the range the
//! index has not reached; before them, a block at a time, the runs of the
//! log's key-sorted copies holding the keys (segments whose batches are
//! then not named).

use std::collections::{BTreeSet, VecDeque};
use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use datafusion::arrow::datatypes::SchemaRef;
use datafusion::arrow::record_batch::RecordBatch;
use datafusion::error::DataFusionError;
use datafusion::execution::{SendableRecordBatchStream, TaskContext};
use datafusion::physical_plan::stream::RecordBatchStreamAdapter;
use datafusion::physical_plan::streaming::PartitionStream;
use futures::stream;
use herald_broker::{CopiedRecords, CopiedRun, ViewPartition};
use herald_records::{batches, RecordBatch as StoredBatch};

use crate::schema::RecordColumns;

/// Bytes read from the log at a time.
const READ_BYTES: usize = 1 << 20;
/// Bytes of a scan's first read; each next one doubles, up to
/// [`READ_BYTES`]: a read is decoded whole before its rows go on, so a
/// small one first brings the first rows sooner.
const FIRST_READ_BYTES: usize = 64 << 10;
/// Rows per Arrow batch, at most.
const ROWS_PER_BATCH: usize = 8192;
/// Rows of a scan's first Arrow batch; each next one doubles, up to
/// [`ROWS_PER_BATCH`]: the first rows of an answer go out without waiting
/// for thousands more.
const FIRST_BATCH_ROWS: usize = 64;
/// Record bytes per Arrow batch, about: large records make small batches,
/// so a scan never holds much more than this (a megabyte read may
/// decompress into far more).
const BYTES_PER_BATCH: usize = 8 << 20;

/// The bytes a query may read from logs, shared by its scans.
#[derive(Debug)]
pub(crate) struct ScanBudget {
    limit: u64,
    used: AtomicU64,
}

impl ScanBudget {
    pub(crate) fn new(limit: u64) -> Arc<Self> {
        Arc::new(Self {
            limit,
            used: AtomicU64::new(0),
        })
    }

    fn charge(&self, bytes: usize) -> Result<(), DataFusionError> {
        let used = self.used.fetch_add(bytes as u64, Ordering::Relaxed) + bytes as u64;
        if used > self.limit {
            return Err(DataFusionError::ResourcesExhausted(format!(
                "the query read more than its limit of {} bytes from the logs",
                self.limit
            )));
        }
        Ok(())
    }
}

/// One partition of a cut, as a stream of Arrow batches.
pub(crate) struct PartitionScan {
    pub(crate) view: ViewPartition,
    /// First offset to read.
    pub(crate) from: u64,
    /// Offset to stop before.
    pub(crate) to: u64,
    /// The batches to read one by one before the bulk read (those the key
    /// index names), each by the last offset worth reading in it,
    /// ascending.
    pub(crate) batches: Vec<u64>,
    /// Where the bulk read starts: `from`, or for a key query where the
    /// key index stops.
    pub(crate) bulk_from: u64,
    /// For a key query, the runs of key-sorted copies holding the keys'
    /// records (segments whose batches are not named above), read first,
    /// a block at a time.
    pub(crate) copied: Vec<CopiedRun>,
    /// The keys a row must have to match (the query's filters allow no
    /// other): rows with another key are not built at all.
    pub(crate) keys: Option<Arc<BTreeSet<Vec<u8>>>>,
    /// Earliest timestamp (ms) a row may have to match.
    pub(crate) time_from: i64,
    /// Latest timestamp (ms) a row may have to match.
    pub(crate) time_to: i64,
    pub(crate) projection: Vec<usize>,
    /// The topic schema projected.
    pub(crate) schema: SchemaRef,
    pub(crate) budget: Arc<ScanBudget>,
}

impl fmt::Debug for PartitionScan {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PartitionScan")
            .field("partition", &self.view.index())
            .field("from", &self.from)
            .field("to", &self.to)
            .field("batches", &self.batches.len())
            .field("bulk_from", &self.bulk_from)
            .field("time_from", &self.time_from)
            .finish_non_exhaustive()
    }
}

struct Cursor {
    view: ViewPartition,
    next: u64,
    to: u64,
    batches: VecDeque<u64>,
    bulk_from: u64,
    /// Runs of key-sorted copies not read yet.
    copied: VecDeque<CopiedRun>,
    /// The records of the block last read from a run.
    copied_block: CopiedRecords,
    keys: Option<Arc<BTreeSet<Vec<u8>>>>,
    /// Rows the next Arrow batch holds at most.
    batch_rows: usize,
    /// Bytes the next bulk read asks for.
    read_bytes: usize,
    /// Bytes read since the scan last let other tasks run.
    unyielded: usize,
    time_from: i64,
    time_to: i64,
    partition: i32,
    columns: RecordColumns,
    scratch: Vec<u8>,
    budget: Arc<ScanBudget>,
    /// Batches built and not yet handed on.
    ready: VecDeque<RecordBatch>,
    done: bool,
}

impl PartitionStream for PartitionScan {
    fn schema(&self) -> &SchemaRef {
        &self.schema
    }

    fn execute(&self, _ctx: Arc<TaskContext>) -> SendableRecordBatchStream {
        let cursor = Cursor {
            view: self.view.clone(),
            next: self.from,
            to: self.to,
            batches: self.batches.iter().copied().collect(),
            bulk_from: self.bulk_from,
            copied: self.copied.iter().cloned().collect(),
            copied_block: CopiedRecords::default(),
            keys: self.keys.clone(),
            batch_rows: FIRST_BATCH_ROWS,
            read_bytes: FIRST_READ_BYTES,
            unyielded: 0,
            time_from: self.time_from,
            time_to: self.time_to,
            partition: i32::try_from(self.view.index()).unwrap_or(i32::MAX),
            columns: RecordColumns::new(&self.projection, Arc::clone(&self.schema)),
            scratch: Vec::new(),
            budget: Arc::clone(&self.budget),
            ready: VecDeque::new(),
            done: self.from >= self.to,
        };
        let batches = stream::unfold(cursor, |mut cursor| async move {
            loop {
                if let Some(batch) = cursor.ready.pop_front() {
                    return Some((Ok(batch), cursor));
                }
                if cursor.done {
                    return None;
                }
                match cursor.read_some() {
                    Ok(()) => {
                        // Other queries and the request runtime get the
                        // thread between megabytes read (not after every
                        // batch a key lookup reads one by one).
                        if cursor.unyielded >= READ_BYTES {
                            cursor.unyielded = 0;
                            tokio::task::yield_now().await;
                        }
                    }
                    Err(e) => {
                        cursor.done = true;
                        return Some((Err(e), cursor));
                    }
                }
            }
        });
        Box::pin(RecordBatchStreamAdapter::new(
            Arc::clone(&self.schema),
            batches,
        ))
    }
}

impl Cursor {
    /// Reads up to a megabyte of the log, queueing a batch whenever
    /// enough rows or bytes are built, and the rest once the range is read.
    fn read_some(&mut self) -> Result<(), DataFusionError> {
        if !self.copied.is_empty() {
            return self.read_copied();
        }
        // The next batch the key index named, read up to the last offset
        // named in it (one byte: a read answers at least the whole batch
        // holding its offset), or the bulk read. `next` only grows, so no
        // record is read twice.
        while self.batches.front().is_some_and(|&last| last < self.next) {
            self.batches.pop_front();
        }
        let (at, max_bytes, mut stop) = match self.batches.pop_front() {
            Some(last) if last < self.bulk_from => (last, 1, Some(last)),
            _ => {
                self.batches.clear();
                self.next = self.next.max(self.bulk_from);
                let bytes = self.read_bytes;
                self.read_bytes = (bytes * 2).min(READ_BYTES);
                (self.next, bytes, None)
            }
        };
        if at >= self.to {
            self.done = true;
            return self.flush();
        }
        // A batch read whole (its records out of order) moves `next` past
        // it rather than past the offset named.
        let mut whole = false;
        let read = self
            .view
            .read_before(at, max_bytes, self.to)
            .map_err(|e| DataFusionError::External(Box::new(e)))?;
        if read.bytes.is_empty() {
            self.done = true;
            return self.flush();
        }
        self.budget.charge(read.bytes.len())?;
        self.unyielded += read.bytes.len();
        for batch in batches(&read.bytes) {
            let batch = StoredBatch::new(batch.map_err(external)?).map_err(external)?;
            let header = batch.header();
            if header.is_control()
                || header.last_offset() < self.next as i64
                || header.max_timestamp() < self.time_from
            {
                continue;
            }
            if header.base_offset() >= self.to as i64 {
                break;
            }
            let records = match &mut stop {
                Some(stop) => {
                    // Other offsets named in this batch (other keys): read
                    // up to the last of them at once.
                    while let Some(&last) = self.batches.front() {
                        if last > header.last_offset().max(0) as u64 || last >= self.bulk_from {
                            break;
                        }
                        *stop = (*stop).max(last);
                        self.batches.pop_front();
                    }
                    batch.records_through(&mut self.scratch, *stop as i64)
                }
                None => batch.records(&mut self.scratch),
            };
            // Records numbered out of order (a client's doing: the broker
            // does not check each delta) are read whole, as no offset
            // bounds the rest.
            let base = header.base_offset();
            let mut in_order = true;
            for (position, record) in records.map_err(external)?.enumerate() {
                let record = record.map_err(external)?;
                in_order &= record.offset == base.saturating_add(position as i64);
                if record.offset < self.next as i64 {
                    continue;
                }
                if record.offset >= self.to as i64
                    || (in_order && stop.is_some_and(|stop| record.offset > stop as i64))
                {
                    break;
                }
                // The pushed filters are applied here exactly (DataFusion
                // does not apply them again): outside the time range, or
                // with another key, a record does not match.
                if record.timestamp < self.time_from || record.timestamp > self.time_to {
                    continue;
                }
                if let Some(keys) = &self.keys {
                    if !record.key.is_some_and(|key| keys.contains(key)) {
                        continue;
                    }
                }
                self.columns.push(self.partition, &record)?;
                if self.columns.rows() >= self.batch_rows || self.columns.bytes() >= BYTES_PER_BATCH
                {
                    // Not `flush`: the records still borrow `scratch`.
                    self.ready.push_back(self.columns.finish()?);
                    self.batch_rows = (self.batch_rows * 2).min(ROWS_PER_BATCH);
                }
            }
            if !in_order {
                whole = true;
            }
        }
        self.next = match stop {
            // Nothing of the keys in that batch lies past the last offset
            // named in it.
            Some(stop) if !whole => self.next.max(stop + 1),
            _ => self.next.max(read.next_offset),
        };
        Ok(())
    }

    /// Reads the next block of the first copied run, answering its
    /// records that match.
    fn read_copied(&mut self) -> Result<(), DataFusionError> {
        let Some(run) = self.copied.front_mut() else {
            return Ok(());
        };
        self.copied_block.clear();
        let inflated = run
            .read_block(&mut self.copied_block, &mut self.scratch)
            .map_err(external)?;
        if run.is_done() {
            self.copied.pop_front();
        }
        self.budget.charge(inflated)?;
        self.unyielded += inflated;
        let block = std::mem::take(&mut self.copied_block);
        for copy in block.iter() {
            if copy.timestamp < self.time_from || copy.timestamp > self.time_to {
                continue;
            }
            if let Some(keys) = &self.keys {
                if !keys.contains(copy.key) {
                    continue;
                }
            }
            self.columns.push(self.partition, &copy.record())?;
            if self.columns.rows() >= self.batch_rows || self.columns.bytes() >= BYTES_PER_BATCH {
                self.ready.push_back(self.columns.finish()?);
                self.batch_rows = (self.batch_rows * 2).min(ROWS_PER_BATCH);
            }
        }
        self.copied_block = block;
        if self.copied.is_empty() && self.batches.is_empty() && self.bulk_from >= self.to {
            self.done = true;
            return self.flush();
        }
        Ok(())
    }

    fn flush(&mut self) -> Result<(), DataFusionError> {
        if self.columns.rows() > 0 {
            self.ready.push_back(self.columns.finish()?);
        }
        Ok(())
    }
}

fn external(e: impl std::error::Error + Send + Sync + 'static) -> DataFusionError {
    DataFusionError::External(Box::new(e))
}
