//! Moving the log start offset (Kafka's DeleteRecords): reads below it are
//! refused, whole segments below it are deleted by maintenance, and the new
//! start survives a restart.

mod common;

use std::time::SystemTime;

use common::{read_all, small_config, tagged_batch};
use herald_log::{Log, ReadError, TruncateError};

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
