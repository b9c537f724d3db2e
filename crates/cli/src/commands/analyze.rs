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
    /// For a mixed experiment: a results directory of its schemes each alone on the same
    /// emulator, whose medians give each flow's throughput ratio and harm (default: the one
    /// `pantheon run --baseline` recorded).
    #[arg(long, value_name = "DIR")]
    baseline: Option<PathBuf>,
    /// If another command is writing DIR (a run, another analysis), wait for it to end instead
    /// of refusing at once.
    #[arg(long)]
    wait_lock: bool,
    /// Statistics only: each run's stats log, pantheon_perf.json and the summary, without the
    /// plots and the report (Pantheon's `analyze.py --analyze-schemes` without its figures):
    /// what a sweep or a script needs, at the speed of reading the logs.
    #[arg(long)]
    stats_only: bool,
}

/// Analyses the directory (without plots and report with `--stats-only`) and prints the
/// summary (Markdown).
pub(crate) fn exec(a: AnalyzeArgs) -> anyhow::Result<ExitCode> {
    let registry = Registry::load(a.schemes_dir.as_deref())?;
    // One writer at a time: a run still writing DIR, or another analysis, is not raced.
    let _held = a
        .dir
        .is_dir()
        .then(|| engine::experiment::lock(&a.dir, a.wait_lock))
        .transpose()?;
    let opts = engine::analyze::AnalyzeOptions {
        baseline: a.baseline.as_deref(),
        stats_only: a.stats_only,
    };
    let analysis = engine::analyze::analyze_dir_opts(&a.dir, &registry, &opts)?;
    println!("{}", analysis.summary_md);
    Ok(ExitCode::SUCCESS)
}
