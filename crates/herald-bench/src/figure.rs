//! The seed's figure, for any two systems: two log-log panels side by side
//! (write throughput against writers, read throughput against readers), one
//! colour per batch size, the first system solid and the second dashed, and
//! one legend under both panels so that it hides no line. `chart.rs` (the
//! log benchmark) and `herald-loadgen`'s report (the wire benchmark) fill it.
//!
//! Text is rendered with `ab_glyph` from a TrueType file, so the chart needs
//! no font library from the system, only a font file (Debian's
//! fonts-dejavu-core, which the benchmark scripts install when missing).

use std::path::Path;
use std::sync::OnceLock;

use plotters::element::DashedPathElement;
use plotters::prelude::*;
use plotters::style::{register_font, FontStyle};

use crate::report::si;

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

/// Why a figure could not be drawn.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct FigureError(String);

/// One batch size's lines in a panel: (clients, messages/s) points.
#[derive(Debug, Clone, Default)]
pub struct Lines {
    /// Records per batch; names the colour in the legend.
    pub batch: u32,
    /// Points of the first system, drawn solid.
    pub solid: Vec<(f64, f64)>,
    /// Points of the second system, drawn dashed.
    pub dashed: Vec<(f64, f64)>,
}

/// One panel: a caption, what its x axis counts, and a line pair per batch.
#[derive(Debug, Clone, Default)]
pub struct Panel {
    /// Title above the panel.
    pub caption: String,
    /// What the x axis counts (publishers, subscribers, threads).
    pub x_label: String,
    /// One entry per batch size, in legend order.
    pub lines: Vec<Lines>,
}

/// The whole figure.
#[derive(Debug, Clone, Default)]
pub struct Figure {
    /// Title above both panels.
    pub title: String,
    /// Legend name of the solid system.
    pub solid_name: String,
    /// Legend name of the dashed system.
    pub dashed_name: String,
    /// Left (write) and right (read) panel.
    pub panels: [Panel; 2],
}

impl Figure {
    /// Draws the figure into a PNG at `path`, with text in the TrueType
    /// font at `font`.
    pub fn draw(&self, path: &Path, font: &Path) -> Result<(), FigureError> {
        load_font(font)?;
        let root = BitMapBackend::new(path, SIZE_PX).into_drawing_area();
        root.fill(&WHITE).map_err(chart_error)?;
        let body = root
            .titled(&self.title, ("sans-serif", 22))
            .map_err(chart_error)?;
        let (_, height) = body.dim_in_pixel();
        let (plots, key) = body.split_vertically(height.saturating_sub(LEGEND_PX));
        let areas = plots.split_evenly((1, 2));
        for (area, panel) in areas.iter().zip(&self.panels) {
            draw_panel(area, panel)?;
        }
        self.legend(&key)?;
        root.present().map_err(chart_error)
    }

    fn legend<DB: DrawingBackend>(
        &self,
        area: &DrawingArea<DB, plotters::coord::Shift>,
    ) -> Result<(), FigureError> {
        let font = ("sans-serif", 15).into_font();
        for (i, batch) in self.batches().iter().enumerate() {
            let color = COLORS[i % COLORS.len()];
            let x = 90 + 330 * i as i32;
            let names = [(0, &self.solid_name), (1, &self.dashed_name)];
            for (row, name) in names {
                let y = 14 + 24 * row;
                let line = vec![(x, y), (x + 36, y)];
                if row == 0 {
                    area.draw(&PathElement::new(line, color.stroke_width(3)))
                } else {
                    area.draw(&DashedPathElement::new(line, 8, 5, color.stroke_width(2)))
                }
                .map_err(chart_error)?;
                let label = format!("{name}, batch {batch}");
                area.draw(&Text::new(label, (x + 44, y - 8), font.clone()))
                    .map_err(chart_error)?;
            }
        }
        Ok(())
    }

    /// The batch sizes of the left panel, which sets the colours.
    fn batches(&self) -> Vec<u32> {
        self.panels[0].lines.iter().map(|l| l.batch).collect()
    }
}

fn draw_panel<DB: DrawingBackend>(
    area: &DrawingArea<DB, plotters::coord::Shift>,
    panel: &Panel,
) -> Result<(), FigureError> {
    let points = || {
        panel
            .lines
            .iter()
            .flat_map(|l| l.solid.iter().chain(&l.dashed))
            .copied()
    };
    let clients_max = points().map(|p| p.0).fold(1.0, f64::max);
    let (low, high) = points()
        .map(|p| p.1)
        .filter(|v| *v > 0.0)
        .fold((f64::MAX, 0.0f64), |(lo, hi), v| (lo.min(v), hi.max(v)));
    let (low, high) = if high > 0.0 {
        (low / 2.0, high * 2.0)
    } else {
        (1.0, 10.0)
    };
    let mut clients: Vec<f64> = points().map(|p| p.0).collect();
    clients.sort_by(f64::total_cmp);
    clients.dedup();

    let mut chart = ChartBuilder::on(area)
        .caption(&panel.caption, ("sans-serif", 20))
        .margin(16)
        .x_label_area_size(48)
        .y_label_area_size(80)
        .build_cartesian_2d(
            (0.9..clients_max * 1.1)
                .log_scale()
                .with_key_points(clients),
            (low..high)
                .log_scale()
                .with_key_points(one_two_five(low, high)),
        )
        .map_err(chart_error)?;
    chart
        .configure_mesh()
        .x_desc(&panel.x_label)
        .y_desc("messages / s")
        .x_label_formatter(&|v| format!("{v:.0}"))
        .y_label_formatter(&|v| si(*v).replace(".00 ", " ").replace(".0 ", " "))
        .light_line_style(WHITE)
        .label_style(("sans-serif", 14))
        .draw()
        .map_err(chart_error)?;
    for (i, lines) in panel.lines.iter().enumerate() {
        let color = COLORS[i % COLORS.len()];
        chart
            .draw_series(LineSeries::new(lines.solid.clone(), color.stroke_width(3)).point_size(4))
            .map_err(chart_error)?;
        chart
            .draw_series(DashedLineSeries::new(
                lines.dashed.clone(),
                8,
                6,
                color.stroke_width(2),
            ))
            .map_err(chart_error)?;
    }
    Ok(())
}

/// Registers the font once per process. plotters wants `'static` bytes, so
/// they are leaked: one font file, once.
fn load_font(path: &Path) -> Result<(), FigureError> {
    static FONT: OnceLock<&'static [u8]> = OnceLock::new();
    if FONT.get().is_none() {
        let bytes = std::fs::read(path)
            .map_err(|e| FigureError(format!("reading font {}: {e}", path.display())))?;
        let bytes: &'static [u8] = Box::leak(bytes.into_boxed_slice());
        register_font("sans-serif", FontStyle::Normal, bytes)
            .map_err(|_| FigureError(format!("{} is not a usable font", path.display())))?;
        let _ = FONT.set(bytes);
    }
    Ok(())
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

fn chart_error(e: impl std::fmt::Display) -> FigureError {
    FigureError(e.to_string())
}
