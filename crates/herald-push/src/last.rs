//! Where a subscription starts to deliver the last N records of each of
//! its subjects: found by reading back from the end of each partition in
//! windows that double, up to a bound.
//!
//! A literal subscription gets exactly its last N (or all of them, if the
//! subject has fewer within the bound). A pattern gets at least the last N
//! of every subject seen within the bound: it starts at the earliest of
//! those, so a subject published more often may arrive with more than N.

use std::collections::{HashMap, VecDeque};

use herald_broker::{Partition, StorageError};
use herald_subjects::Selector;

use crate::batches::decode;

/// Records read back, at most, per partition.
pub const LAST_SCAN_RECORDS_MAX: u64 = 4 * 1024 * 1024;
/// Records of the first window read back.
const FIRST_WINDOW: u64 = 4096;
/// Bytes asked of the log per read while scanning.
const SCAN_READ_BYTES: usize = 4 * 1024 * 1024;
/// Distinct subjects a pattern's scan keeps positions for; past it, the
/// scan stops widening (and starts at the earliest it has).
const SUBJECTS_MAX: usize = 100_000;

/// The offset of `partition` from which a subscription with `selector`
/// receives the last `n` records of each subject.
pub(crate) async fn start_for_last(
    partition: &Partition,
    selector: &Selector,
    n: u32,
) -> Result<u64, StorageError> {
    let watermarks = partition.watermarks();
    let (start, end) = (watermarks.log_start_offset, watermarks.high_watermark);
    if n == 0 || end == start {
        return Ok(end);
    }
    let n = n as usize;
    let mut window = FIRST_WINDOW;
    loop {
        let from = end.saturating_sub(window).max(start);
        let last = last_offsets(partition, selector, from, end, n).await?;
        let exhausted = from == start || end - from >= LAST_SCAN_RECORDS_MAX;
        let enough = match selector {
            // One subject: done once it has n records in the window.
            Selector::Literal(_) => last.values().next().is_some_and(|q| q.len() >= n),
            // A pattern: only the bound or the log's start ends the scan,
            // unless it found too many subjects to keep widening.
            Selector::Pattern(_) => last.len() >= SUBJECTS_MAX,
        };
        if enough || exhausted {
            // Every subject's oldest kept offset; for those with fewer than
            // n within the window, the window's start covers them all.
            let earliest = last
                .values()
                .map(|q| {
                    if q.len() >= n {
                        q.front().copied().unwrap_or(end)
                    } else {
                        from
                    }
                })
                .min();
            return Ok(earliest.unwrap_or(end));
        }
        window = window.saturating_mul(2);
    }
}

/// For each matching subject in `[from, end)`, the offsets of its last `n`
/// records, oldest first.
async fn last_offsets(
    partition: &Partition,
    selector: &Selector,
    from: u64,
    end: u64,
    n: usize,
) -> Result<HashMap<Vec<u8>, VecDeque<u64>>, StorageError> {
    let mut last: HashMap<Vec<u8>, VecDeque<u64>> = HashMap::new();
    let mut next = from;
    while next < end {
        let stored = match partition.read(next, SCAN_READ_BYTES).await {
            Ok(stored) => stored,
            // Retention moved the start meanwhile: scan what is left.
            Err(StorageError::OffsetOutOfRange {
                log_start_offset, ..
            }) if next < log_start_offset => {
                next = log_start_offset;
                continue;
            }
            Err(e) => return Err(e),
        };
        if stored.bytes.is_empty() {
            break;
        }
        for batch in decode(&stored.bytes) {
            let Ok(batch) = batch else { break };
            for record in batch.records() {
                let Ok(record) = record else { break };
                let offset = u64::try_from(record.offset).unwrap_or(0);
                if offset < next || offset >= end {
                    continue;
                }
                let Some(key) = record.key else { continue };
                if !selector.matches(key) {
                    continue;
                }
                if !last.contains_key(key) && last.len() >= SUBJECTS_MAX {
                    continue;
                }
                let queue = last.entry(key.to_vec()).or_default();
                if queue.len() == n {
                    queue.pop_front();
                }
                queue.push_back(offset);
            }
        }
        next = stored.next_offset;
    }
    Ok(last)
}
