//! The local experiment runner: Pantheon's `test.py local`, one run at a time.
//!
//! One run of one scheme (reference `pantheon.md` §2.4, with our namespaces instead of
//! Mahimahi shells and tunnel managers):
//!
//! ```text
//!  <tag>-rx<i> netns          <tag>-host netns              <tag>-emu netns          <tag>-tx<i> netns
//!  receiver ── tunnel ── tunnel server :port ◄─ emu0 ══ferries══ ingress ◄─ tunnel client ── tunnel ── sender
//!  100.64.0.3                       100.64.0.1 (MAHIMAHI_BASE)   100.64.0.2                  100.64.0.4
//! ```
//! 1. create the namespaces, start the emulator and one tunnel pair per flow (handshake);
//! 2. start the side that runs first in each flow's namespace, wait `first_side_setup`;
//! 3. start the other side of each flow, `interval` apart; record "Start at";
//! 4. at `runtime`, record "End at", stop admitting new packets into the tunnels and let the
//!    packets already in the path drain (so they are not counted lost), at most `drain_timeout`;
//! 5. end the scheme's process groups (SIGTERM, then SIGKILL), the tunnels, the emulator, and
//!    remove every namespace — on every exit path, as the resources' `Drop`s do it.
//!
//! A scheme process that exits before the end fails its run; the experiment goes on — unless
//! its flow has a workload and it exited successfully: its transfers were done (`bytes=N`),
//! and when every flow's were, the run ends.

use std::net::{Ipv4Addr, SocketAddrV4};
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::time::Duration;

use anyhow::{anyhow, Context};
use emucal::host::{HostLimits, HostSide};
use emucal::mm::EmulatedPath;
use emucal::runtime::{RunningEmulator, OUTER_ADDR};
use netns::NetNs;
use sim::frame::tunnel_port;
use tunnel::io::{EndpointConfig, RunningEndpoint};
use tunnel::log::{LogFormat, Role};

use crate::plan::ExperimentPlan;
pub use crate::process::{spawn, spawn_with, spawn_with_quic_logs, SchemeProcess, SideOutput};
pub use crate::record::{RunOutcome, RunRecord, INTERRUPTED, RUNS_FILE};
use crate::schemes::{flow_stem, FlowWorkload, Scheme, Side};
use crate::sequence::{
    flows_of, link_log_paths, log_path, run_sequence, with_flow_delays, RunFlow, RunSpec, Sides,
    SCHEME_PORT,
};
use workload::Workload;

/// The receiver side's tunnel address (pantheon-tunnel's server "private" address).
pub const SERVER_PRIVATE: Ipv4Addr = Ipv4Addr::new(100, 64, 0, 3);
/// The sender side's tunnel address.
pub const CLIENT_PRIVATE: Ipv4Addr = Ipv4Addr::new(100, 64, 0, 4);

/// Everything one run creates. Fields drop in declaration order: processes first, then
/// tunnels, the emulator, and last the namespaces they live in.
#[derive(Default)]
pub struct RunResources {
    /// The scheme's sender and receiver processes, one pair per flow (a side in a guest: its
    /// QEMU).
    pub processes: Vec<SchemeProcess>,
    /// The sides that run in guests, and their job directories ([`crate::guests`]).
    pub guests: crate::guests::GuestSides,
    /// The tunnel endpoints, two per flow.
    pub endpoints: Vec<RunningEndpoint>,
    /// The emulated path, if this side runs it.
    pub emulator: Option<RunningEmulator>,
    /// The network namespaces all of the above live in.
    pub namespaces: Vec<NetNs>,
}

impl RunResources {
    /// Takes flow `flow`'s scheme processes (1-based flow id) out of the run, to end them
    /// before the run ends (a mix's stop time): dropping them ends them
    /// ([`SchemeProcess::stop`]), and, no longer the run's, their exit is no failure of it.
    /// Its tunnel endpoints stay. Empty if the flow has no processes here.
    pub fn take_flow(&mut self, flow: u16) -> Vec<SchemeProcess> {
        let (taken, kept) = std::mem::take(&mut self.processes)
            .into_iter()
            .partition(|p| p.flow == flow);
        self.processes = kept;
        taken
    }

    /// Creates namespace `name`, owned by these resources, IPv6 off (no packets of the
    /// kernel's own in the logs: [`NetNs::disable_ipv6`]); returns its index.
    pub fn netns(&mut self, name: String) -> anyhow::Result<usize> {
        let ns =
            NetNs::create(&name).with_context(|| format!("create network namespace {name}"))?;
        ns.disable_ipv6()
            .with_context(|| format!("turn IPv6 off in network namespace {name}"))?;
        self.namespaces.push(ns);
        Ok(self.namespaces.len() - 1)
    }

    /// Ends everything, in order: the scheme processes, the tunnels, the emulator (which
    /// completes its link logs), then removes the namespaces. Returns the notes for the run
    /// record (tunnel warnings, processes still inside a namespace at the end), the logs that
    /// could not be written and the emulator's (uplink, downlink) drops.
    pub fn teardown(mut self) -> Teardown {
        let mut t = Teardown::default();
        for p in &mut self.processes {
            p.stop();
        }
        for e in self.endpoints.drain(..) {
            let control = e.control.clone();
            e.finish();
            t.notes.extend(
                control
                    .warnings()
                    .into_iter()
                    .map(|w| format!("tunnel: {w}")),
            );
            t.log_failures
                .extend(control.log_error().map(|e| format!("tunnel: {e}")));
        }
        if let Some(emu) = &mut self.emulator {
            // Stopping completes the mm-link logs; the devices go with the namespaces. Its
            // errors are the link logs' write errors.
            emu.stop();
            t.log_failures
                .extend(emu.errors().into_iter().map(|e| format!("emulator: {e}")));
            t.drops = (
                emu.uplink.dropped.load(Ordering::Relaxed),
                emu.downlink.dropped.load(Ordering::Relaxed),
            );
        }
        let leftovers: Vec<String> = self
            .namespaces
            .iter()
            .filter_map(|ns| {
                let pids = ns.pids();
                (!pids.is_empty()).then(|| format!("{}: {pids:?}", ns.name()))
            })
            .collect();
        drop(self);
        if !leftovers.is_empty() {
            t.notes.push(format!(
                "processes still in namespaces at teardown: {}",
                leftovers.join("; ")
            ));
        }
        t
    }
}

/// What [`RunResources::teardown`] reports.
#[derive(Debug, Default)]
pub struct Teardown {
    /// Remarks for the run record: tunnel warnings, processes left in a namespace.
    pub notes: Vec<String>,
    /// Logs that could not be written, and why (a full disk): the run cannot be believed.
    pub log_failures: Vec<String>,
    /// Packets the emulator's queues dropped, (uplink, downlink).
    pub drops: (u64, u64),
}

impl Teardown {
    /// `result` of the run, failed if some log could not be written.
    pub fn judge(&self, result: anyhow::Result<()>) -> anyhow::Result<()> {
        match result {
            Ok(()) if !self.log_failures.is_empty() => Err(anyhow!(
                "its logs could not be written ({})",
                self.log_failures.join("; ")
            )),
            other => other,
        }
    }
}

/// Both sides of `scheme` over loopback, in a namespace of their own (`<tag>-lo`), for
/// `duration` after the second side starts (the first gets `first_side_setup` alone); their
/// output goes to `dir`. Returns the bytes that crossed `lo`, or why the run failed (a side that
/// exited early, with its status and last output). Everything it started is ended and the
/// namespace removed on every path.
pub fn loopback_run(
    scheme: &Scheme,
    duration: Duration,
    first_side_setup: Duration,
    dir: &Path,
    tag: &str,
) -> anyhow::Result<u64> {
    let mut res = RunResources::default();
    let result = (|| {
        let ns = res.netns(format!("{tag}-lo"))?;
        res.namespaces[ns].ip(&["link", "set", "lo", "up"])?;
        let plan = ExperimentPlan {
            runtime: duration,
            first_side_setup,
            ..ExperimentPlan::default()
        };
        let mut sides = LocalSides {
            res: &mut res,
            flows: &[],
            name: &scheme.name,
            dir,
            run_id: 0,
            seed: plan.seed,
            link_mbps: None,
            runtime: plan.runtime,
            key_logs: false,
        };
        let mut record = RunRecord::new(&scheme.name, 0);
        run_sequence(
            &plan,
            &flows_of(&plan, scheme),
            &mut sides,
            &mut record,
            &|_| {},
        )?;
        let namespace = res.namespaces[ns].name();
        netns::interfaces::interfaces(Some(namespace))?
            .into_iter()
            .find(|i| i.name == "lo")
            .and_then(|lo| lo.stats)
            .map(|s| s.tx.bytes)
            .ok_or_else(|| anyhow!("no byte counters of lo in namespace {namespace}"))
    })();
    for p in &mut res.processes {
        p.stop();
    }
    drop(res);
    result
}

/// Runs `run` once (its flows, filed under its name: the scheme's for a run of one scheme,
/// the mix's for a mix) — simulated instead when the plan says so
/// ([`crate::simulate::simulate_once`]). Never panics on scheme failure; returns the record.
pub fn run_once(
    plan: &ExperimentPlan,
    path: &EmulatedPath,
    run: &RunSpec,
    progress: &dyn Fn(f64),
) -> RunRecord {
    if plan.simulate {
        return crate::simulate::simulate_once(plan, path, run, progress);
    }
    let mut record = RunRecord::new(run.name, run.run_id);
    let mut res = RunResources::default();
    let result = drive_run(plan, run, path, &mut res, &mut record, progress);
    // Tear down explicitly (the same happens on unwinding), then check nothing is left.
    let t = res.teardown();
    let result = t.judge(result);
    record.notes.extend(t.notes);
    record.emulator_drops = t.drops;
    record.finish(result, &plan.data_dir, &[]);
    record
}

/// [`run_once`] of Pantheon's flows of one scheme ([`flows_of`]: `plan.flows` flows of
/// `scheme`, `plan.interval` apart), filed under the scheme's name.
pub fn run_scheme_once(
    plan: &ExperimentPlan,
    path: &EmulatedPath,
    scheme: &Scheme,
    run_id: u32,
    tag: &str,
    progress: &dyn Fn(f64),
) -> RunRecord {
    let flows = flows_of(plan, scheme);
    let run = RunSpec {
        name: &scheme.name,
        flows: &flows,
        run_id,
        tag,
    };
    run_once(plan, path, &run, progress)
}

/// The namespaces of one flow: (receiver's, sender's), indices into
/// [`RunResources::namespaces`].
type FlowNamespaces = (usize, usize);

/// The run itself, steps 1–4 of the module docs; everything it starts goes into `res`, which
/// the caller tears down whatever this returns.
fn drive_run(
    plan: &ExperimentPlan,
    run: &RunSpec,
    path: &EmulatedPath,
    res: &mut RunResources,
    record: &mut RunRecord,
    progress: &dyn Fn(f64),
) -> anyhow::Result<()> {
    let path = &with_flow_delays(path, run.flows);
    let mut namespaces = Vec::new();
    for flow in 1..=run.flows.len() {
        let flow = u16::try_from(flow).context("too many flows")?;
        let rx = res.netns(format!("{}-rx{flow}", run.tag))?;
        let tx = res.netns(format!("{}-tx{flow}", run.tag))?;
        namespaces.push((rx, tx));
    }
    // Sides in guest kernels boot first, before the emulator, the tunnels and their logs
    // start.
    let place = |flow: u16, side: Side| {
        let (rx, tx) = namespaces[usize::from(flow) - 1];
        match side {
            Side::Receiver => (rx, SERVER_PRIVATE, CLIENT_PRIVATE),
            Side::Sender => (tx, CLIENT_PRIVATE, SERVER_PRIVATE),
        }
    };
    let mut booted = crate::guests::Booted::default();
    let result = crate::guests::boot(
        run.flows,
        path,
        &place,
        &res.namespaces,
        (&plan.data_dir, run.name, run.run_id),
        &mut booted,
    );
    res.processes.append(&mut booted.processes);
    res.guests = booted.guests;
    record.notes.extend(booted.notes);
    result?;
    // The emulator after the guests: its clock (a trace's time 0) starts with the run's
    // setup, as without guests.
    let (host, emu) = start_emulator(plan, path, run.name, run.run_id, run.tag, res)?;
    for (i, &flow_ns) in namespaces.iter().enumerate() {
        let files = TunnelLogs {
            dir: &plan.data_dir,
            scheme: run.name,
            run_id: run.run_id,
            flow: u16::try_from(i + 1).context("too many flows")?,
            capture: plan.capture,
        };
        start_tunnel_pair(&files, res, (host, emu), flow_ns)?;
    }
    wait_for_tunnels(res)?;
    res.guests.reroute(&res.namespaces)?;
    if let Some(note) = set_host_limits(path, res, &namespaces)? {
        record.notes.push(note);
    }
    if let Some(note) = set_scheme_sysctls(run.flows, res, &namespaces)? {
        record.notes.push(note);
    }
    // Each scheme's qdisc (BBR's fq) on the tunnel devices of its flows' senders.
    let mut qdiscs: Vec<(&str, Vec<&NetNs>)> = Vec::new();
    for (f, &(_, tx)) in run.flows.iter().zip(&namespaces) {
        if let Some(q) = &f.scheme.preferred_qdisc {
            match qdiscs.iter_mut().find(|(k, _)| k == q) {
                Some((_, senders)) => senders.push(&res.namespaces[tx]),
                None => qdiscs.push((q, vec![&res.namespaces[tx]])),
            }
        }
    }
    for (q, senders) in qdiscs {
        record.notes.push(install_qdisc(q, &senders));
    }
    let mut sides = LocalSides {
        res,
        flows: &namespaces,
        name: run.name,
        dir: &plan.data_dir,
        run_id: run.run_id,
        seed: plan.seed,
        link_mbps: path.uplink_mbps(),
        runtime: plan.runtime,
        key_logs: plan.capture.is_some(),
    };
    run_sequence(plan, run.flows, &mut sides, record, progress)?;
    drain(plan, res, record);
    Ok(())
}

/// Step 1c: the path's `pt-host` limits (end hosts' TCP buffers) in every flow's sender and
/// receiver namespaces. Returns the note for the run record ("end hosts: sender
/// net.ipv4.tcp_wmem = 4096 16384 1048576"), `None` if the path sets none; errors name the
/// sysctl and namespace that could not be written.
fn set_host_limits(
    path: &EmulatedPath,
    res: &RunResources,
    namespaces: &[FlowNamespaces],
) -> anyhow::Result<Option<String>> {
    let mut said = Vec::new();
    for side in [HostSide::Sender, HostSide::Receiver] {
        let limits = path.host_limits(side);
        for &(rx, tx) in namespaces {
            let ns = if side == HostSide::Sender { tx } else { rx };
            set_host_limits_in(&res.namespaces[ns], limits)?;
        }
        said.extend(
            limits
                .sysctls()
                .into_iter()
                .map(|(name, value)| format!("{} {name} = {value}", side.word())),
        );
    }
    Ok((!said.is_empty()).then(|| format!("end hosts (pt-host): {}", said.join("; "))))
}

/// Step 1d: each flow's scheme's `sysctls` (e.g. `net.ipv4.tcp_ecn = 1`) in its sender's and
/// receiver's namespaces. Returns the note for the run record ("scheme sysctls (sender and
/// receiver): cubic_ecn net.ipv4.tcp_ecn = 1"), `None` if no scheme sets any; errors name the
/// sysctl and namespace.
fn set_scheme_sysctls(
    flows: &[crate::sequence::RunFlow],
    res: &RunResources,
    namespaces: &[FlowNamespaces],
) -> anyhow::Result<Option<String>> {
    let mut said: Vec<String> = Vec::new();
    for (f, &(rx, tx)) in flows.iter().zip(namespaces) {
        for (name, value) in &f.scheme.sysctls {
            for ns in [rx, tx] {
                let ns = &res.namespaces[ns];
                ns.set_sysctl(name, value).with_context(|| {
                    format!("{}: set {name} in namespace {}", f.scheme.name, ns.name())
                })?;
            }
            let line = format!("{} {name} = {value}", f.scheme.name);
            if !said.contains(&line) {
                said.push(line);
            }
        }
    }
    Ok((!said.is_empty())
        .then(|| format!("scheme sysctls (sender and receiver): {}", said.join("; "))))
}

/// Writes `limits` ([`HostLimits::sysctls`]) in namespace `ns`; the error names the sysctl
/// and the namespace.
pub fn set_host_limits_in(ns: &NetNs, limits: HostLimits) -> anyhow::Result<()> {
    for (name, value) in limits.sysctls() {
        ns.set_sysctl(name, &value)
            .with_context(|| format!("pt-host: set {name} in namespace {}", ns.name()))?;
    }
    Ok(())
}

/// Step 1a: the host and emulator namespaces and the emulator between them, its mm-link logs
/// in the data directory. Returns the two namespaces' indices.
fn start_emulator(
    plan: &ExperimentPlan,
    path: &EmulatedPath,
    scheme: &str,
    run_id: u32,
    tag: &str,
    res: &mut RunResources,
) -> anyhow::Result<(usize, usize)> {
    let dir = &plan.data_dir;
    let host = res.netns(format!("{tag}-host"))?;
    let emu = res.netns(format!("{tag}-emu"))?;
    let (uplink, downlink) = link_log_paths(dir, scheme, run_id);
    let path = &path.with_link_logs(uplink, downlink);
    res.emulator = Some(
        RunningEmulator::start(
            path,
            &res.namespaces[host],
            &res.namespaces[emu],
            plan.seed ^ u64::from(run_id),
        )
        .context("start the emulator")?,
    );
    Ok((host, emu))
}

/// Where one flow's tunnel logs go: `<dir>/<scheme>_{datalink,acklink}_run<N>_flow<i>.
/// {ingress,egress}` ([`log_path`]), and the snap length of the pcapng captures beside them
/// (`--capture`).
struct TunnelLogs<'a> {
    dir: &'a Path,
    scheme: &'a str,
    run_id: u32,
    flow: u16,
    capture: Option<u32>,
}

impl TunnelLogs<'_> {
    fn path(&self, direction: &str, kind: &str) -> Option<PathBuf> {
        Some(log_path(
            self.dir,
            self.scheme,
            direction,
            self.run_id,
            self.flow,
            kind,
        ))
    }
}

/// Step 1b: one flow's tunnel pair in its two namespaces (the server's outside in the host
/// namespace, the client's in the emulator's, dialling across the path). The handshake is not
/// awaited here ([`wait_for_tunnels`]).
fn start_tunnel_pair(
    logs: &TunnelLogs,
    res: &mut RunResources,
    (host, emu): (usize, usize),
    (rx, tx): FlowNamespaces,
) -> anyhow::Result<()> {
    let flow = logs.flow;
    let config = |role, sender_side, ingress_log, egress_log, (local, peer), udp_addr| {
        EndpointConfig {
            role,
            flow,
            sender_side,
            ingress_log,
            egress_log,
            log_format: LogFormat::Binary,
            capture_snaplen: logs.capture,
            local_private: local,
            peer_private: peer,
            path_mtu: 1500,
            udp_addr,
            bind_device: None,
            // In-process peers cannot vanish; no KEEPALIVEs into the emulated path.
            peer_timeout: None,
        }
    };
    let server = tunnel::io::start(
        config(
            Role::Server,
            false,
            logs.path("datalink", "ingress"),
            logs.path("acklink", "egress"),
            (SERVER_PRIVATE, CLIENT_PRIVATE),
            SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, tunnel_port(flow)),
        ),
        Some(&res.namespaces[host]),
        &res.namespaces[rx],
    )
    .context("start tunnel server")?;
    let port = server.local_udp.port();
    res.endpoints.push(server);
    let client = tunnel::io::start(
        config(
            Role::Client,
            true,
            logs.path("acklink", "ingress"),
            logs.path("datalink", "egress"),
            (CLIENT_PRIVATE, SERVER_PRIVATE),
            SocketAddrV4::new(OUTER_ADDR, port),
        ),
        Some(&res.namespaces[emu]),
        &res.namespaces[tx],
    )
    .context("start tunnel client")?;
    res.endpoints.push(client);
    Ok(())
}

/// Waits up to 10 s for every tunnel's handshake; the error gives the endpoints' own.
fn wait_for_tunnels(res: &RunResources) -> anyhow::Result<()> {
    let connected = tunnel::io::wait_until(Duration::from_secs(10), || {
        res.endpoints.iter().all(|e| e.control.is_connected())
    });
    if connected {
        return Ok(());
    }
    let why: Vec<String> = res
        .endpoints
        .iter()
        .filter_map(|e| e.control.error())
        .collect();
    Err(anyhow!(
        "tunnel not established within 10 s{}",
        if why.is_empty() {
            String::new()
        } else {
            format!(": {}", why.join("; "))
        }
    ))
}

/// The sides of a local run: processes in the flows' namespaces on this machine.
struct LocalSides<'a> {
    res: &'a mut RunResources,
    /// Each flow's namespaces; empty for a loopback run (one namespace, [`LOOPBACK`]).
    flows: &'a [FlowNamespaces],
    /// What the processes' output files are named after (the scheme's or the mix's name).
    name: &'a str,
    dir: &'a Path,
    run_id: u32,
    /// The plan's seed: each flow's workload schedule is drawn from it ([`flow_seed`]).
    seed: u64,
    /// The bottleneck's uplink rate, Mbit/s, for workloads given as an offered load.
    link_mbps: Option<f64>,
    /// The run's length: a workload flow's sender starts nothing after its end.
    runtime: Duration,
    /// `--capture`: each side's TLS secrets go to its key log ([`crate::process::key_log`]).
    key_logs: bool,
}

/// The seed of the workload schedule of flow `flow` of run `run_id` from the plan's `seed`:
/// runs and flows draw different schedules, the same plan the same ones (SplitMix64's
/// finaliser over the three).
pub fn flow_seed(seed: u64, run_id: u32, flow: u16) -> u64 {
    let mut z = seed ^ (u64::from(run_id) << 32) ^ u64::from(flow) ^ 0x9E37_79B9_7F4A_7C15;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// A loopback run's sides share the run's only namespace and reach each other on 127.0.0.1.
const LOOPBACK: Ipv4Addr = Ipv4Addr::LOCALHOST;

impl Sides for LocalSides<'_> {
    fn check(&mut self) -> anyhow::Result<()> {
        check_processes(self.res)
    }

    fn start(
        &mut self,
        run_flow: &RunFlow,
        side: Side,
        flow: u16,
        peer: Option<String>,
    ) -> anyhow::Result<Vec<String>> {
        let ns = match (self.flows.get(usize::from(flow) - 1), side) {
            (Some(&(rx, _)), Side::Receiver) => rx,
            (Some(&(_, tx)), Side::Sender) => tx,
            (None, _) => 0,
        };
        let workload = match &run_flow.workload {
            Workload::Bulk => None,
            w => Some(FlowWorkload {
                spec: w.resolve(self.link_mbps)?.to_string(),
                seed: flow_seed(self.seed, self.run_id, flow),
                duration_s: run_flow
                    .stop
                    .unwrap_or(self.runtime)
                    .saturating_sub(run_flow.start)
                    .as_secs_f64(),
                stem: flow_stem(self.dir, self.name, self.run_id, flow),
            }),
        };
        let argv = run_flow.scheme.argv_with(
            side,
            peer.as_deref().unwrap_or(""),
            SCHEME_PORT,
            workload.as_ref(),
        );
        if let Some(job) = self.res.guests.job(flow, side).map(Path::to_owned) {
            crate::guests::GuestSides::hand_over(&job, &argv)?;
            if let Some(p) = self
                .res
                .processes
                .iter_mut()
                .find(|p| p.guest_job.as_deref() == Some(job.as_path()))
            {
                p.may_finish = workload.is_some();
            }
            return Ok(Vec::new());
        }
        let out = (self.dir, self.name, self.run_id, usize::from(flow), side);
        let netns = &self.res.namespaces[ns];
        let mut p = if self.key_logs {
            spawn_with_quic_logs(netns, &argv, run_flow.scheme.capture_args(side), out)?
        } else {
            spawn_with(netns, &argv, out, &|_| {})?
        };
        p.may_finish = workload.is_some();
        self.res.processes.push(p);
        Ok(Vec::new())
    }

    fn finished(&self, flow: u16) -> bool {
        self.res
            .processes
            .iter()
            .any(|p| p.flow == flow && p.finished())
    }

    fn stop(&mut self, flow: u16) -> anyhow::Result<()> {
        // Dropping them ends them.
        drop(self.res.take_flow(flow));
        Ok(())
    }

    fn address(&self, side: Side, _flow: u16) -> String {
        match (self.flows.is_empty(), side) {
            (true, _) => LOOPBACK,
            (false, Side::Receiver) => SERVER_PRIVATE,
            (false, Side::Sender) => CLIENT_PRIVATE,
        }
        .to_string()
    }

    fn poll(&self) -> Duration {
        Duration::from_millis(50)
    }
}

/// Step 4: nothing new enters the tunnels; what is in the path may still leave and be logged,
/// for up to `drain_timeout`. Packets still held then are noted (they count as lost).
fn drain(plan: &ExperimentPlan, res: &RunResources, record: &mut RunRecord) {
    for e in &res.endpoints {
        e.control.stop_admitting();
    }
    let emulator = res.emulator.as_ref().expect("started first");
    let drained = tunnel::io::wait_until(plan.drain_timeout, || emulator.held() == 0);
    std::thread::sleep(Duration::from_millis(50));
    if !drained {
        record.notes.push(format!(
            "{} packets were still in the emulated path after the {:.0} s drain: counted lost",
            emulator.held(),
            plan.drain_timeout.as_secs_f64()
        ));
    }
}

/// Installs qdisc `q` (a scheme's `preferred_qdisc`, e.g. `fq` for BBR's pacing) on the
/// tunnel device of each sender namespace; returns the note for the run record: installed, or
/// unavailable and why (the kernel's message), in which case TCP paces itself.
pub fn install_qdisc(q: &str, senders: &[&NetNs]) -> String {
    let mut installed = 0;
    let mut error = String::new();
    for ns in senders {
        match ns
            .run_in(|| netns::run_command("tc", &["qdisc", "replace", "dev", "tunnel", "root", q]))
        {
            Ok(Ok(())) => installed += 1,
            Ok(Err(e)) => error = e.to_string(),
            Err(e) => error = e.to_string(),
        }
    }
    if installed == senders.len() {
        format!("{q} qdisc installed on the sender's tunnel device")
    } else {
        format!(
            "{q} qdisc unavailable in this kernel ({}); TCP's internal pacing was used",
            error.lines().last().unwrap_or("").trim()
        )
    }
}

fn check_processes(res: &mut RunResources) -> anyhow::Result<()> {
    if INTERRUPTED.load(Ordering::SeqCst) {
        return Err(anyhow!("interrupted"));
    }
    for p in &mut res.processes {
        if let Some(why) = p.exited() {
            return Err(anyhow!(why));
        }
    }
    Ok(())
}
