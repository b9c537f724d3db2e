//! `pantheon-ledbat`: the LEDBAT scheme — one full-throttle uTP flow over libutp, BitTorrent's
//! LEDBAT implementation (the same C++ library Pantheon's `ledbat` wrapper ran through its
//! `ucat-static` example), bundled by the `libutp-rs2` crate.
//!
//! Pantheon's wrapper convention (reference `pantheon.md` §1.1): the receiver runs first as
//! `pantheon-ledbat receiver PORT` (listens on UDP `0.0.0.0:PORT`, reads and discards), then
//! `pantheon-ledbat sender IP PORT` connects and writes random bytes until it is killed (as
//! Pantheon fed `ucat` from `os.urandom`).
//!
//! **Workloads** (issue 29, `docs/workloads.md`): with `--workload SPEC --seed N --transfers
//! FILE` the sender runs a workload's schedule (`pantheon_scheme_wrapper::transfers`) instead:
//! each transfer on a uTP connection of its own (it pays the handshake, as TCP's do), a page's
//! objects over at most `parallel` kept-alive connections; the receiver given `--transfers
//! FILE` records every transfer.
//!
//! libutp's LEDBAT aims at a 100 ms queueing delay (`CCONTROL_TARGET`) and sends UDP payloads
//! of at most 1402 bytes (its `UDP_IPV4_MTU`: 1500 minus IPv4, UDP, GRE, PPPoE, MPPE headers
//! and a 36-byte fudge), i.e. IP packets of at most 1430 bytes: within the tunnel's 1464.

use std::net::{Ipv4Addr, SocketAddr};
use std::sync::Arc;

use anyhow::{Context, Result};
use clap::Parser;
use libutp_rs2::UtpUdpContext;
use pantheon_scheme_wrapper::transfers::{run_sender, serve, Transport};
use pantheon_scheme_wrapper::{fill_random, Recorder, Side};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use workload::record::{RECEIVER_HEADER, SENDER_HEADER};
use workload::Workload;

/// Command line, in Pantheon's wrapper shape.
#[derive(Parser)]
#[command(
    version,
    about = "LEDBAT (libutp) bulk sender/receiver for Pantheon-rs schemes"
)]
struct Cli {
    #[command(subcommand)]
    side: Side,
    /// The sender's workload instead of full throttle (`bytes=1000000`, `poisson,rate=…`,
    /// `page,…`; a Poisson load must come as a rate: the harness converts `load=`).
    #[arg(long, global = true)]
    workload: Option<String>,
    /// Seed of the workload schedule's draws.
    #[arg(long, default_value_t = 1, global = true)]
    seed: u64,
    /// Seconds the flow has in the run: arrivals after it are not started.
    #[arg(long, global = true)]
    duration: Option<f64>,
    /// Where this side writes its transfer records (CSV); the receiver records only with it.
    #[arg(long, global = true)]
    transfers: Option<std::path::PathBuf>,
}

/// uTP connections to the receiver, one per transfer (or per page slot), on one UDP socket.
struct Utp {
    ctx: Arc<UtpUdpContext>,
    addr: SocketAddr,
}

impl Transport for Utp {
    type Conn = libutp_rs2::UtpStream<tokio::net::UdpSocket>;
    const REUSE: bool = true;
    const HANDSHAKE: bool = true;

    async fn open(&self) -> Result<Self::Conn> {
        self.ctx
            .connect(self.addr)
            .await
            .with_context(|| format!("connecting to {}", self.addr))
    }
}

/// Size of one application write or read, bytes.
const CHUNK: usize = 1 << 16;

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<()> {
    let mut buf = vec![0u8; CHUNK];
    let cli = Cli::parse();
    match cli.side {
        Side::Receiver { port } => {
            let addr = SocketAddr::from((Ipv4Addr::UNSPECIFIED, port));
            let ctx = UtpUdpContext::new_udp(addr)
                .await
                .with_context(|| format!("binding {addr}"))?;
            eprintln!("pantheon-ledbat: receiver listening on {addr}");
            if let Some(path) = &cli.transfers {
                let record = Arc::new(Recorder::create(path, RECEIVER_HEADER)?);
                loop {
                    let stream = ctx.accept().await.context("accepting")?;
                    let record = Arc::clone(&record);
                    tokio::spawn(async move {
                        if let Err(e) = serve(stream, &record, "the sender").await {
                            eprintln!("pantheon-ledbat: receiver: {e:#}");
                        }
                    });
                }
            }
            let mut stream = ctx.accept().await.context("accepting")?;
            eprintln!("pantheon-ledbat: receiver: connected");
            loop {
                if stream.read(&mut buf).await.context("receiving")? == 0 {
                    anyhow::bail!("the sender closed the connection");
                }
            }
        }
        Side::Sender { ip, port } => {
            fill_random(&mut buf);
            let server = SocketAddr::from((ip, port));
            let ctx = UtpUdpContext::new_udp(SocketAddr::from((Ipv4Addr::UNSPECIFIED, 0)))
                .await
                .context("binding a UDP socket")?;
            // libutp sends through tokio's `try_send_to`, which fails (the packet is dropped)
            // until the runtime has seen the new socket writable. Connecting at once lost the
            // SYN and the flow started 3 s late, at libutp's first retransmission: let the
            // runtime poll the socket first.
            tokio::time::sleep(std::time::Duration::from_millis(1)).await;
            if let Some(spec) = &cli.workload {
                let w = Workload::parse(spec)?;
                let path = cli
                    .transfers
                    .as_ref()
                    .context("--workload needs --transfers FILE")?;
                let record = Arc::new(Recorder::create(path, SENDER_HEADER)?);
                let until = cli.duration.map(std::time::Duration::from_secs_f64);
                let utp = Utp { ctx, addr: server };
                return run_sender(Arc::new(utp), &w, cli.seed, until, record).await;
            }
            let mut stream = ctx
                .connect(server)
                .await
                .with_context(|| format!("connecting to {server}"))?;
            eprintln!("pantheon-ledbat: sender: connecting to {server}");
            loop {
                stream.write_all(&buf).await.context("sending")?;
            }
        }
    }
}
