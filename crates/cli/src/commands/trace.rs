//! `pantheon trace constant|poisson`: Mahimahi packet-delivery traces.
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use clap::Subcommand;
use emucal::trace::Trace;

#[derive(Subcommand)]
pub(crate) enum TraceAction {
    /// Write a constant-rate trace: RATE_MBPS Mbit/s of 1500-byte packets (10 → `1 2 3 4 6`).
    Constant {
        /// Rate in Mbit/s (up to 3 decimals).
        rate_mbps: f64,
        /// Output file (default: `<RATE>mbps.trace`).
        #[arg(short, long)]
        output: Option<PathBuf>,
    },
    /// Write a Poisson trace: opportunities of a Poisson process of RATE_MBPS Mbit/s mean,
    /// each at its whole ms, as Pantheon's `*mbps-poisson` cellular traces.
    Poisson {
        /// Mean rate in Mbit/s.
        rate_mbps: f64,
        /// Length of the trace, ms (it then repeats).
        #[arg(long, default_value_t = 60_000)]
        duration_ms: u64,
        /// Seed of the generator.
        #[arg(long, default_value_t = 1)]
        seed: u64,
        /// Output file (default: `<RATE>mbps-poisson.trace`).
        #[arg(short, long)]
        output: Option<PathBuf>,
    },
}

/// Writes the trace and prints its file name.
pub(crate) fn exec(action: TraceAction) -> anyhow::Result<ExitCode> {
    let (trace, out) = match action {
        TraceAction::Constant { rate_mbps, output } => (
            Trace::constant_rate(rate_mbps),
            output.unwrap_or_else(|| format!("{rate_mbps}mbps.trace").into()),
        ),
        TraceAction::Poisson {
            rate_mbps,
            duration_ms,
            seed,
            output,
        } => (
            Trace::poisson(rate_mbps, duration_ms, seed),
            output.unwrap_or_else(|| format!("{rate_mbps}mbps-poisson.trace").into()),
        ),
    };
    let trace = trace.map_err(anyhow::Error::msg)?;
    std::fs::write(&out, trace.to_text()).with_context(|| format!("write {}", out.display()))?;
    println!("{}", out.display());
    Ok(ExitCode::SUCCESS)
}
