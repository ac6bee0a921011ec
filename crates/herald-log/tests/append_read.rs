//! Appending and reading back through one log.

mod common;

use common::{decode, read_all, small_config, tagged_batch, PATIENCE};
use herald_log::{AppendError, BatchError, Log, ReadError};
use herald_records::testing;
use std::sync::Arc;

#[test]
fn offsets_are_dense_and_reads_return_what_was_appended() {
    let dir = tempfile::tempdir().unwrap();
    let log = Log::open(dir.path(), small_config()).unwrap();
    let a = log.append(&tagged_batch(3, 1, 0)).unwrap();
    let b = log.append(&tagged_batch(2, 2, 0)).unwrap();
    assert_eq!((a.base_offset, a.last_offset), (0, 2));
    assert_eq!((b.base_offset, b.last_offset), (3, 4));
    assert_eq!(log.high_watermark(), 5);
    assert_eq!(read_all(&log, 0, 1 << 20), vec![(0, 3, 1), (3, 2, 2)]);
}

#[test]
fn a_mid_batch_offset_returns_the_batch_that_contains_it() {
    let dir = tempfile::tempdir().unwrap();
    let log = Log::open(dir.path(), small_config()).unwrap();
    log.append(&tagged_batch(5, 1, 0)).unwrap();
    log.append(&tagged_batch(5, 2, 0)).unwrap();
    let slice = log.read(7, 1 << 20).unwrap();
    assert_eq!(decode(&slice.bytes), vec![(5, 5, 2)]);
    assert_eq!(slice.next_offset, 10);
}

#[test]
fn at_least_one_whole_batch_is_returned_even_above_max_bytes() {
    let dir = tempfile::tempdir().unwrap();
    let log = Log::open(dir.path(), small_config()).unwrap();
    log.append(&tagged_batch(50, 1, 0)).unwrap();
    log.append(&tagged_batch(1, 2, 0)).unwrap();
    let slice = log.read(0, 10).unwrap();
    assert_eq!(decode(&slice.bytes), vec![(0, 50, 1)]);
    assert_eq!(slice.next_offset, 50);
}

#[test]
fn max_bytes_cuts_at_a_batch_boundary() {
    let dir = tempfile::tempdir().unwrap();
    let log = Log::open(dir.path(), small_config()).unwrap();
    let one = tagged_batch(1, 0, 0).len();
    for tag in 0..20 {
        log.append(&tagged_batch(1, tag, 0)).unwrap();
    }
    let slice = log.read(0, one * 3 + one / 2).unwrap();
    assert_eq!(decode(&slice.bytes).len(), 3);
    assert_eq!(slice.next_offset, 3);
}

#[test]
fn reading_at_the_high_watermark_is_empty_and_beyond_it_out_of_range() {
    let dir = tempfile::tempdir().unwrap();
    let log = Log::open(dir.path(), small_config()).unwrap();
    log.append(&tagged_batch(2, 1, 0)).unwrap();
    let at_end = log.read(2, 1024).unwrap();
    assert!(at_end.bytes.is_empty());
    assert_eq!(at_end.next_offset, 2);
    assert!(matches!(
        log.read(3, 1024),
        Err(ReadError::OffsetOutOfRange { requested: 3, .. })
    ));
}

#[test]
fn reads_span_many_segments_in_order() {
    let dir = tempfile::tempdir().unwrap();
    let log = Log::open(dir.path(), small_config()).unwrap();
    for tag in 0..1000 {
        log.append(&tagged_batch(3, tag, 0)).unwrap();
    }
    assert!(
        log.segment_count() > 5,
        "segments rolled: {}",
        log.segment_count()
    );
    let batches = read_all(&log, 0, 4096);
    assert_eq!(batches.len(), 1000);
    for (i, (offset, count, tag)) in batches.into_iter().enumerate() {
        assert_eq!((offset, count, tag), (i as u64 * 3, 3, i as u64));
    }
}

#[test]
fn invalid_and_oversized_batches_are_refused_and_change_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let log = Log::open(dir.path(), small_config()).unwrap();
    log.append(&tagged_batch(1, 1, 0)).unwrap();
    let mut corrupt = tagged_batch(1, 2, 0);
    let last = corrupt.len() - 1;
    corrupt[last] ^= 1;
    assert!(matches!(
        log.append(&corrupt),
        Err(AppendError::InvalidBatch(BatchError::CrcMismatch { .. }))
    ));
    let huge = testing::batch(1, &vec![7u8; 9000], 0);
    assert!(matches!(
        log.append(&huge),
        Err(AppendError::TooLarge { .. })
    ));
    assert!(matches!(
        log.append(&[0u8; 30]),
        Err(AppendError::InvalidBatch(_))
    ));
    assert_eq!(log.high_watermark(), 1);
    assert_eq!(read_all(&log, 0, 1 << 20), vec![(0, 1, 1)]);
}

#[test]
fn a_waiting_reader_wakes_when_data_arrives() {
    let dir = tempfile::tempdir().unwrap();
    let log = Arc::new(Log::open(dir.path(), small_config()).unwrap());
    let reader = {
        let log = Arc::clone(&log);
        std::thread::spawn(move || log.wait_for_data_blocking(0, PATIENCE))
    };
    log.append(&tagged_batch(1, 1, 0)).unwrap();
    assert!(reader.join().unwrap());
}

#[test]
fn waiting_without_data_times_out() {
    let dir = tempfile::tempdir().unwrap();
    let log = Log::open(dir.path(), small_config()).unwrap();
    assert!(!log.wait_for_data_blocking(0, std::time::Duration::from_millis(20)));
}

#[test]
fn appends_after_close_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let log = Log::open(dir.path(), small_config()).unwrap();
    log.close().unwrap();
    assert!(matches!(
        log.append(&tagged_batch(1, 1, 0)),
        Err(AppendError::Closed)
    ));
}

#[test]
fn timestamps_find_the_first_record_at_or_after_and_the_maximum() {
    let dir = tempfile::tempdir().unwrap();
    let log = Log::open(dir.path(), small_config()).unwrap();
    // Batches of 10 records with timestamps 1000.., 2000.., ...
    for i in 0..200 {
        log.append(&tagged_batch(10, i, 1000 * (i as i64 + 1)))
            .unwrap();
    }
    let found = log.offset_for_timestamp(50_003).unwrap();
    assert_eq!((found.offset, found.timestamp), (49 * 10 + 3, 50_003));
    let first = log.offset_for_timestamp(0).unwrap();
    assert_eq!(first.offset, 0);
    assert!(log.offset_for_timestamp(10_000_000).is_none());
    let max = log.max_timestamp().unwrap();
    assert_eq!((max.offset, max.timestamp), (1999, 200_009));
}

#[test]
fn async_wait_resolves_on_append() {
    let dir = tempfile::tempdir().unwrap();
    let log = Arc::new(Log::open(dir.path(), small_config()).unwrap());
    let waiter = {
        let log = Arc::clone(&log);
        std::thread::spawn(move || futures_lite_block_on(log.wait_for_data(4)))
    };
    for tag in 0..5 {
        log.append(&tagged_batch(1, tag, 0)).unwrap();
    }
    waiter.join().unwrap();
    assert!(log.high_watermark() > 4);
}

/// A minimal executor: polls the future, parking the thread between wakes.
fn futures_lite_block_on<F: std::future::Future>(future: F) -> F::Output {
    use std::task::{Context, Poll, Wake, Waker};
    struct Unpark(std::thread::Thread);
    impl Wake for Unpark {
        fn wake(self: Arc<Self>) {
            self.0.unpark();
        }
    }
    let waker = Waker::from(Arc::new(Unpark(std::thread::current())));
    let mut cx = Context::from_waker(&waker);
    let mut future = std::pin::pin!(future);
    loop {
        if let Poll::Ready(out) = future.as_mut().poll(&mut cx) {
            return out;
        }
        std::thread::park_timeout(PATIENCE);
    }
}

#[test]
fn a_retired_log_refuses_appends_and_leaves_its_directory_alone() {
    let parent = tempfile::tempdir().unwrap();
    let dir = parent.path().join("topic-0");
    let log = Log::open(&dir, small_config()).unwrap();
    log.append(&tagged_batch(2, 0, 0)).unwrap();
    log.retire();
    assert!(matches!(
        log.append(&tagged_batch(2, 1, 0)),
        Err(AppendError::Closed)
    ));
    // A deleted topic's directory is set aside and its name may be taken by
    // a new topic at once: the retired log's maintenance must not write
    // there, whatever is due.
    std::fs::rename(&dir, parent.path().join("topic-0.aside")).unwrap();
    std::fs::create_dir(&dir).unwrap();
    let far_future = std::time::SystemTime::now() + std::time::Duration::from_secs(1 << 30);
    log.maintain(far_future).unwrap();
    drop(log);
    assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 0);
}

#[test]
fn a_read_stops_at_the_visible_end_it_is_given() {
    let dir = tempfile::tempdir().unwrap();
    let log = Log::open(dir.path(), small_config()).unwrap();
    let mut starts = Vec::new();
    for tag in 0..400u64 {
        starts.push(log.append(&tagged_batch(2, tag, 0)).unwrap().base_offset);
    }
    assert!(log.segment_count() > 2);
    for &end in &[starts[1], starts[150], starts[399], log.high_watermark()] {
        let mut offset = 0;
        let mut seen = Vec::new();
        loop {
            let slice = log.read_visible(offset, 700, end).unwrap();
            assert_eq!(slice.high_watermark, end);
            if slice.bytes.is_empty() {
                break;
            }
            seen.extend(decode(&slice.bytes));
            offset = slice.next_offset;
        }
        assert_eq!(
            seen.len() as u64,
            end / 2,
            "every batch below {end}, none above"
        );
        assert!(seen.iter().all(|&(o, _, _)| o < end));
    }
    assert!(matches!(
        log.read_visible(starts[10] + 2, 700, starts[10]),
        Err(ReadError::OffsetOutOfRange { .. })
    ));
}

#[test]
fn bytes_between_counts_the_batches_of_an_offset_range() {
    let dir = tempfile::tempdir().unwrap();
    let log = Log::open(dir.path(), common::small_config()).unwrap();
    let batch = common::tagged_batch(2, 0, 0);
    for tag in 0..300 {
        log.append(&common::tagged_batch(2, tag, 0)).unwrap();
    }
    let per = batch.len() as u64;
    assert!(log.segment_count() > 1, "the range crosses segments");
    assert_eq!(log.bytes_between(0, 600), 300 * per);
    assert_eq!(log.bytes_between(10, 20), 5 * per);
    assert_eq!(
        log.bytes_between(0, 10_000),
        300 * per,
        "clamped to the log"
    );
    assert_eq!(log.bytes_between(20, 20), 0);
}

#[test]
fn a_read_until_an_offset_keeps_the_batch_holding_it_and_stops_after() {
    let dir = tempfile::tempdir().unwrap();
    let log = Log::open(dir.path(), small_config()).unwrap();
    for tag in 0..10 {
        log.append(&tagged_batch(3, tag, 0)).unwrap();
    }
    // Offset 7 is inside the batch 6..9: it is kept, the rest is not.
    let slice = log.read_until(0, 1 << 20, 8).unwrap();
    assert_eq!(decode(&slice.bytes), vec![(0, 3, 0), (3, 3, 1), (6, 3, 2)]);
    assert_eq!(slice.next_offset, 9);
    assert_eq!(
        slice.region.as_ref().map(|r| r.len()),
        Some(slice.bytes.len())
    );
    // At a batch boundary the batch starting there is not read.
    let slice = log.read_until(3, 1 << 20, 9).unwrap();
    assert_eq!(decode(&slice.bytes), vec![(3, 3, 1), (6, 3, 2)]);
    // Past the end it reads as far as `read` does.
    assert_eq!(
        log.read_until(0, 1 << 20, 1000).unwrap().bytes,
        log.read(0, 1 << 20).unwrap().bytes
    );
}
