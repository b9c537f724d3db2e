//! The QUIC of the quic schemes, one definition for both clocks: the congestion controllers,
//! the transport settings and the TLS configuration that `pantheon-quinn` (schemes/quinn) runs
//! on real paths and the simulator runs on its virtual clock.
//!
//! `quinn` is an I/O shell around `quinn-proto`'s sans-IO [`quinn_proto::Connection`]; the
//! program builds its `quinn::TransportConfig` (the same type) with [`transport_config`], and
//! the simulator drives `quinn-proto` directly with the same settings.
//!
//! **Determinism.** Every packet size the simulator logs must follow from the seed alone. The
//! certificate and key are fixed (an Ed25519 key from a constant seed: Ed25519 signatures are
//! deterministic and always 64 bytes, where an ECDSA signature's DER length varies by a byte or
//! two from one handshake to the next), and the endpoints' random generators are seeded. TLS's
//! own randomness (its key shares, nonces) changes bytes, never lengths.

use std::sync::Arc;
use std::time::Duration;

use quinn_proto::congestion::{BbrConfig, ControllerFactory, CubicConfig, NewRenoConfig};
use quinn_proto::{AckFrequencyConfig, EcnCodepoint, TransportConfig, VarInt};

/// A factory of a flow's congestion controller, as quinn-proto's transport settings take it:
/// one of [`Controller`]'s or any other (`indigo`'s learned controller).
pub type Factory = Arc<dyn ControllerFactory + Send + Sync>;

/// A congestion controller of quinn-proto.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Controller {
    /// Cubic (RFC 9438), quinn's default: the `quic` scheme.
    Cubic,
    /// NewReno (RFC 9002 §7): `quic_newreno`.
    NewReno,
    /// BBR (BBRv1; quinn marks it experimental): `quic_bbr`.
    Bbr,
    /// Chromium's QUIC Cubic of 2017 (proto-quic 77961f1, the QUIC Pantheon ran in the seed
    /// reports' era), ported: [`chromium_2017::TcpCubicSenderBytes`] (two emulated
    /// connections, hybrid slow start, an initial window of 32 and a ceiling of 2 000 packets
    /// of 1 460 bytes): the `quic` scheme.
    CubicChromium,
    /// Prague ([`prague::Prague`], RFC 9331 §4.3's L4S controller, after Linux's TCP Prague):
    /// the `quic_prague` scheme, with [`Settings::l4s`].
    Prague,
    /// NewReno that ignores CE marks ([`ce_blind::CeBlind`]): `quic_ce_blind`, an ECN-capable
    /// flow that does not answer marks.
    CeBlind,
}

pub mod ce_blind;
pub mod chromium_2017;
pub mod prague;

impl Controller {
    /// Every controller of quinn-proto a scheme names.
    pub const ALL: [Controller; 6] = [
        Controller::Cubic,
        Controller::NewReno,
        Controller::Bbr,
        Controller::CubicChromium,
        Controller::Prague,
        Controller::CeBlind,
    ];

    /// `cubic`, `newreno`, `bbr`, `cubic_chromium`, `prague` or `ce_blind`: the name scheme descriptors'
    /// `[simulation]` uses (`pantheon-quinn --cc` spells `cubic_chromium` as `cubic-chromium`).
    pub fn name(self) -> &'static str {
        match self {
            Controller::Cubic => "cubic",
            Controller::NewReno => "newreno",
            Controller::Bbr => "bbr",
            Controller::CubicChromium => "cubic_chromium",
            Controller::Prague => "prague",
            Controller::CeBlind => "ce_blind",
        }
    }

    /// The controller named `name` (see [`Controller::name`]); `None` for any other name.
    pub fn from_name(name: &str) -> Option<Controller> {
        Controller::ALL.into_iter().find(|c| c.name() == name)
    }

    /// quinn-proto's factory of this controller, with its default configuration.
    pub fn factory(self) -> Factory {
        match self {
            Controller::Cubic => Arc::new(CubicConfig::default()),
            Controller::NewReno => Arc::new(NewRenoConfig::default()),
            Controller::Bbr => Arc::new(BbrConfig::default()),
            Controller::CubicChromium => Arc::new(chromium_2017::Config::default()),
            Controller::Prague => Arc::new(prague::PragueConfig::default()),
            Controller::CeBlind => Arc::new(ce_blind::CeBlindConfig::default()),
        }
    }

    /// The transport settings its scheme runs with: Chromium 2017's packet size and
    /// flow-control windows for [`Controller::CubicChromium`], L4S's ECT(1) and an ACK of every
    /// packet for [`Controller::Prague`], [`Settings::default`] for the others.
    pub fn settings(self) -> Settings {
        match self {
            Controller::CubicChromium => Settings {
                max_udp_payload: chromium_2017::UDP_PAYLOAD,
                stream_window: chromium_2017::STREAM_WINDOW,
                connection_window: chromium_2017::CONNECTION_WINDOW,
                l4s: false,
            },
            Controller::Prague => Settings {
                l4s: true,
                ..Settings::default()
            },
            _ => Settings::default(),
        }
    }
}

/// Largest UDP payload a quic scheme sends, bytes: the tunnel's 1464-byte inner IP MTU (1500 −
/// 36 bytes of tunnel overhead) − 20 (IPv4) − 8 (UDP).
pub const MAX_UDP_PAYLOAD: u16 = 1436;

/// Flow-control windows, bytes: large enough never to be the bottleneck (a 1 Gbit/s × 200 ms
/// path has a 25 MB BDP), so that the congestion controller alone sets the rate.
pub const WINDOW: u32 = 64 << 20;

/// The settings a quic scheme's endpoints share besides the controller.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Settings {
    /// QUIC's UDP payload, bytes: fixed (at least 1200, QUIC's minimum), path-MTU discovery off.
    pub max_udp_payload: u16,
    /// The flow-control receive window of each stream, bytes.
    pub stream_window: u32,
    /// The flow-control receive window of the connection, bytes (also the send window).
    pub connection_window: u32,
    /// L4S (RFC 9331): packets carry ECT(1) on the wire where quinn marks ECT(0) (both ends
    /// map the codepoint: [`l4s_on_wire`] when sending, [`l4s_from_wire`] when receiving), and
    /// each end asks its peer to acknowledge every packet (the ACK-frequency extension,
    /// threshold 0), so that an ACK frame's CE count is about the packet it acknowledges
    /// ([`prague`]). Both ends of a flow must agree.
    pub l4s: bool,
}

impl Default for Settings {
    /// [`MAX_UDP_PAYLOAD`] and flow control out of the way ([`WINDOW`]).
    fn default() -> Settings {
        Settings {
            max_udp_payload: MAX_UDP_PAYLOAD,
            stream_window: WINDOW,
            connection_window: WINDOW,
            l4s: false,
        }
    }
}

/// The ECN codepoint an L4S flow's datagram carries on the wire, for the one quinn gives it:
/// ECT(0) becomes ECT(1) (L4S's identifier, RFC 9331 §5.1); Not-ECT and CE stay. quinn-proto
/// (0.11) sends only ECT(0) and validates its peer's counts as ECT(0)'s, so the codepoint is
/// changed in the I/O, not in the connection.
pub fn l4s_on_wire(ecn: Option<EcnCodepoint>) -> Option<EcnCodepoint> {
    match ecn {
        Some(EcnCodepoint::Ect0) => Some(EcnCodepoint::Ect1),
        other => other,
    }
}

/// The codepoint an L4S flow's end hands quinn-proto for a received datagram: ECT(1) back to
/// ECT(0), which its ECN validation expects (it counts ECT(1) as corruption and would stop
/// using ECN); CE stays CE, so marks are counted and answered.
pub fn l4s_from_wire(ecn: Option<EcnCodepoint>) -> Option<EcnCodepoint> {
    match ecn {
        Some(EcnCodepoint::Ect1) => Some(EcnCodepoint::Ect0),
        other => other,
    }
}

/// The transport settings of every quic scheme: the congestion controller `cc`; QUIC's UDP
/// payload fixed at `settings.max_udp_payload` bytes (at least 1200, QUIC's minimum) with
/// path-MTU discovery off, so no datagram is larger than the tunnel carries; the flow-control
/// windows of `settings` (by default out of the way, [`WINDOW`]); idle timeout 120 s with
/// keep-alives every 5 s; up to 100 000 concurrent bidirectional streams (a Poisson workload may
/// have many transfers in flight); with `settings.l4s`, the peer asked to acknowledge every
/// packet.
pub fn transport_config(cc: Factory, settings: Settings) -> TransportConfig {
    let Settings {
        max_udp_payload,
        stream_window,
        connection_window,
        l4s,
    } = settings;
    let mut t = TransportConfig::default();
    t.congestion_controller_factory(cc)
        .initial_mtu(max_udp_payload)
        .min_mtu(1200.min(max_udp_payload))
        .mtu_discovery_config(None)
        .stream_receive_window(VarInt::from_u32(stream_window))
        .receive_window(VarInt::from_u32(connection_window))
        .send_window(u64::from(connection_window))
        .max_idle_timeout(Some(VarInt::from_u32(120_000).into()))
        .keep_alive_interval(Some(Duration::from_secs(5)))
        .max_concurrent_bidi_streams(VarInt::from_u32(100_000));
    if l4s {
        let mut each = AckFrequencyConfig::default();
        each.ack_eliciting_threshold(VarInt::from_u32(0));
        t.ack_frequency_config(Some(each));
    }
    t
}

/// The server's name in the simulated handshake.
pub const SERVER_NAME: &str = "pantheon";

/// The fixed Ed25519 key of the simulated server, as PKCS#8 v1 DER: the algorithm's prefix
/// (RFC 8410) and a 32-byte seed.
fn server_key_der() -> Vec<u8> {
    const PREFIX: [u8; 16] = [
        0x30, 0x2e, 0x02, 0x01, 0x00, 0x30, 0x05, 0x06, 0x03, 0x2b, 0x65, 0x70, 0x04, 0x22, 0x04,
        0x20,
    ];
    let mut der = PREFIX.to_vec();
    der.extend((0u8..32).map(|i| i.wrapping_mul(37).wrapping_add(11)));
    der
}

/// Why a QUIC configuration could not be made (a TLS library refusing its input).
#[derive(Debug, thiserror::Error)]
#[error("QUIC configuration: {0}")]
pub struct ConfigError(String);

fn config_error(e: impl std::fmt::Display) -> ConfigError {
    ConfigError(e.to_string())
}

/// The server side: a self-signed certificate for [`SERVER_NAME`] on the fixed Ed25519 key,
/// TLS 1.3, and [`transport_config`]; its TLS secrets go to the file `SSLKEYLOGFILE` names, if
/// any (NSS key log lines: `--capture` sets it for the scheme programs, so that Wireshark
/// decrypts the capture).
pub fn server_config(
    cc: Factory,
    settings: Settings,
) -> Result<quinn_proto::ServerConfig, ConfigError> {
    let der = rustls::pki_types::PrivateKeyDer::Pkcs8(server_key_der().into());
    let key = rcgen::KeyPair::try_from(&der).map_err(config_error)?;
    let cert = rcgen::CertificateParams::new(vec![SERVER_NAME.to_owned()])
        .and_then(|p| p.self_signed(&key))
        .map_err(config_error)?;
    let mut crypto = rustls::ServerConfig::builder_with_provider(provider())
        .with_protocol_versions(&[&rustls::version::TLS13])
        .map_err(config_error)?
        .with_no_client_auth()
        .with_single_cert(vec![cert.der().clone()], der)
        .map_err(config_error)?;
    crypto.key_log = Arc::new(rustls::KeyLogFile::new());
    let crypto =
        quinn_proto::crypto::rustls::QuicServerConfig::try_from(crypto).map_err(config_error)?;
    let mut config = quinn_proto::ServerConfig::with_crypto(Arc::new(crypto));
    config.transport_config(Arc::new(transport_config(cc, settings)));
    Ok(config)
}

/// The client side: TLS 1.3 accepting any server certificate (a traffic generator for
/// congestion control, not a secure channel), and [`transport_config`]; its TLS secrets go to
/// `SSLKEYLOGFILE`, as the server's.
pub fn client_config(
    cc: Factory,
    settings: Settings,
) -> Result<quinn_proto::ClientConfig, ConfigError> {
    let mut crypto = rustls::ClientConfig::builder_with_provider(provider())
        .with_protocol_versions(&[&rustls::version::TLS13])
        .map_err(config_error)?
        .dangerous()
        .with_custom_certificate_verifier(Arc::new(AcceptAnyCertificate))
        .with_no_client_auth();
    crypto.key_log = Arc::new(rustls::KeyLogFile::new());
    let crypto =
        quinn_proto::crypto::rustls::QuicClientConfig::try_from(crypto).map_err(config_error)?;
    let mut config = quinn_proto::ClientConfig::new(Arc::new(crypto));
    config.transport_config(Arc::new(transport_config(cc, settings)));
    Ok(config)
}

fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// Accepts any server certificate: the flow needs QUIC's packets and congestion control, not
/// authentication.
#[derive(Debug)]
pub struct AcceptAnyCertificate;

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

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Instant;

    #[test]
    fn chromium_cubic_has_chromiums_initial_window_and_settings() {
        let c = Controller::CubicChromium
            .factory()
            .build(Instant::now(), 1350);
        assert_eq!(c.window(), 32 * 1460);
        assert_eq!(c.initial_window(), 32 * 1460);
        assert_eq!(Controller::CubicChromium.settings().max_udp_payload, 1350);
        assert_eq!(Controller::CubicChromium.settings().stream_window, 6 << 20);
        assert_eq!(Controller::Cubic.settings(), Settings::default());
    }

    #[test]
    fn controllers_go_by_their_names() {
        for c in Controller::ALL {
            assert_eq!(Controller::from_name(c.name()), Some(c));
        }
        assert_eq!(Controller::from_name("vegas"), None);
    }

    #[test]
    fn both_sides_configure() {
        server_config(Controller::Cubic.factory(), Settings::default()).unwrap();
        client_config(Controller::Bbr.factory(), Settings::default()).unwrap();
        let c = Controller::CubicChromium;
        client_config(c.factory(), c.settings()).unwrap();
    }
}
