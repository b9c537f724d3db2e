//! How the commands that talk to the orchestrator daemon (`pantheon submit`, `status`,
//! `results`) reach it, and what they share to print its answers.
#![cfg_attr(not(feature = "testbed"), allow(dead_code))]
use std::path::PathBuf;

use clap::Args;
#[cfg(feature = "testbed")]
use {
    pantheon_orchestrator::agent::auth::Credentials,
    pantheon_orchestrator::testbed::service::{proto, DaemonClient},
};

/// How the CLI reaches the daemon.
#[derive(Args)]
pub(crate) struct DaemonArgs {
    /// The daemon's gRPC address, HOST[:PORT] (port 7071 by default).
    #[arg(long, default_value = "127.0.0.1")]
    daemon: String,
    /// Directory with the testbed's agent.pem and token (`pantheon node credentials`).
    #[arg(long, default_value = "credentials")]
    credentials: PathBuf,
}

#[cfg(feature = "testbed")]
impl DaemonArgs {
    pub(crate) fn client(&self) -> anyhow::Result<DaemonClient> {
        DaemonClient::new(&self.daemon, &Credentials::load(&self.credentials, false)?)
    }
}

#[cfg(feature = "testbed")]
pub(crate) fn row(e: &proto::Experiment) -> String {
    format!(
        "P{:<5} {:>10} → {:<10} {:>8} {:>2} flow(s) {:>3} run(s)  {:<8} {}  {}",
        e.id,
        e.sender,
        e.receiver,
        e.link,
        e.flows,
        e.run_times,
        e.status,
        e.queued_at,
        e.schemes.join(" ")
    )
}

/// Prints `v` as indented JSON on stdout.
#[cfg(feature = "testbed")]
pub(crate) fn print_json(v: &impl serde::Serialize) -> anyhow::Result<()> {
    println!("{}", serde_json::to_string_pretty(v)?);
    Ok(())
}
