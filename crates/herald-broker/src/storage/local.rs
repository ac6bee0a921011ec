//! The embedded backend: one lock-free [`Log`] on this node's disk. The fast
//! path: an append is the log's lock-free write, a read is a zero-copy
//! slice of the mapped segment, and nothing here allocates per call.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::SystemTime;

use herald_log::{AppendError, ConfigError, Log, LogConfig, LogError, ReadError, TruncateError};

use super::{
    Acks, Appended, PartitionStorage, PendingAppend, StorageError, StorageStats, StoredBatches,
    TimestampOffset, ValidBatch, Watermarks,
};

/// A partition stored in a local [`Log`].
#[derive(Debug)]
pub struct LocalStorage {
    log: Arc<Log>,
}

/// Completes a local append: at once, or when its group-commit fsync is done.
#[derive(Debug)]
pub struct LocalCompletion {
    appended: Appended,
    state: LocalFlush,
}

/// Where a local append's durability stands.
#[derive(Debug)]
enum LocalFlush {
    /// Durable as asked already (or failed while flushing inline).
    Ready(Option<Result<(), StorageError>>),
    /// An fsync running on the runtime's blocking pool.
    Flushing(tokio::task::JoinHandle<Result<(), AppendError>>),
}

impl Future for LocalCompletion {
    type Output = Result<Appended, StorageError>;

    #[inline]
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.get_mut();
        let appended = this.appended;
        let flushed = match &mut this.state {
            LocalFlush::Ready(result) => Poll::Ready(result.take().unwrap_or(Ok(()))),
            LocalFlush::Flushing(join) => Pin::new(join).poll(cx).map(|joined| match joined {
                Ok(flushed) => flushed.map_err(append_error),
                Err(join) => Err(StorageError::Failed(
                    format!("flush task failed: {join}").into(),
                )),
            }),
        };
        flushed.map(|result| result.map(|()| appended))
    }
}

impl LocalStorage {
    /// Opens (recovering) or creates the log in `dir`.
    pub fn open(dir: &std::path::Path, config: LogConfig) -> Result<Self, LogError> {
        Ok(Self {
            log: Arc::new(Log::open(dir, config)?),
        })
    }

    /// The log itself, for what only the embedded backend does (rebuilding
    /// producer state at open).
    pub(crate) fn log(&self) -> &Log {
        &self.log
    }

    /// The log, shared: a mirrored partition's copier writes to it.
    pub(crate) fn shared_log(&self) -> Arc<Log> {
        Arc::clone(&self.log)
    }

    /// Periodic upkeep: rolls, interval flushes, index files, retention.
    pub(crate) fn maintain(&self, now: SystemTime) -> Result<(), LogError> {
        self.log.maintain(now)
    }

    /// Applies a topic's changed settings.
    pub(crate) fn update_config(&self, config: LogConfig) -> Result<(), ConfigError> {
        self.log.update_config(config)
    }

    /// Flushes everything and closes the log cleanly.
    pub(crate) fn close(&self) -> Result<(), LogError> {
        self.log.close()
    }

    /// Stops the log without a flush: its files are about to be removed.
    pub(crate) fn retire(&self) {
        self.log.retire()
    }

    fn check_serving(&self) -> Result<(), StorageError> {
        match self.log.poisoned() {
            Some(reason) => Err(StorageError::Failed(reason)),
            None => Ok(()),
        }
    }
}

impl PartitionStorage for LocalStorage {
    type Completion = LocalCompletion;

    #[inline]
    fn max_batch_bytes(&self) -> usize {
        self.log.max_batch_bytes()
    }

    #[inline]
    fn append(
        &self,
        batch: ValidBatch<'_>,
        _acks: Acks,
    ) -> Result<PendingAppend<LocalCompletion>, StorageError> {
        // One node: every acks level is met once the batch is written; the
        // flush policy alone decides whether it waits for an fsync.
        let appended = self.log.append_unflushed(batch).map_err(append_error)?;
        let appended = Appended {
            base_offset: appended.base_offset,
            last_offset: appended.last_offset,
            max_timestamp: appended.max_timestamp,
        };
        let state = if self.log.flushes_every_append() {
            let end = appended.last_offset + 1;
            match tokio::runtime::Handle::try_current() {
                Ok(runtime) => {
                    let log = Arc::clone(&self.log);
                    LocalFlush::Flushing(runtime.spawn_blocking(move || log.flush_through(end)))
                }
                // Outside a runtime the caller may block: flush right here.
                Err(_) => {
                    LocalFlush::Ready(Some(self.log.flush_through(end).map_err(append_error)))
                }
            }
        } else {
            LocalFlush::Ready(None)
        };
        Ok(PendingAppend {
            appended: Some(appended),
            completion: LocalCompletion { appended, state },
        })
    }

    async fn read(
        &self,
        from_offset: u64,
        max_bytes: usize,
    ) -> Result<StoredBatches, StorageError> {
        self.check_serving()?;
        let slice = self.log.read(from_offset, max_bytes).map_err(read_error)?;
        if slice.bytes.is_empty() && self.log.is_closed() {
            // Nothing more will come: a reader woken by `wait_for_data`
            // learns that here instead of waking again at once.
            return Err(StorageError::Closed);
        }
        Ok(stored(slice))
    }

    async fn offset_for_timestamp(
        &self,
        timestamp: i64,
    ) -> Result<Option<TimestampOffset>, StorageError> {
        self.check_serving()?;
        Ok(self.log.offset_for_timestamp(timestamp).map(found))
    }

    async fn max_timestamp(&self) -> Result<Option<TimestampOffset>, StorageError> {
        self.check_serving()?;
        Ok(self.log.max_timestamp().map(found))
    }

    fn wait_for_data(&self, offset: u64) -> impl Future<Output = ()> + Send {
        self.log.wait_for_data(offset)
    }

    async fn truncate_before(&self, offset: u64) -> Result<u64, StorageError> {
        self.log.truncate_before(offset).map_err(|e| match e {
            TruncateError::OffsetOutOfRange {
                requested,
                high_watermark,
            } => StorageError::OffsetOutOfRange {
                requested,
                log_start_offset: self.log.log_start_offset(),
                high_watermark,
            },
            TruncateError::Pinned { requested, floor } => StorageError::Pinned { requested, floor },
            TruncateError::Storage(reason) => StorageError::Unavailable(reason),
            TruncateError::Poisoned(reason) => StorageError::Failed(reason),
            TruncateError::Closed => StorageError::Closed,
        })
    }

    fn watermarks(&self) -> Watermarks {
        // The high watermark first: the log start never passes it, so the
        // pair read in this order is never inverted.
        let high_watermark = self.log.high_watermark();
        Watermarks {
            log_start_offset: self.log.log_start_offset().min(high_watermark),
            high_watermark,
        }
    }

    #[inline]
    fn log_start_offset(&self) -> u64 {
        self.log.log_start_offset()
    }

    fn stats(&self) -> StorageStats {
        let copies = self.log.key_copy_stats();
        StorageStats {
            size_bytes: self.log.size_bytes(),
            segment_count: self.log.segment_count(),
            flushes: Some(self.log.flush_stats()),
            history_lag_records: self.log.history_lag(),
            key_copy_bytes: copies.bytes,
            key_copy_pending_segments: copies.pending_segments,
        }
    }

    fn failure(&self) -> Option<Arc<str>> {
        self.log.poisoned()
    }
}

/// A read of the log as the contract states it; the log start never above
/// the high watermark the read states.
pub(crate) fn stored(slice: herald_log::ReadSlice) -> StoredBatches {
    StoredBatches {
        bytes: slice.bytes,
        region: slice.region,
        next_offset: slice.next_offset,
        watermarks: Watermarks {
            log_start_offset: slice.log_start_offset.min(slice.high_watermark),
            high_watermark: slice.high_watermark,
        },
    }
}

/// A timestamp lookup's answer as the contract states it.
pub(crate) fn found(t: herald_log::TimestampOffset) -> TimestampOffset {
    TimestampOffset {
        offset: t.offset,
        timestamp: t.timestamp,
    }
}

fn append_error(e: AppendError) -> StorageError {
    match e {
        AppendError::TooLarge { size, max } => StorageError::TooLarge { size, max },
        AppendError::Poisoned(reason) => StorageError::Failed(reason),
        AppendError::Storage(reason) => StorageError::Unavailable(reason),
        AppendError::Closed => StorageError::Closed,
        // The contract takes validated batches only, and the log does not
        // validate them again; kept total rather than trusted. Nothing was
        // written, so the partition stays usable.
        AppendError::InvalidBatch(e) => StorageError::Unavailable(format!("{e}").into()),
    }
}

/// A refused read as the contract states it.
pub(crate) fn read_error(e: ReadError) -> StorageError {
    match e {
        ReadError::OffsetOutOfRange {
            requested,
            log_start_offset,
            high_watermark,
        } => StorageError::OffsetOutOfRange {
            requested,
            log_start_offset,
            high_watermark,
        },
    }
}

#[cfg(test)]
mod conformance_tests {
    //! The embedded log runs the partition contract's conformance suite,
    //! with each flush policy (every append completes through a group
    //! commit on the blocking pool; never completes at once).

    use herald_log::FlushPolicy;
    use tempfile::TempDir;

    use super::*;
    use crate::storage::conformance::{self, Harness};

    struct LocalHarness {
        flush: FlushPolicy,
        dirs: Vec<TempDir>,
    }

    impl LocalHarness {
        fn new(flush: FlushPolicy) -> Self {
            Self {
                flush,
                dirs: Vec::new(),
            }
        }

        fn config(&self) -> LogConfig {
            LogConfig {
                // Small segments, so reads and truncation cross segments.
                segment_bytes: 8 * 1024,
                max_batch_bytes: 8 * 1024,
                preallocate_bytes: 4096,
                flush: self.flush,
                ..LogConfig::default()
            }
        }
    }

    impl Harness for LocalHarness {
        type Storage = LocalStorage;

        fn create(&mut self) -> LocalStorage {
            let dir = tempfile::tempdir().expect("temp dir");
            let storage = LocalStorage::open(dir.path(), self.config()).expect("open");
            self.dirs.push(dir);
            storage
        }

        fn reopen(&mut self, storage: LocalStorage) -> LocalStorage {
            let dir = storage.log().dir().to_owned();
            storage.close().expect("close");
            drop(storage);
            LocalStorage::open(&dir, self.config()).expect("reopen")
        }
    }

    macro_rules! conformance {
        ($($check:ident),* $(,)?) => {
            mod flush_never {
                use super::*;
                $(
                    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                    async fn $check() {
                        conformance::$check(&mut LocalHarness::new(FlushPolicy::Never)).await;
                    }
                )*
            }
            mod flush_every_append {
                use super::*;
                $(
                    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                    async fn $check() {
                        conformance::$check(&mut LocalHarness::new(FlushPolicy::EveryAppend)).await;
                    }
                )*
            }
        };
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn reading_at_the_end_of_a_closed_log_says_closed() {
        let mut harness = LocalHarness::new(FlushPolicy::Never);
        let storage = harness.create();
        let batch = herald_records::testing::batch(3, b"v", 1_000);
        let valid = ValidBatch::new(&batch).expect("valid");
        storage.append(valid, Acks::Leader).expect("append");
        storage.close().expect("close");
        // Stored records still read; the end says the log is gone.
        assert!(!storage
            .read(0, 1 << 20)
            .await
            .expect("records")
            .bytes
            .is_empty());
        assert_eq!(storage.read(3, 1 << 20).await, Err(StorageError::Closed));
        storage.wait_for_data(3).await;
    }

    conformance!(
        appends_get_consecutive_offsets_and_read_back_as_stored,
        reads_are_bounded_by_their_own_high_watermark,
        reads_outside_the_stored_range_are_out_of_range,
        a_read_returns_whole_batches_and_at_least_one,
        waiting_for_data_resolves_when_an_append_lands,
        timestamps_find_the_first_record_at_or_after,
        truncation_moves_the_log_start_and_never_back,
        acknowledged_appends_survive_a_reopen,
        an_oversized_batch_is_refused_and_nothing_is_placed,
    );

    #[test]
    fn appends_outside_a_runtime_flush_inline() {
        let mut harness = LocalHarness::new(FlushPolicy::EveryAppend);
        let storage = harness.create();
        let bytes = herald_records::testing::batch(2, b"v", 1_000);
        let valid = ValidBatch::new(&bytes).expect("valid");
        let pending = storage.append(valid, Acks::All).expect("placed");
        assert!(matches!(
            pending.completion.state,
            LocalFlush::Ready(Some(Ok(())))
        ));
        assert!(storage.stats().flushes.is_some_and(|f| f.count() >= 1));
    }
}
