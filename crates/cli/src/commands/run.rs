//! `pantheon run local|remote`: Pantheon's `test.py local` and `test.py remote` flags, and
//! the experiment loop both share (progress bar, `pantheon_runs.json`, Ctrl-C, analysis).
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context;
use clap::{Args, Subcommand};
use emucal::emulator::Emulator;
use engine::experiment;
use engine::mix::{Config, Mix};
use engine::plan::{
    seconds, ExperimentPlan, Reuse, MAX_DRAIN_TIMEOUT, MAX_FIRST_SIDE_SETUP, MAX_RUNTIME,
};
use engine::record::{RunOutcome, RunRecord};
use engine::schemes::{Registry, SystemInfo};
use engine::sequence::RunSpec;
use indicatif::{ProgressBar, ProgressStyle};
use rand::rngs::SmallRng;
use rand::seq::SliceRandom;
use rand::SeedableRng;

use super::install_interrupt_handler;

#[derive(Subcommand)]
pub(crate) enum RunMode {
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
    /// The flags of `run local`, simulated on a virtual clock instead of run in real time:
    /// the QUIC schemes' quinn-proto connections (quic, quic_newreno, quic_bbr) over the
    /// same emulator stages, one core per run, deterministic from --seed, and as fast as the
    /// CPU allows. Logs, results and report as `run local`'s; no root needed. Schemes with
    /// their own programs (kernel TCP, quiche, tquic…) are refused, with the reason. See
    /// docs/simulation.md.
    ///
    /// Example: `pantheon run sim --schemes "quic quic_bbr" --prepend-mm-cmds "mm-delay 28"
    /// --uplink-trace 10mbps.trace --downlink-trace 10mbps.trace --seed 1`.
    Sim(Box<SimArgs>),
}

/// `pantheon run sim`: `run local`'s flags and the simulated hosts.
#[derive(Args)]
pub(crate) struct SimArgs {
    #[command(flatten)]
    local: LocalArgs,
    /// The time a packet out of the path takes to reach its QUIC endpoint (with the reply's
    /// way back), which a real run spends in the tunnel, the kernel and the program's wake-up:
    /// `ideal` (none: every reply at the instant of its cause), `measured` (this machine's,
    /// 45 µs + an exponential of mean 35 µs per packet, drawn from the run's number so runs
    /// differ as real ones do) or `MIN+MEAN` in µs. Fidelity of each: docs/simulation.md.
    #[arg(long, default_value = "ideal", value_name = "ideal|measured|MIN+MEAN")]
    host_latency: sim::run::HostLatency,
}

/// Runs a local or a remote experiment.
pub(crate) fn exec(mode: RunMode) -> anyhow::Result<ExitCode> {
    match mode {
        RunMode::Local(args) => run_emulated(*args, None),
        RunMode::Remote(args) => run_remote(*args),
        RunMode::Sim(args) => run_emulated(args.local, Some(args.host_latency)),
    }
}

/// Pantheon's `test.py remote` flags, with agents.
#[cfg_attr(not(feature = "testbed"), allow(dead_code))]
#[derive(Args)]
pub(crate) struct RemoteArgs {
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
#[cfg_attr(not(feature = "testbed"), allow(dead_code))]
#[derive(Clone, Copy, clap::ValueEnum)]
enum WhereArg {
    /// The node of --local-agent.
    Local,
    /// The remote node.
    Remote,
}

#[cfg(feature = "testbed")]
impl From<WhereArg> for pantheon_orchestrator::remote::Node {
    fn from(w: WhereArg) -> Self {
        match w {
            WhereArg::Local => pantheon_orchestrator::remote::Node::Local,
            WhereArg::Remote => pantheon_orchestrator::remote::Node::Remote,
        }
    }
}

/// The flags local and remote runs share (Pantheon's).
#[derive(Args)]
pub(crate) struct CommonRunArgs {
    /// Schemes to run, space separated, e.g. "cubic bbr".
    #[arg(long, conflicts_with_all = ["all", "mix", "config_file"], required_unless_present_any = ["all", "mix", "config_file"])]
    schemes: Option<String>,
    /// Run every scheme that can run on this machine.
    #[arg(long, conflicts_with_all = ["mix", "config_file"])]
    all: bool,
    /// Read the names in --schemes that are Pantheon's (copa, quic, scream, default_tcp, …) as
    /// Pantheon ran those schemes on this day, YYYY-MM-DD: each is replaced by the scheme here
    /// whose `[pantheon]` era covers the day (copa on 2017-08-30 → copa_orig), said on stderr;
    /// other names are kept. Errors if a Pantheon name has no scheme of that era. Without it,
    /// a Pantheon name no scheme here is called by (copa: tquic's Copa is tquic_copa) is read
    /// as of the seed reports' era, 2017-08-30. See `pantheon schemes era`.
    #[arg(long, value_name = "DAY", requires = "schemes")]
    pantheon_era: Option<engine::provenance::Day>,
    /// A mixed experiment: flows of different schemes on the one bottleneck, each
    /// SCHEME[@START[-STOP]][+DELAY][(WORKLOAD)], START and STOP in seconds after the run
    /// starts, e.g. "cubic bbr@10 ledbat@20-40" (cubic from the start, bbr from 10 s, ledbat
    /// from 20 to 40 s) or "cubic(page) ledbat" (page loads beside a bulk flow). The runs are
    /// filed under the schemes joined by '-' (cubic-bbr-ledbat). See docs/competition.md.
    #[arg(long, value_name = "FLOWS", conflicts_with_all = ["config_file", "flows", "interval"])]
    mix: Option<String>,
    /// Pantheon's YAML config file (`test.py -c`): `test-name`, `flows: [{scheme: cubic},
    /// {scheme: ledbat, start: 20, stop: 40}]`, and any other flag as a key (`runtime: 60`),
    /// which the command line overrides.
    #[arg(short = 'c', long, value_name = "FILE", conflicts_with_all = ["flows", "interval"])]
    config_file: Option<PathBuf>,
    /// What every flow sends instead of full throttle (Pantheon's only workload):
    /// `bytes=N` (one transfer of N bytes; the run ends when every flow's is done),
    /// `poisson,load=L,size=DIST` (transfers arriving as a Poisson process offering L of the
    /// bottleneck, sizes e.g. exp:100k, pareto:50k:1.2, cdf:FILE or the shipped `web`), or
    /// `page[,objects=70,size=web,parallel=6,every=10]` (page loads). Completion times go to
    /// pantheon_perf.json (`fct_ms`) and the report. See docs/workloads.md.
    #[arg(long, value_name = "SPEC", conflicts_with_all = ["mix", "config_file"])]
    workload: Option<String>,
    /// Seconds each run lasts, from the start of its (first) flow.
    #[arg(short = 't', long, default_value_t = 30.0)]
    runtime: f64,
    /// Runs per scheme.
    #[arg(long, default_value_t = 1)]
    run_times: u32,
    /// Id of the first run (default: 1; with --append, the one after the directory's last).
    #[arg(long)]
    start_run_id: Option<u32>,
    /// Flows per run (one tunnel each).
    #[arg(short = 'f', long, default_value_t = 1)]
    flows: u16,
    /// Seconds between the starts of two flows.
    #[arg(long, default_value_t = 0.0)]
    interval: f64,
    /// Shuffle the order of the schemes (once, as Pantheon).
    #[arg(long)]
    random_order: bool,
    /// Results directory (created if missing). One that holds results is refused unless
    /// --append or --overwrite says what to do with them.
    #[arg(long, default_value = "results")]
    data_dir: PathBuf,
    /// Add the runs to the results already in --data-dir: new run ids, new schemes join, the
    /// metadata records every invocation. The emulated path must be the same.
    #[arg(long, conflicts_with = "overwrite")]
    append: bool,
    /// Move the results already in --data-dir to `<data-dir>.replaced-<UTC time>` first.
    #[arg(long)]
    overwrite: bool,
    /// If another command is writing --data-dir (each results directory has one writer at a
    /// time), wait for it to end instead of refusing at once.
    #[arg(long)]
    wait_lock: bool,
    /// Extra scheme descriptors (*.toml) that add to or override the built-in ones.
    #[arg(long)]
    schemes_dir: Option<PathBuf>,
    /// Seconds to wait after starting the side that runs first (Pantheon: 3).
    #[arg(long, default_value_t = engine::plan::FIRST_SIDE_SETUP_S)]
    first_side_setup: f64,
    /// Capture what crossed the path: every tunnel endpoint (a simulated run's too) writes a
    /// pcapng of the inner packets it forwarded beside each of its logs
    /// (`…_flow1.egress.pcapng`), their first --snaplen bytes with each side's timestamps and
    /// each packet's UID (`frame.comment` in tshark), so that a flow's egress and ingress
    /// captures join. Opens in Wireshark. See docs/results.md.
    #[arg(long)]
    capture: bool,
    /// With --capture: bytes kept of each packet (headers: IP, TCP or UDP, the start of a
    /// QUIC packet), 1 to 65535.
    #[arg(long, default_value_t = tunnel::capture::DEFAULT_SNAPLEN, value_name = "BYTES")]
    snaplen: u32,
}

/// Pantheon's `test.py local` flags.
#[derive(Args)]
pub(crate) struct LocalArgs {
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
    #[arg(long, default_value_t = engine::plan::DRAIN_TIMEOUT_S)]
    drain_timeout: f64,
    /// Seed of the emulator's random loss (default: from the clock; recorded in the metadata).
    #[arg(long)]
    seed: Option<u64>,
    /// With --mix or --config-file: a results directory of the mix's schemes each alone over
    /// the same emulated path; its medians give each flow's throughput ratio (competing ÷
    /// alone) and harm. Recorded in the metadata for later analyses.
    #[arg(long, value_name = "DIR")]
    baseline: Option<PathBuf>,
}

/// The mix of `--mix` or `--config-file`, if one is given; errors name the token, or the file
/// and key.
fn mix_of(c: &CommonRunArgs) -> anyhow::Result<Option<Mix>> {
    if let Some(text) = &c.mix {
        return Ok(Some(engine::mix::parse_short(text)?));
    }
    let Some(file) = &c.config_file else {
        return Ok(None);
    };
    Ok(Some(Config::load(file).context("--config-file")?.mix))
}

/// The schemes of `--schemes` (Pantheon's names read as of `--pantheon-era`), or with `--all`
/// every scheme that can run here (with `simulate`, every scheme that can be simulated; the
/// others named on stderr); shuffled with `seed` if `--random-order`; a mix's name alone.
fn chosen_schemes(
    c: &CommonRunArgs,
    registry: &Registry,
    seed: u64,
    mix: Option<&Mix>,
    simulate: bool,
) -> anyhow::Result<Vec<String>> {
    if let Some(mix) = mix {
        return Ok(vec![mix.name.clone()]);
    }
    let sys = SystemInfo::probe();
    let mut schemes: Vec<String> = match &c.schemes {
        Some(s) => {
            let names = s.split_whitespace().map(str::to_owned).collect();
            as_pantheon_ran(registry, names, c.pantheon_era)?
        }
        None => registry
            .all()
            .filter(|s| {
                match if simulate {
                    s.simulated().err()
                } else {
                    s.unavailable_reason(&sys)
                } {
                    None => true,
                    Some(why) => {
                        eprintln!("--all: skipping {} ({why})", s.name);
                        false
                    }
                }
            })
            .map(|s| s.name.clone())
            .collect(),
    };
    if c.random_order {
        schemes.shuffle(&mut SmallRng::seed_from_u64(seed));
    }
    Ok(schemes)
}

/// `--pantheon-era DAY`: each of Pantheon's names among `names` replaced by the scheme of that
/// day's era, the others kept; without an era, the Pantheon names no scheme here is called by,
/// as of the seeds' era ([`Registry::read_as_of`]). Each change is said on stderr; errors if a
/// name has no scheme of its era.
fn as_pantheon_ran(
    registry: &Registry,
    names: Vec<String>,
    era: Option<engine::provenance::Day>,
) -> anyhow::Result<Vec<String>> {
    registry
        .read_as_of(&names, era)
        .into_iter()
        .map(|(asked, ours)| {
            let ours = ours?;
            if ours != asked {
                eprintln!("{}: Pantheon's {asked} → {ours}", era_said(era));
            }
            Ok(ours)
        })
        .collect()
}

/// How a message names the era Pantheon's names were read as of: `--pantheon-era DAY`, or the
/// seeds' era when none was given.
pub(crate) fn era_said(era: Option<engine::provenance::Day>) -> String {
    match era {
        Some(day) => format!("--pantheon-era {day}"),
        None => format!(
            "the seed reports' era ({}; --pantheon-era DAY for another)",
            engine::provenance::Day::SEEDS
        ),
    }
}

/// The plan of the common flags (of a simulated experiment with `simulate`); the local-only
/// fields are the caller's to set.
fn common_plan(
    c: &CommonRunArgs,
    registry: &Registry,
    seed: u64,
    simulate: bool,
) -> anyhow::Result<ExperimentPlan> {
    let mix = mix_of(c)?;
    let schemes = chosen_schemes(c, registry, seed, mix.as_ref(), simulate)?;
    Ok(ExperimentPlan {
        schemes,
        run_times: c.run_times,
        start_run_id: c.start_run_id.unwrap_or(1),
        runtime: seconds(c.runtime, "--runtime", MAX_RUNTIME)?,
        flows: c.flows,
        interval: seconds(c.interval, "--interval", MAX_RUNTIME)?,
        first_side_setup: seconds(
            c.first_side_setup,
            "--first-side-setup",
            MAX_FIRST_SIDE_SETUP,
        )?,
        drain_timeout: Duration::ZERO,
        random_order: c.random_order,
        data_dir: c.data_dir.clone(),
        seed,
        emulator: None,
        schemes_dir: c.schemes_dir.clone(),
        mix,
        workload: c
            .workload
            .as_deref()
            .map(|w| workload::Workload::parse(w).map(|_| w.to_owned()))
            .transpose()?,
        simulate,
        capture: c.capture.then_some(c.snaplen),
        ..ExperimentPlan::default()
    })
}

/// What `--append`/`--overwrite` and `--start-run-id` say to do with `--data-dir`.
fn results_dir(c: &CommonRunArgs) -> experiment::ResultsDir {
    experiment::ResultsDir {
        reuse: match (c.append, c.overwrite) {
            (true, _) => Reuse::Append,
            (_, true) => Reuse::Overwrite,
            _ => Reuse::Refuse,
        },
        start_run_id: c.start_run_id,
        wait_lock: c.wait_lock,
    }
}

fn clock_seed() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(1)
}

/// The emulated path of `--emulator` or of Pantheon's flags, with its traces in `data_dir`
/// where the experiment writes them (a preset's, or Pantheon's default 12 Mbit/s one for a
/// direction without `--uplink-trace`/`--downlink-trace`): the traces to write, with their
/// rates in Mbit/s. Nothing is read or written here.
fn emulator_of(a: &LocalArgs, data_dir: &Path) -> anyhow::Result<(Emulator, Vec<(PathBuf, f64)>)> {
    if let Some(name) = &a.emulator {
        return experiment::preset(name, data_dir);
    }
    let default_trace = data_dir.join("12mbps.trace");
    let mut written = Vec::new();
    let mut trace_or_default = |t: &Option<PathBuf>| match t {
        Some(t) => t.clone(),
        None => {
            if written.is_empty() {
                written.push((default_trace.clone(), 12.0));
            }
            default_trace.clone()
        }
    };
    let (up, down) = (
        trace_or_default(&a.uplink_trace),
        trace_or_default(&a.downlink_trace),
    );
    let emulator = Emulator::from_pantheon_flags(
        &a.prepend_mm_cmds,
        &up,
        &down,
        &a.extra_mm_link_args,
        &a.append_mm_cmds,
    )?;
    Ok((emulator, written))
}

/// `pantheon run local`'s flags as the experiment they describe (simulated with `sim`, the
/// simulated hosts' latency).
fn local_experiment(
    a: LocalArgs,
    sim: Option<sim::run::HostLatency>,
    registry: &Registry,
) -> anyhow::Result<experiment::Local> {
    let simulate = sim.is_some();
    let seed = a.seed.unwrap_or_else(clock_seed);
    let (emulator, write_traces) = emulator_of(&a, &a.common.data_dir)?;
    let plan = ExperimentPlan {
        drain_timeout: seconds(a.drain_timeout, "--drain-timeout", MAX_DRAIN_TIMEOUT)?,
        emulator: Some(emulator),
        host_latency: sim.unwrap_or_default(),
        ..common_plan(&a.common, registry, seed, simulate)?
    };
    Ok(experiment::Local {
        plan,
        dir: results_dir(&a.common),
        write_traces,
        preset: a.emulator,
        baseline: a.baseline,
    })
}

/// `pantheon run local`'s handler, or with `sim` (the simulated hosts' latency) `pantheon run
/// sim`'s: the same flags, plan, results directory and analysis; the runs in real time or
/// simulated ([`experiment::local`]).
fn run_emulated(a: LocalArgs, sim: Option<sim::run::HostLatency>) -> anyhow::Result<ExitCode> {
    let registry = Registry::load(a.common.schemes_dir.as_deref())?;
    let setup = local_experiment(a, sim, &registry)?;
    install_interrupt_handler()?;
    let bar = RunBar::new();
    let outcome = experiment::local(setup, &registry, &bar);
    bar.finish();
    Ok(report(&outcome?))
}

/// A progress bar over an experiment's runs, each run's end printed above it: the
/// [`experiment::Events`] of `pantheon run` and of a sweep's points.
pub(crate) struct RunBar(ProgressBar);

impl RunBar {
    /// A bar, hidden until the runs start.
    pub(crate) fn new() -> RunBar {
        let bar = ProgressBar::hidden();
        bar.set_style(
            ProgressStyle::with_template("[{elapsed_precise}] {bar:30} {msg} (≈{eta} left)")
                .expect("valid template"),
        );
        RunBar(bar)
    }

    /// Clears the bar.
    pub(crate) fn finish(&self) {
        self.0.finish_and_clear();
    }
}

impl experiment::Events for RunBar {
    fn starting(&self, plan: &ExperimentPlan, total: usize) {
        eprintln!(
            "{} scheme(s) × {} run(s) of {} s → {}",
            plan.schemes.len(),
            plan.run_times,
            plan.runtime.as_secs_f64(),
            plan.data_dir.display()
        );
        self.0.set_length((total * 1000) as u64);
        self.0
            .set_draw_target(indicatif::ProgressDrawTarget::stderr());
    }

    fn run_starting(&self, run: &RunSpec, seq: usize, total: usize) {
        self.0.set_message(format!(
            "{} run {} ({}/{total})",
            run.name,
            run.run_id,
            seq + 1
        ));
        self.0.set_position((seq * 1000) as u64);
    }

    fn run_progress(&self, seq: usize, fraction: f64) {
        self.0
            .set_position((seq * 1000) as u64 + (fraction * 1000.0) as u64);
    }

    fn run_ended(&self, rec: &RunRecord) {
        let (name, run_id) = (&rec.scheme, rec.run_id);
        let line = match &rec.outcome {
            // A simulated run says what it cost.
            RunOutcome::Ok => format!(
                "{name} run {run_id}: done{}",
                rec.simulation
                    .map_or(String::new(), |cost| format!(" ({cost})"))
            ),
            RunOutcome::Failed { reason } => format!("{name} run {run_id}: FAILED: {reason}"),
            RunOutcome::Interrupted => format!("{name} run {run_id}: interrupted"),
        };
        self.0.suspend(|| eprintln!("{line}"));
    }
}

/// Prints an experiment's summary and which runs failed. Exit status: 0 when every run ended
/// normally, 1 when some run failed (the others ran; the failed ones are listed), 130 when
/// interrupted; an experiment that stopped with an error (a run that cannot be recorded in
/// `pantheon_runs.json`, a full disk) is the caller's error (status 2).
fn report(outcome: &experiment::Outcome) -> ExitCode {
    println!("{}", outcome.analysis.summary_md);
    let ran = &outcome.ran;
    if !ran.interrupted && !ran.failed.is_empty() {
        let names: Vec<String> = ran
            .failed
            .iter()
            .map(|f| format!("{} run {}", f.name, f.run_id))
            .collect();
        eprintln!(
            "{} of {} runs failed ({}): see pantheon_runs.json and pantheon_summary.md",
            ran.failed.len(),
            ran.runs,
            names.join(", ")
        );
    }
    ExitCode::from(outcome.exit_status())
}

/// Without the `testbed` feature: says so.
#[cfg(not(feature = "testbed"))]
fn run_remote(_: RemoteArgs) -> anyhow::Result<ExitCode> {
    super::left_out("run remote", "testbed")
}

#[cfg(feature = "testbed")]
fn run_remote(a: RemoteArgs) -> anyhow::Result<ExitCode> {
    use pantheon_orchestrator::agent::{auth::Credentials, client::AgentClient};
    use pantheon_orchestrator::remote::{self, Nodes, RemoteOptions};
    let registry = Registry::load(a.common.schemes_dir.as_deref())?;
    let plan = common_plan(&a.common, &registry, clock_seed(), false)?;
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
        drain: seconds(a.drain, "--drain", MAX_DRAIN_TIMEOUT)?,
    };
    let nodes = Nodes {
        local: &local,
        remote: &remote_agent,
    };
    let desc = remote::Descriptions {
        local: a.local_desc.clone(),
        remote: a.remote_desc.clone(),
    };
    install_interrupt_handler()?;
    let bar = RunBar::new();
    let dir = results_dir(&a.common);
    let outcome = remote::experiment(plan, dir, &opts, &nodes, &desc, &registry, &bar);
    bar.finish();
    Ok(report(&outcome?))
}

/// Flags a config file cannot set: its `flows` list says which schemes run and when.
const NOT_IN_CONFIG: &[&str] = &[
    "schemes",
    "all",
    "flows",
    "interval",
    "mix",
    "config-file",
    "workload",
];

/// Checks a config file's `value` for flag `arg` as the command line would, and the durations'
/// bounds: errors say what is wrong, for the caller to name the file and key.
fn check_config_value(arg: &clap::Arg, value: &str) -> anyhow::Result<()> {
    // The value alone, parsed by the flag's parser as the command line would parse it.
    let flag = clap::Arg::new("value")
        .long("value")
        .value_parser(arg.get_value_parser().clone());
    clap::Command::new("config")
        .arg(flag)
        .try_get_matches_from(["config".to_owned(), format!("--value={value}")])
        .map_err(|e| anyhow::anyhow!("`{value}` is not a valid value ({})", e.kind()))?;
    let bound = match arg.get_long() {
        Some("runtime" | "interval") => Some(MAX_RUNTIME),
        Some("first-side-setup") => Some(MAX_FIRST_SIDE_SETUP),
        Some("drain-timeout" | "drain") => Some(MAX_DRAIN_TIMEOUT),
        _ => None,
    };
    if let Some(max) = bound {
        seconds(value.parse()?, "the value", max)?;
    }
    Ok(())
}

/// Pantheon's config-file keys as defaults of `pantheon run local|remote`'s flags: each key of
/// the `--config-file FILE` (`-c FILE`) that the command line does not give is added to it
/// as `--KEY VALUE` (`--KEY` alone for a flag without a value whose key is `true`), so that the
/// command line overrides the file and clap checks every value as it checks the flags. Other
/// command lines are returned as they are. `cli` is the `pantheon` command (clap), whose
/// flags the keys must name. Errors name the file and the key.
pub(crate) fn with_config_defaults(
    args: Vec<std::ffi::OsString>,
    cli: &clap::Command,
) -> anyhow::Result<Vec<std::ffi::OsString>> {
    let words: Vec<String> = args
        .iter()
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    let mode = match words.get(1..3) {
        Some([run, mode]) if run == "run" && (mode == "local" || mode == "remote") => mode,
        _ => return Ok(args),
    };
    let given = &words[3..];
    let file = given.iter().enumerate().find_map(|(i, w)| {
        let next = || given.get(i + 1).cloned();
        match w.as_str() {
            "--config-file" | "-c" => next(),
            _ => w.strip_prefix("--config-file=").map(str::to_owned),
        }
    });
    let Some(file) = file else {
        return Ok(args);
    };
    let config = Config::load(Path::new(&file)).context("--config-file")?;
    let sub = cli
        .find_subcommand("run")
        .and_then(|r| r.find_subcommand(mode))
        .context("`pantheon run` has local and remote")?;
    let mut added: Vec<std::ffi::OsString> = Vec::new();
    for (key, value) in &config.defaults {
        if NOT_IN_CONFIG.contains(&key.as_str()) {
            anyhow::bail!("{file}: `{key}`: the file's `flows` say which schemes run and when");
        }
        let Some(arg) = sub.get_arguments().find(|a| a.get_long() == Some(key)) else {
            anyhow::bail!(
                "{file}: `{key}` is not a flag of `pantheon run {mode}` (see its --help)"
            );
        };
        let long = format!("--{key}");
        let on_command_line = given.iter().any(|w| {
            *w == long
                || w.starts_with(&format!("{long}="))
                || arg
                    .get_short()
                    .is_some_and(|c| !w.starts_with("--") && w.starts_with(&format!("-{c}")))
        });
        if on_command_line {
            continue;
        }
        if matches!(arg.get_action(), clap::ArgAction::SetTrue) {
            match value.as_str() {
                "true" => added.push(long.into()),
                "false" => {}
                _ => anyhow::bail!("{file}: `{key}` must be true or false, got `{value}`"),
            }
        } else {
            check_config_value(arg, value).map_err(|e| anyhow::anyhow!("{file}: `{key}`: {e}"))?;
            // One word, so that a value starting with `-` is not taken for a flag.
            added.push(format!("{long}={value}").into());
        }
    }
    let mut out = args[..3].to_vec();
    out.extend(added);
    out.extend_from_slice(&args[3..]);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cli() -> clap::Command {
        #[derive(clap::Parser)]
        struct Cli {
            #[command(subcommand)]
            command: crate::commands::Command,
        }
        <Cli as clap::CommandFactory>::command()
    }

    fn expand(file: &Path, line: &str) -> anyhow::Result<Vec<String>> {
        let mut args = vec!["pantheon".to_owned()];
        args.extend(
            line.split_whitespace()
                .map(|w| w.replace("FILE", &file.display().to_string())),
        );
        let out = with_config_defaults(args.into_iter().map(Into::into).collect(), &cli())?;
        Ok(out
            .iter()
            .map(|a| a.to_string_lossy().into_owned())
            .collect())
    }

    fn config(text: &str) -> tempfile::NamedTempFile {
        let f = tempfile::NamedTempFile::new().unwrap();
        std::fs::write(f.path(), text).unwrap();
        f
    }

    #[test]
    fn config_keys_are_defaults_the_command_line_overrides() {
        let f = config(
            "test-name: t\nruntime: 60\nrun_times: 3\nrandom-order: true\n\
             prepend-mm-cmds: mm-delay 20\nflows: [{scheme: cubic}]\n",
        );
        let out = expand(f.path(), "run local -c FILE -t 20 --data-dir d").unwrap();
        assert_eq!(
            out[..3].join(" ") + " " + &out[3..7].join("|"),
            "pantheon run local --prepend-mm-cmds=mm-delay 20|--random-order|--run-times=3|-c"
        );
        // The command line's -t stays, the file's runtime is not added.
        assert!(!out.iter().any(|w| w.starts_with("--runtime")), "{out:?}");
        assert!(out.ends_with(&["-t".into(), "20".into(), "--data-dir".into(), "d".into()]));
        // Other commands, or no config file: unchanged.
        let same = expand(f.path(), "analyze FILE").unwrap();
        assert_eq!(same.len(), 3);
        assert_eq!(
            expand(f.path(), "run local --schemes cubic").unwrap().len(),
            5
        );
    }

    #[test]
    fn bad_config_keys_are_named_with_the_file() {
        for (text, says) in [
            (
                "test-name: t\nflows: [{scheme: a}]\nrate: 5\n",
                "`rate` is not a flag of `pantheon run local`",
            ),
            (
                "test-name: t\nflows: [{scheme: a}]\nschemes: cubic\n",
                "`schemes`: the file's `flows`",
            ),
            (
                "test-name: t\nflows: [{scheme: a}]\nrandom-order: maybe\n",
                "must be true or false",
            ),
            ("test-name: t\nflows: [{scheme: a, start: x}]\n", "flows[1]"),
            (
                "test-name: t\nflows: [{scheme: a}]\nruntime: -3\n",
                "`runtime`: the value must be a non-negative number of seconds, got -3",
            ),
            (
                "test-name: t\nflows: [{scheme: a}]\ndrain-timeout: 1e19\n",
                "`drain-timeout`: the value is 10000000000000000000 s, longer than",
            ),
            (
                "test-name: t\nflows: [{scheme: a}]\nrun-times: lots\n",
                "`run-times`: `lots` is not a valid value",
            ),
        ] {
            let f = config(text);
            let e = expand(f.path(), "run local --config-file FILE").unwrap_err();
            let e = format!("{e:#}");
            assert!(e.contains(&f.path().display().to_string()), "{e}");
            assert!(e.contains(says), "{text}: {e}");
        }
        let e = expand(Path::new("/nonexistent.yml"), "run local -c FILE").unwrap_err();
        assert!(format!("{e:#}").contains("--config-file: /nonexistent.yml: "));
        // A device is refused by type, never read (it would be read until memory ran out).
        let e = expand(Path::new("/dev/zero"), "run local -c FILE").unwrap_err();
        assert!(
            format!("{e:#}").contains("/dev/zero: is a character device, not a regular file"),
            "{e:#}"
        );
    }
}
