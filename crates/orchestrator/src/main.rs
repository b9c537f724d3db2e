//! `pantheon`: run congestion-control experiments over an emulated path and analyse them.
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::Ordering;
use std::time::Duration;

use anyhow::Context;
use clap::{Args, Parser, Subcommand};
use emucal::trace::Trace;
use indicatif::{ProgressBar, ProgressStyle};
use pantheon_orchestrator::analyze;
use pantheon_orchestrator::plan::{write_constant_trace, write_json, ExperimentPlan};
use pantheon_orchestrator::runner::{self, RunOutcome, INTERRUPTED};
use pantheon_orchestrator::schemes::{Registry, Scheme, SystemInfo};
use pantheon_orchestrator::shell;
use rand::rngs::SmallRng;
use rand::seq::SliceRandom;
use rand::SeedableRng;

mod testbed_cli;

/// Pantheon-rs: a testbed for Internet congestion control.
///
/// Runs transport schemes (TCP Cubic, BBR, …) over an emulated path through an instrumented
/// tunnel that logs every packet, and reports Pantheon's numbers: average throughput,
/// 95th-percentile one-way delay and loss, per flow and per run.
#[derive(Parser)]
#[command(version, propagate_version = true)]
struct Cli {
    #[command(subcommand)]
    command: Top,
}

#[derive(Subcommand)]
enum Top {
    /// Run an experiment (needs root: it creates network namespaces and TUN devices).
    Run {
        #[command(subcommand)]
        mode: RunMode,
    },
    /// Analyse a results directory: stats logs, pantheon_perf.json, summary table and plots.
    Analyze {
        /// The --data-dir of a `pantheon run`.
        dir: PathBuf,
        /// Extra scheme descriptors (*.toml) for labels and colors.
        #[arg(long)]
        schemes_dir: Option<PathBuf>,
    },
    /// Compare two results directories: per scheme and metric the runs, means, % difference
    /// and standard deviations of each, Welch's t-test, and the replication error of the
    /// second as an emulation of the first (e.g. `pantheon compare real/ emulated/`).
    Compare {
        /// The first (reference) results directory, or a table of per-scheme medians (.csv or
        /// .json, as `pantheon calibrate` takes: a real path known from its report).
        a: PathBuf,
        /// The second.
        b: PathBuf,
        /// Print JSON.
        #[arg(long)]
        json: bool,
        /// Extra scheme descriptors (*.toml), used if a directory must be analysed first.
        #[arg(long)]
        schemes_dir: Option<PathBuf>,
    },
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
    Calibrate(Box<CalibrateArgs>),
    /// The testbed's orchestrator daemon: runs the testbed file's experiment matrix on a
    /// schedule (round-robin tournaments over node pairs, no node in two experiments at once)
    /// through the nodes' agents, analyses and archives every experiment (SQLite), and serves
    /// the archive as web pages and to `pantheon submit|status|results` (gRPC).
    Serve(Box<testbed_cli::ServeArgs>),
    /// Queue one experiment between two testbed nodes on the daemon, outside its schedule.
    Submit(Box<testbed_cli::SubmitArgs>),
    /// What the daemon is doing: busy nodes, experiments running and queued.
    Status {
        #[command(flatten)]
        daemon: testbed_cli::DaemonArgs,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// The daemon's archive: list experiments, show one, fetch its results directory.
    Results {
        #[command(subcommand)]
        action: testbed_cli::ResultsAction,
    },
    /// Testbed nodes: credentials for their agents, what a node is.
    Node {
        #[command(subcommand)]
        action: NodeAction,
    },
    /// The scheme library.
    Schemes {
        #[command(subcommand)]
        action: SchemesAction,
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
    /// downlink) and --log-format=binary, pt-policer uplink|downlink RATE_MBPS BURST_BYTES
    /// (token bucket), pt-aggregate uplink|downlink INTERVAL_MS (burst release, e.g. ACK
    /// aggregation). The command gets MAHIMAHI_BASE (the address of this side) and the shell
    /// exits with the command's status. Without a command, $SHELL runs.
    Shell {
        /// Seed of the random generators (mm-loss, mm-onoff, PIE, Poisson delivery); runs are
        /// reproducible with the same seed.
        #[arg(long, default_value_t = 1)]
        seed: u64,
        /// Time every stage on Mahimahi's integer-millisecond clock (for comparisons with
        /// Mahimahi) instead of nanoseconds.
        #[arg(long)]
        ms_clock: bool,
        /// A named emulator from the library (`pantheon emulators`) instead of a chain; the
        /// words after the options are then the command.
        #[arg(long, value_name = "NAME")]
        emulator: Option<String>,
        /// Who emulates: `ours`, or `mahimahi` to run the same chain with Mahimahi's binaries
        /// from PATH (Mahimahi's own shells and options only).
        #[arg(long, value_enum, default_value_t = BackendArg::Ours)]
        emulator_backend: BackendArg,
        /// The chain of shells, then `--` and the command.
        #[arg(
            required_unless_present = "emulator",
            trailing_var_arg = true,
            allow_hyphen_values = true,
            value_name = "SHELLS… [-- COMMAND…]"
        )]
        chain: Vec<String>,
    },
    /// Mahimahi packet-delivery traces.
    Trace {
        #[command(subcommand)]
        action: TraceAction,
    },
    /// The emulator library: Pantheon's six calibrated emulators and pathological ones
    /// (policers, ACK aggregation, shallow buffers), for `--emulator NAME`.
    Emulators {
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Print a binary mm-link log (`--log-format=binary`) in Mahimahi's text form.
    LinkLog {
        /// The binary log.
        file: PathBuf,
        /// Output file (default: standard output).
        #[arg(short, long)]
        output: Option<PathBuf>,
    },
}

/// `pantheon calibrate`'s flags.
#[derive(Args)]
struct CalibrateArgs {
    /// The real path's results: a results directory (ours or Pantheon's archived logs), or a
    /// table — .csv with a header `scheme,tput_mbps,delay_ms[,loss_pct,runs]` (median
    /// throughput in Mbit/s, median p95 one-way delay in ms, loss in percent), or .json, an
    /// array of objects with those keys.
    target: PathBuf,
    /// Schemes to run over each candidate, e.g. "cubic bbr" (default: the target's schemes
    /// that can run here).
    #[arg(long)]
    schemes: Option<String>,
    /// Seconds per run.
    #[arg(long, default_value_t = 30.0)]
    runtime: f64,
    /// Runs per scheme and candidate (their median is compared).
    #[arg(long, default_value_t = 1)]
    run_times: u32,
    /// Candidates measured at once, each in its own namespaces (they share the CPUs: keep
    /// it at or below the number of cores).
    #[arg(long, default_value_t = 1)]
    jobs: usize,
    /// Evaluations per delivery process, the initial design included.
    #[arg(long, default_value_t = 40)]
    max_evals: usize,
    /// Space-filling evaluations (Latin hypercube, the first ones replaced by guesses read
    /// off the target: rate, delay and queue from its logs, with its least loss and with
    /// none) before the optimiser takes over.
    #[arg(long, default_value_t = 8)]
    initial_evals: usize,
    /// The best candidates measured once more at the end (the objective is noisy; the best
    /// mean wins).
    #[arg(long, default_value_t = 2)]
    confirm: usize,
    /// Delivery processes to search: both (the paper's way: best of the two kept), constant
    /// or poisson.
    #[arg(long, value_enum, default_value_t = DeliveryArg::Both)]
    delivery: DeliveryArg,
    /// Rate bounds, Mbit/s, as LOW,HIGH (default: [0.5 × median, 2 × max] of the target's
    /// peak 500 ms throughput).
    #[arg(long, value_name = "LOW,HIGH", value_parser = parse_range::<f64>)]
    rate_mbps: Option<(f64, f64)>,
    /// One-way delay bounds, ms (default: [0, 2 × median minimum one-way delay]).
    #[arg(long, value_name = "LOW,HIGH", value_parser = parse_range::<u32>)]
    delay_ms: Option<(u32, u32)>,
    /// Uplink DropTail bounds, packets (default: [10, 1.5 × most packets in flight]).
    #[arg(long, value_name = "LOW,HIGH", value_parser = parse_range::<u32>)]
    queue_packets: Option<(u32, u32)>,
    /// Uplink loss bounds, fraction (default: [0, clamp(4 × median loss, 0.1, 0.5)]).
    #[arg(long, value_name = "LOW,HIGH", value_parser = parse_range::<f64>)]
    loss: Option<(f64, f64)>,
    /// Output directory.
    #[arg(long, default_value = "calibration")]
    out: PathBuf,
    /// Seed of the search and of the emulator's loss.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Keep every evaluation's packet logs (in OUT/evals/N/).
    #[arg(long)]
    keep_runs: bool,
    /// Extra scheme descriptors (*.toml).
    #[arg(long)]
    schemes_dir: Option<PathBuf>,
}

/// `--delivery`.
#[derive(Clone, Copy, clap::ValueEnum)]
enum DeliveryArg {
    /// Constant and Poisson, the better kept.
    Both,
    /// Constant-rate traces only.
    Constant,
    /// Poisson deliveries only.
    Poisson,
}

/// `LOW,HIGH` → (LOW, HIGH).
fn parse_range<T: std::str::FromStr>(s: &str) -> Result<(T, T), String> {
    let (a, b) = s
        .split_once(',')
        .ok_or_else(|| format!("`{s}`: expected LOW,HIGH"))?;
    let p = |x: &str| {
        x.trim()
            .parse::<T>()
            .map_err(|_| format!("`{x}` is not a number"))
    };
    Ok((p(a)?, p(b)?))
}

/// `--emulator-backend`.
#[derive(Clone, Copy, clap::ValueEnum)]
enum BackendArg {
    /// Pantheon-rs's emulator.
    Ours,
    /// Mahimahi's binaries (mm-delay, mm-link, …) from PATH.
    Mahimahi,
}

#[derive(Subcommand)]
enum RunMode {
    /// Both ends on this machine, over the emulated path (Pantheon's `test.py local`).
    Local(Box<LocalArgs>),
    /// Between two nodes of a testbed, each running `pantheon-agent` (Pantheon's `test.py
    /// remote`, with agents instead of ssh): tunnels over the real path between them, one-way
    /// delays corrected with NTP offsets measured before and after every run. Results and
    /// report as local runs.
    ///
    /// Example: `pantheon run remote 10.0.2.2 --local-agent 10.0.1.2 --credentials creds/
    /// --schemes "cubic bbr" --sender remote --tunnel-server local --local-addr 10.0.1.2
    /// --ntp-addr pool.ntp.org`.
    Remote(Box<RemoteArgs>),
}

/// Pantheon's `test.py remote` flags, with agents.
#[derive(Args)]
struct RemoteArgs {
    /// The remote node's agent: HOST[:PORT] (port 7070 by default).
    remote_agent: String,
    /// The local node's agent: HOST[:PORT].
    #[arg(long, default_value = "127.0.0.1")]
    local_agent: String,
    /// Directory with the testbed's agent.pem and token (`pantheon node credentials`).
    #[arg(long, default_value = "credentials")]
    credentials: PathBuf,
    #[command(flatten)]
    common: CommonRunArgs,
    /// Which node runs the scheme's sender.
    #[arg(long, value_enum, default_value_t = WhereArg::Local)]
    sender: WhereArg,
    /// Which node runs the tunnel server (the other dials it; put it where it can be reached).
    #[arg(long, value_enum, default_value_t = WhereArg::Remote)]
    tunnel_server: WhereArg,
    /// The local node's address the remote tunnel client dials (with --tunnel-server local).
    #[arg(long, value_name = "IP")]
    local_addr: Option<std::net::Ipv4Addr>,
    /// The remote node's address the local tunnel client dials (default: the remote agent's
    /// host).
    #[arg(long, value_name = "IP")]
    remote_addr: Option<std::net::Ipv4Addr>,
    /// Bind the local tunnel to this interface (and use its MTU).
    #[arg(long, value_name = "IF")]
    local_if: Option<String>,
    /// Bind the remote tunnel to this interface (and use its MTU).
    #[arg(long, value_name = "IF")]
    remote_if: Option<String>,
    /// NTP server (HOST[:PORT]) both nodes measure their clock offsets to, before and after
    /// every run; without it one-way delays mix two unsynchronised clocks (flagged).
    #[arg(long, value_name = "HOST")]
    ntp_addr: Option<String>,
    /// SNTP queries per offset measurement (the one with the shortest round trip is used).
    #[arg(long, default_value_t = 4)]
    ntp_samples: u32,
    /// Flag runs whose clock offset on either node moved more than this during the run, ms.
    #[arg(long, default_value_t = 1.0)]
    max_clock_move_ms: f64,
    /// Seconds the receiver's node keeps receiving after the sender's stopped.
    #[arg(long, default_value_t = 1.0)]
    drain: f64,
    /// Free text describing the local side (for the report).
    #[arg(long)]
    local_desc: Option<String>,
    /// Free text describing the remote side (for the report).
    #[arg(long)]
    remote_desc: Option<String>,
}

/// `--sender` / `--tunnel-server`.
#[derive(Clone, Copy, clap::ValueEnum)]
enum WhereArg {
    /// The node of --local-agent.
    Local,
    /// The remote node.
    Remote,
}

impl From<WhereArg> for pantheon_orchestrator::remote::Node {
    fn from(w: WhereArg) -> Self {
        match w {
            WhereArg::Local => pantheon_orchestrator::remote::Node::Local,
            WhereArg::Remote => pantheon_orchestrator::remote::Node::Remote,
        }
    }
}

#[derive(Subcommand)]
enum NodeAction {
    /// Make a testbed's credentials: a TLS certificate valid for the agents' addresses, its key
    /// and a shared token (agent.pem, agent.key, token). Give the same directory to every
    /// `pantheon-agent --credentials` and to `pantheon run remote --credentials`.
    Credentials {
        /// Directory to write (created if missing).
        #[arg(long)]
        out: PathBuf,
        /// An address or DNS name the agents are reached at (repeat it; localhost and
        /// 127.0.0.1 are always included).
        #[arg(long = "host", value_name = "ADDR")]
        hosts: Vec<String>,
    },
    /// Bring a node up over SSH: copy pantheon-agent and the credentials to it and start the
    /// agent there (replacing one this command started before), then wait until it answers.
    Bootstrap {
        /// The node: [USER@]HOST[:SSH_PORT] (user root, port 22 by default).
        target: String,
        /// The agent's name on that node (a–z, 0–9, '-'; at most 16).
        #[arg(long)]
        name: String,
        /// Credentials directory (with agent.key: the agent needs it).
        #[arg(long, default_value = "credentials")]
        credentials: PathBuf,
        /// Private key to log in with (default ~/.ssh/id_ed25519).
        #[arg(long, short = 'i')]
        identity: Option<PathBuf>,
        /// known_hosts file to check the node's host key against (default
        /// ~/.ssh/known_hosts; an unknown host is accepted and its fingerprint printed).
        #[arg(long)]
        known_hosts: Option<PathBuf>,
        /// Directory on the node for the agent, its credentials, data and log.
        #[arg(long, default_value = "/opt/pantheon-rs")]
        remote_dir: String,
        /// Port the agent listens on.
        #[arg(long, default_value_t = 7070)]
        port: u16,
        /// The pantheon-agent binary to copy (default: the one beside this pantheon).
        #[arg(long)]
        agent_binary: Option<PathBuf>,
    },
    /// Ask an agent what its node is: kernel, sysctls, interfaces, runnable schemes (and with
    /// --ntp-addr its clock offset).
    Info {
        /// The agent: HOST[:PORT].
        agent: String,
        /// Credentials directory.
        #[arg(long, default_value = "credentials")]
        credentials: PathBuf,
        /// Also measure the node's clock offset to this NTP server.
        #[arg(long, value_name = "HOST")]
        ntp_addr: Option<String>,
    },
}

#[derive(Subcommand)]
enum SchemesAction {
    /// List the schemes and whether each can run on this machine (and why not).
    List {
        /// Extra scheme descriptors (*.toml).
        #[arg(long)]
        schemes_dir: Option<PathBuf>,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Install what schemes need — the Debian, Python, Rust and Nix packages their descriptors
    /// name — and run their setup steps (needs root for apt). One failing scheme does not stop
    /// the others; exit status 1 if any failed. See docs/schemes.md.
    Setup {
        /// Schemes to set up.
        #[arg(required_unless_present = "all", conflicts_with = "all")]
        names: Vec<String>,
        /// Set up every scheme.
        #[arg(long)]
        all: bool,
        /// Extra scheme descriptors (*.toml).
        #[arg(long)]
        schemes_dir: Option<PathBuf>,
    },
    /// Run each scheme through a short emulated run (10 Mbit/s both ways, mm-delay 28, through
    /// the tunnel) and say which work and, precisely, what is wrong with the others (needs
    /// root). Exit status 1 if any fails.
    Check {
        /// Schemes to check (default: all).
        names: Vec<String>,
        /// Seconds each run lasts.
        #[arg(long, default_value_t = 5.0)]
        runtime: f64,
        /// Extra scheme descriptors (*.toml).
        #[arg(long)]
        schemes_dir: Option<PathBuf>,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
}

#[derive(Subcommand)]
enum TraceAction {
    /// Write a constant-rate trace: RATE_MBPS Mbit/s of 1500-byte packets (10 → `1 2 3 4 6`).
    Constant {
        /// Rate in Mbit/s (up to 3 decimals).
        rate_mbps: f64,
        /// Output file (default: `<RATE>mbps.trace`).
        #[arg(short, long)]
        output: Option<PathBuf>,
    },
    /// Write a Poisson trace: opportunities of a Poisson process of RATE_MBPS Mbit/s mean,
    /// each at its whole ms, as Pantheon's `*mbps-poisson` cellular traces.
    Poisson {
        /// Mean rate in Mbit/s.
        rate_mbps: f64,
        /// Length of the trace, ms (it then repeats).
        #[arg(long, default_value_t = 60_000)]
        duration_ms: u64,
        /// Seed of the generator.
        #[arg(long, default_value_t = 1)]
        seed: u64,
        /// Output file (default: `<RATE>mbps-poisson.trace`).
        #[arg(short, long)]
        output: Option<PathBuf>,
    },
}

/// The flags local and remote runs share (Pantheon's).
#[derive(Args)]
struct CommonRunArgs {
    /// Schemes to run, space separated, e.g. "cubic bbr".
    #[arg(long, conflicts_with = "all", required_unless_present = "all")]
    schemes: Option<String>,
    /// Run every scheme that can run on this machine.
    #[arg(long)]
    all: bool,
    /// Seconds each run lasts, from the start of its (first) flow.
    #[arg(short = 't', long, default_value_t = 30.0)]
    runtime: f64,
    /// Runs per scheme.
    #[arg(long, default_value_t = 1)]
    run_times: u32,
    /// Id of the first run.
    #[arg(long, default_value_t = 1)]
    start_run_id: u32,
    /// Flows per run (one tunnel each).
    #[arg(short = 'f', long, default_value_t = 1)]
    flows: u16,
    /// Seconds between the starts of two flows.
    #[arg(long, default_value_t = 0.0)]
    interval: f64,
    /// Shuffle the order of the schemes (once, as Pantheon).
    #[arg(long)]
    random_order: bool,
    /// Results directory (created if missing).
    #[arg(long, default_value = "results")]
    data_dir: PathBuf,
    /// Extra scheme descriptors (*.toml) that add to or override the built-in ones.
    #[arg(long)]
    schemes_dir: Option<PathBuf>,
    /// Seconds to wait after starting the side that runs first (Pantheon: 3).
    #[arg(long, default_value_t = 1.0)]
    first_side_setup: f64,
}

/// Pantheon's `test.py local` flags.
#[derive(Args)]
struct LocalArgs {
    #[command(flatten)]
    common: CommonRunArgs,
    /// A named emulator from the library (`pantheon emulators`), e.g. nepal-aws-india; sets
    /// the traces, --prepend-mm-cmds and --extra-mm-link-args.
    #[arg(long, value_name = "NAME", conflicts_with_all = ["uplink_trace", "downlink_trace", "prepend_mm_cmds", "extra_mm_link_args"])]
    emulator: Option<String>,
    /// Uplink (sender → receiver) trace. Default: a 12 Mbit/s trace, as Pantheon.
    #[arg(long)]
    uplink_trace: Option<PathBuf>,
    /// Downlink (receiver → sender) trace. Default: a 12 Mbit/s trace.
    #[arg(long)]
    downlink_trace: Option<PathBuf>,
    /// Mahimahi shells outside mm-link, e.g. "mm-delay 28 mm-loss uplink 0.004".
    #[arg(long, default_value = "", allow_hyphen_values = true)]
    prepend_mm_cmds: String,
    /// Mahimahi shells inside mm-link.
    #[arg(long, default_value = "", allow_hyphen_values = true)]
    append_mm_cmds: String,
    /// mm-link options, e.g. "--uplink-queue=droptail --uplink-queue-args=packets=50".
    #[arg(long, default_value = "", allow_hyphen_values = true)]
    extra_mm_link_args: String,
    /// Longest wait, in seconds, for packets still in the path to leave it after a run.
    #[arg(long, default_value_t = 10.0)]
    drain_timeout: f64,
    /// Seed of the emulator's random loss (default: from the clock; recorded in the metadata).
    #[arg(long)]
    seed: Option<u64>,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match real_main(cli) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::from(2)
        }
    }
}

fn real_main(cli: Cli) -> anyhow::Result<ExitCode> {
    if matches!(
        cli.command,
        Top::Analyze { .. }
            | Top::Compare { .. }
            | Top::Schemes { .. }
            | Top::Emulators { .. }
            | Top::LinkLog { .. }
    ) {
        // Commands that only print: end quietly when the reader goes (`… | head`), as Unix
        // tools do, instead of panicking on a broken pipe.
        // SAFETY: restoring the default disposition of a signal has no preconditions.
        unsafe {
            libc::signal(libc::SIGPIPE, libc::SIG_DFL);
        }
    }
    match cli.command {
        Top::Run {
            mode: RunMode::Local(args),
        } => run_local(*args),
        Top::Run {
            mode: RunMode::Remote(args),
        } => run_remote(*args),
        Top::Node { action } => run_node(action),
        Top::Serve(args) => testbed_cli::serve(*args),
        Top::Submit(args) => testbed_cli::submit(*args),
        Top::Status { daemon, json } => testbed_cli::status(daemon, json),
        Top::Results { action } => testbed_cli::results(action),
        Top::Calibrate(args) => run_calibrate(*args),
        Top::Analyze { dir, schemes_dir } => {
            let registry = Registry::load(schemes_dir.as_deref())?;
            let md = analyze::analyze_dir(&dir, &registry)?;
            println!("{md}");
            Ok(ExitCode::SUCCESS)
        }
        Top::Schemes {
            action:
                SchemesAction::Check {
                    names,
                    runtime,
                    schemes_dir,
                    json,
                },
        } => {
            let registry = Registry::load(schemes_dir.as_deref())?;
            // SAFETY: geteuid has no preconditions.
            if unsafe { libc::geteuid() } != 0 {
                anyhow::bail!("`pantheon schemes check` needs root (network namespaces, TUN)");
            }
            let work = tempfile::Builder::new()
                .prefix("pantheon-check-")
                .tempdir()
                .context("create a scratch directory")?;
            let tag = format!("ptc-{}", std::process::id());
            let verdicts = pantheon_orchestrator::check::check(
                &registry,
                &names,
                secs(runtime, "--runtime")?,
                work.path(),
                &tag,
            )?;
            if json {
                println!("{}", serde_json::to_string_pretty(&verdicts)?);
            }
            let rows = verdicts.iter().map(|v| (&*v.scheme, v.ok, &*v.detail));
            Ok(verdict_lines(rows, !json))
        }
        Top::Schemes {
            action:
                SchemesAction::Setup {
                    names,
                    all: _,
                    schemes_dir,
                },
        } => {
            let registry = Registry::load(schemes_dir.as_deref())?;
            let chosen = if names.is_empty() {
                registry.all().collect::<Vec<_>>()
            } else {
                names
                    .iter()
                    .map(|n| registry.get(n))
                    .collect::<Result<Vec<_>, _>>()?
            };
            let outcomes = pantheon_orchestrator::setup::setup_all(&chosen);
            let rows = outcomes.iter().map(|o| (&*o.scheme, o.ok, &*o.detail));
            Ok(verdict_lines(rows, true))
        }
        Top::Compare {
            a,
            b,
            json,
            schemes_dir,
        } => {
            let registry = Registry::load(schemes_dir.as_deref())?;
            let c = pantheon_orchestrator::compare::compare_dirs(&a, &b, &registry)?;
            if json {
                println!("{}", serde_json::to_string_pretty(&c)?);
            } else {
                print!("{}", pantheon_orchestrator::compare::render(&a, &b, &c));
            }
            Ok(ExitCode::SUCCESS)
        }
        Top::Schemes {
            action: SchemesAction::List { schemes_dir, json },
        } => {
            let registry = Registry::load(schemes_dir.as_deref())?;
            let sys = SystemInfo::probe();
            let mut rows = Vec::new();
            for s in registry.all() {
                let why = s.unavailable_reason(&sys);
                if json {
                    rows.push(serde_json::json!({"name": s.name, "label": s.label,
                        "runnable": why.is_none(), "reason": why, "notes": s.notes(&sys)}));
                } else {
                    match &why {
                        None => println!("{:<16} {:<13} runnable", s.name, s.label),
                        Some(w) => println!("{:<16} {:<13} NOT runnable: {w}", s.name, s.label),
                    }
                    for n in s.notes(&sys) {
                        println!("{:<30}  note: {n}", "");
                    }
                }
            }
            if json {
                println!("{}", serde_json::to_string_pretty(&rows)?);
            }
            Ok(ExitCode::SUCCESS)
        }
        Top::Shell {
            seed,
            ms_clock,
            emulator,
            emulator_backend,
            chain,
        } => {
            let backend = match emulator_backend {
                BackendArg::Ours => shell::Backend::Ours,
                BackendArg::Mahimahi => shell::Backend::Mahimahi,
            };
            let opts = shell::ShellOptions {
                seed,
                ms_clock,
                emulator,
                backend,
            };
            let code = shell::run(&chain, &opts)?;
            Ok(ExitCode::from(code.clamp(0, 255) as u8))
        }
        Top::Trace { action } => {
            let (trace, out) = match action {
                TraceAction::Constant { rate_mbps, output } => (
                    Trace::constant_rate(rate_mbps),
                    output.unwrap_or_else(|| format!("{rate_mbps}mbps.trace").into()),
                ),
                TraceAction::Poisson {
                    rate_mbps,
                    duration_ms,
                    seed,
                    output,
                } => (
                    Trace::poisson(rate_mbps, duration_ms, seed),
                    output.unwrap_or_else(|| format!("{rate_mbps}mbps-poisson.trace").into()),
                ),
            };
            let trace = trace.map_err(anyhow::Error::msg)?;
            std::fs::write(&out, trace.to_text())
                .with_context(|| format!("write {}", out.display()))?;
            println!("{}", out.display());
            Ok(ExitCode::SUCCESS)
        }
        Top::Emulators { json } => {
            let all = emucal::presets::presets();
            if json {
                println!("{}", serde_json::to_string_pretty(&all)?);
            } else {
                for p in &all {
                    println!("{}\n    {}", p.name, p.description);
                    let chain = p.chain_words(std::path::Path::new(&p.trace_file_name()));
                    println!("    {}", chain.join(" "));
                }
            }
            Ok(ExitCode::SUCCESS)
        }
        Top::LinkLog { file, output } => {
            let data = std::fs::read(&file).with_context(|| format!("read {}", file.display()))?;
            let log = emucal::linklog::read_binary(&data)
                .map_err(|e| anyhow::anyhow!("{}: {e}", file.display()))?;
            let text = emucal::linklog::to_text(&log);
            match &output {
                Some(out) => std::fs::write(out, &text)
                    .with_context(|| format!("write {}", out.display()))?,
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
    }
}

/// Prints (when `print`) one `NAME  ok|FAILED  DETAIL` line per scheme, for `schemes check`
/// and `schemes setup`; exit status 1 if any failed.
fn verdict_lines<'a>(
    rows: impl Iterator<Item = (&'a str, bool, &'a str)>,
    print: bool,
) -> ExitCode {
    let mut all_ok = true;
    for (scheme, ok, detail) in rows {
        all_ok &= ok;
        if print {
            let status = if ok { "ok    " } else { "FAILED" };
            println!("{scheme:<16} {status} {detail}");
        }
    }
    if all_ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    }
}

/// Ctrl-C / SIGTERM: the runner finishes the current run's cleanup and stops; a second one
/// exits at once.
fn install_interrupt_handler() -> anyhow::Result<()> {
    ctrlc::set_handler(|| {
        if INTERRUPTED.swap(true, Ordering::SeqCst) {
            eprintln!("\nsecond interrupt: exiting now (namespaces named pt-<pid>-* may remain)");
            std::process::exit(130);
        }
        eprintln!("\ninterrupted: cleaning up the current run…");
    })
    .context("install the Ctrl-C handler")
}

fn run_calibrate(a: CalibrateArgs) -> anyhow::Result<ExitCode> {
    use emucal::mm::Delivery;
    use pantheon_orchestrator::calibrate::{self, CalibrateOptions};
    let registry = Registry::load(a.schemes_dir.as_deref())?;
    let target = calibrate::load_target(&a.target, &registry)?;
    let sys = SystemInfo::probe();
    let schemes: Vec<String> = match &a.schemes {
        Some(s) => s.split_whitespace().map(str::to_owned).collect(),
        None => target
            .schemes
            .keys()
            .filter(|k| {
                registry
                    .get(k)
                    .is_ok_and(|s| s.unavailable_reason(&sys).is_none())
            })
            .cloned()
            .collect(),
    };
    if schemes.is_empty() {
        anyhow::bail!(
            "none of the target's schemes ({}) can run here: see `pantheon schemes list`",
            target.scheme_names()
        );
    }
    if a.jobs == 0 || a.max_evals == 0 || a.run_times == 0 {
        anyhow::bail!("--jobs, --max-evals and --run-times must be at least 1");
    }
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        anyhow::bail!("`pantheon calibrate` needs root (network namespaces and TUN devices)");
    }
    let opts = CalibrateOptions {
        schemes,
        runtime: secs(a.runtime, "--runtime")?,
        run_times: a.run_times,
        jobs: a.jobs,
        max_evals: a.max_evals,
        initial_evals: a.initial_evals,
        confirm: a.confirm,
        deliveries: match a.delivery {
            DeliveryArg::Both => vec![Delivery::Trace, Delivery::Poisson],
            DeliveryArg::Constant => vec![Delivery::Trace],
            DeliveryArg::Poisson => vec![Delivery::Poisson],
        },
        rate_mbps: a.rate_mbps,
        delay_ms: a.delay_ms,
        queue_packets: a.queue_packets,
        loss: a.loss,
        out_dir: a.out.clone(),
        seed: a.seed,
        keep_runs: a.keep_runs,
        schemes_dir: a.schemes_dir.clone(),
        netns_prefix: format!("pt-{}", std::process::id()),
    };
    install_interrupt_handler()?;
    eprintln!(
        "Calibrating to {} with {} ({} × {} s per candidate), {} evaluations per delivery \
         process, {} at a time → {}",
        target.source,
        opts.schemes.join(", "),
        opts.run_times,
        opts.runtime.as_secs_f64(),
        opts.max_evals,
        opts.jobs,
        opts.out_dir.display()
    );
    let bar = CalibrationBar(ProgressBar::new(0));
    bar.0.set_style(
        ProgressStyle::with_template(
            "[{elapsed_precise}] {bar:30} {pos}/{len} {msg} (≈{eta} left)",
        )
        .expect("valid template"),
    );
    let evaluator = calibrate::LocalEvaluator {
        registry: &registry,
        opts: &opts,
    };
    let outcome = calibrate::calibrate(&target, &opts, &registry, &evaluator, &bar);
    bar.0.finish_and_clear();
    let o = outcome?;
    println!(
        "Best emulator: {}\nreplication error {:.1} % (throughput {:.1} %, delay {:.1} %; mean of \
         {} measurement(s)), {} evaluations\n{}",
        o.best.describe(),
        o.error_pct,
        o.tput_error_pct,
        o.delay_error_pct,
        o.measurements,
        o.evaluations,
        std::fs::read_to_string(opts.out_dir.join("mahimahi.txt")).unwrap_or_default()
    );
    for (s, l) in &o.leave_one_out {
        println!(
            "leave-one-out {s}: fit on the others {:.1} %, predicts {s} within {:.1} % \
             (throughput) and {:.1} % (delay)",
            l.fit_error_pct, l.tput_error_pct, l.delay_error_pct
        );
    }
    println!(
        "Use it: pantheon run local --emulator {}",
        opts.out_dir.join("emulator.json").display()
    );
    Ok(if INTERRUPTED.load(Ordering::SeqCst) {
        ExitCode::from(130)
    } else {
        ExitCode::SUCCESS
    })
}

/// `pantheon calibrate`'s progress bar: evaluations done, best error so far.
struct CalibrationBar(ProgressBar);

impl pantheon_orchestrator::calibrate::Progress for CalibrationBar {
    fn evaluated(
        &self,
        e: &emucal::calibrate::Evaluation,
        done: usize,
        total: usize,
        best: Option<&emucal::calibrate::Evaluation>,
    ) {
        self.0.set_length(total as u64);
        self.0.set_position(done as u64);
        let line = match (e.overall_error_pct, &e.failure) {
            (Some(err), _) => format!("{}: {err:.1} %", e.candidate.describe()),
            (None, f) => format!(
                "{}: FAILED: {}",
                e.candidate.describe(),
                f.as_deref().unwrap_or("?")
            ),
        };
        self.0.suspend(|| eprintln!("{line}"));
        if let Some(b) = best.and_then(|b| b.overall_error_pct.map(|x| (x, b))) {
            self.0
                .set_message(format!("best {:.1} %: {}", b.0, b.1.candidate.describe()));
        }
    }

    fn phase(&self, what: &str) {
        self.0.suspend(|| eprintln!("— {what}"));
    }
}

fn secs(s: f64, flag: &str) -> anyhow::Result<Duration> {
    Duration::try_from_secs_f64(s)
        .map_err(|_| anyhow::anyhow!("{flag} must be a non-negative number of seconds"))
}

/// The schemes of `--schemes`, or with `--all` every scheme that can run here (the others
/// named on stderr); shuffled with `seed` if `--random-order`.
fn chosen_schemes(c: &CommonRunArgs, registry: &Registry, seed: u64) -> Vec<String> {
    let sys = SystemInfo::probe();
    let mut schemes: Vec<String> = match &c.schemes {
        Some(s) => s.split_whitespace().map(str::to_owned).collect(),
        None => registry
            .all()
            .filter(|s| match s.unavailable_reason(&sys) {
                None => true,
                Some(why) => {
                    eprintln!("--all: skipping {} ({why})", s.name);
                    false
                }
            })
            .map(|s| s.name.clone())
            .collect(),
    };
    if c.random_order {
        schemes.shuffle(&mut SmallRng::seed_from_u64(seed));
    }
    schemes
}

/// The plan of the common flags; the local-only fields are the caller's to set.
fn common_plan(
    c: &CommonRunArgs,
    schemes: Vec<String>,
    seed: u64,
) -> anyhow::Result<ExperimentPlan> {
    Ok(ExperimentPlan {
        schemes,
        run_times: c.run_times,
        start_run_id: c.start_run_id,
        runtime: secs(c.runtime, "--runtime")?,
        flows: c.flows,
        interval: secs(c.interval, "--interval")?,
        first_side_setup: secs(c.first_side_setup, "--first-side-setup")?,
        drain_timeout: Duration::ZERO,
        random_order: c.random_order,
        data_dir: c.data_dir.clone(),
        seed,
        uplink_trace: PathBuf::new(),
        downlink_trace: PathBuf::new(),
        prepend_mm_cmds: String::new(),
        append_mm_cmds: String::new(),
        extra_mm_link_args: String::new(),
        schemes_dir: c.schemes_dir.clone(),
    })
}

fn clock_seed() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(1)
}

fn run_local(a: LocalArgs) -> anyhow::Result<ExitCode> {
    let registry = Registry::load(a.common.schemes_dir.as_deref())?;
    let seed = a.seed.unwrap_or_else(clock_seed);
    let schemes = chosen_schemes(&a.common, &registry, seed);
    let data_dir = a.common.data_dir.clone();
    std::fs::create_dir_all(&data_dir).with_context(|| format!("create {}", data_dir.display()))?;
    let mut a = a;
    if let Some(name) = &a.emulator {
        // A preset: its trace in the data directory, its shells as Pantheon's flags.
        let preset = emucal::presets::find(name).map_err(anyhow::Error::msg)?;
        let trace = data_dir.join(preset.trace_file_name());
        write_constant_trace(&trace, preset.rate_mbps)?;
        a.uplink_trace = Some(trace.clone());
        a.downlink_trace = Some(trace);
        a.prepend_mm_cmds = preset.prepend;
        a.extra_mm_link_args = preset.link_args;
    }
    // Pantheon's default trace (12 Mbit/s), written once if either direction needs it.
    let default_trace = if a.uplink_trace.is_some() && a.downlink_trace.is_some() {
        None
    } else {
        let p = data_dir.join("12mbps.trace");
        write_constant_trace(&p, 12.0)?;
        Some(p)
    };
    let trace_or_default = |t: &Option<PathBuf>| {
        t.clone()
            .or_else(|| default_trace.clone())
            .expect("written above")
    };
    let plan = ExperimentPlan {
        drain_timeout: secs(a.drain_timeout, "--drain-timeout")?,
        uplink_trace: trace_or_default(&a.uplink_trace),
        downlink_trace: trace_or_default(&a.downlink_trace),
        prepend_mm_cmds: a.prepend_mm_cmds.clone(),
        append_mm_cmds: a.append_mm_cmds.clone(),
        extra_mm_link_args: a.extra_mm_link_args.clone(),
        ..common_plan(&a.common, schemes, seed)?
    };
    let path = plan.validate(&registry)?;
    let sys = SystemInfo::probe();
    for name in &plan.schemes {
        if let Some(why) = registry.get(name)?.unavailable_reason(&sys) {
            eprintln!("warning: {name} cannot run here ({why}); its runs will fail");
        }
    }
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        anyhow::bail!("`pantheon run local` needs root (network namespaces and TUN devices)");
    }
    let netns_prefix = format!("pt-{}", std::process::id());
    let mut metadata = plan.metadata(&path);
    metadata["netns_prefix"] = serde_json::json!(netns_prefix);
    if let Some(name) = &a.emulator {
        metadata["emulator_preset"] = serde_json::json!(name);
    }
    write_json(&plan.data_dir.join("pantheon_metadata.json"), &metadata)?;
    eprintln!("Emulated path: {}", path.command_line);
    run_experiment(
        &plan,
        &registry,
        &netns_prefix,
        &|scheme, run_id, tag, progress| {
            runner::run_once(&plan, &path, scheme, run_id, tag, progress)
        },
    )
}

/// Runs one scheme once: (scheme, run id, unique tag, progress callback taking 0–1) → record.
type RunOne<'a> = &'a dyn Fn(&Scheme, u32, &str, &dyn Fn(f64)) -> runner::RunRecord;

/// Runs every scheme `run_times` times with `run_one` (given the scheme, run id, a unique tag
/// `<prefix>-<n>` and a progress callback), with a progress bar; records each run in
/// `pantheon_runs.json` as it ends; stops after the current run on Ctrl-C; then analyses the
/// results directory and prints the summary. Exit status 130 when interrupted.
fn run_experiment(
    plan: &ExperimentPlan,
    registry: &Registry,
    prefix: &str,
    run_one: RunOne,
) -> anyhow::Result<ExitCode> {
    install_interrupt_handler()?;
    let total = plan.run_times as usize * plan.schemes.len();
    eprintln!(
        "{} scheme(s) × {} run(s) of {} s → {}",
        plan.schemes.len(),
        plan.run_times,
        plan.runtime.as_secs_f64(),
        plan.data_dir.display()
    );
    let bar = ProgressBar::new((total * 1000) as u64);
    bar.set_style(
        ProgressStyle::with_template("[{elapsed_precise}] {bar:30} {msg} (≈{eta} left)")
            .expect("valid template"),
    );
    let mut records = Vec::new();
    let mut seq = 0usize;
    'runs: for run_id in plan.start_run_id..plan.start_run_id + plan.run_times {
        for name in &plan.schemes {
            let scheme = registry.get(name)?;
            bar.set_message(format!("{name} run {run_id} ({}/{total})", seq + 1));
            let tag = format!("{prefix}-{seq}");
            let base = (seq * 1000) as u64;
            let rec = run_one(scheme, run_id, &tag, &|f| {
                bar.set_position(base + (f * 1000.0) as u64);
            });
            seq += 1;
            bar.set_position((seq * 1000) as u64);
            let line = match &rec.outcome {
                RunOutcome::Ok => format!("{name} run {run_id}: done"),
                RunOutcome::Failed { reason } => format!("{name} run {run_id}: FAILED: {reason}"),
                RunOutcome::Interrupted => format!("{name} run {run_id}: interrupted"),
            };
            bar.suspend(|| eprintln!("{line}"));
            records.push(rec);
            write_json(
                &plan.data_dir.join("pantheon_runs.json"),
                &serde_json::to_value(&records)?,
            )?;
            if INTERRUPTED.load(Ordering::SeqCst) {
                break 'runs;
            }
        }
    }
    bar.finish_and_clear();
    if INTERRUPTED.load(Ordering::SeqCst) {
        eprintln!("interrupted: analysing what was recorded");
    }
    let md = analyze::analyze_dir(&plan.data_dir, registry)?;
    println!("{md}");
    Ok(if INTERRUPTED.load(Ordering::SeqCst) {
        ExitCode::from(130)
    } else {
        ExitCode::SUCCESS
    })
}

fn run_node(action: NodeAction) -> anyhow::Result<ExitCode> {
    use pantheon_orchestrator::agent::{auth::Credentials, client::AgentClient};
    match action {
        NodeAction::Credentials { out, hosts } => {
            Credentials::generate(&hosts)?.write(&out)?;
            eprintln!(
                "wrote {}/{{agent.pem,agent.key,token}}: copy the directory to every node \
                 (pantheon-agent --credentials) and keep it for pantheon run remote",
                out.display()
            );
        }
        NodeAction::Bootstrap {
            target,
            name,
            credentials,
            identity,
            known_hosts,
            remote_dir,
            port,
            agent_binary,
        } => {
            use pantheon_orchestrator::agent::bootstrap::{bootstrap, Bootstrap};
            let creds = Credentials::load(&credentials, true)?;
            let (user, host, ssh_port) = Bootstrap::parse_target(&target)?;
            let home = PathBuf::from(std::env::var_os("HOME").unwrap_or_else(|| "/root".into()));
            let agent_binary = match agent_binary {
                Some(p) => p,
                None => std::env::current_exe()
                    .context("locate this pantheon binary")?
                    .with_file_name("pantheon-agent"),
            };
            let b = Bootstrap {
                user,
                host: host.clone(),
                port: ssh_port,
                identity: identity.unwrap_or_else(|| home.join(".ssh/id_ed25519")),
                known_hosts: known_hosts.unwrap_or_else(|| home.join(".ssh/known_hosts")),
                remote_dir,
                name,
                listen_port: port,
                agent_binary,
            };
            bootstrap(&b, &creds, &|m| eprintln!("{m}"))?;
            let client = AgentClient::new(&format!("{host}:{port}"), &creds)?;
            let info = client
                .wait_ready(Duration::from_secs(20))
                .context("the agent did not answer within 20 s (see agent.log on the node)")?;
            let runnable: Vec<&str> = info
                .schemes
                .iter()
                .filter(|s| s.runnable)
                .map(|s| s.name.as_str())
                .collect();
            println!(
                "node {} ({}, {}) answers on {host}:{port}; runnable schemes: {}",
                info.node,
                info.hostname,
                info.kernel,
                if runnable.is_empty() {
                    "none yet (pantheon schemes setup)".to_owned()
                } else {
                    runnable.join(" ")
                }
            );
        }
        NodeAction::Info {
            agent,
            credentials,
            ntp_addr,
        } => {
            let c = AgentClient::new(&agent, &Credentials::load(&credentials, false)?)?;
            let info = c.info()?;
            let mut v = serde_json::json!({
                "node": info.node, "hostname": info.hostname, "kernel": info.kernel,
                "version": info.version, "sysctls": info.sysctls,
                "interfaces": info.interfaces.iter().map(|i| serde_json::json!({
                    "name": i.name, "mtu": i.mtu, "addresses": i.addresses})).collect::<Vec<_>>(),
                "schemes": info.schemes.iter().map(|s| serde_json::json!({
                    "name": s.name, "runnable": s.runnable, "detail": s.detail})).collect::<Vec<_>>(),
            });
            if let Some(server) = ntp_addr {
                let r = c.clock_offset(&server, 4)?;
                v["clock_offset_ms"] = serde_json::json!(r.offset_ms);
                v["clock_rtt_ms"] = serde_json::json!(r.rtt_ms);
            }
            println!("{}", serde_json::to_string_pretty(&v)?);
        }
    }
    Ok(ExitCode::SUCCESS)
}

fn run_remote(a: RemoteArgs) -> anyhow::Result<ExitCode> {
    use pantheon_orchestrator::agent::{auth::Credentials, client::AgentClient};
    use pantheon_orchestrator::remote::{self, Nodes, RemoteOptions};
    let registry = Registry::load(a.common.schemes_dir.as_deref())?;
    let schemes = chosen_schemes(&a.common, &registry, clock_seed());
    let plan = common_plan(&a.common, schemes, 0)?;
    plan.check(&registry)?;
    let credentials = Credentials::load(&a.credentials, false)?;
    let local = AgentClient::new(&a.local_agent, &credentials)?;
    let remote_agent = AgentClient::new(&a.remote_agent, &credentials)?;
    let opts = RemoteOptions {
        sender: a.sender.into(),
        tunnel_server: a.tunnel_server.into(),
        local_addr: a.local_addr,
        remote_addr: a.remote_addr,
        local_if: a.local_if.clone(),
        remote_if: a.remote_if.clone(),
        ntp_addr: a.ntp_addr.clone(),
        ntp_samples: a.ntp_samples,
        max_clock_move_ns: (a.max_clock_move_ms * 1e6) as i64,
        drain: secs(a.drain, "--drain")?,
    };
    remote::check_options(&opts, &remote_agent.host)?;
    let nodes = Nodes {
        local: &local,
        remote: &remote_agent,
    };
    let desc = remote::Descriptions {
        local: a.local_desc.clone(),
        remote: a.remote_desc.clone(),
    };
    remote::start_experiment(&plan, &opts, &nodes, &desc, &|w| eprintln!("warning: {w}"))?;
    eprintln!(
        "Remote experiment: sender on the {} node, tunnel server on the {} node ({} ↔ {})",
        opts.sender.name(),
        opts.tunnel_server.name(),
        local.addr,
        remote_agent.addr
    );
    // Run names are unique per invocation: `r<pid>-<n>` (agents prefix them with their node).
    let prefix = format!("r{}", std::process::id());
    run_experiment(
        &plan,
        &registry,
        &prefix,
        &|scheme, run_id, tag, progress| {
            remote::run_when_ready(&plan, &opts, &nodes, scheme, run_id, tag, progress)
        },
    )
}
