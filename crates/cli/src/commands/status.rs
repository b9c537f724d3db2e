//! `pantheon status`: what the daemon is doing.
#![cfg_attr(not(feature = "testbed"), allow(dead_code))]
use std::process::ExitCode;

use clap::Args;

use super::daemon::DaemonArgs;
#[cfg(feature = "testbed")]
use super::daemon::{print_json, row};

#[derive(Args)]
pub(crate) struct StatusArgs {
    #[command(flatten)]
    daemon: DaemonArgs,
    /// Print JSON.
    #[arg(long)]
    json: bool,
}

/// `pantheon status`.
#[cfg(feature = "testbed")]
pub(crate) fn exec(StatusArgs { daemon: d, json }: StatusArgs) -> anyhow::Result<ExitCode> {
    let s = d.client()?.status()?;
    if json {
        print_json(&s)?;
        return Ok(ExitCode::SUCCESS);
    }
    println!(
        "nodes: {} (busy: {})",
        s.nodes.join(", "),
        if s.busy_nodes.is_empty() {
            "none".to_owned()
        } else {
            s.busy_nodes.join(", ")
        }
    );
    if s.last_tournament > 0 {
        println!(
            "last tournament: {} started {}",
            s.last_tournament, s.last_tournament_at
        );
    }
    println!("running: {}", s.running.len());
    for e in &s.running {
        println!("  {}", row(e));
    }
    println!("queued: {}", s.queued.len());
    for e in &s.queued {
        println!("  {}", row(e));
    }
    Ok(ExitCode::SUCCESS)
}

/// Without the `testbed` feature: says so.
#[cfg(not(feature = "testbed"))]
pub(crate) fn exec(_: StatusArgs) -> anyhow::Result<ExitCode> {
    super::left_out("status", "testbed")
}
