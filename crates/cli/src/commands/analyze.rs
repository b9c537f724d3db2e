//! `pantheon analyze DIR`: a results directory's stats logs, `pantheon_perf.json`, summary,
//! plots and report, made again from its logs.
use std::path::PathBuf;
use std::process::ExitCode;

use clap::Args;
use engine::schemes::Registry;

#[derive(Args)]
pub(crate) struct AnalyzeArgs {
    /// The --data-dir of a `pantheon run`.
    dir: PathBuf,
    /// Extra scheme descriptors (*.toml) for labels and colors.
    #[arg(long)]
    schemes_dir: Option<PathBuf>,
}

/// Analyses the directory and prints the summary (Markdown).
pub(crate) fn exec(AnalyzeArgs { dir, schemes_dir }: AnalyzeArgs) -> anyhow::Result<ExitCode> {
    let registry = Registry::load(schemes_dir.as_deref())?;
    let md = engine::analyze::analyze_dir(&dir, &registry)?;
    println!("{md}");
    Ok(ExitCode::SUCCESS)
}
