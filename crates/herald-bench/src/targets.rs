//! The targets of issue 2, checked against a run's median rows. They are
//! reported, never asserted: a benchmark measures, it does not pass or fail.

use std::fmt;

use crate::report::Row;
use crate::Workload;

/// One target and how the run fared.
#[derive(Debug, Clone, PartialEq)]
pub struct Verdict {
    /// The target, in words.
    pub target: &'static str,
    /// `Some(true)` if every point it covers meets it, `None` if the run
    /// measured none of those points.
    pub met: Option<bool>,
    /// The worst point, with its figure.
    pub detail: String,
}

impl fmt::Display for Verdict {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mark = match self.met {
            Some(true) => "MET   ",
            Some(false) => "MISSED",
            None => "n/a   ",
        };
        write!(f, "{mark} {}: {}", self.target, self.detail)
    }
}

/// Checks every target.
pub fn evaluate(rows: &[Row]) -> Vec<Verdict> {
    vec![
        worst_of(
            "append >= 40% of memcpy bandwidth at batches >= 1024",
            0.40,
            rows.iter()
                .filter(|r| r.workload == Workload::Write && r.batch_records >= 1024)
                .map(|r| (r, r.herald_vs_memcpy())),
            "of memcpy",
        ),
        worst_of(
            "reads >= 60% of memcpy bandwidth at batches >= 1024",
            0.60,
            rows.iter()
                .filter(|r| r.workload == Workload::Read && r.batch_records >= 1024)
                .map(|r| (r, r.herald_vs_memcpy())),
            "of memcpy",
        ),
        worst_of(
            "4 and 8 publishers never below 1 publisher",
            1.0,
            rows.iter()
                .filter(|r| r.workload == Workload::Write && matches!(r.threads, 4 | 8))
                .filter_map(|r| single_publisher(rows, r).map(|one| (r, ratio(r, one)))),
            "of 1 publisher",
        ),
        worst_of(
            "batch 1 with 4+ publishers >= 2x the mutex baseline",
            2.0,
            rows.iter()
                .filter(|r| r.workload == Workload::Write && r.batch_records == 1 && r.threads >= 4)
                .map(|r| (r, r.herald_vs_mutex())),
            "of mutex",
        ),
    ]
}

fn single_publisher<'a>(rows: &'a [Row], r: &Row) -> Option<&'a Row> {
    rows.iter().find(|o| {
        o.workload == Workload::Write && o.threads == 1 && o.batch_records == r.batch_records
    })
}

fn ratio(r: &Row, one: &Row) -> f64 {
    if one.herald.msgs_per_s > 0.0 {
        r.herald.msgs_per_s / one.herald.msgs_per_s
    } else {
        0.0
    }
}

/// The verdict on `points` (row, figure): met when the smallest figure
/// reaches `threshold`.
fn worst_of<'a>(
    target: &'static str,
    threshold: f64,
    points: impl Iterator<Item = (&'a Row, f64)>,
    unit: &str,
) -> Verdict {
    let points: Vec<(&Row, f64)> = points.collect();
    let Some(&(worst, figure)) = points.iter().min_by(|a, b| a.1.total_cmp(&b.1)) else {
        return Verdict {
            target,
            met: None,
            detail: "no such point in this run".into(),
        };
    };
    let missed = points.iter().filter(|(_, f)| *f < threshold).count();
    Verdict {
        target,
        met: Some(missed == 0),
        detail: format!(
            "worst {figure:.2}x {unit} at {} threads, batch {} ({missed} of {} points below {threshold:.2}x)",
            worst.threads,
            worst.batch_records,
            points.len(),
        ),
    }
}
