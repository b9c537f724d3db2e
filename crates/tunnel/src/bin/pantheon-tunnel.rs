//! `pantheon-tunnel`: one tunnel endpoint as a program, and a drop-in for pantheon-tunnel's
//! `mm-tunnelserver` / `mm-tunnelclient`.
//!
//! Invoked through a link named `mm-tunnelserver` or `mm-tunnelclient` it takes their exact
//! arguments and writes Pantheon's text logs by default, so Pantheon's own harness
//! (`tunnel_manager.py`) and `merge_tunnel_logs.py` can drive and read it.

use std::io::Write;
use std::net::{Ipv4Addr, SocketAddrV4};
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use anyhow::{bail, Context};
use clap::{Args, Parser, Subcommand, ValueEnum};
use netns::NetNs;
use pantheon_tunnel::io::{self, EndpointConfig, RunningEndpoint};
use pantheon_tunnel::log::{self, LogFormat, Role};

/// One endpoint of Pantheon's instrumented UDP tunnel.
///
/// Each endpoint puts a TUN device named `tunnel` in a network namespace of its own, runs
/// COMMAND there (default: your shell, reading commands from stdin) and carries every IP
/// packet that COMMAND sends to the peer endpoint over UDP, tagged with a 64-bit UID and logged
/// with its time and size. The server prints the client's command line; start the client with
/// it (replacing `localhost` by the server's address). Needs root.
///
/// Also answers to the names `mm-tunnelserver` and `mm-tunnelclient` (make a link), taking
/// their arguments and writing their text logs.
#[derive(Parser)]
#[command(name = "pantheon-tunnel", version)]
struct Cli {
    #[command(subcommand)]
    command: Top,
}

#[derive(Subcommand)]
enum Top {
    /// Wait for a client, then run COMMAND in the tunnel's namespace (as `mm-tunnelserver`).
    ///
    /// Prints `mm-tunnelclient localhost PORT CLIENT_PRIVATE SERVER_PRIVATE` on stdout: the
    /// client's command line.
    Server {
        #[command(flatten)]
        endpoint: EndpointArgs,
    },
    /// Connect to a server, then run COMMAND in the tunnel's namespace (as `mm-tunnelclient`).
    ///
    /// Prints `Tunnelclient got connection from tunnelserver at IP` on stdout once connected;
    /// gives up after 6 handshake attempts one second apart.
    Client {
        /// The server's IPv4 address.
        server_ip: Ipv4Addr,
        /// The server's UDP port.
        server_port: u16,
        /// This endpoint's address inside the tunnel.
        local_private: Ipv4Addr,
        /// The server's address inside the tunnel.
        server_private: Ipv4Addr,
        #[command(flatten)]
        endpoint: EndpointArgs,
    },
    /// Convert binary packet logs (*.ptlog) to pantheon-tunnel's text logs.
    ///
    /// `X.ingress.ptlog` becomes `X.log.ingress` (Pantheon's name), in --out-dir or beside
    /// the input. A truncated log is converted up to its last whole record, with a warning.
    Convert {
        /// Binary logs to convert.
        #[arg(required = true)]
        logs: Vec<PathBuf>,
        /// Directory for the text logs (default: beside each input).
        #[arg(long)]
        out_dir: Option<PathBuf>,
    },
    /// Match one endpoint's egress log with the other's ingress log on packet UIDs: packets
    /// sent, received and lost, and the one-way delay (median, 95th percentile).
    ///
    /// Delays use the two logs' own clocks: exact when both endpoints ran on one host.
    Check {
        /// Binary egress log of the sending endpoint.
        egress: PathBuf,
        /// Binary ingress log of the receiving endpoint.
        ingress: PathBuf,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
}

#[derive(Args)]
struct EndpointArgs {
    /// Log packets received from the peer to FILE.
    #[arg(long, value_name = "FILE")]
    ingress_log: Option<PathBuf>,
    /// Log packets sent to the peer to FILE.
    #[arg(long, value_name = "FILE")]
    egress_log: Option<PathBuf>,
    /// Send and receive through network device IF only (SO_BINDTODEVICE); its MTU becomes
    /// the path MTU.
    #[arg(long, value_name = "IF")]
    interface: Option<String>,
    /// Path MTU in bytes (default: the --interface's MTU, else 1500); the TUN device's MTU is
    /// MTU − 36 (IPv4 + UDP + UID headers).
    #[arg(long, value_parser = clap::value_parser!(u16).range(100..))]
    mtu: Option<u16>,
    /// Log format [default: binary; pantheon when run as mm-tunnelserver/mm-tunnelclient].
    #[arg(long, value_enum)]
    log_format: Option<FormatArg>,
    /// Flow id written into binary logs.
    #[arg(long, default_value_t = 1)]
    flow: u16,
    /// This endpoint runs the scheme's sender: its egress log is the datalink (binary logs
    /// record the direction).
    #[arg(long)]
    sender_side: bool,
    /// Also write a pcapng capture of the inner packets beside each log (`X.egress.ptlog` →
    /// `X.egress.pcapng`; a log named otherwise gets `.pcapng` appended): the first --snaplen
    /// bytes of each packet, its time, and its UID (the comment `uid N`, and `epb_packetid`),
    /// for Wireshark or tshark.
    #[arg(long)]
    capture: bool,
    /// With --capture: bytes kept of each packet.
    #[arg(
        long,
        value_name = "BYTES",
        default_value_t = pantheon_tunnel::capture::DEFAULT_SNAPLEN,
        value_parser = clap::value_parser!(u32).range(1..=i64::from(pantheon_tunnel::capture::MAX_SNAPLEN))
    )]
    snaplen: u32,
    /// End (exit status 1, with a message) when nothing has arrived from the connected peer
    /// for SECS seconds, e.g. because it was killed; while idle, send KEEPALIVEs (every second,
    /// or every SECS/4 if shorter) so that the peer does not. 0: wait forever, as pantheon-tunnel (needed opposite an
    /// original mm-tunnelserver/mm-tunnelclient, which sends no KEEPALIVEs).
    #[arg(long, value_name = "SECS", default_value = "10", value_parser = parse_seconds)]
    peer_timeout: Duration,
    // Last field, and the struct is flattened last: COMMAND follows the client's positionals.
    /// Program and arguments to run inside the tunnel namespace (default: $SHELL).
    #[arg(
        trailing_var_arg = true,
        allow_hyphen_values = true,
        value_name = "COMMAND"
    )]
    command: Vec<String>,
}

#[derive(Clone, Copy, ValueEnum)]
enum FormatArg {
    /// Pantheon-rs binary logs (docs/formats.md).
    Binary,
    /// pantheon-tunnel's text logs, byte for byte.
    Pantheon,
}

/// A duration in seconds (decimals allowed), ≥ 0.
fn parse_seconds(s: &str) -> Result<Duration, String> {
    let secs: f64 = s
        .parse()
        .map_err(|_| format!("{s:?} is not a number of seconds"))?;
    Duration::try_from_secs_f64(secs).map_err(|_| format!("{s:?}: seconds must be ≥ 0"))
}

static INTERRUPTED: AtomicBool = AtomicBool::new(false);

fn main() -> ExitCode {
    pantheon_tunnel::messages::print_on_stderr();
    let argv: Vec<String> = std::env::args().collect();
    let program = Path::new(&argv[0])
        .file_name()
        .and_then(|n| n.to_str())
        .unwrap_or("");
    let (compat, args) = match program {
        "mm-tunnelserver" | "mm-tunnelclient" => {
            let sub = program.trim_start_matches("mm-tunnel").to_owned();
            let mut args = vec![argv[0].clone(), sub];
            args.extend_from_slice(&argv[1..]);
            (true, args)
        }
        _ => (false, argv.clone()),
    };
    let cli = Cli::parse_from(&args);
    match run(cli, compat, &argv) {
        Ok(code) => ExitCode::from(code),
        Err(e) => {
            eprintln!("pantheon-tunnel: error: {e:#}");
            ExitCode::FAILURE
        }
    }
}

fn run(cli: Cli, compat: bool, argv: &[String]) -> anyhow::Result<u8> {
    match cli.command {
        Top::Convert { logs, out_dir } => convert(&logs, out_dir.as_deref()),
        Top::Check {
            egress,
            ingress,
            json,
        } => check(&egress, &ingress, json),
        Top::Server { endpoint } => {
            let (local, peer) = pick_private_addresses()?;
            let udp = SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, 0);
            endpoint_main(Role::Server, udp, local, peer, endpoint, compat, argv)
        }
        Top::Client {
            server_ip,
            server_port,
            local_private,
            server_private,
            endpoint,
        } => {
            let udp = SocketAddrV4::new(server_ip, server_port);
            let (local, peer) = (local_private, server_private);
            endpoint_main(Role::Client, udp, local, peer, endpoint, compat, argv)
        }
    }
}

fn endpoint_main(
    role: Role,
    udp_addr: SocketAddrV4,
    local_private: Ipv4Addr,
    peer_private: Ipv4Addr,
    args: EndpointArgs,
    compat: bool,
    argv: &[String],
) -> anyhow::Result<u8> {
    ctrlc::set_handler(|| INTERRUPTED.store(true, Ordering::SeqCst))
        .context("install the signal handler")?;
    let path_mtu = match (args.mtu, &args.interface) {
        (Some(mtu), _) => mtu,
        (None, Some(dev)) => device_mtu(dev)?,
        (None, None) => 1500,
    };
    let log_format = match args.log_format {
        Some(FormatArg::Pantheon) => pantheon_format(role, argv),
        Some(FormatArg::Binary) => LogFormat::Binary,
        None if compat => pantheon_format(role, argv),
        None => LogFormat::Binary,
    };
    let role_name = match role {
        Role::Server => "server",
        Role::Client => "client",
    };
    let ns = NetNs::create(&format!("ptun-{}-{role_name}", std::process::id()))?;
    let endpoint = io::start(
        EndpointConfig {
            role,
            flow: args.flow,
            sender_side: args.sender_side,
            ingress_log: args.ingress_log,
            egress_log: args.egress_log,
            log_format,
            capture_snaplen: args.capture.then_some(args.snaplen),
            local_private,
            peer_private,
            path_mtu,
            udp_addr,
            bind_device: args.interface,
            peer_timeout: (!args.peer_timeout.is_zero()).then_some(args.peer_timeout),
        },
        None,
        &ns,
    )?;
    let port = endpoint.local_udp.port();
    match role {
        Role::Server => println!("mm-tunnelclient localhost {port} {peer_private} {local_private}"),
        Role::Client => eprintln!("Tunnelclient listening for server on port {port}"),
    }
    let _ = std::io::stdout().flush();

    if !connected(&endpoint, role, udp_addr)? {
        return Ok(130);
    }
    let status = run_command(&args.command, &ns, peer_private, &endpoint)?;
    ended(endpoint, status)
}

/// Waits for the handshake (the server for as long as it takes, the client until its SYNs
/// are spent: then the endpoint's error) and says so as Mahimahi's tunnels do. `false` when
/// interrupted first.
fn connected(
    endpoint: &RunningEndpoint,
    role: Role,
    udp_addr: SocketAddrV4,
) -> anyhow::Result<bool> {
    while !endpoint.control.is_connected() {
        if let Some(e) = endpoint.control.error() {
            bail!("{e}");
        }
        if INTERRUPTED.load(Ordering::SeqCst) {
            return Ok(false);
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    match role {
        Role::Server => eprintln!("Tunnelserver got connection from tunnelclient"),
        Role::Client => {
            println!(
                "Tunnelclient got connection from tunnelserver at {}",
                udp_addr.ip()
            )
        }
    }
    let _ = std::io::stdout().flush();
    Ok(true)
}

/// Runs COMMAND in the tunnel's namespace `ns` (`peer` is the other side's private address)
/// until it exits (`Some` of its status), we are interrupted, or the tunnel ends under it
/// (`None`: it was sent SIGTERM). When the peer closed the tunnel, COMMAND gets a moment to
/// finish on its own (both ends of a scheme often stop together).
fn run_command(
    command: &[String],
    ns: &NetNs,
    peer: Ipv4Addr,
    endpoint: &RunningEndpoint,
) -> anyhow::Result<Option<std::process::ExitStatus>> {
    let mut cmd = netns::shell_command(command, peer);
    ns.spawn_into(&mut cmd);
    // A shell reading a terminal must stay in the terminal's foreground process group.
    // SAFETY: isatty and getpgrp are plain syscalls.
    let on_tty = unsafe { libc::isatty(0) } == 1;
    if on_tty {
        cmd.process_group(unsafe { libc::getpgrp() });
    }
    let mut child = cmd
        .spawn()
        .with_context(|| format!("start {:?} in namespace {}", cmd.get_program(), ns.name()))?;
    let mut closed_at = None;
    let status = loop {
        if let Some(status) = child.try_wait().context("wait for the command")? {
            break Some(status);
        }
        let control = &endpoint.control;
        if control.peer_closed() && closed_at.is_none() {
            closed_at = Some(std::time::Instant::now());
        }
        let grace_over = closed_at.is_none_or(|t| t.elapsed() >= PEER_CLOSED_GRACE);
        if INTERRUPTED.load(Ordering::SeqCst) || (control.error().is_some() && grace_over) {
            if on_tty {
                // SAFETY: plain syscall on our own child.
                unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGTERM) };
            } else {
                netns::kill_group(child.id(), libc::SIGTERM);
            }
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(5));
    };
    Ok(status)
}

/// The endpoint stopped (its logs flushed, its warnings printed) and our exit status: 130
/// when interrupted, COMMAND's when it exited, an error when the tunnel failed under it
/// (unless the peer closed it).
fn ended(
    endpoint: RunningEndpoint,
    status: Option<std::process::ExitStatus>,
) -> anyhow::Result<u8> {
    let control = endpoint.control.clone();
    endpoint.finish();
    for w in control.warnings() {
        eprintln!("warning: {w}");
    }
    if INTERRUPTED.load(Ordering::SeqCst) {
        if let Some(e) = control.error() {
            eprintln!("{e}");
        }
        return Ok(130);
    }
    match (control.error(), status) {
        (Some(e), Some(s)) if control.peer_closed() => {
            eprintln!("{e}");
            Ok(exit_code(s))
        }
        (Some(e), _) => bail!("{e}"),
        (None, Some(s)) => Ok(exit_code(s)),
        (None, None) => Ok(130),
    }
}

/// How long COMMAND may take to exit on its own once the peer closed the tunnel.
const PEER_CLOSED_GRACE: Duration = Duration::from_secs(2);

/// A child's exit status as ours: its code, or 128 + the signal that ended it (as shells do).
fn exit_code(s: std::process::ExitStatus) -> u8 {
    s.code()
        .map(|c| c as u8)
        .unwrap_or_else(|| 128 + s.signal().unwrap_or(0) as u8)
}

/// Pantheon's log header quotes argv in getopt's permuted order: options first, then the
/// positionals, then COMMAND.
fn pantheon_format(role: Role, argv: &[String]) -> LogFormat {
    let positionals = match role {
        Role::Server => 0,
        Role::Client => 4,
    };
    let mut options = vec![argv[0].clone()];
    let mut rest = Vec::new();
    let mut iter = argv[1..].iter().peekable();
    // `pantheon-tunnel server|client …` keeps its subcommand word after argv[0].
    if let Some(sub) = iter.next_if(|a| *a == "server" || *a == "client") {
        options.push(sub.clone());
    }
    let mut seen = 0;
    for a in iter {
        if seen > positionals || a == "--" {
            seen = positionals + 1;
            rest.push(a.clone());
        } else if a.starts_with("--") {
            options.push(a.clone());
        } else {
            seen += 1;
            rest.push(a.clone());
        }
    }
    options.extend(rest);
    LogFormat::Pantheon {
        command_line: log::quote_command_line(&options),
    }
}

/// The server's private address and the one it gives the client: the first two of
/// 100.64.0.1, .2, … not assigned to an interface here, as pantheon-tunnel picks them.
fn pick_private_addresses() -> anyhow::Result<(Ipv4Addr, Ipv4Addr)> {
    let taken = local_ipv4_addrs()?;
    let mut free = (1..=254u8)
        .map(|x| Ipv4Addr::new(100, 64, 0, x))
        .filter(|a| !taken.contains(a));
    match (free.next(), free.next()) {
        (Some(a), Some(b)) => Ok((a, b)),
        _ => bail!("no two free addresses in 100.64.0.0/24"),
    }
}

fn local_ipv4_addrs() -> anyhow::Result<Vec<Ipv4Addr>> {
    let mut head: *mut libc::ifaddrs = std::ptr::null_mut();
    // SAFETY: getifaddrs fills `head` with a list we free below; we only read it.
    if unsafe { libc::getifaddrs(&mut head) } != 0 {
        return Err(std::io::Error::last_os_error()).context("list interface addresses");
    }
    let mut out = Vec::new();
    let mut cur = head;
    while !cur.is_null() {
        // SAFETY: `cur` is a node of the list getifaddrs returned.
        let ifa = unsafe { &*cur };
        if !ifa.ifa_addr.is_null() {
            // SAFETY: ifa_addr points to a sockaddr whose family we check before the cast.
            let sa = unsafe { &*ifa.ifa_addr };
            if i32::from(sa.sa_family) == libc::AF_INET {
                let sin = unsafe { &*(ifa.ifa_addr as *const libc::sockaddr_in) };
                out.push(Ipv4Addr::from(u32::from_be(sin.sin_addr.s_addr)));
            }
        }
        cur = ifa.ifa_next;
    }
    // SAFETY: frees the list returned by getifaddrs, once.
    unsafe { libc::freeifaddrs(head) };
    Ok(out)
}

fn device_mtu(dev: &str) -> anyhow::Result<u16> {
    let path = format!("/sys/class/net/{dev}/mtu");
    let text = std::fs::read_to_string(&path)
        .with_context(|| format!("--interface={dev}: no such network device ({path})"))?;
    text.trim()
        .parse()
        .with_context(|| format!("{path}: not an MTU: {text:?}"))
}

fn convert(logs: &[PathBuf], out_dir: Option<&Path>) -> anyhow::Result<u8> {
    for input in logs {
        let log = log::read_log(input)?;
        let name = input
            .file_name()
            .and_then(|n| n.to_str())
            .context("log file name is not UTF-8")?;
        let kind = log.header.kind.as_str();
        let stem = name
            .strip_suffix(".ptlog")
            .and_then(|s| s.strip_suffix(&format!(".{kind}")))
            .unwrap_or(name);
        let out_name = format!("{stem}.log.{kind}");
        let output = match out_dir {
            Some(d) => d.join(out_name),
            None => input.with_file_name(out_name),
        };
        let mut out = std::io::BufWriter::new(
            std::fs::File::create(&output)
                .with_context(|| format!("create {}", output.display()))?,
        );
        let command_line = log::quote_command_line(&["pantheon-tunnel", "convert", name]);
        let n = log::write_pantheon_text(&log, &command_line, &mut out)
            .and_then(|n| out.flush().map(|()| n))
            .with_context(|| format!("write {}", output.display()))?;
        if let Some(stop) = &log.stopped_at {
            eprintln!(
                "warning: {}: {stop}; converted the {n} records before it",
                input.display()
            );
        }
        eprintln!("{} → {} ({n} packets)", input.display(), output.display());
    }
    Ok(0)
}

fn check(egress: &Path, ingress: &Path, json: bool) -> anyhow::Result<u8> {
    let (e, i) = (log::read_log(egress)?, log::read_log(ingress)?);
    for (path, l) in [(egress, &e), (ingress, &i)] {
        if let Some(stop) = &l.stopped_at {
            eprintln!(
                "warning: {}: {stop}; using the records before it",
                path.display()
            );
        }
    }
    for w in log::pair_problems(&e.header, &i.header) {
        eprintln!(
            "warning: {} and {}: {w}",
            egress.display(),
            ingress.display()
        );
    }
    let c = log::check_pair(&e, &i);
    if c.duplicates > 0 {
        eprintln!("warning: {}", log::duplicates_warning(c.duplicates));
    }
    let loss = if c.sent == 0 {
        0.0
    } else {
        c.lost as f64 / c.sent as f64
    };
    if json {
        println!(
            "{{\"sent\": {}, \"received\": {}, \"lost\": {}, \"loss\": {loss}, \"unexpected\": {}, \
             \"duplicates\": {}, \"size_mismatches\": {}, \"median_delay_ms\": {}, \
             \"p95_delay_ms\": {}}}",
            c.sent,
            c.received,
            c.lost,
            c.unexpected,
            c.duplicates,
            c.size_mismatches,
            json_number(c.median_delay_ms),
            json_number(c.p95_delay_ms),
        );
    } else {
        println!(
            "sent {}  received {}  lost {} ({:.4} %)  unexpected {}  duplicates {}  size \
             mismatches {}\none-way delay: median {:.3} ms, p95 {:.3} ms",
            c.sent,
            c.received,
            c.lost,
            100.0 * loss,
            c.unexpected,
            c.duplicates,
            c.size_mismatches,
            c.median_delay_ms,
            c.p95_delay_ms,
        );
    }
    Ok(0)
}

fn json_number(x: f64) -> String {
    if x.is_finite() {
        format!("{x}")
    } else {
        "null".into()
    }
}
