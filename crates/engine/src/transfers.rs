//! The analysis of runs with workloads beyond full throttle (issue 29, `docs/workloads.md`):
//! each flow's transfer records (`workload::record`) joined into completion times, slowdowns
//! and page load times (`workload::metrics`), checked against what the schedule drew and what
//! the tunnel saw, for `pantheon_perf.json`, `pantheon_summary.md` and the report.
//!
//! - **Offered load**, measured: the bytes of the transfers the sender started ÷ (the run's
//!   length × the bottleneck's rate). **Drawn**: the same of the arrivals the flow's seed draws
//!   ([`crate::runner::flow_seed`], `workload::schedule`) before the run's end — what the
//!   sender was meant to start. The two differ only by arrivals the run's end cut off.
//! - **Tunnel FCT** of a `bytes=N` flow: from its first packet into the tunnel to its last
//!   data packet (≥ 100 bytes) out of it, as the tunnel logs have them: the program's FCT seen
//!   from outside (the program stamps before it connects and when the last byte is read).

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::Path;

use analyzer::perf::{PageCounts, SizeBucket, TransferCounts, WorkPerf};
use analyzer::report::{cdf_plot, scatter_plot, CdfSeries, PointSeries};
use analyzer::results::Metadata;
use analyzer::RunStats;
use workload::metrics::{by_size, FlowTransfers, IdlePath, Percentiles};
use workload::record::{read_receiver, read_sender, Received, Rows, Started};
use workload::schedule::arrivals_before;
use workload::Workload;

use crate::runner::flow_seed;
use crate::schemes::{flow_stem, side_file, Side};

/// Smallest datalink packet counted as data in the tunnel's view of a transfer, bytes.
const DATA_PACKET_BYTES: u64 = 100;

/// One flow's workload, as its records and logs have it.
#[derive(Debug, Clone)]
pub struct FlowWork {
    /// The workload spec, as given.
    pub spec: String,
    /// Both sides' records joined.
    pub transfers: FlowTransfers,
    /// Measured offered load, fraction of the bottleneck (when its rate is known and the
    /// workload is not a single transfer).
    pub offered_load: Option<f64>,
    /// What the schedule drew before the run's end: (arrivals, offered load).
    pub drawn: Option<(usize, Option<f64>)>,
    /// The tunnel's FCT of a single-transfer flow, ms.
    pub tunnel_fct_ms: Option<f64>,
}

/// The workload flows of one run, and what to flag about them.
#[derive(Debug, Clone, Default)]
pub struct RunWork {
    /// By flow id.
    pub flows: BTreeMap<u32, FlowWork>,
    /// Records cut short or missing, disagreements between the sides or with the tunnel.
    pub flags: Vec<String>,
}

/// Reads and joins the transfer records of every flow of run `run_id` of `name` that has a
/// workload; `None` if none has. `stats` give each flow's minimum one-way delay (the idle
/// path of slowdowns); `frames`, when given, the tunnel's view of single transfers.
pub fn run_work(
    dir: &Path,
    meta: &Metadata,
    name: &str,
    run_id: u32,
    stats: &RunStats,
    frames: Option<&analyzer::ingest::RunFrames>,
) -> Option<RunWork> {
    let n_flows = match &meta.mix {
        Some(m) if m.name == name => m.flows.len(),
        _ => usize::from(meta.flows),
    };
    let mut work = RunWork::default();
    for i in 1..=n_flows {
        let Some(spec) = meta.flow_workload(name, i) else {
            continue;
        };
        let id = u32::try_from(i).unwrap_or(u32::MAX);
        let flow_no = u16::try_from(i).unwrap_or(u16::MAX);
        let stem = flow_stem(dir, name, run_id, flow_no);
        let (sent, received) = read_records(&stem, i, &mut work.flags);
        let flow_stats = stats.flows.get(&id);
        let path = meta
            .uplink_mbps
            .zip(flow_stats.and_then(|f| f.min_delay_ms))
            .map(|(rate_mbps, owd_ms)| IdlePath {
                rtt_ms: 2.0 * owd_ms,
                owd_ms,
                rate_mbps,
            });
        let transfers = FlowTransfers::join(&sent.rows, &received.rows, path.as_ref());
        work.flags
            .extend(transfers.warnings.iter().map(|w| format!("flow {i}: {w}")));
        let workload = Workload::parse(spec).ok();
        // The flow's share of the run: from its start to its stop or the run's end (its
        // sender starts nothing after it: `{duration}`).
        let runtime = meta.runtime_of(name, run_id);
        let (start_s, end_s) = match &meta.mix {
            Some(m) if m.name == name => {
                let f = &m.flows[i - 1];
                (f.start, f.stop.unwrap_or(runtime))
            }
            _ => (meta.interval * (i - 1) as f64, runtime),
        };
        let window_s = (end_s - start_s).max(0.0);
        let load = |bytes: u64| {
            meta.uplink_mbps
                .filter(|_| window_s > 0.0)
                .map(|r| bytes as f64 * 8.0 / (window_s * r * 1e6))
        };
        let single = workload.as_ref().is_some_and(Workload::ends_by_itself);
        let offered_load = (!single)
            .then(|| load(transfers.transfers.iter().map(|t| t.started.size).sum()))
            .flatten();
        let drawn = workload
            .as_ref()
            .filter(|_| !single)
            .and_then(|w| w.resolve(meta.uplink_mbps).ok())
            .zip(meta.seed)
            .map(|(w, seed)| {
                let (objects, bytes) = drawn(&w, flow_seed(seed, run_id, flow_no), window_s);
                (objects, load(bytes))
            });
        // Only a transfer that finished has a completion time, by either clock.
        let finished = !transfers.fct_ms().is_empty();
        let tunnel_fct_ms = frames
            .filter(|_| single && finished)
            .and_then(|f| f.flow_span(id, DATA_PACKET_BYTES).ok().flatten())
            .map(|(first, last)| last - first);
        if let (Some(t), Some(fct)) = (tunnel_fct_ms, transfers.fct_ms().first()) {
            if (t - fct).abs() > 10.0 + 0.02 * fct {
                work.flags.push(format!(
                    "flow {i}: the receiver's FCT ({fct:.1} ms) and the tunnel's ({t:.1} ms) \
                     disagree"
                ));
            }
        }
        work.flows.insert(
            id,
            FlowWork {
                spec: spec.to_owned(),
                transfers,
                offered_load,
                drawn,
                tunnel_fct_ms,
            },
        );
    }
    (!work.flows.is_empty()).then_some(work)
}

/// One flow's transfer records, both sides (`<stem>.{sender,receiver}.transfers.csv`); a side
/// whose file is missing, or was cut short, reads as what it had, with a flag in `flags`
/// naming flow `i`.
fn read_records(stem: &Path, i: usize, flags: &mut Vec<String>) -> (Rows<Started>, Rows<Received>) {
    let mut text = |side: Side| {
        let p = side_file(stem, side, "transfers.csv");
        std::fs::read_to_string(&p).unwrap_or_else(|e| {
            flags.push(format!(
                "flow {i}: no {} transfer records ({}: {e})",
                side.name(),
                p.display()
            ));
            String::new()
        })
    };
    let (sent, received) = (
        read_sender(&text(Side::Sender)),
        read_receiver(&text(Side::Receiver)),
    );
    for (side, stopped) in [("sender", &sent.stopped), ("receiver", &received.stopped)] {
        if let Some(s) = stopped {
            flags.push(format!("flow {i}: {side} transfer records: {s}"));
        }
    }
    (sent, received)
}

/// What the schedule of `w` (seeded `seed`) draws in its first `window_s` seconds: (objects —
/// transfers, or a page's objects —, bytes).
fn drawn(w: &Workload, seed: u64, window_s: f64) -> (usize, u64) {
    let a = arrivals_before(w, seed, window_s);
    let objects = a
        .iter()
        .map(|a| match &a.what {
            workload::Start::Transfer { .. } => 1,
            workload::Start::Page { objects, .. } => objects.len(),
        })
        .sum();
    (objects, a.iter().map(|a| a.bytes()).sum())
}

impl FlowWork {
    /// The flow's workload figures in `pantheon_perf.json` ([`WorkPerf`]): the spec, how its
    /// transfers ended, each completed transfer's FCT (in id order) and slowdown (when the
    /// bottleneck's rate is known), FCT by size, and as they apply page loads, the offered and
    /// drawn load and the tunnel's FCT.
    pub fn perf(&self) -> WorkPerf {
        let t = &self.transfers;
        let count = |n: usize| n as u64;
        let page_load_ms = t.page_load_ms();
        WorkPerf {
            workload: self.spec.clone(),
            transfers: TransferCounts {
                started: count(t.transfers.len()),
                completed: count(t.completed()),
                aborted: count(t.aborted()),
                unfinished: count(t.unfinished()),
            },
            fct_ms: t.fct_ms(),
            slowdown: t.transfers.iter().filter_map(|x| x.slowdown).collect(),
            fct_by_size: by_size(&t.transfers)
                .iter()
                .map(|b| SizeBucket {
                    size: b.label.to_owned(),
                    count: count(b.count),
                    fct_ms: b.fct_ms,
                    slowdown: b.slowdown,
                })
                .collect(),
            pages: (!t.pages.is_empty()).then(|| PageCounts {
                started: count(t.pages.len()),
                completed: count(page_load_ms.len()),
            }),
            page_load_ms: (!t.pages.is_empty()).then_some(page_load_ms),
            offered_load: self.offered_load,
            drawn_transfers: self.drawn.map(|(n, _)| count(n)),
            drawn_load: self.drawn.and_then(|(_, l)| l),
            tunnel_fct_ms: self.tunnel_fct_ms,
        }
    }
}

/// The CDF of every completed transfer's FCT in a results directory with workloads, one line
/// per flow label over every run.
pub const FCT_CDF: &str = "pantheon_fct_cdf.png";
/// The CDF of page load times, when there are pages, one line per flow label over every run.
pub const PAGE_LOAD_CDF: &str = "pantheon_page_load_cdf.png";
/// Every done transfer's slowdown against its size, a colour per flow label.
pub const SLOWDOWN_VS_SIZE: &str = "pantheon_slowdown_vs_size.png";

/// One table of the transfers' report: a title, a line under it, headings and rows.
#[derive(Debug, Clone, PartialEq)]
pub struct Table {
    /// Its heading.
    pub title: String,
    /// What it shows, in a sentence.
    pub note: String,
    /// Column headings.
    pub header: Vec<String>,
    /// Rows, as many cells as headings.
    pub rows: Vec<Vec<String>>,
}

impl Table {
    /// As Markdown: `## title`, the note, the table.
    pub fn markdown(&self) -> String {
        let mut md = format!(
            "\n## {}\n\n{}\n\n| {} |\n|{}\n",
            self.title,
            self.note,
            self.header.join(" | "),
            "---|".repeat(self.header.len())
        );
        for r in &self.rows {
            let _ = writeln!(md, "| {} |", r.join(" | "));
        }
        md
    }
}

/// What the analysis says of the transfers of a results directory: two tables — per run and
/// flow what happened to its transfers; per flow label (every run together) FCT and slowdown
/// by size bucket — and the plots drawn into `dir` ([`FCT_CDF`], [`PAGE_LOAD_CDF`],
/// [`SLOWDOWN_VS_SIZE`]) as
/// (title, file), or why one was not drawn. `runs`: (name, run id, that run's work); `style`
/// gives a flow's label and colour (`TCP Cubic`, or a mix's flow's scheme's). Empty without
/// workload runs.
pub fn report(
    dir: &Path,
    runs: &[(String, u32, &RunWork)],
    style: &dyn Fn(&str, u32) -> (String, String),
) -> (Vec<Table>, Vec<Result<(String, String), String>>) {
    if runs.is_empty() {
        return (Vec::new(), Vec::new());
    }
    let (flows_table, by_label) = flows_table(runs, style);
    let size_table = size_table(&by_label);
    let plots = plots(dir, runs, style, &by_label);
    (vec![flows_table, size_table], plots)
}

/// The workload flows of every run, by their label in the plots.
type ByLabel<'a> = BTreeMap<String, Vec<&'a FlowWork>>;

/// The table of every workload flow of `runs` (one row each), and those flows by label
/// (`style`'s first part).
fn flows_table<'a>(
    runs: &[(String, u32, &'a RunWork)],
    style: &dyn Fn(&str, u32) -> (String, String),
) -> (Table, ByLabel<'a>) {
    let label = |name: &str, id: u32| style(name, id).0;
    let mut flows_table = Table {
        title: "Transfers".into(),
        note: "Each flow with a workload: its transfers started, done, aborted and still going \
               at the end; the offered load it started (and the one its seed drew); FCT and page \
               load percentiles (docs/workloads.md)."
            .into(),
        header: [
            "run",
            "flow",
            "workload",
            "started",
            "done",
            "aborted",
            "unfinished",
            "offered load (drawn)",
            "FCT p50 / p95 / p99 (ms)",
            "page load p50 / p95 (ms)",
        ]
        .map(String::from)
        .to_vec(),
        rows: Vec::new(),
    };
    let mut by_label: ByLabel = BTreeMap::new();
    for (name, run_id, work) in runs {
        for (id, f) in &work.flows {
            let t = &f.transfers;
            let pct = |v: &[f64], all: bool| {
                Percentiles::of(v).map_or("—".into(), |p| {
                    if all {
                        format!("{:.0} / {:.0} / {:.0}", p.p50, p.p95, p.p99)
                    } else {
                        format!("{:.0} / {:.0}", p.p50, p.p95)
                    }
                })
            };
            let load = match (f.offered_load, f.drawn.and_then(|d| d.1)) {
                (Some(m), Some(d)) => format!("{m:.3} ({d:.3})"),
                (Some(m), None) => format!("{m:.3}"),
                _ => "—".into(),
            };
            flows_table.rows.push(vec![
                format!("{name} {run_id}"),
                format!("{id} ({})", label(name, *id)),
                f.spec.clone(),
                t.transfers.len().to_string(),
                t.completed().to_string(),
                t.aborted().to_string(),
                t.unfinished().to_string(),
                load,
                pct(&t.fct_ms(), true),
                pct(&t.page_load_ms(), false),
            ]);
            by_label.entry(label(name, *id)).or_default().push(f);
        }
    }
    (flows_table, by_label)
}

/// Every run's done transfers by label and size bucket: FCT and slowdown percentiles.
fn size_table(by_label: &ByLabel) -> Table {
    let mut size_table = Table {
        title: "Transfers by size".into(),
        note: "Every run's done transfers together; slowdown = FCT ÷ the ideal FCT on the idle \
               path (docs/workloads.md)."
            .into(),
        header: [
            "scheme",
            "size",
            "transfers",
            "FCT p50 / p95 / p99 (ms)",
            "slowdown p50 / p95 / p99",
        ]
        .map(String::from)
        .to_vec(),
        rows: Vec::new(),
    };
    for (label, flows) in by_label {
        let all: Vec<_> = flows.iter().flat_map(|f| &f.transfers.transfers).collect();
        for b in by_size(all.into_iter()) {
            let three = |p: &Percentiles, d: usize| {
                format!("{:.d$} / {:.d$} / {:.d$}", p.p50, p.p95, p.p99)
            };
            size_table.rows.push(vec![
                label.clone(),
                b.label.to_owned(),
                b.count.to_string(),
                three(&b.fct_ms, 0),
                b.slowdown.as_ref().map_or("—".into(), |s| three(s, 2)),
            ]);
        }
    }
    size_table
}

/// The CDFs of FCT and page load time and the slowdown–size scatter, by label, drawn into
/// `dir`: each `Ok((title, file))`, or `Err` saying why it was not drawn.
fn plots(
    dir: &Path,
    runs: &[(String, u32, &RunWork)],
    style: &dyn Fn(&str, u32) -> (String, String),
    by_label: &ByLabel,
) -> Vec<Result<(String, String), String>> {
    let colors: BTreeMap<String, String> = runs
        .iter()
        .flat_map(|(name, _, w)| w.flows.keys().map(|id| style(name, *id)))
        .collect();
    let series = |values: &dyn Fn(&FlowWork) -> Vec<f64>, scale: f64| -> Vec<CdfSeries> {
        by_label
            .iter()
            .map(|(label, flows)| CdfSeries {
                label: label.clone(),
                color: colors.get(label).cloned().unwrap_or_else(|| "grey".into()),
                dash: 0,
                values: flows
                    .iter()
                    .flat_map(|f: &&FlowWork| values(f))
                    .map(|v| v / scale)
                    .collect(),
            })
            .filter(|s| !s.values.is_empty())
            .collect()
    };
    let fct = series(&|f| f.transfers.fct_ms(), 1.0);
    let pages = series(&|f| f.transfers.page_load_ms(), 1000.0);
    let mut plots = Vec::new();
    for (file, title, axes, s) in [
        (
            FCT_CDF,
            "Flow completion times",
            ("Flow completion time (ms)", "CDF (fraction of transfers)"),
            fct,
        ),
        (
            PAGE_LOAD_CDF,
            "Page load times",
            ("Page load time (s)", "CDF (fraction of pages)"),
            pages,
        ),
    ] {
        if s.is_empty() {
            continue;
        }
        plots.push(
            cdf_plot(&dir.join(file), title, axes, None, &s)
                .map(|()| (title.to_owned(), file.to_owned()))
                .map_err(|e| format!("{title}: plot not drawn ({e})")),
        );
    }
    let points: Vec<PointSeries> = by_label
        .iter()
        .map(|(label, flows)| PointSeries {
            label: label.clone(),
            color: colors.get(label).cloned().unwrap_or_else(|| "grey".into()),
            points: flows
                .iter()
                .flat_map(|f| &f.transfers.transfers)
                .filter_map(|t| Some((t.started.size as f64, t.slowdown?)))
                .collect(),
        })
        .filter(|s| !s.points.is_empty())
        .collect();
    if !points.is_empty() {
        let title = "Slowdown vs size";
        plots.push(
            scatter_plot(
                &dir.join(SLOWDOWN_VS_SIZE),
                title,
                ("Transfer size (log scale)", "Slowdown (FCT ÷ ideal FCT)"),
                &points,
            )
            .map(|()| (title.to_owned(), SLOWDOWN_VS_SIZE.to_owned()))
            .map_err(|e| format!("{title}: plot not drawn ({e})")),
        );
    }
    plots
}
