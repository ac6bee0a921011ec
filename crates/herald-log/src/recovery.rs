//! Opening a log directory after a clean stop or a crash.
//!
//! The checkpoint says up to which offset the log was known durable (the
//! recovery point). Segments are trusted through their index files when those
//! are intact; the last segment, and any segment whose index is missing or
//! damaged, is scanned batch by batch with every CRC checked.
//!
//! Where a scan stops early:
//! - at or after the recovery point, the rest is a torn tail (batches that
//!   were never acknowledged as durable): it is cut off, with every later
//!   segment, and the cut is reported;
//! - before the recovery point, data that was durable is damaged: opening
//!   fails with [`LogError::Corrupt`], and nothing is deleted.

use std::fs;
use std::path::{Path, PathBuf};

use memmap2::Mmap;

use crate::config::LogConfig;
use crate::error::LogError;
use crate::extent::Extent;
use crate::history::keys_file_name;
use crate::key_copy::key_copy_file_name;
use crate::persist::{Checkpoint, IndexFile};
use crate::segment::{index_file_name, log_file_name, Segment};
use crate::sync::Arc;
use herald_records::{BatchError, BatchHeader, BATCH_BYTES_MIN};

/// What recovery found and did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RecoveryReport {
    /// Segments kept.
    pub segments: usize,
    /// Batches whose CRC was checked.
    pub batches_scanned: u64,
    /// Bytes of torn tail cut off.
    pub bytes_truncated: u64,
    /// Later segments deleted because they followed a torn tail.
    pub segments_dropped: usize,
    /// Whether the previous run closed the log cleanly.
    pub clean: bool,
}

/// Segments of a recovered log, oldest first; the last one takes appends.
pub(crate) struct Recovered {
    pub(crate) segments: Vec<Arc<Segment>>,
    pub(crate) report: RecoveryReport,
}

/// How a scan of one segment ended.
struct Scan {
    end: Extent,
    /// Where and why the scan stopped before the end of the file's data;
    /// `None` if it reached the end or only zeroed (preallocated) space.
    stopped: Option<(u32, String)>,
    batches: u64,
}

fn io_err<'a>(op: &'static str, path: &'a Path) -> impl FnOnce(std::io::Error) -> LogError + 'a {
    move |source| LogError::io(op, path, source)
}

/// Base offsets of the segment files in `dir`, ascending.
fn segment_bases(dir: &Path, keep_copies: bool) -> Result<Vec<u64>, LogError> {
    let mut bases = Vec::new();
    for entry in fs::read_dir(dir).map_err(io_err("list", dir))? {
        let entry = entry.map_err(io_err("list", dir))?;
        let name = entry.file_name();
        let name = name.to_string_lossy();
        if name.ends_with(".tmp") || name.ends_with(".next") {
            // An interrupted atomic write (the old file is still in place), or
            // a prepared segment never used (it holds no data). In a process
            // that dropped a log of this directory a moment ago, the
            // provisioner may be removing that log's prepared segment at the
            // same time: already gone is as good as removed.
            match fs::remove_file(entry.path()) {
                Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                    return Err(io_err("remove", &entry.path())(e));
                }
                _ => {}
            }
        } else if let Some(stem) = name.strip_suffix(".log") {
            match stem.parse::<u64>() {
                Ok(base) if stem.len() == 20 => bases.push(base),
                _ => tracing::warn!(file = %name, "ignoring file that is not a segment"),
            }
        }
    }
    bases.sort_unstable();
    remove_orphan_indexes(dir, &bases, keep_copies)?;
    Ok(bases)
}

/// Deletes index files whose segment is gone (a crash while a segment was
/// deleted): a later segment of the same base must not take them. Deletes
/// every key-sorted copy unless `keep_copies` (the log keeps them no more),
/// and every copy of an active segment's stretch (made again as the
/// segment is indexed again).
fn remove_orphan_indexes(dir: &Path, bases: &[u64], keep_copies: bool) -> Result<(), LogError> {
    for entry in fs::read_dir(dir).map_err(io_err("list", dir))? {
        let entry = entry.map_err(io_err("list", dir))?;
        let name = entry.file_name();
        let name = name.to_string_lossy();
        if name
            .strip_suffix(crate::key_copy::PART_EXTENSION)
            .is_some_and(|stem| stem.ends_with('.'))
        {
            // A lookup may be deleting a damaged one meanwhile (truncation
            // runs this on a live log).
            match fs::remove_file(entry.path()) {
                Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                    return Err(io_err("remove", &entry.path())(e));
                }
                _ => {}
            }
            continue;
        }
        let copy = name.strip_suffix(".kcopy");
        let Some(stem) = name
            .strip_suffix(".index")
            .or_else(|| name.strip_suffix(".keys"))
            .or(copy)
        else {
            continue;
        };
        let orphan = stem.len() == 20
            && stem
                .parse::<u64>()
                .is_ok_and(|base| bases.binary_search(&base).is_err());
        if copy.is_some() && !keep_copies && !orphan {
            tracing::info!(file = %name, "deleting a key-sorted copy the log no longer keeps");
            fs::remove_file(entry.path()).map_err(io_err("remove", &entry.path()))?;
        } else if orphan {
            tracing::warn!(file = %name, "deleting an index whose segment is gone");
            fs::remove_file(entry.path()).map_err(io_err("remove", &entry.path()))?;
        }
    }
    Ok(())
}

/// Validates every batch of `data`, which should start at `base_offset`.
fn scan(data: &[u8], base_offset: u64) -> Scan {
    let mut end = Extent::default();
    let mut batches = 0;
    loop {
        let rest = &data[end.bytes as usize..];
        if rest.is_empty() {
            return Scan {
                end,
                stopped: None,
                batches,
            };
        }
        match validate_stored(rest, base_offset + u64::from(end.records)) {
            Ok((len, header)) => {
                end = Extent::new(end.records + header.offset_count(), end.bytes + len as u32);
                batches += 1;
            }
            Err(_) if rest.iter().all(|&b| b == 0) => {
                return Scan {
                    end,
                    stopped: None,
                    batches,
                }
            }
            Err(why) => {
                let reason = match why {
                    StoredBatchError::Truncated => "batch runs past the end of the file".to_owned(),
                    StoredBatchError::Invalid(e) => e.to_string(),
                    StoredBatchError::OffsetGap { expected, found } => {
                        format!("batch has base offset {found}, expected {expected}")
                    }
                };
                return Scan {
                    end,
                    stopped: Some((end.bytes, reason)),
                    batches,
                };
            }
        }
    }
}

fn map_file(path: &Path) -> Result<Option<Mmap>, LogError> {
    let file = fs::File::open(path).map_err(io_err("open", path))?;
    if file.metadata().map_err(io_err("stat", path))?.len() == 0 {
        return Ok(None);
    }
    // SAFETY: nothing else writes the file while the log is being opened
    // (one process owns a data directory).
    let map = unsafe { Mmap::map(&file) }.map_err(io_err("map", path))?;
    Ok(Some(map))
}

fn scan_file(path: &Path, base_offset: u64) -> Result<(Scan, u64), LogError> {
    let map = map_file(path)?;
    let data: &[u8] = map.as_deref().unwrap_or(&[]);
    Ok((scan(data, base_offset), data.len() as u64))
}

/// Loads an index file if it is intact and describes this segment file.
fn load_index(dir: &Path, base: u64, file_len: u64, config: &LogConfig) -> Option<IndexFile> {
    let index = IndexFile::read(&dir.join(index_file_name(base)))?;
    let consistent = index.base_offset == base
        && u64::from(index.end.bytes) <= file_len
        && index.interval_bytes == config.index_interval_bytes
        && index.entries.len()
            == crate::index::SegmentIndex::new(index.end.bytes, index.interval_bytes)
                .buckets_for(index.end.bytes);
    consistent.then_some(index)
}

/// Opens every segment of `dir`, recovering from a crash if needed.
pub(crate) fn recover(dir: &Path, config: &LogConfig) -> Result<Recovered, LogError> {
    fs::create_dir_all(dir).map_err(io_err("create", dir))?;
    let checkpoint = Checkpoint::read(dir);
    let bases = segment_bases(dir, config.key_copy)?;
    let mut report = RecoveryReport {
        clean: checkpoint.clean,
        ..RecoveryReport::default()
    };
    let mut segments: Vec<Arc<Segment>> = Vec::with_capacity(bases.len().max(1));
    let mut last: Option<(PathBuf, u64, Extent, Option<IndexFile>)> = None;

    for (i, &base) in bases.iter().enumerate() {
        let path = dir.join(log_file_name(base));
        if let Some(expected) = segments.last().map(|s| s.end_offset()) {
            if expected != base {
                if base <= checkpoint.recovery_point {
                    return Err(LogError::Corrupt {
                        path,
                        position: 0,
                        reason: format!(
                            "segment starts at offset {base}, previous one ends at {expected}"
                        ),
                    });
                }
                report.segments_dropped += drop_segments(dir, &bases[i..])?;
                break;
            }
        }
        let file_len = fs::metadata(&path).map_err(io_err("stat", &path))?.len();
        let is_last = i + 1 == bases.len();
        let index = load_index(dir, base, file_len, config);
        if let Some(index) = index.filter(|_| !is_last || checkpoint.clean) {
            if is_last {
                last = Some((path, base, index.end, Some(index)));
            } else {
                let segment =
                    Segment::open_sealed(&path, base, index.end, config.index_interval_bytes)
                        .map_err(io_err("open", &path))?;
                import_index(&segment, &index);
                segments.push(Arc::new(segment));
            }
            continue;
        }
        let (scan, data_len) = scan_file(&path, base)?;
        report.batches_scanned += scan.batches;
        let scanned_end_offset = base + u64::from(scan.end.records);
        if let Some((position, reason)) = &scan.stopped {
            if scanned_end_offset < checkpoint.recovery_point {
                return Err(LogError::Corrupt {
                    path,
                    position: u64::from(*position),
                    reason: reason.clone(),
                });
            }
            tracing::warn!(segment = %path.display(), position, %reason, "cutting torn tail");
        }
        let torn = scan.stopped.is_some();
        if torn {
            report.bytes_truncated += data_len - u64::from(scan.end.bytes);
        }
        if torn || is_last {
            report.segments_dropped += drop_segments(dir, &bases[i + 1..])?;
            last = Some((path, base, scan.end, None));
            break;
        }
        // A sealed segment that was never finalized: trim its preallocated
        // tail and write its index, so the next open trusts it.
        let segment = Segment::open_sealed(&path, base, scan.end, config.index_interval_bytes)
            .map_err(io_err("open", &path))?;
        rebuild_index(&segment, scan.end);
        segment
            .finalized
            .store(false, crate::sync::Ordering::Release);
        segments.push(Arc::new(segment));
    }

    let active = match last {
        Some((path, base, end, index)) => {
            let segment = Segment::reopen_active(
                &path,
                base,
                end,
                config.segment_bytes,
                config.index_interval_bytes,
                config.preallocate_bytes,
            )
            .map_err(io_err("open", &path))?;
            if u64::from(end.bytes) < segment.file().file_len().map_err(io_err("stat", &path))? {
                segment
                    .file()
                    .truncate(u64::from(end.bytes))
                    .map_err(io_err("truncate", &path))?;
            }
            match index {
                Some(index) => import_index(&segment, &index),
                None => rebuild_index(&segment, end),
            }
            // Appends will make the index file stale; if it survived a crash
            // it would be trusted once this segment is no longer the last.
            // (The log syncs the directory before its first append.)
            for name in [
                index_file_name(base),
                keys_file_name(base),
                key_copy_file_name(base),
            ] {
                let side = dir.join(name);
                if side.exists() {
                    fs::remove_file(&side).map_err(io_err("remove", &side))?;
                }
            }
            segment
        }
        None => {
            let base = segments.last().map_or(0, |s| s.end_offset());
            Segment::create(
                dir,
                base,
                config.segment_bytes,
                config.index_interval_bytes,
                config.preallocate_bytes,
            )
            .map_err(io_err("create", dir))?
        }
    };
    segments.push(Arc::new(active));
    report.segments = segments.len();
    Ok(Recovered { segments, report })
}

/// Loads an index file into a segment.
fn import_index(segment: &Segment, index: &IndexFile) {
    segment
        .index()
        .import(&index.entries, &index.max_timestamps);
    for &ts in &index.max_timestamps {
        segment.note_timestamp(ts);
    }
}

/// Re-indexes a segment by walking its (already verified) batch headers.
fn rebuild_index(segment: &Segment, end: Extent) {
    let mut at = Extent::default();
    while at.bytes < end.bytes {
        let header = segment.header_at(at.bytes);
        let len = header.total_bytes().unwrap_or(0) as u32;
        segment
            .index()
            .record(at.bytes, len, at.records, header.max_timestamp());
        segment.note_timestamp(header.max_timestamp());
        at = Extent::new(at.records + header.offset_count(), at.bytes + len);
    }
}

/// Deletes segment files (and their indexes) that follow a torn tail.
fn drop_segments(dir: &Path, bases: &[u64]) -> Result<usize, LogError> {
    for &base in bases {
        let path = dir.join(log_file_name(base));
        tracing::warn!(segment = %path.display(), "deleting segment after torn tail");
        for name in [
            index_file_name(base),
            keys_file_name(base),
            key_copy_file_name(base),
        ] {
            let side = dir.join(name);
            if side.exists() {
                fs::remove_file(&side).map_err(io_err("remove", &side))?;
            }
        }
        fs::remove_file(&path).map_err(io_err("remove", &path))?;
    }
    Ok(bases.len())
}

/// Reasons a stored batch fails the recovery scan.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum StoredBatchError {
    /// Fewer bytes remain than the batch needs: a torn write.
    Truncated,
    /// The header or the content does not check out.
    Invalid(BatchError),
    /// The base offset is not the one expected at this position.
    OffsetGap { expected: u64, found: i64 },
}

/// Validates a stored batch at the start of `bytes` (which may run on past
/// it): framing, CRC, and the expected base offset. Returns its size.
pub(crate) fn validate_stored(
    bytes: &[u8],
    expected_offset: u64,
) -> Result<(usize, BatchHeader<'_>), StoredBatchError> {
    let header = BatchHeader::parse(bytes).ok_or(StoredBatchError::Truncated)?;
    let total = match header.total_bytes() {
        Some(t) if t >= BATCH_BYTES_MIN => t,
        declared => {
            return Err(StoredBatchError::Invalid(BatchError::LengthMismatch {
                declared: declared.unwrap_or(0),
                actual: bytes.len(),
            }))
        }
    };
    if total > bytes.len() {
        return Err(StoredBatchError::Truncated);
    }
    let batch = &bytes[..total];
    if header.magic() != 2 {
        return Err(StoredBatchError::Invalid(BatchError::UnsupportedMagic {
            found: header.magic(),
        }));
    }
    let computed = BatchHeader::compute_crc(batch);
    if computed != header.crc() {
        return Err(StoredBatchError::Invalid(BatchError::CrcMismatch {
            expected: header.crc(),
            computed,
        }));
    }
    if header.last_offset_delta() < 0 {
        return Err(StoredBatchError::Invalid(BatchError::RecordCount {
            records_count: header.records_count(),
            last_offset_delta: header.last_offset_delta(),
        }));
    }
    if header.base_offset() != expected_offset as i64 {
        return Err(StoredBatchError::OffsetGap {
            expected: expected_offset,
            found: header.base_offset(),
        });
    }
    Ok((total, header))
}
