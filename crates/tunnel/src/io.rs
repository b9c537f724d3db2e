//! The I/O shell around [`Endpoint`]: a UDP socket toward the peer, a TUN device named
//! `tunnel` inside the endpoint's own network namespace, two log files, and one thread that
//! polls both file descriptors. No protocol state lives here.

use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4, UdpSocket};
use std::os::fd::AsRawFd;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use netns::NetNs;

use crate::endpoint::{Counters, Endpoint, State};
use crate::log::{Direction, Header, Kind, LogFormat, LogWriter, Role};
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
}

/// Shared between the endpoint thread and its owner.
#[derive(Debug)]
pub struct Control {
    stop: AtomicBool,
    admit: AtomicBool,
    connected: AtomicBool,
    foreign: AtomicU64,
    error: Mutex<Option<String>>,
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
    /// The error that ended the endpoint, if any.
    pub fn error(&self) -> Option<String> {
        self.error.lock().expect("poisoned").clone()
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
    let bind = || -> std::io::Result<UdpSocket> {
        let bind_addr = match cfg.role {
            Role::Server => cfg.udp_addr,
            Role::Client => SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, 0),
        };
        let s = UdpSocket::bind(bind_addr)?;
        if let Some(dev) = &cfg.bind_device {
            bind_to_device(&s, dev)?;
        }
        s.set_nonblocking(true)?;
        Ok(s)
    };
    let socket = match socket_ns {
        Some(ns) => ns.run_in(bind)?,
        None => bind(),
    }
    .map_err(io_err("bind the tunnel's UDP socket"))?;
    let local_udp = socket.local_addr().map_err(io_err("socket address"))?;
    set_buffer(&socket, libc::SO_RCVBUF, 8 << 20);
    set_buffer(&socket, libc::SO_SNDBUF, 8 << 20);

    let mtu = wire::inner_mtu(cfg.path_mtu);
    let tun = tun_ns
        .run_in(|| {
            tun_rs::DeviceBuilder::new()
                .name(TUN_NAME)
                .mtu(mtu)
                .ipv4(cfg.local_private, 32u8, Some(cfg.peer_private))
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

    let (ingress_dir, egress_dir) = if cfg.sender_side {
        (Direction::Acklink, Direction::Datalink)
    } else {
        (Direction::Datalink, Direction::Acklink)
    };
    let base_realtime_ns = realtime_ns();
    let base = Instant::now();
    let header = |kind, direction| Header {
        role: cfg.role,
        kind,
        flow: cfg.flow,
        direction,
        base_realtime_ns,
        clock_offset_ns: None,
    };
    let open = |path: &Option<PathBuf>, kind, direction| {
        path.as_ref()
            .map(|p| {
                LogWriter::create(p, &header(kind, direction), &cfg.log_format)
                    .map_err(io_err(format!("create {}", p.display())))
            })
            .transpose()
    };
    let ingress = open(&cfg.ingress_log, Kind::Ingress, ingress_dir)?;
    let egress = open(&cfg.egress_log, Kind::Egress, egress_dir)?;

    let control = Arc::new(Control {
        stop: AtomicBool::new(false),
        admit: AtomicBool::new(true),
        connected: AtomicBool::new(false),
        foreign: AtomicU64::new(0),
        error: Mutex::new(None),
    });
    let peer = match cfg.role {
        Role::Client => Some(SocketAddr::V4(cfg.udp_addr)),
        Role::Server => None,
    };
    let relay = Relay {
        endpoint: Endpoint::new(cfg.role, cfg.flow, 0),
        socket,
        tun,
        peer,
        base,
        ingress,
        egress,
        control: control.clone(),
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

/// Largest datagram we read: 64 KiB.
const BUF_LEN: usize = 65536;
/// Bound on packets handled per readiness event before polling again.
const BATCH: usize = 256;

struct Relay {
    endpoint: Endpoint,
    socket: UdpSocket,
    tun: tun_rs::SyncDevice,
    peer: Option<SocketAddr>,
    base: Instant,
    ingress: Option<LogWriter>,
    egress: Option<LogWriter>,
    control: Arc<Control>,
}

impl Relay {
    fn now(&self) -> u64 {
        self.base.elapsed().as_nanos() as u64
    }

    fn fail(&self, msg: String) {
        *self.control.error.lock().expect("poisoned") = Some(msg);
    }

    fn run(mut self) -> Counters {
        let mut buf = vec![0u8; BUF_LEN];
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
            if self.endpoint.state() == State::Failed {
                self.fail(format!(
                    "failed to connect to tunnel server after {} tries",
                    crate::endpoint::SYN_ATTEMPTS
                ));
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
                self.from_peer(&mut buf);
            }
            if fds[1].revents != 0 {
                self.from_tun(&mut buf);
            }
            if let Err(e) = self.write_logs() {
                self.fail(format!("write packet log: {e}"));
                break;
            }
        }
        let _ = self.write_logs();
        self.flush_logs();
        self.endpoint.counters()
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

    fn from_peer(&mut self, buf: &mut [u8]) {
        for _ in 0..BATCH {
            let (n, from) = match self.socket.recv_from(buf) {
                Ok(x) => x,
                Err(_) => return,
            };
            match self.peer {
                // The server adopts whoever sends the first SYN (works behind NAT).
                None if wire::parse(&buf[..n]) == Ok(wire::Datagram::Syn) => self.peer = Some(from),
                Some(p) if p == from => {}
                _ => {
                    self.control.foreign.fetch_add(1, Ordering::Relaxed);
                    continue;
                }
            }
            let now = self.now();
            if let Some(packet) = self.endpoint.handle_datagram(now, &buf[..n]) {
                let _ = self.tun.send(packet);
            }
            self.send_control();
        }
    }

    fn from_tun(&mut self, buf: &mut [u8]) {
        for _ in 0..BATCH {
            let n = match self.tun.recv(&mut buf[wire::UID_LEN..]) {
                Ok(n) => n,
                Err(_) => return,
            };
            if !self.control.admit.load(Ordering::Relaxed) {
                continue;
            }
            let now = self.now();
            if let (Some(len), Some(peer)) = (self.endpoint.encapsulate(now, buf, n), self.peer) {
                let _ = self.socket.send_to(&buf[..len], peer);
            }
        }
    }

    fn write_logs(&mut self) -> std::io::Result<()> {
        for r in self.endpoint.drain_log() {
            let log = match r.kind {
                Kind::Ingress => &mut self.ingress,
                Kind::Egress => &mut self.egress,
            };
            if let Some(log) = log {
                log.push(&r)?;
            }
        }
        Ok(())
    }

    fn flush_logs(&mut self) {
        for log in [&mut self.ingress, &mut self.egress].into_iter().flatten() {
            let _ = log.flush();
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
