//! `pantheon`: run congestion-control experiments over an emulated path and analyse them.
//! This file only parses the command line and dispatches: each subcommand's arguments and
//! handler are in `commands/<name>.rs`.
use std::process::ExitCode;

use clap::{CommandFactory, Parser};

mod commands;

/// Pantheon-rs: a testbed for Internet congestion control.
///
/// Runs transport schemes (TCP Cubic, BBR, …) over an emulated path through an instrumented
/// tunnel that logs every packet, and reports Pantheon's numbers: average throughput,
/// 95th-percentile one-way delay and loss, per flow and per run.
#[derive(Parser)]
#[command(name = "pantheon", version, propagate_version = true)]
struct Cli {
    #[command(subcommand)]
    command: commands::Command,
}

fn main() -> ExitCode {
    tunnel::messages::print_on_stderr();
    // Pantheon's config file (`pantheon run local -c FILE`) gives defaults of the flags.
    let args = std::env::args_os().collect();
    let args = match commands::run::with_config_defaults(args, &Cli::command()) {
        Ok(args) => args,
        Err(e) => {
            eprintln!("error: {e:#}");
            return ExitCode::from(2);
        }
    };
    let cli = Cli::parse_from(args);
    if cli.command.prints_only() {
        // Commands that only print: end quietly when the reader goes (`… | head`), as Unix
        // tools do, instead of panicking on a broken pipe.
        // SAFETY: restoring the default disposition of a signal has no preconditions.
        unsafe {
            libc::signal(libc::SIGPIPE, libc::SIG_DFL);
        }
    }
    match commands::exec(cli.command) {
        Ok(code) => code,
        Err(e) => match engine::rootless::ran_rootless(&e) {
            // The command ran again without root (engine::rootless) and that run said all.
            Some(code) => ExitCode::from(code.clamp(0, 255) as u8),
            None => {
                eprintln!("error: {e:#}");
                ExitCode::from(2)
            }
        },
    }
}
