//! Moving the log start offset (Kafka's DeleteRecords): reads below it are
//! refused, whole segments below it are deleted by maintenance, and the new
//! start survives a restart. Cutting the tail and resetting the log (what a
//! replicated partition does when its leader disagrees) likewise.

mod common;

use std::time::SystemTime;

use common::{read_all, small_config, tagged_batch};
use herald_log::{Log, ReadError, RewriteError, TruncateError};

#[test]
fn segments_wholly_below_the_log_start_are_deleted_and_the_start_survives_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let log = Log::open(dir.path(), small_config()).unwrap();
    for tag in 0..300 {
        log.append(&tagged_batch(10, tag, 0)).unwrap();
    }
    log.maintain(SystemTime::now()).unwrap();
    let segments_before = log.segment_count();
    assert!(
        segments_before > 3,
        "the test needs several segments, got {segments_before}"
    );

    assert_eq!(log.truncate_before(2005).unwrap(), 2005);
    log.maintain(SystemTime::now()).unwrap();
    assert!(
        log.segment_count() < segments_before,
        "segments below the start were kept: {} of {segments_before}",
        log.segment_count()
    );
    assert_eq!(log.log_start_offset(), 2005);
    assert!(matches!(
        log.read(2004, 1 << 20),
        Err(ReadError::OffsetOutOfRange {
            requested: 2004,
            log_start_offset: 2005,
            ..
        })
    ));
    // The batch holding 2005 is served whole, as Kafka serves it.
    assert_eq!(
        read_all(&log, 2005, 1 << 20).first(),
        Some(&(2000, 10, 200))
    );
    log.close().unwrap();
    drop(log);

    let log = Log::open(dir.path(), small_config()).unwrap();
    assert_eq!(log.log_start_offset(), 2005, "the start survives a restart");
    assert_eq!(log.high_watermark(), 3000);
    assert!(matches!(
        log.truncate_before(3001),
        Err(TruncateError::OffsetOutOfRange {
            requested: 3001,
            high_watermark: 3000
        })
    ));
    assert_eq!(log.truncate_before(100).unwrap(), 2005, "never moves back");
}

#[test]
fn a_damaged_log_start_file_refuses_to_open_rather_than_serve_truncated_records() {
    let dir = tempfile::tempdir().unwrap();
    let log = Log::open(dir.path(), small_config()).unwrap();
    log.append(&tagged_batch(10, 1, 0)).unwrap();
    log.truncate_before(5).unwrap();
    log.close().unwrap();
    drop(log);
    let file = dir.path().join("log-start-offset");
    let mut bytes = std::fs::read(&file).unwrap();
    bytes[10] ^= 0xff;
    std::fs::write(&file, bytes).unwrap();
    let err = Log::open(dir.path(), small_config()).expect_err("damaged start file");
    assert!(err.to_string().contains("log-start-offset"), "{err}");
}

#[test]
fn a_tail_cut_drops_later_batches_across_segments_and_survives_a_reopen() {
    let dir = tempfile::tempdir().unwrap();
    let log = Log::open(dir.path(), small_config()).unwrap();
    let mut starts = Vec::new();
    for tag in 0..1_000u64 {
        starts.push(log.append(&tagged_batch(3, tag, 0)).unwrap().base_offset);
    }
    assert!(log.segment_count() > 3, "the cut must span segments");
    let cut = starts[157];
    log.truncate_after(cut).unwrap();
    assert_eq!(log.high_watermark(), cut);
    let kept = read_all(&log, 0, 1 << 16);
    assert_eq!(kept.len(), 157);
    assert_eq!(kept.last().unwrap().2, 156);
    // The next append takes the cut's offset, and a reopen keeps both.
    assert_eq!(
        log.append(&tagged_batch(2, 999, 0)).unwrap().base_offset,
        cut
    );
    drop(log);
    let log = Log::open(dir.path(), small_config()).unwrap();
    let after = read_all(&log, 0, 1 << 16);
    assert_eq!(after.len(), 158);
    assert_eq!(after.last().unwrap(), &(cut, 2, 999));
}

#[test]
fn a_tail_cut_inside_a_batch_or_below_the_start_is_refused_and_changes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let log = Log::open(dir.path(), small_config()).unwrap();
    for tag in 0..10u64 {
        log.append(&tagged_batch(4, tag, 0)).unwrap();
    }
    assert!(matches!(
        log.truncate_after(6),
        Err(RewriteError::NotBatchStart { requested: 6 })
    ));
    log.truncate_before(8).unwrap();
    assert!(matches!(
        log.truncate_after(4),
        Err(RewriteError::BelowLogStart { requested: 4, .. })
    ));
    assert_eq!(log.high_watermark(), 40);
    assert_eq!(read_all(&log, 8, 1 << 16).len(), 8);
}

#[test]
fn a_reset_log_starts_empty_at_the_given_offset_and_stays_there_after_a_reopen() {
    let dir = tempfile::tempdir().unwrap();
    let log = Log::open(dir.path(), small_config()).unwrap();
    for tag in 0..50u64 {
        log.append(&tagged_batch(5, tag, 0)).unwrap();
    }
    log.reset(1_000).unwrap();
    assert_eq!(log.log_start_offset(), 1_000);
    assert_eq!(log.high_watermark(), 1_000);
    assert!(read_all(&log, 1_000, 1 << 16).is_empty());
    assert_eq!(
        log.append(&tagged_batch(1, 7, 0)).unwrap().base_offset,
        1_000
    );
    drop(log);
    let log = Log::open(dir.path(), small_config()).unwrap();
    assert_eq!(log.log_start_offset(), 1_000);
    assert_eq!(read_all(&log, 1_000, 1 << 16), vec![(1_000, 1, 7)]);
}
