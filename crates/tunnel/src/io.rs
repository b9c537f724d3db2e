//! The I/O shell around [`Endpoint`]: a UDP socket toward the peer, a TUN device named
//! `tunnel` inside the endpoint's own network namespace, and one forwarding thread that polls
//! both file descriptors, moving packets in batches (TUN offload, `UDP_SEGMENT`, `UDP_GRO`:
//! see `docs/performance.md`). Each log, and each pcapng capture ([`Capture`]), has its own
//! writer thread behind a ring of chunks ([`crate::ring`]). No protocol state lives here.

use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4, UdpSocket};
use std::os::fd::AsRawFd;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use netns::NetNs;

use crate::capture::{capture_path, interface_name, Capture};
use crate::ecn::Codepoint;
use crate::endpoint::{Counters, Endpoint, State};
use crate::log::{Direction, Header, Kind, LogFormat, LogWriter, Role};
use crate::ring::LogRing;
use crate::tun::{TunWriter, MAX_GSO_SEGMENTS, RAW_READ};
use crate::udp;
use crate::wire;

/// Name of the TUN device inside an endpoint's namespace, as pantheon-tunnel.
pub const TUN_NAME: &str = "tunnel";

/// Errors of starting an endpoint.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Namespace or `ip` configuration failed.
    #[error(transparent)]
    NetNs(#[from] netns::Error),
    /// A socket, TUN device or log file could not be set up.
    #[error("{what}: {source}")]
    Io {
        /// What was being done.
        what: String,
        /// The OS error.
        source: std::io::Error,
    },
}

fn io_err(what: impl Into<String>) -> impl FnOnce(std::io::Error) -> Error {
    let what = what.into();
    move |source| Error::Io { what, source }
}

/// Everything one endpoint needs to start.
#[derive(Debug, Clone)]
pub struct EndpointConfig {
    /// Server (waits for the handshake) or client (opens it).
    pub role: Role,
    /// Flow id, 1-based; written into every log record.
    pub flow: u16,
    /// True on the scheme's sender side: its egress log is the datalink, its ingress the acklink.
    pub sender_side: bool,
    /// Where to log packets received from the peer (`None`: not logged).
    pub ingress_log: Option<PathBuf>,
    /// Where to log packets sent to the peer (`None`: not logged).
    pub egress_log: Option<PathBuf>,
    /// Binary (ours) or Pantheon's text logs.
    pub log_format: LogFormat,
    /// Snap length of a pcapng capture of the inner packets beside each log (bytes kept of
    /// each packet, 1 ..= [`crate::capture::MAX_SNAPLEN`]; [`capture_path`] names the file);
    /// `None`: no capture.
    pub capture_snaplen: Option<u32>,
    /// This endpoint's address on its TUN device (pantheon-tunnel's "private" address).
    pub local_private: Ipv4Addr,
    /// The peer's TUN address; the namespace's default route points at it.
    pub peer_private: Ipv4Addr,
    /// Path MTU; the TUN MTU is `path_mtu − 36`.
    pub path_mtu: u16,
    /// Client: the server's UDP address. Server: the address to bind (port 0 = any free port).
    pub udp_addr: SocketAddrV4,
    /// Bind the UDP socket to this network device (`SO_BINDTODEVICE`), as pantheon-tunnel's
    /// `--interface`.
    pub bind_device: Option<String>,
    /// End the endpoint when nothing has arrived from the connected peer for this long, and
    /// send KEEPALIVEs while idle (see [`crate::endpoint`]); `None`: wait forever, as
    /// pantheon-tunnel.
    pub peer_timeout: Option<Duration>,
}

impl EndpointConfig {
    /// The directions of this endpoint's (ingress, egress) packets: on the scheme's sender
    /// side it sends the datalink and receives the acklink; on the receiver's, the reverse.
    fn directions(&self) -> (Direction, Direction) {
        if self.sender_side {
            (Direction::Acklink, Direction::Datalink)
        } else {
            (Direction::Datalink, Direction::Acklink)
        }
    }
}

/// Shared between the endpoint thread and its owner.
#[derive(Debug)]
pub struct Control {
    stop: AtomicBool,
    admit: AtomicBool,
    connected: AtomicBool,
    foreign: AtomicU64,
    log_records_dropped: AtomicU64,
    tun_write_errors: AtomicU64,
    peer_closed: AtomicBool,
    error: Mutex<Option<String>>,
    log_error: Mutex<Option<String>>,
}

impl Control {
    /// Asks the endpoint thread to flush its logs and exit.
    pub fn stop(&self) {
        self.stop.store(true, Ordering::SeqCst);
    }
    /// Stops tunnelling new packets from the TUN device (they are discarded, not logged), so
    /// that packets already in the path can drain before the run's logs are closed.
    pub fn stop_admitting(&self) {
        self.admit.store(false, Ordering::SeqCst);
    }
    /// True once the handshake has completed.
    pub fn is_connected(&self) -> bool {
        self.connected.load(Ordering::SeqCst)
    }
    /// Datagrams from anyone but the peer, and datagrams before the handshake from anyone but
    /// a SYN sender: counted and dropped.
    pub fn foreign_datagrams(&self) -> u64 {
        self.foreign.load(Ordering::Relaxed)
    }
    /// Log records lost because the disk fell behind by a whole ring (see [`crate::ring`]);
    /// known once the endpoint has stopped.
    pub fn log_records_dropped(&self) -> u64 {
        self.log_records_dropped.load(Ordering::SeqCst)
    }
    /// Batches of packets received from the peer that the TUN device refused, wholly or in
    /// part (the packets are lost; the kernel's reason is not kept).
    pub fn tun_write_errors(&self) -> u64 {
        self.tun_write_errors.load(Ordering::Relaxed)
    }
    /// What a user should hear about once the endpoint has stopped: log records dropped and
    /// TUN write errors, one sentence each; empty when all went well.
    pub fn warnings(&self) -> Vec<String> {
        let mut w = Vec::new();
        let dropped = self.log_records_dropped();
        if dropped > 0 {
            w.push(format!(
                "{dropped} packet-log records were dropped: the disk fell behind the log ring"
            ));
        }
        let refused = self.tun_write_errors();
        if refused > 0 {
            w.push(format!(
                "the TUN device refused {refused} batches of packets received from the peer"
            ));
        }
        w
    }
    /// True when the endpoint ended because the peer closed the tunnel (FIN): an orderly end,
    /// though [`Control::error`] says so too.
    pub fn peer_closed(&self) -> bool {
        self.peer_closed.load(Ordering::SeqCst)
    }
    /// The error that ended the endpoint, if any.
    pub fn error(&self) -> Option<String> {
        self.error.lock().expect("poisoned").clone()
    }
    /// Why writing the packet logs failed (a full disk, an I/O error), if it did: the logs
    /// are incomplete and the run's numbers cannot be believed. Known once the endpoint has
    /// stopped.
    pub fn log_error(&self) -> Option<String> {
        self.log_error.lock().expect("poisoned").clone()
    }
}

/// A running endpoint.
#[derive(Debug)]
pub struct RunningEndpoint {
    /// Control handle.
    pub control: Arc<Control>,
    /// The UDP address the endpoint's socket is bound to (a server's port is chosen here).
    pub local_udp: SocketAddr,
    thread: Option<JoinHandle<Counters>>,
}

impl RunningEndpoint {
    /// Stops the endpoint, waits for its thread and returns its counters.
    pub fn finish(mut self) -> Counters {
        self.control.stop();
        self.thread
            .take()
            .and_then(|t| t.join().ok())
            .unwrap_or_default()
    }
}

impl Drop for RunningEndpoint {
    fn drop(&mut self) {
        self.control.stop();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// CLOCK_REALTIME now, ns since the Unix epoch.
pub fn realtime_ns() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos() as i64)
        .unwrap_or(0)
}

/// Starts an endpoint: binds its UDP socket inside `socket_ns` (the caller's namespace if
/// `None`), creates the TUN device `tunnel` (MTU `path_mtu − 36`, point-to-point to the peer's
/// private address, default route via it) inside `tun_ns`, opens both logs, and spawns the
/// forwarding thread. Returns once everything is set up, so errors come back here.
pub fn start(
    cfg: EndpointConfig,
    socket_ns: Option<&NetNs>,
    tun_ns: &NetNs,
) -> Result<RunningEndpoint, Error> {
    let socket = bind_socket(&cfg, socket_ns)?;
    let local_udp = socket.local_addr().map_err(io_err("socket address"))?;
    let mtu = wire::inner_mtu(cfg.path_mtu);
    let tun = create_tun(&cfg, tun_ns, mtu)?;
    let base_realtime_ns = realtime_ns();
    let base = Instant::now();
    let (ingress, egress) = open_logs(&cfg, base_realtime_ns)?;
    let (ingress_capture, egress_capture) = open_captures(&cfg, base_realtime_ns)?;

    let control = Arc::new(Control {
        stop: AtomicBool::new(false),
        admit: AtomicBool::new(true),
        connected: AtomicBool::new(false),
        foreign: AtomicU64::new(0),
        log_records_dropped: AtomicU64::new(0),
        tun_write_errors: AtomicU64::new(0),
        peer_closed: AtomicBool::new(false),
        error: Mutex::new(None),
        log_error: Mutex::new(None),
    });
    let peer = match cfg.role {
        Role::Client => Some(cfg.udp_addr),
        Role::Server => None,
    };
    let stride = wire::UID_LEN + usize::from(mtu);
    let mut endpoint = Endpoint::new(cfg.role, cfg.flow, 0);
    if let Some(t) = cfg.peer_timeout {
        endpoint = endpoint.with_peer_timeout(t.as_nanos() as u64);
    }
    let relay = Relay {
        endpoint,
        socket,
        tun,
        peer,
        base,
        ingress,
        egress,
        ingress_capture,
        egress_capture,
        control: control.clone(),
        egress_buf: vec![0; SEGMENTS * stride],
        stride,
        sizes: [0; SEGMENTS],
        datagram_lens: [0; SEGMENTS],
        outer_ecn: [0; SEGMENTS],
        tun_read: vec![0; RAW_READ],
        rx_buf: vec![0; RX_LEN],
        tun_batch: TunWriter::new(),
        gso: true,
    };
    let thread = std::thread::Builder::new()
        .name(format!("tunnel-{:?}-{}", cfg.role, cfg.flow).to_lowercase())
        .spawn(move || relay.run())
        .map_err(io_err("spawn tunnel thread"))?;
    Ok(RunningEndpoint {
        control,
        local_udp,
        thread: Some(thread),
    })
}

/// The tunnel's UDP socket, bound (in `socket_ns` if given) to the server's address or, for a
/// client, any port; bound to `cfg.bind_device` if given; 8 MiB buffers, UDP GRO and
/// `IP_RECVTOS` on.
fn bind_socket(cfg: &EndpointConfig, socket_ns: Option<&NetNs>) -> Result<UdpSocket, Error> {
    let bind = || -> std::io::Result<UdpSocket> {
        let bind_addr = match cfg.role {
            Role::Server => cfg.udp_addr,
            Role::Client => SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, 0),
        };
        let s = UdpSocket::bind(bind_addr)?;
        if let Some(dev) = &cfg.bind_device {
            bind_to_device(&s, dev)?;
        }
        // Blocking sends (bounded by a timeout) so that a full socket buffer delays packets
        // instead of dropping them inside the tunnel; reads use MSG_DONTWAIT.
        s.set_write_timeout(Some(Duration::from_millis(100)))?;
        Ok(s)
    };
    let socket = match socket_ns {
        Some(ns) => ns.run_in(bind)?,
        None => bind(),
    }
    .map_err(io_err("bind the tunnel's UDP socket"))?;
    set_buffer(&socket, libc::SO_RCVBUF, 8 << 20);
    set_buffer(&socket, libc::SO_SNDBUF, 8 << 20);
    udp::enable_gro(socket.as_raw_fd());
    // The outer header's ECN field, for RFC 6040's decapsulation.
    udp::enable_recv_tos(socket.as_raw_fd());
    Ok(socket)
}

/// The TUN device `TUN_NAME` in `tun_ns` (MTU `mtu`, offload on, this side's private address
/// peered with the other's), up, the namespace's default route through it, non-blocking.
fn create_tun(cfg: &EndpointConfig, tun_ns: &NetNs, mtu: u16) -> Result<tun_rs::SyncDevice, Error> {
    let tun = tun_ns
        .run_in(|| {
            tun_rs::DeviceBuilder::new()
                .name(TUN_NAME)
                .mtu(mtu)
                .ipv4(cfg.local_private, 32u8, Some(cfg.peer_private))
                .offload(true)
                .build_sync()
        })?
        .map_err(io_err(format!("create TUN device in {}", tun_ns.name())))?;
    tun_ns.ip(&["link", "set", "dev", TUN_NAME, "up", "txqueuelen", "10000"])?;
    tun_ns.ip(&[
        "route",
        "replace",
        "default",
        "via",
        &cfg.peer_private.to_string(),
        "dev",
        TUN_NAME,
    ])?;
    tun.set_nonblocking(true)
        .map_err(io_err("set TUN non-blocking"))?;
    Ok(tun)
}

/// The ingress and egress packet logs `cfg` asks for (each written by a thread of its own),
/// their headers naming this endpoint, its direction and the clock's base `base_realtime_ns`.
fn open_logs(
    cfg: &EndpointConfig,
    base_realtime_ns: i64,
) -> Result<(Option<LogRing>, Option<LogRing>), Error> {
    let (ingress_dir, egress_dir) = cfg.directions();
    let header = |kind, direction| Header {
        role: cfg.role,
        kind,
        flow: cfg.flow,
        direction,
        base_realtime_ns,
        clock_offset_ns: None,
        clock_drift_ppb: 0,
    };
    let open = |path: &Option<PathBuf>, kind, direction| {
        path.as_ref()
            .map(|p| {
                LogWriter::create(p, &header(kind, direction), &cfg.log_format)
                    .and_then(|w| LogRing::spawn(w, format!("tunnel-log-{}", cfg.flow)))
                    .map_err(io_err(format!("create {}", p.display())))
            })
            .transpose()
    };
    let ingress = open(&cfg.ingress_log, Kind::Ingress, ingress_dir)?;
    let egress = open(&cfg.egress_log, Kind::Egress, egress_dir)?;

    Ok((ingress, egress))
}

/// The ingress and egress captures `cfg` asks for, beside its logs ([`capture_path`]).
fn open_captures(
    cfg: &EndpointConfig,
    base_realtime_ns: i64,
) -> Result<(Option<Capture>, Option<Capture>), Error> {
    let Some(snaplen) = cfg.capture_snaplen else {
        return Ok((None, None));
    };
    let (ingress_dir, egress_dir) = cfg.directions();
    let open = |log: &Option<PathBuf>, direction: Direction, kind: Kind| {
        log.as_ref()
            .map(|log| {
                let path = capture_path(log);
                let interface = interface_name(direction.as_str(), kind.as_str(), cfg.flow);
                let inbound = kind == Kind::Ingress;
                Capture::create(&path, &interface, snaplen, base_realtime_ns, inbound)
                    .map_err(io_err(format!("create {}", path.display())))
            })
            .transpose()
    };
    Ok((
        open(&cfg.ingress_log, ingress_dir, Kind::Ingress)?,
        open(&cfg.egress_log, egress_dir, Kind::Egress)?,
    ))
}

fn bind_to_device(socket: &UdpSocket, device: &str) -> std::io::Result<()> {
    // SAFETY: setsockopt with a byte string and its length, on a socket we own.
    let rc = unsafe {
        libc::setsockopt(
            socket.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_BINDTODEVICE,
            device.as_ptr() as *const libc::c_void,
            device.len() as libc::socklen_t,
        )
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

fn set_buffer(socket: &UdpSocket, opt: i32, bytes: i32) {
    // SAFETY: setsockopt with a valid int option on a socket we own; failure is harmless
    // (the kernel clamps to rmem_max/wmem_max; SO_*BUFFORCE would need privileges we have).
    unsafe {
        let force = if opt == libc::SO_RCVBUF {
            libc::SO_RCVBUFFORCE
        } else {
            libc::SO_SNDBUFFORCE
        };
        let v = &bytes as *const i32 as *const libc::c_void;
        let len = std::mem::size_of::<i32>() as libc::socklen_t;
        if libc::setsockopt(socket.as_raw_fd(), libc::SOL_SOCKET, force, v, len) != 0 {
            libc::setsockopt(socket.as_raw_fd(), libc::SOL_SOCKET, opt, v, len);
        }
    }
}

/// Egress slots: packets read from the TUN device before they are sent.
const SEGMENTS: usize = 4 * MAX_GSO_SEGMENTS;
/// Reads per readiness event on either file descriptor before polling again.
const READS_PER_WAKE: usize = 64;
/// Largest UDP read: a coalesced batch of datagrams (UDP_GRO) or one datagram.
const RX_LEN: usize = 65_536;

struct Relay {
    endpoint: Endpoint,
    socket: UdpSocket,
    tun: tun_rs::SyncDevice,
    peer: Option<SocketAddrV4>,
    base: Instant,
    ingress: Option<LogRing>,
    egress: Option<LogRing>,
    ingress_capture: Option<Capture>,
    egress_capture: Option<Capture>,
    control: Arc<Control>,
    /// One slot of `stride` bytes per TUN segment: 8-byte UID headroom + the inner MTU, so
    /// that full-size datagrams lie end to end and leave in one segmented send.
    egress_buf: Vec<u8>,
    stride: usize,
    sizes: [usize; SEGMENTS],
    datagram_lens: [usize; SEGMENTS],
    /// The ECN bits each datagram's outer header carries (RFC 6040: the inner packet's).
    outer_ecn: [u8; SEGMENTS],
    /// The raw TUN read: virtio-net header + up to 64 KiB GSO packet.
    tun_read: Vec<u8>,
    /// Received datagrams (possibly several, coalesced by UDP_GRO).
    rx_buf: Vec<u8>,
    /// Inner packets waiting to be written to the TUN device.
    tun_batch: TunWriter,
    /// False once a segmented send failed (e.g. a device without checksum offload): datagrams
    /// then go one by one.
    gso: bool,
}

impl Relay {
    fn now(&self) -> u64 {
        self.base.elapsed().as_nanos() as u64
    }

    fn fail(&self, msg: String) {
        *self.control.error.lock().expect("poisoned") = Some(msg);
    }

    fn run(mut self) -> Counters {
        let mut fds = [
            libc::pollfd {
                fd: self.socket.as_raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            },
            libc::pollfd {
                fd: self.tun.as_raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            },
        ];
        while !self.control.stop.load(Ordering::Relaxed) {
            self.send_control();
            if let Some(reason) = self.ended() {
                if self.endpoint.state() == State::PeerClosed {
                    self.control.peer_closed.store(true, Ordering::SeqCst);
                }
                self.fail(reason);
                break;
            }
            // Wake at least every 20 ms to notice `stop`, sooner for a due SYN.
            let mut timeout_ms = 20i32;
            if let Some(at) = self.endpoint.poll_timeout() {
                let left = at.saturating_sub(self.now()).div_ceil(1_000_000);
                timeout_ms = timeout_ms.min(left as i32);
            }
            // SAFETY: valid pollfd array.
            let rc = unsafe { libc::poll(fds.as_mut_ptr(), 2, timeout_ms) };
            if rc < 0 {
                let e = std::io::Error::last_os_error();
                if e.kind() == std::io::ErrorKind::Interrupted {
                    continue;
                }
                self.fail(format!("poll: {e}"));
                break;
            }
            if fds[0].revents != 0 {
                self.receive_from_peer();
            }
            if fds[1].revents != 0 {
                self.read_tun();
            }
            self.log_records();
        }
        self.endpoint.close();
        self.send_control();
        self.log_records();
        let mut dropped = 0;
        let logs = [self.ingress.take(), self.egress.take()]
            .into_iter()
            .flatten()
            .map(|ring| ("log", ring.finish()));
        let captures = [self.ingress_capture.take(), self.egress_capture.take()]
            .into_iter()
            .flatten()
            .map(|capture| ("capture", capture.finish()));
        for (what, finished) in logs.chain(captures) {
            match finished {
                Ok(n) => dropped += n,
                Err(e) => {
                    let why = format!("write packet {what}: {e}");
                    *self.control.log_error.lock().expect("poisoned") = Some(why.clone());
                    self.fail(why);
                }
            }
        }
        self.control
            .log_records_dropped
            .store(dropped, Ordering::SeqCst);
        self.endpoint.counters()
    }

    /// Why the endpoint must end on its own, if it must.
    fn ended(&self) -> Option<String> {
        let peer = || self.peer.map_or("?".into(), |p| p.to_string());
        match self.endpoint.state() {
            State::Failed => Some(format!(
                "failed to connect to tunnel server after {} tries",
                crate::endpoint::SYN_ATTEMPTS
            )),
            State::PeerClosed => Some(format!("the tunnel peer at {} closed the tunnel", peer())),
            State::PeerSilent => Some(format!(
                "nothing arrived from the tunnel peer at {} for {:.1} s: it vanished \
                 (crashed, killed, or its path is down)",
                peer(),
                self.endpoint.peer_timeout().unwrap_or(0) as f64 / 1e9
            )),
            _ => None,
        }
    }

    fn send_control(&mut self) {
        let now = self.now();
        while let Some(d) = self.endpoint.poll_transmit(now) {
            if let Some(peer) = self.peer {
                let _ = self.socket.send_to(&d, peer);
            }
        }
        self.control
            .connected
            .store(self.endpoint.is_connected(), Ordering::Relaxed);
    }

    /// UDP → TUN: reads datagrams (coalesced or not), strips the UIDs, logs, and writes the
    /// inner packets to the TUN device in batches that GRO coalesces.
    fn receive_from_peer(&mut self) {
        let fd = self.socket.as_raw_fd();
        for _ in 0..READS_PER_WAKE {
            let udp::Received {
                len: n,
                from,
                segment,
                tos,
            } = match udp::recv_coalesced(fd, &mut self.rx_buf) {
                Ok(x) => x,
                Err(_) => break,
            };
            let first = &self.rx_buf[..n.min(segment.map_or(n, usize::from))];
            match self.peer {
                // The server adopts whoever sends the first SYN (works behind NAT).
                None if wire::parse(first) == Ok(wire::Datagram::Syn) => self.peer = Some(from),
                Some(p) if p == from => {}
                _ => {
                    self.control.foreign.fetch_add(1, Ordering::Relaxed);
                    continue;
                }
            }
            let now = self.now();
            let outer = Codepoint::from_bits(tos);
            let step = segment.map_or(n, usize::from).max(1);
            for datagram in self.rx_buf[..n].chunks_mut(step) {
                let uid = match self.ingress_capture {
                    Some(_) => wire::uid(datagram),
                    None => None,
                };
                if let Some(packet) = self.endpoint.handle_datagram(now, datagram, outer) {
                    if let (Some(c), Some(uid)) = (&mut self.ingress_capture, uid) {
                        c.packet(now, packet, uid);
                    }
                    if self.tun_batch.push(packet, &self.tun).is_err() {
                        self.control
                            .tun_write_errors
                            .fetch_add(1, Ordering::Relaxed);
                    }
                }
            }
            self.send_control();
        }
        if self.tun_batch.flush(&self.tun).is_err() {
            self.control
                .tun_write_errors
                .fetch_add(1, Ordering::Relaxed);
        }
    }

    /// TUN → UDP: reads what the TUN device has (a GSO packet is split into its segments, each
    /// written after 8 bytes of UID headroom), tags and logs it, then sends it with as few
    /// segmented sends as possible.
    fn read_tun(&mut self) {
        let stride = self.stride;
        for _ in 0..READS_PER_WAKE {
            // Keep reading until the device is empty or the slots might not hold a whole
            // GSO packet; then send everything read.
            let mut used = 0;
            let mut empty = false;
            while used + MAX_GSO_SEGMENTS <= SEGMENTS {
                let read = {
                    let mut slots = self.egress_buf[used * stride..].chunks_mut(stride);
                    let mut bufs: [&mut [u8]; MAX_GSO_SEGMENTS] =
                        std::array::from_fn(|_| slots.next().expect("free slots"));
                    let sizes = &mut self.sizes[used..used + MAX_GSO_SEGMENTS];
                    self.tun
                        .recv_multiple(&mut self.tun_read, &mut bufs, sizes, wire::UID_LEN)
                };
                let n = match read {
                    Ok(n) => n,
                    // Empty, or a packet tun-rs could not split: poll again.
                    Err(_) => {
                        empty = true;
                        break;
                    }
                };
                if !self.control.admit.load(Ordering::Relaxed) {
                    continue;
                }
                let now = self.now();
                for i in used..used + n {
                    let slot = &mut self.egress_buf[i * stride..(i + 1) * stride];
                    match self.endpoint.encapsulate(now, slot, self.sizes[i]) {
                        Some((len, ecn)) => {
                            self.datagram_lens[i] = len;
                            self.outer_ecn[i] = ecn.bits();
                            if let Some(c) = &mut self.egress_capture {
                                // The UID encapsulate just wrote.
                                let uid = wire::uid(slot).unwrap_or(u64::MAX);
                                c.packet(now, &slot[wire::UID_LEN..len], uid);
                            }
                        }
                        None => return, // not connected yet: the endpoint counted the drops
                    }
                }
                used += n;
            }
            if let Some(peer) = self.peer {
                self.send_datagrams(used, peer);
            }
            if empty {
                return;
            }
        }
    }

    /// Sends datagrams `0..n` of the egress buffer, slot `i` holding datagram `i`. Runs of
    /// equal-length datagrams (the last of a run may be shorter) with the same outer ECN field
    /// leave in one segmented send: full-size ones already lie end to end; shorter ones (ACKs)
    /// are first moved together.
    fn send_datagrams(&mut self, n: usize, peer: SocketAddrV4) {
        let stride = self.stride;
        let fd = self.socket.as_raw_fd();
        let mut i = 0;
        while i < n {
            let size = self.datagram_lens[i];
            let tos = self.outer_ecn[i];
            let start = i * stride;
            let mut end = start + size;
            let mut j = i + 1;
            while self.gso
                && j < n
                && j - i < udp::MAX_SEGMENTS
                && end - start + size <= udp::MAX_SEND_BYTES
                && self.datagram_lens[j] <= size
                && self.outer_ecn[j] == tos
            {
                let len = self.datagram_lens[j];
                if j * stride != end {
                    self.egress_buf
                        .copy_within(j * stride..j * stride + len, end);
                }
                end += len;
                j += 1;
                if len < size {
                    break;
                }
            }
            let segment = if j - i > 1 { size as u16 } else { 0 };
            if udp::send_segments(fd, &self.egress_buf[start..end], segment, tos, peer).is_err()
                && segment != 0
            {
                // Resend this run one datagram at a time, and stop segmenting.
                self.gso = false;
                let mut at = start;
                for k in i..j {
                    let len = self.datagram_lens[k];
                    let _ = udp::send_segments(fd, &self.egress_buf[at..at + len], 0, tos, peer);
                    at += len;
                }
            }
            i = j;
        }
    }

    fn log_records(&mut self) {
        for r in self.endpoint.drain_log() {
            let ring = match r.kind {
                Kind::Ingress => &mut self.ingress,
                Kind::Egress => &mut self.egress,
            };
            if let Some(ring) = ring {
                ring.push(r);
            }
        }
    }
}

/// Sleeps in small steps until `cond` holds or `timeout` passes; returns whether it held.
pub fn wait_until(timeout: Duration, mut cond: impl FnMut() -> bool) -> bool {
    let end = Instant::now() + timeout;
    while Instant::now() < end {
        if cond() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    cond()
}
