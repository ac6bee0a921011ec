//! The indexer's feed counts a chunk of records at a time (a filter run a
//! test at a time over 64 records, aggregates folded in one pass when no
//! trigger can fire among them); it must give exactly what offering each
//! record to `QueryState::observe` and evaluating the triggers after
//! each one counted gives: the same buckets, totals and counters, and the
//! same alerts in the same order, whatever the timestamps (out of order,
//! across buckets, older than the buckets kept), the signs of summed
//! numbers, the triggers' comparisons and windows, and each follower's
//! start.

use herald_filter::DecodedRecord;
use herald_query::{feed_batches, Alert, Follower, QuerySpec, QueryState};
use herald_records::{batches, stamp, BatchBuilder, RecordBatch, RecordFields};
use proptest::prelude::*;

/// Queries over every kind of aggregate, each watched by triggers that
/// come to hold and stop holding as the records arrive.
const QUERIES: &[&str] = &[
    r#"{"id": "counts", "topic": "t", "bucket_ms": 100, "retain_buckets": 4,
        "filter": "header.kind == \"a\" or key starts_with \"k1\"",
        "aggregates": [{"name": "n", "function": "count"},
                       {"name": "keys", "function": "distinct", "field": "key"}],
        "triggers": [{"name": "busy", "aggregate": "n", "op": ">=", "threshold": 5, "window_ms": 100},
                     {"name": "quiet", "aggregate": "n", "op": "<", "threshold": 3, "window_ms": 300},
                     {"name": "varied", "aggregate": "keys", "op": ">", "threshold": 3, "window_ms": 200}]}"#,
    r#"{"id": "sums", "topic": "t", "bucket_ms": 50, "retain_buckets": 3,
        "filter": "value.x > -20",
        "aggregates": [{"name": "s", "function": "sum", "field": "value.x"},
                       {"name": "lo", "function": "min", "field": "value.x"},
                       {"name": "hi", "function": "max", "field": "timestamp"}],
        "triggers": [{"name": "rich", "aggregate": "s", "op": ">", "threshold": 40, "window_ms": 50},
                     {"name": "poor", "aggregate": "s", "op": "<=", "threshold": -10, "window_ms": 100},
                     {"name": "low", "aggregate": "lo", "op": "<", "threshold": -5, "window_ms": 150},
                     {"name": "late", "aggregate": "hi", "op": ">=", "threshold": 700, "window_ms": 50}]}"#,
    r#"{"id": "all", "topic": "t", "bucket_ms": 1000,
        "aggregates": [{"name": "n", "function": "count"},
                       {"name": "s", "function": "sum", "field": "value.x"}]}"#,
    r#"{"id": "gaps", "topic": "t", "bucket_ms": 1000, "retain_buckets": 5,
        "aggregates": [{"name": "lo", "function": "min", "field": "value.y"},
                       {"name": "hi", "function": "max", "field": "value.y"}],
        "triggers": [{"name": "floor", "aggregate": "lo", "op": ">", "threshold": 5, "window_ms": 1000},
                     {"name": "ceiling", "aggregate": "hi", "op": "<", "threshold": 9, "window_ms": 2000}]}"#,
    r#"{"id": "none-match", "topic": "t", "bucket_ms": 10, "filter": "header.kind == \"zzz\"",
        "aggregates": [{"name": "n", "function": "count"}],
        "triggers": [{"name": "never", "aggregate": "n", "op": ">", "threshold": 0, "window_ms": 10}]}"#,
];

fn state(json: &str) -> QueryState {
    let spec: QuerySpec = serde_json::from_str(json).expect("spec JSON");
    QueryState::new(spec.compile().expect("valid spec"))
}

/// One record to store: key number, kind header, number in the value,
/// timestamp.
type Row = (u8, bool, i8, i64);

/// Stored batches of the rows from offset 0, `per_batch` to a batch.
fn stored(rows: &[Row], per_batch: usize) -> Vec<u8> {
    let mut bytes = Vec::new();
    for (b, batch_rows) in rows.chunks(per_batch).enumerate() {
        let mut builder = BatchBuilder::new(0);
        for &(number, kind, x, timestamp) in batch_rows {
            let key = format!("k{number}");
            // `y` only on some records: a min or max starts from none.
            let value = match number % 4 {
                1..=3 => format!(r#"{{"x": {x}}}"#),
                _ => format!(
                    r#"{{"x": {x}, "y": {}}}"#,
                    i32::from(x) * i32::from(number) % 17
                ),
            };
            let kind: &[u8] = if kind { b"a" } else { b"b" };
            builder.push(RecordFields {
                timestamp_ms: timestamp,
                key: Some(key.as_bytes()),
                value: Some(value.as_bytes()),
                headers: &[(b"kind", Some(kind))],
            });
        }
        let mut batch = builder.finish().expect("batch");
        stamp(&mut batch, (b * per_batch) as u64, 0);
        bytes.extend_from_slice(&batch);
    }
    bytes
}

/// What record-by-record observation gives: the state after, and the
/// alerts in order.
fn one_by_one(bytes: &[u8], query: &str, from: u64) -> (QueryState, Vec<Alert>) {
    let mut state = state(query);
    let mut alerts = Vec::new();
    let mut scratch = Vec::new();
    for batch in batches(bytes) {
        let batch = RecordBatch::new(batch.expect("batch")).expect("framing");
        for record in batch.records(&mut scratch).expect("records") {
            let record = DecodedRecord::new(record.expect("record"));
            if record.record().offset < from as i64 {
                continue;
            }
            if state.observe(&record, record.record().timestamp) {
                alerts.extend(state.evaluate_triggers());
            }
        }
    }
    (state, alerts)
}

fn rows() -> impl Strategy<Value = Vec<Row>> {
    // Mostly rising timestamps with jumps back, some far back.
    prop::collection::vec((0u8..12, any::<bool>(), -30i8..30, -40i64..60), 0..400).prop_map(
        |steps| {
            let mut now = 0i64;
            steps
                .into_iter()
                .map(|(key, kind, x, step)| {
                    now = (now + step.max(-5)).max(0);
                    // Now and then a timestamp at the ends of time (what a
                    // producer may stamp), far from every bucket.
                    let timestamp = match step {
                        -40 => -4_600_000_000_000_000_000,
                        -39 => 4_600_000_000_000_000_000,
                        s if s < -35 => now / 3,
                        _ => now,
                    };
                    (key, kind, x, timestamp)
                })
                .collect()
        },
    )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]
    #[test]
    fn chunks_count_what_records_one_by_one_count(
        rows in rows(),
        per_batch in 1usize..150,
        starts in prop::collection::vec(0u64..420, QUERIES.len()),
    ) {
        let bytes = stored(&rows, per_batch);
        let mut states: Vec<QueryState> = QUERIES.iter().map(|q| state(q)).collect();
        let mut scratch = Vec::new();
        let mut followers: Vec<Follower<'_>> = states
            .iter_mut()
            .zip(&starts)
            .map(|(state, &from)| Follower::new(from, state))
            .collect();
        let outcome = feed_batches(&bytes, &mut followers, &mut scratch);
        prop_assert_eq!(outcome.unreadable_batches, 0);
        let alerts: Vec<Vec<Alert>> = followers.into_iter().map(|f| f.alerts).collect();
        for (i, query) in QUERIES.iter().enumerate() {
            let (expected, expected_alerts) = one_by_one(&bytes, query, starts[i]);
            prop_assert_eq!(states[i].results(None, None), expected.results(None, None), "{}", query);
            prop_assert_eq!(&alerts[i], &expected_alerts, "{}", query);
        }
    }
}

/// Timestamps at the ends of time (a producer's to choose) land in
/// buckets at the ends of time, with no overflow, fed either way.
#[test]
fn timestamps_at_the_ends_of_time_are_counted_alike() {
    let rows: Vec<Row> = [
        i64::MIN + 1,
        i64::MAX - 1,
        0,
        -5_000_000_000_000_000_000,
        5_000_000_000_000_000_000,
        5,
    ]
    .iter()
    .enumerate()
    .map(|(i, &t)| (i as u8, true, 1, t))
    .collect();
    for per_batch in [1, 6] {
        let bytes = stored(&rows, per_batch);
        for query in QUERIES {
            let mut chunked = state(query);
            let mut followers = [Follower::new(0, &mut chunked)];
            feed_batches(&bytes, &mut followers, &mut Vec::new());
            let [follower] = followers;
            let alerts = follower.alerts;
            let (expected, expected_alerts) = one_by_one(&bytes, query, 0);
            assert_eq!(chunked.results(None, None), expected.results(None, None));
            assert_eq!(alerts, expected_alerts);
        }
    }
}
