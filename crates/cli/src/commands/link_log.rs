//! `pantheon link-log FILE`: a binary mm-link log in Mahimahi's text form.
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use clap::Args;

#[derive(Args)]
pub(crate) struct LinkLogArgs {
    /// The binary log.
    file: PathBuf,
    /// Output file (default: standard output).
    #[arg(short, long)]
    output: Option<PathBuf>,
}

/// Writes the text; exit status 1 (with a warning naming where) if the log was cut short.
pub(crate) fn exec(LinkLogArgs { file, output }: LinkLogArgs) -> anyhow::Result<ExitCode> {
    let data = std::fs::read(&file).with_context(|| format!("read {}", file.display()))?;
    let log = emucal::linklog::read_binary(&data)
        .map_err(|e| anyhow::anyhow!("{}: {e}", file.display()))?;
    let text = emucal::linklog::to_text(&log);
    match &output {
        Some(out) => {
            std::fs::write(out, &text).with_context(|| format!("write {}", out.display()))?
        }
        None => {
            use std::io::Write;
            std::io::stdout().write_all(&text)?;
        }
    }
    if let Some(why) = &log.stopped {
        eprintln!("warning: {}: {why}", file.display());
        return Ok(ExitCode::from(1));
    }
    Ok(ExitCode::SUCCESS)
}
