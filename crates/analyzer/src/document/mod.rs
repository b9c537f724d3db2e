//! Pantheon's report (`report.py`, reference `pantheon.md` §4.5) built from data structures —
//! nothing re-parsed from text — in two forms that need neither LaTeX nor a browser:
//! [`html`] (`pantheon_report.html`, one self-contained file) and [`pdf`]
//! (`pantheon_report.pdf`). Sections, in Pantheon's order: generated at; the emulated path or
//! data path; schemes × runs, runtime and flows; NTP server; system info; versions; the two
//! summary plots; the per-flow table of means; then per scheme and run the statistics and the
//! two time-series plots (and for a mixed run its competition table and plot). Runs with
//! workloads add their transfers' tables and CDF plots after the means table.

mod html;
mod pdf;

pub use html::{escape, html};
pub use pdf::pdf;

use crate::compare::MeanInterval;

/// One row of the summary table: a scheme's means over its valid runs, per flow.
#[derive(Debug, Clone, PartialEq)]
pub struct TableRow {
    /// Scheme label (`TCP Cubic`).
    pub label: String,
    /// Valid runs (counted in the means) and all runs.
    pub runs: (usize, usize),
    /// Per flow, 1..K.
    pub flows: Vec<FlowMeans>,
}

/// One flow's means over a scheme's valid runs, each with its 95 % confidence interval
/// ([`MeanInterval`]); `None` when no valid run has the figure.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct FlowMeans {
    /// Mean average throughput, Mbit/s.
    pub tput_mbps: Option<MeanInterval>,
    /// Mean 95th-percentile one-way delay, ms.
    pub delay_ms: Option<MeanInterval>,
    /// Mean loss rate, percent.
    pub loss_pct: Option<MeanInterval>,
}

impl FlowMeans {
    /// The means of a flow's (or a run's total) figures over the valid runs, each with the
    /// interval its figure takes: Student's t for throughput and loss
    /// ([`crate::compare::mean_interval`]), the percentile bootstrap for the p95 delay, whose
    /// runs are skewed ([`crate::compare::bootstrap_mean_interval`]). One value per run in each.
    pub fn over_runs(tput_mbps: &[f64], delay_ms: &[f64], loss_pct: &[f64]) -> FlowMeans {
        use crate::compare::{bootstrap_mean_interval, mean_interval};
        FlowMeans {
            tput_mbps: mean_interval(tput_mbps),
            delay_ms: bootstrap_mean_interval(delay_ms),
            loss_pct: mean_interval(loss_pct),
        }
    }
}

/// One run's section.
#[derive(Debug, Clone, PartialEq)]
pub struct RunSection {
    /// Scheme label.
    pub label: String,
    /// Run id.
    pub run_id: u32,
    /// The run's statistics text (`<cc>_stats_run<N>.log`).
    pub stats: String,
    /// Throughput plot (PNG bytes), if drawn.
    pub throughput_png: Option<Vec<u8>>,
    /// Delay plot (PNG bytes), if drawn.
    pub delay_png: Option<Vec<u8>>,
    /// A mixed run's competition table and plot.
    pub competition: Option<CompetitionSection>,
    /// The run's files to look inside, by name in the results directory (`--capture`'s pcapng,
    /// TLS key logs and qlogs, the time series' Parquet files): the HTML report links them, the
    /// PDF names them.
    pub files: Vec<String>,
}

/// A mixed run's competition: one row per flow (scheme, start, throughput, delay, loss, …),
/// lines on the run (Jain's index, the time to converge) and the per-flow plot.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct CompetitionSection {
    /// Column headings.
    pub header: Vec<String>,
    /// One row per flow, as many cells as headings.
    pub rows: Vec<Vec<String>>,
    /// Lines about the run as a whole.
    pub notes: Vec<String>,
    /// The competition plot (PNG bytes), if drawn.
    pub plot_png: Option<Vec<u8>>,
}

/// A titled table of the report after the means table (ours: the transfers of runs with
/// workloads), a line under its title, and its plots.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct TableSection {
    /// Its heading.
    pub title: String,
    /// What it shows, in a sentence.
    pub note: String,
    /// Column headings.
    pub header: Vec<String>,
    /// Rows, as many cells as headings.
    pub rows: Vec<Vec<String>>,
    /// Plots (PNG bytes) after the table.
    pub plots_png: Vec<Vec<u8>>,
}

/// Everything the report shows.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Report {
    /// `YYYY-MM-DD HH:MM:SS` UTC.
    pub generated_at: String,
    /// `Tested in emulator: …` or `Data path: …`.
    pub path: String,
    /// Number of schemes.
    pub schemes: usize,
    /// Runs per scheme.
    pub run_times: u32,
    /// Seconds per run.
    pub runtime_s: f64,
    /// Flows per run and seconds between their starts.
    pub flows: (u64, f64),
    /// The NTP server offsets were measured against, if any.
    pub ntp: Option<String>,
    /// System info lines (kernel, qdisc, socket-buffer sysctls).
    pub system_info: Vec<String>,
    /// (what, version) of the harness and of every scheme.
    pub versions: Vec<(String, String)>,
    /// `pantheon_summary_mean.svg` and `pantheon_summary.svg` contents (for HTML).
    pub summary_svgs: Vec<String>,
    /// The same plots as PNG bytes (for PDF).
    pub summary_pngs: Vec<Vec<u8>>,
    /// The per-flow table.
    pub table: Vec<TableRow>,
    /// Tables after the means table (the transfers of runs with workloads).
    pub sections: Vec<TableSection>,
    /// Per scheme and run.
    pub runs: Vec<RunSection>,
}

impl Report {
    /// Pantheon's opening sentences: `Repeated the test of N congestion control schemes
    /// twice.`, `Each test lasted for T seconds running 1 flow.` and, when offsets were
    /// applied, `NTP offsets were measured against …`.
    pub fn sentences(&self) -> Vec<String> {
        let times = match self.run_times {
            1 => "once".to_owned(),
            2 => "twice".to_owned(),
            n => format!("{n} times"),
        };
        let flows = if self.flows.0 == 1 {
            "1 flow".to_owned()
        } else {
            format!(
                "{} flows with {}-second interval between two flows",
                self.flows.0, self.flows.1
            )
        };
        let mut out = vec![
            format!(
                "Repeated the test of {} congestion control scheme{} {times}.",
                self.schemes,
                if self.schemes == 1 { "" } else { "s" }
            ),
            format!(
                "Each test lasted for {} seconds running {flows}.",
                self.runtime_s
            ),
        ];
        if let Some(ntp) = &self.ntp {
            out.push(format!(
                "NTP offsets were measured against {ntp} and have been applied to correct the \
                 timestamps in logs."
            ));
        }
        out
    }

    /// Columns per metric in the table: the most flows of any scheme (at least 1).
    pub fn table_flows(&self) -> usize {
        self.table
            .iter()
            .map(|t| t.flows.len())
            .max()
            .unwrap_or(1)
            .max(1)
    }
}
