//! Reads of a live log whose committed bytes were damaged underneath it.
//!
//! Every batch is validated before it is written, so only a fault in the
//! write path (or someone writing into the segment file) can damage
//! committed bytes. Readers must then stop at the damage: no panic, no
//! endless walk, and the batches before it still served.

mod common;

use std::fs::{self, OpenOptions};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::time::Duration;

use common::{decode, small_config, tagged_batch};
use herald_log::Log;

/// Batches written; each holds 2 records.
const BATCHES: u64 = 10;
/// The batch whose header is damaged.
const DAMAGED: u64 = 5;
/// Offset of `batchLength` in a batch header.
const BATCH_LENGTH_AT: u64 = 8;

fn only_segment(dir: &Path) -> PathBuf {
    let files: Vec<PathBuf> = fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "log"))
        .collect();
    assert_eq!(files.len(), 1, "the batches fit one segment");
    files.into_iter().next().unwrap()
}

/// Runs `check` on another thread and fails if it does not finish in time:
/// a reader spinning on a bad length must fail the test, not hang it.
fn within_time_limit(check: impl FnOnce() + Send + 'static) {
    let (done, finished) = mpsc::channel();
    let worker = std::thread::spawn(move || {
        check();
        let _ = done.send(());
    });
    match finished.recv_timeout(Duration::from_secs(20)) {
        Ok(()) => worker.join().unwrap(),
        // The sender is dropped without a send when `check` panicked.
        Err(mpsc::RecvTimeoutError::Disconnected) => {
            std::panic::resume_unwind(worker.join().unwrap_err())
        }
        Err(mpsc::RecvTimeoutError::Timeout) => {
            panic!("reading a damaged log did not finish in 20 s")
        }
    }
}

fn damaged_log(batch_length: i32) -> (tempfile::TempDir, Log) {
    let dir = tempfile::tempdir().unwrap();
    let log = Log::open(dir.path(), small_config()).unwrap();
    let batch_bytes = tagged_batch(2, 0, 0).len() as u64;
    for tag in 0..BATCHES {
        log.append(&tagged_batch(2, tag, 1_000 + tag as i64))
            .unwrap();
    }
    let file = OpenOptions::new()
        .write(true)
        .open(only_segment(dir.path()))
        .unwrap();
    // The file and the log's mapping share the page cache, so the log sees
    // the damage at once, as it would a stray write of its own.
    file.write_all_at(
        &batch_length.to_be_bytes(),
        DAMAGED * batch_bytes + BATCH_LENGTH_AT,
    )
    .unwrap();
    (dir, log)
}

fn readers_stop_at_the_damage(batch_length: i32) {
    let (dir, log) = damaged_log(batch_length);
    let batch_bytes = tagged_batch(2, 0, 0).len();
    within_time_limit(move || {
        // A limit short of the damage finds batch boundaries as usual.
        let short = log.read(0, 3 * batch_bytes).expect("offset 0 is in range");
        assert_eq!(decode(&short.bytes), vec![(0, 2, 0), (2, 2, 1), (4, 2, 2)]);

        // A limit at the damaged batch's end walks into it (the index
        // entry below the limit is at or before it) and stops there: every
        // batch before it is served, and the next offset is the damaged one.
        let limit = (DAMAGED as usize + 1) * batch_bytes;
        let walked = log.read(0, limit).expect("offset 0 is in range");
        let expected: Vec<(u64, u32, u64)> = (0..DAMAGED).map(|t| (2 * t, 2, t)).collect();
        assert_eq!(decode(&walked.bytes), expected);
        assert_eq!(walked.next_offset, 2 * DAMAGED);

        // A limit past the tail needs no walk: the bytes go out as stored,
        // as Kafka serves them, and the consumer's CRC check refuses them.
        let whole = log.read(0, 1 << 20).expect("offset 0 is in range");
        assert_eq!(whole.next_offset, 2 * BATCHES);
        assert_eq!(
            herald_records::batches(&whole.bytes)
                .map_while(Result::ok)
                .count() as u64,
            DAMAGED,
            "the damaged batch ends the well-framed prefix"
        );

        // A read at the damaged batch serves it as stored (the consumer
        // refuses it, as its framing shows), and the rest after it.
        let at = log.read(2 * DAMAGED, 1 << 20).expect("in range");
        assert!(
            matches!(herald_records::batches(&at.bytes).next(), Some(Err(_))),
            "the damaged batch comes first and does not frame"
        );
        assert_eq!(at.next_offset, 2 * BATCHES);

        // Past the damage, the index entry below the offset lies beyond the
        // damaged batch: the read starts there and serves whole batches.
        let past = log.read(2 * (DAMAGED + 1) + 1, 1 << 20).expect("in range");
        for (offset, count, tag) in decode(&past.bytes) {
            assert!(offset > 2 * DAMAGED, "offset {offset} lies past the damage");
            assert_eq!((offset, count), (2 * tag, 2));
        }

        // Timestamp lookups walk the same headers.
        let _ = log.offset_for_timestamp(1_000 + BATCHES as i64 - 1);
        let _ = log.max_timestamp();

        // Appends go on, and stay readable, behind the damaged batch.
        let next = log.append(&tagged_batch(2, BATCHES, 5_000)).unwrap();
        assert_eq!(next.base_offset, 2 * BATCHES);
        let tail = log.read(2 * BATCHES, 1 << 20).expect("in range");
        assert_eq!(decode(&tail.bytes), vec![(2 * BATCHES, 2, BATCHES)]);
        drop(dir);
    });
}

#[test]
fn a_zero_batch_length_stops_readers_at_the_damaged_batch() {
    readers_stop_at_the_damage(0);
}

#[test]
fn a_batch_length_past_the_tail_stops_readers_at_the_damaged_batch() {
    readers_stop_at_the_damage(0x7fff_0000);
}

#[test]
fn a_negative_batch_length_stops_readers_at_the_damaged_batch() {
    readers_stop_at_the_damage(-1);
}
