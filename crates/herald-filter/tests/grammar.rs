//! The filter language from the outside: what parses, what is refused and
//! with which error, and that the canonical form reads back the same.

mod common;

use common::Record;
use herald_filter::{Filter, FilterError, FILTER_BYTES_MAX, FILTER_DEPTH_MAX, FILTER_TESTS_MAX};
use proptest::prelude::*;

#[test]
fn invalid_filters_get_an_error_that_says_where_and_why() {
    let syntax_at = |text: &str| match Filter::parse(text) {
        Err(FilterError::Syntax { at, .. }) => at,
        other => panic!("{text}: expected a syntax error, got {other:?}"),
    };
    assert_eq!(Filter::parse("  "), Err(FilterError::Empty));
    assert_eq!(syntax_at("header.a =="), 11);
    assert_eq!(syntax_at("header.a = 1"), 9);
    assert_eq!(syntax_at("payload == 1"), 0);
    assert_eq!(syntax_at("value. == 1"), 0);
    assert_eq!(syntax_at("value.a..b == 1"), 0);
    assert_eq!(syntax_at("value[1] == 1"), 6);
    assert_eq!(syntax_at("header. == 1"), 0);
    assert_eq!(syntax_at(r#"header.a == "x" and"#), 19);
    assert_eq!(syntax_at(r#"header.a == "x" header.b == "y""#), 16);
    assert_eq!(syntax_at(r#"header.a > "x""#), 11);
    assert_eq!(syntax_at("key starts_with 1"), 16);
    assert_eq!(syntax_at(r#"header.a in ("x" "y")"#), 17);
    assert_eq!(syntax_at(r#"header.a == "unterminated"#), 12);
    assert_eq!(syntax_at(r#"header.a == "\q""#), 13);
    assert_eq!(syntax_at("(exists key"), 11);
    assert_eq!(syntax_at("header.a == 1.2.3"), 12);
    assert_eq!(syntax_at("header.a == @"), 12);
    let message = Filter::parse("header.a =")
        .expect_err("invalid")
        .to_string();
    assert!(message.contains("byte 9"), "{message}");
}

#[test]
fn limits_on_size_tests_and_depth() {
    let long = format!("key == \"{}\"", "x".repeat(FILTER_BYTES_MAX));
    assert!(matches!(
        Filter::parse(&long),
        Err(FilterError::TooLarge { .. })
    ));
    let many = vec!["exists key"; FILTER_TESTS_MAX + 1].join(" or ");
    assert!(matches!(
        Filter::parse(&many),
        Err(FilterError::TooLarge { .. })
    ));
    let enough = vec!["exists key"; FILTER_TESTS_MAX].join(" or ");
    assert!(Filter::parse(&enough).is_ok());
    let deep = format!(
        "{}exists key{}",
        "(".repeat(FILTER_DEPTH_MAX),
        ")".repeat(FILTER_DEPTH_MAX)
    );
    assert!(matches!(
        Filter::parse(&deep),
        Err(FilterError::TooLarge { .. })
    ));
    let nots = format!("{}exists key", "not ".repeat(FILTER_DEPTH_MAX));
    assert!(matches!(
        Filter::parse(&nots),
        Err(FilterError::TooLarge { .. })
    ));
    let fine = format!(
        "{}exists key{}",
        "(".repeat(FILTER_DEPTH_MAX - 2),
        ")".repeat(FILTER_DEPTH_MAX - 2)
    );
    assert!(Filter::parse(&fine).is_ok());
}

fn field() -> impl Strategy<Value = String> {
    prop::sample::select(vec![
        "key",
        "header.a",
        "header.b",
        r#"header["c d"]"#,
        "timestamp",
        "value",
        "value.a",
        r#"value["b c"]["d"]"#,
    ])
    .prop_map(str::to_owned)
}

fn value() -> impl Strategy<Value = String> {
    prop_oneof![
        prop::sample::select(vec![r#""x""#, r#""y""#, r#""1""#, r#""\x00\"""#])
            .prop_map(str::to_owned),
        (-3i32..4).prop_map(|n| n.to_string()),
        (-30i32..40).prop_map(|n| format!("{}", f64::from(n) / 10.0)),
    ]
}

fn test() -> impl Strategy<Value = String> {
    prop_oneof![
        field().prop_map(|f| format!("exists {f}")),
        (field(), prop::sample::select(vec!["==", "!="]), value())
            .prop_map(|(f, o, v)| format!("{f} {o} {v}")),
        (
            field(),
            prop::sample::select(vec!["<", "<=", ">", ">="]),
            -3i32..4
        )
            .prop_map(|(f, o, n)| format!("{f} {o} {n}")),
        (field(), prop::collection::vec(value(), 1..4))
            .prop_map(|(f, vs)| format!("{f} in ({})", vs.join(", "))),
        (
            field(),
            prop::sample::select(vec![r#""""#, r#""x""#, r#""1""#])
        )
            .prop_map(|(f, p)| format!("{f} starts_with {p}")),
    ]
}

fn expression() -> impl Strategy<Value = String> {
    test().prop_recursive(4, 16, 3, |inner| {
        prop_oneof![
            inner.clone().prop_map(|e| format!("not {e}")),
            prop::collection::vec(inner.clone(), 2..4)
                .prop_map(|es| format!("({})", es.join(" and "))),
            prop::collection::vec(inner, 2..4).prop_map(|es| format!("({})", es.join(" or "))),
        ]
    })
}

fn bytes() -> impl Strategy<Value = Vec<u8>> {
    prop::sample::select(vec![
        &b"x"[..],
        b"y",
        b"1",
        b"1.0",
        b"-2",
        b"0.5",
        b"xy",
        b"\x00\"",
        b"",
    ])
    .prop_map(<[u8]>::to_vec)
}

fn record() -> impl Strategy<Value = Record> {
    let name = prop::sample::select(vec![&b"a"[..], b"b", b"c d"]).prop_map(<[u8]>::to_vec);
    let value = prop::option::of(prop::sample::select(vec![
        &br#"{"a": 1, "b c": {"d": "x"}}"#[..],
        br#"{"b c": {"d": 0.5}, "a": "y"}"#,
        br#"{"a": null, "b c": []}"#,
        br#"{"a": -2}"#,
        b"x",
        b"1",
        b"",
    ]))
    .prop_map(|v| v.map(<[u8]>::to_vec));
    (
        prop::option::of(bytes()),
        prop::collection::vec((name, prop::option::of(bytes())), 0..4),
        value,
        prop::sample::select(vec![-2i64, 0, 1, 5]),
    )
        .prop_map(|(key, headers, value, timestamp)| Record {
            key,
            headers,
            value,
            timestamp,
        })
}

proptest! {
    /// The canonical form parses back to the same filter, which decides
    /// every record the same way.
    #[test]
    fn the_canonical_form_reads_back_the_same(text in expression(), records in prop::collection::vec(record(), 1..8)) {
        let filter = Filter::parse(&text).map_err(|e| TestCaseError::fail(format!("{text}: {e}")))?;
        let canonical = filter.to_string();
        let again = Filter::parse(&canonical).map_err(|e| TestCaseError::fail(format!("{canonical}: {e}")))?;
        prop_assert_eq!(&again, &filter);
        for record in &records {
            prop_assert_eq!(again.matches(record), filter.matches(record));
        }
    }

    /// `not` is the complement and `!=` is `not ==`, on any record.
    #[test]
    fn not_is_the_complement(text in expression(), record in record()) {
        let filter = Filter::parse(&text).map_err(|e| TestCaseError::fail(format!("{text}: {e}")))?;
        let negated = Filter::parse(&format!("not ({text})")).map_err(|e| TestCaseError::fail(e.to_string()))?;
        prop_assert_eq!(negated.matches(&record), !filter.matches(&record));
    }

    /// Any text at all: an error or a filter, never a panic.
    #[test]
    fn any_text_parses_or_is_refused(text in "[ -~]{0,64}") {
        let _ = Filter::parse(&text);
    }
}
