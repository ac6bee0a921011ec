//! Retention by size and time, and the age roll.

mod common;

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use common::{decode, read_all, small_config, tagged_batch};
use herald_log::{Log, LogConfig, ReadError};

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64
}

#[test]
fn retention_by_size_deletes_the_oldest_whole_segments() {
    let dir = tempfile::tempdir().unwrap();
    let config = LogConfig {
        retention_bytes: Some(40 * 1024),
        ..small_config()
    };
    let log = Log::open(dir.path(), config).unwrap();
    for tag in 0..1000 {
        log.append(&tagged_batch(2, tag, now_ms())).unwrap();
    }
    let segments_before = log.segment_count();
    log.maintain(SystemTime::now()).unwrap();
    assert!(log.segment_count() < segments_before);
    assert!(
        log.size_bytes() >= 40 * 1024,
        "never below the limit: {}",
        log.size_bytes()
    );
    assert!(
        log.size_bytes() < 40 * 1024 + 16 * 1024,
        "at most one segment above it"
    );
    let start = log.log_start_offset();
    assert!(start > 0);
    // What remains is the newest suffix, still dense.
    let rest = read_all(&log, start, 1 << 20);
    assert_eq!(rest.first().unwrap().0, start);
    assert_eq!(rest.last().unwrap().2, 999);
    assert!(matches!(
        log.read(0, 1024),
        Err(ReadError::OffsetOutOfRange { .. })
    ));
}

#[test]
fn retention_by_time_keeps_recent_segments() {
    let dir = tempfile::tempdir().unwrap();
    let config = LogConfig {
        retention_age: Some(Duration::from_secs(3600)),
        ..small_config()
    };
    let log = Log::open(dir.path(), config).unwrap();
    let old = now_ms() - 2 * 3600 * 1000;
    for tag in 0..500 {
        log.append(&tagged_batch(2, tag, old)).unwrap();
    }
    for tag in 500..600 {
        log.append(&tagged_batch(2, tag, now_ms())).unwrap();
    }
    log.maintain(SystemTime::now()).unwrap();
    let kept = read_all(&log, log.log_start_offset(), 1 << 20);
    let old_kept = kept.iter().filter(|&&(_, _, tag)| tag < 500).count();
    let per_segment = small_config().segment_bytes as usize / tagged_batch(2, 0, 0).len();
    // Only the segment that mixes old and new batches keeps old ones.
    assert!(old_kept > 0, "the segment mixing old and new stays");
    assert!(
        old_kept < per_segment,
        "whole old segments went: {old_kept} old batches kept"
    );
    assert_eq!(kept.last().unwrap().2, 599);
}

#[test]
fn a_reader_holding_a_deleted_segment_keeps_valid_bytes() {
    let dir = tempfile::tempdir().unwrap();
    let config = LogConfig {
        retention_bytes: Some(16 * 1024),
        ..small_config()
    };
    let log = Log::open(dir.path(), config).unwrap();
    for tag in 0..200 {
        log.append(&tagged_batch(2, tag, now_ms())).unwrap();
    }
    let held = log.read(0, 4096).unwrap();
    let before = decode(&held.bytes);
    for tag in 200..1000 {
        log.append(&tagged_batch(2, tag, now_ms())).unwrap();
    }
    log.maintain(SystemTime::now()).unwrap();
    assert!(log.log_start_offset() > 0, "the held segment was deleted");
    assert_eq!(decode(&held.bytes), before);
}

#[test]
fn an_old_active_segment_is_rolled_by_age() {
    let dir = tempfile::tempdir().unwrap();
    let config = LogConfig {
        segment_age: Some(Duration::from_secs(60)),
        ..small_config()
    };
    let log = Log::open(dir.path(), config).unwrap();
    log.maintain(SystemTime::now() + Duration::from_secs(120))
        .unwrap();
    assert_eq!(log.segment_count(), 1, "an empty segment is not rolled");
    log.append(&tagged_batch(2, 0, now_ms())).unwrap();
    log.maintain(SystemTime::now()).unwrap();
    assert_eq!(log.segment_count(), 1, "a young segment is not rolled");
    log.maintain(SystemTime::now() + Duration::from_secs(120))
        .unwrap();
    assert_eq!(log.segment_count(), 2);
    assert_eq!(
        log.append(&tagged_batch(2, 1, now_ms()))
            .unwrap()
            .base_offset,
        2
    );
    assert_eq!(read_all(&log, 0, 1 << 20).len(), 2);
}

#[test]
fn the_retention_cut_is_where_maintenance_would_move_the_log_start_and_moves_nothing() {
    let cut_dir = tempfile::tempdir().unwrap();
    let kept = Log::open(cut_dir.path(), small_config()).unwrap();
    let applied_dir = tempfile::tempdir().unwrap();
    let applied = Log::open(
        applied_dir.path(),
        LogConfig {
            retention_bytes: Some(40 * 1024),
            ..small_config()
        },
    )
    .unwrap();
    for tag in 0..1000 {
        kept.append(&tagged_batch(2, tag, now_ms())).unwrap();
        applied.append(&tagged_batch(2, tag, now_ms())).unwrap();
    }
    // Finalizes the sealed segments, as maintenance does before retention.
    kept.maintain(SystemTime::now()).unwrap();
    applied.maintain(SystemTime::now()).unwrap();
    let cut = kept
        .retention_cut(SystemTime::now(), None, Some(40 * 1024))
        .expect("past the size limit");
    assert_eq!(cut, applied.log_start_offset());
    assert_eq!(kept.log_start_offset(), 0, "nothing moved");
    assert_eq!(read_all(&kept, 0, 1 << 20).len(), 1000);
    assert_eq!(
        kept.retention_cut(SystemTime::now(), Some(Duration::from_secs(3600)), None),
        None,
        "no segment is an hour old"
    );
    let later = SystemTime::now() + Duration::from_secs(7200);
    let expired = kept
        .retention_cut(later, Some(Duration::from_secs(3600)), None)
        .expect("every sealed segment has expired two hours on");
    applied
        .update_config(LogConfig {
            retention_age: Some(Duration::from_secs(3600)),
            ..small_config()
        })
        .unwrap();
    applied.maintain(later).unwrap();
    assert_eq!(expired, applied.log_start_offset());
    assert_eq!(applied.segment_count(), 1, "the active segment stays");
}

#[test]
fn pinned_records_outlive_retention_and_truncation_until_released() {
    let dir = tempfile::tempdir().unwrap();
    let config = LogConfig {
        retention_bytes: Some(40 * 1024),
        ..small_config()
    };
    let log = Log::open(dir.path(), config).unwrap();
    for tag in 0..200 {
        log.append(&tagged_batch(2, tag, now_ms())).unwrap();
    }
    let pinned = log.pin_log_start();
    assert_eq!(pinned, 0);
    assert_eq!(log.retention_floor(), Some(0));
    let cut = log.reserved_end();
    assert_eq!(cut, log.high_watermark(), "nothing in flight");
    for tag in 200..1000 {
        log.append(&tagged_batch(2, tag, now_ms())).unwrap();
    }
    log.maintain(SystemTime::now()).unwrap();
    assert_eq!(
        log.log_start_offset(),
        0,
        "retention kept the pinned records"
    );
    let pinned_part = read_all(&log, 0, 1 << 20);
    assert_eq!(pinned_part.first().unwrap().0, 0);
    assert!(matches!(
        log.truncate_before(10),
        Err(herald_log::TruncateError::Pinned {
            requested: 10,
            floor: 0
        })
    ));
    // Released: retention catches up at once.
    log.set_retention_floor(None);
    log.maintain(SystemTime::now()).unwrap();
    assert!(log.log_start_offset() > 0);
    assert!(log.size_bytes() < 40 * 1024 + 16 * 1024);
    // A pin taken later holds from the start retention left.
    let start = log.pin_log_start();
    assert_eq!(start, log.log_start_offset());
    assert_eq!(
        log.truncate_before(start).unwrap(),
        start,
        "at the floor: allowed"
    );
}
