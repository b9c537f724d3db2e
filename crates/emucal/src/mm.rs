//! Mahimahi's command vocabulary, as Pantheon users write it: `--prepend-mm-cmds "mm-delay 28
//! mm-loss uplink 0.004"`, the two traces, `--extra-mm-link-args "--uplink-queue=droptail
//! --uplink-queue-args=packets=50"` and `--append-mm-cmds`, turned into an [`EmulatedPath`]:
//! the chain of shells from outermost to innermost.
//!
//! Directions follow Mahimahi: *uplink* is traffic leaving the innermost shell (in a Pantheon
//! local run, the sender's data), *downlink* traffic entering it (ACKs). An uplink packet crosses
//! the innermost shell first; a downlink packet the outermost first (`mahimahi.md` §2.5).

use std::path::{Path, PathBuf};

use crate::queue::QueueSpec;
use crate::stage::{AnyStage, DelayStage, LinkStage, LossStage, Pipeline, MS};
use crate::trace::{Trace, TraceError};

/// Errors in an emulator description, each naming the offending word or file.
#[derive(Debug, thiserror::Error)]
pub enum MmError {
    /// A word that is not a known shell, or a malformed argument.
    #[error("{0}")]
    Syntax(String),
    /// A trace file is missing or malformed.
    #[error(transparent)]
    Trace(#[from] TraceError),
}

/// One direction of a shell.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub enum LinkDirection {
    /// Leaving the innermost shell (sender → receiver in Pantheon's local mode).
    Uplink,
    /// Entering it.
    Downlink,
}

/// One Mahimahi shell.
#[derive(Debug, Clone, serde::Serialize)]
pub enum Shell {
    /// `mm-delay DELAY_MS`: this one-way delay in each direction.
    Delay {
        /// One-way delay, ms.
        ms: u64,
    },
    /// `mm-loss uplink|downlink RATE`.
    Loss {
        /// The direction that loses packets.
        direction: LinkDirection,
        /// Drop probability per packet, 0–1.
        rate: f64,
    },
    /// `mm-link UP DOWN [options]`.
    Link {
        /// Uplink trace file.
        uplink_trace: PathBuf,
        /// Downlink trace file.
        downlink_trace: PathBuf,
        /// Parsed uplink trace.
        #[serde(skip)]
        uplink: Trace,
        /// Parsed downlink trace.
        #[serde(skip)]
        downlink: Trace,
        /// Uplink queue.
        uplink_queue: QueueSpec,
        /// Downlink queue.
        downlink_queue: QueueSpec,
    },
}

/// The emulated path: shells from outermost to innermost.
#[derive(Debug, Clone, serde::Serialize)]
pub struct EmulatedPath {
    /// The shells, outermost first.
    pub shells: Vec<Shell>,
    /// The command line as Mahimahi would be invoked, for reports.
    pub command_line: String,
}

/// Parses a sequence of shells written as Mahimahi commands (`mm-delay 28 mm-loss uplink 0.1`).
pub fn parse_shells(text: &str) -> Result<Vec<Shell>, MmError> {
    let words: Vec<&str> = text.split_whitespace().collect();
    let mut shells = Vec::new();
    let mut i = 0;
    let syntax = |m: String| MmError::Syntax(m);
    while i < words.len() {
        match words[i] {
            "mm-delay" => {
                let arg = words
                    .get(i + 1)
                    .ok_or_else(|| syntax("mm-delay needs DELAY_MS (one-way delay, ms)".into()))?;
                let ms = arg.parse::<u64>().map_err(|_| {
                    syntax(format!(
                        "mm-delay: `{arg}` is not a non-negative integer number of ms"
                    ))
                })?;
                shells.push(Shell::Delay { ms });
                i += 2;
            }
            "mm-loss" => {
                let dir = words.get(i + 1).copied().unwrap_or("");
                let direction = match dir {
                    "uplink" => LinkDirection::Uplink,
                    "downlink" => LinkDirection::Downlink,
                    _ => {
                        return Err(syntax(format!(
                            "mm-loss: direction must be `uplink` or `downlink`, got `{dir}`"
                        )))
                    }
                };
                let arg = words.get(i + 2).copied().unwrap_or("");
                let rate = arg
                    .parse::<f64>()
                    .ok()
                    .filter(|r| (0.0..=1.0).contains(r))
                    .ok_or_else(|| {
                        syntax(format!(
                            "mm-loss: rate must be a number in [0, 1], got `{arg}`"
                        ))
                    })?;
                shells.push(Shell::Loss { direction, rate });
                i += 3;
            }
            "mm-link" => {
                return Err(syntax(
                    "mm-link goes in --uplink-trace/--downlink-trace/--extra-mm-link-args, not in \
                     --prepend-mm-cmds/--append-mm-cmds"
                        .into(),
                ))
            }
            other => {
                return Err(syntax(format!(
                    "unknown Mahimahi shell `{other}` (supported: mm-delay, mm-loss; mm-link is \
                     given by the trace flags)"
                )))
            }
        }
    }
    Ok(shells)
}

/// Parses `--extra-mm-link-args` into (uplink queue, downlink queue).
pub fn parse_link_args(text: &str) -> Result<(QueueSpec, QueueSpec), MmError> {
    let mut kinds = [String::from("infinite"), String::from("infinite")];
    let mut args = [String::new(), String::new()];
    let words: Vec<&str> = text.split_whitespace().collect();
    let mut i = 0;
    while i < words.len() {
        let w = words[i];
        let (name, value) = match w.split_once('=') {
            Some((n, v)) => (n, v.to_owned()),
            None => {
                i += 1;
                (w, words.get(i).copied().unwrap_or("").to_owned())
            }
        };
        match name {
            "--uplink-queue" => kinds[0] = value,
            "--downlink-queue" => kinds[1] = value,
            "--uplink-queue-args" => args[0] = value,
            "--downlink-queue-args" => args[1] = value,
            other => {
                return Err(MmError::Syntax(format!(
                    "mm-link option `{other}` is not supported (supported: --uplink-queue, \
                     --downlink-queue, --uplink-queue-args, --downlink-queue-args)"
                )))
            }
        }
        i += 1;
    }
    let up = QueueSpec::parse(&kinds[0], &args[0]).map_err(MmError::Syntax)?;
    let down = QueueSpec::parse(&kinds[1], &args[1]).map_err(MmError::Syntax)?;
    Ok((up, down))
}

impl EmulatedPath {
    /// Builds the path Pantheon's `setup_mm_cmd` would run:
    /// `[prepend…] mm-link UP DOWN [extra…] [append…]`.
    pub fn from_pantheon_flags(
        prepend: &str,
        uplink_trace: &Path,
        downlink_trace: &Path,
        extra_link_args: &str,
        append: &str,
    ) -> Result<EmulatedPath, MmError> {
        let mut shells = parse_shells(prepend)?;
        let (uplink_queue, downlink_queue) = parse_link_args(extra_link_args)?;
        shells.push(Shell::Link {
            uplink_trace: uplink_trace.to_owned(),
            downlink_trace: downlink_trace.to_owned(),
            uplink: Trace::load(uplink_trace)?,
            downlink: Trace::load(downlink_trace)?,
            uplink_queue,
            downlink_queue,
        });
        shells.extend(parse_shells(append)?);
        let link = format!(
            "mm-link {} {}",
            uplink_trace.display(),
            downlink_trace.display()
        );
        let parts: Vec<&str> = [prepend.trim(), &link, extra_link_args.trim(), append.trim()]
            .into_iter()
            .filter(|p| !p.is_empty())
            .collect();
        Ok(EmulatedPath {
            shells,
            command_line: parts.join(" "),
        })
    }

    /// The stages of one direction, in crossing order; loss generators seeded from `seed`.
    pub fn pipeline(&self, direction: LinkDirection, seed: u64) -> Pipeline {
        let ordered: Vec<(usize, &Shell)> = match direction {
            LinkDirection::Uplink => self.shells.iter().enumerate().rev().collect(),
            LinkDirection::Downlink => self.shells.iter().enumerate().collect(),
        };
        let mut stages = Vec::new();
        for (i, shell) in ordered {
            match shell {
                Shell::Delay { ms } => stages.push(AnyStage::Delay(DelayStage::new(ms * MS))),
                Shell::Loss { direction: d, rate } if *d == direction && *rate > 0.0 => {
                    let stream = (i as u64) << 1 | (direction == LinkDirection::Downlink) as u64;
                    stages.push(AnyStage::Loss(LossStage::new(
                        *rate,
                        seed ^ stream.wrapping_mul(0x9E37_79B9_7F4A_7C15),
                    )))
                }
                Shell::Loss { .. } => {}
                Shell::Link {
                    uplink,
                    downlink,
                    uplink_queue,
                    downlink_queue,
                    ..
                } => {
                    let (trace, queue) = match direction {
                        LinkDirection::Uplink => (uplink, *uplink_queue),
                        LinkDirection::Downlink => (downlink, *downlink_queue),
                    };
                    stages.push(AnyStage::Link(LinkStage::new(trace, queue)));
                }
            }
        }
        Pipeline::new(stages)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_pantheon_strings_and_names_bad_words() {
        let s = parse_shells("mm-delay 28 mm-loss uplink 0.004 mm-loss downlink 0.004").unwrap();
        assert_eq!(s.len(), 3);
        assert!(matches!(s[0], Shell::Delay { ms: 28 }));
        let e = parse_shells("mm-delay 28 mm-jitter 3")
            .unwrap_err()
            .to_string();
        assert!(e.contains("`mm-jitter`"), "{e}");
        assert!(parse_shells("mm-delay x")
            .unwrap_err()
            .to_string()
            .contains("`x`"));
        assert!(parse_shells("mm-loss sideways 0.1").is_err());
        assert!(parse_shells("mm-loss uplink 1.5").is_err());
        let (up, down) =
            parse_link_args("--uplink-queue=droptail --uplink-queue-args=packets=50").unwrap();
        assert_eq!(
            up,
            QueueSpec::DropTail {
                packets: Some(50),
                bytes: None
            }
        );
        assert_eq!(down, QueueSpec::Infinite);
        let (up, _) =
            parse_link_args("--uplink-queue droptail --uplink-queue-args bytes=9000").unwrap();
        assert!(matches!(
            up,
            QueueSpec::DropTail {
                bytes: Some(9000),
                ..
            }
        ));
        assert!(parse_link_args("--meter-uplink")
            .unwrap_err()
            .to_string()
            .contains("--meter-uplink"));
    }

    #[test]
    fn uplink_crosses_innermost_first() {
        let dir = std::env::temp_dir().join(format!("mmtest-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let trace = dir.join("10mbps.trace");
        std::fs::write(&trace, "1\n2\n3\n4\n6\n").unwrap();
        let path =
            EmulatedPath::from_pantheon_flags("mm-delay 28", &trace, &trace, "", "").unwrap();
        assert!(path.command_line.starts_with("mm-delay 28 mm-link "));
        // Uplink: link (opportunity at 1 ms) then 28 ms delay → 29 ms.
        let mut up = path.pipeline(LinkDirection::Uplink, 1);
        up.push(0, vec![0u8; 1500]);
        up.advance(29 * MS);
        assert_eq!(up.pop().map(|p| p.0), Some(29 * MS));
        // Downlink: 28 ms delay, then the first opportunity strictly after 28 ms: the trace
        // gives 25 26 27 28 30 in its fifth period, so 30 ms.
        let mut down = path.pipeline(LinkDirection::Downlink, 1);
        down.push(0, vec![0u8; 1500]);
        down.advance(29 * MS);
        assert!(down.pop().is_none());
        down.advance(30 * MS);
        assert_eq!(down.pop().map(|p| p.0), Some(30 * MS));
        let missing = EmulatedPath::from_pantheon_flags("", &dir.join("nope"), &trace, "", "");
        assert!(missing.unwrap_err().to_string().contains("nope"));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
