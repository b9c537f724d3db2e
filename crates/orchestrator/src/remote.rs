//! The remote experiment runner: Pantheon's `test.py remote`, with two agents instead of ssh.
//!
//! One run of one scheme between the *local* and the *remote* node (each a `pantheon-agent`;
//! the names and flags are Pantheon's — "local" is simply the node given by `--local-agent`):
//!
//! ```text
//!  local node                                         remote node
//!  [flow ns] scheme side ── tun ── tunnel endpoint ◄══ real path (UDP) ══► tunnel endpoint ── tun ── [flow ns] scheme side
//! ```
//! 1. both nodes' clock offsets to `--ntp-addr` (several SNTP samples each);
//! 2. per flow, the tunnel server on `--tunnel-server`'s node, then the client on the other,
//!    dialling the server's address (`--local-addr` / `--remote-addr`); wait for the handshakes;
//! 3. the side that runs first on its node, `first_side_setup`, then the other side of each flow
//!    `interval` apart (a mix: each flow at its start); "Start at"; a flow of a mix with a stop
//!    time has both its sides ended then (StopFlow: sender's node, then receiver's);
//! 4. at `runtime`, "End at"; the sender's node stops (tunnel first: nothing new enters the
//!    path), then the receiver's after `--drain` (what is in flight arrives and is logged);
//! 5. clock offsets again; both nodes' files are fetched into the results directory and the
//!    nodes delete them; each packet log's header gets its node's clock correction, interpolated
//!    between the two measurements ([`crate::clock`]).
//!
//! A node that fails or dies (an RPC error) fails the run with the reason; the other node is
//! still stopped and its files fetched, and the experiment goes on with the next run.

use std::net::Ipv4Addr;
use std::path::Path;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context};

use crate::agent::client::AgentClient;
use crate::agent::proto;
use crate::clock::{self, Correction, Measurement};
use engine::experiment;
use engine::plan::{Existing, ExperimentPlan};
use engine::runner::{RunRecord, INTERRUPTED};
use engine::schemes::{Registry, Side};
use engine::sequence::{run_sequence, RunFlow, RunSpec, Sides, SCHEME_PORT};

/// Which node: Pantheon's `local` or `remote` (the type the results' metadata records).
pub use analyzer::results::Node;

/// Pantheon's remote-mode options.
#[derive(Debug, Clone)]
pub struct RemoteOptions {
    /// `--sender`: the node that runs the scheme's sender (data flows from it).
    pub sender: Node,
    /// `--tunnel-server`: the node whose tunnel endpoint listens (the other dials it: put the
    /// server where it can be reached, e.g. not behind NAT).
    pub tunnel_server: Node,
    /// `--local-addr`: the local node's address the remote tunnel client dials (needed when the
    /// tunnel server is local).
    pub local_addr: Option<Ipv4Addr>,
    /// `--remote-addr`: the remote node's address the local tunnel client dials (default: the
    /// remote agent's address).
    pub remote_addr: Option<Ipv4Addr>,
    /// `--local-if`: bind the local tunnel's socket to this interface (and take its MTU).
    pub local_if: Option<String>,
    /// `--remote-if`: the same on the remote node.
    pub remote_if: Option<String>,
    /// `--ntp-addr`: NTP server both nodes measure their offsets to (host[:port]).
    pub ntp_addr: Option<String>,
    /// SNTP queries per measurement.
    pub ntp_samples: u32,
    /// A run whose offset on either node moved more than this during the run is flagged, ns.
    pub max_clock_move_ns: i64,
    /// Time the receiver's node keeps receiving after the sender's stopped.
    pub drain: Duration,
}

/// The two nodes' agents.
pub struct Nodes<'a> {
    /// `--local-agent`.
    pub local: &'a AgentClient,
    /// The remote agent.
    pub remote: &'a AgentClient,
}

impl Nodes<'_> {
    fn get(&self, n: Node) -> &AgentClient {
        match n {
            Node::Local => self.local,
            Node::Remote => self.remote,
        }
    }
}

/// Runs `run` between the two nodes: its flows (each its own scheme, start time and tunnel
/// pair), filed under its name (a scheme's, or a mix's); `tag` is its name on the agents.
/// Never panics on scheme or node failure; returns the record (written into `plan.data_dir`
/// by the caller).
pub fn run_once_remote(
    plan: &ExperimentPlan,
    opts: &RemoteOptions,
    nodes: &Nodes,
    run: &RunSpec,
    progress: &dyn Fn(f64),
) -> RunRecord {
    let tag = run.tag;
    let mut record = RunRecord::new(run.name, run.run_id);
    let ntp = |n: Node| -> Result<Measurement, String> {
        let server = opts.ntp_addr.as_deref().ok_or("no --ntp-addr")?;
        let r = nodes
            .get(n)
            .clock_offset(server, opts.ntp_samples)
            .map_err(|e| format!("{e:#}"))?;
        Ok(Measurement {
            offset_ns: (r.offset_ms * 1e6).round() as i64,
            rtt_ns: (r.rtt_ms * 1e6).round() as i64,
            at_ns: r.measured_at_ns,
        })
    };
    let measure_both = || {
        opts.ntp_addr
            .as_ref()
            .map(|_| [ntp(Node::Local), ntp(Node::Remote)])
    };
    let before = measure_both();

    let mut started = Vec::new();
    let result = drive_remote(plan, opts, nodes, run, &mut record, &mut started, progress);

    // Teardown on every path: the sender's node first (its tunnel stops admitting), then the
    // receiver's, which drains. A node that cannot be reached is noted; the other still stops.
    let sender = opts.sender;
    for (node, drain) in [(sender, Duration::ZERO), (sender.other(), opts.drain)] {
        if !started.contains(&node) {
            continue;
        }
        match nodes.get(node).stop_run(tag, drain) {
            Ok(r) => record.notes.extend(r.notes),
            Err(e) => record
                .notes
                .push(format!("{} node not stopped: {e:#}", node.name())),
        }
    }
    let after = measure_both();

    // Fetch both nodes' files; then each packet log gets its node's clock correction.
    let mut corrections = Vec::new();
    for node in [Node::Local, Node::Remote] {
        let i = usize::from(node == Node::Remote);
        let correction = match (&before, &after) {
            (Some(b), Some(a)) => {
                let c = Correction::between(b[i].clone().ok(), a[i].clone().ok());
                match &c {
                    Some(c) => record
                        .notes
                        .extend(c.flags(node.name(), opts.max_clock_move_ns)),
                    None => {
                        let why = b[i].clone().err().unwrap_or_default();
                        record.notes.push(clock::unmeasured_flag(node.name(), &why));
                    }
                }
                c
            }
            _ => None,
        };
        corrections.push(correction);
        if !started.contains(&node) {
            continue;
        }
        match nodes.get(node).fetch_logs(tag, &plan.data_dir, true) {
            Ok(files) => {
                if let Some(c) = correction {
                    for f in files.iter().filter(|f| f.ends_with(".ptlog")) {
                        if let Err(e) = apply_correction(&plan.data_dir.join(f), &c) {
                            record.notes.push(format!("clock correction of {f}: {e:#}"));
                        }
                    }
                }
            }
            Err(e) => record
                .notes
                .push(format!("{} node's files not fetched: {e:#}", node.name())),
        }
    }
    // Pantheon's stats log records the offsets it applied (at the run's start here).
    let extra: Vec<String> = [Node::Local, Node::Remote]
        .iter()
        .zip(&corrections)
        .filter_map(|(n, c)| {
            c.map(|c| {
                let name = if *n == Node::Local { "Local" } else { "Remote" };
                format!("{name} clock offset: {:.3} ms", c.offset_ns as f64 / 1e6)
            })
        })
        .collect();
    record.finish(result, &plan.data_dir, &extra);
    record
}

/// Writes a node's correction into a fetched packet log: the offset at the log's base time
/// and the drift.
fn apply_correction(path: &Path, c: &Correction) -> anyhow::Result<()> {
    let header = tunnel::log::read_header(path)?;
    tunnel::log::set_clock_offset(path, c.offset_at(header.base_realtime_ns), c.drift_ppb)?;
    Ok(())
}

fn drive_remote(
    plan: &ExperimentPlan,
    opts: &RemoteOptions,
    nodes: &Nodes,
    run: &RunSpec,
    record: &mut RunRecord,
    started: &mut Vec<Node>,
    progress: &dyn Fn(f64),
) -> anyhow::Result<()> {
    let (run_id, tag) = (run.run_id, run.tag);
    let server = opts.tunnel_server;
    let client = server.other();
    let server_addr = match server {
        Node::Local => opts.local_addr.ok_or_else(|| {
            anyhow!("--tunnel-server local needs --local-addr (the address the remote node dials)")
        })?,
        Node::Remote => match opts.remote_addr {
            Some(a) => a,
            None => nodes.remote.host.parse().map_err(|_| {
                anyhow!(
                    "the remote agent's host {:?} is not an IPv4 address: give --remote-addr",
                    nodes.remote.host
                )
            })?,
        },
    };
    let interface = |n: Node| match n {
        Node::Local => opts.local_if.clone().unwrap_or_default(),
        Node::Remote => opts.remote_if.clone().unwrap_or_default(),
    };
    let run_ref = || {
        Some(proto::RunRef {
            run: tag.to_owned(),
        })
    };
    // Tunnels, server first; each node's tunnel address by flow.
    let mut private = Vec::new();
    for flow in 1..=u32::try_from(run.flows.len())? {
        let mut tunnel = |n: Node, role: proto::TunnelRole, address: String| {
            if !started.contains(&n) {
                started.push(n);
            }
            nodes.get(n).start_tunnel(proto::TunnelRequest {
                run: run_ref(),
                flow,
                role: role as i32,
                sender_side: n == opts.sender,
                address,
                interface: interface(n),
                scheme: run.name.to_owned(),
                run_id,
                snaplen: plan.capture.unwrap_or(0),
            })
        };
        let s = tunnel(server, proto::TunnelRole::Server, String::new())?;
        let c = tunnel(
            client,
            proto::TunnelRole::Client,
            format!("{server_addr}:{}", s.udp_port),
        )?;
        private.push((s.private_address, c.private_address));
    }
    let mut sides = RemoteSides {
        nodes,
        opts,
        run_id,
        tag,
        private,
    };
    let deadline = Instant::now() + Duration::from_secs(10);
    while !sides.tunnels_connected()? {
        if Instant::now() > deadline {
            bail!(
                "tunnel not established within 10 s (the {} node dials {server_addr}: is it \
                 reachable from there, UDP allowed?)",
                client.name()
            );
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    run_sequence(plan, run.flows, &mut sides, record, progress)
}

/// The sides of a remote run: each on the node `--sender` puts it on, through its agent.
struct RemoteSides<'a> {
    nodes: &'a Nodes<'a>,
    opts: &'a RemoteOptions,
    run_id: u32,
    /// The run's name on the agents.
    tag: &'a str,
    /// Per flow: (the tunnel server's address inside the tunnel, the client's).
    private: Vec<(String, String)>,
}

impl RemoteSides<'_> {
    fn node_of(&self, side: Side) -> Node {
        match side {
            Side::Sender => self.opts.sender,
            Side::Receiver => self.opts.sender.other(),
        }
    }

    fn status(&self, n: Node) -> anyhow::Result<proto::RunStatusReply> {
        self.nodes
            .get(n)
            .run_status(self.tag)
            .with_context(|| format!("{} node", n.name()))
    }

    /// Whether both nodes' tunnels are up (after [`Sides::check`]).
    fn tunnels_connected(&mut self) -> anyhow::Result<bool> {
        self.check()?;
        Ok(self.status(Node::Local)?.tunnels_connected
            && self.status(Node::Remote)?.tunnels_connected)
    }
}

impl Sides for RemoteSides<'_> {
    fn check(&mut self) -> anyhow::Result<()> {
        if INTERRUPTED.load(Ordering::SeqCst) {
            bail!("interrupted");
        }
        for n in [Node::Local, Node::Remote] {
            if let Some(f) = self.status(n)?.failures.first() {
                bail!("{} node: {f}", n.name());
            }
        }
        Ok(())
    }

    fn start(
        &mut self,
        run_flow: &RunFlow,
        side: Side,
        flow: u16,
        peer: Option<String>,
    ) -> anyhow::Result<Vec<String>> {
        // Workloads beyond bulk are refused for remote runs by the plan (`check_remote`).
        let scheme = run_flow.scheme;
        let r = self
            .nodes
            .get(self.node_of(side))
            .start_side(proto::SideRequest {
                run: Some(proto::RunRef {
                    run: self.tag.to_owned(),
                }),
                flow: u32::from(flow),
                scheme: scheme.name.clone(),
                side: match side {
                    Side::Sender => proto::Side::Sender,
                    Side::Receiver => proto::Side::Receiver,
                } as i32,
                peer_address: peer.unwrap_or_default(),
                port: u32::from(SCHEME_PORT),
                run_id: self.run_id,
            })?;
        Ok(r.notes)
    }

    /// The sender's side first (nothing new is sent), then the receiver's.
    fn stop(&mut self, flow: u16) -> anyhow::Result<()> {
        for side in [Side::Sender, Side::Receiver] {
            let n = self.node_of(side);
            self.nodes
                .get(n)
                .stop_flow(self.tag, flow)
                .with_context(|| format!("{} node: stop flow {flow}", n.name()))?;
        }
        Ok(())
    }

    fn address(&self, side: Side, flow: u16) -> String {
        let (server, client) = &self.private[usize::from(flow) - 1];
        if self.node_of(side) == self.opts.tunnel_server {
            server.clone()
        } else {
            client.clone()
        }
    }

    fn poll(&self) -> Duration {
        Duration::from_millis(250)
    }
}

/// Checks that the plan can run remotely with these options, before anything starts.
pub fn check_options(opts: &RemoteOptions, remote_host: &str) -> anyhow::Result<()> {
    if opts.tunnel_server == Node::Local && opts.local_addr.is_none() {
        bail!("--tunnel-server local needs --local-addr (the address the remote node dials)");
    }
    if opts.tunnel_server == Node::Remote
        && opts.remote_addr.is_none()
        && remote_host.parse::<Ipv4Addr>().is_err()
    {
        bail!("the remote agent's host {remote_host:?} is not an IPv4 address: give --remote-addr");
    }
    if !(1..=20).contains(&opts.ntp_samples) {
        bail!("--ntp-samples must be 1–20");
    }
    Ok(())
}

/// Both agents answer (waiting up to `timeout` for each, e.g. one restarting); their info.
pub fn wait_for_nodes(
    nodes: &Nodes,
    timeout: Duration,
) -> anyhow::Result<(proto::NodeInfo, proto::NodeInfo)> {
    let l = nodes
        .local
        .wait_ready(timeout)
        .context("local agent not answering")?;
    let r = nodes
        .remote
        .wait_ready(timeout)
        .context("remote agent not answering")?;
    Ok((l, r))
}

/// Free text describing each side, for the report (Pantheon's `--local-desc`,
/// `--remote-desc`).
#[derive(Debug, Clone, Default)]
pub struct Descriptions {
    /// The local node.
    pub local: Option<String>,
    /// The remote node.
    pub remote: Option<String>,
}

/// Starts a remote experiment: waits up to 10 s for both agents, warns (through `warn`) of
/// the plan's schemes a node says it cannot run (their runs will fail), creates the results
/// directory and writes its `pantheon_metadata.json` (the plan, the options, both nodes' info;
/// merged into `earlier`, the metadata of results this experiment appends to, if any).
/// Errors if an agent does not answer, the runs cannot be appended to `earlier`
/// ([`ExperimentPlan::check_append`]) or the directory cannot be written.
pub fn start_experiment(
    plan: &ExperimentPlan,
    opts: &RemoteOptions,
    nodes: &Nodes,
    desc: &Descriptions,
    earlier: Option<&analyzer::results::Metadata>,
    warn: &dyn Fn(String),
) -> anyhow::Result<()> {
    use analyzer::results::{Metadata, Mode, NodeSummary};
    let (li, ri) = wait_for_nodes(nodes, Duration::from_secs(10))?;
    for (side, info) in [("local", &li), ("remote", &ri)] {
        for name in &plan.scheme_names() {
            if let Some(s) = info.schemes.iter().find(|s| &s.name == name) {
                if !s.runnable {
                    warn(format!(
                        "{name} cannot run on the {side} node {} ({}); its runs will fail",
                        info.node, s.detail
                    ));
                }
            }
        }
    }
    std::fs::create_dir_all(&plan.data_dir)
        .with_context(|| format!("create {}", plan.data_dir.display()))?;
    let node_summary = |i: &proto::NodeInfo| NodeSummary {
        node: i.node.clone(),
        hostname: i.hostname.clone(),
        kernel: i.kernel.clone(),
        version: i.version.clone(),
        sysctls: i.sysctls.clone().into_iter().collect(),
    };
    // The versions of the node that runs the senders, as it reports them now.
    let scheme_versions = nodes
        .get(opts.sender)
        .info_with_versions()
        .with_context(|| format!("{} agent", opts.sender.name()))?
        .schemes
        .iter()
        .filter(|s| plan.scheme_names().contains(&s.name) && !s.version.is_empty())
        .map(|s| (s.name.clone(), s.version.clone()))
        .collect();
    let m = Metadata {
        mode: Some(Mode::Remote),
        sender_side: Some(opts.sender),
        server_side: Some(opts.tunnel_server),
        local_agent: Some(nodes.local.addr.clone()),
        remote_agent: Some(nodes.remote.addr.clone()),
        local_addr: opts.local_addr.map(|x| x.to_string()),
        remote_addr: opts.remote_addr.map(|x| x.to_string()),
        local_if: opts.local_if.clone(),
        remote_if: opts.remote_if.clone(),
        ntp_addr: opts.ntp_addr.clone(),
        local_desc: desc.local.clone(),
        remote_desc: desc.remote.clone(),
        drain: Some(opts.drain.as_secs_f64()),
        max_clock_move_ms: Some(opts.max_clock_move_ns as f64 / 1e6),
        local_node: Some(node_summary(&li)),
        remote_node: Some(node_summary(&ri)),
        scheme_versions,
        ..plan.common_metadata()
    };
    let m = match earlier {
        Some(earlier) => {
            plan.check_append(earlier, &m)?;
            earlier.merged(&m)
        }
        None => m,
    };
    Ok(m.write(&plan.data_dir)?)
}

/// A remote experiment from its plan to its analysis (`pantheon run remote`): the plan checked
/// (and what a real path cannot do refused), `plan.data_dir` prepared as `dir` says and the
/// runs numbered ([`experiment::prepare`]), the agents asked and the metadata written
/// ([`start_experiment`]), every run run between the two nodes ([`run_when_ready`]: a node
/// that does not answer fails its run, not the experiment) and recorded, and the directory
/// analysed. Errors: a check, an agent that does not answer at the start, a directory or record
/// that cannot be written, the analysis.
pub fn experiment(
    mut plan: ExperimentPlan,
    dir: experiment::ResultsDir,
    opts: &RemoteOptions,
    nodes: &Nodes,
    desc: &Descriptions,
    registry: &Registry,
    events: &dyn experiment::Events,
) -> anyhow::Result<experiment::Outcome> {
    plan.check(registry)?;
    plan.check_remote()?;
    check_options(opts, &nodes.remote.host)?;
    let experiment::Prepared {
        existing,
        lock: _held,
    } = experiment::prepare(&mut plan, dir)?;
    let earlier = match &existing {
        Existing::Append(earlier) => Some(&**earlier),
        _ => None,
    };
    start_experiment(&plan, opts, nodes, desc, earlier, &|w| {
        tracing::warn!("warning: {w}")
    })?;
    tracing::info!(
        "Remote experiment: sender on the {} node, tunnel server on the {} node ({} ↔ {})",
        opts.sender.name(),
        opts.tunnel_server.name(),
        nodes.local.addr,
        nodes.remote.addr
    );
    let runs = experiment::RunsOptions {
        // Unique per invocation: `r<pid>-<n>` (agents prefix them with their node).
        tag_prefix: format!("r{}", std::process::id()),
        ..experiment::RunsOptions::default()
    };
    let ran = experiment::run_all(
        &plan,
        registry,
        &runs,
        &|run, progress| Ok(run_when_ready(&plan, opts, nodes, run, progress)),
        events,
    )?;
    experiment::finish(&plan, registry, ran)
}

/// One run of an experiment: [`run_once_remote`] once both agents answer (a restarted one gets
/// 10 s); if one does not, the run fails with the reason.
pub fn run_when_ready(
    plan: &ExperimentPlan,
    opts: &RemoteOptions,
    nodes: &Nodes,
    run: &RunSpec,
    progress: &dyn Fn(f64),
) -> RunRecord {
    if let Err(e) = wait_for_nodes(nodes, Duration::from_secs(10)) {
        let mut r = RunRecord::new(run.name, run.run_id);
        r.outcome = engine::runner::RunOutcome::Failed {
            reason: format!("{e:#}"),
        };
        return r;
    }
    run_once_remote(plan, opts, nodes, run, progress)
}
