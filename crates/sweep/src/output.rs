//! What a sweep leaves for the researcher, in its results directory:
//!
//! - `sweep.csv` and `sweep.parquet`: the tidy table ([`crate::collect::Row`], one row per
//!   environment × mix × run × flow);
//! - `sweep_means.csv` and `sweep_means.parquet`: per environment × mix × flow, the means over
//!   the point's runs with the ends of their 95 % confidence intervals
//!   ([`crate::collect::means`]);
//! - `sweep_ratio_cdf.png`: per (primary, contender), the CDF over environments of the
//!   primary's throughput ratio (PCC Proteus paper, Fig. 10);
//! - `sweep_heatmap_<mix>.png`: per mix, the heatmap's value over its two axes;
//! - `sweep_page_load_cdf.png`: with page-load workloads, per mix the CDF of page load times
//!   (seed 002, Fig. 11(b));
//! - `sweep_alone_<env>.png`: per environment where two or more schemes ran alone, Pantheon's
//!   throughput–delay plot of them (each scheme's mean over its runs and their 1-σ ellipse; the
//!   Pantheon paper's Figures 6 and 7), with a table in the summary of which are on the
//!   frontier;
//! - `sweep_summary.md`: the points' status, and per pair the median throughput ratio and the
//!   share of environments where it is ≥ 0.9.

use std::fmt::Write as _;
use std::path::Path;

use analyzer::compare::MeanInterval;
use analyzer::report::{cdf_plot, heatmap_plot, summary_plot, CdfSeries, SchemePoints};
use analyzer::table::{self, Values};

use crate::collect::{alone, grid, group, means, pairs, MeanRow, PairSummary, Row, UNHARMED_RATIO};
use crate::exec::Status;
use crate::plan::SweepPlan;

/// A scheme's label, colour (a matplotlib name) and marker (`o`, `*`, …), from its descriptor.
pub type Style<'a> = &'a dyn Fn(&str) -> (String, String, String);

/// The tidy table's columns.
fn columns(rows: &[Row]) -> Vec<(&'static str, Values)> {
    let f = |get: fn(&Row) -> Option<f64>| Values::F64(rows.iter().map(get).collect());
    let s = |get: fn(&Row) -> Option<String>| Values::Str(rows.iter().map(get).collect());
    let u = |get: fn(&Row) -> u32| Values::U32(rows.iter().map(get).collect());
    vec![
        ("point", u(|r| r.point)),
        ("env", s(|r| Some(r.env.clone()))),
        ("rate_mbps", f(|r| r.rate_mbps)),
        ("rtt_ms", f(|r| r.rtt_ms)),
        ("buffer_bdp", f(|r| r.buffer_bdp)),
        ("buffer_packets", f(|r| r.buffer_packets)),
        ("loss_rate", f(|r| r.loss_rate)),
        ("emulator", s(|r| r.emulator.clone())),
        ("mix", s(|r| Some(r.mix.clone()))),
        ("kind", s(|r| Some(r.kind.name().to_owned()))),
        ("primary", s(|r| r.primary.clone())),
        ("contender", s(|r| r.contender.clone())),
        ("run", u(|r| r.run)),
        ("flow", u(|r| r.flow)),
        ("scheme", s(|r| Some(r.scheme.clone()))),
        ("start_s", f(|r| Some(r.start_s))),
        ("extra_delay_ms", f(|r| Some(r.extra_delay_ms))),
        ("tput_mbps", f(|r| r.tput_mbps)),
        ("p95_delay_ms", f(|r| r.p95_delay_ms)),
        ("loss", f(|r| r.loss)),
        ("tput_all_active_mbps", f(|r| r.tput_all_active_mbps)),
        ("tput_ratio", f(|r| r.tput_ratio)),
        ("tput_harm", f(|r| r.tput_harm)),
        ("delay_harm", f(|r| r.delay_harm)),
        ("jain", f(|r| r.jain)),
        ("convergence_s", f(|r| r.convergence_s)),
        ("workload", s(|r| r.workload.clone())),
        ("transfers_started", f(|r| r.transfers_started)),
        ("transfers_completed", f(|r| r.transfers_completed)),
        ("transfers_unfinished", f(|r| r.transfers_unfinished)),
        ("fct_p50_ms", f(|r| r.fct_p50_ms)),
        ("fct_p95_ms", f(|r| r.fct_p95_ms)),
        ("fct_p99_ms", f(|r| r.fct_p99_ms)),
        ("slowdown_p50", f(|r| r.slowdown_p50)),
        ("slowdown_p95", f(|r| r.slowdown_p95)),
        ("page_load_p50_ms", f(|r| r.page_load_p50_ms)),
        ("page_load_p95_ms", f(|r| r.page_load_p95_ms)),
    ]
}

/// The columns of `sweep_means.*`: per figure its mean and the ends of its 95 % confidence
/// interval (`<figure>_ci95_low`, `<figure>_ci95_high`; empty under 3 runs).
fn mean_columns(rows: &[MeanRow]) -> Vec<(&'static str, Values)> {
    let s = |get: fn(&MeanRow) -> String| Values::Str(rows.iter().map(|r| Some(get(r))).collect());
    let u = |get: fn(&MeanRow) -> u32| Values::U32(rows.iter().map(get).collect());
    type Get = fn(&MeanRow) -> Option<MeanInterval>;
    let mean = |get: Get| Values::F64(rows.iter().map(|r| get(r).map(|m| m.mean)).collect());
    let end = |get: Get, high: bool| {
        Values::F64(
            rows.iter()
                .map(|r| get(r)?.bounds().map(|b| if high { b.1 } else { b.0 }))
                .collect(),
        )
    };
    let mut columns = vec![
        ("env", s(|r| r.env.clone())),
        ("mix", s(|r| r.mix.clone())),
        ("kind", s(|r| r.kind.name().to_owned())),
        ("flow", u(|r| r.flow)),
        ("scheme", s(|r| r.scheme.clone())),
        ("runs", u(|r| u32::try_from(r.runs).unwrap_or(u32::MAX))),
    ];
    let figures: [(&'static str, &'static str, &'static str, Get); 4] = [
        (
            "tput_mbps",
            "tput_mbps_ci95_low",
            "tput_mbps_ci95_high",
            |r| r.tput_mbps,
        ),
        (
            "p95_delay_ms",
            "p95_delay_ms_ci95_low",
            "p95_delay_ms_ci95_high",
            |r| r.p95_delay_ms,
        ),
        ("loss", "loss_ci95_low", "loss_ci95_high", |r| r.loss),
        (
            "tput_ratio",
            "tput_ratio_ci95_low",
            "tput_ratio_ci95_high",
            |r| r.tput_ratio,
        ),
    ];
    for (name, low, high, get) in figures {
        columns.extend([
            (name, mean(get)),
            (low, end(get, false)),
            (high, end(get, true)),
        ]);
    }
    columns
}

/// The summary's table of the means over runs, in Markdown (`value ± half-width`).
fn means_table(rows: &[MeanRow], style: Style) -> String {
    let mut s = String::from(
        "| environment | mix | flow | scheme | runs | tput (Mbit/s) | p95 delay (ms) | loss (%) \
         | tput ratio |\n|---|---|---|---|---|---|---|---|---|\n",
    );
    let cell = |v: Option<MeanInterval>, scale: f64, decimals: usize| {
        v.map_or("—".to_owned(), |m| m.scaled(scale).display(decimals))
    };
    for r in rows {
        let _ = writeln!(
            s,
            "| {} | {} | {} | {} | {} | {} | {} | {} | {} |",
            r.env,
            r.mix,
            r.flow,
            style(&r.scheme).0,
            r.runs,
            cell(r.tput_mbps, 1.0, 2),
            cell(r.p95_delay_ms, 1.0, 1),
            cell(r.loss, 100.0, 3),
            cell(r.tput_ratio, 1.0, 3),
        );
    }
    s
}

/// `sweep_means.csv` and `sweep_means.parquet`, and with repeated runs their table in the
/// summary `md`.
fn means_section(dir: &Path, rows: &[Row], style: Style, md: &mut String) -> anyhow::Result<()> {
    let means = means(rows);
    table::write(
        mean_columns(&means),
        &dir.join("sweep_means.csv"),
        &dir.join("sweep_means.parquet"),
    )?;
    if means.iter().any(|m| m.runs > 1) {
        md.push_str("## Means over the runs of each point\n\n");
        md.push_str(&means_table(&means, style));
        let _ = writeln!(
            md,
            "\n{} The same in `sweep_means.csv` and `sweep_means.parquet`.\n",
            analyzer::compare::INTERVAL_NOTE
        );
    }
    Ok(())
}

/// The summary's table of pairs, in Markdown.
pub fn pairs_table(pairs: &[PairSummary], style: Style) -> String {
    let mut s = format!(
        "| primary | contender | environments | median throughput ratio | share with ratio ≥ \
         {UNHARMED_RATIO} |\n|---|---|---|---|---|\n"
    );
    for p in pairs {
        let num = |v: Option<f64>, pct: bool| match v {
            Some(v) if pct => format!("{:.1} %", v * 100.0),
            Some(v) => format!("{v:.3}"),
            None => "—".into(),
        };
        let _ = writeln!(
            s,
            "| {} | {} | {} | {} | {} |",
            style(&p.primary).0,
            style(&p.contender).0,
            p.ratios.len(),
            num(p.median_ratio(), false),
            num(p.share_unharmed(), true)
        );
    }
    s
}

/// Writes the table, plots and summary of the sweep in `dir` from `rows`; returns the
/// summary's text. Plots that cannot be drawn are named in the summary, not fatal.
pub fn write(
    dir: &Path,
    plan: &SweepPlan,
    status: &Status,
    rows: &[Row],
    style: Style,
) -> anyhow::Result<String> {
    table::write(
        columns(rows),
        &dir.join("sweep.csv"),
        &dir.join("sweep.parquet"),
    )?;
    let mut md = format!("# Sweep {}\n\n{}.\n\n", plan.file.name, status.line());
    if !status.failed.is_empty() {
        let ids: Vec<String> = status.failed.iter().map(|i| format!("p{i:04}")).collect();
        let _ = writeln!(
            md,
            "Failed points (their errors are in points/<id>/point.json): {}.\n",
            ids.join(", ")
        );
    }
    let _ = writeln!(
        md,
        "{} rows in `sweep.csv` and `sweep.parquet`: one per environment × mix × run × flow.\n",
        rows.len()
    );
    means_section(dir, rows, style, &mut md)?;
    let pairs = pairs(rows);
    let mut problems = Vec::new();
    if !pairs.is_empty() {
        md.push_str("## Primary flow throughput ratio (competing ÷ alone)\n\n");
        md.push_str(&pairs_table(&pairs, style));
        let mut primaries: Vec<&str> = Vec::new();
        let series: Vec<CdfSeries> = pairs
            .iter()
            .map(|p| {
                if !primaries.contains(&p.primary.as_str()) {
                    primaries.push(&p.primary);
                }
                let contenders = &plan.file.mixes.contenders;
                CdfSeries {
                    label: format!("{} vs {}", style(&p.primary).0, style(&p.contender).0),
                    color: style(&p.primary).1,
                    dash: contenders
                        .iter()
                        .position(|c| *c == p.contender)
                        .unwrap_or(0),
                    values: p.ratios.iter().map(|r| r.1).collect(),
                }
            })
            .collect();
        let path = dir.join("sweep_ratio_cdf.png");
        let title = "Primary flow throughput ratio over the environments";
        match cdf_plot(
            &path,
            title,
            (
                "Throughput ratio (competing ÷ alone)",
                "CDF (fraction of environments)",
            ),
            Some(UNHARMED_RATIO),
            &series,
        ) {
            Ok(()) => md.push_str("\n![ratio CDF](sweep_ratio_cdf.png)\n"),
            Err(e) => problems.push(e.to_string()),
        }
    }
    page_loads(dir, rows, style, &mut md, &mut problems);
    schemes_alone(dir, rows, style, &mut md, &mut problems);
    heatmaps(dir, plan, rows, &mut md, &mut problems);
    for p in problems {
        let _ = writeln!(md, "\nPlot not drawn: {p}");
    }
    std::fs::write(dir.join("sweep_summary.md"), &md)?;
    Ok(md)
}

/// Per mix of the plan (not solo points), its heatmap over the file's two axes, linked from
/// the summary `md`; a plot that cannot be drawn goes to `problems`.
fn heatmaps(
    dir: &Path,
    plan: &SweepPlan,
    rows: &[Row],
    md: &mut String,
    problems: &mut Vec<String>,
) {
    let h = &plan.file.heatmap;
    let mut mixes: Vec<&str> = Vec::new();
    for p in plan.points.iter().filter(|p| !p.solo) {
        if !mixes.contains(&p.mix.as_str()) {
            mixes.push(&p.mix);
        }
    }
    let mut heatmaps = String::new();
    for mix in mixes {
        let (xs, ys, values) = grid(rows, mix, &h.x, &h.y, &h.value);
        if xs.is_empty() || ys.is_empty() {
            continue;
        }
        let file = format!("sweep_heatmap_{}.png", mix.replace(' ', "_"));
        let title = format!("{mix}: {} (median)", h.value);
        match heatmap_plot(&dir.join(&file), &title, (&h.x, &h.y), &xs, &ys, &values) {
            Ok(()) => {
                let _ = writeln!(heatmaps, "![{mix}]({file})");
            }
            Err(e) => problems.push(e.to_string()),
        }
    }
    if !heatmaps.is_empty() {
        let _ = writeln!(md, "\n## Heatmaps: {} over {} × {}\n", h.value, h.x, h.y);
        md.push_str(&heatmaps);
    }
}

/// Page loads (flows with a `page` workload, `docs/workloads.md`), per mix over every
/// environment and run: the median and 95th percentile in the summary, and the CDF in
/// `sweep_page_load_cdf.png` (seed 002's Fig. 11(b)), each mix coloured as its last flow's
/// scheme (the background flow of `cubic(page) ledbat`).
fn page_loads(dir: &Path, rows: &[Row], style: Style, md: &mut String, problems: &mut Vec<String>) {
    let mut loads: Vec<(String, Vec<f64>)> = Vec::new();
    for r in rows.iter().filter(|r| !r.page_load_ms.is_empty()) {
        group(&mut loads, r.mix.clone()).extend(&r.page_load_ms);
    }
    if loads.is_empty() {
        return;
    }
    let _ = writeln!(
        md,
        "\n## Page load times\n\n| mix | pages | median (s) | p95 (s) |\n|---|---|---|---|"
    );
    let mut series = Vec::new();
    for (i, (mix, v)) in loads.iter_mut().enumerate() {
        v.sort_by(f64::total_cmp);
        let p = |q| {
            analyzer::stats::percentile(v, q).map_or("—".into(), |x| format!("{:.2}", x / 1e3))
        };
        let _ = writeln!(md, "| {mix} | {} | {} | {} |", v.len(), p(0.5), p(0.95));
        // The plan checked every mix: it parses.
        let scheme = engine::mix::parse_short(mix)
            .ok()
            .and_then(|m| m.flows.last().map(|f| f.scheme.clone()))
            .unwrap_or_default();
        series.push(CdfSeries {
            label: mix.clone(),
            color: style(&scheme).1,
            dash: i % 4,
            values: v.iter().map(|x| x / 1e3).collect(),
        });
    }
    let file = "sweep_page_load_cdf.png";
    match cdf_plot(
        &dir.join(file),
        "Page load times",
        ("Page load time (s)", "CDF (fraction of pages)"),
        None,
        &series,
    ) {
        Ok(()) => {
            let _ = writeln!(md, "\n![page load CDF]({file})");
        }
        Err(e) => problems.push(e.to_string()),
    }
}

/// The schemes run alone, per environment where there are two or more: a table of each
/// scheme's mean throughput and p95 one-way delay and whether it is on the frontier, and
/// Pantheon's throughput–delay plot (`sweep_alone_<env>.png`).
fn schemes_alone(
    dir: &Path,
    rows: &[Row],
    style: Style,
    md: &mut String,
    problems: &mut Vec<String>,
) {
    let envs: Vec<_> = alone(rows)
        .into_iter()
        .filter(|(_, s)| s.len() >= 2)
        .collect();
    if envs.is_empty() {
        return;
    }
    md.push_str(
        "\n## Schemes alone: throughput vs p95 one-way delay\n\nPer environment, each scheme's \
         mean over its runs; on the frontier: no other scheme has at least its throughput at no \
         more delay.\n",
    );
    for (env, schemes) in envs {
        let _ = writeln!(
            md,
            "\n### {env}\n\n| scheme | runs | throughput (Mbit/s) | p95 one-way delay (ms) | \
             on the frontier |\n|---|---|---|---|---|"
        );
        let mut points = Vec::new();
        for a in &schemes {
            let (d, t) = a.mean();
            let (label, color, marker) = style(&a.scheme);
            let _ = writeln!(
                md,
                "| {label} | {} | {t:.2} | {d:.1} | {} |",
                a.runs.len(),
                if a.frontier { "yes" } else { "—" }
            );
            points.push(SchemePoints {
                label,
                color,
                marker,
                runs: a.runs.clone(),
            });
        }
        let file = format!("sweep_alone_{}.png", file_name(&env));
        match summary_plot(&dir.join(&file), &env, &points, true) {
            Ok(()) => {
                let _ = writeln!(md, "\n![{env}]({file})");
            }
            Err(e) => problems.push(e.to_string()),
        }
    }
}

/// `name` with every character but letters, digits, `-` and `.` replaced by `_`.
fn file_name(name: &str) -> String {
    name.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '.' {
                c
            } else {
                '_'
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pairs_table_gives_median_and_share() {
        let p = PairSummary {
            primary: "cubic".into(),
            contender: "ledbat".into(),
            ratios: vec![("a".into(), 0.95), ("b".into(), 0.5), ("c".into(), 0.92)],
        };
        let style = |s: &str| (s.to_uppercase(), "blue".to_owned(), "o".to_owned());
        let t = pairs_table(&[p], &style);
        assert!(
            t.ends_with("| CUBIC | LEDBAT | 3 | 0.920 | 66.7 % |\n"),
            "{t}"
        );
    }
}
