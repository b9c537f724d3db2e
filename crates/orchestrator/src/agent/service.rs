//! The agent's side of the protocol: hosts its half of remote runs.
//!
//! Per run (named by the orchestrator) the agent keeps the same [`RunResources`] as a local run
//! — scheme processes, tunnel endpoints, namespaces — in a table; StopRun ends them in that
//! order. The tunnel's UDP socket lives in the agent's own network namespace (the node's real
//! network), its TUN device and the scheme in a namespace of the run's flow, so a scheme's
//! traffic can only leave through the tunnel. Namespaces, sockets and processes are made on
//! blocking threads (`spawn_blocking`), never on the async workers.

use std::collections::{BTreeMap, HashMap};
use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio_stream::wrappers::ReceiverStream;
use tonic::{Request, Response, Status};
use tunnel::io::EndpointConfig;
use tunnel::log::{LogFormat, Role};

use super::proto::{self, agent_server::Agent};
use crate::clock::{best_sample, Measurement};
use engine::runner::{self, RunResources, CLIENT_PRIVATE, SERVER_PRIVATE};
use engine::schemes::{Registry, Side, SystemInfo};

/// How long the tunnel endpoints of a remote run wait for a silent peer before they fail the
/// run (they send KEEPALIVEs while idle, so a live peer is never silent this long).
pub const PEER_TIMEOUT: Duration = Duration::from_secs(10);

/// The sysctls a node reports beyond Pantheon's ([`engine::analyze::REPORTED_SYSCTLS`]): its
/// congestion controls.
pub const CONGESTION_SYSCTLS: &[&str] = &[
    "net.ipv4.tcp_congestion_control",
    "net.ipv4.tcp_available_congestion_control",
];

/// The agent: what it was started with and the runs it hosts.
#[derive(Clone)]
pub struct AgentService {
    inner: Arc<Inner>,
}

struct Inner {
    node: String,
    data_dir: PathBuf,
    registry: Registry,
    runs: Mutex<HashMap<String, HostedRun>>,
}

/// One run's half on this node.
struct HostedRun {
    dir: PathBuf,
    res: RunResources,
    /// Flow id → index of its namespace in `res.namespaces`.
    flows: BTreeMap<u16, usize>,
    /// The flows whose tunnels capture (`--capture`): their sides also write TLS key logs.
    captured: std::collections::BTreeSet<u16>,
}

type Reply<T> = Result<Response<T>, Status>;

fn internal(e: impl std::fmt::Display) -> Status {
    Status::internal(format!("{e:#}"))
}

impl AgentService {
    /// The node's name (`--name`).
    pub fn node(&self) -> &str {
        &self.inner.node
    }

    /// An agent named `node` (it prefixes the agent's namespaces: check it with
    /// [`super::check_name`]), keeping each run's files in `<data_dir>/<run>/`, running the
    /// schemes of `registry`.
    pub fn new(node: String, data_dir: PathBuf, registry: Registry) -> AgentService {
        AgentService {
            inner: Arc::new(Inner {
                node,
                data_dir,
                registry,
                runs: Mutex::new(HashMap::new()),
            }),
        }
    }

    /// Ends every run still hosted (the agent is shutting down); returns their names.
    pub fn stop_all(&self) -> Vec<String> {
        let runs: Vec<(String, HostedRun)> =
            self.inner.runs.lock().expect("poisoned").drain().collect();
        runs.into_iter()
            .map(|(name, run)| {
                let _ = run.res.teardown();
                name
            })
            .collect()
    }

    /// Runs `f` on a blocking thread with the agent's state.
    async fn blocking<T: Send + 'static>(
        &self,
        f: impl FnOnce(&Inner) -> Result<T, Status> + Send + 'static,
    ) -> Result<T, Status> {
        let inner = self.inner.clone();
        tokio::task::spawn_blocking(move || f(&inner))
            .await
            .map_err(|e| Status::internal(format!("agent task failed: {e}")))?
    }
}

fn run_name(run: &Option<proto::RunRef>) -> Result<String, Status> {
    let name = run.as_ref().map(|r| r.run.clone()).unwrap_or_default();
    super::check_name(&name, 24, "run").map_err(Status::invalid_argument)?;
    Ok(name)
}

fn flow_id(flow: u32) -> Result<u16, Status> {
    u16::try_from(flow)
        .ok()
        .filter(|f| *f >= 1)
        .ok_or_else(|| Status::invalid_argument(format!("flow {flow}: must be 1–65535")))
}

/// MTU of `interface` in this namespace.
fn interface_mtu(interface: &str) -> Result<u32, Status> {
    netns::interfaces::interfaces(None)
        .map_err(internal)?
        .into_iter()
        .find(|i| i.name == interface)
        .map(|i| i.mtu)
        .ok_or_else(|| Status::invalid_argument(format!("no interface {interface} on this node")))
}

/// The UDP address of a tunnel request (a server's may be empty: any port), checked with the
/// request's run name, which names the log files (a scheme's or a mix's: one file name, never
/// a path; its schemes are checked when their sides start).
fn checked_address(req: &proto::TunnelRequest, role: Role) -> Result<SocketAddrV4, Status> {
    let address: SocketAddrV4 = if req.address.is_empty() && role == Role::Server {
        SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, 0)
    } else {
        req.address.parse().map_err(|_| {
            Status::invalid_argument(format!("address {:?}: expected ip:port", req.address))
        })?
    };
    if role == Role::Client && address.port() == 0 {
        return Err(Status::invalid_argument(
            "a tunnel client needs the server's port",
        ));
    }
    if req.scheme.is_empty() || req.scheme.starts_with('.') || req.scheme.contains('/') {
        return Err(Status::invalid_argument(format!(
            "run name {:?}: expected a scheme's or a mix's name",
            req.scheme
        )));
    }
    Ok(address)
}

impl Inner {
    fn start_tunnel(&self, req: proto::TunnelRequest) -> Result<proto::TunnelReply, Status> {
        let run = run_name(&req.run)?;
        let flow = flow_id(req.flow)?;
        let role = match req.role() {
            proto::TunnelRole::Server => Role::Server,
            proto::TunnelRole::Client => Role::Client,
        };
        let address = checked_address(&req, role)?;
        let (mtu, bind_device) = if req.interface.is_empty() {
            (1500, None)
        } else {
            (interface_mtu(&req.interface)?, Some(req.interface.clone()))
        };
        let path_mtu = u16::try_from(mtu).map_err(|_| Status::invalid_argument("MTU too large"))?;
        let mut runs = self.runs.lock().expect("poisoned");
        if !runs.contains_key(&run) {
            let dir = self.data_dir.join(&run);
            std::fs::create_dir_all(&dir).map_err(internal)?;
            runs.insert(
                run.clone(),
                HostedRun {
                    dir,
                    res: RunResources::default(),
                    flows: BTreeMap::new(),
                    captured: Default::default(),
                },
            );
        }
        let hosted = runs.get_mut(&run).expect("inserted above");
        if hosted.flows.contains_key(&flow) {
            return Err(Status::already_exists(format!(
                "run {run} already has a tunnel for flow {flow} on this node"
            )));
        }
        let ns = hosted
            .res
            .netns(format!(
                "{}{run}-f{flow}",
                super::namespace_prefix(&self.node)
            ))
            .map_err(internal)?;
        hosted.flows.insert(flow, ns);
        if req.snaplen > 0 {
            hosted.captured.insert(flow);
        }
        let (ingress, egress) = if req.sender_side {
            ("acklink", "datalink")
        } else {
            ("datalink", "acklink")
        };
        let lp = |d: &str, k: &str| {
            engine::sequence::log_path(&hosted.dir, &req.scheme, d, req.run_id, flow, k)
        };
        let (local_private, peer_private) = match role {
            Role::Server => (SERVER_PRIVATE, CLIENT_PRIVATE),
            Role::Client => (CLIENT_PRIVATE, SERVER_PRIVATE),
        };
        let endpoint = tunnel::io::start(
            EndpointConfig {
                role,
                flow,
                sender_side: req.sender_side,
                ingress_log: Some(lp(ingress, "ingress")),
                egress_log: Some(lp(egress, "egress")),
                log_format: LogFormat::Binary,
                capture_snaplen: (req.snaplen > 0).then_some(req.snaplen),
                local_private,
                peer_private,
                path_mtu,
                udp_addr: address,
                bind_device,
                peer_timeout: Some(PEER_TIMEOUT),
            },
            None,
            &hosted.res.namespaces[ns],
        )
        .map_err(|e| Status::failed_precondition(format!("start the tunnel {role:?}: {e}")))?;
        let port = endpoint.local_udp.port();
        hosted.res.endpoints.push(endpoint);
        super::log(&format!(
            "run {run}: tunnel {role:?} of flow {flow} on UDP port {port}"
        ));
        Ok(proto::TunnelReply {
            udp_port: u32::from(port),
            private_address: local_private.to_string(),
        })
    }

    fn start_side(&self, req: proto::SideRequest) -> Result<proto::SideReply, Status> {
        let run = run_name(&req.run)?;
        let flow = flow_id(req.flow)?;
        let scheme = self
            .registry
            .get(&req.scheme)
            .map_err(|e| Status::not_found(e.to_string()))?;
        let side = match req.side() {
            proto::Side::Sender => Side::Sender,
            proto::Side::Receiver => Side::Receiver,
        };
        let port = u16::try_from(req.port)
            .map_err(|_| Status::invalid_argument(format!("port {}", req.port)))?;
        let mut runs = self.runs.lock().expect("poisoned");
        let hosted = runs
            .get_mut(&run)
            .ok_or_else(|| Status::not_found(format!("no run {run} on this node")))?;
        let &ns = hosted.flows.get(&flow).ok_or_else(|| {
            Status::failed_precondition(format!("run {run} has no tunnel for flow {flow} here"))
        })?;
        let argv = scheme.argv(side, &req.peer_address, port);
        let out = (
            hosted.dir.as_path(),
            scheme.name.as_str(),
            req.run_id,
            usize::from(flow),
            side,
        );
        let netns = &hosted.res.namespaces[ns];
        let p = if hosted.captured.contains(&flow) {
            runner::spawn_with_quic_logs(netns, &argv, scheme.capture_args(side), out)
        } else {
            runner::spawn_with(netns, &argv, out, &|_| {})
        }
        .map_err(|e| Status::failed_precondition(format!("{e:#}")))?;
        hosted.res.processes.push(p);
        let mut notes = Vec::new();
        if let (Side::Sender, Some(q)) = (side, &scheme.preferred_qdisc) {
            notes.push(runner::install_qdisc(q, &[&hosted.res.namespaces[ns]]));
        }
        super::log(&format!(
            "run {run}: {side:?} of {} flow {flow} started",
            scheme.name
        ));
        Ok(proto::SideReply { notes })
    }

    fn run_status(&self, run: String) -> Result<proto::RunStatusReply, Status> {
        let mut runs = self.runs.lock().expect("poisoned");
        let hosted = runs
            .get_mut(&run)
            .ok_or_else(|| Status::not_found(format!("no run {run} on this node")))?;
        let mut failures: Vec<String> = hosted
            .res
            .processes
            .iter_mut()
            .filter_map(|p| p.exited())
            .collect();
        failures.extend(
            hosted
                .res
                .endpoints
                .iter()
                .filter_map(|e| e.control.error().map(|m| format!("tunnel: {m}"))),
        );
        let tunnels_connected = !hosted.res.endpoints.is_empty()
            && hosted
                .res
                .endpoints
                .iter()
                .all(|e| e.control.is_connected());
        Ok(proto::RunStatusReply {
            tunnels_connected,
            failures,
        })
    }

    /// Ends flow `flow`'s sides of `run` on this node (StopFlow); the lock is not held while
    /// they end (up to 2 s each).
    fn stop_flow(&self, run: String, flow: u16) -> Result<proto::StopReply, Status> {
        let taken = self
            .runs
            .lock()
            .expect("poisoned")
            .get_mut(&run)
            .ok_or_else(|| Status::not_found(format!("no run {run} on this node")))?
            .res
            .take_flow(flow);
        let n = taken.len();
        drop(taken);
        super::log(&format!("run {run}: flow {flow} stopped ({n} sides)"));
        Ok(proto::StopReply::default())
    }

    fn stop_run(&self, run: String, drain: Duration) -> proto::StopReply {
        let hosted = self.runs.lock().expect("poisoned").remove(&run);
        let Some(hosted) = hosted else {
            return proto::StopReply {
                notes: vec![format!("{}: run {run} was not running here", self.node)],
            };
        };
        for e in &hosted.res.endpoints {
            e.control.stop_admitting();
        }
        std::thread::sleep(drain);
        let t = hosted.res.teardown();
        let notes = t.notes.into_iter().chain(
            t.log_failures
                .into_iter()
                .map(|f| format!("log not written: {f}")),
        );
        super::log(&format!("run {run}: stopped"));
        proto::StopReply {
            notes: notes
                .into_iter()
                .map(|n| format!("{}: {n}", self.node))
                .collect(),
        }
    }

    /// The node's info; with `versions`, each runnable scheme's version too (a process per
    /// scheme, so only when asked).
    fn info(&self, versions: bool) -> proto::NodeInfo {
        use engine::analyze::read_sysctl;
        let read = |name: &str| read_sysctl(name).unwrap_or_default();
        let sysctls = engine::analyze::REPORTED_SYSCTLS
            .iter()
            .chain(CONGESTION_SYSCTLS)
            .map(|k| ((*k).to_owned(), read(k)))
            .collect();
        let sys = SystemInfo::probe();
        let schemes = self
            .registry
            .all()
            .map(|s| {
                let why = s.unavailable_reason(&sys);
                proto::SchemeStatus {
                    name: s.name.clone(),
                    runnable: why.is_none(),
                    version: if versions && why.is_none() {
                        s.version()
                    } else {
                        String::new()
                    },
                    detail: why.unwrap_or_default(),
                }
            })
            .collect();
        proto::NodeInfo {
            version: env!("CARGO_PKG_VERSION").to_owned(),
            hostname: read("kernel.hostname"),
            kernel: format!("{} {}", read("kernel.ostype"), read("kernel.osrelease")),
            sysctls,
            interfaces: interfaces(),
            schemes,
            node: self.node.clone(),
        }
    }
}

/// This namespace's interfaces (none if `ip` cannot say).
fn interfaces() -> Vec<proto::Interface> {
    netns::interfaces::interfaces(None)
        .unwrap_or_default()
        .into_iter()
        .map(|i| proto::Interface {
            addresses: i.addresses.iter().map(|a| a.with_prefix()).collect(),
            name: i.name,
            mtu: i.mtu,
        })
        .collect()
}

/// `samples` SNTP queries to `server` (host:port, port 123 if omitted), 1 s timeout each;
/// the offsets of those that answered, or why none did.
pub async fn sntp_samples(server: &str, samples: u32) -> Result<Vec<Measurement>, String> {
    let with_port = if server.contains(':') {
        server.to_owned()
    } else {
        format!("{server}:123")
    };
    let addr: SocketAddr = tokio::net::lookup_host(&with_port)
        .await
        .map_err(|e| format!("resolve {with_port}: {e}"))?
        .next()
        .ok_or_else(|| format!("{with_port} has no address"))?;
    let client = rsntp::AsyncSntpClient::with_config(
        rsntp::Config::default().timeout(Duration::from_secs(1)),
    );
    let mut got = Vec::new();
    let mut last_error = String::new();
    for _ in 0..samples {
        match client.synchronize(addr).await {
            Ok(r) => got.push(Measurement {
                offset_ns: (r.clock_offset().as_secs_f64() * 1e9).round() as i64,
                rtt_ns: (r.round_trip_delay().as_secs_f64() * 1e9).round() as i64,
                at_ns: tunnel::io::realtime_ns(),
            }),
            Err(e) => last_error = e.to_string(),
        }
    }
    if got.is_empty() {
        Err(format!(
            "no answer from NTP server {addr} to {samples} queries: {last_error}"
        ))
    } else {
        Ok(got)
    }
}

#[tonic::async_trait]
impl Agent for AgentService {
    async fn info(&self, request: Request<proto::InfoRequest>) -> Reply<proto::NodeInfo> {
        let versions = request.into_inner().scheme_versions;
        self.blocking(move |i| Ok(i.info(versions)))
            .await
            .map(Response::new)
    }

    async fn prepare_schemes(
        &self,
        request: Request<proto::PrepareRequest>,
    ) -> Reply<proto::PrepareReply> {
        let names = request.into_inner().schemes;
        self.blocking(move |i| {
            let schemes = names
                .iter()
                .map(|n| i.registry.get(n))
                .collect::<Result<Vec<_>, _>>()
                .map_err(|e| Status::not_found(e.to_string()))?;
            let outcomes = engine::setup::setup_all(&schemes);
            Ok(proto::PrepareReply {
                schemes: outcomes
                    .into_iter()
                    .map(|o| proto::SchemeStatus {
                        name: o.scheme,
                        runnable: o.ok,
                        detail: o.detail,
                        version: String::new(),
                    })
                    .collect(),
            })
        })
        .await
        .map(Response::new)
    }

    async fn clock_offset(
        &self,
        request: Request<proto::ClockRequest>,
    ) -> Reply<proto::ClockReply> {
        let req = request.into_inner();
        let n = match req.samples {
            0 => 4,
            n @ 1..=20 => n,
            n => return Err(Status::invalid_argument(format!("{n} samples: at most 20"))),
        };
        let samples = sntp_samples(&req.server, n)
            .await
            .map_err(Status::unavailable)?;
        let best = best_sample(&samples).expect("at least one sample");
        Ok(Response::new(proto::ClockReply {
            offset_ms: best.offset_ns as f64 / 1e6,
            rtt_ms: best.rtt_ns as f64 / 1e6,
            measured_at_ns: best.at_ns,
            samples: samples
                .iter()
                .map(|s| proto::ClockSample {
                    offset_ms: s.offset_ns as f64 / 1e6,
                    rtt_ms: s.rtt_ns as f64 / 1e6,
                })
                .collect(),
        }))
    }

    async fn start_tunnel(
        &self,
        request: Request<proto::TunnelRequest>,
    ) -> Reply<proto::TunnelReply> {
        let req = request.into_inner();
        self.blocking(move |i| i.start_tunnel(req))
            .await
            .map(Response::new)
    }

    async fn start_side(&self, request: Request<proto::SideRequest>) -> Reply<proto::SideReply> {
        let req = request.into_inner();
        self.blocking(move |i| i.start_side(req))
            .await
            .map(Response::new)
    }

    async fn run_status(&self, request: Request<proto::RunRef>) -> Reply<proto::RunStatusReply> {
        let run = run_name(&Some(request.into_inner()))?;
        self.blocking(move |i| i.run_status(run))
            .await
            .map(Response::new)
    }

    async fn stop_flow(&self, request: Request<proto::FlowRef>) -> Reply<proto::StopReply> {
        let req = request.into_inner();
        let run = run_name(&req.run)?;
        let flow = flow_id(req.flow)?;
        self.blocking(move |i| i.stop_flow(run, flow))
            .await
            .map(Response::new)
    }

    async fn stop_run(&self, request: Request<proto::StopRequest>) -> Reply<proto::StopReply> {
        let req = request.into_inner();
        let run = run_name(&req.run)?;
        let drain = Duration::from_millis(u64::from(req.drain_ms.min(60_000)));
        self.blocking(move |i| Ok(i.stop_run(run, drain)))
            .await
            .map(Response::new)
    }

    type FetchLogsStream = ReceiverStream<Result<proto::FileChunk, Status>>;

    async fn fetch_logs(
        &self,
        request: Request<proto::FetchRequest>,
    ) -> Reply<Self::FetchLogsStream> {
        let req = request.into_inner();
        let run = run_name(&req.run)?;
        let dir = self.inner.data_dir.join(&run);
        if !dir.is_dir() {
            return Err(Status::not_found(format!(
                "no files of run {run} on this node"
            )));
        }
        let remove = req.remove;
        let stream = stream_files(
            dir.clone(),
            |name, data| proto::FileChunk { name, data },
            move || {
                if remove {
                    let _ = std::fs::remove_dir_all(&dir);
                }
            },
        );
        Ok(Response::new(stream))
    }
}

/// The plain files of `dir`, sorted by name, as a stream of chunks made by `chunk(name, data)`
/// (1 MiB each; an empty file is sent once, so that it exists), read on a blocking thread;
/// then `after()` runs (e.g. removes the directory). A read error ends the stream with it.
pub fn stream_files<T: Send + 'static>(
    dir: PathBuf,
    chunk: fn(String, Vec<u8>) -> T,
    after: impl FnOnce() + Send + 'static,
) -> ReceiverStream<Result<T, Status>> {
    let (tx, rx) = tokio::sync::mpsc::channel(4);
    tokio::task::spawn_blocking(move || {
        for path in &super::files_in(&dir) {
            let name = path
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default();
            let sent = std::fs::read(path).map_err(internal).and_then(|data| {
                if data.is_empty() {
                    return tx
                        .blocking_send(Ok(chunk(name.clone(), vec![])))
                        .map_err(internal);
                }
                for c in data.chunks(1 << 20) {
                    tx.blocking_send(Ok(chunk(name.clone(), c.to_vec())))
                        .map_err(internal)?;
                }
                Ok(())
            });
            if let Err(e) = sent {
                let _ = tx.blocking_send(Err(e));
                return;
            }
        }
        after();
    });
    ReceiverStream::new(rx)
}
