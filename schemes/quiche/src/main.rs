//! `pantheon-quiche`: the QUIC BBRv2 scheme — one full-throttle bulk flow over Cloudflare's
//! [quiche](https://docs.rs/quiche), whose `bbr2` is Google's BBRv2 ("gcongestion", ported
//! from Chromium's QUIC). `--cc cubic|reno` selects quiche's other controllers.
//!
//! Pantheon's wrapper convention (reference `pantheon.md` §1.1): the receiver runs first as
//! `pantheon-quiche receiver PORT` (a QUIC server on UDP `0.0.0.0:PORT` that reads and discards
//! one connection's streams), then `pantheon-quiche sender IP PORT` connects and writes into one
//! unidirectional stream until it is killed.
//!
//! quiche is sans-IO: this program owns the UDP socket and the timers. It honours quiche's
//! pacing: a packet whose `SendInfo::at` lies in the future is held until then (while incoming
//! ACKs keep being processed), which BBR's rate model relies on. QUIC's UDP payload is fixed at
//! `--max-udp-payload` (default 1436 bytes = the tunnel's 1464-byte IP MTU − 28 bytes of IPv4
//! and UDP headers), with path-MTU discovery off.
//!
//! TLS is real but unauthenticated (a fresh self-signed certificate, not verified): a traffic
//! generator, not a secure channel. With `--capture` the harness names the files for its TLS
//! secrets (`SSLKEYLOGFILE`) and its qlog (`PANTHEON_QLOG`, JSON-SEQ).

use std::net::{Ipv4Addr, SocketAddr, UdpSocket};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use clap::{Parser, ValueEnum};
use pantheon_scheme_wrapper::Side;

/// Command line, in Pantheon's wrapper shape.
#[derive(Parser)]
#[command(
    version,
    about = "QUIC bulk sender/receiver (quiche) for Pantheon-rs schemes"
)]
struct Cli {
    #[command(subcommand)]
    side: Side,
    /// Congestion controller: quiche's BBRv2, Cubic or Reno.
    #[arg(long, value_enum, default_value = "bbr2", global = true)]
    cc: Cc,
    /// Largest UDP payload QUIC may send, bytes (1436 fits the tunnel's 1464-byte IP MTU).
    #[arg(long, default_value_t = 1436, global = true, value_parser = clap::value_parser!(u16).range(1200..))]
    max_udp_payload: u16,
    /// Print the connection's RTT, congestion window, pacing rate and losses once a second
    /// (stderr).
    #[arg(long, global = true)]
    stats: bool,
}

#[derive(Clone, Copy, ValueEnum)]
enum Cc {
    Bbr2,
    Cubic,
    Reno,
}

/// Flow-control windows, bytes: never reached, so never the bottleneck. With the send capacity
/// factor below quiche buffers several congestion windows ahead, past the peer's flow-control
/// limit once that limit binds, and then underflows (`max_tx_data - tx_data` in
/// `stream_send`, a panic in debug builds). 1 GiB was reached within a 5 s loopback run (`schemes
/// check`) on an idle 2-core machine; 2^60 bytes is not, at any rate (a QUIC varint holds
/// 2^62 − 1), so the limit never binds.
const WINDOW: u64 = 1 << 60;
const ALPN: &[u8] = b"pantheon-bulk";
/// The stream the sender writes: the client's first unidirectional stream.
const STREAM: u64 = 2;

fn config(cli: &Cli, cert_dir: Option<&std::path::Path>) -> Result<quiche::Config> {
    let mut c = quiche::Config::new(quiche::PROTOCOL_VERSION)?;
    c.set_application_protos(&[ALPN])?;
    c.verify_peer(false);
    if let Some(dir) = cert_dir {
        let key = rcgen::generate_simple_self_signed(vec!["pantheon".to_owned()])?;
        let (cert, private) = (dir.join("cert.pem"), dir.join("key.pem"));
        std::fs::write(&cert, key.cert.pem())?;
        std::fs::write(&private, key.signing_key.serialize_pem())?;
        c.load_cert_chain_from_pem_file(cert.to_str().context("certificate path")?)?;
        c.load_priv_key_from_pem_file(private.to_str().context("key path")?)?;
    }
    let cc = match cli.cc {
        Cc::Bbr2 => "bbr2",
        Cc::Cubic => "cubic",
        Cc::Reno => "reno",
    };
    c.set_cc_algorithm_name(cc)
        .map_err(|e| anyhow::anyhow!("congestion control {cc}: {e}"))?;
    let payload = usize::from(cli.max_udp_payload);
    c.set_max_recv_udp_payload_size(payload);
    c.set_max_send_udp_payload_size(payload);
    c.discover_pmtu(false);
    c.enable_pacing(true);
    // Let the stream buffer hold several congestion windows of data: quiche judges a sender
    // application-limited (and BBR then ignores its bandwidth samples) whenever less than the
    // window's free room is buffered when an ACK arrives.
    c.set_send_capacity_factor(4.0);
    c.set_max_idle_timeout(120_000);
    c.set_initial_max_data(WINDOW);
    c.set_initial_max_stream_data_uni(WINDOW);
    c.set_initial_max_streams_uni(16);
    c.set_disable_active_migration(true);
    if std::env::var_os(KEY_LOG).is_some() {
        c.log_keys();
    }
    Ok(c)
}

/// The environment variable naming the file for the TLS secrets (NSS key log lines, as
/// browsers and curl write them): `pantheon run --capture` sets it, so that Wireshark decrypts
/// the capture.
const KEY_LOG: &str = "SSLKEYLOGFILE";

/// Gives `conn` the key log file `SSLKEYLOGFILE` names (appended to) and the qlog file
/// `PANTHEON_QLOG` names ([`pantheon_scheme_wrapper::qlog_writer`]), where the environment
/// names them. Errors name the file that cannot be opened.
fn quic_logs(conn: &mut quiche::Connection, role: &str) -> Result<()> {
    if let Some(path) = std::env::var_os(KEY_LOG) {
        let file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&path)
            .with_context(|| format!("{KEY_LOG} {}", path.to_string_lossy()))?;
        conn.set_keylog(Box::new(file));
    }
    if let Some(writer) = pantheon_scheme_wrapper::qlog_writer()? {
        conn.set_qlog(writer, format!("pantheon-quiche {role}"), String::new());
    }
    Ok(())
}

fn main() -> Result<()> {
    let cli = Cli::parse();
    match cli.side {
        Side::Receiver { port } => {
            let dir = tempfile_dir()?;
            let mut config = config(&cli, Some(&dir))?;
            let _ = std::fs::remove_dir_all(&dir);
            let addr = SocketAddr::from((Ipv4Addr::UNSPECIFIED, port));
            let socket = UdpSocket::bind(addr).with_context(|| format!("binding {addr}"))?;
            eprintln!("pantheon-quiche: receiver listening on {addr}");
            // Wait for the sender's first (Initial) packet, then serve that connection.
            let mut buf = vec![0u8; 65_536];
            let (conn, first) = loop {
                let (len, from) = socket.recv_from(&mut buf)?;
                let Ok(hdr) = quiche::Header::from_slice(&mut buf[..len], quiche::MAX_CONN_ID_LEN)
                else {
                    continue;
                };
                if hdr.ty != quiche::Type::Initial {
                    continue;
                }
                let scid = connection_id();
                let local = socket.local_addr()?;
                let mut conn = quiche::accept(
                    &quiche::ConnectionId::from_ref(&scid),
                    None,
                    local,
                    from,
                    &mut config,
                )?;
                quic_logs(&mut conn, "receiver")?;
                break (conn, (len, from));
            };
            eprintln!("pantheon-quiche: receiver: connection from {}", first.1);
            drive(conn, socket, Role::Receiver, Some((buf, first)), cli.stats)
        }
        Side::Sender { ip, port } => {
            let mut config = config(&cli, None)?;
            let server = SocketAddr::from((ip, port));
            let socket = UdpSocket::bind((Ipv4Addr::UNSPECIFIED, 0)).context("binding")?;
            let scid = connection_id();
            let mut conn = quiche::connect(
                Some("pantheon"),
                &quiche::ConnectionId::from_ref(&scid),
                socket.local_addr()?,
                server,
                &mut config,
            )?;
            quic_logs(&mut conn, "sender")?;
            eprintln!("pantheon-quiche: sender: connecting to {server}");
            drive(conn, socket, Role::Sender, None, cli.stats)
        }
    }
}

#[derive(PartialEq)]
enum Role {
    Sender,
    Receiver,
}

/// The event loop of one connection: receive, feed the stream (sender), send what quiche
/// allows when quiche's pacer says so, fire timers. Returns only when the connection closes.
fn drive(
    mut conn: quiche::Connection,
    socket: UdpSocket,
    role: Role,
    first: Option<(Vec<u8>, (usize, SocketAddr))>,
    stats: bool,
) -> Result<()> {
    let mut next_stats = Instant::now();
    let local = socket.local_addr()?;
    socket.set_nonblocking(true)?;
    let (mut buf, first) = match first {
        Some((b, f)) => (b, Some(f)),
        None => (vec![0u8; 65_536], None),
    };
    if let Some((len, from)) = first {
        conn.recv(&mut buf[..len], quiche::RecvInfo { from, to: local })?;
    }
    let mut sink = vec![0u8; 1 << 16];
    let mut out = vec![0u8; 65_536];
    // A paced packet waiting for its departure time.
    let mut held: Option<(usize, quiche::SendInfo)> = None;
    let mut announced = false;
    loop {
        // Send: the held packet if due, then whatever quiche has, until it is done or the
        // next packet is due in the future.
        loop {
            if held.is_none() {
                match conn.send(&mut out) {
                    Ok((n, info)) => held = Some((n, info)),
                    // quiche accepts stream data only up to the congestion window's room, so
                    // refill the stream the moment it runs dry: waiting for the next ACK
                    // instead would leave the sender application-limited.
                    Err(quiche::Error::Done) if role == Role::Sender && fill(&mut conn)? > 0 => {
                        continue
                    }
                    Err(quiche::Error::Done) => break,
                    Err(e) => bail!("quiche send: {e}"),
                }
            }
            let (n, info) = held.expect("set above");
            if info.at > Instant::now() + Duration::from_micros(50) {
                break;
            }
            match socket.send_to(&out[..n], info.to) {
                Ok(_) => {}
                // A full socket buffer drops this packet; QUIC recovers as from a loss.
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
                Err(e) => return Err(e).context("sending a datagram"),
            }
            held = None;
        }
        if conn.is_closed() {
            bail!(
                "connection closed: {:?}",
                conn.peer_error().or(conn.local_error())
            );
        }
        // Wait for a packet until the next timer or departure.
        let now = Instant::now();
        let mut wait = conn.timeout().unwrap_or(Duration::from_secs(1));
        if let Some((_, info)) = &held {
            wait = wait.min(info.at.saturating_duration_since(now));
        }
        wait_readable(&socket, wait)?;
        let mut got = 0;
        loop {
            match socket.recv_from(&mut buf) {
                Ok((len, from)) => {
                    got += 1;
                    let _ = conn.recv(&mut buf[..len], quiche::RecvInfo { from, to: local });
                }
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => break,
                Err(e) => return Err(e).context("receiving"),
            }
        }
        if got == 0 || conn.timeout() == Some(Duration::ZERO) {
            conn.on_timeout();
        }
        if stats && Instant::now() >= next_stats {
            next_stats += Duration::from_secs(1);
            if let Some(p) = conn.path_stats().next() {
                eprintln!(
                    "pantheon-quiche: rtt {:.1} ms, min rtt {:.1} ms, cwnd {} B, \
                     delivery {:.2} Mbit/s, sent {} lost {}",
                    p.rtt.as_secs_f64() * 1e3,
                    p.min_rtt.unwrap_or_default().as_secs_f64() * 1e3,
                    p.cwnd,
                    p.delivery_rate as f64 * 8e-6,
                    p.sent,
                    p.lost
                );
            }
        }
        if conn.is_established() && !announced {
            announced = true;
            eprintln!("pantheon-quiche: connection established");
        }
        match role {
            Role::Sender => {
                fill(&mut conn)?;
            }
            Role::Receiver => {
                for id in conn.readable() {
                    while let Ok((n, fin)) = conn.stream_recv(id, &mut sink) {
                        if n == 0 || fin {
                            break;
                        }
                    }
                }
            }
        }
    }
}

/// Waits until `socket` is readable or `wait` has passed, with the resolution of the kernel's
/// high-resolution timers (`ppoll`): pacing gaps are around a millisecond at 10 Mbit/s, and
/// a socket read timeout (`SO_RCVTIMEO`) would round them up to whole scheduler ticks.
fn wait_readable(socket: &UdpSocket, wait: Duration) -> Result<()> {
    use std::os::fd::AsRawFd;
    let mut fd = libc::pollfd {
        fd: socket.as_raw_fd(),
        events: libc::POLLIN,
        revents: 0,
    };
    let ts = libc::timespec {
        tv_sec: wait.as_secs().min(3600) as libc::time_t,
        tv_nsec: wait.subsec_nanos() as libc::c_long,
    };
    // SAFETY: `fd` and `ts` are valid for the call; no signal mask is passed.
    let r = unsafe { libc::ppoll(&mut fd, 1, &ts, std::ptr::null()) };
    if r < 0 {
        let e = std::io::Error::last_os_error();
        if e.kind() != std::io::ErrorKind::Interrupted {
            return Err(e).context("waiting for packets");
        }
    }
    Ok(())
}

/// Writes as much as quiche takes into the sender's stream; returns the bytes written (0 before
/// the handshake completes or when the congestion window is full).
fn fill(conn: &mut quiche::Connection) -> Result<usize> {
    static CHUNK: [u8; 16_384] = [0; 16_384];
    let mut total = 0;
    while conn.is_established() {
        match conn.stream_send(STREAM, &CHUNK, false) {
            Ok(n) if n > 0 => total += n,
            Ok(_) | Err(quiche::Error::Done) => break,
            Err(e) => bail!("stream_send: {e}"),
        }
    }
    Ok(total)
}

/// A random connection ID (from `/dev/urandom`; the clock's nanoseconds if it is unreadable).
fn connection_id() -> [u8; quiche::MAX_CONN_ID_LEN] {
    use std::io::Read;
    let mut id = [0u8; quiche::MAX_CONN_ID_LEN];
    if std::fs::File::open("/dev/urandom")
        .and_then(|mut f| f.read_exact(&mut id))
        .is_err()
    {
        let t = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default()
            .as_nanos()
            .to_le_bytes();
        id[..16].copy_from_slice(&t);
    }
    id
}

/// A private scratch directory for the receiver's certificate (quiche loads PEM files).
fn tempfile_dir() -> Result<std::path::PathBuf> {
    let dir = std::env::temp_dir().join(format!("pantheon-quiche-{}", std::process::id()));
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    Ok(dir)
}
