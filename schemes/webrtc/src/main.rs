//! `pantheon-webrtc`: the WebRTC media scheme — one synthetic video stream over a real WebRTC
//! stack, its rate set by that stack's congestion control.
//!
//! **Stack and controller.** [str0m](https://crates.io/crates/str0m) 0.24, a sans-IO WebRTC
//! implementation in Rust: ICE, DTLS-SRTP (pure-Rust crypto), RTP/RTCP, a pacer, and send-side
//! bandwidth estimation with transport-wide congestion control feedback (TWCC) — a port of
//! libWebRTC's Google Congestion Control (GoogCC: trendline delay-based estimator, loss-based
//! controller, probing, application-limited-region detector; Carlucci et al., "Analysis and
//! design of the Google congestion control for WebRTC", MMSys 2016). The sender feeds the
//! estimate to a synthetic encoder ([`encoder`]) that sizes 60-fps frames to it, never above
//! `--max-mbps`; str0m packetizes them as VP8 and paces them out.
//!
//! **What Pantheon's `webrtc` was** (reference `pantheon.md`, the scheme table): Chromium in
//! `Xvfb`, both sides opened from a node.js signalling page, the sender's camera replaced by a
//! 1080p60 `.y4m` file; Chromium of 2017 ran GoogCC with TWCC feedback and VP8, whose default
//! ceiling for a 1080p camera stream is 2.5 Mbit/s (libWebRTC's `GetMaxDefaultVideoBitrateKbps`)
//! — hence WebRTC's 1.95 Mbit/s on an 85 Mbit/s path in Pantheon's Brazil → Colombia report. The
//! descriptor (`schemes/webrtc.toml`) keeps that ceiling; `--max-mbps 0` removes it.
//!
//! **Wrapper convention** (reference `pantheon.md` §1.1): `pantheon-webrtc receiver PORT` runs
//! first and listens on TCP `PORT` for signalling; `pantheon-webrtc sender IP PORT` connects,
//! sends its SDP offer (one JSON line), reads the answer, and both sides meet over ICE on UDP
//! (host candidates: each side's address as the signalling connection sees it, the receiver's
//! UDP port = `PORT`). Media flows sender → receiver; the receiver sends RTCP (TWCC) back.

mod encoder;

use std::io::{BufRead, BufReader, ErrorKind, Write};
use std::net::{Ipv4Addr, SocketAddr, TcpListener, TcpStream, UdpSocket};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use clap::Parser;
use pantheon_scheme_wrapper::{fill_random, Side};
use str0m::bwe::{Bitrate, BweKind};
use str0m::change::{SdpAnswer, SdpOffer};
use str0m::media::{Direction, MediaKind, MediaTime, Mid};
use str0m::net::{Protocol, Receive};
use str0m::{Candidate, Event, IceConnectionState, Input, Output, Rtc};

use encoder::Encoder;

/// Command line, in Pantheon's wrapper shape, plus the encoder's settings.
#[derive(Parser)]
#[command(
    version,
    about = "WebRTC media (str0m, Google Congestion Control) sender/receiver for Pantheon-rs schemes"
)]
struct Cli {
    #[command(subcommand)]
    side: Side,
    /// Sender: the encoder's ceiling, Mbit/s (Chromium's default for 1080p is 2.5); 0 for none,
    /// so that the congestion controller alone sets the rate.
    #[arg(long, global = true, default_value_t = 2.5)]
    max_mbps: f64,
    /// Sender: frames per second of the synthetic video.
    #[arg(long, global = true, default_value_t = 60)]
    fps: u32,
    /// Sender: the controller's first estimate, kbit/s (Chromium starts at 300).
    #[arg(long, global = true, default_value_t = 300)]
    start_kbps: u64,
}

/// Largest datagram we read, bytes (the tunnel's packets are at most 1464 bytes).
const RECV_BUF: usize = 2048;

/// How often each side prints its state to stderr.
const STATUS_EVERY: Duration = Duration::from_secs(5);

fn main() -> Result<()> {
    let cli = Cli::parse();
    str0m::crypto::from_feature_flags().install_process_default();
    match cli.side {
        Side::Receiver { port } => receiver(port),
        Side::Sender { ip, port } => {
            if !(cli.max_mbps >= 0.0 && cli.max_mbps.is_finite()) {
                bail!("--max-mbps must be 0 or more, got {}", cli.max_mbps);
            }
            let max_bps = if cli.max_mbps == 0.0 {
                u64::MAX
            } else {
                (cli.max_mbps * 1e6) as u64
            };
            if cli.fps == 0 {
                bail!("--fps must be at least 1");
            }
            sender(ip, port, max_bps, cli.fps, cli.start_kbps * 1000)
        }
    }
}

fn receiver(port: u16) -> Result<()> {
    let listener = TcpListener::bind((Ipv4Addr::UNSPECIFIED, port))
        .with_context(|| format!("binding TCP port {port} for signalling"))?;
    eprintln!("pantheon-webrtc: receiver listening on TCP {port} for the sender's offer");
    let (stream, peer) = listener
        .accept()
        .context("accepting the signalling connection")?;
    // The address the sender reached us at is the one our host candidate must name.
    let local_ip = stream.local_addr()?.ip();
    let socket = UdpSocket::bind((local_ip, port))
        .with_context(|| format!("binding UDP {local_ip}:{port}"))?;
    let mut rtc = Rtc::builder().build(Instant::now());
    rtc.add_local_candidate(Candidate::host(socket.local_addr()?, "udp")?);
    let mut lines = Signalling::new(stream)?;
    let offer: SdpOffer = lines.read().context("reading the sender's offer")?;
    let answer = rtc
        .sdp_api()
        .accept_offer(offer)
        .context("accepting the offer")?;
    lines.write(&answer)?;
    eprintln!("pantheon-webrtc: receiver: answered {peer}");
    Session {
        rtc,
        socket,
        video: None,
        counters: Counters::default(),
    }
    .run()
}

fn sender(ip: Ipv4Addr, port: u16, max_bps: u64, fps: u32, start_bps: u64) -> Result<()> {
    let stream = connect_retrying(SocketAddr::from((ip, port)))?;
    let local_ip = stream.local_addr()?.ip();
    let socket =
        UdpSocket::bind((local_ip, 0)).with_context(|| format!("binding UDP {local_ip}"))?;
    let now = Instant::now();
    let mut rtc = Rtc::builder()
        .enable_bwe(Some(Bitrate::bps(start_bps)))
        .build(now);
    rtc.add_local_candidate(Candidate::host(socket.local_addr()?, "udp")?);
    let mut change = rtc.sdp_api();
    let mid = change.add_media(MediaKind::Video, Direction::SendOnly, None, None, None);
    let (offer, pending) = change.apply().context("str0m made no offer")?;
    let mut lines = Signalling::new(stream)?;
    lines.write(&offer)?;
    let answer: SdpAnswer = lines.read().context("reading the receiver's answer")?;
    rtc.sdp_api()
        .accept_answer(pending, answer)
        .context("accepting the answer")?;
    // `desired` is what the estimator probes toward: the encoder's ceiling.
    let desired = if max_bps == u64::MAX {
        Bitrate::gbps(10)
    } else {
        Bitrate::bps(max_bps)
    };
    rtc.bwe().set_desired_bitrate(desired);
    eprintln!(
        "pantheon-webrtc: sender: connected to {ip}:{port}, {fps} fps, ceiling {}",
        if max_bps == u64::MAX {
            "none".to_string()
        } else {
            format!("{:.2} Mbit/s", max_bps as f64 / 1e6)
        }
    );
    let video = Video {
        mid,
        encoder: Encoder::new(now, fps, start_bps, max_bps),
        payload: random_payload(),
        started: false,
    };
    Session {
        rtc,
        socket,
        video: Some(video),
        counters: Counters::default(),
    }
    .run()
}

/// Connects to the receiver's signalling port, retrying for 10 s while it is not listening yet.
fn connect_retrying(addr: SocketAddr) -> Result<TcpStream> {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        match TcpStream::connect(addr) {
            Ok(s) => return Ok(s),
            Err(e) if Instant::now() < deadline && e.kind() == ErrorKind::ConnectionRefused => {
                std::thread::sleep(Duration::from_millis(100));
            }
            Err(e) => {
                return Err(e).with_context(|| format!("connecting to {addr} for signalling"))
            }
        }
    }
}

/// The signalling channel: one JSON document a line, over TCP.
struct Signalling {
    reader: BufReader<TcpStream>,
    writer: TcpStream,
}

impl Signalling {
    fn new(stream: TcpStream) -> Result<Self> {
        stream.set_read_timeout(Some(Duration::from_secs(10)))?;
        Ok(Signalling {
            writer: stream.try_clone()?,
            reader: BufReader::new(stream),
        })
    }

    fn write(&mut self, value: &impl serde::Serialize) -> Result<()> {
        let mut line = serde_json::to_vec(value)?;
        line.push(b'\n');
        self.writer
            .write_all(&line)
            .context("sending on the signalling connection")
    }

    fn read<T: serde::de::DeserializeOwned>(&mut self) -> Result<T> {
        let mut line = String::new();
        if self.reader.read_line(&mut line)? == 0 {
            bail!("the signalling connection closed");
        }
        Ok(serde_json::from_str(&line)?)
    }
}

/// The sender's video track.
struct Video {
    mid: Mid,
    encoder: Encoder,
    /// Incompressible bytes that frames are cut from.
    payload: Vec<u8>,
    /// Whether the first frame went out (DTLS is up and the track has a payload type).
    started: bool,
}

/// What each side prints every [`STATUS_EVERY`].
#[derive(Default)]
struct Counters {
    frames: u64,
    dropped: u64,
    bytes: u64,
    estimate_bps: u64,
}

/// One peer: its `Rtc`, its UDP socket, and (on the sender) the video it sends.
struct Session {
    rtc: Rtc,
    socket: UdpSocket,
    video: Option<Video>,
    counters: Counters,
}

impl Session {
    /// str0m's run loop (its docs: mutate, then drain `poll_output` to a timeout), with the
    /// encoder's frame clock as a second deadline. Runs until killed or the peer disconnects.
    fn run(mut self) -> Result<()> {
        let local = self.socket.local_addr()?;
        let mut buf = vec![0u8; RECV_BUF];
        let mut connected = false;
        let mut next_status = Instant::now() + STATUS_EVERY;
        loop {
            let timeout = loop {
                match self.rtc.poll_output()? {
                    Output::Timeout(t) => break t,
                    Output::Transmit(t) => {
                        // A full socket buffer or an unreachable peer loses the packet, as
                        // the network would; the controller sees it as loss.
                        let _ = self.socket.send_to(&t.contents, t.destination);
                    }
                    Output::Event(e) => match e {
                        Event::Connected => connected = true,
                        Event::IceConnectionStateChange(IceConnectionState::Disconnected) => {
                            bail!("ICE disconnected: the peer is gone");
                        }
                        Event::EgressBitrateEstimate(BweKind::Twcc { estimate, .. }) => {
                            self.counters.estimate_bps = estimate.as_u64();
                            if let Some(v) = &mut self.video {
                                v.encoder.set_target(estimate.as_u64());
                            }
                        }
                        Event::MediaData(d) => self.counters.bytes += d.data.len() as u64,
                        _ => {}
                    },
                }
            };
            let now = Instant::now();
            if now >= next_status {
                self.status();
                next_status = now + STATUS_EVERY;
            }
            let mut deadline = timeout.min(next_status);
            if connected {
                if let Some(frame) = self.video.as_mut().and_then(|v| v.encoder.poll(now)) {
                    self.send_frame(frame);
                    continue;
                }
                if let Some(v) = &self.video {
                    deadline = deadline.min(v.encoder.next_due());
                }
            }
            let wait = deadline.saturating_duration_since(Instant::now());
            let input = if wait.is_zero() {
                Input::Timeout(Instant::now())
            } else {
                self.socket
                    .set_read_timeout(Some(wait.max(Duration::from_micros(100))))?;
                match self.socket.recv_from(&mut buf) {
                    Ok((n, source)) => Input::Receive(
                        Instant::now(),
                        Receive {
                            proto: Protocol::Udp,
                            source,
                            destination: local,
                            contents: buf[..n].try_into()?,
                        },
                    ),
                    Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
                        Input::Timeout(Instant::now())
                    }
                    Err(e) => return Err(e).context("receiving"),
                }
            };
            self.rtc.handle_input(input)?;
        }
    }

    /// Hands one frame to str0m's VP8 packetizer; a frame it refuses (its send buffer is full
    /// because the pacer is behind) is dropped, as an encoder drops frames.
    fn send_frame(&mut self, frame: encoder::Frame) {
        let Some(v) = &mut self.video else { return };
        let Some(writer) = self.rtc.writer(v.mid) else {
            return;
        };
        let Some(pt) = writer.payload_params().next().map(|p| p.pt()) else {
            return;
        };
        // Cut from a different place each frame, slice by slice, wrapping around (a frame may
        // be larger than the buffer when the ceiling is lifted).
        let mut at = (frame.rtp_ticks as usize * 7919) % v.payload.len();
        let mut data = Vec::with_capacity(frame.bytes);
        while data.len() < frame.bytes {
            let n = (frame.bytes - data.len()).min(v.payload.len() - at);
            data.extend_from_slice(&v.payload[at..at + n]);
            at = 0;
        }
        let len = data.len();
        let data: Arc<[u8]> = data.into();
        let rtp_time = MediaTime::new(frame.rtp_ticks, str0m::media::Frequency::NINETY_KHZ);
        match writer.write(pt, frame.captured, rtp_time, data) {
            Ok(()) => {
                self.counters.frames += 1;
                self.counters.bytes += len as u64;
                if !v.started {
                    v.started = true;
                    eprintln!("pantheon-webrtc: sender: media started");
                }
            }
            Err(_) => self.counters.dropped += 1,
        }
    }

    fn status(&self) {
        let c = &self.counters;
        if self.video.is_some() {
            eprintln!(
                "pantheon-webrtc: sender: estimate {:.2} Mbit/s, {} frames sent, {} dropped, {:.1} MB of media",
                c.estimate_bps as f64 / 1e6,
                c.frames,
                c.dropped,
                c.bytes as f64 / 1e6
            );
        } else {
            eprintln!(
                "pantheon-webrtc: receiver: {:.1} MB of media received",
                c.bytes as f64 / 1e6
            );
        }
    }
}

/// 1 MiB of incompressible bytes that frames are cut from.
fn random_payload() -> Vec<u8> {
    let mut buf = vec![0u8; 1 << 20];
    fill_random(&mut buf);
    buf
}
