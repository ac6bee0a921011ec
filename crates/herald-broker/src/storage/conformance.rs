//! The partition contract's conformance suite: what every backend behind
//! [`PartitionStorage`] must do, checked through the contract alone.
//!
//! A backend runs it by implementing [`Harness`] (make an empty partition;
//! close one and open it again, as across a restart) and calling each check,
//! or [`run_all`]. The embedded log runs it in this crate's tests; a
//! replicated or remote backend runs the same checks against itself.
//!
//! A backend may keep control batches of its own in a partition (a
//! replicated partition stores its Raft entries so), which take offsets as
//! Kafka's transaction markers do: the checks count offsets from where a
//! new partition's first append goes and look at data batches only.
//!
//! Each check panics with a message naming what the backend got wrong, as a
//! test assertion does. Waits are bounded by [`WAIT_BOUND`] only so that a
//! broken backend fails instead of hanging; no check measures time.

use std::time::Duration;

use herald_records::{testing, ValidBatch};

use super::{Acks, PartitionStorage, StorageError, StoredBatches};

/// How long a check waits for something the contract promises will happen
/// (data to wake a waiter); reached only by a broken backend.
pub const WAIT_BOUND: Duration = Duration::from_secs(20);

/// Makes partitions of the backend under test.
pub trait Harness {
    /// The backend.
    type Storage: PartitionStorage;

    /// A new, empty partition that accepts batches of at least 4 KiB.
    fn create(&mut self) -> Self::Storage;

    /// Closes `storage` cleanly and opens the same partition again, as
    /// across a broker restart.
    fn reopen(&mut self, storage: Self::Storage) -> Self::Storage;
}

/// Runs every check, each on a partition of its own.
pub async fn run_all<H: Harness>(harness: &mut H) {
    appends_get_consecutive_offsets_and_read_back_as_stored(harness).await;
    reads_are_bounded_by_their_own_high_watermark(harness).await;
    reads_outside_the_stored_range_are_out_of_range(harness).await;
    a_read_returns_whole_batches_and_at_least_one(harness).await;
    waiting_for_data_resolves_when_an_append_lands(harness).await;
    timestamps_find_the_first_record_at_or_after(harness).await;
    truncation_moves_the_log_start_and_never_back(harness).await;
    acknowledged_appends_survive_a_reopen(harness).await;
    an_oversized_batch_is_refused_and_nothing_is_placed(harness).await;
}

fn batch(count: u32, timestamp: i64) -> Vec<u8> {
    testing::batch(count, b"conformance-value", timestamp)
}

async fn append<S: PartitionStorage>(storage: &S, bytes: &[u8]) -> (u64, u64) {
    let valid = ValidBatch::new(bytes).expect("the suite builds valid batches");
    let pending = storage
        .append(valid, Acks::All)
        .expect("an append to a healthy partition is placed");
    let placed_at_once = pending.appended;
    let appended = pending
        .completion
        .await
        .expect("an append to a healthy partition completes");
    if storage.places_synchronously() {
        assert_eq!(
            placed_at_once,
            Some(appended),
            "a backend that places synchronously gives the offsets it completes with"
        );
    }
    (appended.base_offset, appended.last_offset)
}

/// The base offsets of the data batches in a read, in order: a backend
/// may keep control batches of its own in the partition (a replicated
/// partition's Raft entries), which take offsets as Kafka's transaction
/// markers do and which Kafka consumers skip.
fn base_offsets(read: &StoredBatches) -> Vec<u64> {
    herald_records::batches(&read.bytes)
        .map(|b| b.expect("reads return whole batches"))
        .map(|b| herald_records::BatchHeader::parse(b).expect("a whole batch has a header"))
        .filter(|h| !h.is_control())
        .map(|h| h.base_offset() as u64)
        .collect()
}

/// The data batches of a read, as bytes.
fn data_batches(read: &StoredBatches) -> Vec<&[u8]> {
    herald_records::batches(&read.bytes)
        .map(|b| b.expect("reads return whole batches"))
        .filter(|b| {
            !herald_records::BatchHeader::parse(b)
                .expect("a whole batch has a header")
                .is_control()
        })
        .collect()
}

/// Where a new partition's first append goes: 0, or past the control
/// batches a backend writes first (a replicated partition's first Raft
/// entries). Holds no data batch.
async fn origin<S: PartitionStorage>(storage: &S) -> u64 {
    let watermarks = storage.watermarks();
    let read = storage
        .read(watermarks.log_start_offset, 1 << 20)
        .await
        .expect("a new partition reads");
    assert!(
        base_offsets(&read).is_empty(),
        "a new partition holds no data"
    );
    watermarks.high_watermark
}

/// Appends get offsets one after the other, with no gap, and a read returns
/// each batch's bytes as appended, stamped with its base offset.
pub async fn appends_get_consecutive_offsets_and_read_back_as_stored<H: Harness>(h: &mut H) {
    let storage = h.create();
    let o = origin(&storage).await;
    let first = batch(3, 1_000);
    let second = batch(2, 2_000);
    assert_eq!(
        append(&storage, &first).await,
        (o, o + 2),
        "first batch's offsets"
    );
    assert_eq!(
        append(&storage, &second).await,
        (o + 3, o + 4),
        "second batch's offsets"
    );
    let watermarks = storage.watermarks();
    assert_eq!(
        watermarks.high_watermark,
        o + 5,
        "high watermark after two appends"
    );
    assert_eq!(
        watermarks.log_start_offset, 0,
        "log start of an untruncated partition"
    );
    let read = storage.read(0, 1 << 20).await.expect("read from 0");
    assert_eq!(
        base_offsets(&read),
        vec![o, o + 3],
        "both batches, in order"
    );
    assert_eq!(
        read.next_offset,
        o + 5,
        "the read ends at the high watermark"
    );
    let stored = data_batches(&read);
    assert_eq!(
        stored.iter().map(|b| b.len()).sum::<usize>(),
        first.len() + second.len()
    );
    // Bytes past the base offset (8) and the leader epoch (12..16), which
    // the partition stamps, are as produced.
    assert_eq!(&stored[0][16..], &first[16..], "first batch's bytes");
    let stats = storage.stats();
    assert!(
        stats.size_bytes >= (first.len() + second.len()) as u64,
        "stats count the stored bytes: {stats:?}"
    );
    let from_middle = storage
        .read(o + 4, 1 << 20)
        .await
        .expect("read from the middle");
    assert_eq!(
        base_offsets(&from_middle),
        vec![o + 3],
        "the batch holding the offset asked for"
    );
}

/// A read states the watermarks it was made at, and never carries a batch
/// at or past the high watermark it states.
pub async fn reads_are_bounded_by_their_own_high_watermark<H: Harness>(h: &mut H) {
    let storage = h.create();
    for round in 0..20 {
        append(&storage, &batch(2, 1_000 + round)).await;
        let read = storage.read(0, 1 << 20).await.expect("read from 0");
        let high_watermark = read.watermarks.high_watermark;
        assert_eq!(
            read.next_offset, high_watermark,
            "round {round}: read to the end"
        );
        for base in base_offsets(&read) {
            assert!(
                base < high_watermark,
                "round {round}: batch at {base} past {high_watermark}"
            );
        }
        assert!(read.watermarks.log_start_offset <= high_watermark);
    }
}

/// Offsets below the log start or above the high watermark are refused
/// with the range; reading at the high watermark is empty, not an error.
pub async fn reads_outside_the_stored_range_are_out_of_range<H: Harness>(h: &mut H) {
    let storage = h.create();
    let o = origin(&storage).await;
    append(&storage, &batch(4, 1_000)).await;
    let at_end = storage
        .read(o + 4, 1 << 20)
        .await
        .expect("read at the high watermark");
    assert!(at_end.bytes.is_empty(), "nothing at the high watermark");
    assert_eq!(at_end.next_offset, o + 4);
    assert_eq!(
        storage.read(o + 5, 1 << 20).await,
        Err(StorageError::OffsetOutOfRange {
            requested: o + 5,
            log_start_offset: 0,
            high_watermark: o + 4,
        }),
        "past the high watermark"
    );
}

/// `max_bytes` bounds a read to whole batches, but one batch is always
/// returned however small the limit.
pub async fn a_read_returns_whole_batches_and_at_least_one<H: Harness>(h: &mut H) {
    let storage = h.create();
    let o = origin(&storage).await;
    let one = batch(5, 1_000);
    for i in 0..4 {
        append(&storage, &batch(5, 1_000 + i)).await;
    }
    let tiny = storage.read(o, 1).await.expect("read with 1 byte");
    assert_eq!(base_offsets(&tiny), vec![o], "one whole batch");
    assert_eq!(tiny.next_offset, o + 5);
    let two = storage.read(o, one.len() * 2 + 1).await.expect("read two");
    assert_eq!(
        base_offsets(&two),
        vec![o, o + 5],
        "as many whole batches as fit"
    );
    assert_eq!(two.next_offset, o + 10);
}

/// A waiter parked at the high watermark wakes when an append lands.
pub async fn waiting_for_data_resolves_when_an_append_lands<H: Harness>(h: &mut H) {
    let storage = h.create();
    append(&storage, &batch(1, 1_000)).await;
    let high_watermark = storage.watermarks().high_watermark;
    let next = batch(1, 2_000);
    let waited = tokio::time::timeout(WAIT_BOUND, async {
        tokio::join!(storage.wait_for_data(high_watermark), async {
            tokio::task::yield_now().await;
            append(&storage, &next).await
        })
    })
    .await;
    assert!(waited.is_ok(), "the waiter was not woken by an append");
    assert!(storage.watermarks().high_watermark > high_watermark);
}

/// Timestamp lookups find the first record at or after the time asked,
/// and the largest timestamp's record.
pub async fn timestamps_find_the_first_record_at_or_after<H: Harness>(h: &mut H) {
    let storage = h.create();
    let o = origin(&storage).await;
    assert_eq!(
        storage.max_timestamp().await,
        Ok(None),
        "an empty partition"
    );
    // Records at 1000..1002, 2000..2002, 3000..3002 (1 ms apart).
    for ts in [1_000, 2_000, 3_000] {
        append(&storage, &batch(3, ts)).await;
    }
    let at = |offset, timestamp| Some(super::TimestampOffset { offset, timestamp });
    assert_eq!(storage.offset_for_timestamp(0).await, Ok(at(o, 1_000)));
    assert_eq!(
        storage.offset_for_timestamp(2_001).await,
        Ok(at(o + 4, 2_001))
    );
    assert_eq!(
        storage.offset_for_timestamp(2_500).await,
        Ok(at(o + 6, 3_000))
    );
    assert_eq!(storage.offset_for_timestamp(9_999).await, Ok(None));
    assert_eq!(storage.max_timestamp().await, Ok(at(o + 8, 3_002)));
}

/// Truncation moves the log start up (durably), refuses reads below it,
/// never moves it back, and refuses an offset past the high watermark. A
/// backend may record the truncation in the log itself (a replicated
/// partition's DeleteRecords entry), so the high watermark may move with
/// it.
pub async fn truncation_moves_the_log_start_and_never_back<H: Harness>(h: &mut H) {
    let storage = h.create();
    let o = origin(&storage).await;
    for ts in [1_000, 2_000, 3_000] {
        append(&storage, &batch(3, ts)).await;
    }
    // Inside the second batch (o+3..=o+5).
    let cut = o + 4;
    assert_eq!(storage.truncate_before(cut).await, Ok(cut));
    assert_eq!(storage.watermarks().log_start_offset, cut);
    assert!(
        matches!(
            storage.read(o + 2, 1 << 20).await,
            Err(StorageError::OffsetOutOfRange {
                requested,
                log_start_offset,
                ..
            }) if requested == o + 2 && log_start_offset == cut
        ),
        "a read below the log start is out of range"
    );
    let read = storage
        .read(cut, 1 << 20)
        .await
        .expect("read at the log start");
    assert_eq!(read.watermarks.log_start_offset, cut);
    assert_eq!(
        base_offsets(&read),
        vec![o + 3, o + 6],
        "the batch holding the log start is served whole, and what follows"
    );
    let found = storage.offset_for_timestamp(0).await.expect("lookup");
    assert!(
        found.is_some_and(|f| f.offset >= cut),
        "a timestamp lookup answers no offset below the log start: {found:?}"
    );
    assert_eq!(
        storage.truncate_before(o + 2).await,
        Ok(cut),
        "never moves back"
    );
    let high_watermark = storage.watermarks().high_watermark;
    assert!(
        matches!(
            storage.truncate_before(high_watermark + 1).await,
            Err(StorageError::OffsetOutOfRange { requested, .. }) if requested == high_watermark + 1
        ),
        "past the high watermark"
    );
    let storage = h.reopen(storage);
    assert_eq!(
        storage.watermarks().log_start_offset,
        cut,
        "the log start survives a reopen"
    );
    let high_watermark = storage.watermarks().high_watermark;
    assert_eq!(
        storage.truncate_before(high_watermark).await,
        Ok(high_watermark),
        "up to the high watermark"
    );
    let rest = storage
        .read(high_watermark, 1 << 20)
        .await
        .expect("read at the old end");
    assert!(base_offsets(&rest).is_empty(), "no data is left");
}

/// Appends that completed are all there, in order, after a reopen.
pub async fn acknowledged_appends_survive_a_reopen<H: Harness>(h: &mut H) {
    let storage = h.create();
    let mut expected = Vec::new();
    for i in 0..10 {
        let (base, _) = append(&storage, &batch(2, 1_000 + i)).await;
        expected.push(base);
    }
    let end = storage.watermarks().high_watermark;
    let storage = h.reopen(storage);
    assert!(storage.watermarks().high_watermark >= end, "nothing lost");
    let read = storage.read(0, 1 << 20).await.expect("read after reopen");
    assert_eq!(base_offsets(&read), expected);
    let (base, last) = append(&storage, &batch(1, 5_000)).await;
    assert!(base >= end && last == base, "appends go on after a reopen");
}

/// A batch over the partition's limit is refused with the sizes, and
/// nothing is placed.
pub async fn an_oversized_batch_is_refused_and_nothing_is_placed<H: Harness>(h: &mut H) {
    let storage = h.create();
    let max = storage.max_batch_bytes();
    let records = u32::try_from(max / 16 + 1).unwrap_or(u32::MAX);
    let big = batch(records, 1_000);
    assert!(big.len() > max, "the suite's batch must exceed the limit");
    let valid = ValidBatch::new(&big).expect("valid");
    match storage.append(valid, Acks::Leader) {
        Err(StorageError::TooLarge { size, max: limit }) => {
            assert_eq!((size, limit), (big.len(), max));
        }
        Err(other) => panic!("an oversized batch got {other:?}, not TooLarge"),
        Ok(_) => panic!("an oversized batch was placed"),
    }
    assert_eq!(
        base_offsets(&storage.read(0, 1 << 20).await.expect("read")),
        Vec::<u64>::new(),
        "nothing placed"
    );
}
