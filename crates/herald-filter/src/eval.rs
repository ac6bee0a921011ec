//! Evaluating a compiled filter against a record: a walk over the tree,
//! no allocation (a number is read from the field's bytes in place).

use crate::parser::{Comparison, Field, Filter, Node, Predicate, Value};
use crate::Fields;

impl Filter {
    /// True if `record` satisfies the filter.
    pub fn matches(&self, record: &impl Fields) -> bool {
        self.root.eval(record)
    }
}

impl Filter {
    /// Which of up to 64 `records` satisfy the filter, of those whose bit
    /// is set in `candidates` (bit `i` for `records[i]`): the answer
    /// [`Filter::matches`] gives for each, computed a test at a time over
    /// all of them, which costs a fraction of a walk over the tree per
    /// record when many filters read the same records (the online queries
    /// of a topic). A test is made only for the records the tests before
    /// it leave undecided.
    pub fn select<R: Fields>(&self, records: &[R], candidates: u64) -> u64 {
        let records = &records[..records.len().min(64)];
        select_in(&self.root, records, candidates)
    }
}

/// The positions of the records a mask of [`Filter::select`] holds (its
/// set bits), lowest first.
pub fn selected(mut mask: u64) -> impl Iterator<Item = usize> {
    std::iter::from_fn(move || {
        if mask == 0 {
            return None;
        }
        let at = mask.trailing_zeros() as usize;
        mask &= mask - 1;
        Some(at)
    })
}

/// The records of `candidates` for which `test` holds.
#[inline]
fn select_each<R>(records: &[R], candidates: u64, test: impl Fn(&R) -> bool) -> u64 {
    let mut passed = 0;
    for at in selected(candidates) {
        if test(&records[at]) {
            passed |= 1 << at;
        }
    }
    passed
}

/// Records a filter is run over a test at a time: a slice of them, or
/// [`crate::Columns`] read out of them.
pub(crate) trait Chunk {
    /// How many records (at most 64).
    fn len(&self) -> usize;
    /// The records of `candidates` for which `field` passes `predicate`.
    fn test(&self, field: &Field, predicate: &Predicate, candidates: u64) -> u64;
}

/// The records of `candidates` that satisfy `node`: each `and` member
/// tested on what the ones before it let through, each `or` member on
/// what they left undecided.
pub(crate) fn select_in<C: Chunk + ?Sized>(node: &Node, chunk: &C, candidates: u64) -> u64 {
    let candidates = match chunk.len() {
        0 => 0,
        n @ 1..=63 => candidates & ((1u64 << n) - 1),
        _ => candidates,
    };
    select_node(node, chunk, candidates)
}

fn select_node<C: Chunk + ?Sized>(node: &Node, chunk: &C, candidates: u64) -> u64 {
    match node {
        Node::All(nodes) => {
            let mut selected = candidates;
            for node in nodes.iter() {
                if selected == 0 {
                    break;
                }
                selected = select_node(node, chunk, selected);
            }
            selected
        }
        Node::Any(nodes) => {
            let (mut selected, mut undecided) = (0, candidates);
            for node in nodes.iter() {
                if undecided == 0 {
                    break;
                }
                let hits = select_node(node, chunk, undecided);
                selected |= hits;
                undecided &= !hits;
            }
            selected
        }
        Node::Not(node) => candidates & !select_node(node, chunk, candidates),
        Node::Test(field, predicate) => chunk.test(field, predicate, candidates),
    }
}

impl<R: Fields> Chunk for [R] {
    fn len(&self) -> usize {
        <[R]>::len(self)
    }

    fn test(&self, field: &Field, predicate: &Predicate, candidates: u64) -> u64 {
        let records = self;
        match (field, predicate) {
            // The field's kind is chosen once for all the records.
            (Field::Timestamp, Predicate::Compare(comparison, n)) => {
                select_each(records, candidates, |r| {
                    r.timestamp()
                        .is_some_and(|t| comparison.holds(t as f64, *n))
                })
            }
            // A number kept for the other filters of the record.
            (Field::Json(path), Predicate::Compare(comparison, n)) => {
                select_each(records, candidates, |r| match r.kept_json_number(path) {
                    Some(x) => x.is_some_and(|x| comparison.holds(x, *n)),
                    None => with_field(field, r, |found| {
                        found
                            .flatten()
                            .and_then(number)
                            .is_some_and(|x| comparison.holds(x, *n))
                    }),
                })
            }
            (Field::Key, predicate) => predicate.select(records, candidates, |r| r.key().map(Some)),
            (Field::Header(name), predicate) => {
                predicate.select(records, candidates, |r| r.header(name.as_bytes()))
            }
            (field, predicate) => select_each(records, candidates, |r| {
                with_field(field, r, |found| predicate.holds(found))
            }),
        }
    }
}

impl Node {
    fn eval(&self, record: &impl Fields) -> bool {
        match self {
            Node::All(nodes) => nodes.iter().all(|n| n.eval(record)),
            Node::Any(nodes) => nodes.iter().any(|n| n.eval(record)),
            Node::Not(node) => !node.eval(record),
            // A timestamp against a number is compared as a number: no
            // decimal digits written only to be parsed back.
            Node::Test(Field::Timestamp, Predicate::Compare(comparison, n)) => record
                .timestamp()
                .is_some_and(|t| comparison.holds(t as f64, *n)),
            Node::Test(field, predicate) => {
                with_field(field, record, |found| predicate.holds(found))
            }
        }
    }
}

/// Calls `read` with what `field` holds in `record`. Outer `None`: no such
/// field; inner `None`: present, null (or a JSON object or array).
pub(crate) fn with_field<R>(
    field: &Field,
    record: &impl Fields,
    read: impl FnOnce(Option<Option<&[u8]>>) -> R,
) -> R {
    match field {
        Field::Key => read(record.key().map(Some)),
        Field::Header(name) => read(record.header(name.as_bytes())),
        Field::Value => read(record.value().map(Some)),
        Field::Timestamp => match record.timestamp() {
            Some(t) => {
                let mut digits = [0u8; 20];
                read(Some(Some(decimal(t, &mut digits))))
            }
            None => read(None),
        },
        Field::Json(path) => match record.kept_json_field(path) {
            Some(found) => read(found),
            None => match record.value() {
                Some(value) => json_field(value, &path.steps, read),
                None => read(None),
            },
        },
    }
}

impl crate::FieldRef {
    /// Calls `read` with what the field holds in `record`: `None` if it is
    /// not there, `Some(None)` if it is null (or a JSON object or array),
    /// its bytes otherwise (a JSON string's text, a number's digits).
    pub fn read<R>(
        &self,
        record: &impl Fields,
        read: impl FnOnce(Option<Option<&[u8]>>) -> R,
    ) -> R {
        with_field(&self.0, record, read)
    }

    /// The field as a finite number, if its bytes are a decimal number.
    pub fn number(&self, record: &impl Fields) -> Option<f64> {
        match &self.0 {
            Field::Timestamp => return record.timestamp().map(|t| t as f64),
            Field::Json(path) => {
                if let Some(number) = record.kept_json_number(path) {
                    return number;
                }
            }
            _ => {}
        }
        self.read(record, |found| found.flatten().and_then(number))
    }
}

impl Predicate {
    /// The records of `candidates` whose field, as `read` finds it, passes:
    /// the predicate's kind chosen once for them all.
    #[inline]
    pub(crate) fn select<R>(
        &self,
        records: &[R],
        candidates: u64,
        read: impl for<'r> Fn(&'r R) -> Option<Option<&'r [u8]>>,
    ) -> u64 {
        match self {
            Predicate::Exists => select_each(records, candidates, |r| read(r).is_some()),
            Predicate::Eq(Value::Bytes(expected)) => select_each(records, candidates, |r| {
                read(r)
                    .flatten()
                    .is_some_and(|b| crate::bytes::same(expected, b))
            }),
            Predicate::Ne(Value::Bytes(expected)) => select_each(records, candidates, |r| {
                !read(r)
                    .flatten()
                    .is_some_and(|b| crate::bytes::same(expected, b))
            }),
            Predicate::StartsWith(prefix) => select_each(records, candidates, |r| {
                read(r)
                    .flatten()
                    .is_some_and(|b| crate::bytes::starts_with(b, prefix))
            }),
            _ => select_each(records, candidates, |r| self.holds(read(r))),
        }
    }

    fn holds(&self, found: Option<Option<&[u8]>>) -> bool {
        let value = found.flatten();
        match self {
            Predicate::Exists => found.is_some(),
            Predicate::Eq(v) => value.is_some_and(|b| v.equals(b)),
            Predicate::Ne(v) => !value.is_some_and(|b| v.equals(b)),
            Predicate::Compare(comparison, n) => value
                .and_then(number)
                .is_some_and(|x| comparison.holds(x, *n)),
            Predicate::In(values) => value.is_some_and(|b| values.iter().any(|v| v.equals(b))),
            Predicate::StartsWith(prefix) => {
                value.is_some_and(|b| crate::bytes::starts_with(b, prefix))
            }
        }
    }
}

impl Comparison {
    pub(crate) fn holds(self, x: f64, n: f64) -> bool {
        match self {
            Comparison::Lt => x < n,
            Comparison::Le => x <= n,
            Comparison::Gt => x > n,
            Comparison::Ge => x >= n,
        }
    }
}

impl Value {
    fn equals(&self, bytes: &[u8]) -> bool {
        match self {
            Value::Bytes(expected) => crate::bytes::same(expected, bytes),
            Value::Number(n) => number(bytes) == Some(*n),
        }
    }
}

/// `n` written in decimal into `buffer`; the digits written.
fn decimal(n: i64, buffer: &mut [u8; 20]) -> &[u8] {
    let mut at = buffer.len();
    let mut rest = n.unsigned_abs();
    loop {
        at -= 1;
        buffer[at] = b'0' + (rest % 10) as u8;
        rest /= 10;
        if rest == 0 {
            break;
        }
    }
    if n < 0 {
        at -= 1;
        buffer[at] = b'-';
    }
    &buffer[at..]
}

/// Calls `test` with what `path` names in `value` read as JSON: `None` if
/// it is not there (or `value` is not JSON up to it), `Some(None)` for a
/// null, an object or an array, and the text of a string, a number or a
/// boolean otherwise. Only what lies before the field is scanned, and
/// nothing is allocated unless a string holds escapes.
fn json_field<R>(
    value: &[u8],
    path: &[Box<[u8]>],
    test: impl FnOnce(Option<Option<&[u8]>>) -> R,
) -> R {
    let mut json = jiter::Jiter::new(value);
    for step in path {
        if !enter(&mut json, step) {
            return test(None);
        }
    }
    let Ok(peek) = json.peek() else {
        return test(None);
    };
    match peek {
        jiter::Peek::String => match json.known_str() {
            Ok(text) => test(Some(Some(text.as_bytes()))),
            Err(_) => test(None),
        },
        jiter::Peek::True => test(Some(Some(b"true"))),
        jiter::Peek::False => test(Some(Some(b"false"))),
        jiter::Peek::Null | jiter::Peek::Array | jiter::Peek::Object => test(Some(None)),
        number => match json.known_number_bytes(number) {
            Ok(digits) => test(Some(Some(digits))),
            Err(_) => test(None),
        },
    }
}

/// The JSON field at `steps` of `value`, borrowed from `value`, as
/// [`json_field`] shows it; `None` for a string with escapes, whose text
/// differs from its bytes (the caller looks it up with [`json_field`]).
pub(crate) fn borrowed_json_field<'a>(
    value: &'a [u8],
    steps: &[Box<[u8]>],
) -> Option<Option<Option<&'a [u8]>>> {
    let mut json = jiter::Jiter::new(value);
    for step in steps {
        if !enter(&mut json, step) {
            return Some(None);
        }
    }
    let Ok(peek) = json.peek() else {
        return Some(None);
    };
    let start = json.current_index();
    Some(match peek {
        jiter::Peek::String => {
            if json.known_skip(peek).is_err() {
                return Some(None);
            }
            let quoted = json.slice_to_current(start);
            let text = quoted
                .get(1..quoted.len().saturating_sub(1))
                .unwrap_or_default();
            if text.contains(&b'\\') {
                return None;
            }
            // Skipping does not check the text is UTF-8; reading it does.
            std::str::from_utf8(text).ok().map(|_| Some(text))
        }
        jiter::Peek::True => Some(Some(b"true")),
        jiter::Peek::False => Some(Some(b"false")),
        jiter::Peek::Null | jiter::Peek::Array | jiter::Peek::Object => Some(None),
        number => match json.known_number_bytes(number) {
            Ok(_) => Some(Some(json.slice_to_current(start))),
            Err(_) => None,
        },
    })
}

/// Moves `json` from an object to the value of its field `name`; false if
/// it is not an object or has no such field.
fn enter(json: &mut jiter::Jiter<'_>, name: &[u8]) -> bool {
    let mut found = match json.next_object() {
        Ok(Some(key)) => key.as_bytes() == name,
        _ => return false,
    };
    loop {
        if found {
            return true;
        }
        if json.next_skip().is_err() {
            return false;
        }
        found = match json.next_key() {
            Ok(Some(key)) => key.as_bytes() == name,
            _ => return false,
        };
    }
}

/// The field's bytes as a finite decimal number, if they are one.
pub(crate) fn number(bytes: &[u8]) -> Option<f64> {
    if let Some(x) = short_decimal(bytes) {
        return Some(x);
    }
    // Only digits, signs, a point and an exponent: `f64::from_str` would
    // also take "inf" and "NaN", which are not numbers a publisher meant.
    if bytes.is_empty()
        || !bytes
            .iter()
            .all(|b| b.is_ascii_digit() || matches!(b, b'-' | b'+' | b'.' | b'e' | b'E'))
    {
        return None;
    }
    std::str::from_utf8(bytes)
        .ok()?
        .parse::<f64>()
        .ok()
        .filter(|x| x.is_finite())
}

/// Exact powers of ten (every one up to 10^22 is an `f64`).
const POWERS_OF_TEN: [f64; 16] = [
    1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11, 1e12, 1e13, 1e14, 1e15,
];

/// The common numbers (`-12`, `3.25`: a sign, at most 15 digits, a point)
/// read without the general parser: their digits make an integer an
/// `f64` holds exactly, divided by an exact power of ten, which rounds
/// once, correctly (Clinger's fast path), so the answer is the general
/// parser's. `None`: not such a number.
fn short_decimal(bytes: &[u8]) -> Option<f64> {
    let (negative, digits) = match bytes.split_first() {
        Some((b'-', rest)) => (true, rest),
        _ => (false, bytes),
    };
    let (mut mantissa, mut count, mut fraction, mut point) = (0u64, 0usize, 0usize, false);
    for &b in digits {
        match b {
            b'0'..=b'9' => {
                mantissa = mantissa * 10 + u64::from(b - b'0');
                count += 1;
                fraction += usize::from(point);
                if count > 15 {
                    return None;
                }
            }
            b'.' if !point => point = true,
            _ => return None,
        }
    }
    if count == 0 {
        return None;
    }
    let x = mantissa as f64 / POWERS_OF_TEN[fraction];
    Some(if negative { -x } else { x })
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        /// The short path reads every number it takes exactly as the
        /// general parser does, and declines nothing that parser reads
        /// as something else.
        #[test]
        fn short_decimals_read_as_the_parser_reads_them(text in "-?[0-9]{0,18}(\\.[0-9]{0,18})?") {
            let general = text.parse::<f64>().ok();
            if let Some(x) = short_decimal(text.as_bytes()) {
                prop_assert_eq!(Some(x.to_bits()), general.map(f64::to_bits), "{}", text);
            }
            prop_assert_eq!(number(text.as_bytes()).map(f64::to_bits), general.filter(|x| x.is_finite()).map(f64::to_bits));
        }
    }

    /// A record as a key, a list of headers, a value and a timestamp.
    struct Record {
        key: Option<&'static [u8]>,
        headers: Vec<(&'static str, Option<&'static [u8]>)>,
        value: Option<&'static [u8]>,
        timestamp: Option<i64>,
    }

    impl Fields for Record {
        fn key(&self) -> Option<&[u8]> {
            self.key
        }
        fn value(&self) -> Option<&[u8]> {
            self.value
        }
        fn timestamp(&self) -> Option<i64> {
            self.timestamp
        }
        fn header(&self, name: &[u8]) -> Option<Option<&[u8]>> {
            self.headers
                .iter()
                .find(|(n, _)| n.as_bytes() == name)
                .map(|(_, v)| *v)
        }
    }

    fn record() -> Record {
        Record {
            key: Some(b"orders.eu.42"),
            headers: vec![
                ("region", Some(b"eu")),
                ("amount", Some(b"120.5")),
                ("count", Some(b"1e2")),
                ("note", None),
                ("region", Some(b"us")),
            ],
            value: Some(br#"{"id": 7, "order": {"total": 120.5, "city": "Z\u00fcrich", "paid": true, "tags": ["a"], "note": null}, "order.total": 1}"#),
            timestamp: Some(1_700_000_000_123),
        }
    }

    fn check(text: &str) -> bool {
        Filter::parse(text)
            .unwrap_or_else(|e| panic!("{text}: {e}"))
            .matches(&record())
    }

    #[test]
    fn tests_over_the_key_and_headers() {
        assert!(check(r#"key == "orders.eu.42""#));
        assert!(check(r#"key starts_with "orders.""#));
        assert!(!check(r#"key starts_with "users.""#));
        // The first header of a name counts.
        assert!(check(r#"header.region == "eu""#));
        assert!(!check(r#"header.region == "us""#));
        assert!(check(r#"header["region"] in ("fr", "eu")"#));
        assert!(check("header.amount > 100 and header.amount <= 120.5"));
        assert!(!check("header.amount < 120.5"));
        assert!(check("header.count == 100"));
        assert!(check(r#"header.count == "1e2""#));
        assert!(!check(r#"header.count == "100""#));
    }

    #[test]
    fn missing_and_null_fields() {
        assert!(check("exists header.note"));
        assert!(!check("exists header.absent"));
        assert!(!check(r#"header.absent == "x""#));
        assert!(check(r#"header.absent != "x""#));
        assert!(!check(r#"header.note == "x""#));
        assert!(check(r#"header.note != "x""#));
        assert!(!check("header.absent > 0 or header.absent <= 0"));
        let keyless = Record {
            key: None,
            headers: vec![],
            value: None,
            timestamp: None,
        };
        let filter = Filter::parse("exists key").expect("valid");
        assert!(!filter.matches(&keyless));
        assert!(filter.matches(&record()));
    }

    #[test]
    fn a_non_numeric_field_satisfies_no_comparison() {
        assert!(!check("header.region > 0 or header.region <= 0"));
        let odd = Record {
            key: None,
            headers: vec![("n", Some(b"inf")), ("m", Some(b"NaN"))],
            value: Some(b"not json"),
            timestamp: Some(-5),
        };
        let filter = Filter::parse("header.n > 0 or header.m > 0 or header.m <= 0").expect("valid");
        assert!(!filter.matches(&odd));
    }

    #[test]
    fn the_timestamp_and_the_values_json_fields() {
        assert!(check(
            "timestamp >= 1700000000000 and timestamp < 1700000000124"
        ));
        assert!(check("timestamp == 1700000000123"));
        assert!(check(r#"timestamp == "1700000000123""#));
        assert!(check(r#"value starts_with "{""#));
        assert!(check("value.id == 7 and value.id in (6, 7)"));
        assert!(check(
            "value.order.total > 100 and value.order.total <= 120.5"
        ));
        assert!(check(r#"value["order"]["total"] == 120.5"#));
        assert!(check(r#"value["order.total"] == 1"#));
        assert!(check(r#"value.order.city == "Zürich""#));
        assert!(check(r#"value.order.city starts_with "Z""#));
        assert!(check(r#"value.order.paid == "true""#));
        assert!(check("exists value.order.note and exists value.order.tags"));
        assert!(!check(r#"value.order.note == "null""#));
        assert!(!check(
            "exists value.order.missing or exists value.id.deeper"
        ));
        assert!(check(r#"value.order.missing != "x""#));
        let odd = Record {
            key: None,
            headers: vec![],
            value: Some(b"not json"),
            timestamp: Some(-5),
        };
        for (text, expected) in [
            ("exists value.a", false),
            ("exists value", true),
            ("timestamp < 0 and timestamp == -5", true),
        ] {
            assert_eq!(
                Filter::parse(text).expect("valid").matches(&odd),
                expected,
                "{text}"
            );
        }
    }

    #[test]
    fn a_field_reads_what_a_filter_tests() {
        let total = crate::FieldRef::parse("value.order.total").expect("valid");
        assert_eq!(total.number(&record()), Some(120.5));
        assert_eq!(total.to_string(), r#"value["order"]["total"]"#);
        let city = crate::FieldRef::parse(r#"value["order"]["city"]"#).expect("valid");
        assert_eq!(
            city.read(&record(), |found| found.flatten().map(<[u8]>::to_vec)),
            Some("Zürich".as_bytes().to_vec())
        );
        assert_eq!(city.number(&record()), None);
        let time = crate::FieldRef::parse("timestamp").expect("valid");
        assert_eq!(time.number(&record()), Some(1_700_000_000_123.0));
        assert_eq!(
            crate::FieldRef::parse("header.amount")
                .expect("valid")
                .number(&record()),
            Some(120.5)
        );
        for bad in ["", "key key", "nothing", "value.", "header[1]"] {
            assert!(crate::FieldRef::parse(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn decimal_writes_every_i64() {
        for n in [0, 7, -7, 10, 1_700_000_000_123, i64::MAX, i64::MIN] {
            let mut digits = [0u8; 20];
            assert_eq!(decimal(n, &mut digits), n.to_string().as_bytes());
        }
    }

    #[test]
    fn and_or_not_and_their_precedence() {
        // `and` binds tighter than `or`; `not` tighter than both.
        assert!(check(
            r#"header.region == "us" or header.region == "eu" and exists header.note"#
        ));
        assert!(!check(
            r#"(header.region == "us" or header.region == "eu") and exists header.x"#
        ));
        assert!(check(
            r#"not header.region == "us" and not exists header.x"#
        ));
        assert!(check(
            r#"NOT header.region == "us" AND key IN ("orders.eu.42")"#
        ));
    }
}
