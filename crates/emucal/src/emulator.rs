//! The typed emulator: an emulated path as data, handed from the plan, the presets, the
//! calibration and `pantheon check` to the runner, and recorded in `pantheon_metadata.json`.
//!
//! An [`Emulator`] is the chain of Mahimahi shells, outermost first, with mm-link's traces
//! named by file. It is built from values ([`Emulator::new`], `Candidate::emulator`, a preset)
//! or read from Pantheon's flags ([`Emulator::from_pantheon_flags`]: `--prepend-mm-cmds "mm-delay
//! 28"`, the traces, `--extra-mm-link-args`, `--append-mm-cmds`). It becomes Mahimahi's words
//! only where a person or real Mahimahi reads them: the report's command line
//! ([`Emulator::command_line`]), Pantheon's metadata keys ([`Emulator::pantheon_flags`]),
//! `mahimahi.txt`. [`Emulator::load`] reads the traces and gives the [`EmulatedPath`] the
//! runtime runs.
//!
//! ```
//! use pantheon_emucal::emulator::Emulator;
//! use pantheon_emucal::mm::{LinkShell, Shell};
//! let e = Emulator::new(vec![
//!     Shell::Delay { ms: 28 },
//!     Shell::Link(Box::new(LinkShell::new("12mbps.trace".into(), "12mbps.trace".into()))),
//! ]);
//! assert_eq!(e.command_line(), "mm-delay 28 mm-link 12mbps.trace 12mbps.trace");
//! assert_eq!(e.pantheon_flags().unwrap().prepend_mm_cmds, "mm-delay 28");
//! ```

use std::path::{Path, PathBuf};

use crate::mm::{parse_chain, EmulatedPath, MmError, Shell, SHELL_NAMES};

/// An emulated path as data: Mahimahi shells, outermost first (serde: the list of shells).
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(transparent)]
pub struct Emulator {
    /// The shells, outermost first; an experiment's has one mm-link.
    pub shells: Vec<Shell>,
}

/// Pantheon's five flags that describe a local run's path, as `test.py local` takes them and
/// `pantheon_metadata.json` records them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PantheonFlags {
    /// `--prepend-mm-cmds`: the shells outside mm-link (`mm-delay 28 mm-loss uplink 0.004`).
    pub prepend_mm_cmds: String,
    /// `--uplink-trace`.
    pub uplink_trace: PathBuf,
    /// `--downlink-trace`.
    pub downlink_trace: PathBuf,
    /// `--extra-mm-link-args`: mm-link's options (`--uplink-queue=droptail
    /// --uplink-queue-args=packets=50`).
    pub extra_mm_link_args: String,
    /// `--append-mm-cmds`: the shells inside mm-link.
    pub append_mm_cmds: String,
}

impl Emulator {
    /// The path of `shells`, outermost first.
    pub fn new(shells: Vec<Shell>) -> Emulator {
        Emulator { shells }
    }

    /// The path Pantheon's `setup_mm_cmd` would run: `[prepend…] mm-link UP DOWN [extra…]
    /// [append…]`. No file is read. Errors on a shell argument, and on a word that is no shell,
    /// naming the flag it came from (`--prepend-mm-cmds`, `--extra-mm-link-args` or
    /// `--append-mm-cmds`).
    pub fn from_pantheon_flags(
        prepend: &str,
        uplink_trace: &Path,
        downlink_trace: &Path,
        extra_link_args: &str,
        append: &str,
    ) -> Result<Emulator, MmError> {
        let split = |s: &str| s.split_whitespace().map(str::to_owned).collect::<Vec<_>>();
        let (prepend, extra, append) = (split(prepend), split(extra_link_args), split(append));
        let mut words = prepend.clone();
        words.extend([
            "mm-link".to_owned(),
            uplink_trace.display().to_string(),
            downlink_trace.display().to_string(),
        ]);
        words.extend(extra.iter().cloned());
        words.push("--".into());
        words.extend(append);
        let chain = parse_chain(&words)?;
        if let Some(other) = chain.command.first() {
            // The command is the words' tail: where it starts tells which flag held the word.
            let at = words.len() - chain.command.len();
            let flag = if at < prepend.len() {
                "--prepend-mm-cmds"
            } else if at < prepend.len() + 3 + extra.len() {
                "--extra-mm-link-args"
            } else {
                "--append-mm-cmds"
            };
            return Err(MmError::Syntax(format!(
                "unknown Mahimahi shell `{other}` in {flag} (supported: {SHELL_NAMES})"
            )));
        }
        Ok(Emulator::new(chain.shells))
    }

    /// Pantheon's flags for this path: the shells before the first mm-link, its traces and
    /// options, the shells after it. `None` for a chain without mm-link.
    pub fn pantheon_flags(&self) -> Option<PantheonFlags> {
        let at = self
            .shells
            .iter()
            .position(|s| matches!(s, Shell::Link(_)))?;
        let Shell::Link(link) = &self.shells[at] else {
            unreachable!("found above")
        };
        let join = |shells: &[Shell]| {
            let words: Vec<String> = shells.iter().flat_map(Shell::words).collect();
            words.join(" ")
        };
        Some(PantheonFlags {
            prepend_mm_cmds: join(&self.shells[..at]),
            uplink_trace: link.uplink_trace.clone(),
            downlink_trace: link.downlink_trace.clone(),
            extra_mm_link_args: link.option_words().join(" "),
            append_mm_cmds: join(&self.shells[at + 1..]),
        })
    }

    /// The chain as Mahimahi's words ([`Shell::words`] of each shell).
    pub fn words(&self) -> Vec<String> {
        self.shells.iter().flat_map(Shell::words).collect()
    }

    /// The chain as one line, for people: `mm-delay 28 mm-link 12mbps.trace 12mbps.trace
    /// --uplink-queue=droptail --uplink-queue-args=packets=50`.
    pub fn command_line(&self) -> String {
        self.words().join(" ")
    }

    /// The same path with every relative trace file taken relative to `dir` (a preset's
    /// `100.42mbps.trace` written into the results directory).
    pub fn with_traces_in(&self, dir: &Path) -> Emulator {
        self.map_traces(|t| dir.join(t))
    }

    /// The same path with every trace file inside `dir` named relative to it (a results
    /// directory's default trace: `12mbps.trace`), so that a record of it stays true when
    /// `dir` is moved; other traces are left as they are.
    pub fn with_traces_relative_to(&self, dir: &Path) -> Emulator {
        self.map_traces(|t| t.strip_prefix(dir).unwrap_or(t).to_owned())
    }

    /// The same path with every file it reads — each mm-link's uplink and downlink trace, each
    /// schedule file — replaced by `rename(file)`.
    pub fn map_traces(&self, mut rename: impl FnMut(&Path) -> PathBuf) -> Emulator {
        self.try_map_traces(|t| Ok::<_, std::convert::Infallible>(rename(t)))
            .unwrap_or_else(|never| match never {})
    }

    /// [`Emulator::map_traces`] with a `rename` that may fail: its first error.
    pub fn try_map_traces<E>(
        &self,
        mut rename: impl FnMut(&Path) -> Result<PathBuf, E>,
    ) -> Result<Emulator, E> {
        let mut e = self.clone();
        for shell in &mut e.shells {
            match shell {
                Shell::Link(l) => {
                    for t in [&mut l.uplink_trace, &mut l.downlink_trace] {
                        *t = rename(t)?;
                    }
                }
                Shell::Schedule { file, .. } => *file = rename(file)?,
                _ => {}
            }
        }
        Ok(e)
    }

    /// The path ready to run ([`EmulatedPath::load`]): traces and schedules read; errors name a
    /// missing or malformed file (and line).
    pub fn load(&self) -> Result<EmulatedPath, MmError> {
        EmulatedPath::load(self.shells.clone(), Vec::new())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mm::{LinkDirection, LinkShell};
    use crate::queue::{Limits, QueueSpec};

    fn flags(prepend: &str, extra: &str, append: &str) -> Result<Emulator, String> {
        let t = Path::new("10mbps.trace");
        Emulator::from_pantheon_flags(prepend, t, t, extra, append).map_err(|e| e.to_string())
    }

    #[test]
    fn unknown_shell_names_its_flag() {
        let e = flags("mm-foo 3", "", "").unwrap_err();
        assert!(e.contains("`mm-foo` in --prepend-mm-cmds"), "{e}");
        let e = flags(
            "mm-delay 28 mm-foo 3",
            "--uplink-queue=droptail",
            "mm-delay 1",
        )
        .unwrap_err();
        assert!(e.contains("`mm-foo` in --prepend-mm-cmds"), "{e}");
        let e = flags("mm-delay 28", "droptail", "").unwrap_err();
        assert!(e.contains("`droptail` in --extra-mm-link-args"), "{e}");
        let e = flags("mm-delay 28", "", "mm-delay 2 mm-bar").unwrap_err();
        assert!(e.contains("`mm-bar` in --append-mm-cmds"), "{e}");
        let e = flags(
            "",
            "--uplink-queue=droptail --uplink-queue-args=packets=5",
            "mm-bar",
        )
        .unwrap_err();
        assert!(e.contains("`mm-bar` in --append-mm-cmds"), "{e}");
    }

    #[test]
    fn pantheon_flags_render_what_was_parsed() {
        let (prepend, extra, append) = (
            "mm-delay 28 mm-loss uplink 0.004",
            "--uplink-queue=droptail --uplink-queue-args=packets=50",
            "mm-delay 2",
        );
        let e = flags(prepend, extra, append).unwrap();
        let f = e.pantheon_flags().unwrap();
        assert_eq!(
            (
                f.prepend_mm_cmds.as_str(),
                f.extra_mm_link_args.as_str(),
                f.append_mm_cmds.as_str()
            ),
            (prepend, extra, append)
        );
        assert_eq!(f.uplink_trace, Path::new("10mbps.trace"));
        assert_eq!(
            e.command_line(),
            format!("{prepend} mm-link 10mbps.trace 10mbps.trace {extra} {append}")
        );
        // Built from values, the same emulator.
        let mut link = LinkShell::new("10mbps.trace".into(), "10mbps.trace".into());
        link.uplink_queue = QueueSpec::DropTail(Limits {
            packets: Some(50),
            bytes: None,
        });
        let typed = Emulator::new(vec![
            Shell::Delay { ms: 28 },
            Shell::Loss {
                direction: LinkDirection::Uplink,
                rate: 0.004,
            },
            Shell::Link(Box::new(link)),
            Shell::Delay { ms: 2 },
        ]);
        assert_eq!(typed, e);
        // Its serde form reads back as the same emulator.
        let json = serde_json::to_string(&typed).unwrap();
        assert_eq!(serde_json::from_str::<Emulator>(&json).unwrap(), typed);
        assert!(Emulator::new(vec![Shell::Delay { ms: 1 }])
            .pantheon_flags()
            .is_none());
    }

    #[test]
    fn traces_are_read_when_loaded_and_placed_in_a_directory() {
        let e = flags("mm-delay 28", "", "").unwrap();
        let dir = std::env::temp_dir().join(format!("emulator-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let err = e.with_traces_in(&dir).load().unwrap_err().to_string();
        assert!(
            err.contains(&dir.join("10mbps.trace").display().to_string()),
            "{err}"
        );
        std::fs::write(dir.join("10mbps.trace"), "1\n2\n3\n4\n6\n").unwrap();
        let path = e.with_traces_in(&dir).load().unwrap();
        let _ = std::fs::remove_dir_all(&dir);
        let Shell::Link(l) = &path.shells[1] else {
            panic!("second shell is mm-link")
        };
        assert_eq!(l.uplink.opportunities_ms, [1, 2, 3, 4, 6]);
        assert_eq!(l.enclosing_prefix, "[delay 28 ms] ");
        assert!(path.command_line.starts_with("mm-delay 28 mm-link /"));
    }
}
