//! `pantheon clean`: removes what killed `pantheon` commands left behind.
use std::process::ExitCode;

use clap::Args;

/// `pantheon clean`'s flags (none).
#[derive(Args)]
pub(crate) struct CleanArgs {}

pub(crate) fn exec(_: CleanArgs) -> anyhow::Result<ExitCode> {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        anyhow::bail!("`pantheon clean` needs root (it removes network namespaces)");
    }
    let removed = engine::clean::remove_orphans();
    if removed.is_empty() {
        println!("nothing to clean: no namespace or NAT rule of a killed pantheon command");
    } else {
        println!("removed {}", engine::clean::describe(&removed));
    }
    Ok(ExitCode::SUCCESS)
}
