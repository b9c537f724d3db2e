//! `pantheon-tcp`: the kernel's TCP carrying a workload — one transfer of N bytes, transfers
//! arriving as a Poisson process, or page loads — with a chosen congestion control
//! (`TCP_CONGESTION` on every socket before it connects). Full throttle stays with iperf3, as
//! in Pantheon; iperf3 cannot open one connection per transfer or record completion times.
//!
//! Pantheon's wrapper shape (reference `pantheon.md` §1.1), receiver first:
//!
//! ```text
//! pantheon-tcp receiver PORT --transfers FILE
//! pantheon-tcp sender IP PORT --cc cubic --workload SPEC --seed N --duration S --transfers FILE
//! ```
//!
//! The sender runs the workload's schedule (`pantheon_scheme_wrapper::transfers`): each
//! transfer (`bytes=N`, `poisson`) opens **its own connection** — a short flow pays its
//! handshake and slow start, as the short flows of FCT studies do (pFabric, Homa) — and a
//! page's objects go over at most `parallel` **kept-alive connections**, the next object on a
//! connection when the previous one is acknowledged (HTTP/1.1 with a browser's per-host
//! limit). Connections have no Nagle delay (a transfer's last segment and the acknowledgement
//! go out at once). Each side writes its transfer records to `--transfers`. With `bytes=N` the
//! sender exits (status 0) once its transfer is acknowledged; Poisson and page workloads go on
//! until the harness stops them. A failed connection or transfer ends the program with status
//! 1 and the reason on stderr: the run fails with it.

use std::net::{Ipv4Addr, SocketAddr};
use std::os::fd::AsRawFd;
use std::sync::Arc;

use anyhow::{Context, Result};
use clap::{Parser, Subcommand};
use pantheon_scheme_wrapper::transfers::{serve, Transport, WorkloadArgs};
use tokio::net::{TcpListener, TcpSocket, TcpStream};

/// Command line.
#[derive(Parser)]
#[command(
    version,
    about = "Kernel TCP with workloads (fixed-size transfers, Poisson arrivals, page loads), \
             each transfer's start and completion recorded, for Pantheon-rs schemes"
)]
struct Cli {
    #[command(subcommand)]
    side: Side,
    #[command(flatten)]
    workload: WorkloadArgs,
}

#[derive(Subcommand)]
enum Side {
    /// Runs first: accepts connections on TCP `0.0.0.0:PORT` and records every transfer
    /// (`--transfers FILE`, required).
    Receiver {
        /// TCP port to listen on.
        port: u16,
    },
    /// Runs second: starts the workload's transfers (`--workload`, required) to `IP:PORT` at
    /// their times.
    Sender {
        /// The receiver's address.
        ip: Ipv4Addr,
        /// The receiver's TCP port.
        port: u16,
        /// Kernel congestion control of every connection (`cubic`, `bbr`, `reno`, `vegas`).
        #[arg(long)]
        cc: String,
    },
}

/// Connections to the receiver with congestion control `cc`.
struct Tcp {
    addr: SocketAddr,
    cc: String,
}

impl Transport for Tcp {
    type Conn = TcpStream;
    const REUSE: bool = true;
    const HANDSHAKE: bool = true;

    /// A connection with the congestion control set before the SYN, no Nagle.
    async fn open(&self) -> Result<TcpStream> {
        let socket = TcpSocket::new_v4()?;
        let cc = self.cc.as_bytes();
        // SAFETY: a valid socket and a buffer of the given length.
        let r = unsafe {
            libc::setsockopt(
                socket.as_raw_fd(),
                libc::IPPROTO_TCP,
                libc::TCP_CONGESTION,
                cc.as_ptr().cast(),
                cc.len() as libc::socklen_t,
            )
        };
        if r != 0 {
            return Err(std::io::Error::last_os_error())
                .with_context(|| format!("set TCP congestion control `{}`", self.cc));
        }
        let stream = socket
            .connect(self.addr)
            .await
            .with_context(|| format!("connect to {}", self.addr))?;
        stream.set_nodelay(true)?;
        Ok(stream)
    }
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<()> {
    let cli = Cli::parse();
    match cli.side {
        Side::Receiver { port } => {
            let record = cli
                .workload
                .receiver_record()?
                .context("the receiver needs --transfers FILE")?;
            let listener = TcpListener::bind((Ipv4Addr::UNSPECIFIED, port))
                .await
                .with_context(|| format!("listen on TCP port {port}"))?;
            eprintln!("pantheon-tcp: receiver listening on TCP port {port}");
            loop {
                let (conn, peer) = listener.accept().await.context("accept")?;
                conn.set_nodelay(true)?;
                let record = Arc::clone(&record);
                tokio::spawn(async move {
                    if let Err(e) = serve(conn, &record, &peer.to_string()).await {
                        eprintln!("pantheon-tcp: receiver: {e:#}");
                    }
                });
            }
        }
        Side::Sender { ip, port, cc } => {
            let w = cli
                .workload
                .sender()?
                .context("the sender needs --workload SPEC (full throttle runs through iperf3)")?;
            let addr = SocketAddr::from((ip, port));
            eprintln!(
                "pantheon-tcp: sender: {} to {addr} with {cc}, seed {}",
                w.workload(),
                cli.workload.seed
            );
            w.run(Tcp { addr, cc }).await
        }
    }
}
