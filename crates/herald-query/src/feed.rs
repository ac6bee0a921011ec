//! Feeding stored record batches to the queries that follow one
//! partition: every record is decoded once and offered to every query
//! that has not counted it yet, so ten queries over a topic cost one
//! decode (and one decompression) of its batches, not ten.

use herald_filter::DecodedRecord;
use herald_records::{batches, RecordBatch};

use crate::{Alert, QueryState};

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
        for record in records.map_while(Result::ok) {
            let record = DecodedRecord::new(record);
            let offset = record.record().offset;
            let timestamp = record.record().timestamp;
            for follower in followers.iter_mut() {
                if offset < follower.from as i64 {
                    continue;
                }
                follower.records += 1;
                // A record the filter passes over changes no aggregate, so
                // no trigger's condition either.
                let counted = follower.state.observe(&record, timestamp);
                if counted && !follower.state.query().triggers.is_empty() {
                    follower.alerts.extend(follower.state.evaluate_triggers());
                }
            }
        }
    }
    outcome
}
