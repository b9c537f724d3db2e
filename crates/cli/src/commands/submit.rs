//! `pantheon submit`: one experiment queued on the daemon, outside its schedule.
#![cfg_attr(not(feature = "testbed"), allow(dead_code))]
use std::process::ExitCode;

use clap::Args;
#[cfg(feature = "testbed")]
use pantheon_orchestrator::testbed::service::proto;

use super::daemon::DaemonArgs;

/// `pantheon submit`'s flags.
#[derive(Args)]
pub(crate) struct SubmitArgs {
    /// The sending node (a name from the testbed file).
    sender: String,
    /// The receiving node.
    receiver: String,
    /// Schemes, space separated (default: the matrix's).
    #[arg(long)]
    schemes: Option<String>,
    /// Flows per run (default: the matrix's first).
    #[arg(short = 'f', long)]
    flows: Option<u16>,
    /// Runs per scheme (default: the matrix's for the pair's link type).
    #[arg(long)]
    run_times: Option<u32>,
    /// Seconds per run (default: the matrix's).
    #[arg(short = 't', long)]
    runtime: Option<f64>,
    /// Seconds between flows (default: the matrix's).
    #[arg(long)]
    interval: Option<f64>,
    #[command(flatten)]
    daemon: DaemonArgs,
}

/// `pantheon submit`.
#[cfg(feature = "testbed")]
pub(crate) fn exec(a: SubmitArgs) -> anyhow::Result<ExitCode> {
    let id = a.daemon.client()?.submit(proto::SubmitRequest {
        sender: a.sender,
        receiver: a.receiver,
        schemes: a
            .schemes
            .map(|s| s.split_whitespace().map(str::to_owned).collect())
            .unwrap_or_default(),
        flows: a.flows.map_or(0, u32::from),
        run_times: a.run_times.unwrap_or(0),
        runtime_s: a.runtime.unwrap_or(0.0),
        interval_s: a.interval.unwrap_or(-1.0),
    })?;
    println!("queued experiment P{id}");
    Ok(ExitCode::SUCCESS)
}

/// Without the `testbed` feature: says so.
#[cfg(not(feature = "testbed"))]
pub(crate) fn exec(_: SubmitArgs) -> anyhow::Result<ExitCode> {
    super::left_out("submit", "testbed")
}
