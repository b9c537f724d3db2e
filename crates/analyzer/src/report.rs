//! Rendering results: Pantheon's stats text, the summary table and the summary plots.
//! Everything here is a view of [`RunStats`] values; nothing is re-parsed from text.

use std::fmt::Write as _;
use std::path::Path;
use std::sync::Once;

use plotters::prelude::*;
use plotters::style::FontStyle;

use crate::metrics::{FlowStats, RunStats};

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

fn register_font() {
    FONT.call_once(|| {
        let _ = plotters::style::register_font(
            "sans-serif",
            FontStyle::Normal,
            include_bytes!("../assets/DejaVuSans.ttf"),
        );
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
        "purple" => RGBColor(128, 0, 128),
        _ => RGBColor(128, 128, 128),
    }
}

/// Draws Pantheon's summary scatter to an SVG file: x = 95th-percentile one-way delay on a
/// log scale, **inverted** (better = right), y = average throughput. With `mean`, one point
/// per scheme (mean of its runs' delays and throughputs), annotated with the scheme's label.
pub fn summary_plot(
    path: &Path,
    title: &str,
    schemes: &[SchemePoints],
    mean: bool,
) -> Result<(), PlotError> {
    register_font();
    let err = |e: String| PlotError {
        path: path.display().to_string(),
        message: e,
    };
    let series: Vec<(&SchemePoints, Vec<(f64, f64)>)> = schemes
        .iter()
        .map(|s| {
            let pts: Vec<(f64, f64)> = if mean && !s.runs.is_empty() {
                let n = s.runs.len() as f64;
                vec![(
                    s.runs.iter().map(|p| p.0).sum::<f64>() / n,
                    s.runs.iter().map(|p| p.1).sum::<f64>() / n,
                )]
            } else {
                s.runs.clone()
            };
            (s, pts.into_iter().filter(|p| p.0 > 0.0).collect())
        })
        .collect();
    let all: Vec<(f64, f64)> = series.iter().flat_map(|s| s.1.iter().copied()).collect();
    // x' = −log10(delay): a plain axis on x' is a log axis on delay, inverted.
    let (mut lo, mut hi) = all.iter().fold((f64::MAX, f64::MIN), |(lo, hi), p| {
        let x = -p.0.log10();
        (lo.min(x), hi.max(x))
    });
    if all.is_empty() {
        (lo, hi) = (-3.0, 0.0);
    }
    let pad = ((hi - lo) * 0.15).max(0.05);
    let ymax = all.iter().map(|p| p.1).fold(0.0, f64::max).max(1e-3) * 1.15;

    let root = SVGBackend::new(path, (900, 600)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| err(e.to_string()))?;
    let mut chart = ChartBuilder::on(&root)
        .caption(title, ("sans-serif", 18))
        .margin(20)
        .x_label_area_size(50)
        .y_label_area_size(70)
        .build_cartesian_2d((lo - pad)..(hi + pad), 0.0..ymax)
        .map_err(|e| err(e.to_string()))?;
    chart
        .configure_mesh()
        .x_desc("95th percentile one-way delay (ms, log scale, better →)")
        .y_desc("Average throughput (Mbit/s)")
        .x_label_formatter(&|x| format_delay(10f64.powf(-x)))
        .draw()
        .map_err(|e| err(e.to_string()))?;
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
    chart
        .configure_series_labels()
        .border_style(BLACK)
        .background_style(WHITE.mix(0.8))
        .position(SeriesLabelPosition::UpperLeft)
        .draw()
        .map_err(|e| err(e.to_string()))?;
    root.present().map_err(|e| err(e.to_string()))?;
    Ok(())
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
            loss,
            arrived: 1,
            departed: 1,
            duration_ms: 1.0,
            negative_delays: 0,
        }
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
}
