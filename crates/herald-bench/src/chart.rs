//! The PNG chart: two log-log panels as in the seed's figure, write
//! throughput against publishers and read throughput against subscribers,
//! one line per batch size for herald and a dashed one for the mutex log.
//!
//! Text is rendered with `ab_glyph` from a TrueType file, so the chart needs
//! no font library from the system, only a font file (Debian's
//! fonts-dejavu-core, which `scripts/bench-log.sh` installs when missing).

use std::path::Path;
use std::sync::OnceLock;

use plotters::element::DashedPathElement;
use plotters::prelude::*;
use plotters::style::{register_font, FontStyle};

use crate::report::{si, Row};
use crate::{BenchError, Workload};

/// Where Debian's fonts-dejavu-core puts its sans-serif font.
pub const FONT_PATH: &str = "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf";

const SIZE_PX: (u32, u32) = (1500, 700);
/// Height of the legend strip under the panels.
const LEGEND_PX: u32 = 60;
const COLORS: [RGBColor; 6] = [
    RGBColor(31, 119, 180),
    RGBColor(255, 127, 14),
    RGBColor(44, 160, 44),
    RGBColor(214, 39, 40),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
];

/// Draws `rows` into a PNG at `path`, with `title` above both panels.
pub fn draw(rows: &[Row], path: &Path, font: &Path, title: &str) -> Result<(), BenchError> {
    load_font(font)?;
    let root = BitMapBackend::new(path, SIZE_PX).into_drawing_area();
    root.fill(&WHITE).map_err(chart_error)?;
    let body = root
        .titled(title, ("sans-serif", 22))
        .map_err(chart_error)?;
    let (_, height) = body.dim_in_pixel();
    let (plots, key) = body.split_vertically(height.saturating_sub(LEGEND_PX));
    let panels = plots.split_evenly((1, 2));
    let batches = batch_sizes(rows);
    panel(
        &panels[0],
        rows,
        &batches,
        Workload::Write,
        "Write throughput",
        "publishers",
    )?;
    panel(
        &panels[1],
        rows,
        &batches,
        Workload::Read,
        "Read throughput",
        "subscribers",
    )?;
    legend(&key, &batches)?;
    root.present().map_err(chart_error)
}

fn batch_sizes(rows: &[Row]) -> Vec<u32> {
    let mut batches: Vec<u32> = rows.iter().map(|r| r.batch_records).collect();
    batches.sort_unstable();
    batches.dedup();
    batches
}

/// One legend under both panels, so that it hides no line.
fn legend<DB: DrawingBackend>(
    area: &DrawingArea<DB, plotters::coord::Shift>,
    batches: &[u32],
) -> Result<(), BenchError> {
    let font = ("sans-serif", 15).into_font();
    for (i, batch) in batches.iter().enumerate() {
        let color = COLORS[i % COLORS.len()];
        let x = 90 + 330 * i as i32;
        for (row, system) in [(0, "herald"), (1, "mutex (dashed)")] {
            let y = 14 + 24 * row;
            let line = vec![(x, y), (x + 36, y)];
            if row == 0 {
                area.draw(&PathElement::new(line, color.stroke_width(3)))
            } else {
                area.draw(&DashedPathElement::new(line, 8, 5, color.stroke_width(2)))
            }
            .map_err(chart_error)?;
            let label = format!("{system}, batch {batch}");
            area.draw(&Text::new(label, (x + 44, y - 8), font.clone()))
                .map_err(chart_error)?;
        }
    }
    Ok(())
}

/// Registers the font once per process. plotters wants `'static` bytes, so
/// they are leaked: one font file, once.
fn load_font(path: &Path) -> Result<(), BenchError> {
    static FONT: OnceLock<&'static [u8]> = OnceLock::new();
    if FONT.get().is_none() {
        let bytes = std::fs::read(path).map_err(|e| BenchError::io("read font", path, e))?;
        let bytes: &'static [u8] = Box::leak(bytes.into_boxed_slice());
        register_font("sans-serif", FontStyle::Normal, bytes)
            .map_err(|_| BenchError::Chart(format!("{} is not a usable font", path.display())))?;
        let _ = FONT.set(bytes);
    }
    Ok(())
}

fn panel<DB: DrawingBackend>(
    area: &DrawingArea<DB, plotters::coord::Shift>,
    rows: &[Row],
    batches: &[u32],
    workload: Workload,
    caption: &str,
    threads_label: &str,
) -> Result<(), BenchError> {
    let rows: Vec<&Row> = rows.iter().filter(|r| r.workload == workload).collect();
    let threads_max = rows.iter().map(|r| r.threads).max().unwrap_or(1) as f64;
    let rates = rows
        .iter()
        .flat_map(|r| [r.herald.msgs_per_s, r.mutex.msgs_per_s]);
    let (low, high) = rates
        .filter(|v| *v > 0.0)
        .fold((f64::MAX, 0.0f64), |(lo, hi), v| (lo.min(v), hi.max(v)));
    let (low, high) = if high > 0.0 {
        (low / 2.0, high * 2.0)
    } else {
        (1.0, 10.0)
    };

    let mut chart = ChartBuilder::on(area)
        .caption(
            format!("{caption} (msgs/s) vs {threads_label}"),
            ("sans-serif", 20),
        )
        .margin(16)
        .x_label_area_size(48)
        .y_label_area_size(80)
        .build_cartesian_2d(
            (0.9..threads_max * 1.1)
                .log_scale()
                .with_key_points(thread_counts(&rows)),
            (low..high)
                .log_scale()
                .with_key_points(one_two_five(low, high)),
        )
        .map_err(chart_error)?;
    chart
        .configure_mesh()
        .x_desc(threads_label)
        .y_desc("messages / s")
        .x_label_formatter(&|v| format!("{v:.0}"))
        .y_label_formatter(&|v| si(*v).replace(".00 ", " ").replace(".0 ", " "))
        .light_line_style(WHITE)
        .label_style(("sans-serif", 14))
        .draw()
        .map_err(chart_error)?;

    for (i, batch) in batches.iter().enumerate() {
        let color = COLORS[i % COLORS.len()];
        let mut line: Vec<&Row> = rows
            .iter()
            .copied()
            .filter(|r| r.batch_records == *batch)
            .collect();
        line.sort_by_key(|r| r.threads);
        let herald: Vec<(f64, f64)> = line
            .iter()
            .map(|r| (r.threads as f64, r.herald.msgs_per_s))
            .collect();
        let mutex: Vec<(f64, f64)> = line
            .iter()
            .map(|r| (r.threads as f64, r.mutex.msgs_per_s))
            .collect();
        chart
            .draw_series(LineSeries::new(herald, color.stroke_width(3)).point_size(4))
            .map_err(chart_error)?;
        chart
            .draw_series(DashedLineSeries::new(mutex, 8, 6, color.stroke_width(2)))
            .map_err(chart_error)?;
    }
    Ok(())
}

/// The thread counts measured: the x axis' labels.
fn thread_counts(rows: &[&Row]) -> Vec<f64> {
    let mut threads: Vec<usize> = rows.iter().map(|r| r.threads).collect();
    threads.sort_unstable();
    threads.dedup();
    threads.into_iter().map(|t| t as f64).collect()
}

/// Labels 1, 2, 5, 10, 20, 50, ... within `low..high`: enough to read a log
/// axis, few enough not to collide.
fn one_two_five(low: f64, high: f64) -> Vec<f64> {
    let mut decade = 10f64.powi(low.max(1.0).log10().floor() as i32);
    let mut points = Vec::new();
    // Bounded: at most 40 decades (10^40 msgs/s is beyond any machine).
    for _ in 0..40 {
        if decade > high {
            break;
        }
        let candidates = [decade, 2.0 * decade, 5.0 * decade];
        points.extend(candidates.into_iter().filter(|v| (low..=high).contains(v)));
        decade *= 10.0;
    }
    points
}

fn chart_error(e: impl std::fmt::Display) -> BenchError {
    BenchError::Chart(e.to_string())
}
