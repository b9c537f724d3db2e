//! Rendering results: Pantheon's stats text, the summary table and the summary plots.
//! Everything here is a view of [`RunStats`] values; nothing is re-parsed from text.

use std::fmt::Write as _;
use std::path::Path;
use std::sync::Once;

use plotters::prelude::*;
use plotters::style::FontStyle;

use crate::metrics::{FlowStats, RunStats};
use crate::timeseries::TimeSeries;

/// The stats block of `tunnel_graph.py`, byte for byte in its layout:
/// `-- Total of N flow(s):`, then per flow `-- Flow k:`, each with average throughput
/// (`%.2f Mbit/s`), p95 one-way delay (`%.2f ms`) and loss rate (`%.2f%%`); with a known
/// capacity the total block starts with `Average capacity: %.2f Mbit/s` and its throughput
/// line ends with ` (%.1f%% utilization)`.
pub fn stats_text(stats: &RunStats) -> String {
    let mut s = String::new();
    let n = stats.flows.len().max(1);
    let plural = if n == 1 { "" } else { "s" };
    let _ = writeln!(s, "-- Total of {n} flow{plural}:");
    if let Some(c) = stats.capacity_mbps {
        let _ = writeln!(s, "Average capacity: {c:.2} Mbit/s");
    }
    block(&mut s, &stats.total, stats.utilization());
    for (flow, f) in &stats.flows {
        let _ = writeln!(s, "-- Flow {flow}:");
        block(&mut s, f, None);
    }
    s
}

fn block(s: &mut String, f: &FlowStats, utilization: Option<f64>) {
    let _ = write!(s, "Average throughput: {:.2} Mbit/s", f.tput_mbps);
    if let Some(u) = utilization {
        let _ = write!(s, " ({:.1}% utilization)", u * 100.0);
    }
    s.push('\n');
    match f.p95_delay_ms {
        Some(d) => {
            let _ = writeln!(s, "95th percentile per-packet one-way delay: {d:.3} ms");
        }
        None => {
            let _ = writeln!(s, "95th percentile per-packet one-way delay: N/A");
        }
    }
    let _ = writeln!(s, "Loss rate: {:.2}%", f.loss * 100.0);
    // Only for flows whose packets used ECN: a Not-ECT flow's counts are in the perf file.
    if let Some(e) = f
        .ecn
        .filter(|e| e.sent.ecn_capable() + e.delivered.ecn_capable() > 0)
    {
        let d = &e.delivered;
        let _ = write!(
            s,
            "ECN (delivered): {} Not-ECT, {} ECT(0), {} ECT(1), {} CE",
            d.not_ect, d.ect0, d.ect1, d.ce
        );
        if let Some(frac) = d.ce_fraction() {
            let _ = write!(s, " ({:.2}% of ECN-capable marked)", frac * 100.0);
        }
        if e.bleached > 0 {
            let _ = write!(
                s,
                "; {} bleached (sent ECN-capable, delivered Not-ECT)",
                e.bleached
            );
        }
        s.push('\n');
    }
}

/// One scheme's points for the summary plots.
#[derive(Debug, Clone)]
pub struct SchemePoints {
    /// Label, e.g. `TCP Cubic`.
    pub label: String,
    /// Pantheon color name (`black`, `gold`…).
    pub color: String,
    /// Pantheon/matplotlib marker (`*`, `^`, `o`…).
    pub marker: String,
    /// One (p95 delay ms, throughput Mbit/s) point per valid run.
    pub runs: Vec<(f64, f64)>,
}

/// Errors of plotting.
#[derive(Debug, thiserror::Error)]
#[error("plot {path}: {message}")]
pub struct PlotError {
    /// The output file.
    pub path: String,
    /// What went wrong.
    pub message: String,
}

static FONT: Once = Once::new();

/// The font of every plot and of the PDF report: DejaVu Sans, embedded (no fontconfig).
pub const FONT_BYTES: &[u8] = include_bytes!("../assets/DejaVuSans.ttf");

fn register_font() {
    FONT.call_once(|| {
        let _ = plotters::style::register_font("sans-serif", FontStyle::Normal, FONT_BYTES);
    });
}

/// RGB of a matplotlib color name used in Pantheon's `config.yml` (unknown names → gray).
pub fn color_rgb(name: &str) -> RGBColor {
    match name {
        "black" => RGBColor(0, 0, 0),
        "silver" => RGBColor(192, 192, 192),
        "gold" => RGBColor(255, 215, 0),
        "green" => RGBColor(0, 128, 0),
        "cyan" => RGBColor(0, 190, 190),
        "skyblue" => RGBColor(135, 206, 235),
        "orange" => RGBColor(255, 165, 0),
        "magenta" => RGBColor(255, 0, 255),
        "pink" => RGBColor(255, 150, 180),
        "brown" => RGBColor(165, 42, 42),
        "red" => RGBColor(220, 0, 0),
        "blue" => RGBColor(0, 0, 255),
        "olive" => RGBColor(128, 128, 0),
        "violet" => RGBColor(238, 130, 238),
        "indigo" => RGBColor(75, 0, 130),
        "mediumpurple" => RGBColor(147, 112, 219),
        "slateblue" => RGBColor(106, 90, 205),
        "purple" => RGBColor(128, 0, 128),
        _ => RGBColor(128, 128, 128),
    }
}

type Area<DB> = DrawingArea<DB, plotters::coord::Shift>;

/// Runs `draw` on an SVG (name ending in `.svg`) or PNG file of `size` pixels, drawn under a
/// temporary name and renamed into place ([`crate::files::replace_with`]): an earlier plot is
/// replaced whole or not at all.
macro_rules! to_file {
    ($path:expr, $size:expr, $draw:ident, $($arg:expr),*) => {{
        register_font();
        let path: &Path = $path;
        let mut message = None;
        crate::files::replace_with(path, |tmp| {
            let drawn = if path.extension().is_some_and(|e| e == "svg") {
                $draw(SVGBackend::new(tmp, $size).into_drawing_area(), $($arg),*)
            } else {
                $draw(BitMapBackend::new(tmp, $size).into_drawing_area(), $($arg),*)
            };
            drawn.map_err(|m| {
                message = Some(m);
                std::io::Error::other("not drawn")
            })
        })
        .map_err(|e| PlotError {
            path: path.display().to_string(),
            message: message.unwrap_or_else(|| e.to_string()),
        })
    }};
}

/// Draws Pantheon's summary scatter to an SVG or PNG file (by extension): x = 95th-percentile one-way delay on a
/// log scale, **inverted** (better = right), y = average throughput. With `mean`, one point
/// per scheme (mean of its runs' delays and throughputs), annotated with the scheme's label,
/// surrounded by the 1-σ ellipse of its runs ([`sigma_ellipse`]) and crossed by the bars of
/// its mean's 95 % confidence interval on each axis ([`mean_interval_bars`]; 3 runs or more).
pub fn summary_plot(
    path: &Path,
    title: &str,
    schemes: &[SchemePoints],
    mean: bool,
) -> Result<(), PlotError> {
    to_file!(path, (900, 600), draw_summary, title, schemes, mean)
}

fn draw_summary<DB: DrawingBackend>(
    root: Area<DB>,
    title: &str,
    schemes: &[SchemePoints],
    mean: bool,
) -> Result<(), String> {
    let err = |e: String| e;
    let series: Vec<(&SchemePoints, Vec<(f64, f64)>)> = schemes
        .iter()
        .map(|s| {
            let pts: Vec<(f64, f64)> = if mean && !s.runs.is_empty() {
                vec![centroid(&s.runs)]
            } else {
                s.runs.clone()
            };
            (s, pts.into_iter().filter(|p| p.0 > 0.0).collect())
        })
        .collect();
    let mut all: Vec<(f64, f64)> = series.iter().flat_map(|s| s.1.iter().copied()).collect();
    if mean {
        // The axes hold each mean's interval bars too, so that no bar runs off the chart.
        let bars = schemes.iter().filter_map(|s| mean_interval_bars(&s.runs));
        all.extend(bars.flatten().flatten().filter(|p| p.0 > 0.0));
    }
    let mut chart = delay_tput_chart(&root, title, &all)?;
    for (s, pts) in &series {
        let color = color_rgb(&s.color);
        let style = color.filled();
        let shifted: Vec<(f64, f64)> = pts.iter().map(|p| (-p.0.log10(), p.1)).collect();
        let label = s.label.clone();
        let pts = shifted.iter().copied();
        let anno = match marker_shape(&s.marker) {
            Shape::Triangle => chart.draw_series(pts.map(|p| TriangleMarker::new(p, 7, style))),
            Shape::Cross => chart.draw_series(pts.map(|p| Cross::new(p, 6, style.stroke_width(2)))),
            Shape::Square => chart.draw_series(
                pts.map(|p| EmptyElement::at(p) + Rectangle::new([(-5, -5), (5, 5)], style)),
            ),
            Shape::Circle => chart.draw_series(pts.map(|p| Circle::new(p, 6, style))),
        }
        .map_err(|e| err(e.to_string()))?;
        anno.label(label.clone())
            .legend(move |(x, y)| Circle::new((x + 8, y), 5, style));
        if mean {
            // The 1-σ ellipse of the runs, computed on (delay, throughput) and drawn on the
            // log axis (the part at positive delays).
            if let Some(ring) = sigma_ellipse(&s.runs, 360) {
                let ring: Vec<(f64, f64)> = ring
                    .into_iter()
                    .filter(|p| p.0 > 0.0)
                    .map(|p| (-p.0.log10(), p.1.max(0.0)))
                    .collect();
                draw_path(&mut chart, ring, color.stroke_width(1))?;
            }
            // The 95 % confidence interval of the mean, a bar along each axis.
            for bar in mean_interval_bars(&s.runs).into_iter().flatten() {
                let bar: Vec<(f64, f64)> = bar
                    .iter()
                    .map(|p| (-p.0.max(1e-3).log10(), p.1.max(0.0)))
                    .collect();
                draw_path(&mut chart, bar, color.stroke_width(2))?;
            }
            chart
                .draw_series(shifted.iter().map(|&p| {
                    Text::new(
                        label.clone(),
                        p,
                        ("sans-serif", 14).into_font().color(&color),
                    )
                }))
                .map_err(|e| err(e.to_string()))?;
        }
    }
    legend(&mut chart, SeriesLabelPosition::UpperLeft).map_err(|e| err(e.to_string()))?;
    root.present().map_err(|e| err(e.to_string()))
}

/// One line through `points` (chart coordinates) on `chart`.
fn draw_path<'a, DB: DrawingBackend + 'a>(
    chart: &mut Chart<'a, DB>,
    points: Vec<(f64, f64)>,
    style: ShapeStyle,
) -> Result<(), String> {
    chart
        .draw_series(std::iter::once(PathElement::new(points, style)))
        .map(|_| ())
        .map_err(|e| e.to_string())
}

/// The chart of the throughput–delay plots, with axes fitting the (delay ms, throughput
/// Mbit/s) points `all`: x' = −log10(delay), so that a plain axis on x' is a log axis on delay,
/// inverted (better = right); y from 0.
fn delay_tput_chart<'a, DB: DrawingBackend + 'a>(
    root: &'a Area<DB>,
    title: &str,
    all: &[(f64, f64)],
) -> Result<Chart<'a, DB>, String> {
    let (mut lo, mut hi) = all.iter().fold((f64::MAX, f64::MIN), |(lo, hi), p| {
        let x = -p.0.log10();
        (lo.min(x), hi.max(x))
    });
    if all.is_empty() {
        (lo, hi) = (-3.0, 0.0);
    }
    let pad = ((hi - lo) * 0.15).max(0.05);
    let ymax = all.iter().map(|p| p.1).fold(0.0, f64::max).max(1e-3) * 1.15;
    root.fill(&WHITE).map_err(|e| e.to_string())?;
    let mut chart = ChartBuilder::on(root)
        .caption(title, ("sans-serif", 18))
        .margin(20)
        .x_label_area_size(50)
        .y_label_area_size(70)
        .build_cartesian_2d((lo - pad)..(hi + pad), 0.0..ymax)
        .map_err(|e| e.to_string())?;
    chart
        .configure_mesh()
        .x_desc("95th percentile one-way delay (ms, log scale, better →)")
        .y_desc("Average throughput (Mbit/s)")
        .x_label_formatter(&|x| format_delay(10f64.powf(-x)))
        .draw()
        .map_err(|e| e.to_string())?;
    Ok(chart)
}

/// One scheme of a calibration: its figures on the real path and over the fitted emulator.
#[derive(Debug, Clone, PartialEq)]
pub struct CalibrationPoint {
    /// Label, e.g. `TCP Cubic`.
    pub label: String,
    /// Pantheon color name.
    pub color: String,
    /// Real path: (median p95 one-way delay ms, median throughput Mbit/s).
    pub real: (f64, f64),
    /// Emulator: the same.
    pub emulated: (f64, f64),
}

/// The Pantheon paper's Figure 3 to an SVG or PNG file: per scheme, the real path's result as
/// a filled dot and the calibrated emulator's as an open dot of the same color, joined by a
/// line, on the summary plots' axes.
pub fn calibration_plot(
    path: &Path,
    title: &str,
    points: &[CalibrationPoint],
) -> Result<(), PlotError> {
    to_file!(path, (900, 600), draw_calibration, title, points)
}

fn draw_calibration<DB: DrawingBackend>(
    root: Area<DB>,
    title: &str,
    points: &[CalibrationPoint],
) -> Result<(), String> {
    let e = |e: DrawingAreaErrorKind<DB::ErrorType>| e.to_string();
    let all: Vec<(f64, f64)> = points
        .iter()
        .flat_map(|p| [p.real, p.emulated])
        .filter(|p| p.0 > 0.0)
        .collect();
    let mut chart = delay_tput_chart(&root, title, &all)?;
    let at = |p: (f64, f64)| (-p.0.log10(), p.1);
    for p in points
        .iter()
        .filter(|p| p.real.0 > 0.0 && p.emulated.0 > 0.0)
    {
        let color = color_rgb(&p.color);
        chart
            .draw_series(std::iter::once(PathElement::new(
                vec![at(p.real), at(p.emulated)],
                color.stroke_width(1),
            )))
            .map_err(e)?;
        chart
            .draw_series(std::iter::once(Circle::new(
                at(p.emulated),
                6,
                color.stroke_width(2),
            )))
            .map_err(e)?;
        chart
            .draw_series(std::iter::once(Circle::new(at(p.real), 6, color.filled())))
            .map_err(e)?
            .label(p.label.clone())
            .legend(move |(x, y)| Circle::new((x + 8, y), 5, color.filled()));
        chart
            .draw_series(std::iter::once(Text::new(
                p.label.clone(),
                at(p.real),
                ("sans-serif", 14).into_font().color(&color),
            )))
            .map_err(e)?;
    }
    legend(&mut chart, SeriesLabelPosition::UpperLeft).map_err(e)?;
    root.present().map_err(e)
}

/// A calibration's convergence to an SVG or PNG file: each evaluation's replication error
/// (percent; `None` = failed, not drawn) as a dot colored by its group (e.g. the delivery
/// process), and the best error so far as a line.
pub fn convergence_plot(
    path: &Path,
    title: &str,
    evaluations: &[(Option<f64>, String)],
) -> Result<(), PlotError> {
    to_file!(path, (900, 500), draw_convergence, title, evaluations)
}

fn draw_convergence<DB: DrawingBackend>(
    root: Area<DB>,
    title: &str,
    evaluations: &[(Option<f64>, String)],
) -> Result<(), String> {
    let e = |e: DrawingAreaErrorKind<DB::ErrorType>| e.to_string();
    let errors: Vec<f64> = evaluations.iter().filter_map(|x| x.0).collect();
    // Errors span decades: a log axis, from just under the best to just over the worst.
    let lo = errors.iter().copied().fold(f64::MAX, f64::min).max(0.01);
    let hi = errors.iter().copied().fold(0.0, f64::max).max(lo * 10.0);
    root.fill(&WHITE).map_err(e)?;
    let mut chart = ChartBuilder::on(&root)
        .caption(title, ("sans-serif", 18))
        .margin(20)
        .x_label_area_size(45)
        .y_label_area_size(70)
        .build_cartesian_2d(
            0.0..(evaluations.len().max(1) as f64 + 1.0),
            lo.log10() - 0.1..hi.log10() + 0.1,
        )
        .map_err(e)?;
    chart
        .configure_mesh()
        .x_desc("Evaluation")
        .y_desc("Replication error (%, log scale)")
        .y_label_formatter(&|y| format_delay(10f64.powf(*y)))
        .draw()
        .map_err(e)?;
    let mut groups: Vec<&str> = evaluations.iter().map(|x| x.1.as_str()).collect();
    groups.dedup();
    groups.sort();
    groups.dedup();
    for (gi, g) in groups.iter().enumerate() {
        let color = FLOW_COLORS[gi % FLOW_COLORS.len()];
        chart
            .draw_series(
                evaluations
                    .iter()
                    .enumerate()
                    .filter(|(_, x)| x.1 == *g)
                    .filter_map(|(i, x)| {
                        x.0.map(|v| {
                            Circle::new(((i + 1) as f64, v.max(lo).log10()), 4, color.filled())
                        })
                    }),
            )
            .map_err(e)?
            .label(g.to_string())
            .legend(move |(x, y)| Circle::new((x + 8, y), 4, color.filled()));
    }
    let mut best = f64::INFINITY;
    let line: Vec<(f64, f64)> = evaluations
        .iter()
        .enumerate()
        .filter_map(|(i, x)| {
            best = best.min(x.0.unwrap_or(f64::INFINITY));
            best.is_finite()
                .then(|| ((i + 1) as f64, best.max(lo).log10()))
        })
        .collect();
    chart
        .draw_series(LineSeries::new(line, BLACK.stroke_width(2)))
        .map_err(e)?
        .label("best so far")
        .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 16, y)], BLACK.stroke_width(2)));
    legend(&mut chart, SeriesLabelPosition::UpperRight).map_err(e)?;
    root.present().map_err(e)
}

/// One series of [`history_plot`]: its label and its `(x, throughput Mbit/s, delay ms)` points.
pub type HistorySeries = (String, Vec<(f64, f64, f64)>);

/// A scheme's performance over time on one path (Pantheon's Finding 3: it varies) to an SVG
/// or PNG file: two panels against `x_desc` (e.g. days since the first experiment), the mean
/// throughput (Mbit/s) and the mean 95th-percentile one-way delay (ms) of each experiment, one
/// colored series per group (e.g. "1 flow", "3 flows") as dots joined by lines. Points are
/// `(x, throughput, delay)`.
pub fn history_plot(
    path: &Path,
    title: &str,
    x_desc: &str,
    series: &[HistorySeries],
) -> Result<(), PlotError> {
    to_file!(path, (900, 700), draw_history, title, x_desc, series)
}

fn draw_history<DB: DrawingBackend>(
    root: Area<DB>,
    title: &str,
    x_desc: &str,
    series: &[HistorySeries],
) -> Result<(), String> {
    let e = |e: DrawingAreaErrorKind<DB::ErrorType>| e.to_string();
    root.fill(&WHITE).map_err(e)?;
    let root = root.titled(title, ("sans-serif", 18)).map_err(e)?;
    let panels = root.split_evenly((2, 1));
    let points = || series.iter().flat_map(|s| s.1.iter());
    let x_max = points().map(|p| p.0).fold(0.0, f64::max);
    let x_range = -0.05 * x_max.max(1.0)..x_max.max(1.0) * 1.05;
    for (panel, (y_desc, pick)) in panels.iter().zip([
        (
            "Throughput (Mbit/s)",
            (|p: &(f64, f64, f64)| p.1) as fn(&(f64, f64, f64)) -> f64,
        ),
        ("95th percentile one-way delay (ms)", |p| p.2),
    ]) {
        let y_max = points().map(pick).fold(0.0, f64::max).max(1.0) * 1.15;
        let mut chart = ChartBuilder::on(panel)
            .margin(15)
            .x_label_area_size(40)
            .y_label_area_size(60)
            .build_cartesian_2d(x_range.clone(), 0.0..y_max)
            .map_err(e)?;
        chart
            .configure_mesh()
            .x_desc(x_desc)
            .y_desc(y_desc)
            .draw()
            .map_err(e)?;
        for (i, (label, pts)) in series.iter().enumerate() {
            let color = FLOW_COLORS[i % FLOW_COLORS.len()];
            let xy: Vec<(f64, f64)> = pts.iter().map(|p| (p.0, pick(p))).collect();
            chart
                .draw_series(LineSeries::new(xy.clone(), color.stroke_width(1)))
                .map_err(e)?;
            chart
                .draw_series(xy.iter().map(|&p| Circle::new(p, 4, color.filled())))
                .map_err(e)?
                .label(label.clone())
                .legend(move |(x, y)| Circle::new((x + 8, y), 4, color.filled()));
        }
        legend(&mut chart, SeriesLabelPosition::LowerRight).map_err(e)?;
    }
    root.present().map_err(e)
}

/// The legend box of every plot here, at `position`.
type Chart<'a, DB> = ChartContext<
    'a,
    DB,
    Cartesian2d<plotters::coord::types::RangedCoordf64, plotters::coord::types::RangedCoordf64>,
>;

fn legend<'a, DB: DrawingBackend + 'a>(
    chart: &mut Chart<'a, DB>,
    position: SeriesLabelPosition,
) -> Result<(), DrawingAreaErrorKind<DB::ErrorType>> {
    chart
        .configure_series_labels()
        .border_style(BLACK)
        .background_style(WHITE.mix(0.85))
        .position(position)
        .draw()
}

/// A chart of a quantity over a run's time (s, from 0 to `t_max`) on `area`: `caption` above,
/// `y` the value range, `y_desc` its axis label; mesh drawn.
fn time_chart<'a, DB: DrawingBackend + 'a>(
    area: &'a Area<DB>,
    caption: &str,
    t_max: f64,
    y: std::ops::Range<f64>,
    y_desc: &str,
) -> Result<Chart<'a, DB>, String> {
    let e = |e: DrawingAreaErrorKind<DB::ErrorType>| e.to_string();
    let mut chart = ChartBuilder::on(area)
        .caption(caption, ("sans-serif", 18))
        .margin(20)
        .x_label_area_size(45)
        .y_label_area_size(60)
        .build_cartesian_2d(0.0..t_max, y)
        .map_err(e)?;
    chart
        .configure_mesh()
        .x_desc("Time (s)")
        .y_desc(y_desc)
        .draw()
        .map_err(e)?;
    Ok(chart)
}

/// Pantheon's flow colors, in order (matplotlib's `b g r y c m`).
const FLOW_COLORS: [RGBColor; 6] = [
    RGBColor(0, 0, 255),
    RGBColor(0, 128, 0),
    RGBColor(255, 0, 0),
    RGBColor(191, 191, 0),
    RGBColor(0, 191, 191),
    RGBColor(191, 0, 191),
];

/// Most points a delay plot draws; above it every k-th packet is drawn (the title says so).
pub const MAX_DELAY_POINTS: usize = 200_000;

/// Pantheon's per-run throughput plot (`<cc>_datalink_throughput_run<N>.png`): capacity as a
/// shaded area at bin start times, each flow's ingress (dashed, at bin starts) and egress
/// (solid, at bin ends from an initial 0), labelled with their means; SVG or PNG by extension.
pub fn throughput_plot(path: &Path, ts: &TimeSeries) -> Result<(), PlotError> {
    to_file!(path, (1200, 600), draw_throughput, ts)
}

fn draw_throughput<DB: DrawingBackend>(root: Area<DB>, ts: &TimeSeries) -> Result<(), String> {
    let e = |e: DrawingAreaErrorKind<DB::ErrorType>| e.to_string();
    root.fill(&WHITE).map_err(e)?;
    let bin_s = ts.bin_ms / 1000.0;
    let t_max = (ts.bins as f64 * bin_s).max(bin_s);
    let y_max = ts
        .flows
        .values()
        .flat_map(|f| f.ingress.iter().chain(&f.egress))
        .chain(ts.capacity.iter().flatten())
        .fold(0.0f64, |m, v| m.max(*v))
        .max(1e-3)
        * 1.1;
    let title = match ts.capacity_mean {
        Some(c) => format!("Average capacity {c:.2} Mbit/s (shaded region)"),
        None => String::new(),
    };
    let mut chart = time_chart(&root, &title, t_max, 0.0..y_max, "Throughput (Mbit/s)")?;
    if let Some(cap) = &ts.capacity {
        let linen = RGBColor(250, 240, 230);
        chart
            .draw_series(AreaSeries::new(
                cap.iter().enumerate().map(|(i, v)| (i as f64 * bin_s, *v)),
                0.0,
                linen.filled(),
            ))
            .map_err(e)?;
    }
    for (k, (flow, f)) in ts.flows.iter().enumerate() {
        let color = FLOW_COLORS[k % FLOW_COLORS.len()];
        chart
            .draw_series(DashedLineSeries::new(
                f.ingress
                    .iter()
                    .enumerate()
                    .map(|(i, v)| (i as f64 * bin_s, *v)),
                6,
                4,
                color.stroke_width(2),
            ))
            .map_err(e)?
            .label(format!(
                "Flow {flow} ingress (mean {:.2} Mbit/s)",
                f.ingress_mean
            ))
            .legend(move |(x, y)| {
                // Dashed as the line it names (three dashes of 6 px, 4 px apart).
                plotters::element::DashedPathElement::new(
                    vec![(x, y), (x + 26, y)],
                    6,
                    4,
                    color.stroke_width(2),
                )
            });
        let egress = std::iter::once((0.0, 0.0)).chain(
            f.egress
                .iter()
                .enumerate()
                .map(|(i, v)| ((i + 1) as f64 * bin_s, *v)),
        );
        chart
            .draw_series(LineSeries::new(egress, color.stroke_width(2)))
            .map_err(e)?
            .label(format!(
                "Flow {flow} egress (mean {:.2} Mbit/s)",
                f.egress_mean
            ))
            .legend(move |(x, y)| {
                PathElement::new(vec![(x, y), (x + 26, y)], color.stroke_width(2))
            });
    }
    legend(&mut chart, SeriesLabelPosition::UpperRight).map_err(e)?;
    root.present().map_err(e)
}

/// Pantheon's per-run delay plot (`<cc>_datalink_delay_run<N>.png`): every received packet's
/// one-way delay against time, per flow, labelled with its 95th percentile; beyond
/// [`MAX_DELAY_POINTS`] packets every k-th is drawn. SVG or PNG by extension.
pub fn delay_plot(path: &Path, ts: &TimeSeries) -> Result<(), PlotError> {
    to_file!(path, (1200, 600), draw_delay, ts)
}

fn draw_delay<DB: DrawingBackend>(root: Area<DB>, ts: &TimeSeries) -> Result<(), String> {
    root.fill(&WHITE).map_err(|e| e.to_string())?;
    let flows: Vec<u32> = ts.flows.keys().copied().collect();
    delay_panel(&root, ts, "", MAX_DELAY_POINTS, &|flow| {
        let k = flows.iter().position(|f| *f == flow)?;
        Some((FLOW_COLORS[k % FLOW_COLORS.len()], format!("Flow {flow}")))
    })?;
    root.present().map_err(|e| e.to_string())
}

/// Each flow's per-packet one-way delay against time on `area`, as dots of the colour and with
/// the label `style` gives the flow id (flows it gives none are left out), the label followed
/// by the flow's 95th percentile; above `max_points` packets every k-th is drawn and the caption
/// (after `title`) says so.
fn delay_panel<DB: DrawingBackend>(
    area: &Area<DB>,
    ts: &TimeSeries,
    title: &str,
    max_points: usize,
    style: &dyn Fn(u32) -> Option<(RGBColor, String)>,
) -> Result<(), String> {
    let e = |e: DrawingAreaErrorKind<DB::ErrorType>| e.to_string();
    let total: usize = ts.flows.values().map(|f| f.delays.len()).sum();
    let stride = total.div_ceil(max_points).max(1);
    let pts = || ts.flows.values().flat_map(|f| f.delays.iter());
    let t_max = pts().map(|p| p.0).fold(1.0f64, f64::max).ceil();
    let (d_min, d_max) = pts().fold((f64::MAX, f64::MIN), |(lo, hi), p| {
        (lo.min(p.1), hi.max(p.1))
    });
    let (d_min, d_max) = if total == 0 {
        (0.0, 1.0)
    } else {
        (d_min.min(0.0), d_max.max(1e-3) * 1.05)
    };
    let caption = match (title, stride > 1) {
        (t, true) if t.is_empty() => format!("every {stride}th of {total} packets shown"),
        (t, true) => format!("{t} (every {stride}th of {total} packets shown)"),
        (t, false) => t.to_owned(),
    };
    let mut chart = time_chart(
        area,
        &caption,
        t_max,
        d_min..d_max,
        "Per-packet one-way delay (ms)",
    )?;
    for (flow, f) in &ts.flows {
        let Some((color, label)) = style(*flow) else {
            continue;
        };
        let label = match f.p95_delay_ms {
            Some(p) => format!("{label} (95th percentile {p:.2} ms)"),
            None => label,
        };
        chart
            .draw_series(
                f.delays
                    .iter()
                    .step_by(stride)
                    .map(|&p| Circle::new(p, 1, color.filled())),
            )
            .map_err(e)?
            .label(label)
            .legend(move |(x, y)| Circle::new((x + 8, y), 4, color.filled()));
        // ECN: the packets a queue marked CE, as crosses over the dots.
        if !f.ce_marks.is_empty() {
            let n = f.ce_marks.len();
            let marks = n.div_ceil(max_points).max(1);
            chart
                .draw_series(
                    f.ce_marks
                        .iter()
                        .step_by(marks)
                        .map(|&p| Cross::new(p, 4, CE_COLOR.stroke_width(2))),
                )
                .map_err(e)?
                .label(format!("Flow {flow}: {n} packets marked CE (ECN)"))
                .legend(move |(x, y)| Cross::new((x + 8, y), 4, CE_COLOR.stroke_width(2)));
        }
    }
    legend(&mut chart, SeriesLabelPosition::UpperRight).map_err(e)
}

/// The colour of CE marks in delay plots (black: apart from every flow colour).
const CE_COLOR: RGBColor = RGBColor(0, 0, 0);

/// How a flow is drawn in a competition plot: one colour per scheme, and flows of one scheme
/// told apart by the dash of their line (`dash` 0 solid, 1 dashed, 2 dotted, …).
#[derive(Debug, Clone, PartialEq)]
pub struct FlowStyle {
    /// Flow id, as in the time series.
    pub flow: u32,
    /// Legend text, e.g. `Flow 2: TCP BBR (from 10 s)`.
    pub label: String,
    /// The scheme's colour (a matplotlib name, as the scheme descriptors give it).
    pub color: String,
    /// Which of the scheme's flows this is, 0 for its first.
    pub dash: usize,
}

/// The competition plot of a mixed run (`<name>_competition_run<N>.png`, SVG or PNG by
/// extension): at the top, each flow's throughput out of the path in `fine`'s bins (500 ms in
/// the analysis), then in `ts`'s (1 s), then each flow's per-packet one-way delay; one colour
/// per scheme, flows of one scheme dashed differently ([`FlowStyle`]). As the PCC Proteus
/// paper's Fig. 14 and the Pantheon paper's Fig. 7b.
pub fn competition_plot(
    path: &Path,
    fine: &TimeSeries,
    ts: &TimeSeries,
    styles: &[FlowStyle],
) -> Result<(), PlotError> {
    to_file!(path, (1200, 1300), draw_competition, fine, ts, styles)
}

fn draw_competition<DB: DrawingBackend>(
    root: Area<DB>,
    fine: &TimeSeries,
    ts: &TimeSeries,
    styles: &[FlowStyle],
) -> Result<(), String> {
    let e = |e: DrawingAreaErrorKind<DB::ErrorType>| e.to_string();
    root.fill(&WHITE).map_err(e)?;
    let (top, rest) = root.split_vertically(440);
    let (middle, bottom) = rest.split_vertically(440);
    let style_of = |flow: u32| styles.iter().find(|s| s.flow == flow);
    throughput_panel(&top, fine, styles)?;
    throughput_panel(&middle, ts, styles)?;
    delay_panel(
        &bottom,
        ts,
        "One-way delay of each flow's packets",
        MAX_DELAY_POINTS / 4,
        &|flow| style_of(flow).map(|st| (color_rgb(&st.color), st.label.clone())),
    )?;
    root.present().map_err(e)
}

/// Each flow's throughput out of the path in `ts`'s bins, styled by `styles`, on `area`.
fn throughput_panel<DB: DrawingBackend>(
    area: &Area<DB>,
    ts: &TimeSeries,
    styles: &[FlowStyle],
) -> Result<(), String> {
    let e = |e: DrawingAreaErrorKind<DB::ErrorType>| e.to_string();
    let bin_s = ts.bin_ms / 1000.0;
    let t_max = (ts.bins as f64 * bin_s).max(bin_s);
    let y_max = ts
        .flows
        .values()
        .flat_map(|f| f.egress.iter())
        .fold(0.0f64, |m, v| m.max(*v))
        .max(1e-3)
        * 1.15;
    let mut chart = time_chart(
        area,
        &format!("Throughput of each flow ({bin_s} s bins)"),
        t_max,
        0.0..y_max,
        "Throughput (Mbit/s)",
    )?;
    for (flow, f) in &ts.flows {
        let Some(st) = styles.iter().find(|s| s.flow == *flow) else {
            continue;
        };
        let points: Vec<(f64, f64)> = f
            .egress
            .iter()
            .enumerate()
            .map(|(i, v)| ((i as f64 + 0.5) * bin_s, *v))
            .collect();
        let label = format!("{} (mean {:.2} Mbit/s)", st.label, f.egress_mean);
        styled_line(&mut chart, points, color_rgb(&st.color), st.dash, label)?;
    }
    legend(&mut chart, SeriesLabelPosition::UpperRight).map_err(e)
}

/// Draws `points` as a line of `color` on `chart`, solid for `dash` 0 and dashed in one of
/// three patterns otherwise ([`FlowStyle::dash`]), with a legend entry `label`.
fn styled_line<'a, DB: DrawingBackend + 'a>(
    chart: &mut Chart<'a, DB>,
    points: Vec<(f64, f64)>,
    color: RGBColor,
    dash: usize,
    label: String,
) -> Result<(), String> {
    let e = |e: DrawingAreaErrorKind<DB::ErrorType>| e.to_string();
    if dash % 4 == 0 {
        chart
            .draw_series(LineSeries::new(points, color.stroke_width(2)))
            .map_err(e)?
            .label(label)
            .legend(move |(x, y)| {
                PathElement::new(vec![(x, y), (x + 26, y)], color.stroke_width(2))
            });
    } else {
        // Dashed, dotted, long-dashed: three patterns told apart at a glance.
        let (dash, gap) = [(8, 5), (3, 4), (18, 5)][dash % 4 - 1];
        chart
            .draw_series(DashedLineSeries::new(
                points,
                dash,
                gap,
                color.stroke_width(2),
            ))
            .map_err(e)?
            .label(label)
            .legend(move |(x, y)| {
                plotters::element::DashedPathElement::new(
                    vec![(x, y), (x + 26, y)],
                    dash,
                    gap,
                    color.stroke_width(2),
                )
            });
    }
    Ok(())
}

/// One line of [`cdf_plot`]: its legend text, colour (a matplotlib name), dash pattern
/// ([`FlowStyle::dash`]) and the values whose empirical CDF it draws.
#[derive(Debug, Clone, PartialEq)]
pub struct CdfSeries {
    /// Legend text, e.g. `TCP Cubic vs LEDBAT`.
    pub label: String,
    /// Colour name.
    pub color: String,
    /// 0 solid, 1–3 dashed.
    pub dash: usize,
    /// The values.
    pub values: Vec<f64>,
}

/// Empirical CDFs (step functions: fraction of values ≤ x) to an SVG or PNG file, with a
/// grey vertical line at `mark` (e.g. a throughput ratio of 0.9), as the PCC Proteus paper's
/// Fig. 10. `axes`: the x and y axis descriptions (`("Page load time (s)", "CDF (fraction of
/// pages)")`).
pub fn cdf_plot(
    path: &Path,
    title: &str,
    axes: (&str, &str),
    mark: Option<f64>,
    series: &[CdfSeries],
) -> Result<(), PlotError> {
    to_file!(path, (900, 600), draw_cdf, title, axes, mark, series)
}

/// The points of an empirical CDF's steps.
pub fn cdf_steps(values: &[f64]) -> Vec<(f64, f64)> {
    let mut v: Vec<f64> = values.iter().copied().filter(|x| x.is_finite()).collect();
    v.sort_by(f64::total_cmp);
    let n = v.len() as f64;
    let mut points = Vec::with_capacity(2 * v.len());
    for (i, x) in v.iter().enumerate() {
        points.push((*x, i as f64 / n));
        points.push((*x, (i + 1) as f64 / n));
    }
    points
}

fn draw_cdf<DB: DrawingBackend>(
    root: Area<DB>,
    title: &str,
    (x_desc, y_desc): (&str, &str),
    mark: Option<f64>,
    series: &[CdfSeries],
) -> Result<(), String> {
    let e = |e: DrawingAreaErrorKind<DB::ErrorType>| e.to_string();
    root.fill(&WHITE).map_err(e)?;
    let all = series.iter().flat_map(|s| s.values.iter().copied());
    let (lo, hi) = all
        .filter(|x| x.is_finite())
        .fold((0.0f64, 1.0f64), |(lo, hi), x| (lo.min(x), hi.max(x)));
    let pad = (hi - lo) * 0.05;
    let mut chart = ChartBuilder::on(&root)
        .caption(title, ("sans-serif", 18))
        .margin(20)
        .x_label_area_size(45)
        .y_label_area_size(60)
        .build_cartesian_2d(lo - pad..hi + pad, 0.0..1.02)
        .map_err(e)?;
    chart
        .configure_mesh()
        .x_desc(x_desc)
        .y_desc(y_desc)
        .draw()
        .map_err(e)?;
    if let Some(m) = mark {
        chart
            .draw_series(LineSeries::new(
                [(m, 0.0), (m, 1.02)],
                RGBColor(150, 150, 150),
            ))
            .map_err(e)?;
    }
    for s in series {
        let steps = cdf_steps(&s.values);
        styled_line(
            &mut chart,
            steps,
            color_rgb(&s.color),
            s.dash,
            s.label.clone(),
        )?;
    }
    legend(&mut chart, SeriesLabelPosition::UpperLeft).map_err(e)?;
    root.present().map_err(e)
}

/// One line of a [`scatter_plot`]: its legend text, colour (a matplotlib name) and points.
#[derive(Debug, Clone, PartialEq)]
pub struct PointSeries {
    /// Legend text.
    pub label: String,
    /// Colour name.
    pub color: String,
    /// (x, y) points; x > 0 (it is drawn on a log scale).
    pub points: Vec<(f64, f64)>,
}

/// Points to an SVG or PNG file, x on a log scale labelled in bytes (transfer sizes), one
/// colour per series: the slowdown of every transfer against its size.
pub fn scatter_plot(
    path: &Path,
    title: &str,
    axes: (&str, &str),
    series: &[PointSeries],
) -> Result<(), PlotError> {
    to_file!(path, (900, 600), draw_scatter, title, axes, series)
}

/// `bytes` as `1.5 KB`, `20 MB` (powers of 10).
fn format_bytes(bytes: f64) -> String {
    match bytes {
        b if b >= 1e9 => format!("{} GB", b / 1e9),
        b if b >= 1e6 => format!("{} MB", b / 1e6),
        b if b >= 1e3 => format!("{} KB", b / 1e3),
        b => format!("{b} B"),
    }
}

fn draw_scatter<DB: DrawingBackend>(
    root: Area<DB>,
    title: &str,
    (x_desc, y_desc): (&str, &str),
    series: &[PointSeries],
) -> Result<(), String> {
    let e = |e: DrawingAreaErrorKind<DB::ErrorType>| e.to_string();
    root.fill(&WHITE).map_err(e)?;
    let (lo, hi, ymax) = series
        .iter()
        .flat_map(|s| s.points.iter())
        .filter(|p| p.0 > 0.0 && p.1.is_finite())
        .fold((f64::MAX, f64::MIN, 0.0f64), |(lo, hi, y), p| {
            (lo.min(p.0.log10()), hi.max(p.0.log10()), y.max(p.1))
        });
    let (lo, hi) = if lo > hi {
        (0.0, 1.0)
    } else {
        (lo - 0.1, hi + 0.1)
    };
    let mut chart = ChartBuilder::on(&root)
        .caption(title, ("sans-serif", 18))
        .margin(20)
        .x_label_area_size(45)
        .y_label_area_size(60)
        .build_cartesian_2d(lo..hi, 0.0..ymax.max(1.0) * 1.05)
        .map_err(e)?;
    chart
        .configure_mesh()
        .x_desc(x_desc)
        .y_desc(y_desc)
        .x_label_formatter(&|x| format_bytes((10f64.powf(*x)).round()))
        .draw()
        .map_err(e)?;
    for s in series {
        let color = color_rgb(&s.color);
        let style = color.mix(0.6).filled();
        chart
            .draw_series(
                s.points
                    .iter()
                    .filter(|p| p.0 > 0.0 && p.1.is_finite())
                    .map(|p| Circle::new((p.0.log10(), p.1), 3, style)),
            )
            .map_err(e)?
            .label(s.label.clone())
            .legend(move |(x, y)| Circle::new((x + 8, y), 4, color.filled()));
    }
    legend(&mut chart, SeriesLabelPosition::UpperRight).map_err(e)?;
    root.present().map_err(e)
}

/// A heatmap to an SVG or PNG file: `values[j][i]` at (`xs[i]`, `ys[j]`), each cell coloured
/// from white (the lowest value) to dark blue (the highest) and labelled with its value;
/// empty cells grey.
pub fn heatmap_plot(
    path: &Path,
    title: &str,
    (x_desc, y_desc): (&str, &str),
    xs: &[f64],
    ys: &[f64],
    values: &[Vec<Option<f64>>],
) -> Result<(), PlotError> {
    to_file!(
        path,
        (900, 650),
        draw_heatmap,
        title,
        (x_desc, y_desc),
        xs,
        ys,
        values
    )
}

fn draw_heatmap<DB: DrawingBackend>(
    root: Area<DB>,
    title: &str,
    (x_desc, y_desc): (&str, &str),
    xs: &[f64],
    ys: &[f64],
    values: &[Vec<Option<f64>>],
) -> Result<(), String> {
    let e = |e: DrawingAreaErrorKind<DB::ErrorType>| e.to_string();
    root.fill(&WHITE).map_err(e)?;
    let all = values.iter().flatten().flatten().copied();
    let (lo, hi) = all.fold((f64::MAX, f64::MIN), |(lo, hi), v| (lo.min(v), hi.max(v)));
    let (nx, ny) = (xs.len().max(1) as f64, ys.len().max(1) as f64);
    let mut chart = ChartBuilder::on(&root)
        .caption(title, ("sans-serif", 18))
        .margin(20)
        .x_label_area_size(45)
        .y_label_area_size(70)
        .build_cartesian_2d(0.0..nx, 0.0..ny)
        .map_err(e)?;
    let tick = |axis: &[f64], v: f64| {
        let i = v - 0.5;
        (i >= 0.0 && i.fract() == 0.0)
            .then(|| axis.get(i as usize).map(|x| format!("{x}")))
            .flatten()
            .unwrap_or_default()
    };
    chart
        .configure_mesh()
        .disable_mesh()
        .x_labels(2 * xs.len() + 1)
        .y_labels(2 * ys.len() + 1)
        .x_label_formatter(&|v| tick(xs, *v))
        .y_label_formatter(&|v| tick(ys, *v))
        .x_desc(x_desc)
        .y_desc(y_desc)
        .draw()
        .map_err(e)?;
    let shade = |v: f64| {
        let f = if hi > lo { (v - lo) / (hi - lo) } else { 1.0 };
        let mix = |a: f64, b: f64| (a + (b - a) * f) as u8;
        RGBColor(mix(255.0, 8.0), mix(255.0, 48.0), mix(255.0, 107.0))
    };
    for (j, row) in values.iter().enumerate() {
        for (i, v) in row.iter().enumerate() {
            let (x, y) = (i as f64, j as f64);
            let fill = v.map_or(RGBColor(210, 210, 210), shade);
            chart
                .draw_series([Rectangle::new([(x, y), (x + 1.0, y + 1.0)], fill.filled())])
                .map_err(e)?;
            let light = v.is_some_and(|v| hi > lo && (v - lo) / (hi - lo) > 0.55);
            let text = v.map_or("—".to_owned(), |v| format!("{v:.2}"));
            let color = if light { WHITE } else { BLACK };
            chart
                .draw_series([Text::new(
                    text,
                    (x + 0.42, y + 0.5),
                    ("sans-serif", 16).into_font().color(&color),
                )])
                .map_err(e)?;
        }
    }
    root.present().map_err(e)
}

/// The mean of (delay, throughput) points: a scheme's point in the mean summary plot.
fn centroid(points: &[(f64, f64)]) -> (f64, f64) {
    let n = points.len() as f64;
    (
        points.iter().map(|p| p.0).sum::<f64>() / n,
        points.iter().map(|p| p.1).sum::<f64>() / n,
    )
}

/// The two bars of the 95 % confidence interval of a scheme's mean point (issue 54), as the
/// summary's table gives them: the horizontal one spans the mean p95 delay's bootstrap
/// interval at the mean throughput ([`crate::compare::bootstrap_mean_interval`]), the vertical
/// one the mean throughput ± its Student's t half-width at the mean delay
/// ([`crate::compare::mean_interval`]), each as its two (delay ms, throughput Mbit/s) ends.
/// `None` for fewer than [`crate::compare::MIN_INTERVAL_RUNS`] runs.
pub fn mean_interval_bars(runs: &[(f64, f64)]) -> Option<[[(f64, f64); 2]; 2]> {
    use crate::compare::{bootstrap_mean_interval, mean_interval};
    let delays: Vec<f64> = runs.iter().map(|p| p.0).collect();
    let tputs: Vec<f64> = runs.iter().map(|p| p.1).collect();
    let (delay, tput) = (bootstrap_mean_interval(&delays)?, mean_interval(&tputs)?);
    let ((d0, d1), (t0, t1)) = (delay.bounds()?, tput.bounds()?);
    Some([
        [(d0, tput.mean), (d1, tput.mean)],
        [(delay.mean, t0), (delay.mean, t1)],
    ])
}

/// The 1-σ ellipse of a scheme's runs, as the Pantheon paper's figures
/// (`ellipsemaker`): centred at the mean of the (delay, throughput) points, semi-axes the
/// square roots of the eigenvalues of their sample covariance, along its eigenvectors;
/// `points` points around it. `None` for fewer than two runs.
pub fn sigma_ellipse(runs: &[(f64, f64)], points: usize) -> Option<Vec<(f64, f64)>> {
    if runs.len() < 2 {
        return None;
    }
    let n = runs.len() as f64;
    let (mx, my) = centroid(runs);
    let cov = |f: &dyn Fn(&(f64, f64)) -> f64| runs.iter().map(f).sum::<f64>() / (n - 1.0);
    let (a, b, c) = (
        cov(&|p| (p.0 - mx).powi(2)),
        cov(&|p| (p.0 - mx) * (p.1 - my)),
        cov(&|p| (p.1 - my).powi(2)),
    );
    // Eigen-decomposition of [[a, b], [b, c]].
    let half_trace = (a + c) / 2.0;
    let root = (((a - c) / 2.0).powi(2) + b * b).sqrt();
    let (l1, l2) = (half_trace + root, (half_trace - root).max(0.0));
    let angle = if b == 0.0 {
        if a >= c {
            0.0
        } else {
            std::f64::consts::FRAC_PI_2
        }
    } else {
        (l1 - a).atan2(b)
    };
    let (r1, r2) = (l1.sqrt(), l2.sqrt());
    Some(
        (0..=points)
            .map(|i| {
                let t = i as f64 / points as f64 * std::f64::consts::TAU;
                let (x, y) = (r1 * t.cos(), r2 * t.sin());
                (
                    mx + x * angle.cos() - y * angle.sin(),
                    my + x * angle.sin() + y * angle.cos(),
                )
            })
            .collect(),
    )
}

fn format_delay(ms: f64) -> String {
    if ms >= 100.0 {
        format!("{ms:.0}")
    } else if ms >= 10.0 {
        format!("{ms:.1}")
    } else {
        format!("{ms:.2}")
    }
}

enum Shape {
    Triangle,
    Cross,
    Square,
    Circle,
}

/// The shape drawn for a matplotlib marker name: triangles for `^ v < >`, crosses for
/// `+ x 1`, squares for `s D d h H p 8`, circles otherwise.
fn marker_shape(name: &str) -> Shape {
    match name {
        "^" | "v" | "<" | ">" => Shape::Triangle,
        "+" | "x" | "1" => Shape::Cross,
        "s" | "D" | "d" | "h" | "H" | "p" | "8" => Shape::Square,
        _ => Shape::Circle,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    fn f(tput: f64, delay: f64, loss: f64) -> FlowStats {
        FlowStats {
            tput_mbps: tput,
            p95_delay_ms: Some(delay),
            min_delay_ms: Some(1.0),
            p95_queueing_delay_ms: Some(delay - 1.0),
            loss,
            arrived: 1,
            departed: 1,
            duration_ms: 1.0,
            negative_delays: 0,
            ecn: None,
        }
    }

    #[test]
    fn cdf_steps_rise_by_one_nth_at_each_sorted_value() {
        assert_eq!(
            cdf_steps(&[0.9, f64::NAN, 0.5]),
            [(0.5, 0.0), (0.5, 0.5), (0.9, 0.5), (0.9, 1.0)]
        );
        assert!(cdf_steps(&[]).is_empty());
    }

    #[test]
    fn cdf_and_heatmap_plots_are_written() {
        let dir = std::env::temp_dir().join(format!("sweep-plots-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let series = [
            CdfSeries {
                label: "a".into(),
                color: "blue".into(),
                dash: 0,
                values: vec![0.5, 0.9, 1.0],
            },
            CdfSeries {
                label: "b".into(),
                color: "red".into(),
                dash: 1,
                values: vec![0.2],
            },
        ];
        let cdf = dir.join("cdf.png");
        cdf_plot(&cdf, "t", ("ratio", "CDF"), Some(0.9), &series).unwrap();
        let scatter = dir.join("scatter.png");
        let points = [PointSeries {
            label: "TCP Cubic".into(),
            color: "black".into(),
            points: vec![(5_000.0, 1.2), (120_000.0, 2.5), (2e6, 1.1)],
        }];
        scatter_plot(&scatter, "t", ("size", "slowdown"), &points).unwrap();
        assert!(std::fs::metadata(&scatter).unwrap().len() > 1000);
        assert_eq!(format_bytes(1.5e3), "1.5 KB");
        assert_eq!(format_bytes(2e7), "20 MB");
        let heat = dir.join("heat.svg");
        let values = vec![vec![Some(0.5), None], vec![Some(1.0), Some(0.7)]];
        heatmap_plot(
            &heat,
            "t",
            ("x", "y"),
            &[10.0, 20.0],
            &[20.0, 60.0],
            &values,
        )
        .unwrap();
        assert!(std::fs::read(&cdf).unwrap().starts_with(b"\x89PNG"));
        let svg = std::fs::read_to_string(&heat).unwrap();
        // Cell values, and the axes' values under the columns and beside the rows.
        for label in ["0.50", "1.00", "0.70", "—", "\n10\n", "\n60\n"] {
            assert!(svg.contains(label), "{label} not in the heatmap");
        }
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn stats_text_matches_pantheon_layout() {
        let mut stats = RunStats {
            total: f(9.527, 123.4567, 0.0012),
            flows: BTreeMap::from([(1, f(9.527, 123.4567, 0.0012))]),
            capacity_mbps: None,
        };
        assert_eq!(
            stats_text(&stats),
            "-- Total of 1 flow:\nAverage throughput: 9.53 Mbit/s\n\
             95th percentile per-packet one-way delay: 123.457 ms\nLoss rate: 0.12%\n\
             -- Flow 1:\nAverage throughput: 9.53 Mbit/s\n\
             95th percentile per-packet one-way delay: 123.457 ms\nLoss rate: 0.12%\n"
        );
        // With a link log: capacity first, utilisation on the total's throughput line only.
        stats.capacity_mbps = Some(10.0);
        assert!(stats_text(&stats).starts_with(
            "-- Total of 1 flow:\nAverage capacity: 10.00 Mbit/s\n\
             Average throughput: 9.53 Mbit/s (95.3% utilization)\n"
        ));
        assert!(stats_text(&stats).contains("-- Flow 1:\nAverage throughput: 9.53 Mbit/s\n"));
    }

    #[test]
    fn throughput_legend_draws_ingress_dashed_and_egress_solid() {
        let dir = std::env::temp_dir().join(format!("tput-legend-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("t.svg");
        // No bins: the only strokes of the flow's colour are the legend's (and egress's
        // single starting point), so the legend's segments can be counted.
        let flow = crate::timeseries::FlowSeries {
            ingress: vec![],
            egress: vec![],
            ingress_mean: 1.0,
            egress_mean: 1.0,
            delays: vec![],
            p95_delay_ms: None,
            ce_marks: vec![],
        };
        let ts = TimeSeries {
            bin_ms: 500.0,
            first_ms: 0.0,
            bins: 0,
            capacity: None,
            capacity_mean: None,
            flows: BTreeMap::from([(1, flow)]),
        };
        throughput_plot(&path, &ts).unwrap();
        let svg = std::fs::read_to_string(&path).unwrap();
        std::fs::remove_dir_all(&dir).unwrap();
        // Horizontal two-point strokes in flow 1's blue, as (x1, x2).
        let segments: Vec<(i32, i32)> = svg
            .split("<polyline")
            .skip(1)
            .filter(|e| e.contains("stroke=\"#0000FF\""))
            .filter_map(|e| {
                let pts = e.split("points=\"").nth(1)?.split('"').next()?;
                let xy: Vec<(i32, i32)> = pts
                    .split_whitespace()
                    .filter_map(|p| {
                        let (x, y) = p.split_once(',')?;
                        Some((x.parse().ok()?, y.parse().ok()?))
                    })
                    .collect();
                (xy.len() == 2 && xy[0].1 == xy[1].1).then(|| (xy[0].0, xy[1].0))
            })
            .collect();
        // Ingress: three dashes of ≤ 6 px; egress: one solid stroke of 26 px.
        let dashes = segments.iter().filter(|(a, b)| b - a <= 7).count();
        let solid = segments.iter().filter(|(a, b)| b - a >= 20).count();
        assert!(svg.contains("Flow 1 ingress") && svg.contains("Flow 1 egress"));
        assert_eq!((dashes, solid), (3, 1), "{segments:?}");
    }

    #[test]
    fn delay_plot_draws_ce_marks_over_the_flow_s_dots_and_names_them() {
        let dir = std::env::temp_dir().join(format!("delay-ce-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("d.svg");
        let delays: Vec<(f64, f64)> = (0..100)
            .map(|i| (i as f64 * 0.1, 20.0 + i as f64))
            .collect();
        let series = |ce_marks: Vec<(f64, f64)>| crate::timeseries::FlowSeries {
            delays: delays.clone(),
            p95_delay_ms: Some(115.0),
            ce_marks,
            ..Default::default()
        };
        let ts = |ce_marks| TimeSeries {
            bin_ms: 500.0,
            first_ms: 0.0,
            bins: 20,
            capacity: None,
            capacity_mean: None,
            flows: BTreeMap::from([(1, series(ce_marks))]),
        };
        // Crosses are two black strokes each; the legend's cross too.
        let black = |svg: &str| svg.matches("stroke=\"#000000\"").count();
        delay_plot(&path, &ts(vec![])).unwrap();
        let without = std::fs::read_to_string(&path).unwrap();
        delay_plot(&path, &ts(vec![delays[10], delays[50], delays[90]])).unwrap();
        let with = std::fs::read_to_string(&path).unwrap();
        std::fs::remove_dir_all(&dir).unwrap();
        assert!(!without.contains("marked CE"));
        assert!(with.contains("Flow 1: 3 packets marked CE (ECN)"), "legend");
        assert!(
            black(&with) >= black(&without) + 2 * 4,
            "three crosses and the legend's"
        );
    }

    #[test]
    fn summary_plot_writes_svg_with_labels() {
        let dir = std::env::temp_dir().join(format!("plot-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("s.svg");
        let schemes = vec![
            SchemePoints {
                label: "TCP Cubic".into(),
                color: "black".into(),
                marker: "*".into(),
                runs: vec![(90.0, 9.5), (95.0, 9.4)],
            },
            SchemePoints {
                label: "TCP BBR".into(),
                color: "gold".into(),
                marker: "^".into(),
                runs: vec![(60.0, 9.3)],
            },
        ];
        summary_plot(&path, "test", &schemes, true).unwrap();
        let svg = std::fs::read_to_string(&path).unwrap();
        assert!(svg.contains("TCP Cubic") && svg.contains("TCP BBR"));
        assert!(svg.contains("Average throughput"));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn calibration_plots_write_svg_with_labels() {
        let dir = std::env::temp_dir().join(format!("cal-plots-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let fig3 = dir.join("figure3.svg");
        calibration_plot(
            &fig3,
            "California → Mexico",
            &[CalibrationPoint {
                label: "TCP Cubic".into(),
                color: "black".into(),
                real: (64.37, 96.27),
                emulated: (61.0, 99.0),
            }],
        )
        .unwrap();
        let svg = std::fs::read_to_string(&fig3).unwrap();
        assert!(svg.contains("TCP Cubic") && svg.contains("California"));
        let conv = dir.join("convergence.svg");
        let evals = vec![
            (Some(40.0), "constant".to_owned()),
            (None, "constant".to_owned()),
            (Some(4.0), "poisson".to_owned()),
        ];
        convergence_plot(&conv, "search", &evals).unwrap();
        let svg = std::fs::read_to_string(&conv).unwrap();
        assert!(svg.contains("best so far") && svg.contains("poisson"));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn mean_interval_bars_span_each_mean_s_interval() {
        // Delays 10, 20, 30 ms: 3 runs, the bootstrap interval is their range; throughputs 4,
        // 5, 6: mean 5, SD 1, t(0.975, 2) = 4.3027 → ± 2.484 Mbit/s.
        let runs = [(10.0, 4.0), (20.0, 5.0), (30.0, 6.0)];
        let [h, v] = mean_interval_bars(&runs).unwrap();
        assert_eq!(h, [(10.0, 5.0), (30.0, 5.0)]);
        let ht = 4.302_652_7 / 3f64.sqrt();
        assert!((v[0].1 - (5.0 - ht)).abs() < 1e-6 && (v[1].1 - (5.0 + ht)).abs() < 1e-6);
        assert_eq!((v[0].0, v[1].0), (20.0, 20.0));
        assert!(mean_interval_bars(&runs[..2]).is_none());
    }

    #[test]
    fn sigma_ellipse_has_the_covariance_axes() {
        // Points (±2, 0) and (0, ±1) around (10, 5): variances 8/3 and 2/3, no covariance, so
        // semi-axes √(8/3) along delay and √(2/3) along throughput.
        let runs = [(12.0, 5.0), (8.0, 5.0), (10.0, 6.0), (10.0, 4.0)];
        let ring = sigma_ellipse(&runs, 4).unwrap();
        let (a, b) = ((8.0f64 / 3.0).sqrt(), (2.0f64 / 3.0).sqrt());
        let close =
            |p: (f64, f64), q: (f64, f64)| (p.0 - q.0).abs() < 1e-9 && (p.1 - q.1).abs() < 1e-9;
        assert!(close(ring[0], (10.0 + a, 5.0)), "{:?}", ring[0]);
        assert!(close(ring[1], (10.0, 5.0 + b)), "{:?}", ring[1]);
        // Perfectly correlated runs: a degenerate ellipse along the line y = x.
        let ring = sigma_ellipse(&[(1.0, 1.0), (3.0, 3.0)], 4).unwrap();
        assert!(close(ring[1], (2.0, 2.0)), "{:?}", ring[1]);
        assert!((ring[0].0 - ring[0].1).abs() < 1e-9);
        assert!(sigma_ellipse(&[(1.0, 1.0)], 4).is_none());
    }

    #[test]
    fn per_run_plots_in_svg_and_png() {
        let dir = std::env::temp_dir().join(format!("ts-plot-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let arrivals = polars::df!(
            "flow" => [1u32, 1, 2], "t_ms" => [100.0, 600.0, 700.0], "size" => [1500u64, 1500, 500]
        )
        .unwrap();
        let departures = polars::df!(
            "flow" => [1u32, 1], "t_ms" => [150.0, 650.0], "size" => [1500u64, 1500],
            "delay" => [Some(50.0), Some(50.0)]
        )
        .unwrap();
        let opp = polars::df!("t_ms" => [0.0, 999.0], "size" => [1500u64, 1500]).unwrap();
        let stats = crate::metrics::run_stats(&arrivals, &departures, Some(&opp)).unwrap();
        let ts = crate::timeseries::time_series(&arrivals, &departures, Some(&opp), &stats, 500.0)
            .unwrap();
        for name in ["t.svg", "t.png", "d.svg", "d.png"] {
            let path = dir.join(name);
            if name.starts_with('t') {
                throughput_plot(&path, &ts).unwrap();
            } else {
                delay_plot(&path, &ts).unwrap();
            }
            let bytes = std::fs::read(&path).unwrap();
            if name.ends_with(".png") {
                assert_eq!(&bytes[1..4], b"PNG", "{name}");
            } else {
                let svg = String::from_utf8(bytes).unwrap();
                let want = if name.starts_with('t') {
                    "Flow 1 egress (mean 0.05 Mbit/s)"
                } else {
                    "Flow 1 (95th percentile 50.00 ms)"
                };
                assert!(svg.contains(want), "{name}: {want}");
            }
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
