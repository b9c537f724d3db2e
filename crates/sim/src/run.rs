//! The discrete-event loop: QUIC flows over the emulated path on a virtual clock.
//!
//! Time is a `u64` of nanoseconds since the emulator started, as in the real-time emulator
//! (`emucal::runtime`), and nothing but the loop moves it: it jumps to the earliest of the next
//! packet out of a stage of either direction, the next timer of a connection (loss detection,
//! pacing, delayed ACKs, keep-alives), the next packet through a host, the next flow start or
//! stop and the end of the run. At each instant, in this order:
//!
//! 1. flows due to start connect (their client opens the QUIC connection, as the sender does
//!    once the receiver listens); flows due to stop are ended (their packets in flight are
//!    still logged when they leave the path, as by the tunnel of a real run);
//! 2. both directions advance; every packet that left the path is logged as the receiving
//!    tunnel endpoint logs it (ingress) and handed to its QUIC endpoint after the hosts'
//!    latency ([`HostLatency`]; none by default: at once);
//! 3. expired connection timers fire;
//! 4. the applications act: the client opens one unidirectional stream once connected and keeps
//!    it full (bulk, full throttle), the server accepts it and reads everything (unordered, as
//!    `pantheon-quinn receiver` does);
//! 5. every connection sends what it may (congestion window, pacing): each datagram is logged
//!    as the sending tunnel endpoint logs it (egress) and enters the path.
//!
//! At the end of the run the flows stop sending and the path drains (up to the drain time), as
//! the real runner stops admitting packets into the tunnels and lets the path empty.
//!
//! quinn-proto takes `Instant`s as arguments and never reads the clock itself: each virtual
//! time `t` is given as `base + t` for one `base` taken at the start.

use std::io;
use std::net::{Ipv4Addr, SocketAddr};
use std::time::{Duration, Instant};

use std::collections::VecDeque;

use bytes::{Buf, BytesMut};
use emucal::mm::{EmulatedPath, LinkDirection};
use emucal::stage::{AnyStage, LinkEvent, Pipeline};
use quinn_proto::{
    ClientConfig, Connection, ConnectionHandle, DatagramEvent, Dir, EcnCodepoint, Endpoint,
    EndpointConfig, Event, ServerConfig, StreamEvent, StreamId,
};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use tunnel::ecn::{Codepoint, Decapsulated};
use tunnel::log::{Direction, Kind, Record};
use tunnel::wire::OVERHEAD;

use crate::frame;
use crate::quic;

/// One flow of a simulated run.
#[derive(Clone)]
pub struct FlowSpec {
    /// Its congestion controller's factory (both ends': [`quic::Controller::factory`] for quinn's
    /// own, or any other quinn-proto controller).
    pub cc: quic::Factory,
    /// When its client connects, ns after the emulator's start (a real run's "second side").
    pub start_ns: u64,
    /// When both its ends stop, ns after the emulator's start; `None`: at the end of the run.
    pub stop_ns: Option<u64>,
    /// An L4S flow ([`quic::Settings::l4s`]: ECT(1) on the wire, every packet acknowledged), as
    /// [`quic::Controller::Prague`]'s scheme runs; `false` for the others.
    pub l4s: bool,
}

impl std::fmt::Debug for FlowSpec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FlowSpec")
            .field("start_ns", &self.start_ns)
            .field("stop_ns", &self.stop_ns)
            .field("l4s", &self.l4s)
            .finish_non_exhaustive()
    }
}

/// A simulated run.
#[derive(Debug, Clone)]
pub struct SimConfig<'a> {
    /// The emulated path, loaded (its traces read); the mm-link logs it names are the sink's.
    pub path: &'a EmulatedPath,
    /// The flows, flow 1 first.
    pub flows: Vec<FlowSpec>,
    /// The seed of the path's random choices (loss, Poisson delivery, on/off), drawn exactly as
    /// by the real-time emulator seeded alike. QUIC's own (connection IDs, packet-number
    /// skips, greasing) are fixed per flow number.
    pub seed: u64,
    /// When the flows stop sending, ns after the emulator's start.
    pub end_ns: u64,
    /// Longest time the path may take to empty after `end_ns`, ns.
    pub drain_ns: u64,
    /// Largest UDP payload of the QUIC datagrams, bytes ([`quic::MAX_UDP_PAYLOAD`]).
    pub max_udp_payload: u16,
    /// How long a packet out of the path takes to reach its QUIC endpoint, the hosts' part of
    /// a real run ([`HostLatency`]).
    pub host: HostLatency,
    /// The seed of the host latency's draws, with the flow's number mixed in. The engine gives
    /// the run's number: runs differ as real ones do, even over a path without randomness,
    /// while another `seed` still changes only the path's draws.
    pub host_seed: u64,
}

/// The time a packet takes from the tunnel endpoint that logs it out of the path to the QUIC
/// endpoint that handles it, with what that endpoint sends in return: in a real run, the
/// tunnel's write to its TUN device, the kernel's UDP delivery, the program's wake-up and its
/// reply's way back to the tunnel, tens to hundreds of µs that vary from packet to packet.
/// Drawn per packet as `min + Exp(mean_extra)` and kept in order per flow and side (a socket
/// does not reorder). `NONE` (zero): ideal hosts, every reply at the instant of its cause.
///
/// [`HostLatency::MEASURED`] is this machine's: in real runs of quic, quic_newreno and
/// quic_bbr at 10 Mbit/s (bench/sim_fidelity.sh's logs), the time from a packet's ingress
/// record to the next egress record it caused (an ACK at the server, data at the client) had a
/// minimum near 45 µs, a median of 70–90 µs, p90 130–150 µs and p99 200–260 µs; 45 µs plus an
/// exponential of mean 35 µs gives 69, 126 and 206 µs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HostLatency {
    /// The least latency, ns.
    pub min_ns: u64,
    /// The mean of the exponential part added to it, ns (0: constant).
    pub mean_extra_ns: u64,
}

impl HostLatency {
    /// Ideal hosts: no latency.
    pub const NONE: HostLatency = HostLatency {
        min_ns: 0,
        mean_extra_ns: 0,
    };
    /// This machine's, measured (type docs): 45 µs + Exp(35 µs).
    pub const MEASURED: HostLatency = HostLatency {
        min_ns: 45_000,
        mean_extra_ns: 35_000,
    };

    /// One draw, ns, from a uniform `u` in [0, 1).
    fn draw(self, u: f64) -> u64 {
        let extra = -(self.mean_extra_ns as f64) * (1.0 - u).ln();
        self.min_ns + extra as u64
    }
}

impl Default for HostLatency {
    /// [`HostLatency::NONE`]: see docs/simulation.md for why ideal hosts are the default.
    fn default() -> HostLatency {
        HostLatency::NONE
    }
}

impl std::str::FromStr for HostLatency {
    type Err = String;

    /// `ideal` ([`HostLatency::NONE`]), `measured` ([`HostLatency::MEASURED`]) or `MIN+MEAN`
    /// in µs (`45+35`; `MIN` alone: constant). Errors name what was expected.
    fn from_str(s: &str) -> Result<HostLatency, String> {
        let us = |v: &str| -> Result<u64, String> {
            let x: f64 = v.trim().parse().map_err(|_| {
                format!("host latency `{s}`: expected ideal, measured or MIN+MEAN in µs (45+35)")
            })?;
            if !(0.0..=1e6).contains(&x) {
                return Err(format!(
                    "host latency `{s}`: {x} µs is not within 0–1 000 000"
                ));
            }
            Ok((x * 1e3).round() as u64)
        };
        match s.trim() {
            "ideal" => Ok(HostLatency::NONE),
            "measured" => Ok(HostLatency::MEASURED),
            t => {
                let (min, mean) = t.split_once('+').unwrap_or((t, "0"));
                Ok(HostLatency {
                    min_ns: us(min)?,
                    mean_extra_ns: us(mean)?,
                })
            }
        }
    }
}

impl std::fmt::Display for HostLatency {
    /// As parsed: `ideal`, `measured` or `MIN+MEAN` in µs.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match *self {
            HostLatency::NONE => f.write_str("ideal"),
            HostLatency::MEASURED => f.write_str("measured"),
            h => write!(
                f,
                "{}+{}",
                h.min_ns as f64 / 1e3,
                h.mean_extra_ns as f64 / 1e3
            ),
        }
    }
}

/// Where a simulated run's logs go: the tunnel endpoints' packet records and the mm-link
/// stages' events, as a real run writes them.
pub trait Sink {
    /// A packet crossing a tunnel endpoint, as that endpoint logs it (`record.flow` its flow,
    /// `record.kind` egress: sent into the path, or ingress: out of it); `direction` datalink
    /// (client → server) or acklink; `inner` the inner IP packet (IPv4 header first) as the
    /// endpoint forwarded it — an ingress packet with the CE mark the path gave it (RFC 6040).
    fn packet(&mut self, direction: Direction, record: &Record, inner: &[u8]) -> io::Result<()>;

    /// Events of the logged mm-link stage at index `stage` of `direction`'s pipeline.
    fn link_events(
        &mut self,
        direction: LinkDirection,
        stage: usize,
        events: &[LinkEvent],
    ) -> io::Result<()>;
}

/// What a simulated run did.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SimOutcome {
    /// Simulated time at the end (the drain included), ns.
    pub end_ns: u64,
    /// Datagrams sent into the path, (uplink, downlink).
    pub sent: (u64, u64),
    /// Datagrams that left the path, (uplink, downlink).
    pub delivered: (u64, u64),
    /// Datagrams dropped inside the path (queues and random loss), (uplink, downlink).
    pub dropped: (u64, u64),
    /// Whether the path emptied within the drain time.
    pub drained: bool,
    /// Instants the loop visited.
    pub steps: u64,
}

/// Why a simulated run failed.
#[derive(Debug, thiserror::Error)]
pub enum SimError {
    /// The QUIC configuration could not be made.
    #[error(transparent)]
    Config(#[from] quic::ConfigError),
    /// A flow's connection could not start or was lost (the real sender would have exited).
    #[error("flow {flow}: {reason}")]
    Flow {
        /// The flow, 1-based.
        flow: u16,
        /// quinn-proto's reason.
        reason: String,
    },
    /// A log could not be written.
    #[error("writing the logs: {0}")]
    Log(#[from] io::Error),
    /// The caller's progress callback asked to stop (Ctrl-C).
    #[error("interrupted at {0:.1} s of simulated time")]
    Interrupted(f64),
    /// The run was done elsewhere (a Slurm job step) and failed there, or could not be
    /// started or read back: why.
    #[error("{0}")]
    Elsewhere(String),
}

/// The client's (sender's) address: the tunnel client's private address in a real run.
const CLIENT: Ipv4Addr = Ipv4Addr::new(100, 64, 0, 4);
/// The server's (receiver's) address.
const SERVER: Ipv4Addr = Ipv4Addr::new(100, 64, 0, 3);
/// The receiver's UDP port.
const SERVER_PORT: u16 = 50_000;
/// What the client writes into its stream, again and again.
static CHUNK: [u8; 1 << 16] = [0; 1 << 16];
/// The seed of the flows' QUIC endpoints (with the flow's number mixed in).
const QUIC_SEED: u64 = 0x5EED_0F91_C0DE;
/// Progress is reported every this much simulated time, ns.
const PROGRESS_EVERY_NS: u64 = 100_000_000;

/// One side of a flow's QUIC connection.
struct Side {
    endpoint: Endpoint,
    conn: Option<(ConnectionHandle, Connection)>,
    /// Its own address and its peer's.
    addr: SocketAddr,
    peer: SocketAddr,
    /// The next UID its tunnel endpoint gives a packet it sends (from 0, as the tunnel).
    next_uid: u64,
    /// Packets out of the path on their way to it (host latency): when each arrives, in order.
    inbox: VecDeque<(u64, Option<EcnCodepoint>, BytesMut)>,
    /// The host latency's draws for this side.
    rng: SmallRng,
}

impl Side {
    fn new(
        seed: u64,
        host_seed: u64,
        addr: SocketAddr,
        peer: SocketAddr,
        server: Option<ServerConfig>,
    ) -> Side {
        let endpoint = Endpoint::new(
            std::sync::Arc::new(EndpointConfig::default()),
            server.map(std::sync::Arc::new),
            false,
            Some(seed_bytes(seed)),
        );
        Side {
            endpoint,
            conn: None,
            addr,
            peer,
            next_uid: 0,
            inbox: VecDeque::new(),
            rng: SmallRng::seed_from_u64(host_seed),
        }
    }

    /// A packet out of the path at `now`, due at its QUIC endpoint after the host's latency
    /// (never before the packet ahead of it).
    fn hold(&mut self, host: HostLatency, now: u64, ecn: Option<EcnCodepoint>, data: BytesMut) {
        let u: f64 = if host.mean_extra_ns > 0 {
            self.rng.random()
        } else {
            0.0
        };
        let mut due = now + host.draw(u);
        if let Some(&(last, _, _)) = self.inbox.back() {
            due = due.max(last);
        }
        self.inbox.push_back((due, ecn, data));
    }

    /// When the next held packet reaches the endpoint, ns.
    fn next_due(&self) -> Option<u64> {
        self.inbox.front().map(|p| p.0)
    }

    /// A datagram from the peer: to the connection, or accepted as a new one (a server's
    /// first), or answered by the endpoint itself. Returns an endpoint's own answer to send.
    fn receive(
        &mut self,
        now: Instant,
        ecn: Option<EcnCodepoint>,
        data: BytesMut,
    ) -> Option<Vec<u8>> {
        let mut buf = Vec::new();
        let event =
            self.endpoint
                .handle(now, self.peer, Some(self.addr.ip()), ecn, data, &mut buf)?;
        match event {
            DatagramEvent::ConnectionEvent(h, event) => {
                if let Some((ch, conn)) = &mut self.conn {
                    if *ch == h {
                        conn.handle_event(event);
                    }
                }
                None
            }
            DatagramEvent::NewConnection(incoming) if self.conn.is_none() => {
                match self.endpoint.accept(incoming, now, &mut buf, None) {
                    Ok(c) => {
                        self.conn = Some(c);
                        None
                    }
                    Err(e) => e.response.map(|t| buf[..t.size].to_vec()),
                }
            }
            DatagramEvent::NewConnection(incoming) => {
                self.endpoint.ignore(incoming);
                None
            }
            DatagramEvent::Response(t) => Some(buf[..t.size].to_vec()),
        }
    }

    /// Fires the connection's expired timers and passes its events to the endpoint and back.
    fn timers(&mut self, now: Instant) {
        if let Some((_, conn)) = &mut self.conn {
            if conn.poll_timeout().is_some_and(|t| t <= now) {
                conn.handle_timeout(now);
            }
        }
        self.endpoint_events();
    }

    fn endpoint_events(&mut self) {
        if let Some((h, conn)) = &mut self.conn {
            while let Some(e) = conn.poll_endpoint_events() {
                if let Some(back) = self.endpoint.handle_event(*h, e) {
                    conn.handle_event(back);
                }
            }
        }
    }

    fn timeout(&mut self) -> Option<Instant> {
        self.conn.as_mut().and_then(|(_, c)| c.poll_timeout())
    }
}

/// One flow: its two sides and what their applications do.
struct Flow {
    id: u16,
    spec: FlowSpec,
    client: Side,
    server: Side,
    client_config: ClientConfig,
    started: bool,
    stopped: bool,
    /// The client's stream, once open.
    stream: Option<StreamId>,
    /// The server's accepted streams.
    streams: Vec<StreamId>,
}

impl Flow {
    fn start(&mut self, now: Instant) -> Result<(), SimError> {
        self.started = true;
        let c = self
            .client
            .endpoint
            .connect(
                now,
                self.client_config.clone(),
                self.client.peer,
                quic::SERVER_NAME,
            )
            .map_err(|e| self.failed(e))?;
        self.client.conn = Some(c);
        Ok(())
    }

    fn failed(&self, reason: impl std::fmt::Display) -> SimError {
        SimError::Flow {
            flow: self.id,
            reason: reason.to_string(),
        }
    }

    /// The sides' applications after the connections' events: connect, open and fill the
    /// stream; accept and read streams. A lost connection fails the flow.
    fn applications(&mut self) -> Result<(), SimError> {
        for client in [true, false] {
            let side = if client {
                &mut self.client
            } else {
                &mut self.server
            };
            side.endpoint_events();
            let Some((_, conn)) = &mut side.conn else {
                continue;
            };
            while let Some(event) = conn.poll() {
                match event {
                    Event::Connected if client => self.stream = conn.streams().open(Dir::Uni),
                    Event::Stream(StreamEvent::Opened { dir: Dir::Uni }) if !client => {
                        while let Some(id) = conn.streams().accept(Dir::Uni) {
                            self.streams.push(id);
                        }
                    }
                    Event::ConnectionLost { reason } => {
                        let who = if client { "sender" } else { "receiver" };
                        return Err(SimError::Flow {
                            flow: self.id,
                            reason: format!("the {who}'s connection was lost: {reason}"),
                        });
                    }
                    _ => {}
                }
            }
            if client {
                if let Some(id) = self.stream {
                    let mut s = conn.send_stream(id);
                    while matches!(s.write(&CHUNK), Ok(n) if n > 0) {}
                }
            } else {
                for &id in &self.streams {
                    let mut s = conn.recv_stream(id);
                    let read = s.read(false);
                    if let Ok(mut chunks) = read {
                        while let Ok(Some(_)) = chunks.next(usize::MAX) {}
                        let _ = chunks.finalize();
                    }
                }
            }
        }
        Ok(())
    }

    fn stop(&mut self) {
        self.stopped = true;
        self.client.conn = None;
        self.server.conn = None;
        self.client.inbox.clear();
        self.server.inbox.clear();
    }

    fn side(&mut self, client: bool) -> &mut Side {
        if client {
            &mut self.client
        } else {
            &mut self.server
        }
    }
}

/// The 32-byte seed of a QUIC endpoint from a 64-bit one (SplitMix64, four words).
fn seed_bytes(seed: u64) -> [u8; 32] {
    let mut out = [0u8; 32];
    let mut z = seed;
    for chunk in out.chunks_mut(8) {
        z = z.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut x = z;
        x = (x ^ (x >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        x = (x ^ (x >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        chunk.copy_from_slice(&(x ^ (x >> 31)).to_le_bytes());
    }
    out
}

/// ECN bits as the inner IPv4 header carries them.
fn ecn_bits(ecn: Option<EcnCodepoint>) -> u8 {
    ecn.map_or(0, |e| e as u8)
}

/// The two directions of the path and their logged links.
struct Path {
    pipes: [Pipeline; 2],
    links: [Vec<usize>; 2],
    events: Vec<LinkEvent>,
}

const DIRECTIONS: [LinkDirection; 2] = [LinkDirection::Uplink, LinkDirection::Downlink];

/// Simulates the run `config`, writing its logs to `sink`. `progress` is told the simulated
/// time (ns) every 100 ms of it and stops the run by returning `false`. Errors: a flow whose
/// connection fails (as a real sender exiting fails its run), a log that cannot be written.
pub fn simulate(
    config: &SimConfig,
    sink: &mut dyn Sink,
    progress: &mut dyn FnMut(u64) -> bool,
) -> Result<SimOutcome, SimError> {
    let [(up, up_links), (down, down_links)] =
        DIRECTIONS.map(|d| config.path.pipeline(d, config.seed));
    let mut run = Loop {
        config,
        base: Instant::now(),
        flows: flows(config)?,
        path: Path {
            pipes: [up, down],
            links: [
                up_links.iter().map(|(i, _)| *i).collect(),
                down_links.iter().map(|(i, _)| *i).collect(),
            ],
            events: Vec::new(),
        },
        sink,
        out: SimOutcome::default(),
    };
    let hard_end = config.end_ns.saturating_add(config.drain_ns);
    let mut now = 0u64;
    let mut next_progress = 0u64;
    let mut spins = 0u32;
    loop {
        run.out.steps += 1;
        if now >= next_progress {
            if !progress(now) {
                return Err(SimError::Interrupted(now as f64 / 1e9));
            }
            next_progress = now + PROGRESS_EVERY_NS;
        }
        let sending = now < config.end_ns;
        // 1. Flows start and stop; 2. packets out of the path, through the hosts, to their
        // QUIC endpoints; 3.–5. timers, applications, transmissions.
        run.start_and_stop(now, sending)?;
        for (d, direction) in DIRECTIONS.into_iter().enumerate() {
            run.out_of_the_path(d, direction, now)?;
        }
        run.through_the_hosts(now)?;
        run.transmissions(now)?;
        // The next instant.
        let held = run.path.pipes.iter().map(Pipeline::held).sum::<usize>();
        if !sending && (held == 0 || now >= hard_end) {
            run.out.drained = held == 0;
            break;
        }
        let next = run.next_instant(sending, hard_end);
        if next <= now {
            // Work left at this instant (a packet pushed into a stage that passes it on at
            // once); a loop that makes no progress would spin here.
            spins += 1;
            if spins > 100_000 {
                now += 1_000;
                spins = 0;
            }
        } else {
            spins = 0;
            now = next;
        }
    }
    let mut out = run.out;
    out.end_ns = now;
    out.dropped = (run.path.pipes[0].dropped(), run.path.pipes[1].dropped());
    Ok(out)
}

/// The flows of `config`, not started yet: flow `i` (from 1) between the client
/// `10.0.0.1:40000+i` and the server, its QUIC's random choices drawn from its number.
fn flows(config: &SimConfig) -> Result<Vec<Flow>, SimError> {
    let mut flows = Vec::new();
    for (i, spec) in config.flows.iter().enumerate() {
        // One packet size for every flow; the flow-control windows out of the way.
        let settings = quic::Settings {
            max_udp_payload: config.max_udp_payload,
            l4s: spec.l4s,
            ..quic::Settings::default()
        };
        let id = u16::try_from(i + 1).map_err(|_| SimError::Flow {
            flow: u16::MAX,
            reason: "too many flows".into(),
        })?;
        let client = SocketAddr::from((CLIENT, 40_000 + id));
        let server = SocketAddr::from((SERVER, SERVER_PORT));
        // QUIC's own random choices (connection IDs, packet-number skips, greasing) follow the
        // flow's number, not the run's seed: another seed changes the path's draws alone.
        let flow_seed = QUIC_SEED ^ (u64::from(id) << 48);
        let host_seed = config.host_seed ^ (u64::from(id) << 48);
        flows.push(Flow {
            id,
            spec: spec.clone(),
            client: Side::new(flow_seed ^ 1, host_seed ^ 1, client, server, None),
            server: Side::new(
                flow_seed ^ 2,
                host_seed ^ 2,
                server,
                client,
                Some(quic::server_config(spec.cc.clone(), settings)?),
            ),
            client_config: quic::client_config(spec.cc.clone(), settings)?,
            started: false,
            stopped: false,
            stream: None,
            streams: Vec::new(),
        });
    }
    Ok(flows)
}

/// The event loop's state: the flows, the path, where logs go, what is counted. Each step of
/// an instant is a method.
struct Loop<'a> {
    config: &'a SimConfig<'a>,
    /// The instant of simulated time 0, for quinn-proto's `Instant`s.
    base: Instant,
    flows: Vec<Flow>,
    path: Path,
    sink: &'a mut dyn Sink,
    out: SimOutcome,
}

impl Loop<'_> {
    /// Simulated time `ns` as quinn-proto's instant.
    fn at(&self, ns: u64) -> Instant {
        self.base + Duration::from_nanos(ns)
    }

    /// Flows whose start has come start; flows whose stop has come (or all, once the run's
    /// sending ends) stop.
    fn start_and_stop(&mut self, now: u64, sending: bool) -> Result<(), SimError> {
        let at = self.at(now);
        for f in &mut self.flows {
            if !f.started && sending && now >= f.spec.start_ns {
                f.start(at)?;
            }
            if f.started && !f.stopped && (!sending || f.spec.stop_ns.is_some_and(|s| now >= s)) {
                f.stop();
            }
        }
        Ok(())
    }

    /// Packets out of the path in direction `d` (`direction`) by `now`: logged by the far
    /// tunnel endpoint (ingress), counted, and held by its host for their QUIC endpoint; the
    /// logged links' events to the sink.
    fn out_of_the_path(
        &mut self,
        d: usize,
        direction: LinkDirection,
        now: u64,
    ) -> Result<(), SimError> {
        self.path.pipes[d].advance(now);
        while let Some((t, mut pkt)) = self.path.pipes[d].pop() {
            let Some((id, uid, ecn, _)) = frame::decode(&pkt) else {
                continue;
            };
            // As the real tunnel (RFC 6040): a CE outer header around a Not-ECT packet is a
            // loss, never logged as received; around an ECN-capable one, the inner header is
            // marked CE.
            let Decapsulated::Forward(ecn) = ecn else {
                continue;
            };
            if ecn == Codepoint::Ce {
                tunnel::ecn::set_ce(&mut pkt[OVERHEAD..]);
            }
            let size = pkt.len() as u32;
            let Some(f) = self.flows.get_mut(usize::from(id).wrapping_sub(1)) else {
                continue;
            };
            let (log_dir, to_client) = log_direction(direction);
            self.sink.packet(
                log_dir,
                &Record {
                    t_ns: t,
                    uid,
                    size,
                    flow: id,
                    kind: Kind::Ingress,
                    ecn: Some(ecn),
                },
                &pkt[OVERHEAD..],
            )?;
            if d == 0 {
                self.out.delivered.0 += 1;
            } else {
                self.out.delivered.1 += 1;
            }
            if f.stopped || !f.started {
                continue;
            }
            let mut ecn = EcnCodepoint::from_bits(ecn.bits());
            if f.spec.l4s {
                ecn = quic::l4s_from_wire(ecn);
            }
            // The QUIC datagram, without copying: the packet's buffer past the headers.
            let mut quic = BytesMut::from(bytes::Bytes::from(pkt));
            quic.advance(frame::HEADERS);
            f.side(to_client).hold(self.config.host, now, ecn, quic);
        }
        log_links(&mut self.path, d, direction, self.sink)?;
        Ok(())
    }

    /// Packets the hosts have held long enough, to their QUIC endpoints (an endpoint's own
    /// answer — stateless reset, version negotiation — into the path).
    fn through_the_hosts(&mut self, now: u64) -> Result<(), SimError> {
        let at = self.at(now);
        for f in self.flows.iter_mut().filter(|f| f.started && !f.stopped) {
            for to_client in [false, true] {
                while let Some((_, ecn, quic)) =
                    f.side(to_client).inbox.pop_front_if(|p| p.0 <= now)
                {
                    if let Some(answer) = f.side(to_client).receive(at, ecn, quic) {
                        let mut w = Wire {
                            path: &mut self.path,
                            sink: &mut *self.sink,
                            out: &mut self.out,
                        };
                        w.send(f, !to_client, now, &answer, 0)?;
                    }
                }
            }
        }
        Ok(())
    }

    /// Each running flow's timers and applications, then every datagram its endpoints have to
    /// send, into the path.
    fn transmissions(&mut self, now: u64) -> Result<(), SimError> {
        let at = self.at(now);
        let max_udp_payload = usize::from(self.config.max_udp_payload);
        for f in self.flows.iter_mut().filter(|f| f.started && !f.stopped) {
            f.client.timers(at);
            f.server.timers(at);
            f.applications()?;
            for client in [true, false] {
                let mut buf = Vec::with_capacity(max_udp_payload);
                loop {
                    buf.clear();
                    let Some((_, conn)) = &mut f.side(client).conn else {
                        break;
                    };
                    let Some(t) = conn.poll_transmit(at, 1, &mut buf) else {
                        break;
                    };
                    let ecn = ecn_bits(if f.spec.l4s {
                        quic::l4s_on_wire(t.ecn)
                    } else {
                        t.ecn
                    });
                    let mut w = Wire {
                        path: &mut self.path,
                        sink: &mut *self.sink,
                        out: &mut self.out,
                    };
                    w.send(f, client, now, &buf[..t.size], ecn)?;
                }
                f.side(client).endpoint_events();
            }
        }
        Ok(())
    }

    /// The next instant anything happens: a stage's wake-up, a flow's start or stop, an
    /// endpoint's timer or a host's held packet, the end of sending (or `hard_end` after it).
    fn next_instant(&mut self, sending: bool, hard_end: u64) -> u64 {
        let base = self.base;
        let since = |i: Instant| i.saturating_duration_since(base).as_nanos() as u64;
        let mut next = self
            .path
            .pipes
            .iter()
            .filter_map(Pipeline::next_wakeup)
            .min();
        let mut consider = |t: Option<u64>| {
            if let Some(t) = t {
                next = Some(next.map_or(t, |n| n.min(t)));
            }
        };
        for f in self.flows.iter_mut() {
            if !f.started {
                consider(Some(f.spec.start_ns));
            } else if !f.stopped {
                consider(f.spec.stop_ns);
                consider(f.client.timeout().map(since));
                consider(f.server.timeout().map(since));
                consider(f.client.next_due());
                consider(f.server.next_due());
            }
        }
        consider(Some(if sending {
            self.config.end_ns
        } else {
            hard_end
        }));
        next.unwrap_or(hard_end)
    }
}

/// The tunnel log direction of packets travelling `direction`, and whether the client (the
/// sender) receives them.
fn log_direction(direction: LinkDirection) -> (Direction, bool) {
    match direction {
        LinkDirection::Uplink => (Direction::Datalink, false),
        LinkDirection::Downlink => (Direction::Acklink, true),
    }
}

/// Where a datagram goes: the path, the packet logs, the counts.
struct Wire<'w> {
    path: &'w mut Path,
    sink: &'w mut dyn Sink,
    out: &'w mut SimOutcome,
}

impl Wire<'_> {
    /// A datagram `quic` sent by flow `f`'s client (`client`) or server at `now` with ECN bits
    /// `ecn`: given the tunnel endpoint's next UID, logged (egress), counted and pushed into
    /// the path.
    fn send(
        &mut self,
        f: &mut Flow,
        client: bool,
        now: u64,
        quic: &[u8],
        ecn: u8,
    ) -> Result<(), SimError> {
        let id = f.id;
        let side = f.side(client);
        let uid = side.next_uid;
        side.next_uid += 1;
        let pkt = frame::encode(id, uid, client, ecn, quic);
        let (direction, d) = if client {
            (Direction::Datalink, 0)
        } else {
            (Direction::Acklink, 1)
        };
        self.sink.packet(
            direction,
            &Record {
                t_ns: now,
                uid,
                size: pkt.len() as u32,
                flow: id,
                kind: Kind::Egress,
                ecn: Some(Codepoint::from_bits(ecn)),
            },
            &pkt[OVERHEAD..],
        )?;
        if client {
            self.out.sent.0 += 1;
        } else {
            self.out.sent.1 += 1;
        }
        self.path.pipes[d].push(now, pkt);
        Ok(())
    }
}

/// The logged links' new events of direction `d`, to the sink.
fn log_links(
    path: &mut Path,
    d: usize,
    direction: LinkDirection,
    sink: &mut dyn Sink,
) -> io::Result<()> {
    for &stage in &path.links[d] {
        if let Some(AnyStage::Link(l)) = path.pipes[d].stage_mut(stage) {
            l.take_events(&mut path.events);
        }
        if !path.events.is_empty() {
            sink.link_events(direction, stage, &path.events)?;
            path.events.clear();
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::logs::MemorySink;
    use crate::quic::Controller;

    /// A directory with Pantheon's 12 Mbit/s trace (one 1500-byte opportunity per ms).
    struct Traces(std::path::PathBuf);
    impl Traces {
        fn new(tag: &str) -> Traces {
            let dir = std::env::temp_dir().join(format!("simtest-{tag}-{}", std::process::id()));
            std::fs::create_dir_all(&dir).unwrap();
            std::fs::write(dir.join("12mbps.trace"), "1\n").unwrap();
            Traces(dir)
        }
        fn path(&self, outside: &str, link_args: &str) -> EmulatedPath {
            let t = self.0.join("12mbps.trace").display().to_string();
            let text = format!("{outside} mm-link {t} {t} {link_args}");
            EmulatedPath::load(emucal::mm::parse_shells(&text).unwrap(), vec![]).unwrap()
        }
    }
    impl Drop for Traces {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    fn config(path: &EmulatedPath, controller: Controller, seed: u64, secs: u64) -> SimConfig<'_> {
        SimConfig {
            path,
            flows: vec![FlowSpec {
                cc: controller.factory(),
                start_ns: 0,
                stop_ns: None,
                l4s: false,
            }],
            seed,
            end_ns: secs * 1_000_000_000,
            drain_ns: 5_000_000_000,
            max_udp_payload: quic::MAX_UDP_PAYLOAD,
            host: HostLatency::MEASURED,
            host_seed: 1,
        }
    }

    fn run(c: &SimConfig) -> (SimOutcome, MemorySink) {
        let mut sink = MemorySink::default();
        let out = simulate(c, &mut sink, &mut |_| true).unwrap();
        (out, sink)
    }

    /// Uplink bytes out of the path during the run (the drain after it left out), per second,
    /// Mbit/s.
    fn goodput_mbps(sink: &MemorySink, secs: u64) -> f64 {
        let end = secs * 1_000_000_000;
        let bytes: u64 = sink
            .packets
            .iter()
            .filter(|(d, r)| *d == Direction::Datalink && r.kind == Kind::Ingress && r.t_ns < end)
            .map(|(_, r)| u64::from(r.size))
            .sum();
        bytes as f64 * 8.0 / secs as f64 / 1e6
    }

    #[test]
    fn each_controller_fills_a_constant_link() {
        let traces = Traces::new("fill");
        // A 100-packet DropTail uplink (2.5 BDPs): full, yet it drains after the run.
        let path = traces.path(
            "mm-delay 20",
            "--uplink-queue=droptail --uplink-queue-args=packets=100",
        );
        for c in [Controller::Cubic, Controller::NewReno, Controller::Bbr] {
            let (out, sink) = run(&config(&path, c, 1, 10));
            let mbps = goodput_mbps(&sink, 10);
            // 12 Mbit/s of 1500-byte packets, less the handshake and slow start.
            assert!(mbps > 10.5 && mbps <= 12.0, "{c:?}: {mbps:.2} Mbit/s");
            assert!(out.drained && out.delivered.1 > 0, "{c:?}: {out:?}");
            // Every packet out of the path went in, and sizes are the tunnel's.
            assert!(sink
                .packets
                .iter()
                .all(|(_, r)| r.size <= 1500 && r.size >= 64));
        }
    }

    /// The largest one-way delay of a datalink packet sent before `before_ns`, ns.
    fn max_owd_ns(sink: &MemorySink, before_ns: u64) -> u64 {
        let data = |k: Kind| {
            sink.packets
                .iter()
                .filter(move |(d, r)| *d == Direction::Datalink && r.kind == k)
                .map(|(_, r)| (r.uid, r.t_ns))
        };
        let sent: std::collections::HashMap<_, _> =
            data(Kind::Egress).filter(|&(_, t)| t < before_ns).collect();
        data(Kind::Ingress)
            .filter_map(|(uid, t)| Some(t - sent.get(&uid)?))
            .max()
            .unwrap_or(0)
    }

    /// Chromium's Cubic (issue 55) over an infinite queue: hybrid slow start ends the first
    /// doubling at a few BDPs where quinn's Cubic doubles on (it never loses here), and the
    /// window never passes Chromium's ceiling of 2 000 × 1 460 bytes (1.95 s of queue at
    /// 12 Mbit/s).
    #[test]
    fn chromium_cubic_leaves_slow_start_on_delay_and_stays_below_its_ceiling() {
        let traces = Traces::new("chromium");
        let path = traces.path("mm-delay 28", "");
        let secs = 25;
        let (_, chromium) = run(&config(&path, Controller::CubicChromium, 1, secs));
        let (_, quinn) = run(&config(&path, Controller::Cubic, 1, secs));
        let ceiling_ns = 2000 * 1460 * 8 * 1_000_000_000 / 12_000_000;
        let early_ns = 3_000_000_000;
        let (c_early, q_early) = (
            max_owd_ns(&chromium, early_ns),
            max_owd_ns(&quinn, early_ns),
        );
        eprintln!("max one-way delay of packets sent in the first 3 s: chromium {c_early} ns, quinn {q_early} ns");
        assert!(c_early < 250_000_000, "chromium: {c_early} ns");
        assert!(q_early > 3 * c_early, "quinn: {q_early} ns");
        let (c, q) = (
            max_owd_ns(&chromium, u64::MAX),
            max_owd_ns(&quinn, u64::MAX),
        );
        eprintln!("over {secs} s: chromium {c} ns, quinn {q} ns, ceiling {ceiling_ns} ns");
        assert!(c < ceiling_ns + 100_000_000, "chromium: {c} ns");
        assert!(q > ceiling_ns * 3 / 2, "quinn's Cubic: {q} ns");
        assert!(goodput_mbps(&chromium, secs) > 10.5);
    }

    #[test]
    fn one_way_delay_is_the_path_s() {
        // An idle path: the first datagram (the client's Initial, 1200 bytes + 64) crosses
        // 20 ms of delay and one 12 Mbit/s opportunity (≤ 1 ms).
        let traces = Traces::new("owd");
        let path = traces.path("mm-delay 20", "");
        let (_, sink) = run(&config(&path, Controller::Cubic, 1, 1));
        let sent = sink
            .packets
            .iter()
            .find(|(d, r)| *d == Direction::Datalink && r.kind == Kind::Egress)
            .unwrap()
            .1;
        let got = sink
            .packets
            .iter()
            .find(|(d, r)| {
                *d == Direction::Datalink && r.kind == Kind::Ingress && r.uid == sent.uid
            })
            .unwrap()
            .1;
        assert_eq!(sent.size, 1264);
        let owd = got.t_ns - sent.t_ns;
        assert!((20_000_000..=21_000_000).contains(&owd), "{owd} ns");
    }

    #[test]
    fn the_same_seed_gives_the_same_packets_another_changes_only_the_draws() {
        let traces = Traces::new("det");
        let lossy = traces.path(
            "mm-delay 10 mm-loss uplink 0.01",
            "--uplink-queue=droptail --uplink-queue-args=packets=30",
        );
        let (a, sa) = run(&config(&lossy, Controller::Cubic, 7, 3));
        let (b, sb) = run(&config(&lossy, Controller::Cubic, 7, 3));
        assert_eq!(a, b);
        assert!(sa == sb, "same seed, different packets");
        let (_, sc) = run(&config(&lossy, Controller::Cubic, 8, 3));
        assert!(sa != sc, "random loss drawn alike with two seeds");
        // Poisson delivery draws too.
        let poisson = traces.path("mm-delay 10", "--uplink-delivery=poisson");
        let (_, p1) = run(&config(&poisson, Controller::Bbr, 1, 2));
        let (_, p2) = run(&config(&poisson, Controller::Bbr, 2, 2));
        assert!(p1 != p2);
        // Nothing random on the path: the seed changes nothing.
        let fixed = traces.path("mm-delay 10", "");
        let (_, f1) = run(&config(&fixed, Controller::Cubic, 1, 2));
        let (_, f2) = run(&config(&fixed, Controller::Cubic, 2, 2));
        assert!(f1 == f2, "a seed changed a path without randomness");
        // The hosts' latency draws follow their own seed (the run's number): runs differ.
        let mut other_run = config(&fixed, Controller::Cubic, 1, 2);
        other_run.host_seed = 2;
        let (_, f3) = run(&other_run);
        assert!(f1 != f3, "another run drew the same host latencies");
    }

    #[test]
    fn host_latency_parses_and_prints() {
        for (text, h) in [
            ("ideal", HostLatency::NONE),
            ("measured", HostLatency::MEASURED),
            (
                "60+12.5",
                HostLatency {
                    min_ns: 60_000,
                    mean_extra_ns: 12_500,
                },
            ),
        ] {
            assert_eq!(text.parse::<HostLatency>().unwrap(), h);
            assert_eq!(h.to_string(), text);
        }
        assert_eq!("45".parse::<HostLatency>().unwrap().mean_extra_ns, 0);
        let e = "fast".parse::<HostLatency>().unwrap_err();
        assert!(e.contains("expected ideal, measured or MIN+MEAN"), "{e}");
        assert!("-3".parse::<HostLatency>().is_err());
    }

    #[test]
    fn host_latency_delays_replies_in_order() {
        let traces = Traces::new("host");
        let path = traces.path("mm-delay 10", "");
        // The turnaround at the server: an ACK's egress after the latest data ingress before it.
        let turnarounds = |host: HostLatency| -> Vec<u64> {
            let mut c = config(&path, Controller::Cubic, 1, 2);
            c.host = host;
            let (_, sink) = run(&c);
            let mut last_in = None;
            let mut out = Vec::new();
            for (d, r) in &sink.packets {
                match (d, r.kind) {
                    (Direction::Datalink, Kind::Ingress) => last_in = Some(r.t_ns),
                    (Direction::Acklink, Kind::Egress) => {
                        if let Some(t) = last_in {
                            out.push(r.t_ns - t);
                        }
                    }
                    _ => {}
                }
            }
            out.sort_unstable();
            out
        };
        let ideal = turnarounds(HostLatency::NONE);
        assert_eq!(ideal[ideal.len() / 2], 0, "ideal hosts reply at once");
        let fixed = turnarounds(HostLatency {
            min_ns: 50_000,
            mean_extra_ns: 0,
        });
        assert!(fixed.len() > 100 && fixed.iter().all(|&t| t >= 50_000));
        let measured = turnarounds(HostLatency::MEASURED);
        let median = measured[measured.len() / 2];
        // 45 µs + Exp(35 µs): median 45 + 35·ln 2 ≈ 69 µs.
        assert!((55_000..90_000).contains(&median), "median {median} ns");
        assert!(measured[0] >= 45_000);
    }

    #[test]
    fn flows_start_and_stop_when_told_and_a_stopped_flow_sends_nothing() {
        let traces = Traces::new("flows");
        let path = traces.path("mm-delay 10", "");
        let mut c = config(&path, Controller::Cubic, 1, 4);
        c.flows = vec![
            FlowSpec {
                cc: Controller::Cubic.factory(),
                start_ns: 0,
                stop_ns: Some(2_000_000_000),
                l4s: false,
            },
            FlowSpec {
                cc: Controller::Bbr.factory(),
                start_ns: 1_000_000_000,
                stop_ns: None,
                l4s: false,
            },
        ];
        let (_, sink) = run(&c);
        let sent = |flow: u16| -> Vec<u64> {
            sink.packets
                .iter()
                .filter(|(_, r)| r.flow == flow && r.kind == Kind::Egress)
                .map(|(_, r)| r.t_ns)
                .collect()
        };
        let (one, two) = (sent(1), sent(2));
        assert_eq!(one.first(), Some(&0));
        assert!(*one.last().unwrap() < 2_000_000_000);
        assert_eq!(two.first(), Some(&1_000_000_000));
        assert!(*two.last().unwrap() > 3_500_000_000);
    }
}
