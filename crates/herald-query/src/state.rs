//! A query's running state: its aggregates per time bucket (by record
//! timestamp), kept for the newest `retain_buckets` buckets, and its
//! triggers' state. Fed record by record; nothing here reads a clock, so
//! the same records give the same results and alerts.

use std::collections::BTreeMap;

use herald_filter::Fields;
use serde::Serialize;

use crate::hll::Hll;
use crate::spec::{Comparison, CompiledQuery, Function};

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

/// The running state of one query.
#[derive(Debug, Clone)]
pub struct QueryState {
    query: CompiledQuery,
    buckets: BTreeMap<i64, Vec<Cell>>,
    firing: Vec<bool>,
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
            buckets: BTreeMap::new(),
            firing: vec![false; triggers],
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
        self.matched += 1;
        let width = self.query.spec.bucket_ms as i64;
        let start = timestamp.div_euclid(width) * width;
        let retain = self.query.spec.retain_buckets;
        if self.buckets.len() >= retain
            && self
                .buckets
                .keys()
                .next()
                .is_some_and(|&first| start < first)
        {
            self.late += 1;
            return true;
        }
        let aggregates = &self.query.aggregates;
        // Records mostly arrive in time order, into the newest bucket: a
        // walk down the tree's right edge finds it without comparisons.
        let cells = match self.buckets.last_entry() {
            Some(newest) if *newest.key() == start => newest.into_mut(),
            _ => self
                .buckets
                .entry(start)
                .or_insert_with(|| aggregates.iter().map(|a| Cell::new(a.function)).collect()),
        };
        for (cell, aggregate) in cells.iter_mut().zip(aggregates) {
            match cell {
                Cell::Count(n) => *n += 1,
                Cell::Sum(sum) => {
                    if let Some(x) = aggregate.field.as_ref().and_then(|f| f.number(record)) {
                        *sum += x;
                    }
                }
                Cell::Min(v) => {
                    let x = aggregate.field.as_ref().and_then(|f| f.number(record));
                    *v = min(*v, x);
                }
                Cell::Max(v) => {
                    let x = aggregate.field.as_ref().and_then(|f| f.number(record));
                    *v = max(*v, x);
                }
                Cell::Distinct(sketch) => {
                    if let Some(field) = &aggregate.field {
                        field.read(record, |found| {
                            if let Some(Some(bytes)) = found {
                                sketch.insert(bytes);
                            }
                        });
                    }
                }
            }
        }
        while self.buckets.len() > retain {
            self.buckets.pop_first();
        }
        true
    }

    /// Evaluates every trigger over its window ending with the newest
    /// bucket; answers an alert for each whose condition has just come to
    /// hold (a trigger fires again only after its condition stopped
    /// holding).
    pub fn evaluate_triggers(&mut self) -> Vec<Alert> {
        let Some(&newest) = self.buckets.keys().next_back() else {
            return Vec::new();
        };
        let width = self.query.spec.bucket_ms as i64;
        let mut alerts = Vec::new();
        for (i, trigger) in self.query.triggers.iter().enumerate() {
            let window_end = newest + width;
            let window_start = window_end - trigger.window_buckets as i64 * width;
            let value = self.combined(trigger.aggregate, window_start, window_end);
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

    /// Aggregate `index` over the buckets starting in `from..to`.
    fn combined(&self, index: usize, from: i64, to: i64) -> Option<f64> {
        let width = self.query.spec.bucket_ms as i64;
        if to.checked_sub(from) == Some(width) && from.rem_euclid(width) == 0 {
            // A window of exactly one bucket: its cell is the answer, with
            // no sum to build (a distinct count's would copy its sketch).
            return self.buckets.get(&from).map_or_else(
                || Cell::new(self.query.aggregates[index].function).value(),
                |cells| cells[index].value(),
            );
        }
        let mut total = Cell::new(self.query.aggregates[index].function);
        for cells in self.buckets.range(from..to).map(|(_, cells)| cells) {
            total.merge(&cells[index]);
        }
        total.value()
    }

    /// The buckets starting in `from..to` (all when `None`), and each
    /// aggregate over them.
    pub fn results(&self, from: Option<i64>, to: Option<i64>) -> Results {
        let (from, to) = (from.unwrap_or(i64::MIN), to.unwrap_or(i64::MAX));
        let buckets = if from < to {
            self.buckets
                .range(from..to)
                .map(|(&start_ms, cells)| BucketRow {
                    start_ms,
                    values: cells.iter().map(Cell::value).collect(),
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
