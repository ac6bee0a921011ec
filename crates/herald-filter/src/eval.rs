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

impl Node {
    fn eval(&self, record: &impl Fields) -> bool {
        match self {
            Node::All(nodes) => nodes.iter().all(|n| n.eval(record)),
            Node::Any(nodes) => nodes.iter().any(|n| n.eval(record)),
            Node::Not(node) => !node.eval(record),
            Node::Test(field, predicate) => {
                // Outer None: no such field; inner None: present, null.
                let found = match field {
                    Field::Key => record.key().map(Some),
                    Field::Header(name) => record.header(name),
                };
                predicate.holds(found)
            }
        }
    }
}

impl Predicate {
    fn holds(&self, found: Option<Option<&[u8]>>) -> bool {
        let value = found.flatten();
        match self {
            Predicate::Exists => found.is_some(),
            Predicate::Eq(v) => value.is_some_and(|b| v.equals(b)),
            Predicate::Ne(v) => !value.is_some_and(|b| v.equals(b)),
            Predicate::Compare(comparison, n) => {
                value.and_then(number).is_some_and(|x| match comparison {
                    Comparison::Lt => x < *n,
                    Comparison::Le => x <= *n,
                    Comparison::Gt => x > *n,
                    Comparison::Ge => x >= *n,
                })
            }
            Predicate::In(values) => value.is_some_and(|b| values.iter().any(|v| v.equals(b))),
            Predicate::StartsWith(prefix) => value.is_some_and(|b| b.starts_with(prefix)),
        }
    }
}

impl Value {
    fn equals(&self, bytes: &[u8]) -> bool {
        match self {
            Value::Bytes(expected) => **expected == *bytes,
            Value::Number(n) => number(bytes) == Some(*n),
        }
    }
}

/// The field's bytes as a finite decimal number, if they are one.
fn number(bytes: &[u8]) -> Option<f64> {
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

#[cfg(test)]
mod tests {
    use super::*;

    /// A record as a key and a list of headers.
    struct Record {
        key: Option<&'static [u8]>,
        headers: Vec<(&'static str, Option<&'static [u8]>)>,
    }

    impl Fields for Record {
        fn key(&self) -> Option<&[u8]> {
            self.key
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
        };
        let filter = Filter::parse("header.n > 0 or header.m > 0 or header.m <= 0").expect("valid");
        assert!(!filter.matches(&odd));
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
