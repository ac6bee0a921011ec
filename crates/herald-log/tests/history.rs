//! The history index against brute force: the batches a key lookup names
//! cover every record with that key, and the end a time bound gives leaves
//! out only later records, whether the index is whole, partial, read back
//! from its files after a restart, or trimmed by retention.

mod common;

use std::collections::BTreeMap;
use std::time::SystemTime;

use common::small_config;
use herald_log::{KeyBatches, Log, LogConfig};
use herald_records::{batches, BatchBuilder, Compression, RecordBatch, RecordFields};

const KEYS: u64 = 13;

/// 400 batches of 1 to 4 records; record n has key `k{n % 13}` and a
/// timestamp that mostly grows but jumps back by up to 5 s; every third
/// batch is lz4-compressed.
fn fill(log: &Log) {
    let mut n = 0u64;
    for b in 0..400u64 {
        let mut builder = BatchBuilder::new(1_000_000);
        for _ in 0..=(b % 4) {
            let key = format!("k{}", n % KEYS);
            let jitter = (n * 7919 % 5000) as i64;
            builder.push(RecordFields {
                timestamp_ms: 1_000_000 + (n as i64) * 100 - jitter,
                key: Some(key.as_bytes()),
                value: Some(b"some value that takes room"),
                headers: &[],
            });
            n += 1;
        }
        let codec = if b % 3 == 0 {
            Compression::Lz4
        } else {
            Compression::None
        };
        log.append(&builder.finish_with(codec).unwrap()).unwrap();
    }
}

/// Every stored batch: base offset -> (offset, timestamp, key) of its records.
fn truth(log: &Log) -> BTreeMap<u64, Vec<(u64, i64, String)>> {
    let mut out = BTreeMap::new();
    let mut offset = log.log_start_offset();
    let mut scratch = Vec::new();
    loop {
        let slice = log.read(offset, 1 << 20).unwrap();
        if slice.bytes.is_empty() {
            return out;
        }
        for bytes in batches(&slice.bytes) {
            let batch = RecordBatch::new(bytes.unwrap()).unwrap();
            let records = batch
                .records(&mut scratch)
                .unwrap()
                .map(|r| {
                    let r = r.unwrap();
                    let key = String::from_utf8(r.key.unwrap().to_vec()).unwrap();
                    (r.offset as u64, r.timestamp, key)
                })
                .collect();
            out.insert(batch.header().base_offset() as u64, records);
        }
        offset = slice.next_offset;
    }
}

/// Files of `dir` whose name ends with `suffix`.
fn files_ending(dir: &std::path::Path, suffix: &str) -> usize {
    std::fs::read_dir(dir)
        .unwrap()
        .filter(|e| {
            e.as_ref()
                .unwrap()
                .file_name()
                .to_string_lossy()
                .ends_with(suffix)
        })
        .count()
}

fn index_all(log: &Log) {
    while !log.index_history(1 << 20).caught_up {}
}

/// The lookup names, for every batch holding `key` within `from..to` (but
/// those it leaves to the unindexed rest), an offset in that batch at or
/// past the key's last record there in the range; and every offset it
/// names is a record with the key, or the range's last offset.
fn check_key(
    log: &Log,
    all: &BTreeMap<u64, Vec<(u64, i64, String)>>,
    key: &str,
    from: u64,
    to: u64,
) -> KeyBatches {
    let found = log.key_batches(key.as_bytes(), from, to, usize::MAX);
    assert!(found.last_offsets.windows(2).all(|w| w[0] < w[1]));
    for records in all.values() {
        let last_in_range = records
            .iter()
            .filter(|(o, _, k)| k == key && (from..to).contains(o))
            .map(|r| r.0)
            .max();
        let batch_end = records.iter().map(|r| r.0).max().unwrap_or(0);
        if let Some(last) = last_in_range {
            if last < found.unindexed_from {
                assert!(
                    found
                        .last_offsets
                        .iter()
                        .any(|&x| (last..=batch_end).contains(&x)),
                    "{key} {from}..{to}: record {last} not reached"
                );
            }
        }
    }
    for &x in &found.last_offsets {
        assert!((from..to).contains(&x), "{key} {from}..{to}: {x} outside");
        let holds = all.values().flatten().any(|(o, _, k)| *o == x && k == key);
        assert!(
            holds || x == to - 1,
            "{key}: offset {x} named without the key"
        );
    }
    found
}

/// The end a time bound gives drops only records later than `latest`.
fn check_time(
    log: &Log,
    all: &BTreeMap<u64, Vec<(u64, i64, String)>>,
    latest: i64,
    from: u64,
    to: u64,
) -> u64 {
    let end = log.end_for_timestamps_up_to(latest, from, to);
    assert!((from..=to).contains(&end));
    for records in all.values() {
        for &(offset, ts, _) in records {
            if (end..to).contains(&offset) {
                assert!(
                    ts > latest,
                    "offset {offset} at {ts} dropped by bound {latest} (end {end})"
                );
            }
        }
    }
    end
}

#[test]
fn key_lookups_and_time_bounds_agree_with_the_records() {
    let dir = tempfile::tempdir().unwrap();
    let log = Log::open(dir.path(), small_config()).unwrap();
    fill(&log);
    assert!(log.segment_count() > 3);
    let all = truth(&log);
    let end = log.high_watermark();
    // Before any indexing everything is unindexed.
    let nothing = log.key_batches(b"k3", 0, end, usize::MAX);
    assert_eq!(
        nothing,
        KeyBatches {
            last_offsets: vec![],
            unindexed_from: 0,
            copied: Default::default(),
        }
    );
    assert_eq!(log.end_for_timestamps_up_to(1_000_000, 0, end), end);
    index_all(&log);
    let mut named = 0;
    for k in 0..KEYS {
        let key = format!("k{k}");
        for (from, to) in [(0, end), (17, 300), (250, end), (400, 401)] {
            let found = check_key(&log, &all, &key, from, to);
            assert_eq!(found.unindexed_from, to);
            named += found.last_offsets.len();
        }
    }
    // A key is in about a third of the batches, not in all of them.
    assert!(named < 13 * 4 * 400 / 2, "{named}");
    assert!(check_key(&log, &all, "absent", 0, end)
        .last_offsets
        .is_empty());
    // Past the most batches asked for, the rest is left to a bulk read.
    let whole = log.key_batches(b"k4", 0, end, usize::MAX);
    let capped = log.key_batches(b"k4", 0, end, 3);
    assert_eq!(capped.last_offsets, whole.last_offsets[..3]);
    assert_eq!(capped.unindexed_from, whole.last_offsets[2] + 1);
    let mut pruned = 0;
    for latest in [
        999_000,
        1_000_000,
        1_010_000,
        1_050_000,
        1_090_000,
        i64::MAX,
    ] {
        for (from, to) in [(0, end), (100, 700), (5, 6)] {
            if check_time(&log, &all, latest, from, to) < to {
                pruned += 1;
            }
        }
    }
    assert!(pruned >= 8, "{pruned}");
    // An index half built answers what it covers and leaves the rest.
    let fresh_dir = tempfile::tempdir().unwrap();
    let fresh = Log::open(fresh_dir.path(), small_config()).unwrap();
    fill(&fresh);
    let progress = fresh.index_history(8 * 1024);
    assert!(!progress.caught_up && progress.indexed_to > 0 && progress.indexed_to < end);
    let partial = check_key(&fresh, &all, "k5", 0, end);
    assert_eq!(partial.unindexed_from, progress.indexed_to);
    assert!(!partial.last_offsets.is_empty());
    assert_eq!(fresh.end_for_timestamps_up_to(1_000_000, 0, end), end);
}

#[test]
fn sealed_segments_keep_their_index_in_files_across_a_restart_and_retention_removes_them() {
    let dir = tempfile::tempdir().unwrap();
    let config = small_config();
    {
        let log = Log::open(dir.path(), config.clone()).unwrap();
        fill(&log);
        index_all(&log);
        log.close().unwrap();
    }
    let keys_files = |dir: &std::path::Path| files_ending(dir, ".keys");
    let sealed = keys_files(dir.path());
    assert!(sealed >= 3, "{sealed}");
    // Indexes of a segment that is gone (a crash while it was deleted) are
    // deleted at open, not left for a later segment of that base.
    for stray in ["00000000000099999999.keys", "00000000000099999999.index"] {
        std::fs::write(dir.path().join(stray), b"stale").unwrap();
    }
    let log = Log::open(dir.path(), config.clone()).unwrap();
    assert_eq!(keys_files(dir.path()), sealed);
    assert!(!dir.path().join("00000000000099999999.index").exists());
    let all = truth(&log);
    let end = log.high_watermark();
    // Only the active segment is indexed again; the sealed ones are read
    // back from their files.
    let mut reindexed = 0;
    loop {
        let progress = log.index_history(1 << 20);
        reindexed += progress.bytes;
        if progress.caught_up {
            break;
        }
    }
    assert!(reindexed <= u64::from(config.segment_bytes), "{reindexed}");
    for k in 0..KEYS {
        check_key(&log, &all, &format!("k{k}"), 0, end);
    }
    check_time(&log, &all, 1_020_000, 0, end);
    // A damaged file is rebuilt rather than trusted.
    let first = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "keys"))
        .min()
        .unwrap();
    log.close().unwrap();
    let mut bytes = std::fs::read(&first).unwrap();
    let middle = bytes.len() / 2;
    bytes[middle] ^= 0xff;
    std::fs::write(&first, bytes).unwrap();
    let log = Log::open(
        dir.path(),
        LogConfig {
            retention_bytes: Some(40 * 1024),
            ..config
        },
    )
    .unwrap();
    index_all(&log);
    for k in 0..KEYS {
        check_key(&log, &all, &format!("k{k}"), 0, end);
    }
    log.maintain(SystemTime::now()).unwrap();
    assert!(log.log_start_offset() > 0);
    // Every segment left has its file; none is left for a deleted one.
    let segments = files_ending(dir.path(), ".log");
    assert_eq!(keys_files(dir.path()), segments - 1);
}

#[test]
fn a_time_bound_keeps_a_batch_that_reaches_past_the_range_end() {
    let dir = tempfile::tempdir().unwrap();
    let log = Log::open(dir.path(), small_config()).unwrap();
    let batch = |count: usize, ts: i64| {
        let mut builder = BatchBuilder::new(ts);
        for _ in 0..count {
            builder.push(RecordFields {
                timestamp_ms: ts,
                key: Some(b"k"),
                value: Some(&[7u8; 50]),
                headers: &[],
            });
        }
        builder.finish().unwrap()
    };
    // A: offset 0 at 100; P: offsets 1..=10 at 0, crossing the first
    // bucket boundary (256 bytes); C: offset 11 at 100.
    log.append(&batch(1, 100)).unwrap();
    log.append(&batch(10, 0)).unwrap();
    log.append(&batch(1, 100)).unwrap();
    index_all(&log);
    let all = truth(&log);
    for to in 1..=12 {
        for from in 0..to {
            check_time(&log, &all, 10, from, to);
        }
    }
    assert_eq!(log.end_for_timestamps_up_to(10, 0, 5), 5);
}
