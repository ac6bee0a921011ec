//! The log benchmark's PNG chart: the seed's figure (`figure.rs`) with
//! herald's log solid and the mutex-based log dashed, write throughput
//! against publishers and read throughput against subscribers.

use std::path::Path;

use crate::figure::{Figure, Lines, Panel};
use crate::report::Row;
use crate::{BenchError, Workload};

pub use crate::figure::FONT_PATH;

/// Draws `rows` into a PNG at `path`, with `title` above both panels.
pub fn draw(rows: &[Row], path: &Path, font: &Path, title: &str) -> Result<(), BenchError> {
    let figure = Figure {
        title: title.to_owned(),
        solid_name: "herald".to_owned(),
        dashed_name: "mutex (dashed)".to_owned(),
        panels: [
            panel(rows, Workload::Write, "Write throughput", "publishers"),
            panel(rows, Workload::Read, "Read throughput", "subscribers"),
        ],
    };
    Ok(figure.draw(path, font)?)
}

fn panel(rows: &[Row], workload: Workload, caption: &str, threads_label: &str) -> Panel {
    let mut batches: Vec<u32> = rows.iter().map(|r| r.batch_records).collect();
    batches.sort_unstable();
    batches.dedup();
    let lines = batches
        .into_iter()
        .map(|batch| {
            let mut line: Vec<&Row> = rows
                .iter()
                .filter(|r| r.workload == workload && r.batch_records == batch)
                .collect();
            line.sort_by_key(|r| r.threads);
            Lines {
                batch,
                solid: line
                    .iter()
                    .map(|r| (r.threads as f64, r.herald.msgs_per_s))
                    .collect(),
                dashed: line
                    .iter()
                    .map(|r| (r.threads as f64, r.mutex.msgs_per_s))
                    .collect(),
            }
        })
        .collect();
    Panel {
        caption: format!("{caption} (msgs/s) vs {threads_label}"),
        x_label: threads_label.to_owned(),
        lines,
    }
}
