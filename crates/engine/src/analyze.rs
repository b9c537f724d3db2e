//! `pantheon analyze DIR`: every run's logs → `<scheme>_stats_run<N>.log`,
//! `<scheme>_datalink_{throughput,delay}_run<N>.png`, `pantheon_perf.json`,
//! `pantheon_summary.md` (also printed), `pantheon_summary.svg`,
//! `pantheon_summary_mean.svg` (and PNGs of both), `pantheon_report.html` and
//! `pantheon_report.pdf`.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::Path;

use analyzer::report::{self, SchemePoints};
use analyzer::RunStats;
use anyhow::{bail, Context};
use serde_json::{json, Value};

use crate::plan::write_json;
use crate::schemes::Registry;

/// A run as the analysis sees it.
struct RunResult {
    run_id: u32,
    status: String,
    reason: Option<String>,
    stats: Option<RunStats>,
    flags: Vec<String>,
}

/// Analyses the results directory `dir`; returns the summary (Markdown) also written to
/// `pantheon_summary.md`.
pub fn analyze_dir(dir: &Path, registry: &Registry) -> anyhow::Result<String> {
    let meta_path = dir.join("pantheon_metadata.json");
    if !meta_path.exists() {
        bail!(
            "{} has no pantheon_metadata.json: not a results directory (give the --data-dir \
             of a `pantheon run`)",
            dir.display()
        );
    }
    let meta: Value = serde_json::from_str(&std::fs::read_to_string(&meta_path)?)
        .with_context(|| format!("parse {}", meta_path.display()))?;
    let runs_json: Vec<Value> = std::fs::read_to_string(dir.join("pantheon_runs.json"))
        .ok()
        .and_then(|t| serde_json::from_str(&t).ok())
        .unwrap_or_default();
    let schemes: Vec<String> = serde_json::from_value(meta["cc_schemes"].clone())
        .context("pantheon_metadata.json: cc_schemes")?;
    let run_times = meta["run_times"].as_u64().unwrap_or(1) as u32;
    let start_id = meta["start_run_id"].as_u64().unwrap_or(1) as u32;
    let runtime_s = meta["runtime"].as_f64().unwrap_or(30.0);
    let flows = meta["flows"].as_u64().unwrap_or(1);

    let mut results: BTreeMap<String, Vec<RunResult>> = BTreeMap::new();
    for scheme in &schemes {
        for run_id in start_id..start_id + run_times {
            let recorded = runs_json
                .iter()
                .find(|r| r["scheme"] == json!(scheme) && r["run_id"] == json!(run_id));
            let status = recorded
                .and_then(|r| r["status"].as_str())
                .unwrap_or("ok")
                .to_owned();
            let reason = recorded
                .and_then(|r| r["reason"].as_str())
                .map(str::to_owned);
            // The runner's remarks (qdisc used, drain, tunnel warnings) come first.
            let notes = recorded
                .and_then(|r| r["notes"].as_array())
                .map(|a| {
                    a.iter()
                        .filter_map(|n| n.as_str().map(str::to_owned))
                        .collect()
                })
                .unwrap_or_default();
            let mut rr = RunResult {
                run_id,
                status: status.clone(),
                reason,
                stats: None,
                flags: notes,
            };
            if status == "ok" {
                let started = std::time::Instant::now();
                match analyzer::ingest::read_run(dir, scheme, run_id) {
                    Ok(frames) => {
                        rr.flags.extend(frames.warnings.iter().cloned());
                        match &frames.clock_offsets {
                            analyzer::ingest::ClockOffsets::Missing(what) => {
                                rr.flags.push(format!(
                                    "clock offsets missing ({}): one-way delays are uncorrected",
                                    what.join(", ")
                                ))
                            }
                            analyzer::ingest::ClockOffsets::None
                                if meta["mode"] == "remote" && !meta["ntp_addr"].is_string() =>
                            {
                                rr.flags.push(
                                    "remote run without --ntp-addr: one-way delays mix two \
                                     unsynchronised clocks (the queueing delay does not)"
                                        .into(),
                                )
                            }
                            analyzer::ingest::ClockOffsets::None
                                if meta["ntp_addr"].is_string() =>
                            {
                                rr.flags.push(
                                    "NTP was requested but no clock offset was recorded: one-way \
                                     delays are uncorrected"
                                        .into(),
                                )
                            }
                            _ => {}
                        }
                        let stats = frames
                            .stats()
                            .with_context(|| format!("metrics of {scheme} run {run_id}"))?;
                        let secs = started.elapsed().as_secs_f64();
                        eprintln!(
                            "   {scheme} run {run_id}: {} packets read and measured in {secs:.2} s \
                             ({:.2} M packets/s)",
                            stats.total.arrived,
                            stats.total.arrived as f64 / secs.max(1e-9) / 1e6
                        );
                        let dur_s = stats.total.duration_ms / 1000.0;
                        if dur_s < 0.8 * runtime_s {
                            rr.flags.push(format!(
                                "short run: traffic lasted {dur_s:.1} s of {runtime_s} s (Pantheon ignores runs under 80 %)"
                            ));
                        }
                        if stats.total.negative_delays > 0 {
                            rr.flags.push(format!(
                                "{} packets with negative one-way delay (clock problem)",
                                stats.total.negative_delays
                            ));
                        }
                        if let Err(e) = run_plots(dir, scheme, run_id, &frames, &stats) {
                            rr.flags.push(format!("plots not drawn: {e:#}"));
                        }
                        rr.stats = Some(stats);
                    }
                    Err(e) => {
                        rr.status = "failed".into();
                        rr.reason = Some(e.to_string());
                    }
                }
            }
            write_stats_log(dir, scheme, &rr)?;
            results.entry(scheme.clone()).or_default().push(rr);
        }
    }

    // pantheon_perf.json: {scheme: {run_id: {"all": {tput, delay, loss}, "1": {...}}}}
    let mut perf = serde_json::Map::new();
    for (scheme, runs) in &results {
        let mut by_run = serde_json::Map::new();
        for r in runs {
            if let Some(s) = &r.stats {
                let mut flows_json = serde_json::Map::new();
                flows_json.insert("all".into(), flow_json(&s.total));
                for (id, f) in &s.flows {
                    flows_json.insert(id.to_string(), flow_json(f));
                }
                by_run.insert(r.run_id.to_string(), Value::Object(flows_json));
            }
        }
        perf.insert(scheme.clone(), Value::Object(by_run));
    }
    write_json(&dir.join("pantheon_perf.json"), &Value::Object(perf))?;

    // Summary table and plots (valid runs only, as Pantheon).
    let mut md = String::new();
    let _ = writeln!(md, "# Pantheon-rs summary: {}\n", dir.display());
    if let Some(cmd) = meta["emulator_command"].as_str() {
        let _ = writeln!(md, "Emulated path: `{cmd}`  ");
    }
    let _ = writeln!(
        md,
        "{} run(s) of {runtime_s} s per scheme, {flows} flow(s).\n",
        run_times
    );
    let _ = writeln!(
        md,
        "| scheme | valid runs | mean avg tput (Mbit/s) | mean 95th-%ile delay (ms) | mean loss rate (%) |"
    );
    let _ = writeln!(md, "|---|---|---|---|---|");
    let mut points = Vec::new();
    for (scheme, runs) in &results {
        let valid: Vec<&RunStats> = runs
            .iter()
            .filter(|r| r.flags.iter().all(|f| !f.starts_with("short run")))
            .filter_map(|r| r.stats.as_ref())
            .collect();
        let mean = |f: &dyn Fn(&RunStats) -> Option<f64>| -> Option<f64> {
            let v: Vec<f64> = valid.iter().filter_map(|s| f(s)).collect();
            analyzer::compare::mean_if_any(&v)
        };
        let fmt = |v: Option<f64>, p: usize| v.map_or("N/A".to_owned(), |x| format!("{x:.p$}"));
        let label = registry
            .get(scheme)
            .map(|s| s.label.clone())
            .unwrap_or(scheme.clone());
        let _ = writeln!(
            md,
            "| {label} | {}/{} | {} | {} | {} |",
            valid.len(),
            runs.len(),
            fmt(mean(&|s| Some(s.total.tput_mbps)), 2),
            fmt(mean(&|s| s.total.p95_delay_ms), 2),
            fmt(mean(&|s| Some(s.total.loss * 100.0)), 3),
        );
        // Schemes we have no descriptor for (e.g. from Pantheon's archive) are plotted too,
        // under their own name in grey.
        let (label, color, marker) = match registry.get(scheme) {
            Ok(d) => (d.label.clone(), d.color.clone(), d.marker.clone()),
            Err(_) => (scheme.clone(), "grey".to_owned(), "o".to_owned()),
        };
        points.push(SchemePoints {
            label,
            color,
            marker,
            runs: valid
                .iter()
                .filter_map(|s| s.total.p95_delay_ms.map(|d| (d, s.total.tput_mbps)))
                .collect(),
        });
    }
    let _ = writeln!(md, "\n## Runs\n");
    let _ = writeln!(
        md,
        "| scheme | run | status | tput (Mbit/s) | p95 delay (ms) | p95 queueing delay (ms) | loss (%) | notes |"
    );
    let _ = writeln!(md, "|---|---|---|---|---|---|---|---|");
    for (scheme, runs) in &results {
        for r in runs {
            let ms = |v: Option<f64>| v.map_or("N/A".into(), |d| format!("{d:.2}"));
            let (t, d, q, l) = match &r.stats {
                Some(s) => (
                    format!("{:.2}", s.total.tput_mbps),
                    ms(s.total.p95_delay_ms),
                    ms(s.total.p95_queueing_delay_ms),
                    format!("{:.3}", s.total.loss * 100.0),
                ),
                None => ("—".into(), "—".into(), "—".into(), "—".into()),
            };
            let mut notes = r.flags.join("; ");
            if let Some(reason) = &r.reason {
                notes = format!(
                    "{reason}{}{notes}",
                    if notes.is_empty() { "" } else { "; " }
                );
            }
            let status = if r.status == "ok" {
                "ok".to_owned()
            } else {
                r.status.to_uppercase()
            };
            let _ = writeln!(
                md,
                "| {scheme} | {} | {status} | {t} | {d} | {q} | {l} | {} |",
                r.run_id,
                notes.replace('|', "\\|")
            );
        }
    }
    std::fs::write(dir.join("pantheon_summary.md"), &md)?;

    let setting = if meta["mode"] == "remote" {
        // Pantheon's remote titles: "<sender side> to <receiver side>".
        let desc = |side: &str| {
            meta[format!("{side}_desc")]
                .as_str()
                .map_or(format!("{side} node"), str::to_owned)
        };
        let sender = meta["sender_side"].as_str().unwrap_or("local");
        let receiver = if sender == "local" { "remote" } else { "local" };
        format!("{} to {}", desc(sender), desc(receiver))
    } else {
        "local test in emulator".to_owned()
    };
    let title = format!(
        "{setting}, {run_times} run{} of {runtime_s}s each per scheme{}",
        if run_times == 1 { "" } else { "s" },
        if flows > 1 {
            format!(
                "\n{flows} flows with {}s interval between flows",
                meta["interval"]
            )
        } else {
            String::new()
        }
    );
    // SVG as Pantheon; PNG for the PDF report.
    for ext in ["svg", "png"] {
        report::summary_plot(
            &dir.join(format!("pantheon_summary.{ext}")),
            &title,
            &points,
            false,
        )?;
        report::summary_plot(
            &dir.join(format!("pantheon_summary_mean.{ext}")),
            &format!("{title} (mean of all runs by scheme)"),
            &points,
            true,
        )?;
    }
    write_report(dir, &meta, &results, registry)?;
    Ok(md)
}

/// `pantheon_report.html` and `pantheon_report.pdf`: Pantheon's report from the analysed runs.
fn write_report(
    dir: &Path,
    meta: &Value,
    results: &BTreeMap<String, Vec<RunResult>>,
    registry: &Registry,
) -> anyhow::Result<()> {
    use analyzer::document::{FlowMeans, Report, RunSection, TableRow};
    let label = |scheme: &str| {
        registry
            .get(scheme)
            .map_or(scheme.to_owned(), |s| s.label.clone())
    };
    let words = |k: &str| meta[k].as_str().unwrap_or("").trim().to_owned();
    let path = match meta["emulator_command"].as_str() {
        Some(cmd) => format!("Tested in emulator: {cmd}"),
        None if meta["mode"] == "local" => {
            let link = format!(
                "mm-link {} {}",
                words("uplink_trace"),
                words("downlink_trace")
            );
            let parts = [
                words("prepend_mm_cmds"),
                link,
                words("extra_mm_link_args"),
                words("append_mm_cmds"),
            ];
            let parts: Vec<&str> = parts
                .iter()
                .map(String::as_str)
                .filter(|p| !p.is_empty())
                .collect();
            format!("Tested in mahimahi: {}", parts.join(" "))
        }
        None => {
            // Pantheon: "Data path: <desc> on <if> (remote) → <desc> on <if> (local)."
            let side = |s: &str| {
                let desc = meta[format!("{s}_desc")]
                    .as_str()
                    .map_or_else(|| format!("{s} node"), str::to_owned);
                let iface = meta[format!("{s}_if")]
                    .as_str()
                    .map_or(String::new(), |i| format!(" on {i}"));
                format!("{desc}{iface} ({s})")
            };
            let sender = meta["sender_side"].as_str().unwrap_or("local");
            let receiver = if sender == "local" { "remote" } else { "local" };
            format!("Data path: {} → {}.", side(sender), side(receiver))
        }
    };
    let mut versions = vec![(
        "harness".to_owned(),
        meta["harness"].as_str().map_or_else(
            || format!("pantheon-rs {}", env!("CARGO_PKG_VERSION")),
            str::to_owned,
        ),
    )];
    for scheme in results.keys() {
        if let Ok(s) = registry.get(scheme) {
            versions.push((s.label.clone(), s.version()));
        }
    }
    let mut table = Vec::new();
    let mut runs = Vec::new();
    for (scheme, rs) in results {
        let valid: Vec<&RunStats> = rs
            .iter()
            .filter(|r| r.flags.iter().all(|f| !f.starts_with("short run")))
            .filter_map(|r| r.stats.as_ref())
            .collect();
        let k = valid.iter().map(|s| s.flows.len()).max().unwrap_or(1) as u32;
        let mean = |f: &dyn Fn(&analyzer::FlowStats) -> Option<f64>, flow: u32| {
            let v: Vec<f64> = valid
                .iter()
                .filter_map(|s| s.flows.get(&flow))
                .filter_map(f)
                .collect();
            analyzer::compare::mean_if_any(&v)
        };
        table.push(TableRow {
            label: label(scheme),
            runs: (valid.len(), rs.len()),
            flows: (1..=k)
                .map(|i| FlowMeans {
                    tput_mbps: mean(&|f| Some(f.tput_mbps), i),
                    delay_ms: mean(&|f| f.p95_delay_ms, i),
                    loss_pct: mean(&|f| Some(f.loss * 100.0), i),
                })
                .collect(),
        });
        for r in rs {
            let file = |kind: &str| {
                std::fs::read(dir.join(format!("{scheme}_datalink_{kind}_run{}.png", r.run_id)))
                    .ok()
            };
            runs.push(RunSection {
                label: label(scheme),
                run_id: r.run_id,
                stats: std::fs::read_to_string(
                    dir.join(format!("{scheme}_stats_run{}.log", r.run_id)),
                )
                .unwrap_or_default(),
                throughput_png: file("throughput"),
                delay_png: file("delay"),
            });
        }
    }
    let report = Report {
        generated_at: chrono::Utc::now().format("%Y-%m-%d %H:%M:%S").to_string(),
        path,
        schemes: results.len(),
        run_times: meta["run_times"].as_u64().unwrap_or(1) as u32,
        runtime_s: meta["runtime"].as_f64().unwrap_or(0.0),
        flows: (
            meta["flows"].as_u64().unwrap_or(1),
            meta["interval"].as_f64().unwrap_or(0.0),
        ),
        ntp: meta["ntp_addr"].as_str().map(str::to_owned),
        system_info: system_info(),
        versions,
        summary_svgs: ["pantheon_summary_mean.svg", "pantheon_summary.svg"]
            .iter()
            .filter_map(|f| std::fs::read_to_string(dir.join(f)).ok())
            .collect(),
        summary_pngs: ["pantheon_summary_mean.png", "pantheon_summary.png"]
            .iter()
            .filter_map(|f| std::fs::read(dir.join(f)).ok())
            .collect(),
        table,
        runs,
    };
    let out = dir.join("pantheon_report.html");
    std::fs::write(&out, analyzer::document::html(&report))
        .with_context(|| format!("write {}", out.display()))?;
    let out = dir.join("pantheon_report.pdf");
    let pdf = analyzer::document::pdf(&report).map_err(|e| anyhow::anyhow!("PDF report: {e}"))?;
    std::fs::write(&out, pdf).with_context(|| format!("write {}", out.display()))
}

/// The sysctls Pantheon's report lists: the default qdisc and the socket-buffer sizes.
pub const REPORTED_SYSCTLS: &[&str] = &[
    "net.core.default_qdisc",
    "net.core.rmem_default",
    "net.core.rmem_max",
    "net.core.wmem_default",
    "net.core.wmem_max",
    "net.ipv4.tcp_rmem",
    "net.ipv4.tcp_wmem",
];

/// The value of sysctl `name` (dotted, e.g. `net.ipv4.tcp_rmem`) on this machine, runs of
/// whitespace made single spaces; `None` if it cannot be read.
pub fn read_sysctl(name: &str) -> Option<String> {
    let text = std::fs::read_to_string(format!("/proc/sys/{}", name.replace('.', "/"))).ok()?;
    Some(text.split_whitespace().collect::<Vec<_>>().join(" "))
}

/// Pantheon's system info of the machine writing the report: kernel, then the
/// [`REPORTED_SYSCTLS`] (`name = value`).
pub fn system_info() -> Vec<String> {
    let mut lines = vec![format!(
        "{} {}",
        read_sysctl("kernel.ostype").unwrap_or_else(|| "Linux".into()),
        read_sysctl("kernel.osrelease").unwrap_or_default()
    )];
    for name in REPORTED_SYSCTLS {
        if let Some(v) = read_sysctl(name) {
            lines.push(format!("{name} = {v}"));
        }
    }
    lines
}

/// Pantheon's per-run plots: `<scheme>_datalink_throughput_run<N>.png` (500 ms bins) and
/// `<scheme>_datalink_delay_run<N>.png`.
fn run_plots(
    dir: &Path,
    scheme: &str,
    run_id: u32,
    frames: &analyzer::ingest::RunFrames,
    stats: &RunStats,
) -> anyhow::Result<()> {
    let ts = analyzer::timeseries::time_series(
        &frames.arrivals,
        &frames.departures,
        frames.opportunities.as_ref(),
        stats,
        500.0,
    )?;
    report::throughput_plot(
        &dir.join(format!("{scheme}_datalink_throughput_run{run_id}.png")),
        &ts,
    )?;
    report::delay_plot(
        &dir.join(format!("{scheme}_datalink_delay_run{run_id}.png")),
        &ts,
    )?;
    Ok(())
}

fn flow_json(f: &analyzer::FlowStats) -> Value {
    // Pantheon's three keys, plus our extras (ms), named as such: the minimum one-way delay and
    // the 95th-percentile queueing delay (one-way delay above the flow's minimum).
    json!({"tput": f.tput_mbps, "delay": f.p95_delay_ms, "loss": f.loss,
           "min_delay": f.min_delay_ms, "queueing_delay": f.p95_queueing_delay_ms})
}

/// Rewrites `<scheme>_stats_run<N>.log` as Pantheon's plot.py does: keep the runner's
/// `Start at:`/`End at:`/`clock offset:` lines, then append the datalink statistics.
fn write_stats_log(dir: &Path, scheme: &str, r: &RunResult) -> anyhow::Result<()> {
    let path = dir.join(format!("{scheme}_stats_run{}.log", r.run_id));
    let old = std::fs::read_to_string(&path).unwrap_or_default();
    let mut s: String = old
        .lines()
        .filter(|l| l.contains("Start at:") || l.contains("End at:") || l.contains("clock offset:"))
        .map(|l| format!("{l}\n"))
        .collect();
    let _ = writeln!(
        s,
        "\n# Below is generated by pantheon-rs analyze at {}",
        crate::runner::utc_now()
    );
    match &r.stats {
        Some(stats) => {
            let _ = writeln!(s, "# Datalink statistics");
            s.push_str(&report::stats_text(stats));
        }
        None => {
            let _ = writeln!(
                s,
                "# Run {}: {}",
                r.status.to_uppercase(),
                r.reason.as_deref().unwrap_or("no reason recorded")
            );
        }
    }
    for f in &r.flags {
        let _ = writeln!(s, "# Warning: {f}");
    }
    std::fs::write(&path, s).with_context(|| format!("write {}", path.display()))
}
