//! `pantheon-quinn`: the QUIC Cubic, QUIC NewReno and QUIC BBR schemes — one full-throttle bulk
//! flow over [quinn](https://docs.rs/quinn), a pure-Rust QUIC implementation.
//!
//! Pantheon's wrapper convention (reference `pantheon.md` §1.1): the receiver runs first as
//! `pantheon-quinn receiver PORT` (a QUIC server on `0.0.0.0:PORT`), then the sender as
//! `pantheon-quinn sender IP PORT` connects, opens one unidirectional stream and writes into it
//! until it is killed; the receiver reads and discards. `--cc cubic|newreno|bbr` picks quinn's
//! congestion controller (quinn's BBR is BBRv1 and marked experimental by quinn itself);
//! `--cc indigo|indigo-nocalib` the learned controller of the Pantheon paper's §6
//! (`indigo`, docs/indigo.md) with a model committed in the repository, or with the
//! model file of `--model PATH` (a `pantheon train indigo` output).
//!
//! Packets fit the Pantheon tunnel: QUIC's UDP payload is fixed at `--max-udp-payload` (default
//! 1436 bytes = the tunnel's 1464-byte IP MTU − 20 bytes IPv4 − 8 bytes UDP) and path-MTU
//! discovery is off, so no datagram is ever larger than the tunnel carries.
//!
//! `--cc prague` (the `quic_prague` scheme, L4S): Prague's control law (`sim::quic::prague`) with
//! ECT(1) on every datagram quinn marks ECT(0) (the socket changes the codepoint both ways, as
//! quinn-proto sends and validates only ECT(0)) and every packet acknowledged.
//!
//! `--cc cubic-chromium` (the `quic` scheme) runs the congestion controller of the QUIC Pantheon
//! ran, Chromium's `TcpCubicSenderBytes` of 2017, ported (two emulated connections, hybrid slow
//! start, initial window 32 × 1 460 bytes, ceiling 2 000 × 1 460), with its 1 350-byte packets
//! and the client's stream and connection receive windows of 6 and 15 MiB
//! (`sim::quic::chromium_2017` cites each in Chromium's source).
//!
//! **Workloads** (issue 29, `docs/workloads.md`): with `--workload SPEC --seed N --transfers
//! FILE` the sender runs a workload's schedule instead of full throttle (`bytes=N`, `poisson`,
//! `page`), and the receiver given `--transfers FILE` records every transfer. Transfers go
//! **on one connection**, each on a bidirectional stream of its own — QUIC's way, as HTTP/3
//! carries requests — so only the flow's first moment pays a handshake: the connection is set
//! up when the sender starts, on the schedule's clock (arrivals due while it connects start
//! once it is up). A transfer's stream carries the
//! header (`pantheon_workload::wire`) and the bytes; the receiver answers with one byte on it
//! when the last byte is in. A page's objects go over at most `parallel` streams at once, the
//! next object on a stream slot when the previous one is acknowledged.
//!
//! Encryption is real (TLS 1.3 inside QUIC) but authentication is not: the server presents a
//! fixed self-signed Ed25519 certificate and the sender accepts any certificate. This is a
//! traffic generator for congestion-control experiments, not a secure channel.
//!
//! The controllers, transport settings and TLS configuration are `sim::quic`'s: the
//! simulator (`pantheon run sim`) runs the same quinn-proto connection with the same settings
//! on its virtual clock.
//!
//! With `--capture`, the harness names two files in the environment: `SSLKEYLOGFILE` (the TLS
//! secrets, NSS key log lines) and `PANTHEON_QLOG` (the connection's qlog, JSON-SEQ:
//! quinn-proto's packet sent/received/lost and recovery-metrics events).

use std::net::{Ipv4Addr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result};
use clap::{Parser, ValueEnum};
use indigo_controller::models::Trained;
use pantheon_scheme_wrapper::transfers::{serve, Transport, WorkloadArgs};
use pantheon_scheme_wrapper::{Recorder, Side};
use quinn::Endpoint;
use sim::quic::{
    client_config, server_config, transport_config, Controller, Factory, Settings, SERVER_NAME,
};

mod l4s;

/// Command line, in Pantheon's wrapper shape.
#[derive(Parser)]
#[command(
    version,
    about = "QUIC bulk sender/receiver (quinn) for Pantheon-rs schemes"
)]
struct Cli {
    #[command(subcommand)]
    side: Side,
    /// Congestion controller: quinn's Cubic (its default), NewReno, or BBR (BBRv1); or Indigo,
    /// the learned controller (docs/indigo.md), with the model trained on calibrated emulators
    /// (`indigo`) or on the synthetic ones alone (`indigo-nocalib`).
    #[arg(long, value_enum, default_value = "cubic", global = true)]
    cc: Cc,
    /// With `--cc indigo`: the model file to run instead of the committed one (safetensors,
    /// `model.safetensors` of `pantheon train indigo --out DIR`).
    #[arg(long, global = true)]
    model: Option<std::path::PathBuf>,
    /// Largest UDP payload QUIC may send, bytes; default 1436 (fits the tunnel's 1464-byte IP
    /// MTU over IPv4), 1350 with `--cc cubic-chromium` (Chromium's). At least 1200 (QUIC's
    /// minimum).
    #[arg(long, global = true, value_parser = clap::value_parser!(u16).range(1200..))]
    max_udp_payload: Option<u16>,
    #[command(flatten)]
    workload: WorkloadArgs,
}

#[derive(Clone, Copy, ValueEnum)]
enum Cc {
    Cubic,
    /// Chromium 2017's Cubic (ported: `sim::quic::chromium_2017`), with its packet size and
    /// flow-control windows: the `quic` scheme, as Pantheon's proto-quic.
    CubicChromium,
    Newreno,
    Bbr,
    Indigo,
    IndigoNocalib,
    /// Prague (`sim::quic::prague`), L4S: ECT(1) on the wire, every packet acknowledged — the
    /// `quic_prague` scheme.
    Prague,
    /// NewReno that ignores CE marks (`sim::quic::ce_blind`): the `quic_ce_blind` scheme.
    CeBlind,
}

impl Cli {
    /// The controller of quinn-proto `--cc` names; `None` for Indigo's learned ones.
    fn quinn_controller(&self) -> Option<Controller> {
        match self.cc {
            Cc::Cubic => Some(Controller::Cubic),
            Cc::CubicChromium => Some(Controller::CubicChromium),
            Cc::Newreno => Some(Controller::NewReno),
            Cc::Bbr => Some(Controller::Bbr),
            Cc::Prague => Some(Controller::Prague),
            Cc::CeBlind => Some(Controller::CeBlind),
            Cc::Indigo | Cc::IndigoNocalib => None,
        }
    }

    /// The congestion controller's factory; for Indigo, the model loaded (the error names a
    /// model file that cannot be).
    fn factory(&self) -> Result<Factory> {
        if let Some(c) = self.quinn_controller() {
            if self.model.is_some() {
                anyhow::bail!("--model is for --cc indigo or indigo-nocalib");
            }
            return Ok(c.factory());
        }
        // Not one of quinn-proto's: Indigo's learned controller, with one of its models.
        let trained = match self.cc {
            Cc::IndigoNocalib => Trained::IndigoNocalib,
            _ => Trained::Indigo,
        };
        Ok(Arc::new(trained.factory(self.model.as_deref())?))
    }

    /// Packet size and flow-control windows: the controller's ([`Controller::settings`];
    /// Indigo's are the defaults), the packet size overridden by `--max-udp-payload`.
    fn settings(&self) -> Settings {
        let mut s = self
            .quinn_controller()
            .map_or_else(Settings::default, Controller::settings);
        if let Some(p) = self.max_udp_payload {
            s.max_udp_payload = p;
        }
        s
    }
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<()> {
    let cli = Cli::parse();
    match cli.side {
        Side::Receiver { port } => receive(&cli, port).await,
        Side::Sender { ip, port } => send(&cli, SocketAddr::from((ip, port))).await,
    }
}

/// The transport settings of `cc` and `settings` with a qlog stream into the file
/// `PANTHEON_QLOG` names ([`pantheon_scheme_wrapper::qlog_writer`]); `None` when it names none.
/// Errors if the file cannot be created.
fn qlogged(
    cc: Factory,
    settings: Settings,
    side: &str,
) -> Result<Option<Arc<quinn::TransportConfig>>> {
    let Some(writer) = pantheon_scheme_wrapper::qlog_writer()? else {
        return Ok(None);
    };
    let mut qlog = quinn::QlogConfig::default();
    qlog.writer(writer)
        .title(Some(format!("pantheon-quinn {side}")));
    let mut transport = transport_config(cc, settings);
    transport.qlog_stream(qlog.into_stream());
    Ok(Some(Arc::new(transport)))
}

async fn receive(cli: &Cli, port: u16) -> Result<()> {
    let cc = cli.factory()?;
    let mut config = server_config(cc.clone(), cli.settings())?;
    if let Some(t) = qlogged(cc, cli.settings(), "receiver")? {
        config.transport_config(t);
    }
    let addr = SocketAddr::from((Ipv4Addr::UNSPECIFIED, port));
    let endpoint = endpoint(addr, Some(config), cli.settings().l4s)?;
    eprintln!("pantheon-quinn: receiver listening on {addr}");
    let record = cli.workload.receiver_record()?;
    while let Some(incoming) = endpoint.accept().await {
        let record = record.clone();
        tokio::spawn(async move {
            let result = match record {
                Some(r) => serve_transfers(incoming, r).await,
                None => drain(incoming).await,
            };
            if let Err(e) = result {
                eprintln!("pantheon-quinn: receiver: {e:#}");
            }
        });
    }
    Ok(())
}

/// Accepts one connection and records the transfer on each of its bidirectional streams
/// (`pantheon_scheme_wrapper::transfers::serve`).
async fn serve_transfers(incoming: quinn::Incoming, record: Arc<Recorder>) -> Result<()> {
    let conn = incoming.await.context("handshake")?;
    let peer = conn.remote_address().to_string();
    loop {
        let (send, recv) = conn.accept_bi().await.context("accepting a stream")?;
        let (record, peer) = (Arc::clone(&record), peer.clone());
        tokio::spawn(async move {
            if let Err(e) = serve(tokio::io::join(recv, send), &record, &peer).await {
                eprintln!("pantheon-quinn: receiver: {e:#}");
            }
        });
    }
}

/// Accepts one connection and discards everything sent on its unidirectional streams.
async fn drain(incoming: quinn::Incoming) -> Result<()> {
    let conn = incoming.await.context("handshake")?;
    eprintln!(
        "pantheon-quinn: receiver: connection from {}",
        conn.remote_address()
    );
    loop {
        let mut stream = conn.accept_uni().await.context("accepting a stream")?;
        tokio::spawn(async move {
            while let Ok(Some(_)) = stream.read_chunk(usize::MAX, false).await {}
        });
    }
}

async fn send(cli: &Cli, server: SocketAddr) -> Result<()> {
    // The workload's clock starts before the handshake (arrivals due while connecting start
    // once connected), so that what the sender starts is what the schedule drew for the run.
    let workload = cli.workload.sender()?;
    let cc = cli.factory()?;
    let mut config = client_config(cc.clone(), cli.settings())?;
    if let Some(t) = qlogged(cc, cli.settings(), "sender")? {
        config.transport_config(t);
    }
    let mut endpoint = endpoint(
        SocketAddr::from((Ipv4Addr::UNSPECIFIED, 0)),
        None,
        cli.settings().l4s,
    )?;
    endpoint.set_default_client_config(config);
    // The receiver may still be starting: retry the handshake for a while, as Pantheon's
    // QUIC wrapper retried its client.
    let mut attempt = 0;
    let conn = loop {
        attempt += 1;
        match endpoint.connect(server, SERVER_NAME)?.await {
            Ok(conn) => break conn,
            Err(e) if attempt < 10 => {
                eprintln!("pantheon-quinn: sender: connecting to {server}: {e}; retrying");
                tokio::time::sleep(Duration::from_secs(1)).await;
            }
            Err(e) => return Err(e).with_context(|| format!("connecting to {server}")),
        }
    };
    eprintln!("pantheon-quinn: sender: connected to {server}");
    if let Some(w) = workload {
        return w.run(Quic(conn)).await;
    }
    let mut stream = conn.open_uni().await?;
    let chunk = vec![0u8; 1 << 16];
    loop {
        stream.write_all(&chunk).await.context("sending")?;
    }
}

/// A QUIC endpoint on a UDP socket bound to `addr`, a server with `server`'s configuration;
/// with `l4s`, L4S's I/O ([`l4s::endpoint`]). Errors if the address cannot be bound.
fn endpoint(addr: SocketAddr, server: Option<quinn::ServerConfig>, l4s: bool) -> Result<Endpoint> {
    if l4s {
        return l4s::endpoint(addr, server);
    }
    let socket = std::net::UdpSocket::bind(addr).with_context(|| format!("binding {addr}"))?;
    let runtime = Arc::new(quinn::TokioRuntime);
    Ok(Endpoint::new(
        quinn::EndpointConfig::default(),
        server,
        socket,
        runtime,
    )?)
}

/// The flow's one connection: each transfer on a bidirectional stream of its own, after the
/// connection's handshake.
struct Quic(quinn::Connection);

impl Transport for Quic {
    type Conn = tokio::io::Join<quinn::RecvStream, quinn::SendStream>;
    const REUSE: bool = false;
    const HANDSHAKE: bool = false;

    async fn open(&self) -> Result<Self::Conn> {
        let (send, recv) = self.0.open_bi().await.context("opening a stream")?;
        Ok(tokio::io::join(recv, send))
    }
}
