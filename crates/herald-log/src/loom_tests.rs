//! loom models of the append protocol: reserve, complete, advance the tail,
//! and seal/roll to the next segment, with two or three writers and a reader.
//!
//! Run with `RUSTFLAGS="--cfg herald_loom" cargo test -p herald-log --release --lib loom`.
//! Batch bytes are modelled by a `loom::cell::UnsafeCell` per 64-byte block
//! holding the header fields the tracker reads, so loom also checks that every
//! header is written before anyone reads it.

use loom::cell::UnsafeCell;
use loom::sync::atomic::{AtomicU64, Ordering};
use loom::sync::Arc;
use loom::thread;

use crate::commit::{BatchSizes, CommitTracker};
use crate::extent::Extent;
use crate::index::SegmentIndex;
use crate::reserve::{Reservation, ReserveWord};

/// One model segment: the real protocol types over cell-backed "bytes".
struct ModelSegment {
    reserve: ReserveWord,
    commit: CommitTracker,
    index: SegmentIndex,
    headers: Vec<UnsafeCell<(u32, u32)>>,
}

impl ModelSegment {
    fn new(capacity: u32) -> Self {
        let blocks = (capacity / 64 + 1) as usize;
        Self {
            reserve: ReserveWord::new(Extent::default(), capacity),
            commit: CommitTracker::new(capacity, Extent::default()),
            index: SegmentIndex::new(capacity, 64),
            headers: (0..blocks).map(|_| UnsafeCell::new((0, 0))).collect(),
        }
    }

    /// Writes and publishes a reserved batch, as `Segment::write` does.
    fn write(&self, start: Extent, bytes: u32, records: u32) {
        self.headers[(start.bytes / 64) as usize].with_mut(|h| {
            // SAFETY (model): the reservation makes this block ours alone.
            unsafe { *h = (bytes, records) }
        });
        self.index
            .record(start.bytes, bytes, start.records, i64::from(start.records));
        self.commit.publish(start, bytes, records, self);
    }

    fn is_complete(&self) -> bool {
        let (reserved, sealed) = self.reserve.load();
        sealed && self.commit.committed() == reserved
    }
}

impl BatchSizes for ModelSegment {
    fn batch_at(&self, position: u32) -> Option<(u32, u32)> {
        // SAFETY (model): loom reports a race if this read is not ordered
        // after the writer's store.
        Some(self.headers[(position / 64) as usize].with(|h| unsafe { *h }))
    }
}

/// Walks the committed prefix through the headers, as a reader does, and
/// returns its extent; checks it matches the tail.
fn walk_committed(segment: &ModelSegment) -> Extent {
    let committed = segment.commit.committed();
    let mut at = Extent::default();
    while at.bytes < committed.bytes {
        let (bytes, records) = segment
            .batch_at(at.bytes)
            .expect("a committed batch has a header");
        assert!(bytes >= 64, "a committed batch has its header written");
        at = Extent::new(at.records + records, at.bytes + bytes);
    }
    assert_eq!(at, committed, "the tail lies on a batch boundary");
    at
}

/// A model checker bounded so that the whole suite runs in a few minutes
/// on two cores; bugs in protocols this small show up within few preemptions.
fn bounded(preemptions: usize) -> loom::model::Builder {
    let mut builder = loom::model::Builder::new();
    builder.preemption_bound = Some(preemptions);
    builder
}

#[test]
fn loom_concurrent_appends_commit_a_dense_prefix() {
    bounded(3).check(|| {
        let segment = Arc::new(ModelSegment::new(4096));
        // Writer i appends one batch of (i + 1) * 64 bytes and i + 1 records.
        let writers: Vec<_> = (0..2u32)
            .map(|i| {
                let segment = Arc::clone(&segment);
                thread::spawn(move || {
                    let Reservation::Reserved { start } =
                        segment.reserve.reserve((i + 1) * 64, i + 1)
                    else {
                        panic!("fits");
                    };
                    segment.write(start, (i + 1) * 64, i + 1);
                    start
                })
            })
            .collect();
        let reader = {
            let segment = Arc::clone(&segment);
            thread::spawn(move || {
                let first = walk_committed(&segment);
                let second = walk_committed(&segment);
                assert!(second.records >= first.records, "the tail never moves back");
            })
        };
        let mut starts: Vec<Extent> = writers.into_iter().map(|w| w.join().unwrap()).collect();
        reader.join().unwrap();
        starts.sort_by_key(|s| s.records);
        // No gap, no overlap: the two ranges tile [0, 3) offsets and bytes.
        assert_eq!(starts[0], Extent::default());
        assert!(starts[1] == Extent::new(1, 64) || starts[1] == Extent::new(2, 128));
        // Every completed batch ends up committed: nobody is left behind.
        assert_eq!(segment.commit.committed(), Extent::new(3, 192));
    });
}

#[test]
fn loom_three_writers_never_lose_a_completed_batch() {
    bounded(2).check(|| {
        let segment = Arc::new(ModelSegment::new(4096));
        let writers: Vec<_> = (0..3)
            .map(|_| {
                let segment = Arc::clone(&segment);
                thread::spawn(move || {
                    let Reservation::Reserved { start } = segment.reserve.reserve(64, 1) else {
                        panic!("fits");
                    };
                    segment.write(start, 64, 1);
                })
            })
            .collect();
        for writer in writers {
            writer.join().unwrap();
        }
        assert_eq!(segment.commit.committed(), Extent::new(3, 192));
        assert_eq!(walk_committed(&segment), Extent::new(3, 192));
    });
}

#[test]
fn loom_batches_whose_completion_bits_live_in_different_words_are_not_left_behind() {
    bounded(3).check(|| {
        // A first batch of 4096 bytes puts the second batch's completion bit
        // in the next word of the bitmap, so the two writers share no
        // read-modify-write location and only the protocol orders them.
        let segment = Arc::new(ModelSegment::new(8192));
        let writers: Vec<_> = [4096u32, 64]
            .into_iter()
            .map(|bytes| {
                let segment = Arc::clone(&segment);
                thread::spawn(move || loop {
                    // Reserve in the given order: retry until it is our turn.
                    let (reserved, _) = segment.reserve.load();
                    let mine = if bytes == 4096 {
                        reserved.bytes == 0
                    } else {
                        reserved.bytes == 4096
                    };
                    if mine {
                        let Reservation::Reserved { start } = segment.reserve.reserve(bytes, 1)
                        else {
                            panic!("fits");
                        };
                        segment.write(start, bytes, 1);
                        return;
                    }
                    thread::yield_now();
                })
            })
            .collect();
        for writer in writers {
            writer.join().unwrap();
        }
        assert_eq!(segment.commit.committed(), Extent::new(2, 4160));
    });
}

/// Sentinel for "no writer has seen the seal yet".
const UNSET: u64 = u64::MAX;

#[test]
fn loom_roll_to_next_segment_keeps_offsets_dense_and_the_watermark_honest() {
    bounded(3).check(|| {
        // Room for exactly one 128-byte batch: one of the two writers seals.
        let first = Arc::new(ModelSegment::new(128));
        let second = Arc::new(ModelSegment::new(4096));
        let second_base = Arc::new(AtomicU64::new(UNSET));
        let writers: Vec<_> = (0..2)
            .map(|_| {
                let (first, second, second_base) =
                    (first.clone(), second.clone(), second_base.clone());
                thread::spawn(move || match first.reserve.reserve(128, 2) {
                    Reservation::Reserved { start } => {
                        first.write(start, 128, 2);
                        u64::from(start.records)
                    }
                    Reservation::Sealed { end } => {
                        // Every writer that sees the seal agrees on where the
                        // next segment starts.
                        let base = u64::from(end.records);
                        let seen = match second_base.compare_exchange(
                            UNSET,
                            base,
                            Ordering::AcqRel,
                            Ordering::Acquire,
                        ) {
                            Ok(_) => base,
                            Err(earlier) => earlier,
                        };
                        assert_eq!(seen, base);
                        let Reservation::Reserved { start } = second.reserve.reserve(128, 2) else {
                            panic!("fits");
                        };
                        second.write(start, 128, 2);
                        base + u64::from(start.records)
                    }
                })
            })
            .collect();
        let reader = {
            let (first, second) = (first.clone(), second.clone());
            thread::spawn(move || {
                // The high watermark as `Log::high_watermark` computes it: it
                // enters the next segment only once this one is complete.
                let mut last = 0;
                for _ in 0..2 {
                    let hw = if first.is_complete() {
                        u64::from(first.commit.committed().records)
                            + u64::from(walk_committed(&second).records)
                    } else {
                        u64::from(walk_committed(&first).records)
                    };
                    assert!(hw >= last);
                    last = hw;
                }
            })
        };
        let mut offsets: Vec<u64> = writers.into_iter().map(|w| w.join().unwrap()).collect();
        reader.join().unwrap();
        offsets.sort_unstable();
        assert_eq!(offsets, vec![0, 2], "no duplicate, no gap across the roll");
        // The sealing writer found the segment holding exactly the other batch.
        first.reserve.seal();
        assert!(first.is_complete());
        assert_eq!(first.commit.committed(), Extent::new(2, 128));
    });
}
