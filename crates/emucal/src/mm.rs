//! Mahimahi's command vocabulary: the words of a chain of shells (`mm-delay 28 mm-loss uplink
//! 0.004 mm-link up.trace down.trace --uplink-queue=droptail --uplink-queue-args=packets=50`)
//! parsed into [`Shell`]s ([`parse_chain`]) and rendered back ([`Shell::words`]), and the
//! runnable [`EmulatedPath`] a chain is loaded into ([`EmulatedPath::load`]). Pantheon's
//! `--prepend-mm-cmds`/`--extra-mm-link-args`/`--append-mm-cmds` flags and the typed emulator
//! built from them are [`crate::emulator`]'s.
//!
//! Directions follow Mahimahi: *uplink* is traffic leaving the innermost shell (in a Pantheon
//! local run, the sender's data), *downlink* traffic entering it (ACKs). An uplink packet crosses
//! the innermost shell first; a downlink packet the outermost first (`mahimahi.md` §2.5).

use std::path::{Path, PathBuf};

use crate::cross::CrossTraffic;
use crate::host::{HostLimits, HostSide};
use crate::queue::QueueSpec;
use crate::reactive::CrossFlows;
use crate::schedule::{Schedule, ScheduleKind};
use crate::stage::{
    AggregateStage, AnyStage, DelayStage, FlowDelay, FlowDelayStage, LinkStage, LossStage,
    Pipeline, PolicerStage, SwitchStage, MS,
};
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
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum LinkDirection {
    /// Leaving the innermost shell (sender → receiver in Pantheon's local mode).
    Uplink,
    /// Entering it.
    Downlink,
}

impl LinkDirection {
    /// `uplink` / `downlink`, as Mahimahi's shells take it.
    pub fn word(self) -> &'static str {
        match self {
            LinkDirection::Uplink => "uplink",
            LinkDirection::Downlink => "downlink",
        }
    }

    /// `Uplink` / `Downlink`, as in mm-link's log header.
    pub fn title(self) -> &'static str {
        match self {
            LinkDirection::Uplink => "Uplink",
            LinkDirection::Downlink => "Downlink",
        }
    }
}

/// One Mahimahi shell. As data (serde), it is what [`crate::emulator::Emulator`] is made of;
/// [`Shell::words`] renders it as Mahimahi's words and [`parse_chain`] reads them back.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
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
    /// `mm-onoff` (exponential periods) or `mm-intermittent` (periodic)
    /// `uplink|downlink MEAN_ON_S MEAN_OFF_S`: packets arriving while off are dropped.
    Switch {
        /// The direction that switches.
        direction: LinkDirection,
        /// Mean time on, s.
        mean_on_s: f64,
        /// Mean time off, s.
        mean_off_s: f64,
        /// `mm-onoff` (true) or `mm-intermittent` (false).
        random: bool,
    },
    /// `mm-link UP DOWN [options]`.
    Link(Box<LinkShell>),
    /// `pt-delay uplink|downlink DELAY_MS` (ours): a one-way delay in one direction only, for
    /// paths whose two directions differ (iBoxNet's profiles give one per direction).
    OneWayDelay {
        /// The direction that is delayed.
        direction: LinkDirection,
        /// One-way delay, ms.
        ms: u64,
    },
    /// `pt-delay-schedule uplink|downlink FILE` and `pt-loss-schedule uplink|downlink FILE`
    /// (ours): one direction's one-way delay or loss rate changing over time, as the schedule
    /// file says ([`crate::schedule`]). The file is read when the path is loaded.
    Schedule {
        /// Delay or loss.
        kind: ScheduleKind,
        /// The direction it applies to.
        direction: LinkDirection,
        /// The schedule file.
        file: PathBuf,
        /// Its steps, once loaded ([`EmulatedPath::load`]); empty before.
        #[serde(skip)]
        schedule: Schedule,
    },
    /// `pt-policer uplink|downlink RATE_MBPS BURST_BYTES` (ours, not Mahimahi's): a
    /// token-bucket policer ([`PolicerStage`]).
    Policer {
        /// The direction that is policed.
        direction: LinkDirection,
        /// Token rate, Mbit/s (of IP bytes).
        rate_mbps: f64,
        /// Bucket size, bytes.
        burst_bytes: u64,
    },
    /// `pt-aggregate uplink|downlink INTERVAL_MS` (ours): packets leave in bursts every
    /// INTERVAL_MS ([`AggregateStage`]); on the downlink of a Pantheon run, ACK aggregation.
    Aggregate {
        /// The direction that is aggregated.
        direction: LinkDirection,
        /// Release interval, ms (> 0, fractions allowed).
        interval_ms: f64,
    },
    /// `pt-host sender|receiver|both tcp_rmem=MIN,DEFAULT,MAX tcp_wmem=…` (ours): the end
    /// hosts' TCP buffer limits, set in the run's namespaces ([`crate::host`]). No stage: no
    /// packet crosses it, and its place in the chain does not matter.
    Host {
        /// The host(s) it applies to.
        side: HostSide,
        /// The limits; those it leaves `None` stay the machine's.
        limits: HostLimits,
    },
}

/// How an mm-link direction schedules its delivery opportunities.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
pub enum Delivery {
    /// At the trace's times, repeating (Mahimahi).
    #[default]
    Trace,
    /// A Poisson process at the trace's mean rate (ours: `--uplink-delivery=poisson`).
    Poisson,
    /// Evenly spaced at the trace's mean rate, ns resolution (ours: `--uplink-delivery=even`):
    /// a constant-rate wire instead of whole milliseconds' opportunities at once.
    Even,
}

/// Format of mm-link's `--uplink-log`/`--downlink-log` files.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
pub enum LogFormat {
    /// Mahimahi's text (`T + LEN` …, whole ms).
    #[default]
    Mahimahi,
    /// Our fixed-size binary records with ns times (`--log-format=binary`, see `linklog`).
    Binary,
}

/// `mm-link UPLINK_TRACE DOWNLINK_TRACE [--uplink-queue=… --uplink-queue-args=… --once
/// --uplink-log=FILE --downlink-log=FILE]`.
///
/// The traces are named by file; their opportunities (`uplink`, `downlink`), the log header's
/// `argv` and `enclosing_prefix` are filled when the path is loaded ([`EmulatedPath::load`])
/// and are not part of the shell's serde form.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct LinkShell {
    /// Uplink trace file.
    pub uplink_trace: PathBuf,
    /// Downlink trace file.
    pub downlink_trace: PathBuf,
    /// Parsed uplink trace (empty until loaded).
    #[serde(skip)]
    pub uplink: Trace,
    /// Parsed downlink trace (empty until loaded).
    #[serde(skip)]
    pub downlink: Trace,
    /// Uplink queue.
    pub uplink_queue: QueueSpec,
    /// Downlink queue.
    pub downlink_queue: QueueSpec,
    /// `--once`: one pass over the traces, then the shell ends.
    pub once: bool,
    /// `--uplink-log=FILE`.
    pub uplink_log: Option<PathBuf>,
    /// `--downlink-log=FILE`.
    pub downlink_log: Option<PathBuf>,
    /// `--uplink-delivery=trace|poisson|even` (ours).
    pub uplink_delivery: Delivery,
    /// `--downlink-delivery=trace|poisson|even` (ours).
    pub downlink_delivery: Delivery,
    /// `--log-format=mahimahi|binary` (ours) for both logs.
    pub log_format: LogFormat,
    /// `--uplink-cross-traffic=MBPS[,MBPS…]` (ours): non-reactive cross traffic on the
    /// uplink ([`crate::cross`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uplink_cross: Option<CrossTraffic>,
    /// `--downlink-cross-traffic=MBPS[,MBPS…]` (ours).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub downlink_cross: Option<CrossTraffic>,
    /// `--uplink-cross-flows=N,RTT_MS[,START_S]` (ours): reactive cross traffic on the uplink,
    /// N Reno flows ([`crate::reactive`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uplink_cross_flows: Option<CrossFlows>,
    /// `--downlink-cross-flows=N,RTT_MS[,START_S]` (ours).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub downlink_cross_flows: Option<CrossFlows>,
    /// The shell's own argv as Mahimahi would see it (`mm-link` …, the shells inside it, the
    /// command), for log headers; empty until loaded.
    #[serde(skip)]
    pub argv: Vec<String>,
    /// `MAHIMAHI_SHELL_PREFIX` of the shells around it (`[delay 28 ms] `), for log headers;
    /// empty until loaded.
    #[serde(skip)]
    pub enclosing_prefix: String,
}

impl LinkShell {
    /// `mm-link UPLINK_TRACE DOWNLINK_TRACE` with mm-link's defaults: infinite queues, trace
    /// delivery, no logs, Mahimahi's log format. The traces are read when the path is loaded.
    pub fn new(uplink_trace: PathBuf, downlink_trace: PathBuf) -> LinkShell {
        LinkShell {
            uplink_trace,
            downlink_trace,
            uplink: Trace::default(),
            downlink: Trace::default(),
            uplink_queue: QueueSpec::Infinite,
            downlink_queue: QueueSpec::Infinite,
            once: false,
            uplink_log: None,
            downlink_log: None,
            uplink_delivery: Delivery::Trace,
            downlink_delivery: Delivery::Trace,
            log_format: LogFormat::Mahimahi,
            uplink_cross: None,
            downlink_cross: None,
            uplink_cross_flows: None,
            downlink_cross_flows: None,
            argv: Vec::new(),
            enclosing_prefix: String::new(),
        }
    }

    /// mm-link's options that differ from its defaults, as words in [`parse_chain`]'s
    /// vocabulary (Pantheon's `--extra-mm-link-args`): `--uplink-queue=droptail
    /// --uplink-queue-args=packets=50 --uplink-delivery=poisson` …
    pub fn option_words(&self) -> Vec<String> {
        let mut w = Vec::new();
        for (name, q) in [
            ("uplink", self.uplink_queue),
            ("downlink", self.downlink_queue),
        ] {
            if q != QueueSpec::Infinite {
                w.push(format!("--{name}-queue={}", q.kind()));
                w.push(format!("--{name}-queue-args={}", q.args()));
            }
        }
        if self.once {
            w.push("--once".into());
        }
        for (name, log) in [
            ("uplink", &self.uplink_log),
            ("downlink", &self.downlink_log),
        ] {
            if let Some(log) = log {
                w.push(format!("--{name}-log={}", log.display()));
            }
        }
        for (name, d) in [
            ("uplink", self.uplink_delivery),
            ("downlink", self.downlink_delivery),
        ] {
            match d {
                Delivery::Trace => {}
                Delivery::Poisson => w.push(format!("--{name}-delivery=poisson")),
                Delivery::Even => w.push(format!("--{name}-delivery=even")),
            }
        }
        if self.log_format == LogFormat::Binary {
            w.push("--log-format=binary".into());
        }
        for (name, cross) in [
            ("uplink", &self.uplink_cross),
            ("downlink", &self.downlink_cross),
        ] {
            if let Some(c) = cross {
                w.push(format!("--{name}-cross-traffic={}", c.words()));
            }
        }
        for (name, flows) in [
            ("uplink", &self.uplink_cross_flows),
            ("downlink", &self.downlink_cross_flows),
        ] {
            if let Some(f) = flows {
                w.push(format!("--{name}-cross-flows={}", f.words()));
            }
        }
        w
    }

    /// Trace, queue, log file, trace file, delivery and cross traffic (both kinds) of one
    /// direction.
    pub fn direction(&self, d: LinkDirection) -> LinkSide<'_> {
        match d {
            LinkDirection::Uplink => LinkSide {
                trace: &self.uplink,
                queue: self.uplink_queue,
                log: self.uplink_log.as_deref(),
                trace_path: &self.uplink_trace,
                delivery: self.uplink_delivery,
                cross: self.uplink_cross.as_ref(),
                cross_flows: self.uplink_cross_flows.as_ref(),
            },
            LinkDirection::Downlink => LinkSide {
                trace: &self.downlink,
                queue: self.downlink_queue,
                log: self.downlink_log.as_deref(),
                trace_path: &self.downlink_trace,
                delivery: self.downlink_delivery,
                cross: self.downlink_cross.as_ref(),
                cross_flows: self.downlink_cross_flows.as_ref(),
            },
        }
    }
}

/// One direction of an mm-link ([`LinkShell::direction`]).
#[derive(Debug, Clone, Copy)]
pub struct LinkSide<'a> {
    /// Its parsed trace.
    pub trace: &'a Trace,
    /// Its queue.
    pub queue: QueueSpec,
    /// Its log file, if any.
    pub log: Option<&'a Path>,
    /// Its trace file.
    pub trace_path: &'a Path,
    /// Its opportunity schedule.
    pub delivery: Delivery,
    /// Its cross traffic, if any.
    pub cross: Option<&'a CrossTraffic>,
    /// Its reactive cross flows, if any.
    pub cross_flows: Option<&'a CrossFlows>,
}

impl Shell {
    /// The shell as Mahimahi's words, without its command: `["mm-delay", "28"]`,
    /// `["mm-link", "up.trace", "down.trace", "--uplink-queue=droptail", …]`. The inverse of
    /// [`parse_chain`]: parsing the words gives this shell back. Numbers are written in their
    /// shortest exact form (`0.0477`, `12`).
    pub fn words(&self) -> Vec<String> {
        let program = self.program().to_owned();
        match self {
            Shell::Delay { ms } => vec![program, ms.to_string()],
            Shell::OneWayDelay { direction, ms } => {
                vec![program, direction.word().into(), ms.to_string()]
            }
            Shell::Loss { direction, rate } => {
                vec![program, direction.word().into(), rate.to_string()]
            }
            Shell::Schedule {
                direction, file, ..
            } => vec![program, direction.word().into(), file.display().to_string()],
            Shell::Switch {
                direction,
                mean_on_s,
                mean_off_s,
                ..
            } => vec![
                program,
                direction.word().into(),
                mean_on_s.to_string(),
                mean_off_s.to_string(),
            ],
            Shell::Link(l) => {
                let mut w = vec![
                    program,
                    l.uplink_trace.display().to_string(),
                    l.downlink_trace.display().to_string(),
                ];
                w.extend(l.option_words());
                w
            }
            Shell::Policer {
                direction,
                rate_mbps,
                burst_bytes,
            } => vec![
                program,
                direction.word().into(),
                rate_mbps.to_string(),
                burst_bytes.to_string(),
            ],
            Shell::Aggregate {
                direction,
                interval_ms,
            } => vec![program, direction.word().into(), interval_ms.to_string()],
            Shell::Host { side, limits } => {
                let mut w = vec![program, side.word().into()];
                w.extend(limits.words());
                w
            }
        }
    }

    /// The shell's program name (`mm-delay`, …, `pt-policer`).
    pub fn program(&self) -> &'static str {
        match self {
            Shell::Delay { .. } => "mm-delay",
            Shell::Loss { .. } => "mm-loss",
            Shell::Switch { random: true, .. } => "mm-onoff",
            Shell::Switch { random: false, .. } => "mm-intermittent",
            Shell::Link(_) => "mm-link",
            Shell::OneWayDelay { .. } => "pt-delay",
            Shell::Schedule { kind, .. } => kind.program(),
            Shell::Policer { .. } => "pt-policer",
            Shell::Aggregate { .. } => "pt-aggregate",
            Shell::Host { .. } => "pt-host",
        }
    }

    /// What the shell appends to `MAHIMAHI_SHELL_PREFIX` (`[delay 28 ms] `, `[link] `).
    pub fn prefix(&self) -> String {
        let dir = |d: &LinkDirection| match d {
            LinkDirection::Uplink => "up",
            LinkDirection::Downlink => "down",
        };
        match self {
            Shell::Delay { ms } => format!("[delay {ms} ms] "),
            Shell::OneWayDelay { direction, ms } => format!("[delay {}={ms} ms] ", dir(direction)),
            Shell::Loss { direction, rate } => format!("[loss {}={rate}] ", dir(direction)),
            Shell::Schedule {
                kind, direction, ..
            } => format!(
                "[{} schedule {}] ",
                match kind {
                    ScheduleKind::Delay => "delay",
                    ScheduleKind::Loss => "loss",
                },
                dir(direction)
            ),
            Shell::Switch {
                direction, random, ..
            } => format!(
                "[{} {}] ",
                if *random { "onoff" } else { "intermittent" },
                dir(direction)
            ),
            Shell::Link(_) => "[link] ".into(),
            Shell::Policer {
                direction,
                rate_mbps,
                burst_bytes,
            } => format!(
                "[policer {}={rate_mbps}Mbps/{burst_bytes}B] ",
                dir(direction)
            ),
            Shell::Aggregate {
                direction,
                interval_ms,
            } => format!("[aggregate {}={interval_ms}ms] ", dir(direction)),
            // Not a shell packets cross: Mahimahi's headers stay as they would be.
            Shell::Host { .. } => String::new(),
        }
    }
}

/// The emulated path, ready to run: shells from outermost to innermost with every mm-link's
/// traces read ([`EmulatedPath::load`]; the description it is loaded from is
/// [`crate::emulator::Emulator`]).
#[derive(Debug, Clone, serde::Serialize)]
pub struct EmulatedPath {
    /// The shells, outermost first.
    pub shells: Vec<Shell>,
    /// The chain as Mahimahi would be invoked (without the command), for reports.
    pub command_line: String,
    /// The command run in the innermost shell, for mm-link's log headers (empty in an
    /// experiment, whose programs the runner starts itself).
    pub command: Vec<String>,
    /// `--ms-clock`: stages see time on Mahimahi's integer-ms clock.
    pub ms_clock: bool,
    /// Flows given an extra one-way delay of their own, in each direction before every shell
    /// (a mixed experiment's `+DELAY`; [`EmulatedPath::with_flow_delays`]); empty: none.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub flow_delays: Vec<FlowDelay>,
}

/// A parsed chain of shells and the command to run in the innermost one (empty: none given).
#[derive(Debug, Clone)]
pub struct Chain {
    /// The shells, outermost first.
    pub shells: Vec<Shell>,
    /// The command words after the chain.
    pub command: Vec<String>,
}

/// Quotes one argument as Mahimahi's log header does (and a shell reads it): `'arg'`, with
/// `'` written `'\''`.
pub fn quote(arg: &str) -> String {
    format!("'{}'", arg.replace('\'', r"'\''"))
}

fn syntax(m: String) -> MmError {
    MmError::Syntax(m)
}

/// mm-link's options that take a value (`--name=V` or `--name V`); the last five are ours.
const LINK_VALUE_OPTIONS: [&str; 13] = [
    "--uplink-queue",
    "--downlink-queue",
    "--uplink-queue-args",
    "--downlink-queue-args",
    "--uplink-log",
    "--downlink-log",
    "--uplink-delivery",
    "--downlink-delivery",
    "--uplink-cross-traffic",
    "--downlink-cross-traffic",
    "--uplink-cross-flows",
    "--downlink-cross-flows",
    "--log-format",
];

/// The shells [`parse_chain`] knows, for error messages.
pub const SHELL_NAMES: &str =
    "mm-delay, mm-loss, mm-onoff, mm-intermittent, mm-link, pt-delay, pt-delay-schedule, \
     pt-loss-schedule, pt-policer, pt-aggregate, pt-host";

/// `--uplink-cross-traffic=8` or `=8,2.5,0` ([`CrossTraffic::parse`]); errors name the option.
fn parse_cross(name: &str, value: &str) -> Result<CrossTraffic, MmError> {
    CrossTraffic::parse(value).map_err(|e| syntax(format!("mm-link {name}={value}: {e}")))
}

/// `--uplink-cross-flows=1,40` ([`CrossFlows::parse`]); errors name the option.
fn parse_flows(name: &str, value: &str) -> Result<CrossFlows, MmError> {
    CrossFlows::parse(value).map_err(|e| syntax(format!("mm-link {name}={value}: {e}")))
}

fn parse_delivery(name: &str, value: &str) -> Result<Delivery, MmError> {
    match value {
        "trace" => Ok(Delivery::Trace),
        "poisson" => Ok(Delivery::Poisson),
        "even" => Ok(Delivery::Even),
        other => Err(syntax(format!(
            "mm-link {name}: `{other}` is not `trace`, `poisson` or `even`"
        ))),
    }
}

/// A positive finite number, or an error naming the shell and the argument.
pub use crate::queue::MAX_DELAY_MS;

/// A positive number within `[min, max]` (`what` names it and its unit in errors).
fn parse_positive(
    shell: &str,
    what: &str,
    word: Option<&String>,
    (min, max): (f64, f64),
) -> Result<f64, MmError> {
    let w = word.map(String::as_str).unwrap_or("");
    w.parse::<f64>()
        .ok()
        .filter(|v| (min..=max).contains(v))
        .ok_or_else(|| {
            syntax(format!(
                "{shell}: {what} must be a positive number from {min} to {max}, got `{w}`"
            ))
        })
}

fn parse_direction(shell: &str, word: Option<&String>) -> Result<LinkDirection, MmError> {
    match word.map(String::as_str) {
        Some("uplink") => Ok(LinkDirection::Uplink),
        Some("downlink") => Ok(LinkDirection::Downlink),
        other => Err(syntax(format!(
            "{shell}: direction must be `uplink` or `downlink`, got `{}`",
            other.unwrap_or("")
        ))),
    }
}

/// `mm-delay`'s DELAY_MS: an integer number of ms, at most [`MAX_DELAY_MS`].
fn parse_delay_ms(shell: &str, word: Option<&String>) -> Result<u64, MmError> {
    let a = word.ok_or_else(|| syntax(format!("{shell} needs DELAY_MS (one-way delay, ms)")))?;
    a.parse::<u64>()
        .ok()
        .filter(|ms| *ms <= MAX_DELAY_MS)
        .ok_or_else(|| {
            syntax(format!(
                "{shell}: `{a}` is not an integer number of ms from 0 to {MAX_DELAY_MS} (a day)"
            ))
        })
}

/// A mean period of `mm-onoff`/`mm-intermittent`, seconds: 0 (never in that state), or from
/// 1 ms (shorter periods would have the emulator switch without end) to a day.
fn parse_seconds(shell: &str, what: &str, word: Option<&String>) -> Result<f64, MmError> {
    let w = word.map(String::as_str).unwrap_or("");
    let max = MAX_DELAY_MS as f64 / 1000.0;
    w.parse::<f64>()
        .ok()
        .filter(|v| *v == 0.0 || (0.001..=max).contains(v))
        .ok_or_else(|| {
            syntax(format!(
                "{shell}: {what} must be 0 or a number of seconds from 0.001 to {max}, got `{w}`"
            ))
        })
}

/// Parses mm-link's options from `words[i..]`; returns the filled shell's option fields
/// and the index after the last option (a `--` ending them is consumed).
fn parse_link_options(
    words: &[String],
    mut i: usize,
    link: &mut LinkShell,
) -> Result<usize, MmError> {
    let mut kinds = [String::from("infinite"), String::from("infinite")];
    let mut args = [String::new(), String::new()];
    while let Some(w) = words.get(i) {
        if w == "--" {
            i += 1;
            break;
        }
        if !w.starts_with("--") {
            break;
        }
        let (name, value) = match w.split_once('=') {
            Some((n, v)) => (n, Some(v.to_owned())),
            None if LINK_VALUE_OPTIONS.contains(&w.as_str()) => {
                i += 1;
                let v = words
                    .get(i)
                    .ok_or_else(|| syntax(format!("mm-link: {w} needs a value")))?;
                (w.as_str(), Some(v.clone()))
            }
            None => (w.as_str(), None),
        };
        let value = || value.clone().unwrap_or_default();
        match name {
            "--uplink-queue" => kinds[0] = value(),
            "--downlink-queue" => kinds[1] = value(),
            "--uplink-queue-args" => args[0] = value(),
            "--downlink-queue-args" => args[1] = value(),
            "--uplink-log" => link.uplink_log = Some(PathBuf::from(value())),
            "--downlink-log" => link.downlink_log = Some(PathBuf::from(value())),
            "--once" => link.once = true,
            "--uplink-delivery" => link.uplink_delivery = parse_delivery(name, &value())?,
            "--downlink-delivery" => link.downlink_delivery = parse_delivery(name, &value())?,
            "--uplink-cross-traffic" => link.uplink_cross = Some(parse_cross(name, &value())?),
            "--downlink-cross-traffic" => link.downlink_cross = Some(parse_cross(name, &value())?),
            "--uplink-cross-flows" => link.uplink_cross_flows = Some(parse_flows(name, &value())?),
            "--downlink-cross-flows" => {
                link.downlink_cross_flows = Some(parse_flows(name, &value())?)
            }
            "--log-format" => {
                link.log_format = match value().as_str() {
                    "mahimahi" | "text" => LogFormat::Mahimahi,
                    "binary" => LogFormat::Binary,
                    other => {
                        return Err(syntax(format!(
                            "mm-link --log-format: `{other}` is not `mahimahi` or `binary`"
                        )))
                    }
                }
            }
            other if other.starts_with("--meter") => {
                return Err(syntax(format!(
                    "mm-link option `{other}` opens a live X11 window and is not supported; use \
                     --uplink-log/--downlink-log and `pantheon analyze` instead"
                )))
            }
            other => {
                return Err(syntax(format!(
                    "mm-link option `{other}` is not known (options: --uplink-queue, \
                     --downlink-queue, --uplink-queue-args, --downlink-queue-args, --uplink-log, \
                     --downlink-log, --once; ours: --uplink-delivery, --downlink-delivery, \
                     --uplink-cross-traffic, --downlink-cross-traffic, --uplink-cross-flows, \
                     --downlink-cross-flows, --log-format)"
                )))
            }
        }
        i += 1;
    }
    link.uplink_queue = QueueSpec::parse(&kinds[0], &args[0])
        .map_err(|e| syntax(format!("mm-link uplink queue: {e}")))?;
    link.downlink_queue = QueueSpec::parse(&kinds[1], &args[1])
        .map_err(|e| syntax(format!("mm-link downlink queue: {e}")))?;
    Ok(i)
}

/// Parses a chain of Mahimahi shells as argv words, as a user types it after `pantheon shell`:
/// `mm-delay 28 mm-loss uplink 0.004 mm-link up.trace down.trace --uplink-queue=droptail
/// --uplink-queue-args=packets=50 -- iperf3 -c $MAHIMAHI_BASE`. Every shell's command is the
/// rest of the words, as in Mahimahi; the chain ends at the first word that is not a shell
/// (a `--` there is skipped), and the rest is the command. No file is read: trace and schedule
/// files are read when the path is loaded ([`EmulatedPath::load`]).
///
/// Shells: `mm-delay DELAY_MS`, `mm-loss uplink|downlink RATE`, `mm-onoff` and
/// `mm-intermittent uplink|downlink MEAN_ON_S MEAN_OFF_S`, `mm-link UP DOWN [options]`, and
/// ours: `pt-delay uplink|downlink DELAY_MS`, `pt-delay-schedule` and `pt-loss-schedule
/// uplink|downlink FILE` ([`crate::schedule`]), `pt-policer uplink|downlink RATE_MBPS
/// BURST_BYTES`, `pt-aggregate uplink|downlink INTERVAL_MS`, `pt-host sender|receiver|both
/// KEY=MIN,DEFAULT,MAX…` ([`crate::host`]). Errors name the offending word or file.
pub fn parse_chain(words: &[String]) -> Result<Chain, MmError> {
    let mut shells = Vec::new();
    let mut i = 0;
    while let Some(word) = words.get(i) {
        let arg = |k: usize| words.get(i + k);
        let shell = match word.as_str() {
            "mm-delay" => {
                let ms = parse_delay_ms("mm-delay", arg(1))?;
                i += 2;
                Shell::Delay { ms }
            }
            "mm-loss" => {
                let direction = parse_direction("mm-loss", arg(1))?;
                let a = arg(2).map(String::as_str).unwrap_or("");
                let rate = a
                    .parse::<f64>()
                    .ok()
                    .filter(|r| (0.0..=1.0).contains(r))
                    .ok_or_else(|| {
                        syntax(format!(
                            "mm-loss: rate must be a number in [0, 1], got `{a}`"
                        ))
                    })?;
                i += 3;
                Shell::Loss { direction, rate }
            }
            name @ ("mm-onoff" | "mm-intermittent") => {
                let direction = parse_direction(name, arg(1))?;
                let mean_on_s = parse_seconds(name, "MEAN_ON_S", arg(2))?;
                let mean_off_s = parse_seconds(name, "MEAN_OFF_S", arg(3))?;
                if mean_on_s == 0.0 && mean_off_s == 0.0 {
                    return Err(syntax(format!("{name}: on and off times cannot both be 0")));
                }
                i += 4;
                Shell::Switch {
                    direction,
                    mean_on_s,
                    mean_off_s,
                    random: name == "mm-onoff",
                }
            }
            "mm-link" => {
                let (Some(up), Some(down)) = (arg(1), arg(2)) else {
                    return Err(syntax("mm-link needs UPLINK_TRACE DOWNLINK_TRACE".into()));
                };
                let mut link = LinkShell::new(PathBuf::from(up), PathBuf::from(down));
                i = parse_link_options(words, i + 3, &mut link)?;
                Shell::Link(Box::new(link))
            }
            name @ ("pt-policer" | "pt-aggregate" | "pt-delay" | "pt-delay-schedule"
            | "pt-loss-schedule") => {
                let (shell, next) = parse_directional(name, words, i)?;
                i = next;
                shell
            }
            "pt-host" => {
                let (shell, next) = parse_host(words, i)?;
                i = next;
                shell
            }
            _ => break,
        };
        shells.push(shell);
        if words.get(i).is_some_and(|w| w == "--") {
            i += 1;
            break;
        }
    }
    Ok(Chain {
        shells,
        command: words[i.min(words.len())..].to_vec(),
    })
}

/// Our shells of one direction at `words[at]` (`pt-policer uplink 12 15000`, `pt-aggregate
/// downlink 5`, `pt-delay uplink 24`, `pt-delay-schedule uplink FILE`). Returns the shell and the
/// index after it.
fn parse_directional(name: &str, words: &[String], at: usize) -> Result<(Shell, usize), MmError> {
    let arg = |k: usize| words.get(at + k);
    let direction = parse_direction(name, arg(1))?;
    Ok(match name {
        "pt-policer" => {
            let rate_mbps = parse_positive(name, "RATE_MBPS", arg(2), (0.001, 1e6))?;
            let b = arg(3).map(String::as_str).unwrap_or("");
            let burst_bytes = b.parse::<u64>().ok().filter(|b| *b > 0).ok_or_else(|| {
                syntax(format!(
                    "pt-policer: BURST_BYTES must be a positive integer, got `{b}`"
                ))
            })?;
            let shell = Shell::Policer {
                direction,
                rate_mbps,
                burst_bytes,
            };
            (shell, at + 4)
        }
        "pt-delay-schedule" | "pt-loss-schedule" => {
            let file = arg(2).filter(|f| !f.is_empty()).ok_or_else(|| {
                syntax(format!("{name} needs a schedule FILE after the direction"))
            })?;
            let shell = Shell::Schedule {
                kind: if name == "pt-delay-schedule" {
                    ScheduleKind::Delay
                } else {
                    ScheduleKind::Loss
                },
                direction,
                file: PathBuf::from(file),
                schedule: Schedule::default(),
            };
            (shell, at + 3)
        }
        "pt-aggregate" => {
            let interval_ms =
                parse_positive(name, "INTERVAL_MS", arg(2), (0.001, MAX_DELAY_MS as f64))?;
            let shell = Shell::Aggregate {
                direction,
                interval_ms,
            };
            (shell, at + 3)
        }
        _ => {
            let ms = parse_delay_ms(name, arg(2))?;
            (Shell::OneWayDelay { direction, ms }, at + 3)
        }
    })
}

/// `pt-host` at `words[at]`: its side, then every `key=value` word. Returns the shell and the
/// index after it.
fn parse_host(words: &[String], at: usize) -> Result<(Shell, usize), MmError> {
    let args = &words[at + 1..];
    let n = args
        .len()
        .min(1 + args.iter().skip(1).take_while(|w| w.contains('=')).count());
    let (side, limits) = HostLimits::parse(&args[..n]).map_err(syntax)?;
    Ok((Shell::Host { side, limits }, at + 1 + n))
}

/// Parses a sequence of shells written as one string (`mm-delay 28 mm-loss uplink 0.1`), as
/// in Pantheon's `--prepend-mm-cmds`; anything that is not a shell is an error.
pub fn parse_shells(text: &str) -> Result<Vec<Shell>, MmError> {
    let words: Vec<String> = text.split_whitespace().map(str::to_owned).collect();
    let chain = parse_chain(&words)?;
    match chain.command.first() {
        None => Ok(chain.shells),
        Some(other) => Err(syntax(format!(
            "unknown Mahimahi shell `{other}` (supported: {SHELL_NAMES})"
        ))),
    }
}

/// The argv that runs a parsed chain with the real Mahimahi binaries (`--emulator-backend
/// mahimahi`): the chain's own words, then the command. Mahimahi takes each shell's command as
/// the rest of its argv, so a `--` is kept (or added) only where mm-link needs it to end its
/// options, and removed after the other shells (`mm-delay 28 -- cmd` would run `--`). A
/// literal `$MAHIMAHI_BASE` in the command's words (our shell's convenience) becomes a
/// `sh -c` that expands the variable Mahimahi sets. `chain_words` are the words that
/// [`parse_chain`] read as the chain. Errors on our own shells and options, which Mahimahi
/// lacks.
pub fn mahimahi_argv(chain: &Chain, chain_words: &[String]) -> Result<Vec<String>, MmError> {
    for shell in &chain.shells {
        let ours = match shell {
            Shell::OneWayDelay { .. } => Some("pt-delay"),
            Shell::Schedule { kind, .. } => Some(kind.program()),
            Shell::Policer { .. } => Some("pt-policer"),
            Shell::Aggregate { .. } => Some("pt-aggregate"),
            Shell::Host { .. } => Some("pt-host"),
            Shell::Link(l)
                if l.uplink_delivery != Delivery::Trace
                    || l.downlink_delivery != Delivery::Trace =>
            {
                Some("--uplink-delivery/--downlink-delivery")
            }
            Shell::Link(l) if l.log_format != LogFormat::Mahimahi => Some("--log-format"),
            Shell::Link(l) if l.uplink_cross.is_some() || l.downlink_cross.is_some() => {
                Some("--uplink-cross-traffic/--downlink-cross-traffic")
            }
            Shell::Link(l)
                if l.uplink_cross_flows.is_some() || l.downlink_cross_flows.is_some() =>
            {
                Some("--uplink-cross-flows/--downlink-cross-flows")
            }
            _ => None,
        };
        if let Some(what) = ours {
            return Err(syntax(format!(
                "`{what}` is Pantheon-rs's own and Mahimahi has no equivalent; use the default \
                 backend"
            )));
        }
    }
    let mut argv: Vec<String> = chain_words.to_vec();
    if argv.last().is_some_and(|w| w == "--") {
        argv.pop();
    }
    let innermost_is_link = matches!(chain.shells.last(), Some(Shell::Link(_)));
    if innermost_is_link && !chain.command.is_empty() {
        argv.push("--".into());
    }
    if chain.command.iter().any(|w| w.contains("$MAHIMAHI_BASE")) {
        let quoted: Vec<String> = chain
            .command
            .iter()
            .map(|w| quote(w).replace("$MAHIMAHI_BASE", "'\"$MAHIMAHI_BASE\"'"))
            .collect();
        argv.extend([
            "sh".into(),
            "-c".into(),
            format!("exec {}", quoted.join(" ")),
        ]);
    } else {
        argv.extend(chain.command.iter().cloned());
    }
    Ok(argv)
}

impl EmulatedPath {
    /// Loads `shells` (outermost first) to run them with `command` in the innermost one:
    /// every mm-link's traces and every schedule file are read (errors name the file, and the
    /// line of a malformed one) and mm-link's log header's argv and enclosing prefix filled.
    pub fn load(shells: Vec<Shell>, command: Vec<String>) -> Result<EmulatedPath, MmError> {
        let mut shells = shells;
        for shell in &mut shells {
            match shell {
                Shell::Link(l) => {
                    l.uplink = Trace::load(&l.uplink_trace)?;
                    l.downlink = Trace::load(&l.downlink_trace)?;
                }
                Shell::Schedule {
                    kind,
                    file,
                    schedule,
                    ..
                } => *schedule = Schedule::load(file, *kind)?,
                _ => {}
            }
        }
        let mut path = EmulatedPath {
            command_line: shells
                .iter()
                .flat_map(Shell::words)
                .collect::<Vec<_>>()
                .join(" "),
            shells,
            command,
            ms_clock: false,
            flow_delays: Vec::new(),
        };
        path.fill_link_headers();
        Ok(path)
    }

    /// Each mm-link's `argv` (its words, the shells inside it, `--` and the command) and
    /// `enclosing_prefix` (the prefixes of the shells around it), as Mahimahi's log header
    /// shows them.
    fn fill_link_headers(&mut self) {
        let mut prefix = String::new();
        for i in 0..self.shells.len() {
            let mut argv: Vec<String> = self.shells[i..].iter().flat_map(Shell::words).collect();
            if !self.command.is_empty() {
                argv.push("--".into());
                argv.extend(self.command.iter().cloned());
            }
            let next = self.shells[i].prefix();
            if let Shell::Link(l) = &mut self.shells[i] {
                l.argv = argv;
                l.enclosing_prefix = prefix.clone();
            }
            prefix.push_str(&next);
        }
    }

    /// The TCP buffer limits its `pt-host` shells set on the host `side` (`Sender` or
    /// `Receiver`), later shells overriding earlier ones; all `None`: none set.
    pub fn host_limits(&self, side: HostSide) -> HostLimits {
        self.shells
            .iter()
            .fold(HostLimits::default(), |acc, s| match s {
                Shell::Host { side: on, limits } if on.covers(side) => acc.overridden_by(*limits),
                _ => acc,
            })
    }

    /// The bottleneck's mean rate from sender to receiver (uplink), Mbit/s of 1500-byte IP
    /// packets: the slowest mm-link uplink trace's mean or uplink policer's rate; `None` when
    /// the path has neither (delay and loss only: no bottleneck). What a workload's offered
    /// load and ideal completion times are measured against.
    pub fn uplink_mbps(&self) -> Option<f64> {
        self.shells
            .iter()
            .filter_map(|s| match s {
                Shell::Link(l) => Some(l.uplink.mean_mbps()),
                Shell::Policer {
                    direction: LinkDirection::Uplink,
                    rate_mbps,
                    ..
                } => Some(*rate_mbps),
                _ => None,
            })
            .min_by(f64::total_cmp)
    }

    /// The same path with the (first) mm-link's logs written to `uplink`/`downlink`, as
    /// Pantheon's `--uplink-log`/`--downlink-log` for `<cc>_mm_{datalink,acklink}_run<N>.log`.
    pub fn with_link_logs(&self, uplink: PathBuf, downlink: PathBuf) -> EmulatedPath {
        let mut path = self.clone();
        if let Some(Shell::Link(l)) = path.shells.iter_mut().find(|s| matches!(s, Shell::Link(_))) {
            l.uplink_log = Some(uplink);
            l.downlink_log = Some(downlink);
        }
        path.fill_link_headers();
        path
    }

    /// The same path with `flows`' packets delayed by their extra delays, in each direction
    /// before the first shell (so before the shared bottleneck).
    pub fn with_flow_delays(&self, flows: &[FlowDelay]) -> EmulatedPath {
        let mut path = self.clone();
        path.flow_delays = flows.to_vec();
        path
    }

    /// The stages of one direction, in crossing order; random generators seeded from `seed`.
    /// The returned list pairs each mm-link stage's index with its shell, for logging.
    pub fn pipeline(
        &self,
        direction: LinkDirection,
        seed: u64,
    ) -> (Pipeline, Vec<(usize, &LinkShell)>) {
        let ordered: Vec<(usize, &Shell)> = match direction {
            LinkDirection::Uplink => self.shells.iter().enumerate().rev().collect(),
            LinkDirection::Downlink => self.shells.iter().enumerate().collect(),
        };
        let mut stages = Vec::new();
        if !self.flow_delays.is_empty() {
            stages.push(AnyStage::FlowDelay(FlowDelayStage::new(&self.flow_delays)));
        }
        let mut links = Vec::new();
        for (i, shell) in ordered {
            let stream = (i as u64) << 1 | (direction == LinkDirection::Downlink) as u64;
            let seed = seed ^ stream.wrapping_mul(0x9E37_79B9_7F4A_7C15);
            match shell {
                Shell::Delay { ms } => stages.push(AnyStage::Delay(DelayStage::new(ms * MS))),
                Shell::OneWayDelay { direction: d, ms } if *d == direction => {
                    stages.push(AnyStage::Delay(DelayStage::new(ms * MS)))
                }
                Shell::OneWayDelay { .. } => {}
                Shell::Loss { direction: d, rate } if *d == direction && *rate > 0.0 => {
                    stages.push(AnyStage::Loss(LossStage::new(*rate, seed)))
                }
                Shell::Loss { .. } => {}
                Shell::Schedule {
                    kind,
                    direction: d,
                    schedule,
                    ..
                } if *d == direction => stages.push(match kind {
                    ScheduleKind::Delay => AnyStage::Delay(DelayStage::scheduled(schedule)),
                    ScheduleKind::Loss => AnyStage::Loss(LossStage::scheduled(schedule, seed)),
                }),
                Shell::Schedule { .. } => {}
                Shell::Switch {
                    direction: d,
                    mean_on_s,
                    mean_off_s,
                    random,
                } if *d == direction => stages.push(AnyStage::Switch(SwitchStage::new(
                    *mean_on_s,
                    *mean_off_s,
                    *random,
                    seed,
                ))),
                Shell::Switch { .. } => {}
                Shell::Policer {
                    direction: d,
                    rate_mbps,
                    burst_bytes,
                } if *d == direction => stages.push(AnyStage::Policer(PolicerStage::new(
                    *rate_mbps,
                    *burst_bytes,
                ))),
                Shell::Aggregate {
                    direction: d,
                    interval_ms,
                } if *d == direction => stages.push(AnyStage::Aggregate(AggregateStage::new(
                    (interval_ms * MS as f64).round() as u64,
                ))),
                Shell::Policer { .. } | Shell::Aggregate { .. } | Shell::Host { .. } => {}
                Shell::Link(l) => {
                    let side = l.direction(direction);
                    let mut stage = LinkStage::new(side.trace, side.queue, seed).once(l.once);
                    stage = match side.delivery {
                        Delivery::Trace => stage,
                        Delivery::Poisson => stage.poisson(seed),
                        Delivery::Even => stage.even(),
                    };
                    if let Some(cross) = side.cross {
                        stage = stage.cross(cross);
                    }
                    if let Some(flows) = side.cross_flows {
                        stage = stage.cross_flows(flows);
                    }
                    if side.log.is_some() {
                        stage = stage.logged();
                        links.push((stages.len(), &**l));
                    }
                    stages.push(AnyStage::Link(stage));
                }
            }
        }
        (Pipeline::new(stages).with_ms_clock(self.ms_clock), links)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(s: &str) -> Vec<String> {
        s.split_whitespace().map(str::to_owned).collect()
    }

    /// A temporary directory with a 10 Mbit/s trace `10mbps.trace`; removed on drop.
    struct TraceDir(PathBuf);
    impl TraceDir {
        fn new(tag: &str) -> TraceDir {
            let dir = std::env::temp_dir().join(format!("mmtest-{tag}-{}", std::process::id()));
            std::fs::create_dir_all(&dir).unwrap();
            std::fs::write(dir.join("10mbps.trace"), "1\n2\n3\n4\n6\n").unwrap();
            TraceDir(dir)
        }
        fn trace(&self) -> String {
            self.0.join("10mbps.trace").display().to_string()
        }
    }
    impl Drop for TraceDir {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

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
        assert!(parse_shells("mm-onoff uplink 0 0").is_err());
        assert!(parse_shells("mm-onoff uplink -1 2").is_err());
        let s = parse_shells("mm-intermittent downlink 1.5 0.5").unwrap();
        assert!(matches!(
            s[0],
            Shell::Switch {
                direction: LinkDirection::Downlink,
                random: false,
                ..
            }
        ));
    }

    #[test]
    fn parses_a_full_chain_with_link_options_and_command() {
        let d = TraceDir::new("chain");
        let t = d.trace();
        let w = words(&format!(
            "mm-delay 28 mm-loss uplink 0.004 mm-link {t} {t} --uplink-queue=droptail \
             --uplink-queue-args=packets=50 --downlink-queue codel --downlink-queue-args \
             packets=100,target=5,interval=100 --once --uplink-log=/tmp/up.log -- iperf3 -c \
             $MAHIMAHI_BASE"
        ));
        let chain = parse_chain(&w).unwrap();
        assert_eq!(chain.command, ["iperf3", "-c", "$MAHIMAHI_BASE"]);
        assert_eq!(chain.shells.len(), 3);
        let Shell::Link(l) = &chain.shells[2] else {
            panic!("third shell is mm-link")
        };
        assert_eq!(l.uplink_queue.describe(), "droptail [packets=50]");
        assert!(matches!(
            l.downlink_queue,
            QueueSpec::CoDel { target_ms: 5, .. }
        ));
        assert!(l.once);
        assert_eq!(l.uplink_log.as_deref(), Some(Path::new("/tmp/up.log")));
        assert_eq!(l.downlink_log, None);
        // Loading reads the traces and fills the log header's argv and prefix.
        assert!(l.uplink.opportunities_ms.is_empty());
        let path = EmulatedPath::load(chain.shells.clone(), chain.command.clone()).unwrap();
        let Shell::Link(l) = &path.shells[2] else {
            panic!("third shell is mm-link")
        };
        assert_eq!(l.uplink.opportunities_ms, [1, 2, 3, 4, 6]);
        assert_eq!(l.enclosing_prefix, "[delay 28 ms] [loss up=0.004] ");
        assert_eq!(l.argv[0], "mm-link");
        assert!(l
            .argv
            .contains(&"--uplink-queue-args=packets=50".to_owned()));
        assert_eq!(l.argv.last().unwrap(), "$MAHIMAHI_BASE");
        // A command right after a non-link shell, with or without `--`.
        let c = parse_chain(&words("mm-delay 5 ping -c 1 x")).unwrap();
        assert_eq!((c.shells.len(), c.command.len()), (1, 4));
        let c = parse_chain(&words("mm-delay 5 -- mm-delay 3")).unwrap();
        assert_eq!(
            (c.shells.len(), c.command),
            (1, vec!["mm-delay".into(), "3".into()])
        );
        // Errors name what is wrong.
        let e = parse_chain(&words(&format!("mm-link {t} {t} --meter-uplink")))
            .unwrap_err()
            .to_string();
        assert!(e.contains("--meter-uplink"), "{e}");
        let e = parse_chain(&words(&format!("mm-link {t} {t} --uplink-queue=pie")))
            .unwrap_err()
            .to_string();
        assert!(e.contains("uplink queue") && e.contains("pie"), "{e}");
        let missing = parse_chain(&words(&format!("mm-link {t} /nonexistent/x.trace"))).unwrap();
        let e = EmulatedPath::load(missing.shells, vec![])
            .unwrap_err()
            .to_string();
        assert!(e.contains("/nonexistent/x.trace"), "{e}");
        assert!(parse_chain(&words("mm-link only-one")).is_err());
    }

    /// `pt-delay` delays its own direction only, and reads back from its words.
    #[test]
    fn pt_delay_delays_one_direction() {
        let chain = parse_chain(&words("pt-delay uplink 24 pt-delay downlink 3 -- true")).unwrap();
        let up = Shell::OneWayDelay {
            direction: LinkDirection::Uplink,
            ms: 24,
        };
        assert_eq!(chain.shells[0], up);
        assert_eq!(up.words(), words("pt-delay uplink 24"));
        assert_eq!(up.prefix(), "[delay up=24 ms] ");
        let path = EmulatedPath::load(chain.shells, chain.command).unwrap();
        for (d, ms) in [(LinkDirection::Uplink, 24), (LinkDirection::Downlink, 3)] {
            let (mut p, _) = path.pipeline(d, 0);
            p.push(0, vec![0x45; 100]);
            p.advance(30 * MS);
            assert_eq!(p.pop().unwrap().0, ms * MS, "{d:?}");
        }
        let e = |w: &str| parse_chain(&words(w)).unwrap_err().to_string();
        assert!(e("pt-delay sideways 3").starts_with("pt-delay: direction"));
        assert!(e("pt-delay uplink x").starts_with("pt-delay: `x` is not"));
    }

    /// `pt-delay-schedule` and `pt-loss-schedule` read their file when the path is loaded,
    /// act on their own direction only, read back from their words, and name the file and line
    /// of a malformed schedule; real Mahimahi refuses them.
    #[test]
    fn schedules_load_their_files_and_act_on_one_direction() {
        let d = TraceDir::new("schedule");
        let delay = d.0.join("delay.txt");
        std::fs::write(&delay, "0 10\n# rises\n100 50\n").unwrap();
        let loss = d.0.join("loss.txt");
        std::fs::write(&loss, "0 1\n").unwrap();
        let line = format!(
            "pt-delay-schedule uplink {} pt-loss-schedule downlink {}",
            delay.display(),
            loss.display()
        );
        let chain = parse_chain(&words(&format!("{line} -- true"))).unwrap();
        let rendered: Vec<String> = chain.shells.iter().flat_map(Shell::words).collect();
        assert_eq!(rendered, words(&line));
        assert_eq!(chain.shells[0].prefix(), "[delay schedule up] ");
        let e = mahimahi_argv(&chain, &words(&line))
            .unwrap_err()
            .to_string();
        assert!(
            e.starts_with("`pt-delay-schedule` is Pantheon-rs's own"),
            "{e}"
        );
        let path = EmulatedPath::load(chain.shells, vec![]).unwrap();
        let (mut up, _) = path.pipeline(LinkDirection::Uplink, 0);
        for t in [0, 99 * MS, 100 * MS] {
            up.push(t, vec![0x45; 100]);
        }
        up.advance(200 * MS);
        let out: Vec<u64> = std::iter::from_fn(|| up.pop().map(|o| o.0 / MS)).collect();
        assert_eq!(out, [10, 109, 150]);
        let (mut down, _) = path.pipeline(LinkDirection::Downlink, 0);
        down.push(0, vec![0x45; 100]);
        down.advance(MS);
        assert!(
            down.pop().is_none(),
            "rate 1 from time 0 drops every packet"
        );
        assert_eq!(down.dropped(), 1);

        std::fs::write(&delay, "0 10\n\n200 ten\n").unwrap();
        let e = EmulatedPath::load(parse_shells(&line).unwrap(), vec![]).unwrap_err();
        assert_eq!(
            e.to_string(),
            format!("{}:3: `ten` is not a number", delay.display())
        );
        let e = parse_chain(&words("pt-loss-schedule uplink")).unwrap_err();
        assert!(e.to_string().contains("needs a schedule FILE"), "{e}");
    }

    #[test]
    fn words_are_what_parse_chain_reads() {
        let d = TraceDir::new("words");
        let t = d.trace();
        let line = format!(
            "mm-delay 28 mm-loss uplink 0.0477 mm-onoff downlink 1.5 0.25 mm-intermittent uplink \
             2 1 pt-policer uplink 12.5 15000 pt-aggregate downlink 2.5 pt-host sender \
             tcp_wmem=4096,16384,1048576 pt-host both tcp_rmem=1,2,3 mm-link {t} {t} \
             --uplink-queue=droptail --uplink-queue-args=packets=50 --downlink-queue=codel \
             --downlink-queue-args=packets=100,target=5,interval=100 --once \
             --uplink-log=/tmp/up.log --downlink-log=/tmp/down.log --uplink-delivery=poisson \
             --log-format=binary mm-delay 3"
        );
        let chain = parse_chain(&words(&line)).unwrap();
        assert_eq!(chain.shells.len(), 10);
        let rendered: Vec<String> = chain.shells.iter().flat_map(Shell::words).collect();
        assert_eq!(rendered, words(&line));
        assert_eq!(parse_chain(&rendered).unwrap().shells, chain.shells);
        // pt-host is no stage; its limits are per side, `both` reaching either.
        let path = EmulatedPath::load(chain.shells.clone(), vec![]).unwrap();
        let sender = path.host_limits(HostSide::Sender);
        assert_eq!(sender.tcp_wmem.map(|m| m.max), Some(1 << 20));
        assert_eq!(sender.tcp_rmem.map(|m| m.max), Some(3));
        let receiver = path.host_limits(HostSide::Receiver);
        assert_eq!(
            (receiver.tcp_wmem, receiver.tcp_rmem.map(|m| m.max)),
            (None, Some(3))
        );
        let e = parse_chain(&words("pt-host sender tcp_wmem=1,2 mm-delay 3")).unwrap_err();
        assert!(e.to_string().contains("got `1,2`"), "{e}");
        // A default mm-link has no options.
        let link = LinkShell::new("a".into(), "b".into());
        assert_eq!(Shell::Link(Box::new(link)).words(), ["mm-link", "a", "b"]);
    }

    #[test]
    fn uplink_crosses_innermost_first() {
        let d = TraceDir::new("order");
        let trace = PathBuf::from(d.trace());
        let load = |line: String| EmulatedPath::load(parse_chain(&words(&line))?.shells, vec![]);
        let path = load(format!("mm-delay 28 mm-link {0} {0}", trace.display())).unwrap();
        assert!(path.command_line.starts_with("mm-delay 28 mm-link "));
        // Uplink: link (opportunity at 1 ms) then 28 ms delay → 29 ms.
        let (mut up, logged) = path.pipeline(LinkDirection::Uplink, 1);
        assert!(logged.is_empty());
        up.push(0, vec![0u8; 1500]);
        up.advance(29 * MS);
        assert_eq!(up.pop().map(|p| p.0), Some(29 * MS));
        // Downlink: 28 ms delay, then the first opportunity strictly after 28 ms: the trace
        // gives 25 26 27 28 30 in its fifth period, so 30 ms.
        let (mut down, _) = path.pipeline(LinkDirection::Downlink, 1);
        down.push(0, vec![0u8; 1500]);
        down.advance(29 * MS);
        assert!(down.pop().is_none());
        down.advance(30 * MS);
        assert_eq!(down.pop().map(|p| p.0), Some(30 * MS));
        let missing = load(format!(
            "mm-link {} {}",
            d.0.join("nope").display(),
            d.trace()
        ));
        assert!(missing.unwrap_err().to_string().contains("nope"));
        // Pantheon's run writes both link logs; the logged stage is the link (index 0 uplink).
        let logged = path.with_link_logs("u.log".into(), "d.log".into());
        let (_, links) = logged.pipeline(LinkDirection::Uplink, 1);
        assert_eq!(links.len(), 1);
        assert_eq!(links[0].0, 0);
        let (_, links) = logged.pipeline(LinkDirection::Downlink, 1);
        assert_eq!(links[0].0, 1);
        assert_eq!(
            links[0].1.argv[3..],
            ["--uplink-log=u.log", "--downlink-log=d.log"]
        );
    }

    #[test]
    fn parses_our_shells_and_link_options() {
        let d = TraceDir::new("ours");
        let t = d.trace();
        let w = words(&format!(
            "mm-delay 10 pt-policer uplink 12 15000 pt-aggregate downlink 2.5 mm-link {t} {t} \
             --uplink-delivery=poisson --log-format binary -- cmd"
        ));
        let chain = parse_chain(&w).unwrap();
        assert_eq!(chain.command, ["cmd"]);
        assert!(matches!(
            chain.shells[1],
            Shell::Policer {
                direction: LinkDirection::Uplink,
                burst_bytes: 15000,
                ..
            }
        ));
        let prefix: String = chain.shells.iter().map(Shell::prefix).collect();
        assert_eq!(
            prefix,
            "[delay 10 ms] [policer up=12Mbps/15000B] [aggregate down=2.5ms] [link] "
        );
        let Shell::Link(l) = &chain.shells[3] else {
            panic!("fourth shell is mm-link")
        };
        assert_eq!(l.uplink_delivery, Delivery::Poisson);
        assert_eq!(l.downlink_delivery, Delivery::Trace);
        assert_eq!(l.log_format, LogFormat::Binary);
        // Each stage sits in its direction only: uplink = link, policer, delay; downlink =
        // delay, aggregate, link.
        let path = EmulatedPath::load(chain.shells.clone(), chain.command.clone()).unwrap();
        let (mut up, _) = path.pipeline(LinkDirection::Uplink, 1);
        assert!(matches!(up.stage_mut(1), Some(AnyStage::Policer(_))));
        assert!(up.stage_mut(3).is_none());
        let (mut down, _) = path.pipeline(LinkDirection::Downlink, 1);
        assert!(matches!(down.stage_mut(1), Some(AnyStage::Aggregate(_))));
        // Downlink timing: in at 0.5 ms, 10 ms delay (10.5), released at the next 2.5 ms
        // multiple (12.5), then the trace's first opportunity after that (7 8 9 10 12 | 13).
        down.push(MS / 2, vec![0; 1500]);
        down.advance(20 * MS);
        assert_eq!(down.pop().map(|p| p.0), Some(13 * MS));
        for bad in [
            "pt-policer uplink 0 1500",
            "pt-policer up 12 1500",
            "pt-policer uplink 12 -3",
            "pt-aggregate downlink 0",
            "pt-aggregate downlink x",
        ] {
            let e = parse_shells(bad).unwrap_err().to_string();
            assert!(e.starts_with(bad.split(' ').next().unwrap()), "{bad}: {e}");
        }
        for bad in ["--uplink-delivery=uniform", "--log-format=json"] {
            let e = parse_chain(&words(&format!("mm-link {t} {t} {bad}")))
                .unwrap_err()
                .to_string();
            assert!(e.contains(bad.split('=').nth(1).unwrap()), "{e}");
        }
    }

    #[test]
    fn mahimahi_argv_keeps_the_chain_and_places_double_dashes_as_mahimahi_needs() {
        let d = TraceDir::new("mmargv");
        let t = d.trace();
        let argv = |line: &str| {
            let w = words(line);
            let chain = parse_chain(&w).unwrap();
            let n = w.len() - chain.command.len();
            mahimahi_argv(&chain, &w[..n]).map_err(|e| e.to_string())
        };
        assert_eq!(
            argv(&format!(
                "mm-delay 28 mm-link {t} {t} --uplink-queue=drophead --uplink-queue-args=packets=5 iperf3 -c x"
            ))
            .unwrap(),
            words(&format!(
                "mm-delay 28 mm-link {t} {t} --uplink-queue=drophead --uplink-queue-args=packets=5 -- iperf3 -c x"
            ))
        );
        assert_eq!(
            argv("mm-delay 28 mm-loss uplink 0.1 -- ping -c 1 x").unwrap(),
            words("mm-delay 28 mm-loss uplink 0.1 ping -c 1 x")
        );
        assert_eq!(argv("mm-delay 5").unwrap(), words("mm-delay 5"));
        assert_eq!(
            argv("mm-delay 5 -- iperf3 -c $MAHIMAHI_BASE").unwrap(),
            vec![
                "mm-delay".to_owned(),
                "5".into(),
                "sh".into(),
                "-c".into(),
                r#"exec 'iperf3' '-c' ''"$MAHIMAHI_BASE"''"#.into()
            ]
        );
        let e = argv("mm-delay 5 pt-policer uplink 12 3000").unwrap_err();
        assert!(e.contains("pt-policer"), "{e}");
        let e = argv(&format!("mm-link {t} {t} --downlink-delivery=poisson")).unwrap_err();
        assert!(e.contains("delivery"), "{e}");
    }
}
