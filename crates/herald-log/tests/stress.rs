//! Eight writers and four readers on one partition for a bounded time.

mod common;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::{decode, small_config, tagged_batch};
use herald_log::{Log, LogConfig};

const WRITERS: u64 = 8;
const READERS: usize = 4;
const RUN_FOR: Duration = Duration::from_secs(3);
const BATCHES_PER_WRITER_MAX: u64 = 20_000;

#[test]
fn concurrent_writers_and_readers_see_one_dense_ordered_log() {
    let dir = tempfile::tempdir().unwrap();
    let config = LogConfig {
        segment_bytes: 256 * 1024,
        ..small_config()
    };
    let log = Arc::new(Log::open(dir.path(), config).unwrap());
    let stop = Arc::new(AtomicBool::new(false));
    let deadline = Instant::now() + RUN_FOR;

    // Writer w tags its i-th batch w << 32 | i, with (w % 3) + 1 records.
    let writers: Vec<_> = (0..WRITERS)
        .map(|w| {
            let log = Arc::clone(&log);
            std::thread::spawn(move || {
                let mut written = 0;
                while written < BATCHES_PER_WRITER_MAX && Instant::now() < deadline {
                    log.append(&tagged_batch((w % 3) as u32 + 1, (w << 32) | written, 0))
                        .unwrap();
                    written += 1;
                }
                written
            })
        })
        .collect();
    // Readers follow the log; each keeps what it saw.
    let readers: Vec<_> = (0..READERS)
        .map(|r| {
            let (log, stop) = (Arc::clone(&log), Arc::clone(&stop));
            std::thread::spawn(move || {
                let mut seen = Vec::new();
                let mut offset = 0;
                loop {
                    let done = stop.load(Ordering::Acquire);
                    let slice = log.read(offset, 1024 << r).unwrap();
                    if slice.bytes.is_empty() {
                        if done {
                            return seen;
                        }
                        log.wait_for_data_blocking(offset, Duration::from_millis(50));
                        continue;
                    }
                    seen.extend(decode(&slice.bytes));
                    offset = slice.next_offset;
                }
            })
        })
        .collect();

    let written: Vec<u64> = writers.into_iter().map(|w| w.join().unwrap()).collect();
    stop.store(true, Ordering::Release);
    let final_log = common::read_all(&log, 0, 1 << 20);

    // Offsets are dense.
    let mut next = 0;
    for &(offset, count, _) in &final_log {
        assert_eq!(offset, next, "no gap, no overlap");
        next += u64::from(count);
    }
    assert_eq!(log.high_watermark(), next);
    // Every writer's batches appear once each, in its own order.
    let mut per_writer = vec![Vec::new(); WRITERS as usize];
    for &(_, count, tag) in &final_log {
        let writer = (tag >> 32) as usize;
        assert_eq!(u64::from(count), writer as u64 % 3 + 1);
        per_writer[writer].push(tag & 0xffff_ffff);
    }
    for (w, seq) in per_writer.iter().enumerate() {
        assert_eq!(
            seq.len() as u64,
            written[w],
            "writer {w} lost or duplicated a batch"
        );
        assert!(
            seq.windows(2).all(|p| p[0] + 1 == p[1]),
            "writer {w} out of order"
        );
    }
    // Every reader saw exactly the final log (a prefix that grew to all of it).
    for reader in readers {
        assert_eq!(reader.join().unwrap(), final_log);
    }
    assert!(
        final_log.len() > 1000,
        "the test did real work: {} batches",
        final_log.len()
    );
}
