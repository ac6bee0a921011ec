//! `Filter::select`, a filter run a test at a time over up to 64 records,
//! answers for every record and every set of candidates exactly what
//! `Filter::matches` answers record by record: keys, headers (absent, null,
//! repeated), timestamps, JSON fields, and `and` / `or` / `not` nested.

mod common;

use common::Record;
use herald_filter::Filter;
use proptest::prelude::*;

const KEYS: &[&str] = &[
    "user-0001",
    "user-0002",
    "user-09",
    "order-1",
    "",
    "user-000123456789",
];
const REGIONS: &[&str] = &["eu", "us", "ap", "10", "1e1"];

fn record() -> impl Strategy<Value = Record> {
    (
        prop::option::weighted(0.9, 0..KEYS.len()),
        prop::collection::vec(
            (0usize..3, prop::option::weighted(0.8, 0..REGIONS.len())),
            0..4,
        ),
        prop::option::weighted(0.9, (0..REGIONS.len(), -5i32..500)),
        0i64..100,
    )
        .prop_map(|(key, headers, value, timestamp)| Record {
            key: key.map(|k| KEYS[k].as_bytes().to_vec()),
            headers: headers
                .into_iter()
                .map(|(n, v)| {
                    let name = ["region", "type", "amount"][n].as_bytes().to_vec();
                    (name, v.map(|v| REGIONS[v].as_bytes().to_vec()))
                })
                .collect(),
            value: value.map(|(region, total)| {
                format!(r#"{{"region": "{}", "total": {total}}}"#, REGIONS[region]).into_bytes()
            }),
            timestamp,
        })
}

const FILTERS: &[&str] = &[
    r#"key starts_with "user-00""#,
    r#"key == "user-0002""#,
    r#"key == "user-000123456789""#,
    r#"key in ("order-1", "user-09")"#,
    r#"header.region == "eu""#,
    r#"header.region != "eu""#,
    "header.region == 10",
    "header.amount >= 10",
    "exists header.type",
    r#"header.type in ("us", "ap")"#,
    "timestamp >= 50",
    "timestamp < 10 or timestamp > 90",
    r#"value.region == "us""#,
    "value.total > 250",
    r#"key starts_with "user" and (header.region == "eu" or not (timestamp < 30))"#,
    r#"not (exists header.region and header.type == "us")"#,
    r#"(value.total < 0 or key == "") and not header.amount == 1e1"#,
];

proptest! {
    #[test]
    fn select_answers_what_matches_answers(
        records in prop::collection::vec(record(), 0..80),
        candidates in any::<u64>(),
        filter in 0..FILTERS.len(),
    ) {
        let filter = Filter::parse(FILTERS[filter]).expect("filter");
        let shown = &records[..records.len().min(64)];
        let selected = filter.select(shown, candidates);
        for (i, record) in shown.iter().enumerate() {
            let expected = candidates >> i & 1 == 1 && filter.matches(record);
            prop_assert_eq!(selected >> i & 1 == 1, expected, "record {}: {:?}", i, record);
        }
        // Nothing past the records is selected.
        if shown.len() < 64 {
            prop_assert_eq!(selected >> shown.len(), 0);
        }
    }
}
