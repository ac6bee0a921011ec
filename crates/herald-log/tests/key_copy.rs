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
use herald_log::{CopiedRecords, Log, LogConfig};
use herald_records::{batches, BatchBuilder, Compression, RecordBatch, RecordFields};

/// (offset, timestamp, key, value, headers) of one record.
type Row = (u64, i64, Vec<u8>, Option<Vec<u8>>, Vec<(String, Vec<u8>)>);

fn config() -> LogConfig {
    LogConfig {
        key_copy: true,
        ..small_config()
    }
}

/// `count` batches of 1 to 5 records; keys skewed (`k0` in about a third of
/// the records), some records without a key, some with null values and
/// headers; every third batch lz4-compressed.
fn fill(log: &Log, count: u64) {
    let mut n = 0u64;
    for b in 0..count {
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
        // One batch when one is asked for (a read answers at least the
        // batch holding its offset).
        let bytes = if to - offset == 1 { 1 } else { 1 << 20 };
        let slice = log.read(offset, bytes).unwrap();
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

/// What a reader of the lookup's answer finds for `keys` in `from..to`:
/// the records of the copied runs, those of each named batch up to the
/// offset named, and the unindexed rest, keeping records of the keys
/// alone, in offset order. No record may come twice. A damaged copy
/// fails the lookup (and is set aside).
fn look_up_many(
    log: &Log,
    keys: &[&str],
    from: u64,
    to: u64,
    max_batches: usize,
) -> Result<Vec<Row>, herald_log::KeyCopyDamaged> {
    let wanted = |key: &[u8]| keys.iter().any(|k| k.as_bytes() == key);
    let raw: Vec<&[u8]> = keys.iter().map(|k| k.as_bytes()).collect();
    let found = log.keys_batches(&raw, from, to, max_batches);
    let mut rows = Vec::new();
    let mut scratch = Vec::new();
    for run in &found.copied {
        let mut run = run.clone();
        while !run.is_done() {
            let mut block = CopiedRecords::default();
            run.read_block(&mut block, &mut scratch)?;
            for copied in block.iter() {
                assert!((from..found.unindexed_from).contains(&copied.offset));
                if wanted(copied.key) {
                    rows.push(row(&copied.record()));
                }
            }
        }
    }
    // As a scan does: a batch named twice (for two keys) is read on from
    // where its last read stopped.
    let mut next = from;
    for &last in &found.last_offsets {
        assert!(last < found.unindexed_from);
        read_range(log, last, last + 1, &mut |r| {
            if wanted(&r.2) && r.0 >= next && r.0 <= last {
                rows.push(r);
            }
        });
        next = last + 1;
    }
    read_range(log, found.unindexed_from, to, &mut |r| {
        if wanted(&r.2) && r.0 >= found.unindexed_from {
            rows.push(r);
        }
    });
    rows.sort_by_key(|r| r.0);
    for pair in rows.windows(2) {
        assert!(pair[0].0 < pair[1].0, "offset {} answered twice", pair[0].0);
    }
    Ok(rows)
}

fn look_up(log: &Log, key: &str, from: u64, to: u64) -> Vec<Row> {
    look_up_many(log, &[key], from, to, usize::MAX).expect("no copy is damaged")
}

fn expected(all: &BTreeMap<u64, Row>, key: &str, from: u64, to: u64) -> Vec<Row> {
    expected_many(all, &[key], from, to)
}

fn expected_many(all: &BTreeMap<u64, Row>, keys: &[&str], from: u64, to: u64) -> Vec<Row> {
    all.range(from..to)
        .filter(|(_, r)| keys.iter().any(|k| r.2 == k.as_bytes()))
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
    // Several keys at once, and batches capped (the bulk read answers
    // from the last one named on, the copies only before it).
    let keys = ["k0", "k3", "k16", "nobody"];
    for max_batches in [0, 1, 3, usize::MAX] {
        for &(from, to) in &ranges {
            assert_eq!(
                look_up_many(log, &keys, from, to, max_batches).unwrap(),
                expected_many(all, &keys, from, to),
                "{keys:?} in {from}..{to}, at most {max_batches} batches"
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

/// The whole segments' copies (name, modified).
fn copies(dir: &Path) -> Vec<(String, std::time::SystemTime)> {
    files_ending(dir, ".kcopy")
}

/// The copies of the active segment's stretches.
fn parts(dir: &Path) -> Vec<(String, std::time::SystemTime)> {
    files_ending(dir, ".kpart")
}

fn files_ending(dir: &Path, ending: &str) -> Vec<(String, std::time::SystemTime)> {
    let mut found: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap())
        .filter(|e| e.file_name().to_string_lossy().ends_with(ending))
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
    fill(&log, 300);
    let all = truth(&log);
    let sealed = log.segment_count() - 1;
    assert!(sealed >= 3, "{sealed} sealed segments");
    while !log.index_history(1 << 20).caught_up {}
    assert_eq!(log.key_copy_stats().pending_segments, sealed as u64);
    let made = build_all(&log);
    assert_eq!(copies(dir.path()).len(), sealed);
    // The active segment's indexed stretch is copied too (at least a
    // sixteenth of a segment is indexed there).
    let parts = parts(dir.path()).len();
    assert_eq!(parts, 1);
    assert_eq!(made, sealed + parts);
    let stats = log.key_copy_stats();
    assert_eq!(stats.pending_segments, 0);
    let on_disk: u64 = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap())
        .filter(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            name.ends_with(".kcopy") || name.ends_with(".kpart")
        })
        .map(|e| e.metadata().unwrap().len())
        .sum();
    assert_eq!(stats.bytes, on_disk);
    // Sealed segments are answered from copies, and so is the active one
    // as far as it was indexed: no batch is named.
    let found = log.key_batches(b"k0", 0, log.high_watermark(), usize::MAX);
    assert_eq!(found.copied.len(), sealed + parts);
    assert!(found.last_offsets.is_empty(), "{:?}", found.last_offsets);
    check_every_key(&log, &all);
}

#[test]
fn copies_are_found_again_after_a_restart_and_deleted_when_turned_off() {
    let dir = tempfile::tempdir().unwrap();
    let all = {
        let log = Log::open(dir.path(), config()).unwrap();
        fill(&log, 300);
        build_all(&log);
        truth(&log)
    };
    let built = copies(dir.path());
    assert!(built.len() >= 3);
    let built_parts = parts(dir.path()).len();
    {
        let log = Log::open(dir.path(), config()).unwrap();
        // The active segment's parts are not kept across a restart.
        assert!(parts(dir.path()).is_empty());
        // Adopted, not rewritten; the parts made again.
        assert_eq!(build_all(&log), built.len() + built_parts);
        assert_eq!(copies(dir.path()), built);
        assert_eq!(parts(dir.path()).len(), built_parts);
        check_every_key(&log, &all);
        log.update_config(LogConfig {
            key_copy: false,
            ..config()
        })
        .unwrap();
        assert!(copies(dir.path()).is_empty());
        assert!(parts(dir.path()).is_empty());
        assert_eq!(build_all(&log), 0);
        check_every_key(&log, &all);
        log.update_config(config()).unwrap();
        assert_eq!(build_all(&log), built.len() + built_parts);
        assert_eq!(copies(dir.path()).len(), built.len());
    }
    // Opened by a log that keeps none, they are deleted.
    let log = Log::open(dir.path(), small_config()).unwrap();
    assert!(copies(dir.path()).is_empty());
    assert!(parts(dir.path()).is_empty());
    build_all(&log);
    check_every_key(&log, &all);
}

/// Flips bits of the middle byte of each file named (in place: a log that
/// mapped one sees it).
fn damage_middles(dir: &Path, files: &[(String, std::time::SystemTime)]) {
    for (name, _) in files {
        let path = dir.join(name);
        let mut bytes = std::fs::read(&path).unwrap();
        let middle = bytes.len() / 2;
        bytes[middle] ^= 0x55;
        std::fs::write(&path, bytes).unwrap();
    }
}

#[test]
fn a_damaged_copy_fails_one_lookup_and_is_set_aside() {
    let dir = tempfile::tempdir().unwrap();
    // Segments of many blocks, so a lookup reads good blocks before the
    // damaged one.
    let config = LogConfig {
        segment_bytes: 128 * 1024,
        ..config()
    };
    let all = {
        let log = Log::open(dir.path(), config.clone()).unwrap();
        fill(&log, 3000);
        build_all(&log);
        truth(&log)
    };
    let built = copies(dir.path());
    assert!(built.len() >= 3);
    damage_middles(dir.path(), &built);
    let log = Log::open(dir.path(), config).unwrap();
    build_all(&log);
    let end = log.high_watermark();
    let mut damaged = 0;
    for k in 0..17 {
        let key = format!("k{k}");
        let rows = match look_up_many(&log, &[&key], 0, end, usize::MAX) {
            Ok(rows) => rows,
            Err(e) => {
                assert!(e.to_string().contains("damaged"), "{e}");
                // Asked again, that segment is read through its key index
                // (the next damaged copy may fail the lookup in turn).
                let mut again = Err(e);
                for _ in 0..built.len() {
                    damaged += 1;
                    again = look_up_many(&log, &[&key], 0, end, usize::MAX);
                    if again.is_ok() {
                        break;
                    }
                }
                again.unwrap()
            }
        };
        assert_eq!(rows, expected(&all, &key, 0, end), "{key}");
    }
    assert!(damaged > 0, "no lookup met a damaged block");
    // The damaged copies are deleted (the next start builds them again).
    assert!(copies(dir.path()).len() < built.len());
}

/// Two keys of one CRC-32C (found by search) share a hash in the index and
/// in the copies: each is answered alone, and together once each.
#[test]
fn keys_sharing_a_hash_are_answered_apart_and_together_once() {
    let mut seen = std::collections::HashMap::new();
    let (a, b) = (0u32..)
        .find_map(|n| {
            let key = format!("c{n}");
            let hash = crc32c::crc32c(key.as_bytes());
            seen.insert(hash, key.clone()).map(|other| (other, key))
        })
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let log = Log::open(dir.path(), config()).unwrap();
    for batch in 0..800u64 {
        let mut builder = BatchBuilder::new(1_000_000);
        let values: Vec<String> = (0..4).map(|i| format!("v{batch}-{i}")).collect();
        for (i, value) in values.iter().enumerate() {
            let key = [a.as_str(), b.as_str(), "other", a.as_str()][i];
            builder.push(RecordFields {
                timestamp_ms: 1_000_000 + batch as i64,
                key: Some(key.as_bytes()),
                value: Some(value.as_bytes()),
                headers: &[],
            });
        }
        log.append(&builder.finish().unwrap()).unwrap();
    }
    assert!(build_all(&log) >= 2);
    let all = truth(&log);
    let end = log.high_watermark();
    let found = log.keys_batches(&[a.as_bytes(), b.as_bytes()], 0, end, usize::MAX);
    let single = log.key_batches(a.as_bytes(), 0, end, usize::MAX);
    assert_eq!(
        found.copied.len(),
        single.copied.len(),
        "one run per segment and hash"
    );
    for keys in [
        vec![a.as_str()],
        vec![b.as_str()],
        vec![a.as_str(), b.as_str()],
    ] {
        assert_eq!(
            look_up_many(&log, &keys, 0, end, usize::MAX).unwrap(),
            expected_many(&all, &keys, 0, end),
            "{keys:?}"
        );
    }
}

/// The active segment is copied a stretch at a time as it is indexed:
/// lookups answer from the parts and the short unindexed tail, the whole
/// copy replaces the parts once the segment is sealed, and a damaged part
/// fails one lookup and ends the segment's parts.
#[test]
fn the_active_segment_is_copied_a_stretch_at_a_time() {
    let dir = tempfile::tempdir().unwrap();
    // Parts of 8 KiB.
    let config = LogConfig {
        segment_bytes: 128 * 1024,
        ..config()
    };
    let log = Log::open(dir.path(), config).unwrap();
    let mut most_parts = 0;
    let mut replaced = false;
    for _ in 0..12 {
        let sealed_before = log.segment_count() - 1;
        let parts_before = parts(dir.path());
        fill(&log, 150);
        build_all(&log);
        let sealed = log.segment_count() - 1;
        let parts_now = parts(dir.path());
        assert_eq!(copies(dir.path()).len(), sealed);
        most_parts = most_parts.max(parts_now.len());
        if sealed > sealed_before && !parts_before.is_empty() {
            // The sealed segment's parts gave way to its whole copy.
            assert!(parts_before.iter().all(|p| !parts_now.contains(p)));
            replaced = true;
        }
        let found = log.key_batches(b"k0", 0, log.high_watermark(), usize::MAX);
        assert_eq!(found.copied.len(), sealed + parts_now.len());
        // A stretch too short for a part, indexed, and one not indexed
        // yet: read through the key index and in bulk.
        fill(&log, 10);
        while !log.index_history(1 << 20).caught_up {}
        fill(&log, 5);
        assert!(!log.build_key_copy(&AtomicBool::new(false)));
        let all = truth(&log);
        check_every_key(&log, &all);
    }
    assert!(most_parts >= 3, "at most {most_parts} parts");
    assert!(replaced, "no segment sealed with parts");

    // A damaged part: one lookup fails, then the active segment is read
    // through its key index, and gets no more parts.
    fill(&log, 60);
    build_all(&log);
    let damaged = parts(dir.path());
    assert!(!damaged.is_empty());
    damage_middles(dir.path(), &damaged);
    let all = truth(&log);
    let end = log.high_watermark();
    let mut failed = 0;
    for k in 0..17 {
        let key = format!("k{k}");
        let rows = look_up_many(&log, &[&key], 0, end, usize::MAX).or_else(|e| {
            failed += 1;
            assert!(e.to_string().contains(".kpart"), "{e}");
            look_up_many(&log, &[&key], 0, end, usize::MAX)
        });
        assert_eq!(rows.unwrap(), expected(&all, &key, 0, end), "{key}");
    }
    assert_eq!(failed, 1, "one lookup meets the damage");
    assert!(parts(dir.path()).is_empty());
    let sealed = log.segment_count() - 1;
    fill(&log, 20);
    build_all(&log);
    if log.segment_count() - 1 == sealed {
        assert!(parts(dir.path()).is_empty(), "parts made after the damage");
    }
    check_every_key(&log, &truth(&log));
}

/// Parts merge four of a size class at a time, and a part larger than the
/// ones before it (made late) with them: however long the active segment
/// grows, it has few parts, and lookups answer through the merged ones
/// exactly as through the parts they replaced.
#[test]
fn the_active_segment_s_parts_merge_and_stay_few() {
    let dir = tempfile::tempdir().unwrap();
    // Parts from 16 KiB on: classes of 1-3, 4-15 and 16-63 units.
    let config = LogConfig {
        segment_bytes: 1024 * 1024,
        ..config()
    };
    let log = Log::open(dir.path(), config).unwrap();
    let mut seen = std::collections::BTreeSet::new();
    let mut most = 0;
    let mut steps = 0;
    // Steps of about one unit, and now and then of several (a builder
    // falling behind), until the segment is sealed.
    let batches = [110, 110, 110, 400, 60, 110, 700];
    while log.segment_count() == 1 {
        fill(&log, batches[steps % batches.len()]);
        build_all(&log);
        steps += 1;
        let now = parts(dir.path());
        most = most.max(now.len());
        assert!(now.len() <= 9, "step {steps}: {} parts", now.len());
        if log.segment_count() == 1 {
            // The lookups read every part.
            let found = log.key_batches(b"k0", 0, log.high_watermark(), usize::MAX);
            assert_eq!(found.copied.len(), now.len(), "step {steps}");
        }
        seen.extend(now.into_iter().map(|(name, _)| name));
        if steps % 5 == 0 {
            check_every_key(&log, &truth(&log));
        }
    }
    assert!(steps >= 15, "sealed after {steps} steps");
    assert!(
        seen.len() > 2 * most,
        "{} parts made, at most {most} at once",
        seen.len()
    );
    // The sealed segment's parts gave way to its whole copy.
    assert_eq!(copies(dir.path()).len(), 1);
    check_every_key(&log, &truth(&log));
}
