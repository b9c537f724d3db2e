//! A command line of a scheme descriptor's setup or of a source scheme's build: what
//! [`crate::schemes`], [`crate::source`] and [`crate::setup`] share, below all three.

use std::process::Command;

/// One setup step: an argv run without a shell (use `["sh", "-c", "…"]` for one), in
/// [`crate::schemes::tools_dir`]. `{tools}` is replaced by that directory.
pub type Step = Vec<String>;

/// `cmd` as a line to print: program and arguments, space-separated.
pub fn shown(cmd: &Command) -> String {
    format!(
        "{} {}",
        cmd.get_program().to_string_lossy(),
        cmd.get_args()
            .map(|a| a.to_string_lossy())
            .collect::<Vec<_>>()
            .join(" ")
    )
}
