//! `pantheon shell`: a command inside an emulated path written as Mahimahi shells.
use std::process::ExitCode;

use anyhow::Context;
use clap::Args;
use engine::shell;

#[derive(Args)]
pub(crate) struct ShellArgs {
    /// Seed of the random generators (mm-loss, mm-onoff, PIE, Poisson delivery); runs are
    /// reproducible with the same seed.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Time every stage on Mahimahi's integer-millisecond clock (for comparisons with
    /// Mahimahi) instead of nanoseconds.
    #[arg(long)]
    ms_clock: bool,
    /// A named emulator from the library (`pantheon emulators`) instead of a chain; the
    /// words after the options are then the command.
    #[arg(long, value_name = "NAME")]
    emulator: Option<String>,
    /// Who emulates: `ours`, or `mahimahi` to run the same chain with Mahimahi's binaries
    /// from PATH (Mahimahi's own shells and options only).
    #[arg(long, value_enum, default_value_t = BackendArg::Ours)]
    emulator_backend: BackendArg,
    /// The chain of shells, then `--` and the command.
    #[arg(
        required_unless_present = "emulator",
        trailing_var_arg = true,
        allow_hyphen_values = true,
        value_name = "SHELLS… [-- COMMAND…]"
    )]
    chain: Vec<String>,
}

/// `--emulator-backend`.
#[derive(Clone, Copy, clap::ValueEnum)]
enum BackendArg {
    /// Pantheon-rs's emulator.
    Ours,
    /// Mahimahi's binaries (mm-delay, mm-link, …) from PATH.
    Mahimahi,
}

/// Runs the chain's command (or $SHELL); the exit status is the command's.
pub(crate) fn exec(a: ShellArgs) -> anyhow::Result<ExitCode> {
    let backend = match a.emulator_backend {
        BackendArg::Ours => shell::Backend::Ours,
        BackendArg::Mahimahi => shell::Backend::Mahimahi,
    };
    let opts = shell::ShellOptions {
        seed: a.seed,
        ms_clock: a.ms_clock,
        emulator: a.emulator,
        backend,
    };
    // A SIGINT/SIGTERM sent to us is passed on to the command (see shell::run).
    ctrlc::set_handler(|| {
        engine::runner::INTERRUPTED.store(true, std::sync::atomic::Ordering::SeqCst);
    })
    .context("install the interrupt handler")?;
    let code = shell::run(&a.chain, &opts)?;
    Ok(ExitCode::from(code.clamp(0, 255) as u8))
}
