//! The internal partition that makes the coordinator durable:
//! `<data-dir>/__consumer_offsets-0/`, a [`herald_log::Log`] flushed on every
//! append. Each [`Output::Persist`](herald_group::Output::Persist) becomes one
//! uncompressed RecordBatch v2 whose record values are the encoded
//! [`Record`]s; at start-up every record is read back, in order, for
//! [`GroupCoordinator::replay`](herald_group::GroupCoordinator::replay).
//!
//! Every commit adds a record, so the partition grows without bound while
//! what a restart needs is only the last offset of each partition of each
//! group. `compact` rewrites it: the coordinator's current state
//! ([`GroupCoordinator::snapshot_records`](herald_group::GroupCoordinator::snapshot_records))
//! is written to `__consumer_offsets-0.compacting/` and fsynced, then the two
//! directories are exchanged in one atomic `renameat2(RENAME_EXCHANGE)` and
//! the old one is removed. A crash at any point leaves a complete partition
//! under the real name; whatever is left under `.compacting` (an unfinished
//! rewrite, or the old partition after the exchange) is removed at open.

use std::path::{Path, PathBuf};

use herald_group::Record;
use herald_log::{AppendError, FlushPolicy, Log, LogConfig};
use herald_records::{batches, BatchBuilder, EncodeError, RecordBatch, RecordFields};

use crate::error::BrokerError;

/// Name of the internal topic holding committed offsets (Kafka's name).
pub const OFFSETS_TOPIC: &str = "__consumer_offsets";

/// Segment size of the offsets partition: records are small and the whole
/// partition is replayed at start-up.
const SEGMENT_BYTES: u32 = 16 * 1024 * 1024;

/// Bytes read from the log per step of the replay.
const REPLAY_READ_BYTES: usize = 1024 * 1024;

/// Directory of the offsets partition.
pub(crate) fn dir(data_dir: &Path) -> PathBuf {
    crate::topic::partition_dir(data_dir, OFFSETS_TOPIC, 0)
}

/// Directory a compaction writes to before the exchange.
fn compacting_dir(data_dir: &Path) -> PathBuf {
    let mut name = dir(data_dir).into_os_string();
    name.push(".compacting");
    PathBuf::from(name)
}

/// Records per batch when rewriting the partition.
const COMPACT_BATCH_RECORDS: usize = 1024;

fn log_error(source: herald_log::LogError) -> BrokerError {
    BrokerError::Log {
        topic: OFFSETS_TOPIC.to_owned(),
        partition: 0,
        source,
    }
}

/// Opens (recovering) the offsets partition: fsync on every append, and no
/// retention (compaction, not age or size, decides which records go). A
/// rewrite a crash interrupted is removed first.
pub(crate) fn open(data_dir: &Path) -> Result<Log, BrokerError> {
    crate::partition_dirs::remove_if_present(&compacting_dir(data_dir))?;
    Log::open(dir(data_dir), log_config()).map_err(log_error)
}

fn log_config() -> LogConfig {
    LogConfig {
        segment_bytes: SEGMENT_BYTES,
        segment_age: None,
        flush: FlushPolicy::EveryAppend,
        retention_age: None,
        retention_bytes: None,
        ..LogConfig::default()
    }
}

/// Rewrites the partition as `records` (the coordinator's whole state) and
/// returns the log to use from now on, with `current` closed. An error
/// while writing the rewrite leaves `current` open and in use (and removes
/// the partial rewrite); once `current` is closed, whichever partition is
/// under the real name is complete and is reopened.
pub(crate) fn compact(
    data_dir: &Path,
    current: &Log,
    records: &[Record],
    now_ms: i64,
) -> Result<Log, BrokerError> {
    let target = compacting_dir(data_dir);
    crate::partition_dirs::remove_if_present(&target)?;
    let rewritten = (|| {
        let log = Log::open(&target, log_config()).map_err(log_error)?;
        for chunk in records.chunks(COMPACT_BATCH_RECORDS) {
            append(&log, chunk, now_ms).map_err(|e| {
                BrokerError::io(
                    "rewrite offsets partition",
                    &target,
                    std::io::Error::other(e),
                )
            })?;
        }
        log.close().map_err(log_error)
    })();
    if let Err(e) = rewritten {
        let _ = std::fs::remove_dir_all(&target);
        return Err(e);
    }
    // From here the old partition must not change: its last appends are in
    // `records` already (the caller's coordinator applied them).
    current.close().map_err(log_error)?;
    let live = dir(data_dir);
    if let Err(e) =
        exchange(&target, &live).and_then(|()| crate::metadata_store::sync_dir(data_dir))
    {
        // Whichever partition is live is complete: carry on with it.
        tracing::error!(error = %e, "swapping in the compacted offsets partition failed");
    }
    if let Err(e) = std::fs::remove_dir_all(&target) {
        // Removed at the next open.
        tracing::warn!(dir = %target.display(), error = %e, "removing the old offsets partition failed");
    }
    Log::open(&live, log_config()).map_err(log_error)
}

/// Swaps two directories atomically.
fn exchange(a: &Path, b: &Path) -> Result<(), BrokerError> {
    use std::os::unix::ffi::OsStrExt;
    let c_path = |p: &Path| {
        std::ffi::CString::new(p.as_os_str().as_bytes())
            .map_err(|e| BrokerError::io("exchange", p, std::io::Error::other(e)))
    };
    let (ca, cb) = (c_path(a)?, c_path(b)?);
    // SAFETY: both are valid NUL-terminated paths; renameat2 only reads them.
    let rc = unsafe {
        libc::renameat2(
            libc::AT_FDCWD,
            ca.as_ptr(),
            libc::AT_FDCWD,
            cb.as_ptr(),
            libc::RENAME_EXCHANGE,
        )
    };
    if rc != 0 {
        return Err(BrokerError::io(
            "exchange",
            b,
            std::io::Error::last_os_error(),
        ));
    }
    Ok(())
}

/// Reads every record of the partition, in offset order, and hands each to
/// `apply`. A batch or record that cannot be decoded stops the start: a
/// coordinator that silently lost commits would be worse than one that does
/// not start.
pub(crate) fn replay(log: &Log, apply: impl FnMut(Record)) -> Result<u64, BrokerError> {
    replay_until(log, u64::MAX, apply)
}

/// [`replay`] of the records below `visible_end` only (a replicated
/// offsets partition's commit point). Control batches (Raft's own entries
/// in a replicated partition) hold no records of the coordinator and are
/// skipped.
pub(crate) fn replay_until(
    log: &Log,
    visible_end: u64,
    apply: impl FnMut(Record),
) -> Result<u64, BrokerError> {
    replay_between(log, 0, visible_end, apply)
}

/// [`replay_until`] from `from` on (or the log start if later): a
/// replicated offsets partition whose readers start past its stored
/// records (a compaction's delete, not yet purged).
pub(crate) fn replay_between(
    log: &Log,
    from: u64,
    visible_end: u64,
    mut apply: impl FnMut(Record),
) -> Result<u64, BrokerError> {
    let corrupt = |offset: u64, reason: String| BrokerError::CorruptMetadata {
        path: log.dir().to_path_buf(),
        reason: format!("offsets partition at offset {offset}: {reason}"),
    };
    let end = log.high_watermark().min(visible_end);
    let mut offset = log.log_start_offset().max(from);
    let mut count = 0u64;
    while offset < end {
        let slice = log
            .read_visible(offset, REPLAY_READ_BYTES, end)
            .map_err(|e| corrupt(offset, e.to_string()))?;
        if slice.next_offset <= offset {
            break;
        }
        for batch in batches(&slice.bytes) {
            let batch = batch.map_err(|e| corrupt(offset, e.to_string()))?;
            let control = RecordBatch::new(batch)
                .map_err(|e| corrupt(offset, e.to_string()))?
                .header()
                .is_control();
            if control {
                continue;
            }
            for value in record_values(batch).map_err(|reason| corrupt(offset, reason))? {
                let record =
                    Record::decode(value).map_err(|e| corrupt(offset, format!("record: {e}")))?;
                apply(record);
                count += 1;
            }
        }
        offset = slice.next_offset;
    }
    Ok(count)
}

/// Appends `records` as one batch; returns once it is on stable storage.
pub(crate) fn append(log: &Log, records: &[Record], now_ms: i64) -> Result<(), AppendError> {
    let values: Vec<Vec<u8>> = records.iter().map(Record::encode).collect();
    let batch = match encode_batch(&values, now_ms) {
        Ok(batch) => batch,
        Err(EncodeError::Empty) => return Ok(()),
        Err(EncodeError::TooLarge | EncodeError::Compression(_)) => {
            return Err(AppendError::TooLarge {
                size: values.iter().map(Vec::len).sum(),
                max: i32::MAX as usize,
            })
        }
    };
    log.append(&batch).map(|_| ())
}

/// Encodes an uncompressed RecordBatch v2 holding one record per value (no
/// key, no headers), every record stamped `timestamp`. The log assigns the
/// base offset when appending.
pub(crate) fn encode_batch(values: &[Vec<u8>], timestamp: i64) -> Result<Vec<u8>, EncodeError> {
    let mut builder = BatchBuilder::new(timestamp);
    for value in values {
        builder.push(RecordFields {
            timestamp_ms: timestamp,
            value: Some(value),
            ..RecordFields::default()
        });
    }
    builder.finish()
}

/// The record values of one uncompressed batch, in order.
fn record_values(batch: &[u8]) -> Result<Vec<&[u8]>, String> {
    let batch = RecordBatch::new(batch).map_err(|e| e.to_string())?;
    let codec = batch.header().compression();
    let records = batch
        .records_in_place()
        .ok_or_else(|| format!("compressed batch (codec {codec})"))?;
    records
        .map(|record| {
            record
                .map_err(|e| e.to_string())?
                .value
                .ok_or_else(|| "null record value".to_owned())
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn committed(offset: i64) -> Record {
        Record::OffsetCommitted {
            group_id: "g".into(),
            topic: "orders".into(),
            partition: 3,
            offset,
            leader_epoch: Some(0),
            metadata: "meta".into(),
            commit_timestamp_ms: 1_000,
        }
    }

    #[test]
    fn encoded_batch_passes_the_log_validation_and_carries_each_value() {
        let values = vec![b"one".to_vec(), Vec::new(), vec![7u8; 300]];
        let batch = encode_batch(&values, 42).expect("three values");
        let header = herald_records::validate(&batch).expect("valid batch");
        assert_eq!(header.records_count(), 3);
        assert_eq!(header.max_timestamp(), 42);
        let decoded = record_values(&batch).expect("values");
        assert_eq!(decoded, vec![&b"one"[..], &[][..], &[7u8; 300][..]]);
    }

    #[test]
    fn appended_records_are_replayed_in_order_after_reopening() {
        let dir = tempfile::tempdir().expect("tempdir");
        let log = open(dir.path()).expect("open");
        append(&log, &[committed(1), committed(2)], 5).expect("append");
        append(&log, &[committed(3)], 6).expect("append");
        log.close().expect("close");
        let log = open(dir.path()).expect("reopen");
        let mut seen = Vec::new();
        let count = replay(&log, |r| seen.push(r)).expect("replay");
        assert_eq!(count, 3);
        assert_eq!(seen, vec![committed(1), committed(2), committed(3)]);
    }
}
