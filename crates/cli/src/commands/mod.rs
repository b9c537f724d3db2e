//! One module per `pantheon` subcommand, each holding its arguments (clap) and its handler
//! (`exec`), as cargo's `src/bin/cargo/commands/<name>.rs`; [`Command`] lists them and
//! [`exec`] dispatches. Handlers return the process's exit status; an `Err` is printed by
//! `main` as `error: …` with exit status 2.
use std::process::ExitCode;
use std::sync::atomic::Ordering;

use anyhow::Context;
use clap::Subcommand;
use engine::runner::INTERRUPTED;

pub(crate) mod analyze;
pub(crate) mod calibrate;
pub(crate) mod clean;
pub(crate) mod compare;
pub(crate) mod daemon;
pub(crate) mod emulators;
pub(crate) mod link_log;
pub(crate) mod node;
pub(crate) mod results;
pub(crate) mod run;
pub(crate) mod schemes;
pub(crate) mod serve;
pub(crate) mod shell;
pub(crate) mod status;
pub(crate) mod submit;
pub(crate) mod sweep;
pub(crate) mod trace;
pub(crate) mod train;

#[derive(Subcommand)]
pub(crate) enum Command {
    /// Run an experiment (needs root: it creates network namespaces and TUN devices).
    ///
    /// Exit status: 0 every run ended normally; 1 some run failed (a failed scheme does not
    /// stop the others; the failed runs are listed at the end and in pantheon_runs.json); 2 the
    /// experiment could not start (bad flags, a results directory in use…); 130 interrupted.
    Run {
        #[command(subcommand)]
        mode: run::RunMode,
    },
    /// Analyse a results directory: stats logs, pantheon_perf.json, summary table and plots.
    Analyze(analyze::AnalyzeArgs),
    /// Compare two results directories: per scheme and metric the runs, means, % difference
    /// and standard deviations of each, Welch's t-test, and the replication error of the
    /// second as an emulation of the first (e.g. `pantheon compare real/ emulated/`).
    Compare(compare::CompareArgs),
    /// Fit an emulator to a real path: the Pantheon paper's five parameters (bottleneck rate,
    /// one-way delay, uplink DropTail size, uplink loss, constant or Poisson deliveries) found
    /// by Bayesian optimisation of the replication error (needs root: every candidate is
    /// measured by running the target's schemes over it).
    ///
    /// Writes to --out: search.log (one line per evaluation; running the same command again
    /// resumes from it), emulator.json (use it as `pantheon run local --emulator
    /// calibration/emulator.json`), mahimahi.txt, calibration.json (best emulator, its error,
    /// bounds, leave-one-out check, wall time), figure3.svg (real vs emulated per scheme, the
    /// paper's Figure 3) and convergence.svg. See docs/calibration.md.
    Calibrate(Box<calibrate::CalibrateArgs>),
    /// An evaluation over a grid: environments (rate × RTT × buffer × loss, or named
    /// emulators) × flow mixes × runs, as the PCC Proteus paper evaluates a scavenger (needs
    /// root). Points run --jobs at a time; the same command again runs only the points not
    /// done. Writes sweep.csv and sweep.parquet (one row per environment × mix × run × flow,
    /// with throughput ratio and harm against each scheme alone), the CDF of the primaries'
    /// throughput ratio, heatmaps and sweep_summary.md. See docs/sweep.md.
    ///
    /// Exit status: 0 every point done; 1 some point failed (the others ran; run the same
    /// command again to retry them); 2 the sweep could not start; 130 interrupted.
    Sweep(Box<sweep::SweepArgs>),
    /// The testbed's orchestrator daemon: runs the testbed file's experiment matrix on a
    /// schedule (round-robin tournaments over node pairs, no node in two experiments at once)
    /// through the nodes' agents, analyses and archives every experiment (SQLite), and serves
    /// the archive as web pages and to `pantheon submit|status|results` (gRPC).
    Serve(Box<serve::ServeArgs>),
    /// Queue one experiment between two testbed nodes on the daemon, outside its schedule.
    Submit(Box<submit::SubmitArgs>),
    /// What the daemon is doing: busy nodes, experiments running and queued.
    Status(status::StatusArgs),
    /// The daemon's archive: list experiments, show one, fetch its results directory.
    Results {
        #[command(subcommand)]
        action: results::ResultsAction,
    },
    /// Testbed nodes: credentials for their agents, what a node is.
    Node {
        #[command(subcommand)]
        action: node::NodeAction,
    },
    /// The scheme library.
    Schemes {
        #[command(subcommand)]
        action: schemes::SchemesAction,
    },
    /// Run a command inside an emulated path written as Mahimahi shells, exactly as the chain
    /// would (needs root).
    ///
    /// Example: `pantheon shell mm-delay 28 mm-loss uplink 0.004 mm-link up.trace down.trace
    /// --uplink-queue=droptail --uplink-queue-args=packets=50 --uplink-log=up.log -- iperf3 -c
    /// '$MAHIMAHI_BASE'` (a quoted `$MAHIMAHI_BASE` in the command's words is replaced by the
    /// address; the command runs without a shell, so use `sh -c '…'` for pipes).
    ///
    /// Shells: mm-delay DELAY_MS · mm-loss uplink|downlink RATE · mm-onoff and mm-intermittent
    /// uplink|downlink MEAN_ON_S MEAN_OFF_S · mm-link UP DOWN [--uplink-queue=
    /// infinite|droptail|drophead|codel|pie --uplink-queue-args=… (and downlink) --once
    /// --uplink-log=F --downlink-log=F]; ours: mm-link's --uplink-delivery=poisson (and
    /// downlink), --uplink-cross-traffic=MBPS[,MBPS…] (other users' traffic at that rate),
    /// --uplink-cross-flows=N,RTT_MS[,START_S] (N Reno flows that back off; both also downlink)
    /// and --log-format=binary,
    /// pt-delay uplink|downlink DELAY_MS, pt-delay-schedule and pt-loss-schedule
    /// uplink|downlink FILE (lines `TIME_MS VALUE`: delay or loss rate from then on),
    /// pt-policer uplink|downlink RATE_MBPS BURST_BYTES (token bucket), pt-aggregate
    /// uplink|downlink INTERVAL_MS (burst release, e.g. ACK aggregation), pt-host
    /// sender|receiver|both tcp_rmem=MIN,DEFAULT,MAX … (end hosts' buffers). The command gets MAHIMAHI_BASE (the address of this side) and the shell
    /// exits with the command's status. Without a command, $SHELL runs.
    Shell(shell::ShellArgs),
    /// Mahimahi packet-delivery traces.
    Trace {
        #[command(subcommand)]
        action: trace::TraceAction,
    },
    /// Train a learned congestion controller in simulated time (Indigo, the Pantheon paper's
    /// §6). See docs/indigo.md.
    Train {
        #[command(subcommand)]
        what: train::TrainWhat,
    },
    /// The emulator library: Pantheon's six calibrated emulators and pathological ones
    /// (policers, ACK aggregation, shallow buffers), for `--emulator NAME`.
    Emulators(emulators::EmulatorsArgs),
    /// Print a binary mm-link log (`--log-format=binary`) in Mahimahi's text form.
    LinkLog(link_log::LinkLogArgs),
    /// Remove what killed pantheon commands left behind (needs root): network namespaces
    /// named after a process that is gone (`pt-<pid>-…`, `ptc-<pid>-…`, `pshell-<pid>`,
    /// `ptun-<pid>-…`) with every process still inside them, and `pantheon shell`'s NAT rules.
    /// Every command run as root does this first by itself.
    Clean(clean::CleanArgs),
}

impl Command {
    /// Whether the command only prints (and so ends quietly when its reader goes).
    pub(crate) fn prints_only(&self) -> bool {
        matches!(
            self,
            Command::Analyze(_)
                | Command::Compare(_)
                | Command::Schemes { .. }
                | Command::Emulators(_)
                | Command::LinkLog(_)
        )
    }
}

/// Runs `command`'s handler. Run as root, any command first removes what killed `pantheon`
/// commands left behind (their namespaces, the processes inside, `pantheon shell`'s NAT rules)
/// and says so on stderr: nothing a SIGKILL left outlives the next command, whichever it is.
pub(crate) fn exec(command: Command) -> anyhow::Result<ExitCode> {
    if !matches!(command, Command::Clean(_)) && engine::clean::is_root() {
        engine::clean::remove_orphans_noisily();
    }
    match command {
        Command::Run { mode } => run::exec(mode),
        Command::Analyze(args) => analyze::exec(args),
        Command::Compare(args) => compare::exec(args),
        Command::Calibrate(args) => calibrate::exec(*args),
        Command::Sweep(args) => sweep::exec(*args),
        Command::Serve(args) => serve::exec(*args),
        Command::Submit(args) => submit::exec(*args),
        Command::Status(args) => status::exec(args),
        Command::Results { action } => results::exec(action),
        Command::Node { action } => node::exec(action),
        Command::Schemes { action } => schemes::exec(action),
        Command::Shell(args) => shell::exec(args),
        Command::Trace { action } => trace::exec(action),
        Command::Train { what } => train::exec(what),
        Command::Emulators(args) => emulators::exec(args),
        Command::LinkLog(args) => link_log::exec(args),
        Command::Clean(args) => clean::exec(args),
    }
}

/// The error of a subcommand whose capability this build of `pantheon` leaves out (the main
/// job's lean build): `feature` is the cargo feature that builds it.
#[allow(dead_code)] // unused when every feature is built
pub(crate) fn left_out(command: &str, feature: &str) -> anyhow::Result<ExitCode> {
    Err(anyhow::anyhow!(engine::left_out(
        &format!("`pantheon {command}`"),
        feature
    )))
}

/// Ctrl-C / SIGTERM: the runner finishes the current run's cleanup and stops; a second one
/// at least [`REPEAT_AFTER`] later exits at once. Repeats within it are the same interrupt:
/// the kernel sends a process's parent-death signal (a sweep's points, `PR_SET_PDEATHSIG`)
/// once per thread of the dying parent it had been reparented to, so a killed `pantheon sweep`
/// may SIGTERM each point several times within milliseconds — which must not cut its cleanup
/// short.
///
/// Installed once per process: later calls (`pantheon sweep point DIR 3 4 5` runs one point
/// after another, each as `pantheon run` does) find it in place and return what the first one
/// returned.
pub(crate) fn install_interrupt_handler() -> anyhow::Result<()> {
    static INSTALLED: std::sync::OnceLock<Result<(), String>> = std::sync::OnceLock::new();
    INSTALLED
        .get_or_init(|| set_interrupt_handler().map_err(|e| format!("{e:#}")))
        .clone()
        .map_err(anyhow::Error::msg)
}

/// [`install_interrupt_handler`]'s handler; `ctrlc` refuses a second one in a process.
fn set_interrupt_handler() -> anyhow::Result<()> {
    let first: std::sync::Mutex<Option<std::time::Instant>> = std::sync::Mutex::new(None);
    ctrlc::set_handler(move || {
        let mut first = first.lock().unwrap_or_else(|p| p.into_inner());
        INTERRUPTED.store(true, Ordering::SeqCst);
        match *first {
            None => {
                *first = Some(std::time::Instant::now());
                eprintln!("\ninterrupted: cleaning up the current run…");
            }
            Some(t) if t.elapsed() < REPEAT_AFTER => {}
            Some(_) => {
                eprintln!(
                    "\nsecond interrupt: exiting now (what remains goes with `pantheon clean`, \
                     or the next run)"
                );
                std::process::exit(130);
            }
        }
    })
    .context("install the Ctrl-C handler")
}

/// How long after an interrupt another one counts as a second interrupt.
const REPEAT_AFTER: std::time::Duration = std::time::Duration::from_secs(1);

#[cfg(test)]
mod tests {
    #[test]
    fn the_interrupt_handler_can_be_asked_for_twice() {
        // `pantheon sweep point DIR 1 2` asks once per point; ctrlc alone refuses the second.
        super::install_interrupt_handler().unwrap();
        super::install_interrupt_handler().unwrap();
    }
}
