//! Key-sorted copies against brute force: a lookup answers, from the
//! copies, the batches it names and the unindexed rest together, exactly
//! the records of the key in the range (offset, timestamp, value and
//! headers as stored), whether the copies were just built, found again
//! after a restart, damaged, or turned off.

mod common;

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::atomic::AtomicBool;

use common::small_config;
use herald_log::{Log, LogConfig};
use herald_records::{batches, BatchBuilder, Compression, RecordBatch, RecordFields};

/// (offset, timestamp, key, value, headers) of one record.
type Row = (u64, i64, Vec<u8>, Option<Vec<u8>>, Vec<(String, Vec<u8>)>);

fn config() -> LogConfig {
    LogConfig {
        key_copy: true,
        ..small_config()
    }
}

/// 300 batches of 1 to 5 records; keys skewed (`k0` in about a third of
/// the records), some records without a key, some with null values and
/// headers; every third batch lz4-compressed.
fn fill(log: &Log) {
    let mut n = 0u64;
    for b in 0..300u64 {
        let mut builder = BatchBuilder::new(1_000_000);
        let values: Vec<Vec<u8>> = (0..=(b % 5))
            .map(|i| format!("value {} of batch {b}", n + i).into_bytes())
            .collect();
        let keys: Vec<Option<String>> = (0..=(b % 5))
            .map(|i| {
                let m = n + i;
                match m % 11 {
                    0 => None,
                    r if r % 3 == 0 => Some("k0".to_owned()),
                    _ => Some(format!("k{}", m * 7 % 17)),
                }
            })
            .collect();
        let header_value = format!("h{b}");
        let headers: [(&[u8], Option<&[u8]>); 2] =
            [(b"source", Some(header_value.as_bytes())), (b"empty", None)];
        for (i, key) in keys.iter().enumerate() {
            let m = n + i as u64;
            builder.push(RecordFields {
                timestamp_ms: 1_000_000 + (m as i64) * 10 - (m % 4) as i64 * 25,
                key: key.as_deref().map(str::as_bytes),
                value: (m % 7 != 3).then_some(values[i].as_slice()),
                headers: if m.is_multiple_of(2) { &headers } else { &[] },
            });
        }
        n += keys.len() as u64;
        let codec = if b.is_multiple_of(3) {
            Compression::Lz4
        } else {
            Compression::None
        };
        log.append(&builder.finish_with(codec).unwrap()).unwrap();
    }
}

fn row(record: &herald_records::Record<'_>) -> Row {
    let headers = record
        .headers()
        .map(|h| {
            let h = h.unwrap();
            (
                String::from_utf8(h.0.to_vec()).unwrap(),
                h.1.unwrap_or(b"<null>").to_vec(),
            )
        })
        .collect();
    (
        record.offset as u64,
        record.timestamp,
        record.key.unwrap_or(b"").to_vec(),
        record.value.map(<[u8]>::to_vec),
        headers,
    )
}

/// Every keyed record of the log, by offset.
fn truth(log: &Log) -> BTreeMap<u64, Row> {
    let mut out = BTreeMap::new();
    read_range(log, log.log_start_offset(), u64::MAX, &mut |r| {
        out.insert(r.0, r);
    });
    out
}

/// Calls `each` with the keyed records of the batches from the one
/// holding `from` on, up to offset `to`.
fn read_range(log: &Log, from: u64, to: u64, each: &mut dyn FnMut(Row)) {
    let mut offset = from;
    let mut scratch = Vec::new();
    while offset < to {
        let slice = log.read(offset, 1 << 20).unwrap();
        if slice.bytes.is_empty() {
            return;
        }
        for bytes in batches(&slice.bytes) {
            let batch = RecordBatch::new(bytes.unwrap()).unwrap();
            for record in batch.records(&mut scratch).unwrap() {
                let record = record.unwrap();
                if record.key.is_some() && (record.offset as u64) < to {
                    each(row(&record));
                }
            }
        }
        offset = slice.next_offset;
    }
}

/// What a reader of the lookup's answer finds for `key` in `from..to`:
/// the copied records, those of each named batch up to the offset named,
/// and the unindexed rest, keeping records of the key alone.
fn look_up(log: &Log, key: &str, from: u64, to: u64) -> Vec<Row> {
    let found = log.key_batches(key.as_bytes(), from, to, usize::MAX);
    let mut rows = Vec::new();
    for copied in found.copied.iter() {
        assert!((from..to).contains(&copied.offset));
        if copied.key == key.as_bytes() {
            rows.push(row(&copied.record()));
        }
    }
    for &last in &found.last_offsets {
        read_range(log, last, last + 1, &mut |r| {
            if r.2 == key.as_bytes() && r.0 >= from && r.0 <= last {
                rows.push(r);
            }
        });
    }
    read_range(log, found.unindexed_from, to, &mut |r| {
        if r.2 == key.as_bytes() && r.0 >= found.unindexed_from {
            rows.push(r);
        }
    });
    rows.sort_by_key(|r| r.0);
    rows.dedup_by_key(|r| r.0);
    rows
}

fn expected(all: &BTreeMap<u64, Row>, key: &str, from: u64, to: u64) -> Vec<Row> {
    all.range(from..to)
        .filter(|(_, r)| r.2 == key.as_bytes())
        .map(|(_, r)| r.clone())
        .collect()
}

fn check_every_key(log: &Log, all: &BTreeMap<u64, Row>) {
    let end = log.high_watermark();
    let ranges = [(0, end), (37, end - 41), (end / 3, end / 2), (5, 6)];
    for k in 0..17 {
        let key = format!("k{k}");
        for &(from, to) in &ranges {
            assert_eq!(
                look_up(log, &key, from, to),
                expected(all, &key, from, to),
                "key {key} in {from}..{to}"
            );
        }
    }
}

fn build_all(log: &Log) -> usize {
    while !log.index_history(1 << 20).caught_up {}
    let stop = AtomicBool::new(false);
    let mut made = 0;
    while log.build_key_copy(&stop) {
        made += 1;
    }
    made
}

fn copies(dir: &Path) -> Vec<(String, std::time::SystemTime)> {
    let mut found: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap())
        .filter(|e| e.file_name().to_string_lossy().ends_with(".kcopy"))
        .map(|e| {
            (
                e.file_name().to_string_lossy().into_owned(),
                e.metadata().unwrap().modified().unwrap(),
            )
        })
        .collect();
    found.sort();
    found
}

#[test]
fn lookups_through_copies_answer_every_record_of_the_key() {
    let dir = tempfile::tempdir().unwrap();
    let log = Log::open(dir.path(), config()).unwrap();
    fill(&log);
    let all = truth(&log);
    let sealed = log.segment_count() - 1;
    assert!(sealed >= 3, "{sealed} sealed segments");
    while !log.index_history(1 << 20).caught_up {}
    assert_eq!(log.key_copy_stats().pending_segments, sealed as u64);
    assert_eq!(build_all(&log), sealed);
    assert_eq!(copies(dir.path()).len(), sealed);
    let stats = log.key_copy_stats();
    assert_eq!(stats.pending_segments, 0);
    let on_disk: u64 = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap())
        .filter(|e| e.file_name().to_string_lossy().ends_with(".kcopy"))
        .map(|e| e.metadata().unwrap().len())
        .sum();
    assert_eq!(stats.bytes, on_disk);
    // Sealed segments are answered from copies: the batches named all lie
    // in the active one.
    let found = log.key_batches(b"k0", 0, log.high_watermark(), usize::MAX);
    assert!(found.copied.len() > 10);
    assert!(found
        .copied
        .iter()
        .all(|r| found.last_offsets.iter().all(|&last| r.offset < last)));
    check_every_key(&log, &all);
}

#[test]
fn copies_are_found_again_after_a_restart_and_deleted_when_turned_off() {
    let dir = tempfile::tempdir().unwrap();
    let all = {
        let log = Log::open(dir.path(), config()).unwrap();
        fill(&log);
        build_all(&log);
        truth(&log)
    };
    let built = copies(dir.path());
    assert!(built.len() >= 3);
    {
        let log = Log::open(dir.path(), config()).unwrap();
        // Adopted, not rewritten.
        assert_eq!(build_all(&log), built.len());
        assert_eq!(copies(dir.path()), built);
        check_every_key(&log, &all);
        log.update_config(LogConfig {
            key_copy: false,
            ..config()
        })
        .unwrap();
        assert!(copies(dir.path()).is_empty());
        assert_eq!(build_all(&log), 0);
        check_every_key(&log, &all);
        log.update_config(config()).unwrap();
        assert_eq!(build_all(&log), built.len());
        assert_eq!(copies(dir.path()).len(), built.len());
    }
    // Opened by a log that keeps none, they are deleted.
    let log = Log::open(dir.path(), small_config()).unwrap();
    assert!(copies(dir.path()).is_empty());
    build_all(&log);
    check_every_key(&log, &all);
}

#[test]
fn a_damaged_copy_is_read_around_through_the_key_index() {
    let dir = tempfile::tempdir().unwrap();
    let all = {
        let log = Log::open(dir.path(), config()).unwrap();
        fill(&log);
        build_all(&log);
        truth(&log)
    };
    // A flipped byte in the first block of every copy.
    for (name, _) in copies(dir.path()) {
        let path = dir.path().join(name);
        let mut bytes = std::fs::read(&path).unwrap();
        bytes[12] ^= 0x55;
        std::fs::write(&path, bytes).unwrap();
    }
    let log = Log::open(dir.path(), config()).unwrap();
    build_all(&log);
    check_every_key(&log, &all);
}
