//! `pantheon emulators`: the emulator library (`--emulator NAME`).
use std::process::ExitCode;

use clap::Args;

#[derive(Args)]
pub(crate) struct EmulatorsArgs {
    /// Print JSON.
    #[arg(long)]
    json: bool,
}

/// Prints every preset: name, description and Mahimahi command line (or JSON).
pub(crate) fn exec(EmulatorsArgs { json }: EmulatorsArgs) -> anyhow::Result<ExitCode> {
    let all = emucal::presets::presets();
    if json {
        println!("{}", serde_json::to_string_pretty(&all)?);
    } else {
        for p in &all {
            println!("{}\n    {}", p.name, p.description);
            println!("    {}", p.emulator.command_line());
        }
    }
    Ok(ExitCode::SUCCESS)
}
