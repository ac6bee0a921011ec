//! Queries fed record by record: aggregates against the same numbers
//! computed directly, triggers firing exactly when their condition comes
//! to hold, bucket retention, and refused specs.

use herald_filter::Fields;
use herald_query::{Alert, Comparison, QuerySpec, QueryState, SpecError};
use proptest::prelude::*;

/// A record: a key and a JSON value.
struct Record {
    key: Vec<u8>,
    value: Vec<u8>,
}

impl Fields for Record {
    fn key(&self) -> Option<&[u8]> {
        Some(&self.key)
    }
    fn header(&self, _name: &[u8]) -> Option<Option<&[u8]>> {
        None
    }
    fn value(&self) -> Option<&[u8]> {
        Some(&self.value)
    }
}

fn order(customer: u32, total: f64, region: &str) -> Record {
    Record {
        key: format!("c{customer}").into_bytes(),
        value: format!(r#"{{"customer": "c{customer}", "total": {total}, "region": "{region}"}}"#)
            .into_bytes(),
    }
}

fn spec(json: &str) -> Result<QueryState, SpecError> {
    let spec: QuerySpec = serde_json::from_str(json).expect("spec JSON");
    spec.compile().map(QueryState::new)
}

const ORDERS: &str = r#"{
    "id": "eu-orders", "topic": "orders", "filter": "value.region == \"eu\"",
    "bucket_ms": 1000,
    "aggregates": [
        {"name": "orders", "function": "count"},
        {"name": "revenue", "function": "sum", "field": "value.total"},
        {"name": "smallest", "function": "min", "field": "value.total"},
        {"name": "largest", "function": "max", "field": "value.total"},
        {"name": "customers", "function": "distinct", "field": "value.customer"}
    ],
    "triggers": [
        {"name": "busy", "aggregate": "orders", "op": ">=", "threshold": 3, "window_ms": 2000}
    ]
}"#;

proptest! {
    /// Count, sum, min and max are exactly what a scan computes; distinct
    /// is within the sketch's error.
    #[test]
    fn aggregates_are_what_a_scan_computes(
        orders in prop::collection::vec((0u32..50, -1000i32..1000, any::<bool>(), 0i64..5_000), 0..300)
    ) {
        let mut state = spec(ORDERS).unwrap();
        for &(customer, cents, eu, ts) in &orders {
            let record = order(customer, f64::from(cents) / 100.0, if eu { "eu" } else { "us" });
            state.observe(&record, ts);
        }
        let results = state.results(None, None);
        let eu: Vec<_> = orders.iter().filter(|o| o.2).collect();
        prop_assert_eq!(results.records_seen, orders.len() as u64);
        prop_assert_eq!(results.records_matched, eu.len() as u64);
        prop_assert_eq!(results.totals[0], Some(eu.len() as f64));
        let sum: f64 = eu.iter().map(|o| f64::from(o.1) / 100.0).sum();
        prop_assert!((results.totals[1].unwrap() - sum).abs() < 1e-6);
        let min = eu.iter().map(|o| f64::from(o.1) / 100.0).fold(None, |m: Option<f64>, x| Some(m.map_or(x, |m| m.min(x))));
        let max = eu.iter().map(|o| f64::from(o.1) / 100.0).fold(None, |m: Option<f64>, x| Some(m.map_or(x, |m| m.max(x))));
        prop_assert_eq!(results.totals[2], min);
        prop_assert_eq!(results.totals[3], max);
        let distinct = eu.iter().map(|o| o.0).collect::<std::collections::BTreeSet<_>>().len() as f64;
        prop_assert!((results.totals[4].unwrap() - distinct).abs() <= (distinct * 0.05).max(1.0));
        // Per bucket, the counts add up to the total.
        let counted: f64 = results.buckets.iter().map(|b| b.values[0].unwrap()).sum();
        prop_assert_eq!(counted, eu.len() as f64);
        for bucket in &results.buckets {
            let here = eu.iter().filter(|o| o.3.div_euclid(1000) * 1000 == bucket.start_ms).count();
            prop_assert_eq!(bucket.values[0], Some(here as f64));
        }
    }
}

#[test]
fn a_trigger_fires_exactly_when_its_condition_comes_to_hold() {
    let mut state = spec(ORDERS).unwrap();
    let mut fired: Vec<(usize, Alert)> = Vec::new();
    // (timestamp, region): the window is the newest bucket and the one before.
    let feed = [
        (100, "eu"),  // 1 in [0, 1000)
        (200, "us"),  // filtered out
        (1100, "eu"), // 2 in [0, 2000)
        (1200, "eu"), // 3 in [0, 2000): fires
        (1300, "eu"), // 4: still holding, no new alert
        (3500, "eu"), // window [2000, 4000): 1, stops holding
        (3600, "eu"), // 2
        (3700, "eu"), // 3: fires again
        (900, "eu"),  // an old bucket: the window [2000, 4000) still holds 3
    ];
    for (i, &(ts, region)) in feed.iter().enumerate() {
        state.observe(&order(1, 10.0, region), ts);
        fired.extend(state.evaluate_triggers().into_iter().map(|a| (i, a)));
    }
    let at: Vec<usize> = fired.iter().map(|(i, _)| *i).collect();
    assert_eq!(at, vec![3, 7]);
    let (_, first) = &fired[0];
    assert_eq!(
        first,
        &Alert {
            query: "eu-orders".into(),
            trigger: "busy".into(),
            aggregate: "orders".into(),
            value: 3.0,
            op: Comparison::Ge,
            threshold: 3.0,
            window_start_ms: 0,
            window_end_ms: 2000,
        }
    );
    assert_eq!(
        (fired[1].1.window_start_ms, fired[1].1.window_end_ms),
        (2000, 4000)
    );
}

#[test]
fn only_the_newest_buckets_are_kept_and_older_records_are_counted_as_late() {
    let mut state = spec(
        r#"{"id": "q", "topic": "t", "bucket_ms": 10, "retain_buckets": 3,
            "aggregates": [{"name": "n", "function": "count"}]}"#,
    )
    .unwrap();
    for ts in [0, 10, 20, 30, 45, 5] {
        state.observe(&order(1, 1.0, "eu"), ts);
    }
    let results = state.results(None, None);
    let starts: Vec<i64> = results.buckets.iter().map(|b| b.start_ms).collect();
    assert_eq!(starts, vec![20, 30, 40]);
    assert_eq!(results.records_too_late, 1);
    let ranged = state.results(Some(25), Some(41));
    assert_eq!(ranged.buckets.len(), 2, "buckets starting in 25..41");
    assert_eq!(ranged.totals, vec![Some(2.0)]);
    assert_eq!(state.results(Some(50), Some(10)).totals, vec![None]);
    // A range one bucket wide: the bucket starting in it, aligned or not.
    assert_eq!(state.results(Some(30), Some(40)).totals, vec![Some(1.0)]);
    assert_eq!(state.results(Some(35), Some(45)).totals, vec![Some(1.0)]);
    assert_eq!(state.results(Some(31), Some(41)).totals, vec![Some(1.0)]);
    assert_eq!(state.results(Some(41), Some(51)).totals, vec![Some(0.0)]);
}

#[test]
fn bad_specs_are_refused_with_the_reason() {
    let cases = [
        (r#"{"id": "a.b", "topic": "t", "bucket_ms": 1}"#, "invalid"),
        (
            r#"{"id": "a", "topic": "", "bucket_ms": 1}"#,
            "names its topic",
        ),
        (r#"{"id": "a", "topic": "t", "bucket_ms": 0}"#, "bucket_ms"),
        (
            r#"{"id": "a", "topic": "t", "bucket_ms": 1, "filter": "value.x =="}"#,
            "filter",
        ),
        (
            r#"{"id": "a", "topic": "t", "bucket_ms": 1, "aggregates": [{"name": "s", "function": "sum"}]}"#,
            "needs a field",
        ),
        (
            r#"{"id": "a", "topic": "t", "bucket_ms": 1, "aggregates": [{"name": "n", "function": "count", "field": "key"}]}"#,
            "takes no field",
        ),
        (
            r#"{"id": "a", "topic": "t", "bucket_ms": 1, "aggregates": [{"name": "s", "function": "max", "field": "value."}]}"#,
            "field is invalid",
        ),
        (
            r#"{"id": "a", "topic": "t", "bucket_ms": 1, "aggregates": [{"name": "n", "function": "count"}, {"name": "n", "function": "count"}]}"#,
            "unique",
        ),
        (
            r#"{"id": "a", "topic": "t", "bucket_ms": 10, "aggregates": [{"name": "n", "function": "count"}], "triggers": [{"name": "x", "aggregate": "m", "op": ">", "threshold": 1, "window_ms": 10}]}"#,
            "no aggregate named",
        ),
        (
            r#"{"id": "a", "topic": "t", "bucket_ms": 10, "aggregates": [{"name": "n", "function": "count"}], "triggers": [{"name": "x", "aggregate": "n", "op": ">", "threshold": 1, "window_ms": 15}]}"#,
            "whole number of buckets",
        ),
        (
            r#"{"id": "a", "topic": "t", "bucket_ms": 10, "retain_buckets": 2, "aggregates": [{"name": "n", "function": "count"}], "triggers": [{"name": "x", "aggregate": "n", "op": ">", "threshold": 1, "window_ms": 30}]}"#,
            "longer than the buckets kept",
        ),
    ];
    for (json, words) in cases {
        let error = spec(json).expect_err(json).to_string();
        assert!(error.contains(words), "{json}: {error}");
    }
    let unknown: Result<QuerySpec, _> =
        serde_json::from_str(r#"{"id": "a", "topic": "t", "bucket_ms": 1, "extra": 1}"#);
    assert!(unknown.is_err(), "unknown fields are refused");
}
