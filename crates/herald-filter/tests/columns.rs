//! `Filter::select_columns`, filters run over a chunk of stored records
//! read out into columns once for all of them, answers for every record
//! and every set of candidates what `Filter::matches` answers on the
//! record itself: headers repeated (the first counts), null, absent or
//! not read out into a column, keys, timestamps and JSON fields.

use herald_filter::{Columns, DecodedRecord, Filter, HeaderName};
use herald_records::{BatchBuilder, RecordBatch, RecordFields};
use proptest::prelude::*;

const NAMES: &[&str] = &["region", "type", "amount", "r"];
/// Values of every length class a column's heads hold differently: to
/// three bytes, four, five to seven, eight, nine to fifteen, sixteen, and
/// longer (compared through the bytes themselves).
const VALUES: &[&str] = &[
    "eu",
    "us",
    "10",
    "1e1",
    "",
    "euro",
    "europe",
    "european",
    "european-union",
    "european-union-1",
    "european-union-12",
];

/// One record: key, headers (name and value indexes, `None`: null),
/// timestamp, and a JSON value's total.
type Row = (Option<u8>, Vec<(usize, Option<usize>)>, i64, Option<i32>);

fn row() -> impl Strategy<Value = Row> {
    (
        prop::option::weighted(0.9, 0u8..7),
        prop::collection::vec(
            (0..NAMES.len(), prop::option::weighted(0.8, 0..VALUES.len())),
            0..6,
        ),
        -5i64..100,
        prop::option::weighted(0.8, -5i32..500),
    )
}

const FILTERS: &[&str] = &[
    r#"key starts_with "user-00""#,
    r#"key == "user-002""#,
    r#"key in ("order-1", "user-09")"#,
    r#"header.region == "eu""#,
    r#"header.region != "eu""#,
    "header.region == 10",
    "header.amount >= 10",
    "exists header.type",
    r#"header.type in ("us", "")"#,
    r#"header.r starts_with "e""#,
    r#"header.r starts_with """#,
    r#"header.region starts_with "europ""#,
    r#"header.region starts_with "european-union-1""#,
    r#"header.region starts_with "european-union-12""#,
    r#"header.type == "european-union-1""#,
    r#"header.type == "european-union-12""#,
    r#"header.type != "europe""#,
    r#"header.region in ("euro", "european", "european-union")"#,
    r#"header.region in ("eu", 10)"#,
    r#"key == "user-000123456789""#,
    r#"key starts_with "user-0001234567""#,
    "timestamp >= 50",
    "timestamp < 10 or timestamp > 90",
    "timestamp == 7",
    "value.total > 250",
    r#"key starts_with "user" and (header.region == "eu" or not (timestamp < 30))"#,
    r#"not (exists header.region and header.type == "us")"#,
    r#"(value.total < 0 or key == "") and not header.amount == 1e1"#,
];

fn key(id: u8) -> String {
    match id {
        0 => "user-002".into(),
        1 => "user-09".into(),
        2 => "order-1".into(),
        3 => String::new(),
        4 => "user-000123456789".into(),
        n => format!("user-00{n}"),
    }
}

fn stored(rows: &[Row]) -> Vec<u8> {
    let mut builder = BatchBuilder::new(0);
    for (key_id, headers, timestamp, total) in rows {
        let key = key_id.map(key);
        let value = total.map(|t| format!(r#"{{"total": {t}}}"#));
        let headers: Vec<(&[u8], Option<&[u8]>)> = headers
            .iter()
            .map(|&(n, v)| (NAMES[n].as_bytes(), v.map(|v| VALUES[v].as_bytes())))
            .collect();
        builder.push(RecordFields {
            timestamp_ms: *timestamp,
            key: key.as_deref().map(str::as_bytes),
            value: value.as_deref().map(str::as_bytes),
            headers: &headers,
        });
    }
    builder.finish().expect("batch")
}

proptest! {
    #[test]
    fn columns_select_what_records_match(
        rows in prop::collection::vec(row(), 1..100),
        candidates in any::<u64>(),
        filters in prop::collection::vec(0..FILTERS.len(), 1..5),
        read_out in prop::collection::vec(0..NAMES.len(), 0..3),
    ) {
        let bytes = stored(&rows);
        let batch = RecordBatch::new(&bytes).expect("batch");
        let mut scratch = Vec::new();
        let records: Vec<DecodedRecord<'_>> = batch
            .records(&mut scratch)
            .expect("records")
            .map(|r| DecodedRecord::new(r.expect("valid")))
            .collect();
        let filters: Vec<Filter> = filters
            .iter()
            .map(|&i| Filter::parse(FILTERS[i]).expect("filter"))
            .collect();
        // Columns for the headers some filters test and some they do not,
        // or for none of them: the answers may not change.
        let extra: Vec<HeaderName> = read_out
            .iter()
            .filter_map(|&n| {
                Filter::parse(&format!("exists header.{}", NAMES[n]))
                    .ok()
                    .and_then(|f| f.header_names().first().map(|&n| n.clone()))
            })
            .collect();
        let names = filters
            .iter()
            .take(1)
            .flat_map(Filter::header_names)
            .chain(extra.iter());
        let mut columns = Columns::new(names);
        // One set of columns reads chunks in turn (a feed's): the part
        // after the middle, the whole (a longer chunk after a shorter),
        // then the first third (a shorter after a longer). What a chunk
        // left must not show through the next.
        let n = records.len();
        for chunk in [&records[n / 2..], &records[..], &records[..n / 3]] {
            columns.read(chunk);
            let shown = &chunk[..chunk.len().min(64)];
            prop_assert_eq!(columns.records().len(), shown.len());
            for filter in &filters {
                let selected = filter.select_columns(&columns, candidates);
                for (i, record) in shown.iter().enumerate() {
                    let expected = candidates >> i & 1 == 1 && filter.matches(record.record());
                    prop_assert_eq!(selected >> i & 1 == 1, expected, "{} on record {} of {}", filter, i, shown.len());
                }
                if shown.len() < 64 {
                    prop_assert_eq!(selected >> shown.len(), 0);
                }
            }
            let timestamps: Vec<i64> = shown.iter().map(|r| r.record().timestamp).collect();
            let range = timestamps.iter().min().copied().zip(timestamps.iter().max().copied());
            prop_assert_eq!(columns.time_range(), range);
        }
    }
}
