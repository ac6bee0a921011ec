//! A `DecodedRecord` (JSON fields kept after their first lookup) answers
//! every filter exactly as the record read directly does, whatever the
//! order the filters run in: escaped strings, nested objects, numbers,
//! nulls, missing fields, values that are not JSON, many headers and a
//! header section past 64 KiB.

use herald_filter::{DecodedRecord, FieldRef, Filter};
use herald_records::{BatchBuilder, RecordBatch, RecordFields};
use proptest::prelude::*;

const VALUES: &[&str] = &[
    r#"{"a": 1, "b": "x", "c": {"d": 2.5, "e": "y\"z"}, "f": null, "g": true}"#,
    r#"{"a": "1", "b": "caf\u00e9", "c": {"d": "2.5"}, "g": false, "h": [1, 2]}"#,
    r#"{"b": "x\\y", "c": 7, "a": -3e2}"#,
    r#"  { "a" : 10 , "b" : "plain" }  "#,
    r#"not json"#,
    r#"[1, 2, 3]"#,
    r#"{"a": 1, "a": 2}"#,
    r#"{"c": {"d": {"x": 1}}}"#,
    r#"{"a\u0062": 1, "b": "x", "a": 4}"#,
    r#"{"a": 1, "b": }"#,
    r#"{"b": "x", "c": {"d": 3}, "a": 7, "zz": "#,
    r#"{"k0":0,"k1":1,"k2":2,"k3":3,"k4":4,"k5":5,"k6":6,"k7":7,"k8":8,"k9":9,"k10":10,"k11":11,"k12":12,"k13":13,"k14":14,"k15":15,"k16":16,"a":17,"b":"late"}"#,
    "\t{\n\"a\"\n:\t5\n}",
    r#"{}"#,
    r#""a string""#,
];

const FILTERS: &[&str] = &[
    "value.a == 1",
    "value.a > 0",
    r#"value.a == "1""#,
    "exists value.a",
    "exists value.f",
    r#"value.b == "x""#,
    r#"value.b starts_with "caf""#,
    r#"value.b == "x\\y""#,
    r#"value.c.e == "y\"z""#,
    "value.c.d >= 2.5",
    r#"value.c.d == "2.5""#,
    "exists value.c.d.x",
    r#"value.g == "true""#,
    r#"value.h == "[1, 2]""#,
    r#"header.h3 == "v3" and value.a < 100"#,
    r#"header.h9 == "v9""#,
    r#"header.h1 starts_with "xx""#,
    "exists header.h2",
    r#"header.h2 == "v2""#,
    r#"header.h0 == "v0" and header.h7 != "v6""#,
    "exists header.h11",
    r#"not (value.b in ("x", "plain"))"#,
    "value.ab == 1",
    "value.k16 == 16",
    r#"value.b == "late""#,
    "exists value.zz",
];

/// A record with `headers` headers `h<i>` = `v<i>`; with `long`, header
/// `h1`'s value is 70,000 bytes (a header section past 64 KiB); with
/// `null`, `h2` is null.
fn record_bytes(value: &str, headers: usize, long: bool, null: bool) -> Vec<u8> {
    let names: Vec<String> = (0..headers).map(|i| format!("h{i}")).collect();
    let values: Vec<String> = (0..headers)
        .map(|i| match i {
            1 if long => "x".repeat(70_000),
            _ => format!("v{i}"),
        })
        .collect();
    let headers: Vec<(&[u8], Option<&[u8]>)> = names
        .iter()
        .zip(&values)
        .enumerate()
        .map(|(i, (n, v))| (n.as_bytes(), (i != 2 || !null).then_some(v.as_bytes())))
        .collect();
    let mut builder = BatchBuilder::new(0);
    builder.push(RecordFields {
        timestamp_ms: 5,
        key: Some(b"k"),
        value: Some(value.as_bytes()),
        headers: &headers,
    });
    builder.finish().expect("batch")
}

proptest! {
    #[test]
    fn decoded_records_answer_as_the_record_does(
        value in 0..VALUES.len(),
        headers in 0usize..14,
        long in any::<bool>(),
        null in any::<bool>(),
        order in proptest::sample::subsequence((0..FILTERS.len()).collect::<Vec<_>>(), 1..FILTERS.len()).prop_shuffle(),
    ) {
        let bytes = record_bytes(VALUES[value], headers, long, null);
        let batch = RecordBatch::new(&bytes).expect("batch");
        let mut scratch = Vec::new();
        let record = batch.records(&mut scratch).expect("records").next().expect("one").expect("valid");
        let decoded = DecodedRecord::new(record);
        for &i in &order {
            let filter = Filter::parse(FILTERS[i]).expect("filter");
            prop_assert_eq!(filter.matches(&decoded), filter.matches(&record), "{} on {}", FILTERS[i], VALUES[value]);
        }
        for path in ["value.a", "value.c.d", "value.b", "value.zz", "value.ab", "value.k15"] {
            let field = FieldRef::parse(path).expect("field");
            prop_assert_eq!(field.number(&decoded), field.number(&record));
            let (mut direct, mut kept) = (None, None);
            field.read(&record, |f| direct = Some(f.map(|v| v.map(<[u8]>::to_vec))));
            field.read(&decoded, |f| kept = Some(f.map(|v| v.map(<[u8]>::to_vec))));
            prop_assert_eq!(kept, direct, "{}", path);
        }
    }
}
