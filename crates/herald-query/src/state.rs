//! A query's running state: its aggregates per time bucket (by record
//! timestamp), kept for the newest `retain_buckets` buckets, and its
//! triggers' state. Fed record by record; nothing here reads a clock, so
//! the same records give the same results and alerts.

use std::collections::VecDeque;

use herald_filter::{selected, Columns, DecodedRecord, FieldRef, Fields};
use serde::Serialize;

use crate::hll::Hll;
use crate::spec::{Comparison, CompiledAggregate, CompiledQuery, Function};

/// One aggregate's value in one bucket.
#[derive(Debug, Clone)]
enum Cell {
    Count(u64),
    Sum(f64),
    Min(Option<f64>),
    Max(Option<f64>),
    Distinct(Box<Hll>),
}

impl Cell {
    fn new(function: Function) -> Self {
        match function {
            Function::Count => Cell::Count(0),
            Function::Sum => Cell::Sum(0.0),
            Function::Min => Cell::Min(None),
            Function::Max => Cell::Max(None),
            Function::Distinct => Cell::Distinct(Box::default()),
        }
    }

    /// Adds `other` (of the same function) in.
    fn merge(&mut self, other: &Cell) {
        match (self, other) {
            (Cell::Count(a), Cell::Count(b)) => *a += b,
            (Cell::Sum(a), Cell::Sum(b)) => *a += b,
            (Cell::Min(a), Cell::Min(b)) => *a = min(*a, *b),
            (Cell::Max(a), Cell::Max(b)) => *a = max(*a, *b),
            (Cell::Distinct(a), Cell::Distinct(b)) => a.merge(b),
            _ => {}
        }
    }

    /// The value it shows; `None` for a min or max over no number.
    fn value(&self) -> Option<f64> {
        match self {
            Cell::Count(n) => Some(*n as f64),
            Cell::Sum(s) => Some(*s),
            Cell::Min(v) | Cell::Max(v) => *v,
            Cell::Distinct(h) => Some(h.estimate().round()),
        }
    }
}

/// The start of the bucket of `width` ms holding `timestamp`. Timestamps
/// are the producers' to choose: one in the first bucket below
/// `i64::MIN` is counted in the bucket starting there.
fn bucket_start(timestamp: i64, width: i64) -> i64 {
    timestamp
        .checked_sub(timestamp.rem_euclid(width))
        .unwrap_or(i64::MIN)
}

/// Whether `timestamp` falls in the bucket of `width` starting at `start`.
fn in_bucket(timestamp: i64, start: i64, width: i64) -> bool {
    timestamp >= start && timestamp.checked_sub(start).is_some_and(|d| d < width)
}

/// The window of `buckets` buckets of `width` ending with the one starting
/// at `newest`: its first millisecond and the one after it (saturating at
/// the ends of time).
fn window(newest: i64, width: i64, buckets: u64) -> (i64, i64) {
    let end = newest.saturating_add(width);
    let span = i64::try_from(buckets)
        .unwrap_or(i64::MAX)
        .saturating_mul(width);
    (end.saturating_sub(span), end)
}

/// Counts the `matched` records of `chunk` into `cell`, in order, as
/// counting them one at a time does; answers whether the cell's value
/// moved one way only on the way (a distinct count's estimate is not
/// known to).
fn fold_in(
    cell: &mut Cell,
    aggregate: &CompiledAggregate,
    chunk: &[DecodedRecord<'_>],
    matched: u64,
    hashes: &mut RecordHashes,
) -> bool {
    let numbers = |at: usize| aggregate.field.as_ref().and_then(|f| f.number(&chunk[at]));
    match cell {
        Cell::Count(n) => {
            *n += u64::from(matched.count_ones());
            true
        }
        Cell::Sum(sum) => {
            let (mut up, mut down) = (false, false);
            for x in selected(matched).filter_map(numbers) {
                *sum += x;
                up |= x > 0.0;
                down |= x < 0.0;
            }
            !(up && down)
        }
        // From no number to the first, a min or a max moves both ways as
        // a condition sees it (`min > 5` goes from false to true to false
        // over 10 then 3): one way only once it holds a number.
        Cell::Min(v) => {
            let had = v.is_some();
            for x in selected(matched).filter_map(numbers) {
                *v = min(*v, Some(x));
            }
            had || v.is_none()
        }
        Cell::Max(v) => {
            let had = v.is_some();
            for x in selected(matched).filter_map(numbers) {
                *v = max(*v, Some(x));
            }
            had || v.is_none()
        }
        Cell::Distinct(sketch) => {
            if let Some(field) = &aggregate.field {
                for at in selected(matched) {
                    if let Some(hash) = hashes.hash_of(field, &chunk[at], at) {
                        sketch.insert_hash(hash);
                    }
                }
            }
            false
        }
    }
}

fn min(a: Option<f64>, b: Option<f64>) -> Option<f64> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

fn max(a: Option<f64>, b: Option<f64>) -> Option<f64> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.max(b)),
        (a, b) => a.or(b),
    }
}

/// A trigger's condition coming to hold: what is told to consumers of
/// the alerts topic and counted in metrics.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Alert {
    /// The query.
    pub query: String,
    /// The trigger.
    pub trigger: String,
    /// The aggregate it watches.
    pub aggregate: String,
    /// Its value over the window.
    pub value: f64,
    /// The comparison.
    pub op: Comparison,
    /// The threshold.
    pub threshold: f64,
    /// The window's first millisecond (by record timestamp).
    pub window_start_ms: i64,
    /// The millisecond after the window.
    pub window_end_ms: i64,
}

/// One bucket of results.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct BucketRow {
    /// The bucket's first millisecond.
    pub start_ms: i64,
    /// Each aggregate's value, by name order of the query (null: a min or
    /// max over no number).
    pub values: Vec<Option<f64>>,
}

/// A query's results over a time range.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Results {
    /// The query.
    pub query: String,
    /// The aggregates' names, in the order of each row's values.
    pub aggregates: Vec<String>,
    /// Each kept bucket in the range, oldest first.
    pub buckets: Vec<BucketRow>,
    /// Each aggregate over the whole range.
    pub totals: Vec<Option<f64>>,
    /// Records seen and matched since the query was registered.
    pub records_seen: u64,
    /// Of those, the ones the filter let through.
    pub records_matched: u64,
    /// Matching records older than the oldest kept bucket, not counted.
    pub records_too_late: u64,
}

/// Most records [`QueryState::observe_chunk`] takes at once (one bit each
/// in a mask): what one set of filter columns holds.
pub const CHUNK_RECORDS: usize = herald_filter::COLUMN_RECORDS;

/// Hashes of the fields of a chunk of records for distinct counts,
/// computed by the first query that counts a field of a record and kept
/// for the others (ten queries counting distinct keys hash each key
/// once). Cleared between chunks.
#[derive(Debug, Default)]
pub struct RecordHashes {
    columns: Vec<HashColumn>,
}

/// One field's hashes over a chunk.
#[derive(Debug)]
struct HashColumn {
    /// The field's [`FieldRef::shared_id`].
    field: u64,
    /// Bit `i`: the hash of record `i` is known.
    known: u64,
    /// `None`: the field is absent or null.
    hashes: [Option<u64>; CHUNK_RECORDS],
}

impl RecordHashes {
    /// Forgets the hashes of the previous chunk.
    pub fn clear(&mut self) {
        for column in &mut self.columns {
            column.known = 0;
        }
    }

    /// The hash of `field` in `record`, the chunk's record `at`, from an
    /// earlier query's when it was computed; `None` if the field is
    /// absent or null.
    fn hash_of(&mut self, field: &FieldRef, record: &impl Fields, at: usize) -> Option<u64> {
        let hash = |record| field.read(record, |found| found.flatten().map(Hll::hash));
        let Some(id) = field.shared_id().filter(|_| at < CHUNK_RECORDS) else {
            return hash(record);
        };
        let column = match self.columns.iter().position(|c| c.field == id) {
            Some(i) => &mut self.columns[i],
            None => {
                self.columns.push(HashColumn {
                    field: id,
                    known: 0,
                    hashes: [None; CHUNK_RECORDS],
                });
                let last = self.columns.len() - 1;
                &mut self.columns[last]
            }
        };
        if column.known >> at & 1 == 0 {
            column.hashes[at] = hash(record);
            column.known |= 1 << at;
        }
        column.hashes[at]
    }
}

/// One bucket of a query's aggregates.
#[derive(Debug, Clone)]
struct Bucket {
    start: i64,
    cells: Vec<Cell>,
}

/// What changed since the triggers were last evaluated: a trigger whose
/// window cannot have changed value keeps its state unevaluated.
#[derive(Debug, Clone, Copy, Default)]
struct Changes {
    /// A bucket came or went (the newest one may be another).
    buckets: bool,
    /// Bit `i`: aggregate `i` changed in some bucket.
    aggregates: u32,
}

/// The running state of one query.
#[derive(Debug, Clone)]
pub struct QueryState {
    query: CompiledQuery,
    /// Kept buckets, oldest first (records mostly arrive in time order,
    /// so the newest is at hand at the back).
    buckets: VecDeque<Bucket>,
    firing: Vec<bool>,
    changes: Changes,
    seen: u64,
    matched: u64,
    late: u64,
}

impl QueryState {
    /// A query with nothing counted yet.
    pub fn new(query: CompiledQuery) -> Self {
        let triggers = query.triggers.len();
        Self {
            query,
            buckets: VecDeque::new(),
            firing: vec![false; triggers],
            changes: Changes::default(),
            seen: 0,
            matched: 0,
            late: 0,
        }
    }

    /// The query.
    pub fn query(&self) -> &CompiledQuery {
        &self.query
    }

    /// Counts `record` (at `timestamp`) in, if the filter lets it through;
    /// answers whether it did.
    pub fn observe(&mut self, record: &impl Fields, timestamp: i64) -> bool {
        self.seen += 1;
        if !self.query.filter.as_ref().is_none_or(|f| f.matches(record)) {
            return false;
        }
        self.count_in(
            record,
            timestamp,
            &mut RecordHashes::default(),
            CHUNK_RECORDS,
        );
        true
    }

    /// [`QueryState::observe`] for the records of `chunk` (at most
    /// [`CHUNK_RECORDS`]) whose bit is set in `candidates`, in order,
    /// evaluating the triggers after each record counted and adding their
    /// alerts to `alerts`: what a record-by-record feed would do, with the
    /// filter run a test at a time over the chunk's columns (read out once
    /// for all the queries offered it). Hashes for distinct counts come
    /// from (and go to) `hashes`, shared by the queries offered the same
    /// chunk and cleared before the next.
    pub fn observe_chunk(
        &mut self,
        chunk: &Columns<'_, DecodedRecord<'_>>,
        candidates: u64,
        hashes: &mut RecordHashes,
        alerts: &mut Vec<Alert>,
    ) {
        let records = chunk.records();
        let candidates = match records.len() {
            CHUNK_RECORDS => candidates,
            n => candidates & ((1u64 << n) - 1),
        };
        self.seen += u64::from(candidates.count_ones());
        let matched = match &self.query.filter {
            Some(filter) => filter.select_columns(chunk, candidates),
            None => candidates,
        };
        if matched == 0 || self.count_chunk_at_once(chunk, matched, hashes) {
            return;
        }
        for at in selected(matched) {
            let record = &records[at];
            self.count_in(record, record.record().timestamp, hashes, at);
            if !self.query.triggers.is_empty() {
                alerts.extend(self.evaluate_triggers());
            }
        }
    }

    /// Counts the `matched` records of `chunk` in with one pass per
    /// aggregate, when that gives exactly what counting them one by one
    /// would: they all fall in the newest bucket, and no trigger's
    /// condition can come to hold on the way (each watched aggregate moves
    /// one way only over them, as a count, a min, a max or a sum of
    /// numbers of one sign do, and its condition does not hold at the
    /// end while it did not before). Answers false, having changed
    /// nothing, otherwise.
    fn count_chunk_at_once(
        &mut self,
        columns: &Columns<'_, DecodedRecord<'_>>,
        matched: u64,
        hashes: &mut RecordHashes,
    ) -> bool {
        let chunk = columns.records();
        let triggers = &self.query.triggers;
        if !triggers.is_empty() && (self.changes.buckets || self.changes.aggregates != 0) {
            // Something counted has not been evaluated yet.
            return false;
        }
        let width = self.query.spec.bucket_ms as i64;
        let Some(newest) = self.buckets.back() else {
            return false;
        };
        let start = newest.start;
        // The chunk's time range answers for its records at once when it
        // lies in the bucket (a chunk mostly does: records arrive in time
        // order), saving every query a pass over them.
        let whole_chunk_in_bucket = columns.time_range().is_some_and(|(earliest, latest)| {
            in_bucket(earliest, start, width) && in_bucket(latest, start, width)
        });
        if !whole_chunk_in_bucket
            && !selected(matched).all(|at| {
                let t = chunk[at].record().timestamp;
                in_bucket(t, start, width)
            })
        {
            return false;
        }
        let aggregates = &self.query.aggregates;
        let mut watched = 0u32;
        for trigger in triggers {
            watched |= 1 << trigger.aggregate;
        }
        let mut ahead = Vec::new();
        for index in selected(u64::from(watched)) {
            let mut cell = newest.cells[index].clone();
            if !fold_in(&mut cell, &aggregates[index], chunk, matched, hashes) {
                return false;
            }
            ahead.push((index, cell));
        }
        let mut holds_after = [false; crate::spec::TRIGGERS_MAX];
        for (i, trigger) in triggers.iter().enumerate() {
            let Some((_, cell)) = ahead.iter().find(|(index, _)| *index == trigger.aggregate)
            else {
                return false;
            };
            let (window_start, window_end) = window(start, width, trigger.window_buckets);
            let value = self.combined_with(trigger.aggregate, window_start, window_end, cell);
            let holds = value.is_some_and(|v| trigger.op.holds(v, trigger.threshold));
            if holds && !self.firing[i] {
                // An alert is raised at one of these records: found one by
                // one.
                return false;
            }
            holds_after[i] = holds;
        }
        let Some(newest) = self.buckets.back_mut() else {
            return false;
        };
        for (index, (cell, aggregate)) in newest.cells.iter_mut().zip(aggregates).enumerate() {
            match ahead.iter_mut().find(|(watched, _)| *watched == index) {
                Some((_, ahead)) => std::mem::swap(cell, ahead),
                None => {
                    fold_in(cell, aggregate, chunk, matched, hashes);
                }
            }
        }
        self.firing
            .copy_from_slice(&holds_after[..self.query.triggers.len()]);
        self.matched += u64::from(matched.count_ones());
        true
    }

    /// Counts in a record the filter let through (the chunk's record `at`
    /// for `hashes`).
    fn count_in(
        &mut self,
        record: &impl Fields,
        timestamp: i64,
        hashes: &mut RecordHashes,
        at: usize,
    ) {
        self.matched += 1;
        let width = self.query.spec.bucket_ms as i64;
        let start = match self.buckets.back() {
            // The newest bucket's, found without a division.
            Some(newest) if in_bucket(timestamp, newest.start, width) => newest.start,
            _ => bucket_start(timestamp, width),
        };
        let Some(bucket) = self.bucket_for(start) else {
            self.late += 1;
            return;
        };
        let aggregates = &self.query.aggregates;
        let cells = &mut self.buckets[bucket].cells;
        let mut changed = 0u32;
        for (i, (cell, aggregate)) in cells.iter_mut().zip(aggregates).enumerate() {
            let moved = match cell {
                Cell::Count(n) => {
                    *n += 1;
                    true
                }
                Cell::Sum(sum) => match aggregate.field.as_ref().and_then(|f| f.number(record)) {
                    Some(x) => {
                        *sum += x;
                        x != 0.0
                    }
                    None => false,
                },
                Cell::Min(v) => {
                    let x = aggregate.field.as_ref().and_then(|f| f.number(record));
                    let before = *v;
                    *v = min(before, x);
                    *v != before
                }
                Cell::Max(v) => {
                    let x = aggregate.field.as_ref().and_then(|f| f.number(record));
                    let before = *v;
                    *v = max(before, x);
                    *v != before
                }
                Cell::Distinct(sketch) => aggregate
                    .field
                    .as_ref()
                    .and_then(|field| hashes.hash_of(field, record, at))
                    .is_some_and(|hash| sketch.insert_hash(hash)),
            };
            if moved {
                changed |= 1 << i;
            }
        }
        self.changes.aggregates |= changed;
    }

    /// The index of the bucket starting at `start`, made if need be (and
    /// the oldest dropped past `retain_buckets`); `None` for a bucket older
    /// than every kept one when all that may be kept are.
    fn bucket_for(&mut self, start: i64) -> Option<usize> {
        let newest = self.buckets.back().map(|b| b.start);
        let at = match newest {
            Some(newest) if newest == start => return Some(self.buckets.len() - 1),
            Some(newest) if newest > start => {
                match self.buckets.binary_search_by_key(&start, |b| b.start) {
                    Ok(at) => return Some(at),
                    Err(0) if self.buckets.len() >= self.query.spec.retain_buckets => return None,
                    Err(at) => at,
                }
            }
            _ => self.buckets.len(),
        };
        let cells = self
            .query
            .aggregates
            .iter()
            .map(|a| Cell::new(a.function))
            .collect();
        self.buckets.insert(at, Bucket { start, cells });
        self.changes.buckets = true;
        let mut at = at;
        while self.buckets.len() > self.query.spec.retain_buckets {
            self.buckets.pop_front();
            at -= 1;
        }
        Some(at)
    }

    /// Evaluates the triggers over their windows ending with the newest
    /// bucket; answers an alert for each whose condition has just come to
    /// hold (a trigger fires again only after its condition stopped
    /// holding). A trigger whose window has not changed since the last
    /// evaluation is not evaluated again: its condition is what it was.
    pub fn evaluate_triggers(&mut self) -> Vec<Alert> {
        let Some(newest) = self.buckets.back().map(|b| b.start) else {
            return Vec::new();
        };
        let changes = std::mem::take(&mut self.changes);
        let width = self.query.spec.bucket_ms as i64;
        let mut alerts = Vec::new();
        for (i, trigger) in self.query.triggers.iter().enumerate() {
            if !changes.buckets && changes.aggregates & (1 << trigger.aggregate) == 0 {
                continue;
            }
            let (window_start, window_end) = window(newest, width, trigger.window_buckets);
            let value = match self.buckets.back() {
                Some(bucket) if trigger.window_buckets == 1 => {
                    bucket.cells[trigger.aggregate].value()
                }
                _ => self.combined(trigger.aggregate, window_start, window_end),
            };
            let holds = value.is_some_and(|v| trigger.op.holds(v, trigger.threshold));
            if holds && !self.firing[i] {
                let spec = &self.query.spec.triggers[i];
                alerts.push(Alert {
                    query: self.query.spec.id.clone(),
                    trigger: spec.name.clone(),
                    aggregate: spec.aggregate.clone(),
                    value: value.unwrap_or_default(),
                    op: trigger.op,
                    threshold: trigger.threshold,
                    window_start_ms: window_start,
                    window_end_ms: window_end,
                });
            }
            self.firing[i] = holds;
        }
        alerts
    }

    /// [`QueryState::combined`] with `newest` in place of the newest
    /// bucket's cell.
    fn combined_with(&self, index: usize, from: i64, to: i64, newest: &Cell) -> Option<f64> {
        let newest_start = self.buckets.back().map(|b| b.start);
        if to.checked_sub(from) == Some(self.query.spec.bucket_ms as i64)
            && newest_start == Some(from)
        {
            return newest.value();
        }
        let mut total = Cell::new(self.query.aggregates[index].function);
        for bucket in self.range(from, to) {
            if Some(bucket.start) == newest_start {
                total.merge(newest);
            } else {
                total.merge(&bucket.cells[index]);
            }
        }
        total.value()
    }

    /// The kept buckets starting in `from..to`.
    fn range(&self, from: i64, to: i64) -> impl Iterator<Item = &Bucket> {
        let first = self.buckets.partition_point(|b| b.start < from);
        let end = self.buckets.partition_point(|b| b.start < to).max(first);
        self.buckets.range(first..end)
    }

    /// Aggregate `index` over the buckets starting in `from..to`.
    fn combined(&self, index: usize, from: i64, to: i64) -> Option<f64> {
        let width = self.query.spec.bucket_ms as i64;
        if to.checked_sub(from) == Some(width) && from.rem_euclid(width) == 0 {
            // A window of exactly one bucket: its cell is the answer, with
            // no sum to build (a distinct count's would copy its sketch).
            // The newest bucket, the usual one, is looked up first.
            let bucket = match self.buckets.back() {
                Some(newest) if newest.start == from => Some(newest),
                _ => self.range(from, to).next(),
            };
            return bucket.map_or_else(
                || Cell::new(self.query.aggregates[index].function).value(),
                |bucket| bucket.cells[index].value(),
            );
        }
        let mut total = Cell::new(self.query.aggregates[index].function);
        for bucket in self.range(from, to) {
            total.merge(&bucket.cells[index]);
        }
        total.value()
    }

    /// The buckets starting in `from..to` (all when `None`), and each
    /// aggregate over them.
    pub fn results(&self, from: Option<i64>, to: Option<i64>) -> Results {
        let (from, to) = (from.unwrap_or(i64::MIN), to.unwrap_or(i64::MAX));
        let buckets = if from < to {
            self.range(from, to)
                .map(|bucket| BucketRow {
                    start_ms: bucket.start,
                    values: bucket.cells.iter().map(Cell::value).collect(),
                })
                .collect()
        } else {
            Vec::new()
        };
        let totals = (0..self.query.aggregates.len())
            .map(|i| {
                if from < to {
                    self.combined(i, from, to)
                } else {
                    None
                }
            })
            .collect();
        Results {
            query: self.query.spec.id.clone(),
            aggregates: self
                .query
                .spec
                .aggregates
                .iter()
                .map(|a| a.name.clone())
                .collect(),
            buckets,
            totals,
            records_seen: self.seen,
            records_matched: self.matched,
            records_too_late: self.late,
        }
    }
}
