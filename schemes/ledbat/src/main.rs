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
use pantheon_scheme_wrapper::transfers::{serve, Transport, WorkloadArgs};
use pantheon_scheme_wrapper::{fill_random, Side};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// Command line, in Pantheon's wrapper shape.
#[derive(Parser)]
#[command(
    version,
    about = "LEDBAT (libutp) bulk sender/receiver for Pantheon-rs schemes"
)]
struct Cli {
    #[command(subcommand)]
    side: Side,
    #[command(flatten)]
    workload: WorkloadArgs,
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
            if let Some(record) = cli.workload.receiver_record()? {
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
            if let Some(w) = cli.workload.sender()? {
                return w.run(Utp { ctx, addr: server }).await;
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
