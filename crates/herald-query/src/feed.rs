//! Feeding stored record batches to the queries that follow one
//! partition: every record is decoded once and offered to every query
//! that has not counted it yet, so ten queries over a topic cost one
//! decode (and one decompression) of its batches, not ten.

use herald_filter::{Columns, DecodedRecord, HeaderName};
use herald_records::{batches, RecordBatch};

use crate::{Alert, QueryState, RecordHashes, CHUNK_RECORDS};

/// Most records of a batch decoded at a time (and read out into columns a
/// chunk at a time, the columns' arrays reused): a batch of many small
/// records is not decoded whole.
const GROUP_RECORDS: usize = 16 * CHUNK_RECORDS;

/// One query's share of a feed.
#[derive(Debug)]
pub struct Follower<'a> {
    /// The first offset this query has not counted: records below it are
    /// passed over (it read them before, or joined later).
    pub from: u64,
    /// Its state.
    pub state: &'a mut QueryState,
    /// Alerts raised by this feed, in record order.
    pub alerts: Vec<Alert>,
    /// Records offered to its filter by this feed.
    pub records: u64,
}

impl<'a> Follower<'a> {
    /// A follower that has counted everything below `from`.
    pub fn new(from: u64, state: &'a mut QueryState) -> Self {
        Self {
            from,
            state,
            alerts: Vec::new(),
            records: 0,
        }
    }
}

/// What a feed met that no query could count.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct FeedOutcome {
    /// Batches whose records could not be read (an unknown codec, damaged
    /// compressed data); they are passed over.
    pub unreadable_batches: u32,
}

/// Offers every record of `bytes` (whole stored batches, as the log
/// answers a read) to each follower whose `from` it has reached, in
/// offset order, evaluating a follower's triggers after each record it
/// counts so an alert is raised exactly where its condition comes to
/// hold. Control batches (transaction markers) are not records and are
/// skipped. `scratch` holds decompressed records between calls.
pub fn feed_batches(
    bytes: &[u8],
    followers: &mut [Follower<'_>],
    scratch: &mut Vec<u8>,
) -> FeedOutcome {
    let mut outcome = FeedOutcome::default();
    let Some(lowest) = followers.iter().map(|f| f.from).min() else {
        return outcome;
    };
    let mut hashes = RecordHashes::default();
    // Every header some query tests, read out of each chunk once.
    let mut headers: Vec<HeaderName> = Vec::new();
    for follower in followers.iter() {
        let Some(filter) = &follower.state.query().filter else {
            continue;
        };
        for name in filter.header_names() {
            if !headers.contains(name) {
                headers.push(name.clone());
            }
        }
    }
    for batch in batches(bytes).map_while(Result::ok) {
        let Ok(batch) = RecordBatch::new(batch) else {
            // Damaged framing: nothing past it can be split into batches.
            outcome.unreadable_batches += 1;
            break;
        };
        let header = batch.header();
        if header.is_control() || header.last_offset() < lowest as i64 {
            continue;
        }
        let Ok(records) = batch.records(scratch) else {
            outcome.unreadable_batches += 1;
            continue;
        };
        let mut records = records.map_while(Result::ok).map(DecodedRecord::new);
        let records_count = usize::try_from(header.records_count()).unwrap_or(0);
        let mut group = Vec::with_capacity(records_count.clamp(1, GROUP_RECORDS));
        loop {
            group.clear();
            group.extend(records.by_ref().take(GROUP_RECORDS));
            if group.is_empty() {
                break;
            }
            let mut columns = Columns::new(&headers);
            for chunk in group.chunks(CHUNK_RECORDS) {
                hashes.clear();
                columns.read(chunk);
                offer(&columns, followers, &mut hashes);
            }
        }
    }
    outcome
}

/// Offers the chunk read out into `columns` (at most [`CHUNK_RECORDS`]
/// records) to each follower whose `from` it has reached.
fn offer(
    columns: &Columns<'_, DecodedRecord<'_>>,
    followers: &mut [Follower<'_>],
    hashes: &mut RecordHashes,
) {
    let chunk = columns.records();
    let lowest = chunk.iter().map(|r| r.record().offset).min().unwrap_or(0);
    let all = u64::MAX >> (CHUNK_RECORDS - chunk.len().clamp(1, CHUNK_RECORDS));
    for follower in followers.iter_mut() {
        let from = follower.from as i64;
        let candidates = if lowest >= from {
            all
        } else {
            chunk
                .iter()
                .enumerate()
                .filter(|(_, r)| r.record().offset >= from)
                .fold(0u64, |mask, (at, _)| mask | 1 << at)
        };
        if candidates == 0 {
            continue;
        }
        follower.records += u64::from(candidates.count_ones());
        follower
            .state
            .observe_chunk(columns, candidates, hashes, &mut follower.alerts);
    }
}
