//! `pantheon compare A B`: two results directories (or a table of medians and a directory)
//! side by side.
use std::path::PathBuf;
use std::process::ExitCode;

use clap::Args;
use engine::schemes::Registry;

#[derive(Args)]
pub(crate) struct CompareArgs {
    /// The first (reference) results directory, or a table of per-scheme medians (.csv or
    /// .json, as `pantheon calibrate` takes: a real path known from its report).
    a: PathBuf,
    /// The second.
    b: PathBuf,
    /// Read each side's scheme names as Pantheon's schemes of this day, YYYY-MM-DD, so that a
    /// results directory of Pantheon's own runs meets ours: its copa of 2017-08-30 is compared
    /// with copa_orig, its default_tcp with cubic. Without it, the names no scheme here is
    /// called by (Pantheon's copa, default_tcp) are read as of the seed reports' era,
    /// 2017-08-30; other names are compared as they are. See `pantheon schemes era`.
    #[arg(long, value_name = "DAY")]
    pantheon_era: Option<engine::provenance::Day>,
    /// Print JSON.
    #[arg(long)]
    json: bool,
    /// Extra scheme descriptors (*.toml), used if a directory must be analysed first.
    #[arg(long)]
    schemes_dir: Option<PathBuf>,
}

/// Prints the comparison (a table, or JSON).
pub(crate) fn exec(
    CompareArgs {
        a,
        b,
        pantheon_era,
        json,
        schemes_dir,
    }: CompareArgs,
) -> anyhow::Result<ExitCode> {
    let registry = Registry::load(schemes_dir.as_deref())?;
    let c = engine::compare::compare_dirs(&a, &b, &registry, pantheon_era)?;
    if json {
        println!("{}", serde_json::to_string_pretty(&c)?);
    } else {
        print!("{}", engine::compare::render(&a, &b, &c));
    }
    Ok(ExitCode::SUCCESS)
}
