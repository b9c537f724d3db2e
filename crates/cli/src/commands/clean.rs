//! `pantheon clean`: removes what killed `pantheon` commands left behind.
use std::process::ExitCode;

use clap::Args;

/// `pantheon clean`'s flags (none).
#[derive(Args)]
pub(crate) struct CleanArgs {}

pub(crate) fn exec(_: CleanArgs) -> anyhow::Result<ExitCode> {
    engine::clean::require_root("pantheon clean", "it removes network namespaces")?;
    let removed = engine::clean::remove_orphans();
    if removed.is_empty() {
        println!("nothing to clean: no namespace or NAT rule of a killed pantheon command");
    } else {
        println!("removed {}", engine::clean::describe(&removed));
    }
    Ok(ExitCode::SUCCESS)
}
