//! `pantheon results list|show|fetch`: the daemon's archive.
#![cfg_attr(not(feature = "testbed"), allow(dead_code))]
use std::path::PathBuf;
use std::process::ExitCode;

use clap::Subcommand;
#[cfg(feature = "testbed")]
use pantheon_orchestrator::testbed::service::proto;

use super::daemon::DaemonArgs;
#[cfg(feature = "testbed")]
use super::daemon::{print_json, row};

/// `pantheon results …`.
#[derive(Subcommand)]
pub(crate) enum ResultsAction {
    /// Archived experiments, newest first.
    List {
        /// A node name, or SENDER→RECEIVER (or SENDER>RECEIVER) for one direction.
        #[arg(long)]
        path: Option<String>,
        /// Experiments that ran this scheme.
        #[arg(long)]
        scheme: Option<String>,
        /// Queued on or after this date (YYYY-MM-DD or an RFC 3339 time).
        #[arg(long)]
        since: Option<String>,
        /// Queued before this date.
        #[arg(long)]
        until: Option<String>,
        /// queued, running, done or failed.
        #[arg(long)]
        status: Option<String>,
        /// Print JSON.
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        daemon: DaemonArgs,
    },
    /// One experiment: its summary (mean throughput, p95 one-way delay, loss per scheme) and
    /// runs.
    Show {
        /// Its number.
        id: i64,
        /// Print JSON.
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        daemon: DaemonArgs,
    },
    /// Copy an experiment's results directory (report, plots, logs) here.
    Fetch {
        /// Its number.
        id: i64,
        /// Where (default: P<number>).
        #[arg(long)]
        out: Option<PathBuf>,
        #[command(flatten)]
        daemon: DaemonArgs,
    },
}

/// `pantheon results …`.
#[cfg(feature = "testbed")]
pub(crate) fn exec(action: ResultsAction) -> anyhow::Result<ExitCode> {
    match action {
        ResultsAction::List {
            path,
            scheme,
            since,
            until,
            status,
            json,
            daemon,
        } => {
            let rows = daemon.client()?.list(proto::ListRequest {
                path: path.unwrap_or_default(),
                scheme: scheme.unwrap_or_default(),
                since: since.unwrap_or_default(),
                until: until.unwrap_or_default(),
                status: status.unwrap_or_default(),
            })?;
            if json {
                print_json(&rows)?;
            } else {
                for e in &rows {
                    println!("{}", row(e));
                }
                eprintln!("{} experiment(s)", rows.len());
            }
        }
        ResultsAction::Show { id, json, daemon } => {
            let r = daemon.client()?.show(id)?;
            if json {
                print_json(&r)?;
                return Ok(ExitCode::SUCCESS);
            }
            let e = r.experiment.unwrap_or_default();
            println!("{}", row(&e));
            if !e.error.is_empty() {
                println!("error: {}", e.error);
            }
            println!("results: {}", e.result_dir);
            if !r.summary.is_empty() {
                println!(
                    "\n{:<12} {:>4} {:>22} {:>26} {:>14}",
                    "scheme", "runs", "mean tput (Mbit/s)", "mean p95 delay (ms)", "mean loss (%)"
                );
                for s in &r.summary {
                    println!(
                        "{:<12} {:>4} {:>22.2} {:>26.2} {:>14.2}",
                        s.scheme,
                        s.runs,
                        s.tput_mbps,
                        s.delay_ms,
                        s.loss * 100.0
                    );
                }
            }
            println!();
            for x in &r.runs {
                let metrics = if x.analysed {
                    format!(
                        "{:.2} Mbit/s, {:.2} ms, {:.2} % loss",
                        x.tput_mbps,
                        x.delay_ms,
                        x.loss * 100.0
                    )
                } else {
                    String::new()
                };
                let reason = if x.reason.is_empty() {
                    String::new()
                } else {
                    format!(": {}", x.reason)
                };
                println!("{} run {}: {}{reason} {metrics}", x.scheme, x.run, x.status);
            }
        }
        ResultsAction::Fetch { id, out, daemon } => {
            let dir = out.unwrap_or_else(|| PathBuf::from(format!("P{id}")));
            let names = daemon.client()?.fetch(id, &dir)?;
            eprintln!("{} file(s) → {}", names.len(), dir.display());
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// Without the `testbed` feature: says so.
#[cfg(not(feature = "testbed"))]
pub(crate) fn exec(_: ResultsAction) -> anyhow::Result<ExitCode> {
    super::left_out("results", "testbed")
}
