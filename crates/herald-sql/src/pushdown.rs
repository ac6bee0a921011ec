//! Which of a query's filters narrow what a scan reads: comparisons of
//! `partition`, `offset` and `timestamp` with constants (and `IN` lists,
//! `BETWEEN`), and `key` or `key_bytes` equal to a constant or in a list
//! of them. They become the partitions to read and, per partition, an
//! offset range (its start from the log's time index, its end from the
//! history index's smallest timestamps) and, for keys, the batches the
//! history index's key index names. DataFusion still applies every
//! filter to what is read (the pushdown is inexact): the scan only skips
//! what cannot match.

use std::collections::BTreeSet;

use datafusion::logical_expr::{Between, BinaryExpr, Expr, Operator};
use datafusion::scalar::ScalarValue;

use crate::schema::{
    KEY_BYTES_COLUMN, KEY_COLUMN, OFFSET_COLUMN, PARTITION_COLUMN, TIMESTAMP_COLUMN,
};

/// What the pushed filters allow a scan to read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Bounds {
    /// The partitions that may hold matches (also within
    /// `partition_range`); every one when `None`.
    pub(crate) partitions: Option<BTreeSet<i32>>,
    /// Partitions `partition_range.0 ..= partition_range.1` may match.
    pub(crate) partition_range: (i64, i64),
    /// Offsets `offsets.0 ..= offsets.1` may match.
    pub(crate) offsets: (i64, i64),
    /// Timestamps (ms) `times.0 ..= times.1` may match.
    pub(crate) times: (i64, i64),
    /// The record keys that may match; any when `None`.
    pub(crate) keys: Option<BTreeSet<Vec<u8>>>,
}

impl Default for Bounds {
    fn default() -> Self {
        Self {
            partitions: None,
            partition_range: (i64::MIN, i64::MAX),
            offsets: (i64::MIN, i64::MAX),
            times: (i64::MIN, i64::MAX),
            keys: None,
        }
    }
}

impl Bounds {
    /// Whether partition `index` may hold matches.
    pub(crate) fn reads_partition(&self, index: i32) -> bool {
        self.partitions.as_ref().is_none_or(|p| p.contains(&index))
            && (self.partition_range.0..=self.partition_range.1).contains(&i64::from(index))
    }

    /// Whether nothing can match.
    pub(crate) fn is_empty(&self) -> bool {
        self.offsets.0 > self.offsets.1
            || self.times.0 > self.times.1
            || self.partition_range.0 > self.partition_range.1
            || self.partitions.as_ref().is_some_and(BTreeSet::is_empty)
            || self.keys.as_ref().is_some_and(BTreeSet::is_empty)
    }
}

/// Whether `filter` narrows a scan (DataFusion is told it is applied
/// inexactly, and applies it again).
pub(crate) fn narrows(filter: &Expr) -> bool {
    let mut bounds = Bounds::default();
    apply(filter, &mut bounds)
}

/// Whether the scan applies `filter` exactly, so DataFusion need not
/// apply it again (no filter above the scan: its first rows go out at
/// once): comparisons of `partition` and `offset` with integers, of
/// `timestamp` with a timestamp in seconds or milliseconds (finer ones are
/// rounded outwards), `key` or `key_bytes` equal to constants, and
/// conjunctions of those. The scan reads only the partitions and offsets
/// allowed and passes over records outside the time range or with
/// another key.
pub(crate) fn exact(filter: &Expr) -> bool {
    // Key equalities (alone, in a list, or joined by OR) are applied whole.
    if only_keys(filter).is_some() {
        return true;
    }
    match filter {
        Expr::BinaryExpr(BinaryExpr { left, op, right }) if *op == Operator::And => {
            exact(left) && exact(right)
        }
        Expr::InList(list) if !list.negated && column(&list.expr) == Some(PARTITION_COLUMN) => list
            .list
            .iter()
            .all(|item| constant(item).as_ref().and_then(integer).is_some()),
        Expr::BinaryExpr(BinaryExpr { left, op, right }) => {
            let comparison = matches!(
                op,
                Operator::Eq | Operator::Lt | Operator::LtEq | Operator::Gt | Operator::GtEq
            );
            comparison
                && match (column(left), column(right)) {
                    (Some(name), None) => exact_constant(name, right),
                    (None, Some(name)) => exact_constant(name, left),
                    _ => false,
                }
        }
        Expr::Between(Between {
            expr,
            negated: false,
            low,
            high,
        }) => {
            column(expr).is_some_and(|name| exact_constant(name, low) && exact_constant(name, high))
        }
        _ => false,
    }
}

/// Whether comparing column `name` with `value` loses nothing in bounds.
fn exact_constant(name: &str, value: &Expr) -> bool {
    match constant(value) {
        Some(
            ScalarValue::TimestampSecond(Some(_), _)
            | ScalarValue::TimestampMillisecond(Some(_), _),
        ) => name == TIMESTAMP_COLUMN,
        Some(other) => name != TIMESTAMP_COLUMN && integer(&other).is_some(),
        None => false,
    }
}

/// The bounds every one of `filters` (a conjunction) sets.
pub(crate) fn bounds(filters: &[Expr]) -> Bounds {
    let mut bounds = Bounds::default();
    for filter in filters {
        apply(filter, &mut bounds);
    }
    bounds
}

/// Narrows `bounds` by `filter`; false when it says nothing usable.
fn apply(filter: &Expr, bounds: &mut Bounds) -> bool {
    match filter {
        Expr::BinaryExpr(BinaryExpr { left, op, right }) if *op == Operator::And => {
            // Both sides hold: each narrows on its own.
            let l = apply(left, bounds);
            let r = apply(right, bounds);
            l || r
        }
        Expr::BinaryExpr(BinaryExpr { left, op, right }) if *op == Operator::Or => {
            // Either side may hold: usable when both only name keys (what
            // DataFusion makes of a short `key IN (...)`).
            match (only_keys(left), only_keys(right)) {
                (Some(mut l), Some(r)) => {
                    l.extend(r);
                    restrict_keys(bounds, l);
                    true
                }
                _ => false,
            }
        }
        Expr::BinaryExpr(BinaryExpr {
            left,
            op: Operator::Eq,
            right,
        }) if is_key(left) || is_key(right) => {
            let value = if is_key(left) { right } else { left };
            match key_constant(value) {
                Some(key) => {
                    restrict_keys(bounds, BTreeSet::from([key]));
                    true
                }
                None => false,
            }
        }
        Expr::InList(list) if !list.negated && is_key(&list.expr) => {
            let keys = list
                .list
                .iter()
                .map(key_constant)
                .collect::<Option<BTreeSet<_>>>();
            match keys {
                Some(keys) => {
                    restrict_keys(bounds, keys);
                    true
                }
                None => false,
            }
        }
        Expr::BinaryExpr(BinaryExpr { left, op, right }) => {
            match (column(left), constant(right), column(right), constant(left)) {
                (Some(name), Some(value), _, _) => compare(name, *op, &value, bounds),
                (_, _, Some(name), Some(value)) => match flipped(*op) {
                    Some(op) => compare(name, op, &value, bounds),
                    None => false,
                },
                _ => false,
            }
        }
        Expr::Between(Between {
            expr,
            negated: false,
            low,
            high,
        }) => match (column(expr), constant(low), constant(high)) {
            (Some(name), Some(low), Some(high)) => {
                compare(name, Operator::GtEq, &low, bounds)
                    && compare(name, Operator::LtEq, &high, bounds)
            }
            _ => false,
        },
        Expr::InList(list) if !list.negated && column(&list.expr) == Some(PARTITION_COLUMN) => {
            let mut set = BTreeSet::new();
            for item in &list.list {
                match constant(item).as_ref().and_then(integer) {
                    Some(p) => {
                        set.insert(i32::try_from(p).unwrap_or(-1));
                    }
                    None => return false,
                }
            }
            restrict_partitions(bounds, set);
            true
        }
        _ => false,
    }
}

/// The keys `filter` allows, when that is all it says.
fn only_keys(filter: &Expr) -> Option<BTreeSet<Vec<u8>>> {
    let mut alone = Bounds::default();
    if !apply(filter, &mut alone) {
        return None;
    }
    let keys = alone.keys.take()?;
    (alone == Bounds::default()).then_some(keys)
}

fn restrict_keys(bounds: &mut Bounds, set: BTreeSet<Vec<u8>>) {
    bounds.keys = Some(match bounds.keys.take() {
        Some(known) => known.intersection(&set).cloned().collect(),
        None => set,
    });
}

/// Whether `expr` is the `key` or `key_bytes` column.
fn is_key(expr: &Expr) -> bool {
    matches!(expr, Expr::Column(c) if c.name == KEY_COLUMN || c.name == KEY_BYTES_COLUMN)
}

/// The bytes of a text or binary constant: a key compared with it.
fn key_constant(expr: &Expr) -> Option<Vec<u8>> {
    match constant(expr)? {
        ScalarValue::Utf8(Some(s))
        | ScalarValue::LargeUtf8(Some(s))
        | ScalarValue::Utf8View(Some(s)) => Some(s.into_bytes()),
        ScalarValue::Binary(Some(b))
        | ScalarValue::LargeBinary(Some(b))
        | ScalarValue::BinaryView(Some(b))
        | ScalarValue::FixedSizeBinary(_, Some(b)) => Some(b),
        _ => None,
    }
}

fn restrict_partitions(bounds: &mut Bounds, set: BTreeSet<i32>) {
    bounds.partitions = Some(match bounds.partitions.take() {
        Some(known) => known.intersection(&set).copied().collect(),
        None => set,
    });
}

/// The column `expr` names, if it is one of ours.
fn column(expr: &Expr) -> Option<&'static str> {
    match expr {
        Expr::Column(c) => [PARTITION_COLUMN, OFFSET_COLUMN, TIMESTAMP_COLUMN]
            .into_iter()
            .find(|name| c.name == *name),
        _ => None,
    }
}

fn constant(expr: &Expr) -> Option<ScalarValue> {
    match expr {
        Expr::Literal(value, _) => Some(value.clone()),
        _ => None,
    }
}

/// `a op b` as `b op' a`.
fn flipped(op: Operator) -> Option<Operator> {
    Some(match op {
        Operator::Eq => Operator::Eq,
        Operator::Lt => Operator::Gt,
        Operator::LtEq => Operator::GtEq,
        Operator::Gt => Operator::Lt,
        Operator::GtEq => Operator::LtEq,
        _ => return None,
    })
}

fn integer(value: &ScalarValue) -> Option<i64> {
    match value {
        ScalarValue::Int8(Some(v)) => Some(i64::from(*v)),
        ScalarValue::Int16(Some(v)) => Some(i64::from(*v)),
        ScalarValue::Int32(Some(v)) => Some(i64::from(*v)),
        ScalarValue::Int64(Some(v)) => Some(*v),
        ScalarValue::UInt8(Some(v)) => Some(i64::from(*v)),
        ScalarValue::UInt16(Some(v)) => Some(i64::from(*v)),
        ScalarValue::UInt32(Some(v)) => Some(i64::from(*v)),
        ScalarValue::UInt64(Some(v)) => i64::try_from(*v).ok(),
        _ => None,
    }
}

/// A timestamp constant in milliseconds, rounded towards `down` or up, so
/// the range it bounds is never narrower than the comparison's.
fn millis(value: &ScalarValue, down: bool) -> Option<i64> {
    let (v, per_ms) = match value {
        ScalarValue::TimestampSecond(Some(v), _) => return v.checked_mul(1000),
        ScalarValue::TimestampMillisecond(Some(v), _) => return Some(*v),
        ScalarValue::TimestampMicrosecond(Some(v), _) => (*v, 1_000),
        ScalarValue::TimestampNanosecond(Some(v), _) => (*v, 1_000_000),
        _ => return None,
    };
    Some(if down {
        v.div_euclid(per_ms)
    } else {
        v.div_euclid(per_ms) + i64::from(v.rem_euclid(per_ms) != 0)
    })
}

fn compare(name: &str, op: Operator, value: &ScalarValue, bounds: &mut Bounds) -> bool {
    let (low, high) = match name {
        n if n == TIMESTAMP_COLUMN => (millis(value, true), millis(value, false)),
        _ => (integer(value), integer(value)),
    };
    let (Some(low), Some(high)) = (low, high) else {
        return false;
    };
    // The closed range the comparison allows.
    let (from, to) = match op {
        Operator::Eq => (low, high),
        Operator::Gt => (low.saturating_add(1), i64::MAX),
        Operator::GtEq => (low, i64::MAX),
        Operator::Lt => (i64::MIN, high.saturating_sub(1)),
        Operator::LtEq => (i64::MIN, high),
        _ => return false,
    };
    match name {
        n if n == PARTITION_COLUMN => {
            bounds.partition_range = (
                bounds.partition_range.0.max(from),
                bounds.partition_range.1.min(to),
            );
        }
        n if n == OFFSET_COLUMN => {
            bounds.offsets = (bounds.offsets.0.max(from), bounds.offsets.1.min(to));
        }
        _ => {
            bounds.times = (bounds.times.0.max(from), bounds.times.1.min(to));
        }
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;
    use datafusion::logical_expr::{col, lit};

    fn ts(ms: i64) -> Expr {
        lit(ScalarValue::TimestampMillisecond(
            Some(ms),
            Some("UTC".into()),
        ))
    }

    #[test]
    fn comparisons_become_ranges_both_ways_round() {
        let b = bounds(&[
            col("offset").gt_eq(lit(10i64)),
            lit(20i64).gt(col("offset")),
            col("timestamp").gt(ts(1_000)),
            col("timestamp").lt_eq(ts(2_000)),
            col("partition").eq(lit(3i32)),
        ]);
        assert_eq!(b.offsets, (10, 19));
        assert_eq!(b.times, (1_001, 2_000));
        assert_eq!(b.partition_range, (3, 3));
        assert!(b.reads_partition(3) && !b.reads_partition(2));
        // Microseconds round outwards: `> 1.5 ms` may hold at 1 ms.
        let b = bounds(&[
            col("timestamp").gt(lit(ScalarValue::TimestampMicrosecond(Some(1_500), None)))
        ]);
        assert_eq!(b.times.0, 2);
        let b = bounds(&[
            col("timestamp").gt_eq(lit(ScalarValue::TimestampMicrosecond(Some(1_500), None)))
        ]);
        assert_eq!(b.times.0, 1);
    }

    #[test]
    fn lists_betweens_conjunctions_and_contradictions() {
        let b = bounds(&[
            col("partition").in_list(vec![lit(1i32), lit(4i32), lit(6i32)], false),
            col("partition").lt(lit(5i32)),
            col("offset").between(lit(5i64), lit(7i64)),
        ]);
        assert_eq!(b.partitions, Some(BTreeSet::from([1, 4, 6])));
        assert!(b.reads_partition(1) && b.reads_partition(4) && !b.reads_partition(6));
        assert_eq!(b.offsets, (5, 7));
        let b = bounds(&[col("offset").gt(lit(9i64)).and(col("offset").lt(lit(3i64)))]);
        assert!(b.is_empty());
    }

    #[test]
    fn what_cannot_narrow_is_left_to_datafusion() {
        for filter in [
            col("key").eq(col("value")),
            col("key").not_eq(lit("a")),
            col("key").in_list(vec![lit("a")], true),
            col("key").eq(lit(1i64)),
            col("offset").gt(lit(1i64)).or(col("offset").lt(lit(0i64))),
            col("offset").not_eq(lit(3i64)),
            col("partition").in_list(vec![lit(1i32)], true),
            col("offset").gt(col("partition")),
        ] {
            assert!(!narrows(&filter), "{filter}");
        }
        assert!(narrows(&col("offset").lt(lit(3i64))));
        assert_eq!(bounds(&[col("value").eq(lit("a"))]), Bounds::default());
    }

    #[test]
    fn exact_only_when_the_scan_applies_all_of_it() {
        for filter in [
            col("offset")
                .gt_eq(lit(10i64))
                .and(col("partition").eq(lit(1i32))),
            col("timestamp").gt(ts(5)),
            col("key").eq(lit("a")).or(col("key").eq(lit("b"))),
            col("key").in_list(vec![lit("a")], false),
            col("partition").in_list(vec![lit(1i32), lit(2i32)], false),
            col("offset").between(lit(1i64), lit(3i64)),
        ] {
            assert!(exact(&filter) && narrows(&filter), "{filter}");
        }
        for filter in [
            // Rounded to milliseconds outwards: DataFusion filters again.
            col("timestamp").gt(lit(ScalarValue::TimestampMicrosecond(Some(1_500), None))),
            col("key").eq(lit("a")).or(col("offset").lt(lit(3i64))),
            col("offset").gt(lit(1i64)).and(col("value").eq(lit("x"))),
            col("offset").not_eq(lit(3i64)),
            col("partition").gt(lit("x")),
        ] {
            assert!(!exact(&filter), "{filter}");
        }
    }

    #[test]
    fn keys_equal_to_constants_narrow_to_those_keys() {
        let b = bounds(&[col("key").eq(lit("a"))]);
        assert_eq!(b.keys, Some(BTreeSet::from([b"a".to_vec()])));
        let b = bounds(&[
            col("key").in_list(vec![lit("a"), lit("b")], false),
            lit(ScalarValue::Binary(Some(b"b".to_vec()))).eq(col("key_bytes")),
        ]);
        assert_eq!(b.keys, Some(BTreeSet::from([b"b".to_vec()])));
        let b = bounds(&[col("key").eq(lit("a")), col("key").eq(lit("b"))]);
        assert!(b.is_empty());
        let b = bounds(&[col("key").eq(lit("a")).or(col("key").eq(lit("b")))]);
        assert_eq!(b.keys, Some(BTreeSet::from([b"a".to_vec(), b"b".to_vec()])));
        // Either side may hold on its own: the offset says nothing then.
        let b = bounds(&[col("key").eq(lit("a")).or(col("offset").lt(lit(3i64)))]);
        assert_eq!(b, Bounds::default());
    }
}
