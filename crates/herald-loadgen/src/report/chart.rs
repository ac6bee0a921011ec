//! `wire.png`: the seed's figure (`herald_bench::figure`) for both brokers,
//! produce throughput (acks=1) against publishers and consume throughput
//! against subscribers, one colour per batch size, herald solid and Kafka
//! dashed.

use std::path::Path;

use herald_bench::figure::{Figure, Lines, Panel};

use crate::row::{Kind, Row};
use crate::LoadError;

pub use herald_bench::figure::FONT_PATH;

/// Draws the chart of `rows` into `path`.
pub fn draw(rows: &[Row], path: &Path, font: &Path) -> Result<(), LoadError> {
    let mut batches: Vec<u32> = rows
        .iter()
        .filter(|r| matches!(r.kind, Kind::Produce | Kind::Consume))
        .map(|r| r.batch)
        .collect();
    batches.sort_unstable();
    batches.dedup();
    let figure = Figure {
        title: "herald (solid) vs Apache Kafka (dashed): 1 partition, 64-byte messages, tmpfs"
            .to_owned(),
        solid_name: "herald".to_owned(),
        dashed_name: "Kafka (dashed)".to_owned(),
        panels: [
            panel(
                rows,
                &batches,
                Kind::Produce,
                "Write throughput (acks=1) vs publishers",
                "publishers",
            ),
            panel(
                rows,
                &batches,
                Kind::Consume,
                "Read throughput vs subscribers",
                "subscribers",
            ),
        ],
    };
    Ok(figure.draw(path, font)?)
}

fn panel(rows: &[Row], batches: &[u32], kind: Kind, caption: &str, x_label: &str) -> Panel {
    Panel {
        caption: caption.to_owned(),
        x_label: x_label.to_owned(),
        lines: batches
            .iter()
            .map(|&batch| Lines {
                batch,
                solid: points(rows, "herald", kind, batch),
                dashed: points(rows, "kafka", kind, batch),
            })
            .collect(),
    }
}

fn points(rows: &[Row], broker: &str, kind: Kind, batch: u32) -> Vec<(f64, f64)> {
    let mut line: Vec<(f64, f64)> = rows
        .iter()
        .filter(|r| {
            r.broker == broker
                && r.kind == kind
                && r.batch == batch
                && r.acks.as_deref() != Some("all")
                && r.msgs_per_s > 0.0
        })
        .map(|r| (f64::from(r.clients), r.msgs_per_s))
        .collect();
    line.sort_by(|a, b| a.0.total_cmp(&b.0));
    line
}
