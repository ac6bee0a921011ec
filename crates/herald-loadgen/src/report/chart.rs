//! `wire.png`: the seed's figure for both brokers. Two log-log panels,
//! produce throughput (acks=1) against publishers and consume throughput
//! against subscribers, one colour per batch size, herald solid and Kafka
//! dashed. Text is drawn with `ab_glyph` from a TrueType file (Debian's
//! fonts-dejavu-core), as `herald-bench` does.

use std::path::Path;
use std::sync::OnceLock;

use plotters::element::DashedPathElement;
use plotters::prelude::*;
use plotters::style::{register_font, FontStyle};

use crate::row::{Kind, Row};
use crate::LoadError;

/// Where Debian's fonts-dejavu-core puts its sans-serif font.
pub const FONT_PATH: &str = "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf";

const SIZE_PX: (u32, u32) = (1500, 700);
const LEGEND_PX: u32 = 60;
const COLORS: [RGBColor; 4] = [
    RGBColor(31, 119, 180),
    RGBColor(255, 127, 14),
    RGBColor(44, 160, 44),
    RGBColor(214, 39, 40),
];

type Area<'a> = DrawingArea<BitMapBackend<'a>, plotters::coord::Shift>;

/// Draws the chart of `rows` into `path`.
pub fn draw(rows: &[Row], path: &Path, font: &Path) -> Result<(), LoadError> {
    load_font(font)?;
    let root = BitMapBackend::new(path, SIZE_PX).into_drawing_area();
    root.fill(&WHITE).map_err(chart_error)?;
    let body = root
        .titled(
            "herald (solid) vs Apache Kafka (dashed): 1 partition, 64-byte messages, tmpfs",
            ("sans-serif", 22),
        )
        .map_err(chart_error)?;
    let (_, height) = body.dim_in_pixel();
    let (plots, key) = body.split_vertically(height.saturating_sub(LEGEND_PX));
    let panels = plots.split_evenly((1, 2));
    let mut batches: Vec<u32> = rows
        .iter()
        .filter(|r| matches!(r.kind, Kind::Produce | Kind::Consume))
        .map(|r| r.batch)
        .collect();
    batches.sort_unstable();
    batches.dedup();
    panel(
        &panels[0],
        rows,
        &batches,
        Kind::Produce,
        "Write throughput (acks=1) vs publishers",
    )?;
    panel(
        &panels[1],
        rows,
        &batches,
        Kind::Consume,
        "Read throughput vs subscribers",
    )?;
    legend(&key, &batches)?;
    root.present().map_err(chart_error)
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

fn panel(
    area: &Area,
    rows: &[Row],
    batches: &[u32],
    kind: Kind,
    caption: &str,
) -> Result<(), LoadError> {
    let all: Vec<(f64, f64)> = batches
        .iter()
        .flat_map(|b| {
            let mut p = points(rows, "herald", kind, *b);
            p.extend(points(rows, "kafka", kind, *b));
            p
        })
        .collect();
    let clients_max = all.iter().map(|p| p.0).fold(1.0, f64::max);
    let (low, high) = all
        .iter()
        .map(|p| p.1)
        .fold((f64::MAX, 0.0f64), |(lo, hi), v| (lo.min(v), hi.max(v)));
    let (low, high) = if high > 0.0 {
        (low / 2.0, high * 2.0)
    } else {
        (1.0, 10.0)
    };
    let mut chart = ChartBuilder::on(area)
        .caption(caption, ("sans-serif", 20))
        .margin(16)
        .x_label_area_size(48)
        .y_label_area_size(80)
        .build_cartesian_2d(
            (0.9..clients_max * 1.1).log_scale(),
            (low..high).log_scale(),
        )
        .map_err(chart_error)?;
    chart
        .configure_mesh()
        .x_desc(if kind == Kind::Produce {
            "publishers"
        } else {
            "subscribers"
        })
        .y_desc("messages / s")
        .x_label_formatter(&|v| format!("{v:.0}"))
        .y_label_formatter(&|v| format!("{v:.0e}"))
        .light_line_style(WHITE)
        .label_style(("sans-serif", 14))
        .draw()
        .map_err(chart_error)?;
    for (i, batch) in batches.iter().enumerate() {
        let color = COLORS[i % COLORS.len()];
        chart
            .draw_series(
                LineSeries::new(points(rows, "herald", kind, *batch), color.stroke_width(3))
                    .point_size(4),
            )
            .map_err(chart_error)?;
        chart
            .draw_series(DashedLineSeries::new(
                points(rows, "kafka", kind, *batch),
                8,
                6,
                color.stroke_width(2),
            ))
            .map_err(chart_error)?;
    }
    Ok(())
}

fn legend(area: &Area, batches: &[u32]) -> Result<(), LoadError> {
    let font = ("sans-serif", 15).into_font();
    for (i, batch) in batches.iter().enumerate() {
        let color = COLORS[i % COLORS.len()];
        let x = 90 + 330 * i as i32;
        for (row, system) in [(0, "herald"), (1, "Kafka (dashed)")] {
            let y = 14 + 24 * row;
            let line = vec![(x, y), (x + 36, y)];
            if row == 0 {
                area.draw(&PathElement::new(line, color.stroke_width(3)))
            } else {
                area.draw(&DashedPathElement::new(line, 8, 5, color.stroke_width(2)))
            }
            .map_err(chart_error)?;
            area.draw(&Text::new(
                format!("{system}, batch {batch}"),
                (x + 44, y - 8),
                font.clone(),
            ))
            .map_err(chart_error)?;
        }
    }
    Ok(())
}

/// Registers the font once per process; plotters wants `'static` bytes.
fn load_font(path: &Path) -> Result<(), LoadError> {
    static FONT: OnceLock<&'static [u8]> = OnceLock::new();
    if FONT.get().is_none() {
        let bytes = std::fs::read(path).map_err(|e| LoadError::io("read font", e))?;
        let bytes: &'static [u8] = Box::leak(bytes.into_boxed_slice());
        register_font("sans-serif", FontStyle::Normal, bytes)
            .map_err(|_| LoadError::Chart(format!("{} is not a usable font", path.display())))?;
        let _ = FONT.set(bytes);
    }
    Ok(())
}

fn chart_error(e: impl std::fmt::Display) -> LoadError {
    LoadError::Chart(e.to_string())
}
