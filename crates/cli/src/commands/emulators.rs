//! `pantheon emulators [import]`: the emulator library (`--emulator NAME`).
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, Subcommand};
use emucal::presets::{library, library_dir, matches, presets, Preset};

use super::schemes::MirrorArgs;

#[derive(Args)]
#[command(args_conflicts_with_subcommands = true)]
pub(crate) struct EmulatorsArgs {
    #[command(subcommand)]
    action: Option<EmulatorsAction>,
    /// Print JSON.
    #[arg(long)]
    json: bool,
    /// Only the imported emulators of this country (an iBoxNet profile's directory:
    /// `brazil`, `china`, `colombia`, `india`, `mexico`, `united-states`).
    #[arg(long)]
    country: Option<String>,
    /// Only the imported emulators of this link type (iBoxNet's `cellular`, `wired`, …).
    #[arg(long)]
    link_type: Option<String>,
    /// Names only, one per line.
    #[arg(long, conflicts_with = "json")]
    names: bool,
}

#[derive(Subcommand)]
pub(crate) enum EmulatorsAction {
    /// Import iBoxNet network profiles (Ashok et al., HotNets 2020) into the emulator library
    /// ($PANTHEON_EMULATORS_HOME, else ~/.cache/pantheon-rs/emulators), one preset each,
    /// named `ibox-<node>-<link type>-<N>` and runnable as `--emulator NAME`. Without a
    /// path: the 430 published profiles of microsoft/internet-in-a-box at a pinned commit,
    /// from --source-mirror or the network. A malformed profile is refused, naming its file
    /// and key, and the others are imported (exit status 1 if any was refused).
    Import {
        /// Profile files, or directories searched for them (the published layout:
        /// `network-profiles/<country>/<link type>/network-profile-N.json`).
        paths: Vec<PathBuf>,
        #[command(flatten)]
        mirror: MirrorArgs,
    },
}

/// Lists the presets, built in and imported, that pass the filters: name, description and
/// Mahimahi command line (or JSON, or names); then how many. Or imports profiles.
pub(crate) fn exec(args: EmulatorsArgs) -> anyhow::Result<ExitCode> {
    if let Some(EmulatorsAction::Import { paths, mirror }) = args.action {
        return import(&paths, &mirror);
    }
    let mut filters = Vec::new();
    if let Some(c) = &args.country {
        filters.push(("country", c.as_str()));
    }
    if let Some(t) = &args.link_type {
        filters.push(("link_type", t.as_str()));
    }
    let dir = library_dir();
    let (imported, problems) = library(&dir);
    for p in &problems {
        eprintln!("warning: {p} (skipped)");
    }
    let built_in = presets();
    let shown: Vec<&Preset> = built_in
        .iter()
        .chain(&imported)
        .filter(|p| matches(p, &filters))
        .collect();
    if args.json {
        println!("{}", serde_json::to_string_pretty(&shown)?);
        return Ok(ExitCode::SUCCESS);
    }
    for p in &shown {
        if args.names {
            println!("{}", p.name);
        } else {
            println!("{}\n    {}", p.name, p.description);
            println!("    {}", p.emulator.command_line());
        }
    }
    let count = format!(
        "{} emulators shown of {}: {} built in, {} imported into {}{}",
        shown.len(),
        built_in.len() + imported.len(),
        built_in.len(),
        imported.len(),
        dir.display(),
        if imported.is_empty() {
            " (`pantheon emulators import` adds iBoxNet's profiles)"
        } else {
            ""
        }
    );
    // Part of the listing; beside a list of names (for scripts), on stderr.
    if args.names {
        eprintln!("{count}");
    } else {
        println!("{count}");
    }
    Ok(ExitCode::SUCCESS)
}

fn import(paths: &[PathBuf], mirror: &MirrorArgs) -> anyhow::Result<ExitCode> {
    mirror.apply()?;
    let dir = library_dir();
    let done = engine::emulators::import(
        paths,
        &dir,
        &engine::schemes::tools_dir(),
        engine::source::mirror_dir().as_deref(),
    )?;
    for r in &done.refused {
        eprintln!("refused: {r}");
    }
    let from: Vec<String> = done.from.iter().map(|p| p.display().to_string()).collect();
    println!(
        "imported {} iBoxNet profiles from {} into {}{}",
        done.presets.len(),
        from.join(", "),
        dir.display(),
        match done.refused.len() {
            0 => String::new(),
            n => format!("; {n} refused (above)"),
        }
    );
    Ok(if done.refused.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}
