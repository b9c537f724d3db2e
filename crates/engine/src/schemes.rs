//! The scheme library: one TOML descriptor per scheme (`schemes/*.toml`, documented in
//! `docs/schemes.md`), loaded once into an immutable [`Registry`].
//!
//! A scheme is a *full-throttle flow* that runs until the harness stops it, started as two
//! commands: the side that runs first (usually the receiver) gets `{port}` to listen on; the
//! other side gets `{ip}` (the first side's tunnel address) and `{port}` (Pantheon's wrapper
//! convention, reference `pantheon.md` §1.1).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::Deserialize;

use crate::provenance::Provenance;
use crate::source::{self, Source};
pub use crate::step::Step;

mod builtin {
    include!(concat!(env!("OUT_DIR"), "/builtin_schemes.rs"));
}

/// Which side starts first and listens.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Side {
    /// The data receiver.
    Receiver,
    /// The data sender.
    Sender,
}

/// Packages and programs a scheme needs; `pantheon schemes setup` installs them.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Dependencies {
    /// Debian packages, installed with `apt-get install` (only the missing ones).
    #[serde(default)]
    pub apt: Vec<String>,
    /// Rust programs, built or installed with cargo.
    #[serde(default)]
    pub cargo: Vec<CargoDependency>,
    /// Python packages, installed with `python3 -m pip install` (`name==version`).
    #[serde(default)]
    pub pip: Vec<String>,
    /// Attributes of the workspace's `nix/` expressions (`schemes.pcc`), installed with
    /// `nix-env -f nix -iA ATTR`: schemes no registry offers, pinned by commit.
    #[serde(default)]
    pub nix: Vec<String>,
    /// Programs that must be found by [`find_program`] for the scheme to run.
    #[serde(default)]
    pub binaries: Vec<String>,
    /// Files the setup steps leave that must exist for the scheme to run (`{tools}` is
    /// [`tools_dir`]).
    #[serde(default)]
    pub files: Vec<String>,
}

/// A Rust program a scheme needs.
#[derive(Debug, Clone, Deserialize, PartialEq, Eq)]
#[serde(untagged)]
pub enum CargoDependency {
    /// A package of this workspace (`{ workspace = "pantheon-scheme-quinn" }`): a scheme
    /// program of ours in `schemes/`, built with the workspace next to `pantheon`; `schemes
    /// setup` builds it with `cargo build -p` if it is missing.
    Workspace {
        /// The package name.
        workspace: String,
    },
    /// A crate from crates.io (`{ crate = "tquic_tools", version = "1.6.0" }`), installed with
    /// `cargo install --locked` into [`tools_dir`]`/bin`.
    Registry {
        /// The crate name.
        #[serde(rename = "crate")]
        name: String,
        /// The exact version (schemes are pinned).
        version: String,
    },
}

/// How to start one side.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SideCommand {
    /// argv, with `{port}` and `{ip}` substituted; run directly, not through a shell.
    pub command: Vec<String>,
    /// With `--capture`: arguments appended to the side's command (its workload command's
    /// too) for a QUIC program that takes its TLS key log and qlog on its command line rather
    /// than from `SSLKEYLOGFILE` and `PANTHEON_QLOG`: `{keys}` is the side's key log file,
    /// `{qlog}` its qlog file, `{qlog_dir}` a directory for a program that names its qlog
    /// itself (the one file it leaves there becomes the side's `.sqlog` when the side ends;
    /// `crate::process::qlog_dir`). E.g. tquic's `["--keylog-file", "{keys}", "--qlog-dir",
    /// "{qlog_dir}"]`. Empty by default.
    #[serde(default)]
    pub capture_args: Vec<String>,
}

/// A scheme's `[workloads]` table: the workload kinds beyond `bulk` it runs, and how. Its
/// commands take, besides `{port}` and `{ip}`, `{workload}` (the flow's workload spec, a
/// Poisson load already turned into a rate), `{seed}` (the flow's seed for the schedule's
/// draws), `{duration}` (seconds the flow has in the run: no arrival after it is started) and
/// `{transfers}` (the side's transfer-record file in the results directory).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WorkloadCommands {
    /// Kinds it runs: some of `bytes`, `poisson`, `page` (`workload::spec::KINDS`).
    pub kinds: Vec<String>,
    /// How transfers use connections, for the reader (`docs/workloads.md`): e.g. "one TCP
    /// connection per transfer; a page's objects over at most P kept-alive connections".
    pub connections: String,
    /// The receiver side.
    pub receiver: SideCommand,
    /// The sender side.
    pub sender: SideCommand,
}

/// What a flow with a workload gives its side's command (see [`WorkloadCommands`]).
#[derive(Debug, Clone, PartialEq)]
pub struct FlowWorkload {
    /// The spec, a Poisson load resolved into a rate (`Workload::resolve`).
    pub spec: String,
    /// Seed of the schedule.
    pub seed: u64,
    /// Seconds the flow has in the run (from its start to its stop or the run's end).
    pub duration_s: f64,
    /// The flow's files' stem in the results directory (`<dir>/<name>_run<N>_flow<i>`): the
    /// side's records go to `<stem>.<side>.transfers.csv`.
    pub stem: PathBuf,
}

impl FlowWorkload {
    /// The transfer-record file of `side`.
    pub fn transfers(&self, side: Side) -> PathBuf {
        side_file(&self.stem, side, "transfers.csv")
    }
}

/// The stem of flow `flow`'s files of run `run_id` of `name` (a scheme's or a mix's) in the
/// results directory `dir`: `<dir>/<name>_run<N>_flow<i>`.
pub fn flow_stem(dir: &Path, name: &str, run_id: u32, flow: u16) -> PathBuf {
    dir.join(format!("{name}_run{run_id}_flow{flow}"))
}

/// A side's file of a flow: `<stem>.<side>.<what>` (`….sender.out`,
/// `….receiver.transfers.csv`).
pub fn side_file(stem: &Path, side: Side, what: &str) -> PathBuf {
    let mut p = stem.as_os_str().to_owned();
    p.push(format!(".{}.{what}", side.name()));
    PathBuf::from(p)
}

/// One scheme descriptor.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Scheme {
    /// Short name used on the command line and in file names (`cubic`).
    pub name: String,
    /// Name shown in plots and tables (`TCP Cubic`).
    pub label: String,
    /// Plot color (a matplotlib color name, as Pantheon's `config.yml`).
    pub color: String,
    /// Plot marker (a matplotlib marker, as Pantheon's `config.yml`).
    pub marker: String,
    /// Which side starts first.
    pub run_first: Side,
    /// Kernel TCP congestion control the scheme needs, if any.
    #[serde(default)]
    pub tcp_congestion_control: Option<String>,
    /// Queueing discipline to install on the sender's tunnel device when the kernel has it.
    #[serde(default)]
    pub preferred_qdisc: Option<String>,
    /// Sysctls set in the network namespaces of every flow's sender and receiver before the
    /// scheme starts, name → value (e.g. `"net.ipv4.tcp_ecn" = "1"`: a kernel TCP that asks for
    /// ECN). Only network sysctls (`net.*`), which each namespace has its own copy of; a side in
    /// a guest kernel sets its own in `[guest] sysctls`. Local runs (`run local`, `schemes
    /// check`); recorded in the run's notes.
    #[serde(default)]
    pub sysctls: BTreeMap<String, String>,
    /// What to install.
    #[serde(default)]
    pub dependencies: Dependencies,
    /// One-time steps run by `pantheon schemes setup` after the dependencies (compile, patch).
    #[serde(default)]
    pub setup: Vec<Step>,
    /// Steps needed after every boot (load a kernel module, set a sysctl), run by `pantheon
    /// schemes setup` after `setup`; a failure is a warning, as in Pantheon.
    #[serde(default)]
    pub setup_after_reboot: Vec<Step>,
    /// Where the scheme's code comes from when no registry offers it: a git repository at a
    /// pinned commit, patches and build steps ([`crate::source`]); `{src}`, the built tree, may
    /// appear in the side commands and in `dependencies.files`.
    #[serde(default)]
    pub source: Option<Source>,
    /// The largest IP packet the scheme sends, bytes. The tunnel carries at most 1464 (a
    /// 1500-byte path MTU minus the tunnel's 36 bytes); `schemes list` warns about a larger
    /// value (Pantheon patched PCC, Sprout and Verus for exactly this).
    #[serde(default)]
    pub max_packet_bytes: Option<u32>,
    /// Whether `schemes check` may run both sides in one namespace over loopback first
    /// (default true). False for schemes whose two sides bind the same UDP port (SCReAM's
    /// symmetric RTP): they go straight to the emulated run, where each side has its own
    /// namespace.
    #[serde(default = "yes")]
    pub loopback_check: bool,
    /// The scheme's own ceiling, Mbit/s, for an application-limited scheme (WebRTC media's
    /// encoder stops at 2.5 Mbit/s, as Chromium's for 1080p): it never fills a faster link, by
    /// design. `schemes check` lowers its bars to a quarter of it (`check::bar_mbps`), and
    /// reports and benchmarks say so instead of judging it by link utilisation. None:
    /// full-throttle.
    #[serde(default)]
    pub app_limited_mbps: Option<f64>,
    /// The workloads beyond full throttle its programs can run (issue 29, `docs/workloads.md`),
    /// and the commands that run them; `None`: bulk only.
    #[serde(default)]
    pub workloads: Option<WorkloadCommands>,
    /// Whether its congestion control runs in simulated time (`pantheon run sim`,
    /// `docs/simulation.md`), and as what; `None`: it cannot ([`Scheme::simulated`] says why).
    #[serde(default)]
    pub simulation: Option<Simulation>,
    /// Which of Pantheon's schemes it stands for, the wrapper it follows and every deviation
    /// ([`crate::provenance`]); every built-in descriptor with one of Pantheon's names has one
    /// (a unit test checks).
    #[serde(default)]
    pub pantheon: Option<Provenance>,
    /// A guest kernel of its own for one or both sides (issue 51, [`guest`]): `kernel` (a
    /// Debian `linux-image-<kernel>`), `modules`, `sysctls`, `qdisc`, `sides`; `None`: both
    /// sides run on the host.
    #[serde(default)]
    pub guest: Option<guest::GuestSpec>,
    /// The receiver side.
    pub receiver: SideCommand,
    /// The sender side.
    pub sender: SideCommand,
}

/// A scheme's `[simulation]` table: `controller = "cubic"` (a controller of quinn-proto:
/// `cubic`, `newreno`, `bbr`; or Indigo, the learned one: `indigo`, `indigo_nocalib`) for a
/// scheme simulated as that controller, or `why_not = "…"` for one that cannot be, in words the
/// refusal shows.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Simulation {
    /// The controller the scheme's program runs (`pantheon-quinn --cc`).
    #[serde(default)]
    pub controller: Option<String>,
    /// With `controller = "indigo"`: a model file to run instead of the committed one
    /// (`pantheon train indigo`'s `model.safetensors`; `{tools}` is replaced).
    #[serde(default)]
    pub model: Option<String>,
    /// Why the scheme cannot be simulated.
    #[serde(default)]
    pub why_not: Option<String>,
}

/// The names `[simulation] controller` takes.
pub const SIMULATED_CONTROLLERS: &str =
    "cubic, newreno, bbr, cubic_chromium, prague, ce_blind, indigo, indigo_nocalib";

/// The `[simulation] controller` names of Indigo's committed models (`indigo_controller::models::Trained`),
/// known here whether or not this build has Indigo (feature `indigo`).
const INDIGO_CONTROLLERS: [&str; 2] = ["indigo", "indigo_nocalib"];

/// Whether `[simulation] controller = name` is one this build leaves out (Indigo's without
/// the `indigo` feature): a descriptor naming it is still valid.
fn left_out_controller(name: &str) -> bool {
    cfg!(not(feature = "indigo")) && INDIGO_CONTROLLERS.contains(&name)
}

/// What a scheme runs as in simulated time.
#[derive(Debug, Clone, PartialEq)]
pub enum Simulated {
    /// One of quinn-proto's controllers.
    Quinn(sim::quic::Controller),
    /// Indigo (docs/indigo.md): a committed model, or the model file `model`.
    #[cfg(feature = "indigo")]
    Indigo {
        /// The committed model (and the scheme's name for it).
        trained: indigo_controller::models::Trained,
        /// A model file run instead.
        model: Option<PathBuf>,
    },
}

impl Simulated {
    /// The controller named `name` ([`SIMULATED_CONTROLLERS`]); `None` for any other name.
    pub fn from_name(name: &str, model: Option<PathBuf>) -> Option<Simulated> {
        if let Some(c) = sim::quic::Controller::from_name(name) {
            return Some(Simulated::Quinn(c));
        }
        #[cfg(feature = "indigo")]
        return indigo_controller::models::Trained::from_name(name)
            .map(|trained| Simulated::Indigo { trained, model });
        #[cfg(not(feature = "indigo"))]
        {
            let _ = model;
            None
        }
    }

    /// quinn-proto's factory of it (Indigo: its model loaded; errors name a model file that
    /// cannot be).
    pub fn factory(&self) -> anyhow::Result<sim::quic::Factory> {
        Ok(match self {
            Simulated::Quinn(c) => c.factory(),
            #[cfg(feature = "indigo")]
            Simulated::Indigo { trained, model } => {
                std::sync::Arc::new(trained.factory(model.as_deref())?)
            }
        })
    }

    /// Whether its flows are L4S's ([`sim::quic::Settings::l4s`]: quinn's Prague).
    pub fn l4s(&self) -> bool {
        matches!(self, Simulated::Quinn(c) if c.settings().l4s)
    }
}

impl Side {
    /// `receiver` / `sender`, as in file names.
    pub fn name(self) -> &'static str {
        match self {
            Side::Receiver => "receiver",
            Side::Sender => "sender",
        }
    }
}

impl Scheme {
    /// The controller it is simulated as, or why it cannot be simulated (its descriptor's
    /// `[simulation] why_not`, else: its congestion control runs in a program of its own, on
    /// the operating system's clock).
    pub fn simulated(&self) -> Result<Simulated, String> {
        let s = self.simulation.as_ref();
        if let Some(c) = s.and_then(|s| s.controller.as_deref()) {
            let model = s
                .and_then(|s| s.model.as_deref())
                .map(|m| PathBuf::from(m.replace("{tools}", &tools_dir().display().to_string())));
            if model.is_some() && !INDIGO_CONTROLLERS.contains(&c) {
                return Err(format!("simulation.model is for Indigo, not `{c}`"));
            }
            if left_out_controller(c) {
                return Err(crate::left_out("Indigo's learned controller", "indigo"));
            }
            return Simulated::from_name(c, model)
                .ok_or_else(|| format!("unknown simulation.controller `{c}`"));
        }
        Err(s.and_then(|s| s.why_not.clone()).unwrap_or_else(|| {
            "its congestion control runs in a program of its own, on the operating system's \
             clock; only schemes built on quinn-proto (quic, quic_newreno, quic_bbr, \
             quic_prague, indigo) run in simulated time"
                .into()
        }))
    }

    /// [`Scheme::simulated`], its refusal as the error every command gives: `<name> cannot run
    /// in simulated time: <why> (docs/simulation.md)`.
    pub fn check_simulated(&self) -> anyhow::Result<Simulated> {
        self.simulated().map_err(|why| {
            anyhow::anyhow!(
                "{} cannot run in simulated time: {why} (docs/simulation.md)",
                self.name
            )
        })
    }

    /// Checks its `[pantheon]` table, if it has one ([`Provenance::check`]). (That every
    /// built-in scheme with one of Pantheon's names has one, [`provenance::needs_provenance`],
    /// is checked by a test: a descriptor of a user's own may reuse a name.)
    pub fn check_provenance(&self) -> Result<(), String> {
        self.pantheon.as_ref().map_or(Ok(()), Provenance::check)
    }

    /// Whether its programs run workload `kind` (`bulk` always).
    pub fn runs_workload(&self, kind: &str) -> bool {
        kind == "bulk"
            || self
                .workloads
                .as_ref()
                .is_some_and(|w| w.kinds.iter().any(|k| k == kind))
    }

    /// The workload kinds it runs, `bulk` first.
    pub fn workload_kinds(&self) -> Vec<String> {
        let mut k = vec!["bulk".to_owned()];
        k.extend(self.workloads.iter().flat_map(|w| w.kinds.iter().cloned()));
        k
    }

    /// Its two sides in the order they start: `run_first`, then the other.
    pub fn start_order(&self) -> [Side; 2] {
        match self.run_first {
            Side::Receiver => [Side::Receiver, Side::Sender],
            Side::Sender => [Side::Sender, Side::Receiver],
        }
    }

    /// The argv of `side`, with `{port}`, `{ip}`, `{tools}` ([`tools_dir`], where setup
    /// steps leave files) and `{src}` (a source scheme's built tree) filled in and the program
    /// resolved by [`find_program`] (left as written when it is not found: spawning then names
    /// it).
    pub fn argv(&self, side: Side, ip: &str, port: u16) -> Vec<String> {
        self.argv_with(side, ip, port, None)
    }

    /// [`Scheme::argv`] for a flow with a workload: its `[workloads]` command, with
    /// `{workload}`, `{seed}` and `{transfers}` filled in too. `None` (or a scheme without
    /// `[workloads]`, refused earlier by the plan): the full-throttle command.
    pub fn argv_with(
        &self,
        side: Side,
        ip: &str,
        port: u16,
        workload: Option<&FlowWorkload>,
    ) -> Vec<String> {
        let commands = workload.and_then(|w| Some((w, self.workloads.as_ref()?)));
        let cmd = match (side, commands) {
            (Side::Receiver, None) => &self.receiver.command,
            (Side::Sender, None) => &self.sender.command,
            (Side::Receiver, Some((_, c))) => &c.receiver.command,
            (Side::Sender, Some((_, c))) => &c.sender.command,
        };
        cmd.iter()
            .enumerate()
            .map(|(i, a)| match (i == 0).then(|| find_program(a)).flatten() {
                Some(path) => path.display().to_string(),
                None => {
                    let mut a = self
                        .fill_paths(a)
                        .replace("{port}", &port.to_string())
                        .replace("{ip}", ip);
                    if let Some((w, _)) = commands {
                        a = a
                            .replace("{workload}", &w.spec)
                            .replace("{seed}", &w.seed.to_string())
                            .replace("{duration}", &w.duration_s.to_string())
                            .replace("{transfers}", &w.transfers(side).display().to_string());
                    }
                    a
                }
            })
            .collect()
    }

    /// The side's [`SideCommand::capture_args`], placeholders unfilled
    /// (`crate::process::spawn_with_quic_logs` fills and appends them with `--capture`).
    pub fn capture_args(&self, side: Side) -> &[String] {
        match side {
            Side::Receiver => &self.receiver.capture_args,
            Side::Sender => &self.sender.capture_args,
        }
    }

    /// `text` with `{tools}` and `{src}` (the source tree, when the scheme has a `[source]`)
    /// filled in.
    pub fn fill_paths(&self, text: &str) -> String {
        let tools = tools_dir();
        let mut out = text.replace("{tools}", &tools.display().to_string());
        if let Some(src) = &self.source {
            out = out.replace("{src}", &src.tree(&tools).display().to_string());
        }
        out
    }

    /// Errors on a `[guest]` table ([`guest::GuestSpec::validate`]) or a `[source]` table
    /// ([`Source::check`]) that cannot be used.
    fn check_guest_and_source(&self) -> anyhow::Result<()> {
        if let Some(g) = &self.guest {
            g.validate()?;
            if g.kernel == guest::SOURCE_KERNEL && self.source.is_none() {
                anyhow::bail!(
                    "[guest] kernel = \"{}\" needs a [source] that builds the kernel",
                    guest::SOURCE_KERNEL
                );
            }
        }
        if let Some(src) = &self.source {
            src.check()?;
        }
        Ok(())
    }

    /// The kernel its guest sides run in (`None`: no `[guest]`): Debian's `linux-image-<kernel>`,
    /// or the one its `[source]` builds ([`guest::SOURCE_KERNEL`]), in the source's tree.
    pub fn guest_kernel(&self) -> Option<guest::Kernel> {
        let g = self.guest.as_ref()?;
        Some(match &self.source {
            Some(src) if g.kernel == guest::SOURCE_KERNEL => guest::Kernel::built(
                src.tree(&tools_dir()).join(guest::BUILT_KERNEL_DIR),
                format!("{} at {}", src.repository, &src.commit[..12]),
            ),
            _ => guest::Kernel::new(&g.kernel),
        })
    }

    /// Why this scheme cannot run on this machine, or `None` if it can.
    pub fn unavailable_reason(&self, system: &SystemInfo) -> Option<String> {
        if let Some(src) = self.source.as_ref().filter(|s| !s.is_built(&tools_dir())) {
            return Some(src.not_built_reason(&self.name, source::mirror_dir().as_deref()));
        }
        // A side in a guest also needs the program that sets the guest's clock.
        let clock = self.guest.as_ref().map(|_| guest::CLOCK_PROGRAM);
        let missing: Vec<&str> = self
            .dependencies
            .binaries
            .iter()
            .map(String::as_str)
            .chain(clock)
            .filter(|b| find_program(b).is_none())
            .collect();
        if !missing.is_empty() {
            return Some(format!(
                "{} not found (next to `pantheon`, in {}/bin or on PATH); \
                 `pantheon schemes setup {}` installs it",
                missing.join(", "),
                tools_dir().display(),
                self.name
            ));
        }
        if let Some(f) = self
            .dependencies
            .files
            .iter()
            .map(|f| self.fill_paths(f))
            .find(|f| !Path::new(f).exists())
        {
            return Some(format!(
                "{f} is missing; `pantheon schemes setup {}` makes it",
                self.name
            ));
        }
        if let Some(kernel) = self.guest_kernel() {
            // Its congestion control is the guest kernel's, not the host's.
            return kernel.unavailable_reason();
        }
        if let Some(cc) = &self.tcp_congestion_control {
            if !system.available_cc.iter().any(|c| c == cc) {
                return Some(format!(
                    "tcp_{cc} is not available in this kernel \
                     (net.ipv4.tcp_available_congestion_control = {}; `modprobe tcp_{cc}` if it is \
                     built as a module)",
                    system.available_cc.join(" ")
                ));
            }
        }
        None
    }

    /// Remarks about running here that do not prevent it.
    pub fn notes(&self, system: &SystemInfo) -> Vec<String> {
        let mut notes = Vec::new();
        if let (Some(g), Some(kernel)) = (&self.guest, self.guest_kernel()) {
            notes.push(format!(
                "{} in a guest kernel of its own: Linux {} ({}), {}",
                g.sides.join(" and "),
                kernel.version,
                kernel.origin(),
                kernel
                    .accel()
                    .map_or("not prepared yet".into(), |a| format!(
                        "run with {}",
                        a.describe()
                    ))
            ));
        }
        if let Some(cc) = self
            .tcp_congestion_control
            .as_ref()
            .filter(|_| self.guest.is_none())
        {
            if !system.allowed_cc.iter().any(|c| c == cc) {
                notes.push(format!(
                    "{cc} is not in net.ipv4.tcp_allowed_congestion_control: fine for the runner \
                     (root), but unprivileged programs cannot select it"
                ));
            }
        }
        if let Some(n) = self.max_packet_bytes.filter(|&n| n > TUNNEL_MTU) {
            notes.push(format!(
                "sends IP packets of up to {n} bytes, more than the tunnel's {TUNNEL_MTU}-byte \
                 MTU: they are fragmented or dropped"
            ));
        }
        if let Some(q) = &self.preferred_qdisc {
            notes.push(format!(
                "prefers the {q} qdisc: installed on the sender's tunnel device when the kernel has \
                 it, else TCP's internal pacing is used (recorded per run)"
            ));
        }
        notes
    }
}

fn yes() -> bool {
    true
}

/// The largest IP packet the tunnel carries, bytes: a 1500-byte path MTU minus the tunnel's
/// 36 bytes of headers (reference `pantheon.md` §1.2).
pub const TUNNEL_MTU: u32 = tunnel::wire::inner_mtu(1500) as u32;

/// What the scheme checks need to know about this machine.
#[derive(Debug, Clone)]
pub struct SystemInfo {
    /// `net.ipv4.tcp_available_congestion_control`.
    pub available_cc: Vec<String>,
    /// `net.ipv4.tcp_allowed_congestion_control`.
    pub allowed_cc: Vec<String>,
}

impl SystemInfo {
    /// Reads the sysctls from `/proc`.
    pub fn probe() -> SystemInfo {
        let read = |p: &str| -> Vec<String> {
            std::fs::read_to_string(p)
                .unwrap_or_default()
                .split_whitespace()
                .map(str::to_owned)
                .collect()
        };
        SystemInfo {
            available_cc: read("/proc/sys/net/ipv4/tcp_available_congestion_control"),
            allowed_cc: read("/proc/sys/net/ipv4/tcp_allowed_congestion_control"),
        }
    }
}

impl Scheme {
    /// What runs the scheme on this machine, for reports: the sender program's own version
    /// line (`iperf 3.12 (cJSON 1.7.15)`) and, for kernel TCP schemes, the kernel's
    /// congestion control and release (`tcp_cubic, Linux 6.18.44`); for a source scheme, its
    /// repository, pinned commit and number of patches.
    pub fn version(&self) -> String {
        // A source scheme is what it was built from.
        if let Some(src) = &self.source {
            return format!(
                "{} at {} ({} patches), built from source",
                src.repository,
                &src.commit[..12],
                src.patches.len()
            );
        }
        let program = self
            .sender
            .command
            .first()
            .map(String::as_str)
            .unwrap_or("");
        let program = find_program(program)
            .map(|p| p.display().to_string())
            .unwrap_or_else(|| program.to_owned());
        let own = std::process::Command::new(&program)
            .arg("--version")
            .output()
            .ok()
            .and_then(|o| {
                let text = String::from_utf8_lossy(&o.stdout).into_owned()
                    + &String::from_utf8_lossy(&o.stderr);
                text.lines().next().map(|l| l.trim().to_owned())
            })
            .filter(|l| !l.is_empty())
            .unwrap_or_else(|| format!("{program} (no --version)"));
        match &self.tcp_congestion_control {
            Some(cc) if self.guest.is_some() => {
                let g = self.guest.as_ref().expect("checked");
                let kernel = self.guest_kernel().expect("a guest");
                format!(
                    "{own}; kernel tcp_{cc}, guest Linux {} ({}; {})",
                    kernel.version,
                    kernel.origin(),
                    g.sides.join(" and ")
                )
            }
            Some(cc) => {
                let release =
                    std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default();
                format!("{own}; kernel tcp_{cc}, Linux {}", release.trim())
            }
            None => own,
        }
    }
}

/// Finds `program` on `PATH`: the first executable file of that name.
pub fn find_in_path(program: &str) -> Option<PathBuf> {
    std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|d| d.join(program))
            .find(|p| is_executable(p))
    })
}

/// Finds a scheme's program: the workspace's own scheme programs (`pantheon-quinn`, …) are
/// built next to `pantheon`, so the directory of the running executable is searched first,
/// then [`tools_dir`]`/bin` (what `schemes setup` installed), then `PATH`. A name with a `/`
/// is taken as a path.
pub fn find_program(program: &str) -> Option<PathBuf> {
    if program.contains('/') {
        let p = PathBuf::from(program);
        return is_executable(&p).then_some(p);
    }
    let own = std::env::current_exe()
        .ok()
        .and_then(|exe| Some(exe.parent()?.to_path_buf()));
    own.into_iter()
        .chain([tools_dir().join("bin")])
        .map(|d| d.join(program))
        .find(|p| is_executable(p))
        .or_else(|| find_in_path(program))
}

/// Where `pantheon schemes setup` installs scheme programs and keeps their sources:
/// `$PANTHEON_SCHEMES_HOME`, else `$HOME/.cache/pantheon-rs/schemes`.
pub fn tools_dir() -> PathBuf {
    std::env::var_os("PANTHEON_SCHEMES_HOME")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            let home = std::env::var_os("HOME").unwrap_or_else(|| "/root".into());
            PathBuf::from(home).join(".cache/pantheon-rs/schemes")
        })
}

fn is_executable(p: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

/// Errors of loading descriptors.
#[derive(Debug, thiserror::Error)]
pub enum RegistryError {
    /// A descriptor is malformed.
    #[error("scheme descriptor {file}: {message}")]
    Descriptor {
        /// The file.
        file: String,
        /// What is wrong.
        message: String,
    },
    /// A scheme name nobody describes.
    #[error("unknown scheme `{name}` ({pantheon}known: {known})")]
    Unknown {
        /// The name asked for.
        name: String,
        /// For one of Pantheon's names, the schemes here that stand for it, `Pantheon's copa
        /// is run by copa_orig (original, 2017-08-27 – …), …; `, else empty.
        pantheon: String,
        /// The names that exist.
        known: String,
    },
    /// No descriptor runs a Pantheon scheme as Pantheon ran it on a day.
    #[error(
        "Pantheon's `{scheme}` as it ran on {day}: no scheme here reproduces it ({eras}); \
         write a descriptor of your own with a [pantheon] table (docs/schemes.md)"
    )]
    NoEra {
        /// Pantheon's name of the scheme.
        scheme: String,
        /// The day asked for, `YYYY-MM-DD`.
        day: String,
        /// The eras that are described, `name: era` each, or why none is.
        eras: String,
    },
}

impl Scheme {
    /// What `Registry::load` checks of a parsed descriptor beyond its TOML shape: its name, its
    /// commands, its ceiling, workloads, simulation, sysctls, `[pantheon]` table, guest and
    /// source; the error is the message shown after the file's name.
    fn check(&self) -> Result<(), String> {
        let s = self;
        if let Err(e) = analyzer::files::check_name(&s.name) {
            return Err(format!("name: {e}"));
        }
        if s.receiver.command.is_empty() || s.sender.command.is_empty() {
            return Err("receiver and sender commands must not be empty".into());
        }
        if let Some(name) = s.sysctls.keys().find(|k| !k.starts_with("net.")) {
            return Err(format!(
                "sysctls: `{name}` is not a network sysctl (net.*): only those are set \
                     per network namespace, any other would change the whole host"
            ));
        }
        if let Some(c) = s.app_limited_mbps {
            if !(c.is_finite() && c > 0.0) {
                return Err(format!("app_limited_mbps must be a positive rate, got {c}"));
            }
        }
        if let Some(w) = &s.workloads {
            let known = ["bytes", "poisson", "page"];
            if let Some(k) = w.kinds.iter().find(|k| !known.contains(&k.as_str())) {
                return Err(format!(
                    "workloads.kinds: unknown kind `{k}` (known: {})",
                    known.join(", ")
                ));
            }
            if w.receiver.command.is_empty() || w.sender.command.is_empty() {
                return Err("workloads: receiver and sender commands must not be empty".into());
            }
        }
        if let Some(sim) = &s.simulation {
            let problem = match (&sim.controller, &sim.why_not) {
                (Some(_), Some(_)) => Some("give either controller or why_not".to_owned()),
                (None, None) => Some("give controller or why_not".to_owned()),
                (Some(c), None) => s.simulated().err().filter(|_| !left_out_controller(c)),
                (None, Some(_)) => None,
            };
            if let Some(message) = problem {
                return Err(format!(
                    "simulation: {message} (known controllers: {SIMULATED_CONTROLLERS})"
                ));
            }
        }
        s.check_provenance()?;
        s.check_guest_and_source().map_err(|e| e.to_string())
    }
}

/// All schemes known to this run, by name.
#[derive(Debug, Clone)]
pub struct Registry {
    schemes: BTreeMap<String, Scheme>,
}

impl Registry {
    /// The built-in descriptors, overridden and extended by the `*.toml` files of `extra_dir`.
    pub fn load(extra_dir: Option<&Path>) -> Result<Registry, RegistryError> {
        let mut schemes = BTreeMap::new();
        let mut add = |file: &str, text: &str| -> Result<(), RegistryError> {
            let s: Scheme = toml::from_str(text).map_err(|e| RegistryError::Descriptor {
                file: file.to_owned(),
                message: e.to_string(),
            })?;
            s.check().map_err(|message| RegistryError::Descriptor {
                file: file.to_owned(),
                message,
            })?;
            schemes.insert(s.name.clone(), s);
            Ok(())
        };
        for (file, text) in builtin::BUILTIN {
            add(file, text)?;
        }
        if let Some(dir) = extra_dir {
            let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
                .map_err(|e| RegistryError::Descriptor {
                    file: dir.display().to_string(),
                    message: e.to_string(),
                })?
                .filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|p| p.extension().is_some_and(|x| x == "toml"))
                .collect();
            files.sort();
            for f in files {
                let text = analyzer::files::read_regular_text(&f, "a scheme descriptor", 1 << 20)
                    .map_err(|e| RegistryError::Descriptor {
                    file: e.path,
                    message: e.reason,
                })?;
                add(&f.display().to_string(), &text)?;
            }
        }
        Ok(Registry { schemes })
    }

    /// The scheme called `name`.
    pub fn get(&self, name: &str) -> Result<&Scheme, RegistryError> {
        self.schemes
            .get(name)
            .ok_or_else(|| RegistryError::Unknown {
                name: name.to_owned(),
                pantheon: self.standing_for(name),
                known: self.schemes.keys().cloned().collect::<Vec<_>>().join(", "),
            })
    }

    /// The schemes here whose `[pantheon]` table names Pantheon's `name`, for an error:
    /// `Pantheon's copa is run by copa_orig (original, 2017-08-27 – 2018-06-18), …; ` (empty
    /// if none does).
    fn standing_for(&self, name: &str) -> String {
        let by: Vec<String> = self
            .described_as(name)
            .into_iter()
            .map(|(s, p)| format!("{} ({}, {})", s.name, p.fidelity.as_str(), p.era))
            .collect();
        if by.is_empty() {
            String::new()
        } else {
            format!("Pantheon's {name} is run by {}; ", by.join(", "))
        }
    }

    /// All schemes, by name.
    pub fn all(&self) -> impl Iterator<Item = &Scheme> {
        self.schemes.values()
    }

    /// The schemes whose `[pantheon]` table names Pantheon's `pantheon_name` (`default_tcp` and
    /// `cubic` are one scheme), with that table, by name.
    fn described_as(&self, pantheon_name: &str) -> Vec<(&Scheme, &crate::provenance::Provenance)> {
        self.all()
            .filter_map(|s| Some((s, s.pantheon.as_ref()?)))
            .filter(|(_, p)| crate::provenance::same_pantheon_scheme(&p.scheme, pantheon_name))
            .collect()
    }

    /// `names` read as Pantheon's schemes of `era` (`--pantheon-era`): with a day, each of
    /// Pantheon's names becomes the scheme [`Registry::as_pantheon_ran`] gives (or its error);
    /// without one, only a Pantheon name that no descriptor here carries (`copa`,
    /// `default_tcp`) is read, as of the seed reports' era ([`Day::SEEDS`](crate::provenance::Day::SEEDS)).
    /// Other names stay as they are. In order, each beside the name asked.
    pub fn read_as_of(
        &self,
        names: &[String],
        era: Option<crate::provenance::Day>,
    ) -> Vec<(String, Result<String, RegistryError>)> {
        use crate::provenance::{needs_provenance, Day};
        names
            .iter()
            .map(|name| {
                let day = era.or((!self.schemes.contains_key(name)).then_some(Day::SEEDS));
                let ours = match day {
                    Some(day) if needs_provenance(name) => {
                        self.as_pantheon_ran(name, day).map(|s| s.name.clone())
                    }
                    _ => Ok(name.clone()),
                };
                (name.clone(), ours)
            })
            .collect()
    }

    /// The scheme that runs Pantheon's `pantheon_name` as Pantheon ran it on `day` (issue 55):
    /// of the descriptors whose `[pantheon]` table names it (`default_tcp` and `cubic` are one
    /// scheme), reproduce it (not `not_reproduced`) and have an era that covers the day, an
    /// `original` before a `reimplemented`, then the first by name. Errors if `pantheon_name`
    /// is none of [`crate::provenance::PANTHEON_SCHEMES`] or no descriptor covers the day (the
    /// error lists the eras there are).
    pub fn as_pantheon_ran(
        &self,
        pantheon_name: &str,
        day: crate::provenance::Day,
    ) -> Result<&Scheme, RegistryError> {
        use crate::provenance::{Fidelity, PANTHEON_SCHEMES};
        if !PANTHEON_SCHEMES.contains(&pantheon_name) {
            return Err(RegistryError::NoEra {
                scheme: pantheon_name.to_owned(),
                day: day.to_string(),
                eras: format!(
                    "it is none of Pantheon's scheme names: {}",
                    PANTHEON_SCHEMES.join(", ")
                ),
            });
        }
        let described: Vec<(&Scheme, &crate::provenance::Provenance)> = self
            .described_as(pantheon_name)
            .into_iter()
            .filter(|(_, p)| p.fidelity != Fidelity::NotReproduced)
            .collect();
        let rank = |f: Fidelity| (f != Fidelity::Original) as u8;
        described
            .iter()
            .filter(|(_, p)| p.covers(day))
            .min_by_key(|(s, p)| (rank(p.fidelity), &s.name))
            .map(|(s, _)| *s)
            .ok_or_else(|| RegistryError::NoEra {
                scheme: pantheon_name.to_owned(),
                day: day.to_string(),
                eras: if described.is_empty() {
                    "no descriptor reproduces it in any era".to_owned()
                } else {
                    let eras: Vec<String> = described
                        .iter()
                        .map(|(s, p)| format!("{}: {}", s.name, p.era))
                        .collect();
                    format!("eras described: {}", eras.join("; "))
                },
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Issue 55: Pantheon's schemes as they ran on a day — the seed reports' day gives the seed
    /// era's Copa and SCReAM; 2021 gives Copa's last era; a day no descriptor covers is an
    /// error naming the eras there are.
    #[test]
    fn pantheon_s_schemes_resolve_to_the_descriptor_of_their_era() {
        use crate::provenance::Day;
        let r = Registry::load(None).unwrap();
        let day = |s| Day::parse(s).unwrap();
        let on = |name, d| r.as_pantheon_ran(name, day(d)).map(|s| s.name.as_str());
        let seed_001 = "2017-08-30";
        assert_eq!(on("copa", seed_001).unwrap(), "copa_orig");
        assert_eq!(on("copa", "2021-01-01").unwrap(), "copa_orig_2020");
        assert_eq!(on("scream", seed_001).unwrap(), "scream");
        assert_eq!(on("default_tcp", seed_001).unwrap(), "cubic");
        assert_eq!(on("cubic", "2019-01-01").unwrap(), "cubic");
        assert_eq!(on("quic", seed_001).unwrap(), "quic");
        let gap = on("copa", "2019-01-01").unwrap_err().to_string();
        assert!(
            gap.contains("copa_orig: 2017-08-27") && gap.contains("copa_orig_2020: 2020-03-13"),
            "{gap}"
        );
        assert!(on("copa", "2017-01-01").is_err(), "before Pantheon's Copa");
        assert!(
            on("vivace", seed_001).is_err(),
            "Vivace joined Pantheon in 2018"
        );
        let not_pantheon = on("quic_bbr", seed_001).unwrap_err().to_string();
        assert!(
            not_pantheon.contains("none of Pantheon's"),
            "{not_pantheon}"
        );
    }

    /// Issue 55: a scheme that is not Pantheon's is not called by Pantheon's name (tquic's Copa
    /// is `tquic_copa`); Pantheon's `copa` with no era asked for is the seed reports' era's,
    /// with an era the era's; our own names stay ours; an unknown Pantheon name says which
    /// schemes here stand for it.
    #[test]
    fn pantheon_names_no_scheme_carries_read_as_the_seeds_era() {
        use crate::provenance::Day;
        let r = Registry::load(None).unwrap();
        let read = |names: &[&str], era| -> Vec<String> {
            let names: Vec<String> = names.iter().map(|n| n.to_string()).collect();
            r.read_as_of(&names, era)
                .into_iter()
                .map(|(_, ours)| ours.unwrap())
                .collect()
        };
        let names = ["copa", "default_tcp", "tquic_copa", "quic_bbr"];
        assert_eq!(
            read(&names, None),
            ["copa_orig", "cubic", "tquic_copa", "quic_bbr"]
        );
        assert_eq!(read(&names, Some(Day::SEEDS)), read(&names, None));
        let era_2021 = read(&names, Some(Day::parse("2021-01-01").unwrap()));
        assert_eq!(era_2021[0], "copa_orig_2020");
        // A Pantheon name a scheme here carries stays that scheme without an era (with one it
        // is read: Pantheon's Indigo of 2017 has no scheme here).
        assert_eq!(read(&["indigo"], None), ["indigo"]);
        assert!(r.read_as_of(&["indigo".into()], Some(Day::SEEDS))[0]
            .1
            .is_err());
        let unknown = r.get("copa").unwrap_err().to_string();
        assert!(
            unknown.contains("Pantheon's copa is run by copa_orig (original, 2017-08-27")
                && unknown.contains("tquic_copa (not_reproduced"),
            "{unknown}"
        );
        assert!(!r
            .get("nope")
            .unwrap_err()
            .to_string()
            .contains("Pantheon's"));
    }

    /// Issue 55: every built-in scheme with one of Pantheon's names, and every descriptor that
    /// stands for a Pantheon scheme under a name of its own (an era, the original program),
    /// cites the wrapper it follows and lists its deviations.
    #[test]
    fn every_pantheon_named_scheme_cites_its_wrapper_and_deviations() {
        use crate::provenance::{needs_provenance, Fidelity};
        let r = Registry::load(None).unwrap();
        let stand_ins = ["copa_orig", "copa_orig_2020", "indigo_orig", "tquic_copa"];
        let mut cited = 0;
        for s in r.all() {
            let Some(p) = &s.pantheon else {
                assert!(
                    !needs_provenance(&s.name) && !stand_ins.contains(&s.name.as_str()),
                    "{} stands for a Pantheon scheme but has no [pantheon] table",
                    s.name
                );
                continue;
            };
            p.check().unwrap_or_else(|e| panic!("{}: {e}", s.name));
            if let Some(i) = &p.instead {
                assert!(
                    r.get(i).is_ok(),
                    "{}: pantheon.instead `{i}` is no scheme",
                    s.name
                );
            }
            cited += 1;
        }
        assert!(
            cited >= 16,
            "only {cited} descriptors cite Pantheon's wrappers"
        );
        // The seed reports' era is the default: `copa` of Pantheon is genericCC with δ 0.5.
        let copa = r.get("copa_orig").unwrap().pantheon.as_ref().unwrap();
        assert_eq!(copa.fidelity, Fidelity::Original);
        assert_eq!(copa.commit, "5ea146acdebe79f5b9acfb2d9044554a7d2582ea");
        assert!(r.get("copa_orig").unwrap().sender.command[2]
            .ends_with("delta_conf=do_ss:auto >/dev/null"));
    }

    #[test]
    fn builtin_descriptors_load_and_substitute() {
        let r = Registry::load(None).unwrap();
        for name in ["cubic", "bbr", "reno", "vegas"] {
            let s = r.get(name).unwrap();
            assert_eq!(s.run_first, Side::Receiver);
            assert_eq!(s.tcp_congestion_control.as_deref(), Some(name));
        }
        let argv = r
            .get("cubic")
            .unwrap()
            .argv(Side::Sender, "100.64.0.3", 5001);
        assert!(argv[0].ends_with("iperf3"), "{argv:?}");
        assert_eq!(&argv[1..5], ["--client", "100.64.0.3", "--port", "5001"]);
        assert!(r.get("nope").unwrap_err().to_string().contains("cubic"));
    }

    #[test]
    fn an_application_limited_scheme_lowers_its_check_bars_and_a_bad_ceiling_is_refused() {
        use crate::check::{bar_mbps, MIN_LOOPBACK_MBPS, MIN_MBPS};
        let r = Registry::load(None).unwrap();
        let webrtc = r.get("webrtc").unwrap();
        assert_eq!(webrtc.app_limited_mbps, Some(2.5));
        assert_eq!(bar_mbps(webrtc, MIN_LOOPBACK_MBPS), 0.625);
        assert_eq!(bar_mbps(webrtc, MIN_MBPS), 0.625);
        let cubic = r.get("cubic").unwrap();
        assert_eq!(bar_mbps(cubic, MIN_LOOPBACK_MBPS), MIN_LOOPBACK_MBPS);
        assert_eq!(bar_mbps(cubic, MIN_MBPS), MIN_MBPS);
        let e = load_error_of_edited("webrtc", "app_limited_mbps = 2.5", "app_limited_mbps = -1");
        assert!(
            e.contains("webrtc.toml: app_limited_mbps must be a positive rate, got -1"),
            "{e}"
        );
    }

    #[test]
    fn a_scheme_s_sysctls_are_network_ones_only() {
        let r = Registry::load(None).unwrap();
        let ecn = &r.get("cubic_ecn").unwrap().sysctls;
        assert_eq!(ecn.get("net.ipv4.tcp_ecn").map(String::as_str), Some("1"));
        assert!(r.get("cubic").unwrap().sysctls.is_empty());
        let e = load_error_of_edited("cubic_ecn", "net.ipv4.tcp_ecn", "vm.swappiness");
        assert!(
            e.contains("cubic_ecn.toml: sysctls: `vm.swappiness` is not a network sysctl"),
            "{e}"
        );
    }

    #[test]
    fn a_flow_with_a_workload_runs_the_workload_commands_with_its_spec_seed_and_files() {
        let r = Registry::load(None).unwrap();
        let cubic = r.get("cubic").unwrap();
        assert!(cubic.runs_workload("bulk") && cubic.runs_workload("page"));
        assert_eq!(cubic.workload_kinds(), ["bulk", "bytes", "poisson", "page"]);
        let copa = r.get("tquic_copa").unwrap();
        assert!(copa.runs_workload("bulk") && !copa.runs_workload("bytes"));
        let w = FlowWorkload {
            spec: "poisson,rate=5,size=fixed:125000".into(),
            seed: 42,
            duration_s: 60.0,
            stem: PathBuf::from("/r/cubic_run2_flow1"),
        };
        let argv = cubic.argv_with(Side::Sender, "100.64.0.3", 5001, Some(&w));
        assert!(argv[0].ends_with("pantheon-tcp"), "{argv:?}");
        assert_eq!(
            &argv[1..],
            [
                "sender",
                "100.64.0.3",
                "5001",
                "--cc",
                "cubic",
                "--workload",
                "poisson,rate=5,size=fixed:125000",
                "--seed",
                "42",
                "--duration",
                "60",
                "--transfers",
                "/r/cubic_run2_flow1.sender.transfers.csv"
            ]
        );
        let argv = cubic.argv_with(Side::Receiver, "", 5001, Some(&w));
        assert_eq!(
            argv.last().unwrap(),
            "/r/cubic_run2_flow1.receiver.transfers.csv"
        );
        // Without a workload: the full-throttle command.
        assert!(cubic.argv_with(Side::Sender, "x", 1, None)[0].ends_with("iperf3"));
        // A kind the harness does not know is refused, naming the file.
        let e = load_error_of_edited(
            "cubic",
            "kinds = [\"bytes\",",
            "kinds = [\"stream\", \"bytes\",",
        );
        assert!(
            e.contains("cubic.toml: workloads.kinds: unknown kind `stream`"),
            "{e}"
        );
    }

    /// The error `Registry::load` gives when the built-in descriptor `name` (`vegas`) is loaded
    /// again from a scheme directory with `find` replaced by `replace`.
    fn load_error_of_edited(name: &str, find: &str, replace: &str) -> String {
        let dir = tempfile::tempdir().unwrap();
        let file = format!("{name}.toml");
        let text = builtin::BUILTIN
            .iter()
            .find(|(f, _)| f.ends_with(&format!("/{file}")) || *f == file)
            .unwrap()
            .1
            .replace(find, replace);
        std::fs::write(dir.path().join(&file), text).unwrap();
        Registry::load(Some(dir.path())).unwrap_err().to_string()
    }

    #[test]
    fn a_kernel_built_from_source_is_named_by_its_tree_and_needs_one() {
        let r = Registry::load(None).unwrap();
        for (name, repo) in [("bbrv3", "google/bbr"), ("prague", "L4STeam/linux")] {
            let s = r.get(name).unwrap();
            let k = s.guest_kernel().unwrap();
            let src = s.source.as_ref().unwrap();
            assert_eq!(k.dir, src.tree(&tools_dir()).join(guest::BUILT_KERNEL_DIR));
            assert!(
                k.origin()
                    .contains(&format!("https://github.com/{repo} at ")),
                "{k:?}"
            );
            if !src.is_built(&tools_dir()) {
                // Not built: the source scheme's reason, naming the one command that builds it.
                let why = s.unavailable_reason(&SystemInfo::probe()).unwrap();
                assert!(
                    why.contains(&format!("pantheon schemes setup {name}")),
                    "{why}"
                );
            }
        }
        // A Debian kernel stays Debian's.
        let vegas = r.get("vegas").unwrap().guest_kernel().unwrap();
        assert_eq!(vegas.origin(), "Debian linux-image-6.1.0-50-amd64");
        // `kernel = "source"` without a [source] to build it is refused, naming the file.
        let e = load_error_of_edited(
            "vegas",
            "kernel = \"6.1.0-50-amd64\"",
            "kernel = \"source\"",
        );
        assert!(e.contains("needs a [source] that builds the kernel"), "{e}");
    }

    #[test]
    fn availability_names_the_missing_congestion_control() {
        let r = Registry::load(None).unwrap();
        let sys = SystemInfo {
            available_cc: vec!["reno".into(), "cubic".into()],
            allowed_cc: vec!["reno".into()],
        };
        // Vegas as the host would run it (its descriptor runs it in a guest kernel).
        let mut host_vegas = r.get("vegas").unwrap().clone();
        host_vegas.guest = None;
        // CI installs both (scripts/test.sh) before the tests.
        if ["iperf3", "pantheon-tcp"]
            .iter()
            .all(|p| find_program(p).is_some())
        {
            let why = host_vegas.unavailable_reason(&sys).unwrap();
            assert!(why.contains("tcp_vegas is not available"), "{why}");
            assert!(r.get("cubic").unwrap().unavailable_reason(&sys).is_none());
            // In its guest, the host's congestion controls do not matter: CI prepares the
            // guest kernel (`pantheon schemes setup vegas` in scripts/test.sh).
            let vegas = r.get("vegas").unwrap();
            assert_eq!(vegas.unavailable_reason(&sys), None);
            assert!(vegas.notes(&sys).join(" ").contains("guest kernel"));
        }
        let notes = r.get("cubic").unwrap().notes(&sys).join(" ");
        assert!(notes.contains("tcp_allowed_congestion_control"));
    }
}
