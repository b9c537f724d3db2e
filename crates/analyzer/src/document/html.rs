//! `pantheon_report.html`: SVG plots inline, PNG plots as data URIs, no external resource.

use std::fmt::Write as _;

use base64::Engine as _;

use super::Report;
use crate::compare::{MeanInterval, INTERVAL_NOTE};

/// Escapes text for HTML.
pub fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// The report as one self-contained HTML page.
pub fn html(r: &Report) -> String {
    let mut h = String::new();
    let w = &mut h;
    let _ = write!(
        w,
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
         <title>Pantheon Report</title><style>\
         body{{font-family:sans-serif;max-width:1250px;margin:2em auto;line-height:1.4}}\
         h1{{text-align:center}} pre{{background:#f6f6f6;padding:.6em;overflow-x:auto}}\
         table{{border-collapse:collapse}} td,th{{border:1px solid #999;padding:.25em .6em;\
         text-align:right}} td:first-child{{text-align:left}} img,svg{{max-width:100%;height:auto}}\
         section{{page-break-before:always}}</style></head><body>\n<h1>Pantheon Report</h1>\n"
    );
    let _ = writeln!(w, "<p>Generated at {} (UTC).</p>", escape(&r.generated_at));
    let _ = writeln!(w, "<p>{}</p>", escape(&r.path));
    for sentence in r.sentences() {
        let _ = writeln!(w, "<p>{}</p>", escape(&sentence));
    }
    let _ = writeln!(
        w,
        "<p>System info:</p><pre>{}</pre>",
        escape(&r.system_info.join("\n"))
    );
    let versions: Vec<String> = r
        .versions
        .iter()
        .map(|(what, v)| format!("{what}: {v}"))
        .collect();
    let _ = writeln!(
        w,
        "<p>Versions:</p><pre>{}</pre>",
        escape(&versions.join("\n"))
    );

    let _ = writeln!(w, "<section><h2>Summary</h2>");
    if r.summary_svgs.is_empty() {
        let _ = writeln!(w, "<p>Figure is missing.</p>");
    }
    for svg in &r.summary_svgs {
        // An SVG file's content, its XML declaration dropped, is valid inline HTML.
        let body = svg.find("<svg").map_or(svg.as_str(), |i| &svg[i..]);
        let _ = writeln!(w, "<figure>{body}</figure>");
    }
    let _ = writeln!(w, "</section>");

    means_table(w, r);

    let img = |png: &Option<Vec<u8>>, alt: &str| match png {
        Some(bytes) => format!(
            "<img alt=\"{alt}\" src=\"data:image/png;base64,{}\">",
            base64::engine::general_purpose::STANDARD.encode(bytes)
        ),
        None => "<p>Figure is missing.</p>".to_owned(),
    };
    for t in &r.sections {
        let imgs: Vec<String> = t
            .plots_png
            .iter()
            .map(|p| img(&Some(p.clone()), "CDF of the transfers"))
            .collect();
        let heading = format!("<h2>{}</h2><p>{}</p>", escape(&t.title), escape(&t.note));
        table_section(w, &heading, &t.header, &t.rows, &[], &imgs.concat());
    }
    for run in &r.runs {
        let label = escape(&run.label);
        let _ = writeln!(
            w,
            "<section><h2>Run {}: Statistics of {label}</h2><pre>{}</pre>\n\
             <h3>Run {}: Report of {label} — Data Link</h3>{}\n{}</section>",
            run.run_id,
            escape(&run.stats),
            run.run_id,
            img(&run.throughput_png, "throughput over time"),
            img(&run.delay_png, "one-way delay over time")
        );
        if let Some(c) = &run.competition {
            competition_section(w, run.run_id, &label, c, &img(&c.plot_png, PLOT_ALT));
        }
        if !run.files.is_empty() {
            let links: Vec<String> = run
                .files
                .iter()
                .map(|f| format!("<li><a href=\"{0}\">{0}</a></li>", escape(f)))
                .collect();
            let _ = writeln!(
                w,
                "<section><h3>Run {}: files to look inside — {label}</h3><ul>{}</ul></section>",
                run.run_id,
                links.concat()
            );
        }
    }
    let _ = writeln!(w, "</body></html>");
    h
}

/// Alternative text of the competition plot.
const PLOT_ALT: &str = "per-flow throughput and delay over time";

/// A mixed run's competition: its table, the lines on the run, and `plot` (the image tag);
/// `label` is the run's label, already escaped.
fn competition_section(
    w: &mut String,
    run_id: u32,
    label: &str,
    c: &crate::document::CompetitionSection,
    plot: &str,
) {
    let heading = format!("<h3>Run {run_id}: Competition — {label}</h3>");
    table_section(w, &heading, &c.header, &c.rows, &c.notes, plot);
}

/// A section of `heading` (HTML), a table of `header` and `rows`, the `notes` under it and
/// `plots` (image tags).
fn table_section(
    w: &mut String,
    heading: &str,
    header: &[String],
    rows: &[Vec<String>],
    notes: &[String],
    plots: &str,
) {
    let cells = |row: &[String], tag: &str| -> String {
        row.iter()
            .map(|c| format!("<{tag}>{}</{tag}>", escape(c)))
            .collect()
    };
    let _ = write!(
        w,
        "<section>{heading}<table><tr>{}</tr>",
        cells(header, "th")
    );
    for row in rows {
        let _ = write!(w, "<tr>{}</tr>", cells(row, "td"));
    }
    let _ = write!(w, "</table>");
    for n in notes {
        let _ = write!(w, "<p>{}</p>", escape(n));
    }
    let _ = writeln!(w, "{plots}</section>");
}

/// The table of per-flow means over valid runs, one column per flow and metric.
fn means_table(w: &mut String, r: &Report) {
    let k = r.table_flows();
    let _ = writeln!(w, "<section><h2>Means over valid runs</h2><table>");
    let flow_heads = |what: &str| {
        (1..=k)
            .map(|i| {
                if k == 1 {
                    format!("<th>{what}</th>")
                } else {
                    format!("<th>{what}<br>flow {i}</th>")
                }
            })
            .collect::<String>()
    };
    let _ = writeln!(
        w,
        "<tr><th>scheme</th><th># runs</th>{}{}{}</tr>",
        flow_heads("mean avg tput (Mbit/s)"),
        flow_heads("mean 95th-%ile delay (ms)"),
        flow_heads("mean loss rate (%)")
    );
    let cell = |v: Option<MeanInterval>, p: usize| v.map_or("N/A".to_owned(), |v| v.display(p));
    for row in &r.table {
        let col = |f: &dyn Fn(&super::FlowMeans) -> Option<MeanInterval>, p| {
            (0..k)
                .map(|i| format!("<td>{}</td>", cell(row.flows.get(i).and_then(f), p)))
                .collect::<String>()
        };
        let _ = writeln!(
            w,
            "<tr><td>{}</td><td>{}/{}</td>{}{}{}</tr>",
            escape(&row.label),
            row.runs.0,
            row.runs.1,
            col(&|f| f.tput_mbps, 2),
            col(&|f| f.delay_ms, 2),
            col(&|f| f.loss_pct, 2)
        );
    }
    let _ = writeln!(w, "</table><p>{}</p></section>", escape(INTERVAL_NOTE));
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::document::{FlowMeans, RunSection, TableRow};

    /// A small report for both renderers' tests.
    pub(crate) fn sample() -> Report {
        Report {
            generated_at: "2026-11-22 06:00:00".into(),
            path: "Tested in emulator: mm-delay 28 mm-link 10mbps.trace 10mbps.trace".into(),
            schemes: 2,
            run_times: 2,
            runtime_s: 30.0,
            flows: (1, 0.0),
            ntp: None,
            system_info: vec![
                "Linux 6.18".into(),
                "net.core.default_qdisc = fq_codel".into(),
            ],
            versions: vec![("harness".into(), "pantheon-rs 0.1.0".into())],
            summary_svgs: vec!["<?xml version=\"1.0\"?>\n<svg width=\"1\"></svg>".into()],
            table: vec![TableRow {
                label: "TCP <Cubic>".into(),
                runs: (2, 2),
                flows: vec![FlowMeans {
                    tput_mbps: Some(MeanInterval {
                        mean: 9.5,
                        half_width: None,
                        runs: 2,
                        bootstrap: None,
                    }),
                    delay_ms: Some(MeanInterval {
                        mean: 80.123,
                        half_width: Some(4.5),
                        runs: 3,
                        bootstrap: None,
                    }),
                    loss_pct: None,
                }],
            }],
            runs: vec![RunSection {
                label: "TCP Cubic".into(),
                run_id: 1,
                stats: "-- Total of 1 flow:\nLoss rate: 0.12%\n".into(),
                throughput_png: Some(vec![0x89, b'P', b'N', b'G']),
                delay_png: None,
                competition: None,
                files: vec!["cubic_datalink_run1_flow1.egress.pcapng".into()],
            }],
            summary_pngs: Vec::new(),
            sections: Vec::new(),
        }
    }

    #[test]
    fn runs_with_workloads_have_their_transfers_tables() {
        let mut r = sample();
        r.sections.push(crate::document::TableSection {
            title: "Transfers by size".into(),
            note: "Every run's done transfers together.".into(),
            header: vec!["scheme".into(), "size".into(), "transfers".into()],
            rows: vec![vec!["TCP Cubic".into(), "< 10 KB".into(), "38".into()]],
            plots_png: Vec::new(),
        });
        let h = html(&r);
        for want in [
            "<h2>Transfers by size</h2><p>Every run&#39;s done transfers together.</p>",
            "<tr><td>TCP Cubic</td><td>&lt; 10 KB</td><td>38</td></tr>",
        ] {
            assert!(h.contains(want), "missing {want:?} in\n{h}");
        }
        // After the means table, before the runs.
        let at = |s: &str| h.find(s).unwrap();
        assert!(at("Means over valid runs") < at("Transfers by size"));
        assert!(at("Transfers by size") < at("Run 1: Statistics"));
        r.runs[0].throughput_png = None;
        let pdf = crate::document::pdf(&r).unwrap();
        assert!(pdf.starts_with(b"%PDF"));
    }

    #[test]
    fn a_run_s_files_are_linked_beside_the_report() {
        let h = html(&sample());
        let want = "<li><a href=\"cubic_datalink_run1_flow1.egress.pcapng\">\
                    cubic_datalink_run1_flow1.egress.pcapng</a></li>";
        assert!(h.contains(want), "missing {want:?} in\n{h}");
        let mut r = sample();
        r.runs[0].files.clear();
        assert!(!html(&r).contains("files to look inside"));
    }

    #[test]
    fn a_mixed_run_has_its_competition_table() {
        let mut r = sample();
        r.runs[0].competition = Some(crate::document::CompetitionSection {
            header: vec!["flow".into(), "scheme".into(), "tput (Mbit/s)".into()],
            rows: vec![
                vec!["1".into(), "TCP Cubic".into(), "12.50".into()],
                vec!["2".into(), "<LEDBAT>".into(), "7.25".into()],
            ],
            notes: vec!["Jain's index while all flows were active: 0.93".into()],
            plot_png: None,
        });
        let h = html(&r);
        for want in [
            "<h3>Run 1: Competition — TCP Cubic</h3>",
            "<tr><th>flow</th><th>scheme</th><th>tput (Mbit/s)</th></tr>",
            "<tr><td>2</td><td>&lt;LEDBAT&gt;</td><td>7.25</td></tr>",
            "<p>Jain&#39;s index while all flows were active: 0.93</p>",
        ] {
            assert!(h.contains(want), "missing {want:?} in\n{h}");
        }
        // (The sample's throughput plot is no real PNG: the PDF would refuse it.)
        r.runs[0].throughput_png = None;
        let pdf = crate::document::pdf(&r).unwrap();
        assert!(pdf.starts_with(b"%PDF"));
    }

    #[test]
    fn report_has_pantheons_sections_and_is_self_contained() {
        let h = html(&sample());
        for want in [
            "<h1>Pantheon Report</h1>",
            "Generated at 2026-11-22 06:00:00 (UTC).",
            "Repeated the test of 2 congestion control schemes twice.",
            "Each test lasted for 30 seconds running 1 flow.",
            "net.core.default_qdisc = fq_codel",
            "harness: pantheon-rs 0.1.0",
            "<figure><svg width=\"1\"></svg></figure>",
            "<td>TCP &lt;Cubic&gt;</td><td>2/2</td><td>9.50</td><td>80.12 ± 4.50</td><td>N/A</td>",
            "the 95 % confidence interval of the mean",
            "Run 1: Statistics of TCP Cubic",
            "src=\"data:image/png;base64,iVBORw==\"",
            "Figure is missing.",
        ] {
            assert!(h.contains(want), "missing {want:?} in\n{h}");
        }
        assert!(!h.contains("Competition"));
        assert!(!h.contains("NTP offsets"));
        assert!(!h.contains("<?xml"));
        // Nothing loaded from outside the file; links only to files beside it (a run's files
        // to look inside).
        assert!(!h.contains("src=\"http"));
        for link in h.split("href=\"").skip(1) {
            let target = &link[..link.find('"').unwrap()];
            assert!(!target.contains(['/', ':']), "{target}");
        }
    }
}
