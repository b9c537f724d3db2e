//! `pantheon-quinn`: the QUIC Cubic, QUIC NewReno and QUIC BBR schemes — one full-throttle bulk
//! flow over [quinn](https://docs.rs/quinn), a pure-Rust QUIC implementation.
//!
//! Pantheon's wrapper convention (reference `pantheon.md` §1.1): the receiver runs first as
//! `pantheon-quinn receiver PORT` (a QUIC server on `0.0.0.0:PORT`), then the sender as
//! `pantheon-quinn sender IP PORT` connects, opens one unidirectional stream and writes into it
//! until it is killed; the receiver reads and discards. `--cc cubic|newreno|bbr` picks quinn's
//! congestion controller (quinn's BBR is BBRv1 and marked experimental by quinn itself).
//!
//! Packets fit the Pantheon tunnel: QUIC's UDP payload is fixed at `--max-udp-payload` (default
//! 1436 bytes = the tunnel's 1464-byte IP MTU − 20 bytes IPv4 − 8 bytes UDP) and path-MTU
//! discovery is off, so no datagram is ever larger than the tunnel carries.
//!
//! **Workloads** (issue 29, `docs/workloads.md`): with `--workload SPEC --seed N --transfers
//! FILE` the sender runs a workload's schedule instead of full throttle (`bytes=N`, `poisson`,
//! `page`), and the receiver given `--transfers FILE` records every transfer. Transfers go
//! **on one connection**, each on a bidirectional stream of its own — QUIC's way, as HTTP/3
//! carries requests — so only the flow's first moment pays a handshake: the connection is set
//! up when the sender starts, before the schedule's clock. A transfer's stream carries the
//! header (`pantheon_workload::wire`) and the bytes; the receiver answers with one byte on it
//! when the last byte is in. A page's objects go over at most `parallel` streams at once, the
//! next object on a stream slot when the previous one is acknowledged.
//!
//! Encryption is real (TLS 1.3 inside QUIC) but authentication is not: the server presents a
//! fresh self-signed certificate and the sender accepts any certificate. This is a traffic
//! generator for congestion-control experiments, not a secure channel.

use std::net::{Ipv4Addr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result};
use clap::{Parser, ValueEnum};
use pantheon_scheme_wrapper::transfers::{serve, Transport, WorkloadArgs};
use pantheon_scheme_wrapper::{Recorder, Side};
use quinn::congestion::{BbrConfig, ControllerFactory, CubicConfig, NewRenoConfig};
use quinn::{Endpoint, TransportConfig, VarInt};

/// Command line, in Pantheon's wrapper shape.
#[derive(Parser)]
#[command(
    version,
    about = "QUIC bulk sender/receiver (quinn) for Pantheon-rs schemes"
)]
struct Cli {
    #[command(subcommand)]
    side: Side,
    /// Congestion controller: quinn's Cubic (its default), NewReno, or BBR (BBRv1).
    #[arg(long, value_enum, default_value = "cubic", global = true)]
    cc: Cc,
    /// Largest UDP payload QUIC may send, bytes; 1436 fits the tunnel's 1464-byte IP MTU over
    /// IPv4. At least 1200 (QUIC's minimum).
    #[arg(long, default_value_t = 1436, global = true, value_parser = clap::value_parser!(u16).range(1200..))]
    max_udp_payload: u16,
    #[command(flatten)]
    workload: WorkloadArgs,
}

#[derive(Clone, Copy, ValueEnum)]
enum Cc {
    Cubic,
    Newreno,
    Bbr,
}

/// Flow-control windows, bytes: large enough never to be the bottleneck (a 1 Gbit/s × 200 ms
/// path has a 25 MB BDP), so the congestion controller alone sets the rate.
const WINDOW: u32 = 64 << 20;

fn transport(cli: &Cli) -> TransportConfig {
    let mut t = TransportConfig::default();
    let factory: Arc<dyn ControllerFactory + Send + Sync> = match cli.cc {
        Cc::Cubic => Arc::new(CubicConfig::default()),
        Cc::Newreno => Arc::new(NewRenoConfig::default()),
        Cc::Bbr => Arc::new(BbrConfig::default()),
    };
    t.congestion_controller_factory(factory)
        .initial_mtu(cli.max_udp_payload)
        .min_mtu(1200.min(cli.max_udp_payload))
        .mtu_discovery_config(None)
        .stream_receive_window(VarInt::from_u32(WINDOW))
        .receive_window(VarInt::from_u32(WINDOW))
        .send_window(u64::from(WINDOW))
        .max_idle_timeout(Some(VarInt::from_u32(120_000).into()))
        .keep_alive_interval(Some(Duration::from_secs(5)))
        // A Poisson workload may have many transfers in flight, each on its own stream.
        .max_concurrent_bidi_streams(VarInt::from_u32(100_000));
    t
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<()> {
    let cli = Cli::parse();
    match cli.side {
        Side::Receiver { port } => receive(&cli, port).await,
        Side::Sender { ip, port } => send(&cli, SocketAddr::from((ip, port))).await,
    }
}

async fn receive(cli: &Cli, port: u16) -> Result<()> {
    let key = rcgen::generate_simple_self_signed(vec!["pantheon".to_owned()])?;
    let cert = key.cert.der().clone();
    let private = rustls::pki_types::PrivateKeyDer::Pkcs8(key.signing_key.serialize_der().into());
    let mut config = quinn::ServerConfig::with_single_cert(vec![cert], private)?;
    config.transport_config(Arc::new(transport(cli)));
    let addr = SocketAddr::from((Ipv4Addr::UNSPECIFIED, port));
    let endpoint = Endpoint::server(config, addr).with_context(|| format!("binding {addr}"))?;
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
    let crypto = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_protocol_versions(&[&rustls::version::TLS13])?
    .dangerous()
    .with_custom_certificate_verifier(Arc::new(AcceptAnyCertificate))
    .with_no_client_auth();
    let mut config = quinn::ClientConfig::new(Arc::new(
        quinn::crypto::rustls::QuicClientConfig::try_from(crypto)?,
    ));
    config.transport_config(Arc::new(transport(cli)));
    let mut endpoint = Endpoint::client(SocketAddr::from((Ipv4Addr::UNSPECIFIED, 0)))?;
    endpoint.set_default_client_config(config);
    // The receiver may still be starting: retry the handshake for a while, as Pantheon's
    // QUIC wrapper retried its client.
    let mut attempt = 0;
    let conn = loop {
        attempt += 1;
        match endpoint.connect(server, "pantheon")?.await {
            Ok(conn) => break conn,
            Err(e) if attempt < 10 => {
                eprintln!("pantheon-quinn: sender: connecting to {server}: {e}; retrying");
                tokio::time::sleep(Duration::from_secs(1)).await;
            }
            Err(e) => return Err(e).with_context(|| format!("connecting to {server}")),
        }
    };
    eprintln!("pantheon-quinn: sender: connected to {server}");
    if let Some(w) = cli.workload.sender()? {
        return w.run(Quic(conn)).await;
    }
    let mut stream = conn.open_uni().await?;
    let chunk = vec![0u8; 1 << 16];
    loop {
        stream.write_all(&chunk).await.context("sending")?;
    }
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

/// Accepts any server certificate: the flow needs QUIC's packets and congestion control, not
/// authentication (see the crate docs).
#[derive(Debug)]
struct AcceptAnyCertificate;

impl rustls::client::danger::ServerCertVerifier for AcceptAnyCertificate {
    fn verify_server_cert(
        &self,
        _end_entity: &rustls::pki_types::CertificateDer<'_>,
        _intermediates: &[rustls::pki_types::CertificateDer<'_>],
        _server_name: &rustls::pki_types::ServerName<'_>,
        _ocsp_response: &[u8],
        _now: rustls::pki_types::UnixTime,
    ) -> Result<rustls::client::danger::ServerCertVerified, rustls::Error> {
        Ok(rustls::client::danger::ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        _message: &[u8],
        _cert: &rustls::pki_types::CertificateDer<'_>,
        _dss: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        Ok(rustls::client::danger::HandshakeSignatureValid::assertion())
    }

    fn verify_tls13_signature(
        &self,
        _message: &[u8],
        _cert: &rustls::pki_types::CertificateDer<'_>,
        _dss: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        Ok(rustls::client::danger::HandshakeSignatureValid::assertion())
    }

    fn supported_verify_schemes(&self) -> Vec<rustls::SignatureScheme> {
        rustls::crypto::ring::default_provider()
            .signature_verification_algorithms
            .supported_schemes()
    }
}
