//! Large batches are written with a system call, small ones through the
//! mapping. Mixed on the same pages by concurrent writers, both must land
//! intact, stay intact across a reopen, and read back byte for byte.

mod common;

use std::collections::BTreeMap;
use std::sync::Arc;

use common::{decode, read_all, tagged_batch};
use herald_log::{Log, LogConfig};

const WRITERS: u64 = 4;
const BATCHES_PER_WRITER: u64 = 60;

fn config() -> LogConfig {
    LogConfig {
        segment_bytes: 8 * 1024 * 1024,
        index_interval_bytes: 4096,
        preallocate_bytes: 256 * 1024,
        max_batch_bytes: 1024 * 1024,
        ..common::small_config()
    }
}

/// Records in writer `w`'s `i`-th batch: a mix of small batches (a few
/// hundred bytes to 170 kB, copied into the mapping) and large ones (over
/// 600 kB, written with a system call), so that the two write paths
/// alternate and share pages.
fn records(w: u64, i: u64) -> u32 {
    match (w + i) % 4 {
        0 => 3_000 + 1_000 * (i % 3) as u32,
        1 => 20_000 + 1_000 * (i % 5) as u32,
        _ => 1 + (i % 7) as u32,
    }
}

#[test]
fn mixed_large_and_small_batches_read_back_intact_before_and_after_reopen() {
    let dir = tempfile::tempdir().unwrap();
    let log = Arc::new(Log::open(dir.path(), config()).unwrap());
    let writers: Vec<_> = (0..WRITERS)
        .map(|w| {
            let log = Arc::clone(&log);
            std::thread::spawn(move || {
                (0..BATCHES_PER_WRITER)
                    .map(|i| {
                        let batch = tagged_batch(records(w, i), (w << 32) | i, 0);
                        let appended = log.append(&batch).unwrap();
                        (appended.base_offset, batch)
                    })
                    .collect::<Vec<_>>()
            })
        })
        .collect();
    let mut sent: BTreeMap<u64, Vec<u8>> = BTreeMap::new();
    for writer in writers {
        sent.extend(writer.join().unwrap());
    }
    assert!(
        sent.values().any(|b| b.len() >= 600 * 1024) && sent.values().any(|b| b.len() < 1024),
        "both write paths were exercised"
    );

    let check = |log: &Log| {
        // `decode` validates every stored batch's CRC.
        let stored = read_all(log, 0, 512 * 1024);
        assert_eq!(stored.len(), sent.len());
        let mut next = 0;
        for ((base, count, tag), (sent_base, batch)) in stored.iter().zip(&sent) {
            assert_eq!(base, sent_base, "dense offsets");
            assert_eq!(*base, next);
            let (w, i) = (tag >> 32, tag & 0xffff_ffff);
            assert_eq!(*count, records(w, i));
            next += u64::from(*count);
            // Byte for byte, apart from the stamped base offset and leader
            // epoch.
            let slice = log.read(*base, 1).unwrap();
            let stored_batch = &slice.bytes[..batch.len()];
            assert_eq!(&stored_batch[8..12], &batch[8..12], "length at {base}");
            assert_eq!(&stored_batch[16..], &batch[16..], "batch at {base}");
            assert_eq!(decode(stored_batch), vec![(*base, *count, *tag)]);
        }
    };
    check(&log);
    let log = Arc::into_inner(log).expect("writers are done");
    drop(log);
    let reopened = Log::open(dir.path(), config()).unwrap();
    check(&reopened);
}
