//! Reopening a log after a clean close, after a crash, and with damaged files.

mod common;

use std::fs::{self, OpenOptions};
use std::io::{Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

use common::{read_all, small_config, tagged_batch};
use herald_log::{Log, LogError};

/// Writes `batches` batches of 2 records and returns the log's files.
fn populated(dir: &Path, batches: u64, close: bool) {
    let log = Log::open(dir, small_config()).unwrap();
    for tag in 0..batches {
        log.append(&tagged_batch(2, tag, 0)).unwrap();
    }
    if close {
        log.close().unwrap();
    }
}

fn segment_files(dir: &Path) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "log"))
        .collect();
    files.sort();
    files
}

fn expect_prefix(log: &Log, batches: u64) {
    let read = read_all(log, 0, 1 << 20);
    assert_eq!(read.len() as u64, batches, "batches kept");
    for (i, (offset, count, tag)) in read.into_iter().enumerate() {
        assert_eq!((offset, count, tag), (2 * i as u64, 2, i as u64));
    }
    assert_eq!(log.high_watermark(), 2 * batches);
}

#[test]
fn a_clean_close_reopens_without_scanning_and_appends_continue() {
    let dir = tempfile::tempdir().unwrap();
    populated(dir.path(), 300, true);
    let log = Log::open(dir.path(), small_config()).unwrap();
    assert!(log.recovery_report().clean);
    assert_eq!(log.recovery_report().batches_scanned, 0);
    expect_prefix(&log, 300);
    let next = log.append(&tagged_batch(2, 300, 0)).unwrap();
    assert_eq!(next.base_offset, 600);
}

#[test]
fn a_crash_without_close_keeps_every_written_batch() {
    let dir = tempfile::tempdir().unwrap();
    populated(dir.path(), 300, false);
    let log = Log::open(dir.path(), small_config()).unwrap();
    assert!(!log.recovery_report().clean);
    assert!(log.recovery_report().batches_scanned > 0);
    expect_prefix(&log, 300);
    assert_eq!(
        log.append(&tagged_batch(2, 300, 0)).unwrap().base_offset,
        600
    );
}

/// Damages the last segment's tail with `damage`, reopens, and checks the
/// log holds exactly the batches before the damaged one.
fn torn_tail_case(damage: impl FnOnce(&Path, u64)) {
    let dir = tempfile::tempdir().unwrap();
    populated(dir.path(), 100, false);
    let last = segment_files(dir.path()).pop().unwrap();
    let one = tagged_batch(2, 0, 0).len() as u64;
    let live = {
        // Data length: preallocated space beyond it is zeros.
        let data = fs::read(&last).unwrap();
        data.len() - data.iter().rev().take_while(|&&b| b == 0).count()
    } as u64;
    damage(&last, live);
    let log = Log::open(dir.path(), small_config()).unwrap();
    let kept = read_all(&log, 0, 1 << 20).len() as u64;
    assert!(
        (98..=100).contains(&kept),
        "kept {kept} of 100 batches (batch is {one} bytes)"
    );
    expect_prefix(&log, kept);
    // The log accepts appends right after the cut.
    assert_eq!(
        log.append(&tagged_batch(2, kept, 0)).unwrap().base_offset,
        2 * kept
    );
    drop(log);
    let reopened = Log::open(dir.path(), small_config()).unwrap();
    expect_prefix(&reopened, kept + 1);
}

fn cut(path: &Path, len: u64) {
    OpenOptions::new()
        .write(true)
        .open(path)
        .unwrap()
        .set_len(len)
        .unwrap();
}

fn overwrite(path: &Path, at: u64, bytes: &[u8]) {
    let mut file = OpenOptions::new().write(true).open(path).unwrap();
    file.seek(SeekFrom::Start(at)).unwrap();
    file.write_all(bytes).unwrap();
}

#[test]
fn recovers_after_a_tail_cut_mid_batch() {
    torn_tail_case(|path, live| cut(path, live - 10));
}

#[test]
fn recovers_after_a_tail_cut_mid_header() {
    let one = tagged_batch(2, 0, 0).len() as u64;
    torn_tail_case(|path, live| cut(path, live - one + 20));
}

#[test]
fn recovers_after_a_flipped_byte_in_the_last_batch() {
    torn_tail_case(|path, live| overwrite(path, live - 3, &[0xAB]));
}

#[test]
fn recovers_after_garbage_appended_past_the_tail() {
    torn_tail_case(|path, live| overwrite(path, live, &[0x5A; 300]));
}

#[test]
fn recovers_after_a_length_field_pointing_past_the_file() {
    let one = tagged_batch(2, 0, 0).len() as u64;
    torn_tail_case(|path, live| overwrite(path, live - one + 8, &[0x00, 0x10, 0x00, 0x00]));
}

#[test]
fn recovers_after_a_zeroed_last_batch() {
    let one = tagged_batch(2, 0, 0).len() as u64;
    torn_tail_case(|path, live| overwrite(path, live - one, &vec![0u8; one as usize]));
}

#[test]
fn corruption_before_the_recovery_point_is_an_error_not_a_truncation() {
    let dir = tempfile::tempdir().unwrap();
    populated(dir.path(), 300, true);
    let files = segment_files(dir.path());
    assert!(files.len() >= 3);
    // Damage a sealed segment and its index, so it must be scanned.
    overwrite(&files[0], 200, &[0xFF; 4]);
    fs::remove_file(files[0].with_extension("index")).unwrap();
    let before = fs::metadata(&files[1]).unwrap().len();
    match Log::open(dir.path(), small_config()) {
        Err(LogError::Corrupt { path, .. }) => assert_eq!(path, files[0]),
        other => panic!("expected Corrupt, got {other:?}"),
    }
    // Nothing was deleted or cut.
    assert_eq!(segment_files(dir.path()), files);
    assert_eq!(fs::metadata(&files[1]).unwrap().len(), before);
}

#[test]
fn missing_or_damaged_indexes_are_rebuilt() {
    let dir = tempfile::tempdir().unwrap();
    populated(dir.path(), 300, true);
    let files = segment_files(dir.path());
    fs::remove_file(files[0].with_extension("index")).unwrap();
    overwrite(&files[1].with_extension("index"), 30, &[1, 2, 3]);
    let log = Log::open(dir.path(), small_config()).unwrap();
    expect_prefix(&log, 300);
    // Lookups through the rebuilt index land on the right batch.
    for offset in [1, 77, 301, 599] {
        let slice = log.read(offset, 1).unwrap();
        let first = common::decode(&slice.bytes)[0];
        assert!(first.0 <= offset && offset < first.0 + 2);
    }
    log.close().unwrap();
    assert!(
        files[0].with_extension("index").exists(),
        "index written again at finalize"
    );
}

#[test]
fn an_empty_directory_opens_as_an_empty_log() {
    let dir = tempfile::tempdir().unwrap();
    let log = Log::open(dir.path().join("new"), small_config()).unwrap();
    assert_eq!((log.log_start_offset(), log.high_watermark()), (0, 0));
}

#[test]
fn an_invalid_configuration_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let config = herald_log::LogConfig {
        index_interval_bytes: 100,
        ..small_config()
    };
    assert!(
        matches!(Log::open(dir.path(), config), Err(LogError::Config(e)) if e.key == "index_interval_bytes")
    );
}
